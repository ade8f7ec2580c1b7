"""What the Django layer needs of a kind of primitive: :class:`Kind`, the
contract every kind fulfils, and the records that cross it (:class:`Ask`,
:class:`Grant`, :class:`Option`, :class:`Report`...).

A kind is one module of :mod:`django_redis_pool.kinds` holding one subclass of
:class:`Kind` (and an instance of it, ``KIND``): what the kind *is* (its
options, how it is built and held, and what the management commands read and
change, as data). ``Kind[P]`` is generic in the primitive ``P`` the kind
builds (``PoolKind`` is a ``Kind[ResourcePool]``): :meth:`Kind.build` returns
one, and every other method takes one, so that a type checker follows a
request from ``@with_resource`` through :meth:`Kind.grant` to the primitive.
The core of the Django layer (settings, checks, registry, request guard,
commands, admin views, templates) only ever calls the methods below, so it
names no kind: a new kind is a new module, listed in the registry's
:data:`~django_redis_pool.registry.KINDS`. A kind reads no settings: the
registry tells it what it needs (the options of an entry when it builds its
primitive, and :class:`Configured` after), the settings reader what Django's
other settings say (:meth:`Kind.entry_warnings`). What the admin shows of it
is the dashboard's (:mod:`django_redis_pool.dashboard`). See
``docs/adding-a-kind.md``.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Literal, NamedTuple, Protocol, TypeVar

from ..exceptions import NotConfigured
from ..primitives.clients.waits import Wait
from ..primitives.leased.lease import Lease
from ..primitives.validators import Seconds, check_max_waiting

__all__ = [
    "MAX_WAITING",
    "Ask",
    "Configured",
    "EntryWarning",
    "Grant",
    "Kind",
    "Option",
    "OptionError",
    "Primitive",
    "Report",
    "Validator",
    "validate_bool",
]

#: ``validate(value, setting_path) -> normalised value``; raises ``ValueError`` whose
#: message names ``setting_path``.
Validator = Callable[[Any, str], Any]


class Primitive(Protocol):
    """What a kind's primitive has, whatever its kind: its kind's name (as
    :attr:`Kind.name` says it) and its configured name."""

    @property
    def kind(self) -> str: ...

    @property
    def name(self) -> str: ...


#: The primitive a kind builds and holds (``Kind[P]``).
P = TypeVar("P", bound=Primitive)


def validate_bool(value: Any, path: str) -> bool:
    """An option that is True or False."""
    if not isinstance(value, bool):
        raise ValueError(f"{path} must be True or False, got {value!r}")
    return value


class OptionError(ValueError):
    """What a validator (or :meth:`Kind.check_entry`) raises for a value whose
    system check has an id of its own (a rate limit's malformed ``RATE`` is
    ``E034``, not the ``E018`` of any bad value), or a hint that depends on the
    value ("Did you mean 'user'?"). A plain ``ValueError`` is ``E018`` with the
    option's hint."""

    def __init__(self, message: str, *, id: str = "E018", hint: str | None = None) -> None:
        super().__init__(message)
        self.id = id  #: the check id, e.g. "E034"
        self.hint = hint  #: None: the option's own hint


class EntryWarning(NamedTuple):
    """One warning of :meth:`Kind.entry_warnings`: ``manage.py check`` reports
    its message and hint with its id (``W006`` unless it has its own)."""

    message: str
    hint: str
    id: str = "W006"


@dataclass(frozen=True)
class Option:
    """One per-entry option: how to validate it, its default, how to fix it."""

    validate: Validator
    default: Any
    hint: str  #: the system check's hint when the value is invalid


#: The ``MAX_WAITING`` option of the kinds whose callers wait (object pools,
#: resource pools, semaphores, locks): how many may wait at once.
MAX_WAITING = Option(
    check_max_waiting,
    None,
    "Use how many callers may wait at once, as an int >= 0 (0: none waits, one that would "
    "is refused at once), or None for no limit.",
)


@dataclass
class Grant:
    """A hold taken for one request (see :meth:`Kind.grant`)."""

    hold: Any  #: what the view sees as ``request.resources[name]``
    lease: Lease | None  #: the lease behind it (fence, expiry), for signals and logs
    release: Callable[[], bool]  #: gives it back; False if it was already gone
    #: :attr:`release` on the event loop (None: the guard runs ``release`` in a thread).
    arelease: Callable[[], Awaitable[bool]] | None = None
    granted_at: float = field(default_factory=time.monotonic)
    primitive: Primitive | None = None  #: what was held (set by the guard)
    #: Headers the response gets (those it does not set itself), e.g. what is
    #: left of a rate limit.
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Ask:
    """What one request asks of a kind's :meth:`Kind.grant`."""

    holder: str  #: who holds: ``identity(request)``, else a unique id of the request
    identity: str | None  #: ``identity(request)`` if the view names one, else None
    #: how long to wait: the request's one wait (``seconds`` None: forever; 0:
    #: do not wait), started and bounded by the guard; a kind hands it to its
    #: primitive as it is (``timeout=ask.timeout``: no second check, no second
    #: deadline)
    timeout: Wait
    #: the hold's lease (DEFAULT: the primitive's default; the guard never asks
    #: for None, no expiry: it asks a renewed ``REQUEST_LEASE`` instead)
    lease_timeout: Seconds
    #: The request itself, for a kind whose hold depends on it (what a rate
    #: limit counts against: its user, its address, a header); None outside one.
    request: Any = None
    #: The permits the hold takes (``PERMITS``, ``permits=``; None: the kind's
    #: default). Only a kind that :attr:`Kind.takes_permits` is asked for any.
    permits: int | None = None


@dataclass(frozen=True)
class Report:
    """What a management command reports for one primitive (``pool_sync``,
    ``pool_gc``, ``pool_status``)."""

    line: str  #: the one-line report, e.g. "printers: 2 added, 1 already there"
    #: Whether something changed (or, in a dry run, would): ``pool_gc --loop``
    #: prints only such lines; ``pool_status`` highlights a busy primitive.
    changed: bool = False
    style: Literal["", "success", "warning"] = ""  #: how the line is coloured
    details: tuple[str, ...] = ()  #: further lines (shown at higher verbosity)
    data: Mapping[str, Any] = field(default_factory=dict)  #: its part of ``--json``
    counts: Mapping[str, int] = field(default_factory=dict)  #: summed across primitives


@dataclass(frozen=True)
class Configured:
    """What the registry tells a kind of a primitive it built from the setting
    (:meth:`Kind.configure`), for the hooks that need more than the primitive."""

    options: Mapping[str, Any]  #: the entry's options, validated, defaults filled in
    #: The setting's ``LONG_HOLD``: a live hold older than this (s) is flagged
    #: (None: none is).
    long_hold: float | None = None


#: primitive -> what the registry told its kind (forgotten with the primitive).
_CONFIGURED: weakref.WeakKeyDictionary[Any, Configured] = weakref.WeakKeyDictionary()


class Kind(Generic[P]):
    """One kind of primitive ``P``, as the Django layer sees it.

    Subclasses set the class attributes and override what their primitive
    supports; the defaults describe a kind with no configured state in Redis,
    nothing to collect, and no request hold.
    """

    name: ClassVar[str]  #: "pool": what ``primitive.kind`` says, and key names use
    setting_key: ClassVar[str]  #: "POOLS": the mapping of the setting holding its entries
    #: Its per-entry options, by setting key (parsing, checks and docs use them).
    options: ClassVar[Mapping[str, Option]] = {}
    primitive: ClassVar[type | None] = None  #: the class :meth:`build` makes (signals' sender)
    #: Options an entry must set (the system checks report a missing one).
    required: ClassVar[tuple[str, ...]] = ()
    #: The metric families its primitive's counts feed (``primitive.activity()``;
    #: names of :data:`django_redis_pool.metrics.COUNTERS` and ``HISTOGRAMS``).
    counted: ClassVar[tuple[str, ...]] = ()
    #: The HTTP status of a request it refused (nothing granted in time), unless
    #: the view or rule gives one: 503, "try again later"; a rate limit's is 429.
    refusal_status: ClassVar[int] = 503
    #: Whether a request's hold may take several permits (``PERMITS`` on a
    #: rule, ``@with_resource(permits=)``): its :meth:`grant` reads ``ask.permits``.
    takes_permits: ClassVar[bool] = False

    @property
    def label(self) -> str:
        """Human name of the kind, e.g. "object pool"."""
        return self.name.replace("_", " ")

    @property
    def a_label(self) -> str:
        """The human name with its article, e.g. "an object pool"."""
        return f"{'an' if self.label[:1] in 'aeiou' else 'a'} {self.label}"

    @property
    def plural(self) -> str:
        """Human name of several, e.g. "object pools"."""
        return f"{self.label}s"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"

    # -- settings --------------------------------------------------------------

    def build(self, client: Any, name: str, key_prefix: str, options: Mapping[str, Any]) -> P:
        """The primitive ``name`` on ``client``; ``options`` holds every option
        of the kind, validated, defaults filled in. Does no I/O."""
        raise NotImplementedError

    def configure(self, primitive: P, configured: Configured) -> None:
        """Remember what the registry, which built ``primitive`` from an entry
        of the setting, says of it (:meth:`configured`)."""
        _CONFIGURED[primitive] = configured

    def configured(self, primitive: P) -> Configured | None:
        """What :meth:`configure` remembered of ``primitive``; None for one the
        registry did not build."""
        return _CONFIGURED.get(primitive)

    def check_entry(self, options: Mapping[str, Any], path: str) -> None:
        """Raise ``ValueError`` naming ``path`` when valid options do not go
        together (each one alone was validated already)."""

    def entry_warnings(
        self, name: str, options: Mapping[str, Any], *, proxied: Sequence[str] = ()
    ) -> Sequence[tuple[str, ...]]:
        """(message, hint) pairs that ``manage.py check`` reports (as W006, or
        an :class:`EntryWarning`'s own id) for entry ``name``, whose ``options``
        are valid (e.g. a pool with no resources). ``proxied``: the Django
        settings set that say a proxy stands in front of Django
        (``USE_X_FORWARDED_HOST``...). Does no I/O."""
        return []

    def max_permits(self, options: Mapping[str, Any]) -> int | None:
        """The most permits one hold of an entry with (valid) ``options`` can
        ever get, as configured (None: not known from the setting, or the kind
        takes no permits): a request rule or view asking more is an error."""
        return None

    # -- requests --------------------------------------------------------------

    def grant(self, primitive: P, ask: Ask) -> Grant | None:
        """Take ``primitive`` for one request, as ``ask`` says; None if nothing
        was granted in time. A caller refused at once (``max_waiting`` callers
        already wait) raises :class:`ResourceUnavailable` with ``reason``
        ``FULL``: the guard refuses the request with that error."""
        raise NotConfigured(
            f"{self.label} {primitive.name!r} cannot be held by a request: {self.plural} "
            "have no request hold"
        )

    async def agrant(self, primitive: P, ask: Ask) -> Grant | None:
        """:meth:`grant` on the event loop, for async views: waits without a
        thread, and when cancelled leaves nothing held. A kind that does not
        override it (:attr:`holds_on_loop` is False) is held from a thread."""
        raise NotImplementedError

    def turn(self, primitive: P, ask: Ask) -> float | None:
        """Seconds until a hold refused now, as ``ask`` says, can expect its
        turn (the ``Retry-After`` of a refused request, the ``retry_after`` of
        ``holding()``'s refusal), when the kind can tell; None (the default):
        the guard answers from the wait. Called only on a refusal that carries
        no ``retry_after`` of its own; it must not raise."""
        return None

    async def aturn(self, primitive: P, ask: Ask) -> float | None:
        """:meth:`turn` on the event loop (the default: :meth:`turn`, which
        must then do no I/O)."""
        return self.turn(primitive, ask)

    def request_timeout(self, primitive: P) -> float | None:
        """How long a request waits for ``primitive`` when its view or rule
        names no ``timeout``: the primitive's ``timeout`` (its ``TIMEOUT``
        option), else forever (None)."""
        return getattr(primitive, "timeout", None)

    @property
    def holds_requests(self) -> bool:
        """Whether a request can hold a primitive of this kind (``@with_resource``,
        a ``MIDDLEWARE`` rule): it has its own :meth:`grant`."""
        return type(self).grant is not Kind.grant

    @property
    def holds_on_loop(self) -> bool:
        """Whether this kind has its own :meth:`agrant`."""
        return type(self).agrant is not Kind.agrant

    # -- management commands ---------------------------------------------------

    def sync(
        self, primitive: P, options: Mapping[str, Any], *, prune: bool, dry_run: bool
    ) -> Report:
        """``pool_sync``: make Redis hold what ``options`` configure."""
        return Report(f"{primitive.name}: {self.a_label}, nothing to sync")

    def collect(self, primitive: P, *, dry_run: bool) -> Report:
        """``pool_gc`` (and the admin's gc action): reclaim what crashed holders
        left behind now."""
        return Report(f"{primitive.name}: nothing to reclaim")

    def status(self, primitive: P) -> Report:
        """``pool_status``: its counts (``data`` has ``held``, ``free``,
        ``waiting`` and ``size``, None where they do not apply) and details."""
        return Report(primitive.name, data={"kind": self.name, "name": primitive.name})

    def gauges(self, primitive: P) -> dict[str, float | None]:
        """What the metrics export of its state now (``size``, ``free``,
        ``held``, ``waiting``, ``oldest_hold_seconds``; None or absent where
        they do not apply), read cheaply: scraped every few seconds."""
        data = self.status(primitive).data
        return {key: data.get(key) for key in ("size", "free", "held", "waiting")}
