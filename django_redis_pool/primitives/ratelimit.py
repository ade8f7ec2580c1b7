"""STAND-IN for the rate limiter another branch (h-rate) writes: the same API
(API.md, "RateLimiter"), a plain GCRA in one EVAL, so that the Django layer can
be built and tested meanwhile. Replaced by that branch's module at merge.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass
from typing import Any

from ..exceptions import backend_errors
from ._common import key_prefix as make_prefix
from ._common import text
from .base import DEFAULT_KEY_PREFIX
from .validators import check_name

__all__ = ["Decision", "KeyState", "RateLimiter"]


@dataclass(frozen=True)
class Decision:
    allowed: bool
    remaining: int
    retry_after: float
    reset_after: float
    limit: int
    waited: float = 0.0


@dataclass(frozen=True)
class KeyState:
    key: str
    remaining: float
    retry_after: float
    reset_after: float


_DECIDE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local interval, burst, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local new_tat = tat + cost * interval
local allow_at = new_tat - burst * interval
if allow_at > now then
  return {0, math.floor((burst * interval - (tat - now)) / interval), allow_at - now, tat - now}
end
redis.call('SET', KEYS[1], new_tat, 'PX', math.max(1, new_tat - now))
redis.call('ZADD', KEYS[2], new_tat, ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
return {1, math.floor((burst * interval - (new_tat - now)) / interval), 0, new_tat - now}
"""
_READ = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local out = {now, redis.call('ZCARD', KEYS[1])}
if tonumber(ARGV[1]) > 0 then
  local rows = redis.call('ZREVRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1, 'WITHSCORES')
  for _, v in ipairs(rows) do out[#out + 1] = v end
end
return out
"""


class RateLimiter:
    kind = "ratelimit"

    def __init__(
        self,
        client: Any,
        name: str,
        *,
        rate: int,
        per: float,
        burst: int | None = None,
        key_prefix: str = DEFAULT_KEY_PREFIX,
    ) -> None:
        self.client = client
        self.name = check_name(name)
        self.rate, self.per = rate, per
        self.burst = rate if burst is None else burst
        self._prefix = make_prefix(key_prefix, self.kind, self.name)
        self._interval = per * 1000 / rate

    def _keys(self, key: str) -> list[str]:
        return [f"{self._prefix}:k:{key}", f"{self._prefix}:keys"]

    def _once(self, key: str, cost: int) -> Decision:
        with backend_errors():
            reply = self.client.eval(
                _DECIDE, 2, *self._keys(key), self._interval, self.burst, cost, key
            )
        allowed, remaining, retry_ms, reset_ms = (float(x) for x in reply)
        return Decision(
            bool(allowed), max(0, int(remaining)), retry_ms / 1000, reset_ms / 1000, self.burst
        )

    def decide(self, key: str = "", *, cost: int = 1, timeout: float | None = 0) -> Decision:
        started = time.monotonic()
        while True:
            decision = self._once(key, cost)
            waited = time.monotonic() - started
            if decision.allowed or cost > self.burst:
                break
            left = None if timeout is None else timeout - waited
            if left is not None and decision.retry_after > left:
                break
            time.sleep(decision.retry_after)
        return Decision(
            decision.allowed,
            decision.remaining,
            decision.retry_after,
            decision.reset_after,
            decision.limit,
            waited,
        )

    async def adecide(self, key: str = "", *, cost: int = 1, timeout: float | None = 0) -> Decision:
        return await asyncio.to_thread(self.decide, key, cost=cost, timeout=timeout)

    def acquire(self, key: str = "", *, cost: int = 1, timeout: float | None = 0) -> bool:
        return self.decide(key, cost=cost, timeout=timeout).allowed

    async def aacquire(self, key: str = "", *, cost: int = 1, timeout: float | None = 0) -> bool:
        return (await self.adecide(key, cost=cost, timeout=timeout)).allowed

    def status(self, key: str = "") -> tuple[float, float]:
        with backend_errors():
            now_s, now_us = self.client.time()
            tat = self.client.get(self._keys(key)[0])
        now = now_s * 1000 + now_us // 1000
        tat = max(now, float(text(tat) or 0))
        left = (self.burst * self._interval - (tat - now)) / self._interval
        retry = max(0.0, tat + self._interval - self.burst * self._interval - now) / 1000
        return left, retry

    async def astatus(self, key: str = "") -> tuple[float, float]:
        return await asyncio.to_thread(self.status, key)

    def reset(self, key: str = "") -> bool:
        keys = self._keys(key)
        with backend_errors():
            pipe = self.client.pipeline(transaction=False)
            pipe.delete(keys[0])
            pipe.zrem(keys[1], key)
            deleted, _ = pipe.execute()
        return bool(deleted)

    async def areset(self, key: str = "") -> bool:
        return await asyncio.to_thread(self.reset, key)

    def _read(self, limit: int) -> list[Any]:
        with backend_errors():
            return [text(x) for x in self.client.eval(_READ, 1, self._keys("")[1], limit)]

    def busiest(self, limit: int = 20) -> list[KeyState]:
        reply = self._read(limit)
        now, states = float(reply[0]), []
        for key, score in zip(reply[2::2], reply[3::2], strict=True):
            tat = float(score)
            left = (self.burst * self._interval - (tat - now)) / self._interval
            retry = max(0.0, tat + self._interval - self.burst * self._interval - now) / 1000
            states.append(KeyState(key, math.floor(left * 1000) / 1000, retry, (tat - now) / 1000))
        return states

    def active_count(self) -> int:
        return int(self._read(0)[1])

    def activity(self, minutes: int = 0) -> Any:
        from .counts import Activity

        return Activity()
