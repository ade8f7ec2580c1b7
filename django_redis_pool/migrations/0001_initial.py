"""The unmanaged ``Dashboard`` model: creates no table, only its permissions."""

from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies: list[tuple[str, str]] = []

    operations = [
        migrations.CreateModel(
            name="Dashboard",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
            ],
            options={
                "verbose_name": "dashboard",
                "verbose_name_plural": "dashboard",
                "managed": False,
                "default_permissions": ("view", "change"),
            },
        ),
    ]
