"""``manage.py pool_*`` commands."""
