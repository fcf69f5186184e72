"""Builders, a driver loop and random-scenario generators for scheduler tests.

Everything here talks to the scheduler only through the public ``Scheduler``
facade. The ``Driver`` plays the part of the control plane: it submits jobs,
runs cycles, and simulates "the victim's pods terminated" by requeueing every
preempted job after the cycle that preempted it.

Random scenarios are written against a tiny ``Picker`` interface so the same
generator can be driven by hypothesis (shrinkable) or by ``random.Random``
(for replay in a fresh interpreter).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from hypothesis import strategies as st

from phalanx.scheduler import (
    Admission,
    CycleResult,
    PendingReason,
    Preemption,
    Scheduler,
)
from phalanx.spec import (
    GPU,
    ClusterQueue,
    Cohort,
    JobSpec,
    LocalQueue,
    Node,
    PodSet,
    QueueConfig,
    ResourceFlavor,
    Taint,
    Toleration,
    TopologyConstraint,
)
from phalanx.spec.resources import NodeHealth

T = TypeVar("T")

# A quota given as nominal, or (nominal, borrowingLimit, lendingLimit), in whole units
# or Kubernetes strings ("36Gi").
QuotaSpec = int | str | tuple[Any, Any, Any]


# --------------------------------------------------------------------------- builders
def _quota(resource: str, spec: QuotaSpec) -> dict[str, Any]:
    nominal, borrowing, lending = spec if isinstance(spec, tuple) else (spec, None, None)
    out: dict[str, Any] = {"name": resource, "nominalQuota": nominal}
    if borrowing is not None:
        out["borrowingLimit"] = borrowing
    if lending is not None:
        out["lendingLimit"] = lending
    return out


def resource_groups(flavors: dict[str, dict[str, QuotaSpec]]) -> list[dict[str, Any]]:
    """One resource group per distinct set of covered resources, flavors in dict order."""
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for flavor, quotas in flavors.items():
        covered = tuple(quotas)
        groups.setdefault(covered, []).append(
            {"name": flavor, "resources": [_quota(r, q) for r, q in quotas.items()]}
        )
    return [{"coveredResources": list(c), "flavors": f} for c, f in groups.items()]


def cluster_queue(
    name: str,
    flavors: dict[str, dict[str, QuotaSpec]],
    *,
    cohort: str | None = None,
    within: str = "Never",
    reclaim: str = "Never",
    borrow_within: tuple[str, int | None] | None = None,
    strategy: str = "BestEffortFIFO",
    when_can_borrow: str = "Borrow",
    when_can_preempt: str = "TryNextFlavor",
    weight: float = 1.0,
    stop_policy: str = "None",
) -> ClusterQueue:
    preemption: dict[str, Any] = {"withinClusterQueue": within, "reclaimWithinCohort": reclaim}
    if borrow_within is not None:
        policy, threshold = borrow_within
        preemption["borrowWithinCohort"] = {"policy": policy}
        if threshold is not None:
            preemption["borrowWithinCohort"]["maxPriorityThreshold"] = threshold
    return ClusterQueue.model_validate(
        {
            "name": name,
            "cohort": cohort,
            "resourceGroups": resource_groups(flavors),
            "queueingStrategy": strategy,
            "preemption": preemption,
            "flavorFungibility": {
                "whenCanBorrow": when_can_borrow,
                "whenCanPreempt": when_can_preempt,
            },
            "fairSharing": {"weight": weight},
            "stopPolicy": stop_policy,
        }
    )


def cohort(
    name: str,
    *,
    parent: str | None = None,
    flavors: dict[str, dict[str, QuotaSpec]] | None = None,
    weight: float = 1.0,
) -> Cohort:
    return Cohort.model_validate(
        {
            "name": name,
            "parent": parent,
            "resourceGroups": resource_groups(flavors or {}),
            "fairSharing": {"weight": weight},
        }
    )


def flavor(
    name: str, *, taint: Taint | None = None, labels: dict[str, str] | None = None
) -> ResourceFlavor:
    """A flavor matching nodes labelled ``pool=<name>``; a taint comes with its toleration."""
    return ResourceFlavor(
        name=name,
        node_labels=labels if labels is not None else {"pool": name},
        node_taints=[taint] if taint else [],
        tolerations=[Toleration(key=taint.key, value=taint.value, effect=taint.effect)]
        if taint
        else [],
    )


def make_config(*objects: ResourceFlavor | Cohort | ClusterQueue) -> QueueConfig:
    """A validated config with one LocalQueue per ClusterQueue, named like it."""
    local = [
        LocalQueue(name=o.name, cluster_queue=o.name)
        for o in objects
        if isinstance(o, ClusterQueue)
    ]
    return QueueConfig().merged([*objects, *local])


def node(
    name: str,
    *,
    pool: str = "default",
    cpu: Any = 1000,
    memory: Any = "4Ti",
    gpu: Any = 0,
    pods: int | None = None,
    labels: dict[str, str] | None = None,
    taints: Sequence[Taint] = (),
    cordoned: bool = False,
    health: NodeHealth = NodeHealth.HEALTHY,
) -> Node:
    """A node of flavor ``pool``; the defaults make it big enough never to bind."""
    allocatable: dict[str, Any] = {"cpu": cpu, "memory": memory}
    if gpu:
        allocatable[GPU] = gpu
    if pods is not None:
        allocatable["pods"] = pods
    return Node.model_validate(
        {
            "name": name,
            "labels": {"pool": pool, **(labels or {})},
            "taints": [t.model_dump() for t in taints],
            "allocatable": allocatable,
            "unschedulable": cordoned,
            "health": health,
        }
    )


def job(
    name: str,
    queue: str,
    *,
    cpu: Any = 1,
    memory: Any = None,
    gpu: Any = None,
    replicas: int = 1,
    min_replicas: int | None = None,
    topology: TopologyConstraint | None = None,
    pod_sets: Sequence[PodSet] | None = None,
) -> JobSpec:
    """A one-pod-set job (per-pod requests) unless ``pod_sets`` is given."""
    if pod_sets is None:
        requests: dict[str, Any] = {"cpu": cpu}
        if memory is not None:
            requests["memory"] = memory
        if gpu is not None:
            requests[GPU] = gpu
        pod_sets = [
            PodSet.model_validate(
                {"name": "worker", "replicas": replicas, "minReplicas": min_replicas,
                 "resources": requests}
            )
        ]
    return JobSpec(name=name, queue=queue, topology=topology, pod_sets=list(pod_sets))


# --------------------------------------------------------------------------- the driver
@dataclass
class TrackedJob:
    spec: JobSpec
    priority: int
    cluster_queue: str
    submitted_at: float


class QuietTimeout(AssertionError):
    """The scheduler kept admitting or preempting with no new events: a preemption loop."""


@dataclass
class Driver:
    """The control plane's side of the contract, with bookkeeping tests can inspect.

    ``admitted`` holds every job that holds quota, including preempted victims whose
    pods have not terminated yet (those are also in ``victims``).
    """

    config: QueueConfig
    nodes: dict[str, Node]
    scheduler: Scheduler
    clock: float = 0.0
    # Cycles get the clock as the driver's ``now`` (dating admissions, for minRuntime).
    timed: bool = False
    jobs: dict[str, TrackedJob] = field(default_factory=dict)
    admitted: dict[str, Admission] = field(default_factory=dict)
    victims: set[str] = field(default_factory=set)
    results: list[CycleResult] = field(default_factory=list)
    # Every pending job's (code, message) after each cycle.
    reasons: list[dict[str, tuple[str, str]]] = field(default_factory=list)
    preemptions: list[Preemption] = field(default_factory=list)
    ever_admitted: list[str] = field(default_factory=list)
    # Nodes whose allocatable went down (or that left) while jobs may hold room on them.
    shrunk: set[str] = field(default_factory=set)
    # Events other than terminating victims since the last cycle.
    outside_events: int = 0
    # Called after every cycle, before victims are terminated (checks run here).
    on_cycle: list[Callable[[Driver, CycleResult], None]] = field(default_factory=list)

    @classmethod
    def start(cls, config: QueueConfig, nodes: Iterable[Node] = (), *,
              timed: bool = False) -> Driver:
        node_list = list(nodes)
        return cls(config, {n.name: n for n in node_list}, Scheduler(config, node_list),
                   timed=timed)

    # ---- events
    def submit(self, spec: JobSpec, priority: int = 0) -> None:
        self.clock += 1
        self.outside_events += 1
        cq = self.config.cluster_queue_for(spec.queue).name
        self.jobs[spec.name] = TrackedJob(spec, priority, cq, self.clock)
        self.scheduler.submit(spec, priority=priority, submitted_at=self.clock)

    def remove(self, name: str) -> None:
        self.outside_events += 1
        self.scheduler.remove(name)
        self.jobs.pop(name, None)
        self.admitted.pop(name, None)
        self.victims.discard(name)

    def requeue(self, name: str, *, outside: bool = True) -> None:
        self.outside_events += outside
        self.scheduler.requeue(name)
        self.admitted.pop(name, None)
        self.victims.discard(name)

    def upsert_node(self, new: Node) -> None:
        old = self.nodes.get(new.name)
        if old is not None and any(
            new.allocatable.get(r, 0) < v for r, v in old.allocatable.items()
        ):
            self.shrunk.add(new.name)
        self.outside_events += 1
        self.nodes[new.name] = new
        self.scheduler.upsert_node(new)

    def remove_node(self, name: str) -> None:
        self.shrunk.add(name)
        self.outside_events += 1
        self.nodes.pop(name, None)
        self.scheduler.remove_node(name)

    # ---- cycles
    def cycle(self) -> CycleResult:
        self.clock += 1
        result = self.scheduler.cycle(self.clock if self.timed else None)
        self.results.append(result)
        reasons: dict[str, tuple[str, str]] = {}
        for name in sorted(self.jobs):
            reason = self.scheduler.pending_reason(name)
            if reason is not None:
                reasons[name] = (str(reason.code), reason.message)
        self.reasons.append(reasons)
        for adm in result.admissions:
            assert adm.job in self.jobs, f"admitted unknown or removed job {adm.job}"
            assert adm.job not in self.admitted, f"{adm.job} admitted twice"
            self.admitted[adm.job] = adm
            self.ever_admitted.append(adm.job)
        admitted_now = {a.job for a in result.admissions}
        for pre in result.preemptions:
            assert pre.victim in self.admitted and pre.victim not in admitted_now, (
                f"{pre.victim} preempted but it holds no admission from an earlier cycle"
            )
            assert pre.victim not in self.victims, f"{pre.victim} preempted twice"
            assert pre.preemptor in self.jobs and pre.preemptor not in self.admitted, (
                f"preemptor {pre.preemptor} is not a pending job"
            )
            assert pre.message, f"preemption of {pre.victim} has no message"
            self.victims.add(pre.victim)
            self.preemptions.append(pre)
        for check in self.on_cycle:
            check(self, result)
        self.outside_events = 0
        return result

    def terminate_victims(self) -> list[str]:
        """The victims' pods are gone: hand them back to the queue."""
        done = sorted(self.victims)
        for name in done:
            self.requeue(name, outside=False)
        return done

    def settle(self, max_cycles: int = 60) -> list[CycleResult]:
        """Run cycles (terminating victims after each) until one decides nothing."""
        out = []
        for _ in range(max_cycles):
            result = self.cycle()
            out.append(result)
            requeued = self.terminate_victims()
            if not result.admissions and not result.preemptions and not requeued:
                return out
        raise QuietTimeout(f"no quiet cycle after {max_cycles} cycles: preemption loop?")

    # ---- views
    def pending(self) -> set[str]:
        return set(self.jobs) - set(self.admitted)

    def reason(self, name: str) -> PendingReason | None:
        return self.scheduler.pending_reason(name)

    def preempted(self) -> list[str]:
        return [p.victim for p in self.preemptions]


# --------------------------------------------------------------------------- random scenarios
class Picker(Protocol):
    def integer(self, lo: int, hi: int) -> int: ...
    def choice(self, options: Sequence[T]) -> T: ...
    def chance(self, p: float) -> bool: ...


class RandomPicker:
    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def integer(self, lo: int, hi: int) -> int:
        return self._rng.randint(lo, hi)

    def choice(self, options: Sequence[T]) -> T:
        return options[self._rng.randrange(len(options))]

    def chance(self, p: float) -> bool:
        return self._rng.random() < p


class HypothesisPicker:
    """Draws through hypothesis so failing scenarios shrink."""

    def __init__(self, draw: Any) -> None:
        self._draw = draw

    def integer(self, lo: int, hi: int) -> int:
        return int(self._draw(st.integers(lo, hi)))

    def choice(self, options: Sequence[T]) -> T:
        return options[self._draw(st.integers(0, len(options) - 1))]

    def chance(self, p: float) -> bool:
        # Index 0 is "no", which is what hypothesis shrinks towards.
        return bool(self._draw(st.integers(0, 999)) >= round(1000 * (1 - p)))


FLAVORS = ("f0", "f1", "f2")
DEDICATED = Taint(key="dedicated", value="f2", effect="NoSchedule")
MAINTENANCE = Taint(key="maintenance", value="", effect="NoExecute")
PRIORITIES = (-100, 0, 100)
RACK_BLOCK = {"r0": "b0", "r1": "b0", "r2": "b1", "r3": "b1"}

# Events: ("submit", JobSpec, priority) | ("cycle",) | ("settle",) | ("remove", k) |
# ("requeue", k) | ("cordon" | "uncordon" | "sicken" | "heal" | "shrink" | "drop", k) |
# ("add", Node). k picks among current jobs/nodes modulo their count when replayed.
Event = tuple[Any, ...]


@dataclass
class Scenario:
    config: QueueConfig
    nodes: list[Node]
    events: list[Event]


def _random_quota(pick: Picker, resource: str, *, in_cohort: bool) -> tuple[Any, Any, Any]:
    top = {"cpu": 16, "memory": 64, GPU: 16, "pods": 8}[resource]
    nominal = pick.integer(0, top)
    borrowing = pick.integer(0, top) if in_cohort and pick.chance(0.4) else None
    lending = pick.integer(0, nominal) if in_cohort and pick.chance(0.4) else None
    unit = "Gi" if resource == "memory" else ""
    return (
        f"{nominal}{unit}",
        None if borrowing is None else f"{borrowing}{unit}",
        None if lending is None else f"{lending}{unit}",
    )


def _random_flavor_quotas(
    pick: Picker, resources: Sequence[str], *, in_cohort: bool, max_flavors: int
) -> dict[str, dict[str, QuotaSpec]]:
    order = list(FLAVORS)
    for i in range(len(order) - 1, 0, -1):  # a picked permutation, so flavor order varies
        j = pick.integer(0, i)
        order[i], order[j] = order[j], order[i]
    chosen = order[: pick.integer(1, max_flavors)]
    return {
        f: {r: _random_quota(pick, r, in_cohort=in_cohort) for r in resources} for f in chosen
    }


def random_config(pick: Picker) -> QueueConfig:
    objects: list[Any] = [
        flavor("f0"), flavor("f1"), flavor("f2", taint=DEDICATED),
    ]
    cohort_names = [f"co{i}" for i in range(pick.integer(0, 3))]
    for i, name in enumerate(cohort_names):
        parent = pick.choice([None, *cohort_names[:i]]) if i else None
        own = (
            _random_flavor_quotas(pick, ["cpu", "memory", GPU], in_cohort=parent is not None,
                                  max_flavors=2)
            if pick.chance(0.4)
            else None
        )
        objects.append(cohort(name, parent=parent, flavors=own,
                              weight=pick.choice([1.0, 2.0, 0.5])))
    for i in range(pick.integer(1, 4)):
        home = pick.choice([None, *cohort_names]) if cohort_names else None
        resources = ["cpu", "memory", GPU] + (["pods"] if pick.chance(0.25) else [])
        borrow_within = (
            ("LowerPriority", pick.choice([None, 0])) if home and pick.chance(0.3) else None
        )
        reclaim = pick.choice(["Never", "LowerPriority", "Any"])
        objects.append(
            cluster_queue(
                f"cq{i}",
                _random_flavor_quotas(pick, resources, in_cohort=home is not None,
                                      max_flavors=3),
                cohort=home,
                within=pick.choice(["Never", "LowerPriority", "LowerOrNewerEqualPriority"]),
                reclaim="LowerPriority" if borrow_within and reclaim == "Never" else reclaim,
                borrow_within=borrow_within,
                strategy=pick.choice(["BestEffortFIFO", "StrictFIFO"]),
                when_can_borrow=pick.choice(["Borrow", "TryNextFlavor"]),
                when_can_preempt=pick.choice(["TryNextFlavor", "Preempt"]),
                weight=pick.choice([1.0, 2.0, 0.5]),
            )
        )
    return make_config(*objects)


def random_node(pick: Picker, name: str) -> Node:
    pool = pick.choice(FLAVORS)
    rack = pick.choice(list(RACK_BLOCK))
    taints = [DEDICATED] if pool == "f2" else []
    if pick.chance(0.1):
        taints.append(MAINTENANCE)
    return node(
        name,
        pool=pool,
        cpu=pick.choice([2, 4, 8, 16]),
        memory=f"{pick.choice([8, 16, 64])}Gi",
        gpu=pick.choice([0, 4, 8]),
        pods=pick.choice([None, None, 4, 110]),
        labels={"rack": rack, "block": RACK_BLOCK[rack]},
        taints=taints,
        cordoned=pick.chance(0.15),
        health=pick.choice([NodeHealth.HEALTHY] * 4 + [NodeHealth.DEGRADED, NodeHealth.UNHEALTHY]),
    )


def random_job(pick: Picker, name: str, queues: Sequence[str]) -> JobSpec:
    pod_sets = []
    for s in range(pick.integer(1, 2)):
        replicas = pick.integer(1, 4)
        requests: dict[str, Any] = {"cpu": pick.choice(["500m", 1, 2, 4])}
        if pick.chance(0.5):
            requests["memory"] = pick.choice(["1Gi", "4Gi"])
        if pick.chance(0.5):
            requests[GPU] = pick.choice([1, 2, 4, 8])
        pod_sets.append(
            PodSet.model_validate(
                {
                    "name": f"ps{s}",
                    "replicas": replicas,
                    "minReplicas": pick.integer(1, replicas) if pick.chance(0.3) else None,
                    "resources": requests,
                }
            )
        )
    topology = pick.choice(
        [None, None, None, TopologyConstraint(required="rack"),
         TopologyConstraint(preferred="rack"), TopologyConstraint(required="block")]
    )
    return JobSpec(name=name, queue=pick.choice(queues), topology=topology, pod_sets=pod_sets)


def random_scenario(pick: Picker, *, max_events: int = 30) -> Scenario:
    config = random_config(pick)
    nodes = [random_node(pick, f"n{i}") for i in range(pick.integer(1, 8))]
    queues = sorted(config.local_queues)
    events: list[Event] = []
    jobs = 0
    for _ in range(pick.integer(1, max_events)):
        kind = pick.choice(
            ["submit"] * 6 + ["cycle"] * 2 + ["settle", "remove", "requeue", "node"]
        )
        if kind == "submit":
            events.append(("submit", random_job(pick, f"j{jobs}", queues),
                           pick.choice(PRIORITIES)))
            jobs += 1
        elif kind in ("remove", "requeue"):
            events.append((kind, pick.integer(0, 99)))
        elif kind == "node":
            change = pick.choice(["cordon", "uncordon", "sicken", "heal", "shrink", "drop", "add"])
            if change == "add":
                events.append(("add", random_node(pick, f"n{len(nodes) + len(events)}")))
            else:
                events.append((change, pick.integer(0, 99)))
        else:
            events.append((kind,))
    events.append(("settle",))
    return Scenario(config, nodes, events)


@st.composite
def scenarios(draw: Any, max_events: int = 30) -> Scenario:
    return random_scenario(HypothesisPicker(draw), max_events=max_events)


def _changed(n: Node, change: str) -> Node:
    if change == "cordon":
        return n.model_copy(update={"unschedulable": True})
    if change == "uncordon":
        return n.model_copy(update={"unschedulable": False})
    if change == "sicken":
        return n.model_copy(update={"health": NodeHealth.UNHEALTHY, "health_reasons": ["xid 79"]})
    if change == "heal":
        return n.model_copy(update={"health": NodeHealth.HEALTHY, "health_reasons": []})
    assert change == "shrink"
    halved = {r: v // 2 if r in ("cpu", "memory") else v for r, v in n.allocatable.items()}
    return n.model_copy(update={"allocatable": halved})


def replay(driver: Driver, events: Iterable[Event]) -> None:
    """Apply ``events`` in order; indices pick among current jobs/nodes deterministically."""
    for event in events:
        kind = event[0]
        if kind == "submit":
            driver.submit(event[1], event[2])
        elif kind == "cycle":
            driver.cycle()
        elif kind == "settle":
            driver.settle()
        elif kind == "remove" and driver.jobs:
            names = sorted(driver.jobs)
            driver.remove(names[event[1] % len(names)])
        elif kind == "requeue":
            running = sorted(set(driver.admitted) - driver.victims)
            if running:
                driver.requeue(running[event[1] % len(running)])
        elif kind == "add":
            driver.upsert_node(event[1])
        elif kind in ("cordon", "uncordon", "sicken", "heal", "shrink", "drop") and driver.nodes:
            names = sorted(driver.nodes)
            name = names[event[1] % len(names)]
            if kind == "drop":
                driver.remove_node(name)
            else:
                driver.upsert_node(_changed(driver.nodes[name], kind))


def digest(driver: Driver) -> list[dict[str, Any]]:
    """Decisions and every pending job's reason after each cycle, as plain data."""
    return [
        {
            "admissions": [a.to_dict() for a in r.admissions],
            "preemptions": [[p.victim, p.preemptor, str(p.reason), p.message]
                            for p in r.preemptions],
            "pending": {k: list(v) for k, v in reasons.items()},
        }
        for r, reasons in zip(driver.results, driver.reasons, strict=True)
    ]


# --------------------------------------------------------------------------- priority scenarios
@dataclass
class PriorityScenario:
    config: QueueConfig
    nodes: list[Node]
    events: list[Event]


def priority_scenario(pick: Picker, *, max_events: int = 25) -> PriorityScenario:
    """One ClusterQueue preempting by priority, nodes big enough that only quota binds."""
    quotas: dict[str, QuotaSpec] = {
        "cpu": pick.integer(2, 12),
        "memory": f"{pick.integer(4, 32)}Gi",
        GPU: pick.integer(0, 8),
    }
    config = make_config(
        flavor("f0"), cluster_queue("q", {"f0": quotas}, within="LowerPriority")
    )
    nodes = [node("n0", pool="f0", cpu=64, memory="256Gi", gpu=64)]
    events: list[Event] = []
    jobs = 0
    for _ in range(pick.integer(1, max_events)):
        kind = pick.choice(["submit"] * 4 + ["settle", "remove"])
        if kind == "submit":
            pod_sets = []
            for s in range(pick.integer(1, 2)):
                replicas = pick.integer(1, 3)
                requests: dict[str, Any] = {"cpu": pick.choice(["500m", 1, 2, 3])}
                if pick.chance(0.5):
                    requests["memory"] = f"{pick.integer(1, 8)}Gi"
                if pick.chance(0.4):
                    requests[GPU] = pick.integer(1, 4)
                pod_sets.append(PodSet.model_validate({
                    "name": f"ps{s}", "replicas": replicas, "resources": requests,
                    "minReplicas": pick.integer(1, replicas) if pick.chance(0.3) else None,
                }))
            spec = JobSpec(name=f"j{jobs}", queue="q", pod_sets=pod_sets)
            events.append(("submit", spec, pick.choice([-100, -10, 0, 10, 100])))
            jobs += 1
        elif kind == "remove":
            events.append(("remove", pick.integer(0, 99)))
        else:
            events.append(("settle",))
    events.append(("settle",))
    return PriorityScenario(config, nodes, events)


@st.composite
def priority_scenarios(draw: Any) -> PriorityScenario:
    return priority_scenario(HypothesisPicker(draw))
