"""Worker of ``bench_engine.py --before REF``: our primitives from another revision.

Started with ``PYTHONPATH`` = a worktree of REF, then ``benchmarks/``, so that
``django_redis_pool`` is REF's and the cases are today's. It prints
``{"package": <path>}``, then for every ``<case> <cycles>`` line on stdin sets the
case up afresh (on the server the benchmark started), warms it up, measures
``cycles`` cycles and prints the round as JSON.
"""

from __future__ import annotations

import json
import sys

import engine_cases as cases
import redis

import django_redis_pool
from django_redis_pool import ResourcePool


def main() -> None:
    url = sys.argv[1]
    client, dclient = redis.Redis.from_url(url), redis.Redis.from_url(url, decode_responses=True)
    print(json.dumps({"package": django_redis_pool.__file__}), flush=True)
    for line in sys.stdin:
        case, cycles = line.split()
        client.flushall()
        if case == "pool":  # one resource per associate call (older engines take one)
            pool = ResourcePool(client, "single", lease_timeout=cases.LEASE)
            for resource in cases.resource_ids(cases.POOL_SIZE):
                pool.associate(resource)
        else:
            cases.setup(case, client, dclient, "single")
        cycle = cases.cycle(case, client, dclient, "single", "main")
        for _ in range(cases.WARMUP):
            cycle()
        row, _ = cases.measure(case, client, cycle, int(cycles))
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
