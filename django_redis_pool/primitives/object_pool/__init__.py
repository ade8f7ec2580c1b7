"""The object pool: :class:`.pool.ObjectPool` (live objects of one process),
the callers waiting for one (:mod:`.waiters`) and the cap across processes
(:mod:`.global_limit`, a semaphore slot per live object). It runs no Lua of
its own. This package imports nothing when it loads.
"""
