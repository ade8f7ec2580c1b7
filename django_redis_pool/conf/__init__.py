"""The ``DJANGO_REDIS_POOL`` setting: its shape, its defaults, and the one place
it is validated.

A parser of the values it is given: nothing here reads Django's settings or
knows which kinds exist. The registry (:func:`..registry.settings_report`) reads
the setting (and ``CACHES``, ``MIDDLEWARE`` and the proxy settings) lazily,
never at import time, and passes them in with its list of kinds.

* :mod:`.schema`: the keys, the defaults, what a valid setting becomes
  (:class:`Config`), what is wrong with an invalid one (:class:`Finding`, whose
  ids ``docs/checks.md`` lists), and the validators of the request options.
* :mod:`.reading`: :func:`setting_report`, one pass over the whole setting that validates
  it and builds its :class:`Config`, given the kinds. The system checks report
  its findings; the registry builds from its config (or raises
  ``ImproperlyConfigured`` with its errors).
* :mod:`.connection`: ``CONNECTION``, checked without connecting.

Each kind of primitive brings the key of its mapping in the setting and the options
an entry accepts (with a validator and a default each) in its module of
:mod:`..kinds`; :func:`setting_report` validates entries with the kinds it is given.
"""

from __future__ import annotations

# The package re-exports the names of both modules, each listed once: in its
# module's ``__all__``. The star imports are deliberate (F403): ``__all__``
# below is built from the two lists, so adding a name to a module exports it here.
from . import reading, schema
from .reading import *  # noqa: F403
from .schema import *  # noqa: F403

__all__ = [*reading.__all__, *schema.__all__]
