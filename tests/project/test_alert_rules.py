"""The alerting rules of docs/metrics.md, run by Prometheus's own
``promtool test rules`` (Debian's ``prometheus`` package; ``scripts/dev.py
test`` installs it and passes its path as ``PROMTOOL``): they fire when a
pool turns callers away, not when a rate limit does its job, and give the
same value whether Prometheus scrapes one process or several that export the
same site-wide totals."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


def promtool() -> str:
    found = os.environ.get("PROMTOOL") or shutil.which("promtool")
    assert found, "promtool is missing: scripts/dev.py test installs it (Debian's prometheus)"
    return found


def documented_rules() -> str:
    section = DOCS.read_text().split("## Alerting rules", 1)[1]
    return re.search(r"```yaml\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]


def series(instances: int, labels: str, values: str) -> str:
    return "".join(
        f"      - series: 'django_redis_pool_refused_total{{{labels},instance=\"p{i}\"}}'\n"
        f"        values: '{values}'\n"
        for i in range(instances)
    )


def case(instances: int) -> str:
    """A pool refusing 1 caller/s and a rate limit refusing 10/s, exported by
    ``instances`` processes alike."""
    refusing = series(instances, 'name="printers",kind="pool",reason="full"', "0+60x30")
    limiting = series(instances, 'name="api",kind="ratelimit",reason="limited"', "0+600x30")
    return f"""  - interval: 1m
    input_series:
{refusing}{limiting}    alert_rule_test:
      - eval_time: 20m
        alertname: PoolExhausted
        exp_alerts:
          - exp_labels: {{name: printers, kind: pool}}
            exp_annotations: {{summary: "printers refuses 1 callers/s"}}
"""


@pytest.mark.parametrize("instances", [1, 3])
def test_the_documented_rules_fire_for_a_pool_once_whatever_the_processes_scraped(
    tmp_path: Path, instances: int
) -> None:
    (tmp_path / "rules.yml").write_text(documented_rules())
    check = subprocess.run(
        [promtool(), "check", "rules", str(tmp_path / "rules.yml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    tests = "rule_files: [rules.yml]\nevaluation_interval: 1m\ntests:\n" + case(instances)
    (tmp_path / "tests.yml").write_text(tests)
    run = subprocess.run(
        [promtool(), "test", "rules", "tests.yml"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
