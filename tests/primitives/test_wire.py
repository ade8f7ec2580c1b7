"""Every packed argument is built by its encoder in ``primitives/wire/packing.py``,
and a wait is sent one way (issue 50)."""

from __future__ import annotations

import re
from pathlib import Path

from django_redis_pool.primitives.clients.waits import FOREVER, Wait
from django_redis_pool.primitives.wire import packing

PACKAGE = Path(packing.__file__).resolve().parents[2]
#: What building a packed argument by hand looks like: the mode's head, or a
#: literal "|"-joined f-string of fields.
BY_HAND = re.compile(r"packed_mode\s*\+|\{[^}]*packed_mode\}|f\"[^\"]*\}\|\{[^\"]*\"|\"\|\"\.join")


def test_nothing_outside_wire_builds_a_packed_argument() -> None:
    found = [
        f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}"
        for path in PACKAGE.rglob("*.py")
        if path.name != "packing.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if BY_HAND.search(line)
    ]
    assert not found, "\n".join(found)


def test_each_encoder_names_the_lua_that_parses_it() -> None:
    source = Path(packing.__file__).read_text()
    for name in [*packing.ENCODERS, "ratelimit_decide"]:
        template = f"\n{name.upper()} = "  # (an encoder's template, where it has one)
        at = source.index(template if template in source else f"\ndef {name}(")
        comment = source[:at].rsplit("\n\n", 1)[-1]
        assert ".lua" in comment, f"{name}'s encoder names no Lua file"


def test_a_wait_is_sent_as_minus_one_zero_or_the_milliseconds_left() -> None:
    assert FOREVER.wire_ms() == -1 and Wait.of(None) is FOREVER
    assert Wait.of(0).wire_ms() == 0
    assert Wait.of(float("inf")) is FOREVER
    assert 1 <= Wait.of(5).wire_ms() <= 5000
    assert Wait.of(0.0001).wire_ms() in (0, 1)
    wait = Wait.of(3)
    assert Wait.of(wait) is wait, "a wait handed down is not checked again"
