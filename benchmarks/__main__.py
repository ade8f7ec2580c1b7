"""``python -m benchmarks <subcommand> [options]``: see ``benchmarks/__init__.py``."""

from __future__ import annotations

import argparse
import shlex
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import suites

DESCRIPTION = """\
django-redis-pool's benchmarks. Each subcommand measures its cases side by
side, prints Markdown tables and writes its results as JSON to
benchmarks/results/<subcommand>.json (--quick: a smoke run, written to
benchmarks/results/quick/). `report` renders the results again (and the plots).
Run from the repository's root with the `bench` extra installed."""


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """One line per subcommand: their help in a column wide enough for the
    longest name (10 characters), and lines of at least 100 characters."""

    def __init__(self, prog: str) -> None:
        width = max(100, shutil.get_terminal_size().columns - 2)
        super().__init__(prog, max_help_position=20, width=width)
        self._action_max_length = 16


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="python -m benchmarks", description=DESCRIPTION, formatter_class=_Formatter
    )
    commands = top.add_subparsers(dest="command", metavar="SUBCOMMAND", required=True)
    for name in suites.SUBCOMMANDS:
        suite = suites.load(name)
        sub = commands.add_parser(
            suite.NAME,
            help=suite.HELP,
            description=suite.__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if suite.NAME != "report":
            sub.add_argument("--quick", action="store_true", help="a smoke run: small and short")
            sub.add_argument(
                "--out",
                type=Path,
                help="the JSON results' file (default benchmarks/results/<subcommand>.json; "
                "--quick: benchmarks/results/quick/<subcommand>.json)",
            )
        suite.add_arguments(sub)
        sub.set_defaults(suite=suite)
    return top


def serve(argv: list[str]) -> None:
    """``python -m benchmarks --worker KIND ARGS...``: a worker process (here, at
    the top, so that neither ``workers`` nor a suite imports the other back)."""
    kind, *args = argv
    if kind == "cases":
        from benchmarks import workers

        workers.serve_cases()
    elif kind == "cycles":  # CASE URL N: set up, warm up, N cycles (``redis-cost --client``)
        from benchmarks.suites import redis_cost

        redis_cost.client_worker(args[0], args[1], int(args[2]))
    elif kind == "async":  # URL CASE MODE CYCLES: one round of ``async``
        from benchmarks.suites import async_path

        async_path.worker(*args)
    else:
        raise SystemExit(f"unknown worker {kind!r}")


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:  # a worker process
        serve(argv[1:])
        return
    from benchmarks import results, servers

    args = parser().parse_args(argv)
    suite: Any = args.suite
    if suite.NAME == "report":
        suite.run(args)
        return
    environment = results.environment()
    started, clock = results.now(), time.perf_counter()
    outcome = suite.run(args)
    if outcome is None:  # nothing could be measured here (it said why)
        results.say(f"{suite.NAME}: nothing measured (see above), no results written")
        return
    if results.source_digest() != environment["source_digest"]:
        environment["warning"] = (
            "django_redis_pool's sources changed during the run: processes started at "
            "different times ran different code, so these results mix versions"
        )
    environment["servers"] = servers.USED
    if servers.SKIPPED:
        environment["servers_skipped"] = servers.SKIPPED
    doc = {
        "schema": results.SCHEMA,
        "benchmark": suite.NAME,
        "title": suite.HELP,
        "command": shlex.join(["python", "-m", "benchmarks", *argv]),
        "quick": args.quick,
        "started": started,
        "seconds": round(time.perf_counter() - clock, 1),
        "environment": environment,
        **outcome,
    }
    path = results.write(doc, args.out or results.default_path(suite.NAME, args.quick))
    print(suite.render(doc), flush=True)
    results.say(f"\nwrote {path}")


if __name__ == "__main__":
    main()
