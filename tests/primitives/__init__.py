"""The primitives on bare Redis clients, no Django: pool, semaphore (and weighted
permits), lock, allocator, object pool, task queue, rate limiter, the lease
engine under them, their asyncio twins, operator APIs and call counts."""
