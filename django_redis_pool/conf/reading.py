"""Reading the ``DJANGO_REDIS_POOL`` setting: one pass that validates the whole
setting and, when it is valid, builds its :class:`~.schema.Config`.

:func:`setting_report` is the only place a setting is validated. It reads no Django
settings: it validates the values it is given, with the kinds it is given.
The registry (:func:`..registry.settings_report`) reads Django's settings and
passes them in with its list of kinds; it builds from the config or raises
``ImproperlyConfigured`` with the errors, and the system checks
(:mod:`..checks`) turn the findings into check messages. Each value is checked
by the validator its primitive uses (:mod:`..primitives.validators`, and each
kind's :attr:`~..kinds.Kind.options`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..kinds.contract import Kind, OptionError, validate_bool
from ..primitives.validators import (
    DEFAULT,
    check_duration,
    check_lease_timeout,
    check_name,
    check_permits,
    check_timeout,
)
from .connection import read_connection
from .schema import (
    AUTH_MIDDLEWARE_PATH,
    DEFAULT_CONNECTION,
    DEFAULT_KEY_PREFIX,
    DEFAULT_LONG_HOLD,
    DEFAULT_METRICS_DEADLINE,
    DEFAULT_REQUEST_LEASE,
    MIDDLEWARE_PATH,
    RULE_KEYS,
    SETTING_NAME,
    Config,
    Entry,
    Finding,
    Findings,
    Rule,
    SettingReport,
    check_retry_after,
    check_status,
    did_you_mean,
    holdable_names,
    import_callable,
    setting_path,
    top_level_keys,
)

__all__ = [
    "entry_options",
    "failed_report",
    "parse_rule",
    "permits_problem",
    "setting_report",
    "valid_config",
]


def setting_report(
    raw: Any,
    kinds: Sequence[Kind],
    *,
    caches: Any,
    middleware: Any = None,
    proxied: Sequence[str] = (),
) -> SettingReport:
    """The report on the setting value ``raw``: every finding of validating it
    with ``kinds`` (one mapping of the setting each, in the order messages list
    them), given the ``CACHES`` setting, and its config if it is valid. With ``middleware``
    (``settings.MIDDLEWARE``), also whether the ``MIDDLEWARE`` rules and
    ``ResourceMiddleware`` go together (W002, W007, W008); ``proxied``: the
    :data:`~.schema.PROXY_SETTINGS` that are set (W009). Never raises: an
    unexpected failure is the finding E099."""
    found = Findings()
    try:
        config = _draft_config(raw, tuple(kinds), caches, found, tuple(proxied))
        if middleware is not None:
            _read_installed_middleware(raw, middleware, found)
    except Exception as exc:  # a check must report, never crash `manage.py check`
        return failed_report(exc)
    return SettingReport(None if found.serious else config, tuple(found))


def failed_report(exc: Exception) -> SettingReport:
    """The report on a setting that could not be read: ``exc`` as E099."""
    return SettingReport(None, (_failure(exc),))


def _failure(exc: Exception) -> Finding:
    """E099: reading the setting failed unexpectedly with ``exc``."""
    return Finding(
        "E099",
        f"Checking {SETTING_NAME} failed unexpectedly: {exc!r}",
        f"Make {SETTING_NAME} a plain dict of plain values as documented.",
    )


def valid_config(raw: Any, kinds: Sequence[Kind], caches: Any) -> Config:
    """The :class:`~.schema.Config` of the valid setting value ``raw``, read
    with ``kinds`` (``caches``: the ``CACHES`` setting). Raises ``ValueError``
    with the errors of an invalid one (where :func:`setting_report` reports them)."""
    report = setting_report(raw, kinds, caches=caches)
    if report.config is None:
        raise ValueError("\n".join(map(str, report.errors)))
    return report.config


def _draft_config(
    raw: Any, kinds: tuple[Kind, ...], caches: Any, found: Findings, proxied: tuple[str, ...]
) -> Config | None:
    """Record every problem of ``raw`` in ``found``; the config (a draft while
    ``found`` holds an error), or None when ``raw`` is not even a dict."""
    if not isinstance(raw, dict):
        found.add(
            "E001",
            f"{SETTING_NAME} must be a dict, got {type(raw).__name__}.",
            f'Set {SETTING_NAME} = {{"CONNECTION": {{"URL": "redis://..."}}, '
            f'"{kinds[0].setting_key if kinds else "..."}": {{...}}}}.',
            SETTING_NAME,
        )
        return None
    known = top_level_keys(kinds)
    for key in raw:
        if key not in known:
            found.add(
                "E002",
                f"{setting_path(key)} is not a known key.",
                f"{did_you_mean(key, known)}Known keys: {', '.join(known)}.",
                setting_path(key),
            )
    if "CONNECTION" in raw:
        read_connection(raw["CONNECTION"], caches, found)
    key_prefix = raw.get("KEY_PREFIX", DEFAULT_KEY_PREFIX)
    if "KEY_PREFIX" in raw:
        try:
            key_prefix = check_name(key_prefix, setting_path("KEY_PREFIX"))
        except ValueError as exc:
            found.add(
                "E012",
                f"{exc}.",
                f'Use a short str without braces or whitespace, e.g. "{DEFAULT_KEY_PREFIX}" '
                "(the default), or remove the key.",
                setting_path("KEY_PREFIX"),
            )
    entries, usable = _read_kinds(raw, kinds, found, proxied)
    rules = _read_rules(raw, usable, found, entries, kinds)
    _read_request_options(raw, found)
    return Config(
        connection=raw.get("CONNECTION", DEFAULT_CONNECTION),
        key_prefix=key_prefix,
        entries=entries,
        middleware=rules,
        unavailable_view=raw.get("UNAVAILABLE_VIEW"),
        fail_open=raw.get("FAIL_OPEN", False),
        request_lease=raw.get("REQUEST_LEASE", DEFAULT_REQUEST_LEASE),
        long_hold=raw.get("LONG_HOLD", DEFAULT_LONG_HOLD),
        metrics_deadline=raw.get("METRICS_DEADLINE", DEFAULT_METRICS_DEADLINE),
    )


# --------------------------------------------------------------- kinds, entries


def _read_kinds(
    raw: dict[str, Any], kinds: tuple[Kind, ...], found: Findings, proxied: tuple[str, ...]
) -> tuple[dict[str, Entry], dict[str, Kind]]:
    """Read every kind's mapping: the valid entries by name, and the kind of
    every well-named entry (what a rule may name, even if the entry's options
    are wrong: their own finding says so)."""
    entries: dict[str, Entry] = {}
    kinds_of_name: dict[str, list[Kind]] = {}
    for kind in kinds:
        if kind.setting_key not in raw:
            continue
        path = setting_path(kind.setting_key)
        mapping = raw[kind.setting_key]
        if not isinstance(mapping, dict):
            found.add(
                "E013",
                f"{path} must be a dict of name -> options, got {type(mapping).__name__}.",
                f'Use e.g. {path} = {{"my-{kind.name.replace("_", "-")}": {{...}}}}, '
                "or remove the key.",
                path,
            )
            continue
        for name, entry in mapping.items():
            try:
                check_name(name, f"{path} entry name")
            except ValueError as exc:
                found.add(
                    "E014",
                    f"{exc}.",
                    "Rename the entry: a name is a non-empty str of at most 200 characters "
                    "without braces or whitespace.",
                    path,
                )
                continue
            kinds_of_name.setdefault(name, []).append(kind)
            if not isinstance(entry, dict):
                found.add(
                    "E015",
                    f"{setting_path(kind.setting_key, name)} must be a dict of options, "
                    f"got {entry!r}.",
                    "Use a dict such as {} (all defaults)"
                    + (f" with the keys {', '.join(kind.options)}." if kind.options else "."),
                    setting_path(kind.setting_key, name),
                )
                continue
            options = _read_entry(kind, name, entry, found, proxied)
            if options is not None:
                entries.setdefault(name, Entry(kind, name, options))
    for name, owners in kinds_of_name.items():
        if len(owners) > 1:
            paths = [setting_path(k.setting_key, name) for k in owners]
            found.add(
                "E016",
                f"The name {name!r} is used by {' and '.join(paths)}; a name must be unique "
                "across all kinds.",
                "Rename all but one of them.",
                paths[0],
            )
    usable = {name: owners[0] for name, owners in kinds_of_name.items()}
    return entries, usable


def _read_entry(
    kind: Kind, name: str, entry: Mapping[Any, Any], found: Findings, proxied: tuple[str, ...]
) -> dict[str, Any] | None:
    """The options of one entry, validated and with defaults filled in; None
    when one is wrong (recorded in ``found``)."""
    path = setting_path(kind.setting_key, name)
    before = len(found)
    options = {key: option.default for key, option in kind.options.items()}
    for key, value in entry.items():
        option = kind.options.get(key)
        if option is None:
            found.add(
                "E017",
                f"{setting_path(kind.setting_key, name, key)} is not a known option of a "
                f"{kind.label}.",
                f"{did_you_mean(key, kind.options)}Known options: {', '.join(kind.options)}.",
                setting_path(kind.setting_key, name, key),
            )
            continue
        try:
            options[key] = option.validate(value, setting_path(kind.setting_key, name, key))
        except OptionError as exc:  # its own id, and maybe its own hint
            option_path = setting_path(kind.setting_key, name, key)
            found.add(exc.id, f"{exc}.", exc.hint or option.hint, option_path)
        except ValueError as exc:
            found.add("E018", f"{exc}.", option.hint, setting_path(kind.setting_key, name, key))
    for key in kind.required:
        if key not in entry:
            found.add(
                "E024",
                f"{path} has no {key}, which {kind.a_label} needs.",
                f"Add {key}: {kind.options[key].hint}",
                setting_path(kind.setting_key, name, key),
            )
    if len(found) > before:
        return None
    try:  # every option valid: how they go together
        kind.check_entry(options, path)
    except OptionError as exc:
        found.add(exc.id, f"{exc}.", exc.hint or "Make the options agree.", path)
        return None
    except ValueError as exc:
        found.add("E018", f"{exc}.", "Make the options agree.", path)
        return None
    for message, hint, *own_id in kind.entry_warnings(name, options, proxied=proxied):
        if own_id:  # an EntryWarning of its own id
            found.add(own_id[0], message, hint, path)
        else:
            found.add("W006", message, hint, path)
    return options


def entry_options(kind: Kind, name: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    """Every option of ``kind`` for one entry, validated and with defaults filled in.

    Raises ``ValueError`` for an invalid value (unknown keys are left to :func:`setting_report`).
    """
    options = {}
    for key, option in kind.options.items():
        if key in entry:
            options[key] = option.validate(entry[key], setting_path(kind.setting_key, name, key))
        else:
            options[key] = option.default
    return options


# ----------------------------------------------------------------- requests


def _read_rules(
    raw: dict[str, Any],
    usable: Mapping[str, Kind],
    found: Findings,
    entries: Mapping[str, Entry],
    kinds: tuple[Kind, ...],
) -> tuple[Rule, ...]:
    """The ``MIDDLEWARE`` rules; ``usable`` maps each configured name a rule
    may name to its kind, ``entries`` the valid entries by name."""
    if "MIDDLEWARE" not in raw:
        return ()
    rules = raw["MIDDLEWARE"]
    path = setting_path("MIDDLEWARE")
    if not isinstance(rules, (list, tuple)):
        found.add(
            "E019",
            f"{path} must be a list of rules, got {type(rules).__name__}.",
            f'Use {path} = [{{"PATH": r"^/print/", "RESOURCE": "printers"}}] or remove the key.',
            path,
        )
        return ()
    parsed = []
    for index, rule in enumerate(rules):
        try:
            parsed.append(parse_rule(rule, index, usable, entries, kinds=kinds))
        except OptionError as exc:
            found.add(exc.id, f"{exc}.", exc.hint or "", setting_path("MIDDLEWARE", index))
        except ValueError as exc:
            found.add(
                "E020",
                f"{exc}.",
                'A rule is {"PATH": r"^/print/", "RESOURCE": "<configured name>"} plus '
                'optional "METHODS": ["POST"], "TIMEOUT": 5, "LEASE_TIMEOUT", "IDENTITY" '
                '(dotted path of a function of the request), "STATUS", "RETRY_AFTER", "PERMITS".',
                setting_path("MIDDLEWARE", index),
            )
    return tuple(parsed)


def parse_rule(
    raw: Any,
    index: int,
    names: Mapping[str, Kind],
    entries: Mapping[str, Entry] | None = None,
    *,
    kinds: Sequence[Kind] = (),
) -> Rule:
    """Validate rule ``index`` of ``MIDDLEWARE``; ``names`` maps each configured
    primitive that a rule may name to its kind, ``entries`` the valid entries
    by name (for the most ``PERMITS`` a hold of one can take), ``kinds``
    every kind (to name those whose holds take permits). Raises
    ``ValueError`` naming the setting (an :class:`OptionError` for
    ``PERMITS``: E038, E039)."""
    path = setting_path("MIDDLEWARE", index)
    if not isinstance(raw, dict):
        raise ValueError(f"{path} must be a dict with PATH and RESOURCE, got {raw!r}")
    unknown = [key for key in raw if key not in RULE_KEYS]
    if unknown:
        raise ValueError(f"{path} has unknown keys {unknown!r} (known: {', '.join(RULE_KEYS)})")
    for key in ("PATH", "RESOURCE"):
        if key not in raw:
            raise ValueError(f"{path} has no {key}")
    try:
        pattern = re.compile(raw["PATH"])
    except (re.error, TypeError) as exc:
        raise ValueError(
            f'{path}["PATH"] = {raw["PATH"]!r} is not a regular expression: {exc}'
        ) from exc
    resource = raw["RESOURCE"]
    if not isinstance(resource, str) or resource not in names:
        raise ValueError(
            f'{path}["RESOURCE"] = {resource!r} is not a configured name (configured: '
            f"{', '.join(map(repr, sorted(names))) or 'none'})"
        )
    kind = names[resource]
    if not kind.holds_requests:
        holdable = holdable_names(names)
        raise ValueError(
            f'{path}["RESOURCE"] = {resource!r} is {kind.a_label}, which a request cannot '
            f"hold (names a request can hold: {', '.join(map(repr, holdable)) or 'none'})"
        )
    methods = raw.get("METHODS")
    if methods is not None:
        if (
            isinstance(methods, str)
            or not isinstance(methods, (list, tuple))
            or not all(isinstance(m, str) and m.strip() for m in methods)
        ):
            raise ValueError(f'{path}["METHODS"] must be a list of HTTP methods, got {methods!r}')
        methods = frozenset(m.strip().upper() for m in methods)
    identity = raw.get("IDENTITY")
    if identity is not None:
        import_callable(identity, f'{path}["IDENTITY"]')
    status = raw.get("STATUS")  # None: the kind's refusal status
    options = {
        # (absent: DEFAULT, the entry's own; None: forever, no expiry)
        "timeout": check_timeout(raw["TIMEOUT"], f'{path}["TIMEOUT"]')
        if "TIMEOUT" in raw
        else DEFAULT,
        "lease_timeout": check_lease_timeout(raw["LEASE_TIMEOUT"], f'{path}["LEASE_TIMEOUT"]')
        if "LEASE_TIMEOUT" in raw
        else DEFAULT,
        "identity": identity,
        "status": None if status is None else check_status(status, f'{path}["STATUS"]'),
        "retry_after": check_retry_after(raw.get("RETRY_AFTER"), f'{path}["RETRY_AFTER"]'),
    }
    if raw.get("PERMITS") is not None:
        problem = permits_problem(
            raw["PERMITS"], f'{path}["PERMITS"]', resource, kind, entries, kinds=kinds
        )
        if problem is not None:
            raise problem
        options["permits"] = int(raw["PERMITS"])
    return Rule(pattern, methods, resource, options)


def permits_problem(
    value: Any,
    where: str,
    resource: str,
    kind: Kind,
    entries: Mapping[str, Entry] | None,
    *,
    kinds: Sequence[Kind] = (),
) -> OptionError | None:
    """What is wrong with asking ``value`` permits of ``resource`` (of ``kind``)
    for each request, as ``where`` does (a rule's ``PERMITS``, a view's
    ``@with_resource(permits=)``): E038 when it is not an int >= 1 or the kind's
    holds take no permits (its message names those of ``kinds`` whose holds
    do), E039 when it is more than the entry's configured size (``entries``:
    the valid entries by name); None when it is fine."""
    if not kind.takes_permits:
        taking = [k.plural for k in kinds if k.takes_permits]
        return OptionError(
            f"{where} is set, but {resource!r} is {kind.a_label}, whose holds take no "
            f"permits (only {' and '.join(taking) or 'no kind'}' holds do)",
            id="E038",
            hint="Remove it, or name a primitive whose holds take permits.",
        )
    try:
        permits = check_permits(value, where)
    except ValueError as exc:
        return OptionError(
            str(exc),
            id="E038",
            hint="Use how many permits each request's hold takes, as an int >= 1, e.g. 2.",
        )
    entry = (entries or {}).get(resource)
    limit = None if entry is None else kind.max_permits(entry.options)
    if limit is not None and permits > limit:
        size = setting_path(kind.setting_key, resource, getattr(kind, "size_option", "size"))
        return OptionError(
            f"{where} = {permits} is more than the {limit} permits of {resource!r} "
            f"({size}): no request's hold could ever be granted (each would wait its "
            "whole timeout, then be refused)",
            id="E039",
            hint=f"Ask at most {limit} permits, or raise {size}.",
        )
    return None


def _read_request_options(raw: dict[str, Any], found: Findings) -> None:
    """``UNAVAILABLE_VIEW``, ``FAIL_OPEN``, ``LONG_HOLD`` and ``REQUEST_LEASE``."""
    path = setting_path("UNAVAILABLE_VIEW")
    if raw.get("UNAVAILABLE_VIEW") is not None:
        try:
            import_callable(raw["UNAVAILABLE_VIEW"], path)
        except ValueError as exc:
            found.add(
                "E021",
                f"{exc}.",
                "Use the dotted path of a view taking (request, exception), e.g. "
                '"myapp.views.busy", or remove the key.',
                path,
            )
    path = setting_path("FAIL_OPEN")
    try:
        validate_bool(raw.get("FAIL_OPEN", False), path)
    except ValueError as exc:
        found.add(
            "E022",
            f"{exc}.",
            "Use True to run views without a hold when Redis is down, False (the default) "
            "to answer them with the unavailable response.",
            path,
        )
    path = setting_path("LONG_HOLD")
    try:
        check_lease_timeout(raw.get("LONG_HOLD"), path)
    except ValueError as exc:
        found.add(
            "E031",
            f"{exc}.",
            "Use the age past which a live hold is flagged as possibly stuck, e.g. "
            f"{DEFAULT_LONG_HOLD:g} (the default), or None to flag none.",
            path,
        )
    path = setting_path("METRICS_DEADLINE")
    try:
        if check_duration(raw.get("METRICS_DEADLINE", DEFAULT_METRICS_DEADLINE), path) > 60:
            raise ValueError(f"{path} must be at most 60 seconds, got {raw['METRICS_DEADLINE']!r}")
    except ValueError as exc:
        found.add(
            "E041",
            f"{exc}.",
            f"Use the seconds one scrape may spend reading Redis, e.g. "
            f"{DEFAULT_METRICS_DEADLINE:g} (the default), well inside Prometheus's "
            "scrape_timeout (10 s by default).",
            path,
        )
    path = setting_path("REQUEST_LEASE")
    try:
        if check_duration(raw.get("REQUEST_LEASE", DEFAULT_REQUEST_LEASE), path) < 1:
            raise ValueError(f"{path} must be at least 1 second, got {raw['REQUEST_LEASE']!r}")
    except ValueError as exc:
        found.add(
            "E026",
            f"{exc}.",
            "Use how long a request's hold on a primitive without LEASE_TIMEOUT outlives "
            f"a killed worker, e.g. {DEFAULT_REQUEST_LEASE:g} (the default); it is "
            "renewed while the request runs.",
            path,
        )


def _read_installed_middleware(raw: Any, middleware: Any, found: Findings) -> None:
    """W002, W008, W007: the ``MIDDLEWARE`` rules and ``ResourceMiddleware`` in
    ``settings.MIDDLEWARE`` (``middleware``) go together."""
    rules = raw.get("MIDDLEWARE") if isinstance(raw, dict) else None
    order = list(middleware)
    installed = MIDDLEWARE_PATH in order
    if isinstance(rules, (list, tuple)) and rules and not installed:
        found.add(
            "W002",
            f"{setting_path('MIDDLEWARE')} has rules, but {MIDDLEWARE_PATH!r} is "
            "not in settings.MIDDLEWARE, so they do nothing.",
            f"Add {MIDDLEWARE_PATH!r} to settings.MIDDLEWARE (after the session "
            "and authentication middleware if a rule's IDENTITY uses request.user).",
            "settings.MIDDLEWARE",
        )
    if (
        installed
        and AUTH_MIDDLEWARE_PATH in order
        and order.index(AUTH_MIDDLEWARE_PATH) > order.index(MIDDLEWARE_PATH)
        and isinstance(rules, (list, tuple))
        and any(isinstance(rule, dict) and rule.get("IDENTITY") for rule in rules)
    ):
        found.add(
            "W008",
            f"{MIDDLEWARE_PATH!r} comes before {AUTH_MIDDLEWARE_PATH!r} in "
            f"settings.MIDDLEWARE, and a rule of {setting_path('MIDDLEWARE')} "
            "sets IDENTITY: an IDENTITY that reads request.user fails (a 500), as "
            "the user is not set yet when the rule is applied.",
            f"Move {MIDDLEWARE_PATH!r} after {AUTH_MIDDLEWARE_PATH!r}.",
            "settings.MIDDLEWARE",
        )
    if installed and isinstance(raw, dict) and rules in (None, [], ()):
        found.add(
            "W007",
            f"{MIDDLEWARE_PATH!r} is in settings.MIDDLEWARE, but "
            f"{setting_path('MIDDLEWARE')} has no rules, so it holds nothing "
            "for any request.",
            f'Add rules to {setting_path("MIDDLEWARE")}, e.g. [{{"PATH": '
            'r"^/print/", "RESOURCE": "<configured name>"}], or remove the middleware '
            "from settings.MIDDLEWARE (@with_resource on a view works without it).",
            "settings.MIDDLEWARE",
        )
