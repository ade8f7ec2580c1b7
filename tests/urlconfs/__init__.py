"""The URLconfs (and their views) of the Django tests, one per test module or
topic; ``tests.settings`` points ``ROOT_URLCONF`` at :mod:`.urls`."""
