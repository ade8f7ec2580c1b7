"""The peers' test suites: fetched from PyPI, unpacked into a cache, imported
with their imports pointed at our adapters.

Each :class:`Peer` is one sdist, pinned by version and SHA-256. ``pip
download --require-hashes`` fetches it (pip is the registry's ordinary
client; the hash pins the exact file) into ``.cache/conformance/`` of the
checkout (ignored by git; ``$DJANGO_REDIS_POOL_CONFORMANCE_CACHE`` names
another folder), once; only its test files are unpacked. No peer
code is committed to this repository: the suites are read from the cache at
collection time. When the sdist cannot be had (no network, PyPI down),
:func:`fetch` raises :class:`PeerUnavailable`, whose message says so; the
suite's module then collects one test that fails with it (never a skip).

:class:`PeerPackage` imports a peer's test files as a package of its own
(``sys.meta_path``), after textual substitutions (``Rewrite``) that point
their imports at our adapter modules (e.g. ``from redis_allocator.allocator
import`` -> ``from tests.conformance.allocator_adapter import``). Asserts are
rewritten by pytest's assertion rewriter when it can be used, so a failing
peer assert explains itself as in the peer's own run.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

try:  # POSIX: the xdist workers fetch one at a time
    import fcntl
except ImportError:  # pragma: no cover - Windows: no lock (one worker fetches twice at worst)
    fcntl = None  # type: ignore[assignment]

ROOT = Path(__file__).resolve().parents[2]
#: Where the sdists' test folders are kept: ``$DJANGO_REDIS_POOL_CONFORMANCE_CACHE``,
#: else ``.cache/conformance`` of the checkout (``.cache/`` is ignored by git).
CACHE = Path(
    os.environ.get("DJANGO_REDIS_POOL_CONFORMANCE_CACHE") or ROOT / ".cache" / "conformance"
)
#: pip's network limits: offline, the failure comes in about a minute, not several.
PIP_NETWORK = ["--timeout", "20", "--retries", "2"]


class PeerUnavailable(RuntimeError):
    """A peer's sdist could not be fetched or unpacked (the message says why)."""


@dataclass(frozen=True)
class Peer:
    """One peer's sdist on PyPI: ``name==version``, its SHA-256, and the folder
    of its test files inside the archive."""

    name: str
    version: str
    sha256: str
    tests: str  #: the folder inside the sdist, e.g. "django-6.0/tests/tasks"

    @property
    def requirement(self) -> str:
        """``name==version``."""
        return f"{self.name}=={self.version}"

    @property
    def root(self) -> Path:
        """Its folder in the cache (the sdist's test folder is unpacked into it)."""
        return CACHE / f"{self.name}-{self.version}"

    @property
    def directory(self) -> Path:
        """Its unpacked test folder."""
        return self.root / self.tests

    @property
    def fetched(self) -> bool:
        """Whether its test folder is unpacked in the cache."""
        return (self.root / ".complete").exists()


#: The peers whose suites run against ours (see docs/testing.md).
DJANGO = Peer(
    "Django",
    "6.0",
    "7b0c1f50c0759bbe6331c6a39c89ae022a84672674aeda908784617ef47d8e26",
    "django-6.0/tests/tasks",
)
DJANGO_TASKS_RQ = Peer(
    "django-tasks-rq",
    "0.12.0",
    "84020a65d7b92d867f28d3002b4a6b07514eeda99b880ad91bb041d63e2191e0",
    "django_tasks_rq-0.12.0/tests",
)
REDIS_ALLOCATOR = Peer(
    "redis-allocator",
    "0.7.0",
    "c01faf7d00bf0d6925a6c6f90f85bf465566884333c2e76099bdedf7e0276cbf",
    "redis_allocator-0.7.0/tests",
)
PEERS = (DJANGO, DJANGO_TASKS_RQ, REDIS_ALLOCATOR)


@contextlib.contextmanager
def _cache_lock() -> Iterator[None]:
    """One process at a time fetches and unpacks (pytest-xdist's workers collect at once)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as handle:
        if fcntl is not None:
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(handle, fcntl.LOCK_UN)


def fetch(peer: Peer) -> Path:
    """The unpacked test folder of ``peer``, fetched from PyPI on first use
    (with every other peer not fetched yet: one wait for all, in parallel).
    Raises :class:`PeerUnavailable` (saying what failed) when it cannot be
    had; a test run tries once (its other xdist workers read the failure)."""
    if not peer.fetched:
        with _cache_lock():
            missing = [p for p in dict.fromkeys((peer, *PEERS)) if not p.fetched]
            known = {p: _failure(p) for p in missing}
            downloads = [(p, _start_download(p)) for p in missing if known[p] is None]
            for each, download in downloads:
                try:
                    _finish_download(each, download)
                except PeerUnavailable as exc:
                    known[each] = str(exc)
                    _failure_file(each).write_text(f"{_RUN}\n{exc}")
            if known.get(peer):
                raise PeerUnavailable(known[peer])
    return peer.directory


#: This test run (pytest-xdist's workers share its id) or process.
_RUN = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"pid-{os.getpid()}"


def _failure_file(peer: Peer) -> Path:
    return peer.root.with_name(peer.root.name + ".failed")


def _failure(peer: Peer) -> str | None:
    """The message of this run's failed fetch of ``peer``, if it had one."""
    try:
        run, _, message = _failure_file(peer).read_text().partition("\n")
    except OSError:
        return None
    return message if run == _RUN else None


def _start_download(peer: Peer) -> tuple[subprocess.Popen[str], Path]:
    """Start ``pip download`` of the sdist (hash-checked) into its own folder."""
    scratch = peer.root.with_name(peer.root.name + ".download")
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    requirements = scratch / "requirements.txt"
    requirements.write_text(f"{peer.requirement} --hash=sha256:{peer.sha256}\n")
    # (--python-version: Django 6's sdist is fetched on Python 3.10/3.11 too;
    # its tests are read, not run, there)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--disable-pip-version-check",
        "--no-deps",
        "--no-binary",
        ":all:",
        "--python-version",
        "3.12",
        "--require-hashes",
        *PIP_NETWORK,
        "-r",
        str(requirements),
        "-d",
        str(scratch),
    ]
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return process, scratch


def _finish_download(peer: Peer, download: tuple[subprocess.Popen[str], Path]) -> None:
    """Wait for the download, unpack the test folder, mark it complete."""
    process, scratch = download
    output, _ = process.communicate()
    try:
        if process.returncode != 0:
            lines = [line for line in output.splitlines() if line.strip()]
            detail = "\n".join(lines[-8:])
            raise PeerUnavailable(
                f"could not fetch the sdist of {peer.requirement} from PyPI (the conformance "
                f"tests run the peers' own test suites, fetched at test time: this needs "
                f"access to PyPI once, then they are kept in {CACHE}). pip said:\n{detail}"
            )
        archive_path = scratch / f"{_sdist_stem(peer)}.tar.gz"
        if not archive_path.exists():
            raise PeerUnavailable(f"pip fetched {peer.requirement}, but {archive_path} is missing")
        prefix = peer.tests.rstrip("/") + "/"
        with tarfile.open(archive_path) as archive:
            members = [m for m in archive.getmembers() if m.name.startswith(prefix) and m.isfile()]
            if not members:
                raise PeerUnavailable(f"the sdist of {peer.requirement} has no {peer.tests}/")
            shutil.rmtree(peer.root, ignore_errors=True)
            if hasattr(tarfile, "data_filter"):
                archive.extractall(peer.root, members=members, filter="data")
            else:  # pragma: no cover - a Python without PEP 706 (the names were checked)
                archive.extractall(peer.root, members=members)
        (peer.root / ".complete").write_text(peer.sha256 + "\n")
        _failure_file(peer).unlink(missing_ok=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _sdist_stem(peer: Peer) -> str:
    """The sdist's file name without its extension (``django-6.0``,
    ``redis_allocator-0.7.0``): PEP 625 normalises the name."""
    return f"{re.sub(r'[-_.]+', '_', peer.name).lower()}-{peer.version}"


# -- importing a peer's test files ----------------------------------------------------


@dataclass(frozen=True)
class Rewrite:
    """A substitution applied to a peer's source before it is compiled: the
    regular expression ``pattern`` is replaced by ``replacement``."""

    pattern: str
    replacement: str

    def apply(self, source: str) -> str:
        """``source`` with every match replaced."""
        return re.sub(self.pattern, self.replacement, source, flags=re.MULTILINE)


class PeerPackage(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports the ``.py`` files of ``directory`` as package ``name`` (and its
    modules ``name.x``), each after ``rewrites``. Install it with
    :meth:`install` (idempotent: the first one for a name stays)."""

    def __init__(self, name: str, directory: Path, rewrites: Sequence[Rewrite]) -> None:
        self.name = name
        self.directory = directory
        self.rewrites = tuple(rewrites)

    def install(self) -> PeerPackage:
        """Put it first on ``sys.meta_path`` (the one already there for the name, if any)."""
        for finder in sys.meta_path:
            if isinstance(finder, PeerPackage) and finder.name == self.name:
                return finder
        sys.meta_path.insert(0, self)
        return self

    def import_module(self, module: str) -> ModuleType:
        """``name.module`` (imported once)."""
        return importlib.import_module(f"{self.name}.{module}")

    # -- importlib ---------------------------------------------------------------

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname == self.name:
            spec = importlib.util.spec_from_loader(fullname, self, is_package=True)
            assert spec is not None
            spec.submodule_search_locations = [str(self.directory)]
            spec.origin = str(self.directory / "__init__.py")
            return spec
        package, _, module = fullname.rpartition(".")
        if package != self.name or not (self.directory / f"{module}.py").is_file():
            return None
        spec = importlib.util.spec_from_loader(fullname, self)
        assert spec is not None
        spec.origin = str(self.directory / f"{module}.py")
        spec.has_location = True
        return spec

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        path = Path(module.__spec__.origin)  # type: ignore[union-attr]
        if not path.is_file():  # a package without __init__.py
            return
        module.__file__ = str(path)
        source = path.read_text(encoding="utf-8")
        for rewrite in self.rewrites:
            source = rewrite.apply(source)
        exec(_compile(source, path), module.__dict__)


def _compile(source: str, path: Path) -> Any:
    """``source`` compiled, with pytest's assertion rewriting when available
    (it is internal API, so a pytest without it compiles the plain source)."""
    import ast

    tree = ast.parse(source, filename=str(path))
    try:
        from _pytest.assertion.rewrite import rewrite_asserts

        rewrite_asserts(tree, source.encode(), str(path), None)
    except Exception:  # (internal API changed: plain asserts)
        tree = ast.parse(source, filename=str(path))
    return compile(tree, str(path), "exec", dont_inherit=True)
