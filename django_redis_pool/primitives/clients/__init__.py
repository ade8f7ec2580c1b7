"""What the primitives need of their Redis clients: time and connections.

Deadlines that bound every Redis call made inside them (:mod:`.deadlines`),
a thread's own waiting time (:mod:`.stopwatch`), a validated wait
(:mod:`.waits`), the connections that keep deadlines (:mod:`.connections`)
and the ``redis.asyncio`` twin of a blocking client (:mod:`.async_clients`).
This package imports nothing when it loads.
"""
