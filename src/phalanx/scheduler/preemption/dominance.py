"""Skipping pending jobs that cannot fit because a smaller one just did not.

Within one cycle a ClusterQueue's free quota and the nodes' free room only shrink
as jobs are admitted (preemption victims keep their capacity until they are gone).
So when a job fails, any later job of the same queue that asks for at least as much
of everything, on the same nodes, under a constraint at least as strict, at a
priority no higher (so with no more preemption candidates), fails too. Deep queues
are mostly such jobs: one failure settles most of the queue for the cycle, and the
expensive part of an evaluation (flavor assignment, node placement, the preemption
search) is skipped for them.

The dominated job gets a reason of its own: the same code as the failed job, its
own demand, and the failed job's numbers.
"""

from __future__ import annotations

from phalanx.scheduler.flavorassigner.flavors import Assignment
from phalanx.scheduler.types import PendingReason
from phalanx.scheduler.workload import Workload
from phalanx.spec.quantity import format_amount

# Failed jobs remembered per ClusterQueue and cycle; the smallest ones settle the most.
FRONTIER_SIZE = 8

# The capacity versions a job failed at, whose change could let it (and the jobs it settles)
# through: (tree version or None, node version or None).
BlockStamp = tuple[int | None, int | None]


class Demand:
    """What dominance compares, computed once per job. (Plain classes here: one is made
    per job and per failure, and a dataclass's constructor runs as Python when compiled.)"""

    __slots__ = ("least", "most", "required", "structure")

    def __init__(self, structure: int, least: tuple[int, ...], most: tuple[int, ...],
                 required: str | None) -> None:
        self.structure = structure  # pod-set names, selectors, tolerations, resources (interned)
        # The fewest pods each pod set can run with, then every per-pod amount in
        # ``structure``'s order; ``most`` has the pods each pod set asks for instead. One
        # flat vector each, so comparing two jobs is a single loop.
        self.least = least
        self.most = most
        self.required = required  # topology level the gang must share, if any


class Demands:
    """Each job's demand, built on first use and kept while the job is known: a structure
    gets a new number once the table of numbers is cleared, so building it again could
    give a job that settled others a number they do not share."""

    __slots__ = ("by_job",)

    def __init__(self) -> None:
        self.by_job: dict[Workload, Demand] = {}

    def of(self, wl: Workload) -> Demand:
        found = self.by_job.get(wl)
        if found is None:
            found = self.by_job[wl] = demand_of(wl)
        return found

    def forget(self, wl: Workload) -> None:
        self.by_job.pop(wl, None)


class _Numbers:
    """A number per structure seen: comparing two jobs' numbers is one integer comparison
    where the structures are nested tuples. Numbers are never reused, so when the table is
    cleared (it is bounded) a structure seen again merely gets a new one, and jobs numbered
    before and after just do not settle each other."""

    def __init__(self, limit: int = 10_000) -> None:
        self.limit = limit
        self.table: dict[tuple[object, ...], int] = {}
        self.last = 0

    def of(self, structure: tuple[object, ...]) -> int:
        number = self.table.get(structure)
        if number is None:
            if len(self.table) >= self.limit:
                self.table.clear()
            self.last += 1
            number = self.table[structure] = self.last
        return number


_STRUCTURES = _Numbers()


def demand_of(wl: Workload) -> Demand:
    structure = tuple(
        (p.name, p.selector, p.tolerations, tuple(r for r, _ in p.requests)) for p in wl.pod_sets
    )
    amounts = tuple(v for p in wl.pod_sets for _, v in p.requests)
    return Demand(
        structure=_STRUCTURES.of(structure),
        least=tuple(p.min_count for p in wl.pod_sets) + amounts,
        most=tuple(p.count for p in wl.pod_sets) + amounts,
        required=wl.topology.required if wl.topology is not None else None,
    )


def covers(big: Demand, small: Demand) -> bool:
    """Whether every way of admitting ``big`` contains a way of admitting ``small``."""
    if big.structure != small.structure:
        return False
    if small.required is not None and small.required != big.required:
        return False
    # ``small`` failed at every size up to its full count; ``big`` never asks for fewer pods,
    # nor less per pod. (Equal structures: the vectors have the same length.)
    least, most = big.least, small.most
    return all(least[i] >= most[i] for i in range(len(least)))


class Failure:
    __slots__ = ("demand", "reason", "short", "stamp", "wl")

    def __init__(self, wl: Workload, demand: Demand, reason: PendingReason,
                 stamp: BlockStamp | None, short: tuple[str, str] | None) -> None:
        self.wl = wl
        self.demand = demand
        self.reason = reason
        self.stamp = stamp
        self.short = short  # (flavor, resource) of the first quota shortfall


class Frontier:
    """The failed jobs of one ClusterQueue in this cycle."""

    __slots__ = ("demands", "failures")

    def __init__(self, demands: Demands) -> None:
        self.demands = demands
        self.failures: list[Failure] = []

    def add(self, wl: Workload, reason: PendingReason, stamp: BlockStamp | None,
            a: Assignment | None) -> None:
        demand = self.demands.of(wl)
        short = None
        if a is not None and a.shortfalls and not a.no_flavor:
            s = a.shortfalls[0]
            short = (s.flavor, s.resource)
        failure = Failure(wl, demand, reason, stamp, short)
        # A newer failure that is smaller makes the bigger ones it covers redundant.
        kept = [f for f in self.failures if not covers(f.demand, demand)
                or f.wl.priority > wl.priority]
        kept.append(failure)
        self.failures = kept[-FRONTIER_SIZE:]

    def match(self, wl: Workload) -> Failure | None:
        """A failure that settles ``wl`` too, if any."""
        if not self.failures:
            return None
        demand = self.demands.of(wl)
        priority = wl.priority
        for f in self.failures:
            # No higher priority, and not older at equal priority: never more candidates
            # to preempt than the failed job had.
            other = f.wl
            if other.priority < priority or (other.priority == priority and (
                    other.submitted_at > wl.submitted_at or (
                        other.submitted_at == wl.submitted_at and other.seq >= wl.seq))):
                continue
            if covers(demand, f.demand):
                return f
        return None


def settled_reason(wl: Workload, failure: Failure) -> PendingReason:
    """``wl``'s own reason, given the smaller job whose failure settles it."""
    message = failure.reason.message
    if failure.short is not None and message.startswith("needs ") and "; " in message:
        flavor, resource = failure.short
        need = sum(p.count * v for p in wl.pod_sets for r, v in p.requests if r == resource)
        rest = message.split("; ", 1)[1]
        return PendingReason(
            failure.reason.code,
            f"needs {format_amount(need, resource)} {resource} of {flavor}; {rest}",
        )
    return PendingReason(
        failure.reason.code,
        f"asks for no less than {failure.wl.name}, which does not fit either: {message}",
    )
