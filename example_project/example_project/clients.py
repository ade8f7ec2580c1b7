"""A stand-in for an HTTP client with a connection (what the example's object
pool keeps alive between requests)."""

import itertools

_numbers = itertools.count(1)


class HttpClient:
    """Pretends to hold a keep-alive connection."""

    def __init__(self) -> None:
        self.number = next(_numbers)
        self.requests = 0

    def get(self, url: str) -> str:
        self.requests += 1
        return f"client #{self.number} fetched {url} (its request #{self.requests})"


def connect() -> HttpClient:
    return HttpClient()
