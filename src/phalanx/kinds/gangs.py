"""What one attempt's pods mean for its job: a gang starts, runs, succeeds and fails as one."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from phalanx.kinds.pods import PodPhase, PodState, failure_text


class GangPhase(StrEnum):
    STARTING = "Starting"  # launched, not every pod running yet
    RUNNING = "Running"  # every pod running (or already succeeded)
    SUCCEEDED = "Succeeded"  # every pod succeeded
    FAILED = "Failed"  # at least one pod failed on its own: the gang fails as a unit
    STOPPED = "Stopped"  # every pod is done (after a stop was requested)


@dataclass(frozen=True, slots=True)
class GangStatus:
    phase: GangPhase
    all_done: bool
    failure: str | None = None  # "user" | "system" when FAILED
    message: str = ""
    exit_code: int | None = None


def gang_status(pods: list[PodState], expected: int) -> GangStatus:
    """Summarise one attempt's pods; ``expected`` is how many the admission placed."""
    done = [p for p in pods if p.phase.done]
    all_done = len(pods) >= expected and len(done) == len(pods)
    failed = [p for p in pods if p.phase is PodPhase.FAILED and p.failure is not None]
    if failed:
        # A system failure anywhere means the gang was not at fault.
        first = next((p for p in failed if p.failure == "system"), failed[0])
        message = f"pod {first.ref.name} failed ({failure_text(first)})"
        return GangStatus(
            GangPhase.FAILED, all_done, first.failure, message, first.exit_code
        )
    if pods and all_done and all(p.phase is PodPhase.SUCCEEDED for p in pods):
        return GangStatus(GangPhase.SUCCEEDED, True, exit_code=0)
    if all_done and pods:
        return GangStatus(GangPhase.STOPPED, True)
    running = sum(1 for p in pods if p.phase in (PodPhase.RUNNING, PodPhase.SUCCEEDED))
    if len(pods) >= expected and running == len(pods):
        return GangStatus(GangPhase.RUNNING, False)
    return GangStatus(GangPhase.STARTING, False)
