"""django-redis-pool's benchmarks: one command line, ``python -m benchmarks``.

From the repository's root, with the ``bench`` extra installed::

    .venv/bin/python -m benchmarks --help            # the subcommands, one line each
    .venv/bin/python -m benchmarks engine --help     # one's options
    .venv/bin/python -m benchmarks engine --quick    # a smoke run of it
    .venv/bin/python -m benchmarks report            # Markdown tables from the results

Each subcommand measures its cases side by side in one run, prints Markdown
tables and writes its numbers to ``benchmarks/results/<subcommand>.json``
(``results.py`` describes the format); ``report`` renders them again, with
the plots. The layout:

* ``__main__.py``: the command line;
* ``servers.py``: the Redis a benchmark runs against (a private redis-server
  or cluster, or one given by URL);
* ``cases.py``: the acquire + release cycles and rate-limit decisions several
  subcommands measure (ours, the peers, the WATCH/MULTI designs, the floor);
* ``workers.py``: worker processes, and our package at another git revision
  (``--before REF``);
* ``web.py``: a Django project served by uvicorn or gunicorn, loaded by wrk;
* ``results.py``: the JSON results and the Markdown helpers;
* ``suites/``: one module per subcommand;
* ``assets/``: the Django project served over HTTP and wrk's Lua script;
* ``results/``: the results of the full runs (``results/quick/``: of the
  ``--quick`` ones, not kept).
"""

from __future__ import annotations

import os
import sys

# A worker measuring our package at another revision (``workers.Revision``)
# imports ``django_redis_pool`` from that revision's worktree, and the
# benchmarks themselves (this package, already imported) from here.
_PACKAGE_FROM = os.environ.get("DRP_BENCH_PACKAGE_FROM")
if _PACKAGE_FROM and _PACKAGE_FROM not in sys.path:
    sys.path.insert(0, _PACKAGE_FROM)
