"""Management commands of django-redis-pool."""
