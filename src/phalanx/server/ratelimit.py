"""Bounding failed API key exchanges per client address (a brute-force guard).

Each client address has a bucket of ``burst`` failures that refills at ``per_minute``;
while it is empty, every exchange from that address is refused with 429 before its key
is even looked at. Keys have 256 random bits, so this is not what keeps them safe; it
keeps a guesser from loading the store and filling the audit log.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from phalanx.errors import TooManyRequests

# Addresses tracked at most; the least recently failing are forgotten first.
MAX_CLIENTS = 100_000


@dataclass(frozen=True, slots=True)
class FailureLimits:
    burst: int = 10
    per_minute: float = 10.0


class FailureLimiter:
    def __init__(self, limits: FailureLimits | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits or FailureLimits()
        self.clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # level, at
        self._lock = threading.Lock()

    def _level(self, client: str, now: float) -> float:
        level, at = self._buckets.get(client, (float(self.limits.burst), now))
        return min(float(self.limits.burst), level + (now - at) * self.limits.per_minute / 60)

    def check(self, client: str) -> None:
        """TooManyRequests if ``client`` has used up its failures."""
        with self._lock:
            level = self._level(client, self.clock())
        if level < 1:
            wait = (1 - level) * 60 / self.limits.per_minute
            raise TooManyRequests(
                f"too many failed key exchanges from {client}", field="key",
                fix=f"check the key (`phalanx login` again) and retry in {wait:.0f}s")

    def failed(self, client: str) -> None:
        with self._lock:
            now = self.clock()
            self._buckets[client] = (self._level(client, now) - 1, now)
            self._buckets.move_to_end(client)
            while len(self._buckets) > MAX_CLIENTS:
                self._buckets.popitem(last=False)
