"""The rate limiter: :class:`.limiter.RateLimiter` (GCRA per limited key on
the Redis clock), its ``Decision`` and ``KeyState``. Its Lua is beside it.
This package imports nothing when it loads.
"""

#: The family's named operations, each ``<op>.lua`` beside this file.
OPERATIONS = ("ratelimit_decide", "ratelimit_refund", "ratelimit_read", "ratelimit_reset")
#: On the EVALSHA path: operation -> the script of its common case: none.
FAST: dict[str, str] = {}
#: The family's helper files: none (its operations use ``engine.lua``'s).
HELPERS: tuple[str, ...] = ()
