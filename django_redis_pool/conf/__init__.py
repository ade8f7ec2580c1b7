"""The ``DJANGO_REDIS_POOL`` setting: its shape, its defaults, and the one place
it is validated.

A parser of the values it is given: nothing here reads Django's settings or
knows which kinds exist. The registry (:func:`..registry.read_settings`) reads
the setting (and ``CACHES``, ``MIDDLEWARE`` and the proxy settings) lazily,
never at import time, and passes them in with its list of kinds.

* :mod:`.schema`: the keys, the defaults, what a valid setting becomes
  (:class:`Config`), what is wrong with an invalid one (:class:`Finding`, whose
  ids ``docs/checks.md`` lists), and the validators of the request options.
* :mod:`.reading`: :func:`read`, one pass over the whole setting that validates
  it and builds its :class:`Config`, given the kinds. The system checks report
  its findings; the registry builds from its config (or raises
  ``ImproperlyConfigured`` with its errors).
* :mod:`.connection`: ``CONNECTION``, checked without connecting.

Each kind of primitive brings the key of its mapping in the setting and the options
an entry accepts (with a validator and a default each) in its module of
:mod:`..kinds`; :func:`read` validates entries with the kinds it is given.
"""

from __future__ import annotations

from .reading import entry_options, parse, parse_rule, permits_problem, read, unreadable
from .schema import (
    AUTH_MIDDLEWARE_PATH,
    CHECK_PREFIX,
    CLUSTER_URL_SCHEMES,
    CONNECTION_FORMS,
    CONNECTION_KEYS,
    DEFAULT_CONNECTION,
    DEFAULT_KEY_PREFIX,
    DEFAULT_LONG_HOLD,
    DEFAULT_METRICS_DEADLINE,
    DEFAULT_POOL_TIMEOUT,
    DEFAULT_REQUEST_LEASE,
    DEFAULT_RETRIES,
    DEFAULT_RETRY_BASE,
    DEFAULT_RETRY_CAP,
    DEFAULT_SOCKET_TIMEOUT,
    MIDDLEWARE_PATH,
    PROXY_SETTINGS,
    RULE_KEYS,
    SETTING_NAME,
    URL_SCHEMES,
    Config,
    Entry,
    Finding,
    Findings,
    Reading,
    Rule,
    accepts,
    check_retry_after,
    check_status,
    did_you_mean,
    holdable_names,
    import_callable,
    redis_cache_flavour,
    setting_path,
    top_level_keys,
)

__all__ = [
    "AUTH_MIDDLEWARE_PATH",
    "CHECK_PREFIX",
    "CLUSTER_URL_SCHEMES",
    "CONNECTION_FORMS",
    "CONNECTION_KEYS",
    "DEFAULT_CONNECTION",
    "DEFAULT_KEY_PREFIX",
    "DEFAULT_LONG_HOLD",
    "DEFAULT_METRICS_DEADLINE",
    "DEFAULT_POOL_TIMEOUT",
    "DEFAULT_REQUEST_LEASE",
    "DEFAULT_RETRIES",
    "DEFAULT_RETRY_BASE",
    "DEFAULT_RETRY_CAP",
    "DEFAULT_SOCKET_TIMEOUT",
    "MIDDLEWARE_PATH",
    "PROXY_SETTINGS",
    "RULE_KEYS",
    "SETTING_NAME",
    "URL_SCHEMES",
    "Config",
    "Entry",
    "Finding",
    "Findings",
    "Reading",
    "Rule",
    "accepts",
    "check_retry_after",
    "check_status",
    "did_you_mean",
    "entry_options",
    "holdable_names",
    "import_callable",
    "parse",
    "parse_rule",
    "permits_problem",
    "read",
    "redis_cache_flavour",
    "setting_path",
    "top_level_keys",
    "unreadable",
]
