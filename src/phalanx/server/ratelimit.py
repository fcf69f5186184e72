"""Bounding failed API key exchanges, by what was tried and by where it came from.

A failure counts against what it tried: the key's id when that names a key in force or
known (a stored key, a running attempt's credential, the bootstrap key), so guessing one
key's secret is limited however many addresses it comes from; otherwise (an id no key
has, or no id at all) against the client's address. Each has a bucket of ``burst``
failures that refills at ``per_minute``; a failure beyond it is answered 429 instead of
401 and is not written to the audit log.

Only failures are limited: a correct key always exchanges, whatever failed before it
from its address or for its id, so one pod sending wrong keys never refuses another
principal (nor the same one). Keys have 256 random bits, so this is not what keeps them
safe; it keeps a guesser from filling the audit log and tells a broken client to stop.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from phalanx.errors import TooManyRequests

# Buckets tracked at most; the least recently failing are forgotten first.
MAX_BUCKETS = 100_000


@dataclass(frozen=True, slots=True)
class FailureLimits:
    burst: int = 10
    per_minute: float = 10.0


def tried_key(key_id: str) -> str:
    """The bucket of failures that tried the key ``key_id``."""
    return f"key {key_id}"


def tried_from(client: str) -> str:
    """The bucket of failures from ``client`` that named no known key."""
    return f"address {client}"


class FailureLimiter:
    def __init__(self, limits: FailureLimits | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits or FailureLimits()
        self.clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # level, at
        self._lock = threading.Lock()

    def _level(self, bucket: str, now: float) -> float:
        level, at = self._buckets.get(bucket, (float(self.limits.burst), now))
        return min(float(self.limits.burst), level + (now - at) * self.limits.per_minute / 60)

    def failed(self, bucket: str) -> None:
        """Count a failure against ``bucket``; TooManyRequests (counting nothing) if it
        has no failures left."""
        with self._lock:
            now = self.clock()
            level = self._level(bucket, now)
            if level >= 1:
                self._buckets[bucket] = (level - 1, now)
                self._buckets.move_to_end(bucket)
                while len(self._buckets) > MAX_BUCKETS:
                    self._buckets.popitem(last=False)
                return
        wait = (1 - level) * 60 / self.limits.per_minute
        raise TooManyRequests(
            f"too many failed key exchanges for {bucket}", field="key",
            fix=f"check the key (`phalanx login` again) and retry in {wait:.0f}s; a correct "
                "key is never refused for others' failures")
