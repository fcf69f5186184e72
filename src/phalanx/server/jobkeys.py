"""Jobs' credentials: the API key the pods of one attempt of a job act with, as its owner.

A job's credential is ``phj_<mac>_<attempt>_<job>``, where ``mac`` is HMAC-SHA256, under
a secret derived from the state directory's key pepper, of the job's name, the attempt,
the job's owner and when it was submitted. It is derived, not stored, so:

- the store holds nothing of it, not even a hash: a copy of the store (or of a job's
  record, events or logs) gives no one a credential;
- a control plane that restarts mid-run derives the same key and keeps honouring the
  running pods' file, and a launch repeated for the same attempt (launches are
  idempotent) hands out the very key the first pods have, never a second one;
- it names its job and attempt, so the control plane checks, at the exchange and on
  every request made with its tokens, that this attempt is still the job's current one
  and still running: it stops working when the attempt ends, however it ends (succeeded,
  failed, cancelled, preempted, requeued), without anything to revoke;
- the owner and submit time in the MAC keep a credential of a finished job from opening
  a later job that reuses its name and reaches the same attempt number.

Exchanged like any API key at ``POST /v1/auth/token`` (``server/auth.py``), its tokens act
as the owner, minus what only admins may do (``Principal.check_person``).
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Callable

from phalanx.server.keys import KeyHasher
from phalanx.spec.status import JobRecord

JOB_KEY_PREFIX = "phj_"
_JOB_KEY = re.compile(r"^phj_([0-9a-f]{64})_([0-9]{1,9})_([a-z0-9]([-a-z0-9]*[a-z0-9])?)$")

# The record of job ``name`` while ``attempt`` is its current, running attempt (not being
# stopped); None otherwise. Read on every request a job's token makes.
AttemptLookup = Callable[[str, int], JobRecord | None]


def job_of_key(key: str) -> tuple[str, int] | None:
    """The job and attempt a job's credential names, or None if ``key`` is not one."""
    match = _JOB_KEY.match(key)
    return (match.group(3), int(match.group(2))) if match else None


class JobKeys:
    """Derives and checks jobs' credentials."""

    def __init__(self, hasher: KeyHasher) -> None:
        # Its own secret, so a job's MAC can never equal an API key's stored hash.
        self._secret = hmac.new(hasher.pepper, b"phalanx job credentials", hashlib.sha256
                                ).digest()

    def _mac(self, record: JobRecord, attempt: int) -> str:
        # repr: the shortest text that reads back as the same float, as the stored JSON does.
        message = "\0".join((record.name, str(attempt), record.user, repr(record.submitted_at)))
        return hmac.new(self._secret, message.encode(), hashlib.sha256).hexdigest()

    def key_for(self, record: JobRecord, attempt: int) -> str:
        """The credential of ``record``'s ``attempt`` (the same every time it is asked)."""
        return f"{JOB_KEY_PREFIX}{self._mac(record, attempt)}_{attempt}_{record.name}"

    def matches(self, key: str, record: JobRecord, attempt: int) -> bool:
        return hmac.compare_digest(key, self.key_for(record, attempt))
