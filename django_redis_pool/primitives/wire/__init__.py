"""The wire: how every primitive's operations reach Redis.

An operation is a generator of steps (:mod:`.steps`), driven blocking or
awaiting by :mod:`.runner` on a primitive's :class:`.channel.Channel`; a named
operation runs as Lua (:mod:`.scripts`: a Redis 7 function library, else
EVALSHA), on the header and shared helpers of ``engine.lua`` beside this file,
with its arguments packed by :mod:`.packing`, its key names and tokens from
:mod:`.keys`, its replies named in :mod:`.protocol`, and the commands the Lua
runs checked against the client's ACL user (:mod:`.permissions`). Each family
of primitives declares its own operations (``OPERATIONS``, ``FAST``,
``HELPERS`` in its package, its Lua beside its Python); this one's Lua is the
shared header. This package imports nothing when it loads.
"""

#: The named operations of this family: none (``engine.lua`` holds what
#: every family's operations share).
OPERATIONS: tuple[str, ...] = ()
#: Operation -> the script of its common case (the EVALSHA path): none.
FAST: dict[str, str] = {}
#: The helper files of this family: ``engine.lua`` (the keys, the constants,
#: ``begin`` and the helpers every family shares).
HELPERS = ("engine",)
