"""The leased primitives: pools, semaphores, locks and allocators.

They share the lease protocol: :class:`.engine.LeaseEngine` (fair,
push-woken acquires, renewals, fenced releases, gc) on a channel, the
:class:`.lease.Lease` it grants, what it writes into Redis read back
(:mod:`.records`), releases retried in the background (:mod:`.releases`),
when a refused caller can expect its turn (:mod:`.turns`), and their common
base, :class:`.primitive.LeasedPrimitive` with its ``Hold``. Each primitive is
one module (:mod:`.pool`, :mod:`.semaphore`, :mod:`.lock`, :mod:`.allocator`);
their Lua is beside them. This package imports nothing when it loads.
"""

#: The family's named operations, each ``<op>.lua`` beside this file: the
#: lease engine's own, then those of one primitive (by its prefix).
OPERATIONS = (
    "acquire",
    "release",
    "renew",
    "wait",
    "withdraw",
    "gc",
    "read",
    "pool_associate",
    "pool_disassociate",
    "sem_set_max",
    "alloc_extend",
    "alloc_shrink",
    "alloc_malloc",
    "alloc_health",
    "alloc_bind",
    "alloc_gc",
    "alloc_read",
)
#: On the EVALSHA path: operation -> the script of its common case, run first.
FAST = {
    "acquire": "acquire_fast",
    "release": "release_fast",
    "renew": "renew_fast",
    "alloc_malloc": "alloc_malloc_fast",
}
#: The family's helper files, in the order their helpers are defined: the
#: leases', then the allocators'.
HELPERS = ("engine_lease", "engine_alloc")
