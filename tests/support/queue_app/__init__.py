"""A test app whose ``tasks.py`` registers ``@task`` handlers (autodiscovered)."""
