"""Jobs that wait for other jobs (``dependsOn``): the gate in front of the scheduler.

A job whose dependencies have not ended stays Queued with the pending reason
"waiting for job X", but is not offered to the scheduler: it holds no quota and
is never the head that blocks a StrictFIFO queue. The moment its last dependency
ends as it asks, it joins the scheduler (an event says so); when one ends
otherwise under the Succeeded condition, it fails, and its own dependents with it.

Nothing about waiting is stored. Which jobs wait is derived from the stored jobs'
statuses: at submit, and again when a restarted control plane loads its jobs. A
job that was ever admitted had its dependencies met, so only never-admitted jobs
pass the gate.

Every method runs with the state's lock held.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from phalanx.errors import NotFound, SpecError
from phalanx.spec.resources import Dependency, JobSpec
from phalanx.spec.status import JobRecord, JobStatus

if TYPE_CHECKING:
    from phalanx.control.state import ControlState

WAITING = "WaitingForDependencies"
Outcome = Literal["met", "failed", "waiting"]


def outcome(condition: str, status: JobStatus | None) -> Outcome:
    """What a dependency in ``status`` means for its dependent.

    None is a job gone from the store: only finished jobs are deleted, and a dependent
    still queued when its dependency ended would have failed with it had it not been met.
    """
    if status is None:
        return "met"
    if not status.terminal:
        return "waiting"
    return "met" if condition == "Finished" or status is JobStatus.SUCCEEDED else "failed"


def waiting_message(unmet: dict[str, str]) -> str:
    """``waiting for job prep to succeed``, or for several, each with its condition."""
    parts = [f"job {job} to {'succeed' if cond == 'Succeeded' else 'finish'}"
             for job, cond in sorted(unmet.items())]
    return "waiting for " + ", ".join(parts)


def failure_message(dependency: JobRecord) -> str:
    return (f"job {dependency.name} it depends on ended {dependency.status.value}"
            f"{': ' + dependency.message if dependency.message else ''}; it needed that job "
            f"to succeed (dependsOn condition Succeeded; condition Finished runs after any end)")


def record_of(state: ControlState, name: str) -> JobRecord | None:
    """The job ``name``: live from memory, finished from the store, None if there is no
    such job."""
    record = state.jobs.get(name) or state.saving.get(name)
    if record is not None:
        return record
    try:
        return state.store.get_job(name)
    except NotFound:
        return None


def status_of(state: ControlState, name: str) -> JobStatus | None:
    """The status of the job ``name``, None if there is no such job."""
    record = record_of(state, name)
    return None if record is None else record.status


class DependencyGate:
    def __init__(self) -> None:
        self.waiting: dict[str, dict[str, str]] = {}  # job -> unmet dependency -> condition
        self.dependents: dict[str, set[str]] = defaultdict(set)  # dependency -> waiting jobs

    def enter(self, state: ControlState, record: JobRecord) -> None:
        """Queue a new (or reloaded, never admitted) job, hold it, or fail it, by the current
        statuses of its dependencies."""
        unmet: dict[str, str] = {}
        for dep in record.spec.depends_on:
            result = outcome(dep.condition, status_of(state, dep.job))
            if result == "failed":
                failed = state.jobs.get(dep.job) or state.saving.get(dep.job)
                state.finish(record, JobStatus.FAILED, failure_message(
                    failed or state.store.get_job(dep.job)))
                return
            if result == "waiting":
                unmet[dep.job] = dep.condition
        if not unmet:
            if record.pending_code == WAITING:  # its last dependency ended since it was stored
                self._release(state, record, "every dependency has ended as it asks")
            else:
                state.queue(record)
            return
        self.waiting[record.name] = unmet
        for job in unmet:
            self.dependents[job].add(record.name)
        message = waiting_message(unmet)
        if (record.pending_code, record.pending_message) != (WAITING, message):
            record.pending_code, record.pending_message = WAITING, message
            state.event(record, "Waiting", message)

    def ended(self, state: ControlState, record: JobRecord) -> None:
        """``record`` reached a terminal status: settle the jobs that wait for it."""
        self._forget(record.name)
        for name in sorted(self.dependents.pop(record.name, ())):
            dependent = state.jobs.get(name)
            unmet = self.waiting.get(name)
            if dependent is None or unmet is None or record.name not in unmet:
                continue
            condition = unmet.pop(record.name)
            if outcome(condition, record.status) == "failed":
                state.finish(dependent, JobStatus.FAILED, failure_message(record))
            elif unmet:
                dependent.pending_message = waiting_message(unmet)
                state.event(dependent, "DependencyMet",
                            f"job {record.name} ended {record.status.value}; "
                            + dependent.pending_message)
            else:
                del self.waiting[name]
                self._release(state, dependent,
                              f"job {record.name} ended {record.status.value}")

    @staticmethod
    def _release(state: ControlState, record: JobRecord, why: str) -> None:
        record.pending_code = record.pending_message = None
        record.queued_at = state.clock()  # schedulable from now: its admission latency
        state.event(record, "DependenciesMet",
                    f"{why}; every dependency is met, the job is offered to the scheduler")
        state.queue(record)

    def _forget(self, name: str) -> None:
        for job in self.waiting.pop(name, {}):
            waiters = self.dependents.get(job)
            if waiters is not None:
                waiters.discard(name)
                if not waiters:
                    del self.dependents[job]


def cycle_in(dependencies: dict[str, list[Dependency]]) -> list[str] | None:
    """A cycle among the named jobs' dependencies, as the path ``[a, b, a]``, or None.

    Only jobs of ``dependencies`` are followed: jobs submitted before cannot depend on
    new ones, so every cycle lies within one submission.
    """
    done: set[str] = set()
    for start in dependencies:
        if start in done:
            continue
        path: list[str] = []
        on_path: set[str] = set()
        stack: list[tuple[str, int]] = [(start, 0)]
        while stack:
            job, i = stack.pop()
            if i == 0:
                path.append(job)
                on_path.add(job)
            deps = [d.job for d in dependencies.get(job, ()) if d.job in dependencies]
            if i < len(deps):
                stack.append((job, i + 1))
                nxt = deps[i]
                if nxt in on_path:
                    return [*path[path.index(nxt):], nxt]
                if nxt not in done:
                    stack.append((nxt, 0))
            else:
                path.pop()
                on_path.discard(job)
                done.add(job)
    return None


def check_new(state: ControlState, record: JobRecord, submitted: set[str],
              sees: Callable[[JobRecord], bool] | None = None) -> None:
    """Refuse a new job whose dependencies name no job (in the store or among ``submitted``,
    the jobs of its own request) or one that already ended so that it could never run;
    mark it waiting for the others. A job the submitter does not ``sees`` is refused as
    one that does not exist: its name, state and outcome are not the submitter's to learn."""
    unmet: dict[str, str] = {}
    for j, dep in enumerate(record.spec.depends_on):
        if dep.job in submitted:
            unmet[dep.job] = dep.condition
            continue
        found = record_of(state, dep.job)
        if found is not None and sees is not None and not sees(found):
            found = None  # another team's job: answered as no job
        if found is None:
            raise SpecError(
                f"job {dep.job!r} does not exist and is not in this submission",
                field=f"dependsOn[{j}]",
                fix=f"submit {dep.job} first, or in the same request (several documents in "
                    "one file: `phalanx submit -f pipeline.yaml`)",
            )
        status = found.status
        result = outcome(dep.condition, status)
        if result == "failed":
            raise SpecError(
                f"job {dep.job!r} already ended {status.value}, so this job (condition "
                "Succeeded) could never run", field=f"dependsOn[{j}]",
                fix=f"submit {dep.job} again under a new name and depend on that, or use "
                    f"{{job: {dep.job}, condition: Finished}}",
            )
        if result == "waiting":
            unmet[dep.job] = dep.condition
    if unmet:
        record.pending_code, record.pending_message = WAITING, waiting_message(unmet)


def refuse_cycles(specs: list[JobSpec], *, batch: bool) -> None:
    """SpecError naming one dependency of a cycle among the submitted jobs, if any."""
    cycle = cycle_in({spec.name: spec.depends_on for spec in specs})
    if cycle is None:
        return
    i = next(i for i, spec in enumerate(specs) if spec.name == cycle[0])
    j = next(j for j, dep in enumerate(specs[i].depends_on) if dep.job == cycle[1])
    raise SpecError(
        f"dependencies form a cycle: {' -> '.join(cycle)}; none of these jobs could ever run",
        field=(f"items[{i}]." if batch else "") + f"dependsOn[{j}]",
        fix=f"remove {cycle[1]} from the dependsOn of {cycle[0]} (or another link of the cycle)",
    )
