"""How the primitives' Lua runs: one function library on Redis >= 7, else EVALSHA.

``engine.lua`` (beside this module) holds the keys, the constants and the
shared helpers; each family of primitives (:data:`FAMILIES`) declares its
operations in its package, its Lua beside its Python: its helper files
(``leased/engine_lease.lua``, ``leased/engine_alloc.lua``,
``queue/engine_queue.lua``: :data:`HELPERS`), each operation its own
``<family>/<op>.lua``.
Two ways of running them share the same source, keys and semantics, so
clients on either path may serve one primitive together:

* **Function library** (Redis >= 7, standalone): every operation in one
  library, loaded once with ``FUNCTION LOAD`` and called with ``FCALL``; the
  helpers are built when the library loads, not on every call. The library's
  name carries a digest of its source (``drp_<digest>``), so two versions of
  this package on one Redis (a rolling upgrade) each call their own code and
  never load over each other.
* **EVALSHA** (Redis 6.2, Redis Cluster, or a server or ACL that refuses
  ``FUNCTION LOAD``): one script per operation, holding only the helpers it
  uses, run by its digest (and loaded again on ``NOSCRIPT``). A script
  defines its helpers on every run, which costs as much as the work of an
  uncontended acquire, so acquire,
  release and renew first run a small script for their common case
  (``FAST``), and the whole operation only when that one answers ``slow``.
  A primitive whose common case just failed (it is contended: callers queue,
  releases hand over) goes straight to the whole operation for its next
  ``SLOW_STREAK`` calls, rather than paying a second round trip each time.

On both paths the code is written out from ``engine.lua`` as Redis should
run it: its constants (``local NAME = <string or integer>``) as literals in
place (a local that a helper names would be an upvalue, made anew on every
EVALSHA run), and after ``begin`` only the keys an operation's code names
(its ``-- @key`` lines). ``python -m benchmarks redis-cost`` counts what each
costs Redis.

Which path a client takes is found out on its first call and remembered per
client object; the asyncio twin of a blocking client (:mod:`.async_clients`)
starts with what its client found (:func:`share_path`). Nothing here imports
Django.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import textwrap
import threading
import weakref
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

from redis.exceptions import NoPermissionError, NoScriptError, ResponseError

from ...exceptions import PoolError
from .. import counts, leased, queue, ratelimit, wire
from . import permissions
from .protocol import Reply
from .steps import Call, Op, Steps

__all__ = [
    "FAMILIES",
    "FAST",
    "HELPERS",
    "LIBRARY_NAME",
    "LUA_FILES",
    "MISS",
    "NUM_KEYS",
    "OPERATIONS",
    "SLOT_GUARD",
    "SLOW_STREAK",
    "ScriptRunner",
    "guarded",
    "library_source",
    "load_lua",
    "runner_for",
    "script_sha",
    "script_source",
    "share_path",
]

#: The families of primitives whose Lua runs here, each a package that
#: declares its own operations beside their Lua (``OPERATIONS``, one
#: ``<op>.lua`` each; ``FAST``, the common-case script of some; ``HELPERS``,
#: its files of helpers), in the order their helpers are defined: a helper
#: comes before any later family's helper that calls it, and this package's
#: ``engine.lua`` (the header: the keys, the constants, ``begin``, and the
#: helpers every family shares) first.
FAMILIES = (wire, leased, queue, counts, ratelimit)

#: Every named operation of every family.
OPERATIONS = tuple(op for family in FAMILIES for op in family.OPERATIONS)
#: On the EVALSHA path: operation -> the script of its common case, run first.
FAST = {op: fast for family in FAMILIES for op, fast in family.FAST.items()}
#: The files of the helpers, by family, in the order their helpers are defined.
HELPERS = tuple(name for family in FAMILIES for name in family.HELPERS)
#: Every Lua file by name (without ``.lua``): in the folder of its family.
LUA_FILES = {
    name: Path(family.__file__).with_name(f"{name}.lua")
    for family in FAMILIES
    for name in (*family.HELPERS, *family.OPERATIONS, *family.FAST.values())
}
_lua_cache: dict[str, str] = {}


def load_lua(*names: str) -> str:
    """Source of the Lua files ``names`` (without ``.lua``), concatenated."""
    parts = []
    for name in names:
        if name not in _lua_cache:
            _lua_cache[name] = LUA_FILES[name].read_text()
        parts.append(_lua_cache[name])
    return "\n".join(parts)


#: Calls of an operation that skip its common-case script after it said 'slow'.
SLOW_STREAK = 8
_SLOW = (Reply.SLOW.encode(), Reply.SLOW)

#: The KEYS every operation receives on a standalone Redis: the primitive's
#: base key (``engine.lua``), which is never written.
NUM_KEYS = 1
#: On a Redis Cluster each operation also declares ``<base>`` + this key, which
#: is never written either. While the primitive's slot migrates, Redis finds
#: the declared keys missing and answers ASK on the source and TRYAGAIN on the
#: target (two keys, not all present): a script never runs against a partial
#: copy of its state, on either node (docs/operations.md, "Resharding").
SLOT_GUARD = ":slot-guard"
_GUARD_BYTES = SLOT_GUARD.encode()

_BLOCK = re.compile(r"^-- @fn (\w+)\n", re.M)
_KEY = re.compile(r"^-- @key (K_\w+) (\S+)$", re.M)
_COMMENT = re.compile(r"--[^\n]*")
#: ``begin``'s definition in engine.lua's header, its body captured.
_BEGIN = re.compile(r"^local function begin\(keys, args\)\n(.*?)\n^end\n", re.M | re.S)
#: A constant of ``engine.lua``: ``local NAME = <a string or integer>`` on one line.
_CONSTANT = re.compile(
    r"^local ([A-Z][A-Z0-9_]*) = ('(?:[^'\\\n]|\\.)*'|-?\d+)[ \t]*(?:--[^\n]*)?\n", re.M
)
#: A comment or a string (left alone), or a name that may be a constant.
_TOKEN = re.compile(r"--[^\n]*|'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"|\b[A-Z][A-Z0-9_]*\b")


@cache
def _constants() -> dict[str, str]:
    """``engine.lua``'s constants: name -> its literal."""
    return dict(_CONSTANT.findall(load_lua("engine")))


def _inline(code: str) -> str:
    """``code`` with each constant's name replaced by its literal: a local
    that a helper names becomes an upvalue, made anew on every run of an
    EVALSHA script (a lookup and an allocation each), a literal costs nothing."""
    constants = _constants()
    return _TOKEN.sub(lambda m: constants.get(m.group(), m.group()), code)


@cache
def _parts() -> tuple[str, dict[str, str]]:
    """``engine.lua``'s header and the ``@fn`` blocks of every file of
    :data:`HELPERS` (in order; what a file has before its first block is its
    own comment), the constants written in place (:func:`_inline`)."""
    header, blocks = "", {}
    for name in HELPERS:
        pieces = _BLOCK.split(_inline(_CONSTANT.sub("", load_lua(name))))
        if name == HELPERS[0]:
            header = pieces[0]
        blocks.update(zip(pieces[1::2], pieces[2::2], strict=True))
    return header, blocks


def _uses(code: str, names: Iterable[str]) -> set[str]:
    """The names in ``names`` that ``code`` mentions outside comments."""
    words = set(re.findall(r"\b\w+\b", _COMMENT.sub("", code)))
    return {name for name in names if name in words}


def _body(op: str) -> str:
    """Operation ``op`` as a local function of its arguments."""
    return f"local function op_{op}(args)\n{_inline(load_lua(op))}\nend\n"


@cache
def _code(op: str) -> tuple[str, str]:
    """(the helpers ``op`` needs, in ``engine.lua``'s order; the lines that
    build the keys they and ``op`` name, run after ``begin``)."""
    header, blocks = _parts()
    body = _body(op)
    needed = _uses(body, blocks)
    pending = list(needed)
    while pending:  # helpers used by needed helpers
        for name in _uses(blocks[pending.pop()], blocks) - needed:
            needed.add(name)
            pending.append(name)
    helpers = "".join(blocks[name] for name in blocks if name in needed)
    keys = dict(_KEY.findall(header))
    named = _uses(helpers + body, keys)
    return helpers, "".join(f"{key} = BASE .. '{keys[key]}'\n" for key in keys if key in named)


@cache
def script_source(op: str) -> str:
    """The EVALSHA script of ``op``: the header, the helpers it needs, then
    ``begin``'s body and the operation's as the script's own code. An EVALSHA
    script runs its whole text on every call: each function it defines is a
    closure made anew, with an upvalue allocated for each local it names, so
    the two that every call runs once are not made functions here."""
    header, _ = _parts()
    helpers, keys = _code(op)
    start, begin, end = _BEGIN.split(header)
    body = _inline(load_lua(op))
    return f"{start}{end}{helpers}local keys, args = KEYS, ARGV\n{begin}\n{keys}{body}\n"


@cache
def _library() -> tuple[str, str]:
    """(name, source) of the function library: every helper and operation,
    registered under names that carry the digest of their code."""
    header, blocks = _parts()
    code = header + "".join(blocks.values()) + "".join(_body(op) for op in OPERATIONS)
    name = "drp_" + hashlib.sha1(code.encode()).hexdigest()[:12]
    registered = "".join(
        f"redis.register_function('{name}_{op}', function(keys, args)\n"
        f"  begin(keys, args)\n{textwrap.indent(_code(op)[1], '  ')}  return op_{op}(args)\nend)\n"
        for op in OPERATIONS
    )
    return name, f"#!lua name={name}\n{code}{registered}"


def library_source() -> str:
    """The function library's source, as ``FUNCTION LOAD`` takes it."""
    return _library()[1]


#: The function library's name (``drp_<digest of its code>``).
LIBRARY_NAME = _library()[0]


class ScriptRunner:
    """Runs the named operations on one client, by FCALL or by EVALSHA.

    ``functions`` is None until the first call finds out whether the server
    serves the function library (True) or not (False: EVALSHA from then on).
    A library lost since (e.g. a restart without persistence) is loaded again,
    and so is a script (NOSCRIPT). :meth:`steps` is an operation of
    :mod:`.calls`, so one runner code serves blocking and asyncio clients.
    """

    def __init__(self, client: Any) -> None:
        self.functions: bool | None = None
        #: Whether this client's user was found allowed every command the
        #: scripts run (:mod:`.permissions`; probed once, before the first write).
        self.probed = False
        #: A Redis Cluster client: each operation declares the slot guard too.
        self.guarded = hasattr(client, "nodes_manager")
        if not callable(getattr(client, "fcall", None)) or self.guarded:
            self.functions = False  # Redis Cluster: EVALSHA (loaded on every primary)

    def call(self, client: Any, op: Op) -> Any:
        """Run ``op`` on the blocking ``client`` at once, as :meth:`steps`
        would when nothing needs loading: this is every operation's hot path
        (:meth:`steps`'s logic, written out without a call to spare).
        Returns :data:`MISS` (having changed nothing) when this client's path
        is not known yet, or the library or script must be loaded: the caller
        runs :meth:`steps` then."""
        name, keys_and_args, streaks = op
        numkeys = 1
        if self.guarded:
            numkeys, keys_and_args = 2, guarded(keys_and_args)
        try:
            if self.functions:
                return client.execute_command("FCALL", _FUNCTIONS[name], 1, *keys_and_args)
            if self.functions is None:
                return MISS
            fast = _FAST_SHAS[name]
            if fast is not None:
                if streaks and streaks.get(name):
                    streaks[name] -= 1
                else:
                    reply = client.execute_command("EVALSHA", fast, numkeys, *keys_and_args)
                    if reply not in _SLOW:
                        return reply
                    if streaks is not None:
                        streaks[name] = SLOW_STREAK
            return client.execute_command("EVALSHA", _SHAS[name], numkeys, *keys_and_args)
        except ResponseError as exc:
            if _must_load(exc):
                return MISS
            raise

    async def acall(self, client: Any, op: Op) -> Any:
        """:meth:`call` on a ``redis.asyncio`` ``client``: the same calls, awaited
        (with the same streaks of calls that skip the common-case script)."""
        name, keys_and_args, streaks = op
        numkeys = 1
        if self.guarded:
            numkeys, keys_and_args = 2, guarded(keys_and_args)
        try:
            if self.functions:
                return await client.execute_command("FCALL", _FUNCTIONS[name], 1, *keys_and_args)
            if self.functions is None:
                return MISS
            fast = _fast_sha(name, streaks)
            if fast is not None:
                reply = await client.execute_command("EVALSHA", fast, numkeys, *keys_and_args)
                if reply not in _SLOW:
                    return reply
                _went_slow(name, streaks)
            return await client.execute_command("EVALSHA", _SHAS[name], numkeys, *keys_and_args)
        except ResponseError as exc:
            if _must_load(exc):
                return MISS
            raise

    def steps(
        self, op: str, keys_and_args: tuple[Any, ...], streaks: dict[str, int] | None = None
    ) -> Steps[Any]:
        """Run ``op`` with ``NUM_KEYS`` keys followed by its arguments.
        ``streaks`` (one per primitive, kept by the caller) counts the calls
        left that skip the common-case script on the EVALSHA path. The first
        time, the client's user is checked for every command the scripts run
        (:func:`.permissions.denied_steps`): refused one, nothing is written."""
        if not self.probed:
            denied = yield from permissions.denied_steps(keys_and_args[0])
            if denied:
                base = keys_and_args[0]
                raise PoolError(
                    permissions.message(denied, base.decode() if type(base) is bytes else base)
                )
            self.probed = True
        if self.functions is not False:
            call = Call("fcall", (f"{LIBRARY_NAME}_{op}", NUM_KEYS, *keys_and_args))
            try:
                reply = yield call
            except ResponseError as exc:
                if not (yield from self._load_library(exc)):
                    return (yield from self.steps(op, keys_and_args, streaks))
                return (yield call)
            self.functions = True
            return reply
        numkeys = NUM_KEYS
        if self.guarded:
            numkeys, keys_and_args = 2, guarded(keys_and_args)
        if _fast_sha(op, streaks) is not None:
            reply = yield from _evalsha(FAST[op], numkeys, keys_and_args)
            if reply not in _SLOW:
                return reply
            _went_slow(op, streaks)
        return (yield from _evalsha(op, numkeys, keys_and_args))

    def _load_library(self, exc: ResponseError) -> Steps[bool]:
        """After FCALL failed with ``exc``: load the library and return True, or
        return False (switching to EVALSHA) if this server or user cannot
        have it. Any other error is raised."""
        message = str(exc).lower()
        if "unknown command" in message or isinstance(exc, NoPermissionError):
            self.functions = False
            return False
        if "function not found" not in message:
            raise exc
        try:
            yield Call("function_load", (library_source(),))
        except ResponseError as load_exc:
            if "already exists" not in str(load_exc).lower():
                self.functions = False  # refused (ACL, read-only replica...): EVALSHA
                return False
        self.functions = True
        return True


def guarded(keys_and_args: tuple[Any, ...]) -> tuple[Any, ...]:
    """``keys_and_args`` (the base key first) with the base's slot guard
    (:data:`SLOT_GUARD`) declared after it, for a Redis Cluster."""
    base = keys_and_args[0]
    guard = _GUARD_BYTES if type(base) is bytes else SLOT_GUARD
    return (base, base + guard, *keys_and_args[1:])


def _evalsha(op: str, numkeys: int, keys_and_args: tuple[Any, ...]) -> Steps[Any]:
    """EVALSHA the script of ``op``, loading it first if Redis lost it."""
    call = Call("evalsha", (script_sha(op), numkeys, *keys_and_args))
    try:
        return (yield call)
    except NoScriptError:
        yield Call("script_load", (script_source(op),))  # (every primary of a Cluster)
        return (yield call)


@cache
def script_sha(op: str) -> str:
    """The SHA1 digest by which EVALSHA runs the script of ``op``."""
    return hashlib.sha1(script_source(op).encode()).hexdigest()


def _must_load(exc: ResponseError) -> bool:
    """Whether ``exc`` says that what was called must be loaded first (or
    that this server has no function library): nothing ran."""
    if isinstance(exc, (NoScriptError, NoPermissionError)):
        return True
    message = str(exc).lower()
    return "function not found" in message or "unknown command" in message


def _fast_sha(op: str, streaks: dict[str, int] | None) -> str | None:
    """The digest of ``op``'s common-case script if it is to run first (not
    one of the calls that skip it after it said "slow"), else None."""
    fast = _FAST_SHAS[op]
    if fast is not None and streaks and streaks.get(op):
        streaks[op] -= 1
        return None
    return fast


def _went_slow(op: str, streaks: dict[str, int] | None) -> None:
    """``op``'s common-case script said "slow": skip it for the next calls."""
    if streaks is not None:
        streaks[op] = SLOW_STREAK


class _Digests(dict[str, str]):
    """Operation -> the digest of its script, computed when first asked for."""

    def __missing__(self, op: str) -> str:
        self[op] = digest = script_sha(op)
        return digest


#: What :meth:`ScriptRunner.call` runs: the function of each operation, the
#: digest of its script, and of its common-case script.
_FUNCTIONS = {op: f"{LIBRARY_NAME}_{op}" for op in OPERATIONS}
_SHAS = _Digests()
_FAST_SHAS: dict[str, str | None] = {
    op: script_sha(FAST[op]) if op in FAST else None for op in OPERATIONS
}

#: What :meth:`ScriptRunner.call` answers when it could not run the operation.
MISS = object()

_runners: weakref.WeakKeyDictionary[Any, ScriptRunner] = weakref.WeakKeyDictionary()
_runners_lock = threading.Lock()


def share_path(client: Any, twin: Any) -> None:
    """Let ``twin`` (a client of the same server, e.g. the asyncio twin of the
    blocking ``client``) take the path ``client`` found, if it found one: a new
    event loop's twin then sends no FCALL that the server refuses (Redis 6.2),
    once per concurrent first call."""
    found = runner_for(client)
    if found.functions is not None:
        runner = runner_for(twin)
        if runner.functions is None:
            runner.functions = found.functions


def runner_for(client: Any) -> ScriptRunner:
    """The :class:`ScriptRunner` of ``client`` (one per client object: kept
    on it, or beside it for a client that takes no attribute)."""
    try:
        return client._drp_script_runner  # type: ignore[no-any-return]
    except AttributeError:
        pass
    with _runners_lock:
        runner = _runners.get(client)
        if runner is None:
            runner = _runners[client] = ScriptRunner(client)
    with contextlib.suppress(AttributeError):
        client._drp_script_runner = runner
    return runner
