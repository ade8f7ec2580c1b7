"""The kinds of primitive the Django layer knows, one module each, and where
to find them.

Each kind module holds what one kind is to Django (its options, builder,
request hold, and what the management commands read and change) as a
:class:`~.contract.Kind` named ``KIND``, plus its typed accessor
(``get_pool``). :mod:`.builtin` lists them; :func:`all_kinds` imports it on
first use, so that importing this package needs no configured settings and
the settings reader (which every kind module uses) can be loaded first. What
the admin shows and does for a kind is the dashboard's
(:mod:`django_redis_pool.dashboard`), registered by the app config.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from .contract import Ask, Held, Kind, Option, Report

__all__ = [
    "Ask",
    "Held",
    "Kind",
    "Option",
    "Report",
    "all_kinds",
    "by_name",
    "by_setting_key",
    "example_key",
    "plurals",
]

_loaded: tuple[Kind[Any], ...] | None = None


def all_kinds() -> tuple[Kind[Any], ...]:
    """Every kind, in the order settings and pages list them (imports their
    modules once)."""
    global _loaded
    if _loaded is None:
        # Up a layer, on purpose: the kind modules use the settings reader,
        # which reads every kind's options.
        from .builtin import KINDS

        _loaded = KINDS
    return _loaded


def by_name() -> Mapping[str, Kind[Any]]:
    """Every kind by its name ("pool"): looked up on every request."""
    return _index(all_kinds())[0]


def by_setting_key() -> Mapping[str, Kind[Any]]:
    """Every kind by the key of its mapping in the setting ("POOLS")."""
    return _index(all_kinds())[1]


@functools.lru_cache(maxsize=4)
def _index(
    loaded: tuple[Kind[Any], ...],
) -> tuple[Mapping[str, Kind[Any]], Mapping[str, Kind[Any]]]:
    return {k.name: k for k in loaded}, {k.setting_key: k for k in loaded}


def example_key() -> str:
    """The setting key of the first kind, for examples in messages."""
    return all_kinds()[0].setting_key


def plurals() -> str:
    """Every kind for messages: "pools, semaphores or locks"."""
    names = [kind.plural for kind in all_kinds()]
    return ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else "".join(names)
