"""A Django app holding the recipes of ``docs/background-work.md`` that must
live in an installed app, read from the page: the Django Tasks task
(:mod:`.tasks`) and the management command (``rebuild_index``). Tests that run
them add it to ``INSTALLED_APPS``."""
