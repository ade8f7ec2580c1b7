"""The URLconfs of the Django tests, each with its views: ``tests.settings``'
``ROOT_URLCONF`` is :mod:`.admin_and_metrics`; a test module that needs views
of its own points ``@pytest.mark.urls`` at its URLconf here."""
