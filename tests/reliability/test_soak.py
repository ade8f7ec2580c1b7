"""A short chaos soak (``tests/support/soak.py``) in every test run: workers SIGKILLed,
Redis restarted from its AOF and then with its data lost, and flushed under the
workers' feet: zero violations."""

from __future__ import annotations

import os

import pytest

from django_redis_pool.testing import find_redis_binary
from tests.support import soak


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the soak forks its workers")
def test_a_short_chaos_soak_breaks_no_guarantee() -> None:
    binary = os.environ.get("DJANGO_REDIS_POOL_REDIS_SERVER") or find_redis_binary("redis-server")
    report = soak.run(seconds=12, workers=4, binary=binary, seed=1)
    assert report.violations == [], report.violations[:10]
    assert report.kills >= 3 and report.restarts == 2 and report.flushes == 2
    # Holds were granted after every disruption, so the checks covered each one
    # (how many depends on how busy the machine is: not a measure of speed).
    assert len(report.grants_after) == 4, report.as_dict()
    assert all(report.grants_after.values()), report.as_dict()


def test_the_soak_checker_ends_a_hold_killed_mid_release_when_its_release_began(tmp_path) -> None:
    # w0 sends its release at 1.0 and is killed (at 1.3) before it logs the
    # answer; the release freed r2 and w1, waiting for it, got it at 1.1.
    w0, w1 = tmp_path / "worker-0.log", tmp_path / "worker-1.log"
    w0.write_text(
        '{"e": "got", "k": "pool", "r": "r2", "f": 1, "s": 0.0, "t": 0.5}\n'
        '{"e": "ending", "k": "pool", "f": 1, "t": 1.0}\n'
    )
    w1.write_text(
        '{"e": "got", "k": "pool", "r": "r2", "f": 2, "s": 0.6, "t": 1.1}\n'
        '{"e": "ending", "k": "pool", "f": 2, "t": 1.2}\n'
        '{"e": "end", "k": "pool", "r": "r2", "f": 2, "lost": false}\n'
    )
    report = soak.Report()
    holds = soak.read_holds([w0, w1], {"worker-0.log": 1.3}, report)
    assert [(h.fence, h.end, h.how) for h in holds] == [
        (1, 1.0, "killed while releasing"),
        (2, 1.2, "released"),
    ]
    soak.check(holds, report)
    assert report.violations == []
    # Killed before its release was sent, it held r2 until its death: an overlap.
    w0.write_text('{"e": "got", "k": "pool", "r": "r2", "f": 1, "s": 0.0, "t": 0.5}\n')
    report = soak.Report()
    soak.check(soak.read_holds([w0, w1], {"worker-0.log": 1.3}, report), report)
    assert len(report.violations) == 1 and "(killed)" in report.violations[0]
