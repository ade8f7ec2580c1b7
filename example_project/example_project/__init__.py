"""A minimal project showing django-redis-pool: one pool of printers."""
