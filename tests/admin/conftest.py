"""The admin tests' fixtures, for every module here: the configured world, the
logged-in users and the waiter thread (:mod:`tests.support.admin_fixtures`)."""

from tests.support.admin_fixtures import (  # noqa: F401 (fixtures)
    configured,
    login,
    operator,
    viewer,
    waiter,
    world,
)
