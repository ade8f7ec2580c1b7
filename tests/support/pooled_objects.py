"""Factory, destroy and validate of the object pools configured in the tests."""

from __future__ import annotations

import itertools
from typing import Any

_numbers = itertools.count(1)
closed: list[Any] = []


class Client:
    def __init__(self) -> None:
        self.number = next(_numbers)
        self.alive = True


def make() -> Client:
    return Client()


def close(client: Client) -> None:
    client.alive = False
    closed.append(client)


def is_alive(client: Client) -> bool:
    return client.alive
