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

The gate reads jobs through a lookup and changes none: it returns what each job does
(``GateDecision``), and the control state applies that. Every method runs with the state's
lock held.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from phalanx.errors import SpecError
from phalanx.spec.resources import Dependency, JobSpec
from phalanx.spec.status import JobRecord, JobStatus

WAITING = "WaitingForDependencies"
Outcome = Literal["met", "failed", "waiting"]
# A job by name: live, being saved, or finished in the store; None when there is none.
Lookup = Callable[[str], JobRecord | None]


@dataclass(frozen=True, slots=True)
class GateDecision:
    """What ``record`` does now:

    - ``queue``: join the scheduler (no dependency held it);
    - ``release``: join the scheduler, its last dependency having ended as it asks
      (``message``: why);
    - ``fail``: fail with ``message`` (a dependency ended otherwise);
    - ``wait``: stay Queued outside the scheduler, pending reason ``message``;
    - ``progress``: still waiting, one dependency fewer (``message``: which ended, and
      the new pending reason).
    """

    record: JobRecord
    action: Literal["queue", "release", "fail", "wait", "progress"]
    message: str = ""
    pending: str = ""  # the pending reason, for ``wait`` and ``progress``


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


def status_of(lookup: Lookup, name: str) -> JobStatus | None:
    record = lookup(name)
    return None if record is None else record.status


class DependencyGate:
    def __init__(self) -> None:
        self.waiting: dict[str, dict[str, str]] = {}  # job -> unmet dependency -> condition
        self.dependents: dict[str, set[str]] = defaultdict(set)  # dependency -> waiting jobs

    def enter(self, record: JobRecord, lookup: Lookup) -> GateDecision | None:
        """A new (or reloaded, never admitted) job: queued, held or failed, by the current
        statuses of its dependencies (None: held as it was, nothing to tell)."""
        unmet: dict[str, str] = {}
        for dep in record.spec.depends_on:
            found = lookup(dep.job)
            result = outcome(dep.condition, None if found is None else found.status)
            if result == "failed":
                assert found is not None
                return GateDecision(record, "fail", failure_message(found))
            if result == "waiting":
                unmet[dep.job] = dep.condition
        if not unmet:
            if record.pending_code == WAITING:  # its last dependency ended since it was stored
                return GateDecision(record, "release", "every dependency has ended as it asks")
            return GateDecision(record, "queue")
        self.waiting[record.name] = unmet
        for job in unmet:
            self.dependents[job].add(record.name)
        message = waiting_message(unmet)
        if (record.pending_code, record.pending_message) != (WAITING, message):
            return GateDecision(record, "wait", message, pending=message)
        return None

    def ended(self, record: JobRecord, live: Callable[[str], JobRecord | None]
              ) -> list[GateDecision]:
        """``record`` reached a terminal status: what the jobs that wait for it do
        (``live``: a live job by name)."""
        self._forget(record.name)
        decisions: list[GateDecision] = []
        for name in sorted(self.dependents.pop(record.name, ())):
            dependent = live(name)
            unmet = self.waiting.get(name)
            if dependent is None or unmet is None or record.name not in unmet:
                continue
            condition = unmet.pop(record.name)
            if outcome(condition, record.status) == "failed":
                decisions.append(GateDecision(dependent, "fail", failure_message(record)))
            elif unmet:
                pending = waiting_message(unmet)
                decisions.append(GateDecision(
                    dependent, "progress",
                    f"job {record.name} ended {record.status.value}; {pending}", pending))
            else:
                del self.waiting[name]
                decisions.append(GateDecision(
                    dependent, "release", f"job {record.name} ended {record.status.value}"))
        return decisions

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


def check_new(lookup: Lookup, record: JobRecord, submitted: set[str],
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
        found = lookup(dep.job)
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
