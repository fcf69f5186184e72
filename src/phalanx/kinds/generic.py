"""``kind: generic``: a gang of processes with Phalanx's own environment and nothing more.

Each pod runs its pod set's command and sees ``RANK``, ``WORLD_SIZE`` (pods) and
the ``PHALANX_*`` names (``env.py``); the job succeeds when every pod does and
fails, as a unit, when one fails.
"""

from __future__ import annotations

from phalanx.kinds.base import Framework
from phalanx.spec.resources import JobKind


class Generic(Framework):
    kind = JobKind.GENERIC
