"""Partial admission: the size a job with minReplicas runs at when its full size cannot.

As in Kueue, a job is first judged at its full size, admitted or preempted for; only
when neither works is it shrunk, to the largest size down to minReplicas that fits or
that preemption can make room for. The flavor assigner searches the sizes
(``Assigner.reduce``); the preemptor says whether preemption makes room at each.
"""

from __future__ import annotations

from phalanx.scheduler.cache import QueueInfo
from phalanx.scheduler.flavorassigner.flavors import FIT, NOFIT, Assigner, Assignment
from phalanx.scheduler.preemption.preemptor import Outcome, Preemptor
from phalanx.scheduler.workload import Workload


def shrink_to_admit(assigner: Assigner, preemptor: Preemptor, wl: Workload, info: QueueInfo
                    ) -> tuple[Assignment, Outcome | None] | None:
    """The largest size down to minReplicas that fits (None for the outcome) or that
    preemption makes room for (with the preemption's outcome); None when no size does."""
    made_room: list[tuple[Assignment, Outcome]] = []

    def admissible(trial: Assignment) -> bool:
        if trial.no_flavor or trial.mode == NOFIT:
            return False
        if trial.mode == FIT and trial.placement is not None:
            return True
        outcome = preemptor.find(wl, info, trial)
        if outcome.targets:
            made_room.append((trial, outcome))
            return True
        return False

    smaller = assigner.reduce(wl, info, admissible)
    if smaller is None:
        return None
    for trial, outcome in made_room:
        if trial is smaller:
            return smaller, outcome
    return smaller, None
