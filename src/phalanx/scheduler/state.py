"""The scheduler's incremental state and the events that change it between cycles.

Usage per queue and cohort, node reservations and the pending classes are all
updated in place by each event (submit, requeue, remove, node and config
changes), so a cycle never recomputes anything from scratch.
"""

from __future__ import annotations

from collections.abc import Iterable

from phalanx.errors import Conflict, SpecError
from phalanx.scheduler import slack
from phalanx.scheduler.admitted import AdmittedJobs
from phalanx.scheduler.cache import QueueInfo, QuotaCache
from phalanx.scheduler.flavorassigner.flavors import Assigner
from phalanx.scheduler.placement import NodePool, Placement, PodGroup
from phalanx.scheduler.preemption.dominance import Demands
from phalanx.scheduler.preemption.preemptor import Preemptor
from phalanx.scheduler.preemption.protection import Protection
from phalanx.scheduler.preemption.waiting import WaitingPreemptor
from phalanx.scheduler.provisioning import Provisioning
from phalanx.scheduler.queue import QueueManager
from phalanx.scheduler.reasons import QUEUED
from phalanx.scheduler.reservation import Reservations
from phalanx.scheduler.thrashing import PreemptionHistory
from phalanx.scheduler.types import Admission, PendingReason, Preemption, PreemptionReason
from phalanx.scheduler.workload import FR, POD_MILLIS, PODS, Workload, make_workload
from phalanx.spec.config import QueueConfig
from phalanx.spec.resources import HEALTH_LABEL, HEALTH_LABEL_VALUES, JobSpec, Node

HOLD_PREFIX = "hold/"  # node reservations a waiting preemptor keeps during a cycle


class State:
    def __init__(self, config: QueueConfig, nodes: Iterable[Node] = ()) -> None:
        # Nodes carry their health as a label only while some queue avoids degraded nodes
        # (a copy of every node otherwise costs memory for nothing).
        self.health_labels = _avoids_degraded(config)
        self.pool = NodePool(with_health_label(n) if self.health_labels else n for n in nodes)
        self.jobs: dict[str, Workload] = {}
        self.admitted: dict[str, AdmittedJobs] = {}
        self.waiting: dict[str, WaitingPreemptor] = {}  # preemptors whose victims terminate
        self.reservations = Reservations()  # what cohorts keep for jobs waiting to borrow
        self.provisioning = Provisioning()  # quota held while node pools are bought
        self.demands = Demands()  # what dominance compares, per job
        self.unreported: dict[str, Workload] = {}  # pending jobs no cycle has given a reason
        self.orphans: dict[str, Workload] = {}  # pending jobs whose queue no longer exists
        self.seq = 0
        self.admit_seq = 0
        self.cycle_no = 0
        self.node_free_version = 0
        self.reason_clock = 0  # orders reasons given to jobs, classes and StrictFIFO queues
        self.fair_sharing = True
        self.config_generation = 0  # bumped by every configuration, so holds know their own
        self.now: float | None = None  # the driver's clock at the running cycle, if it gives one
        # Capacity follows health (slack.py): the configuration as given, what unhealthy or
        # cordoned nodes withhold from it, and the nodes' version that was read.
        self.base_config = config
        self.withheld: slack.Withheld = slack.withheld(config, self.pool.nodes())
        self.nodes_version = 0
        self._withheld_at = 0
        self._unshrunk: QuotaCache | None = None  # the quotas as given, when some are shrunk
        self.preemption_history = PreemptionHistory()  # outlives configurations
        self._configure(slack.shrunk(config, self.withheld))

    # ------------------------------------------------------------------ configuration
    def _configure(self, config: QueueConfig) -> None:
        self.config = config
        self.config_generation += 1
        self.cache = QuotaCache(config)
        self.infos = {
            name: QueueInfo(config.cluster_queues[name], config, self.cache.cqs[name])
            for name in sorted(config.cluster_queues)
        }
        self.assigner = Assigner(self.cache, self.pool)
        self.preemptor = Preemptor(self.cache, self.pool, self.admitted)
        self.preemptor.protection = Protection.of(config, self.preemption_history)
        self.assigner.oracle = self.preemptor.possible
        self.assigner.simulate = self.preemptor.simulate
        self.set_fair_sharing(self.fair_sharing)
        self.queues = QueueManager()
        self.provisioning.configure(config)

    def set_fair_sharing(self, enabled: bool) -> None:
        self.fair_sharing = enabled
        self.assigner.fair_sharing = enabled
        self.preemptor.fair_sharing = enabled
        for q in self.queues.queues.values() if hasattr(self, "queues") else ():
            for cls in q.classes.values():
                cls.blocked = None

    def set_config(self, config: QueueConfig) -> None:
        if _avoids_degraded(config) and not self.health_labels:
            self.health_labels = True
            for node in self.pool.nodes():
                self.pool.upsert(with_health_label(node))
            self.node_free_version += 1
        self.base_config = config
        self.withheld = slack.withheld(config, self.pool.nodes())
        self._withheld_at = self.nodes_version
        self._reconfigure(slack.shrunk(config, self.withheld))

    def potential(self, cq: str, fr: FR) -> int:
        """The most ``cq`` could ever hold of ``fr``, whatever nodes are out today."""
        cache = self.cache
        if self.withheld:
            if self._unshrunk is None:
                self._unshrunk = QuotaCache(self.base_config)
            cache = self._unshrunk
        return cache.potential(cache.cqs[cq], fr)

    def refresh_withheld(self) -> list[Preemption]:
        """Slack queues: quotas shrunk by the nodes that are out now, and the preemptions
        that bring every such queue back within its quota."""
        if not slack.follows_health(self.base_config):
            return []
        if self._withheld_at != self.nodes_version:
            self._withheld_at = self.nodes_version
            lost = slack.withheld(self.base_config, self.pool.nodes())
            if lost != self.withheld:
                self.withheld = lost
                self._reconfigure(slack.shrunk(self.base_config, lost))
        out = []
        admitted = {cq: jobs.jobs.values() for cq, jobs in self.admitted.items()}
        for wl in slack.over_quota(self.cache, self.config, admitted):
            self.mark_terminating(wl)
            out.append(Preemption(
                wl.name, "", PreemptionReason.CAPACITY_WITHHELD,
                f"evicted: ClusterQueue {wl.cluster_queue} lost quota with its nodes "
                f"({slack.describe(self.withheld)} unhealthy or cordoned)"))
        return out

    def _reconfigure(self, config: QueueConfig) -> None:
        self._unshrunk = None
        holds = self.provisioning.holds
        pending = sorted(
            (wl for wl in self.jobs.values() if not wl.admitted and wl.name not in holds),
            key=lambda w: w.seq,
        )
        self._configure(config)
        old = self.admitted
        self.admitted = {}
        self.preemptor.admitted = self.admitted
        for wl in sorted((wl for jobs in old.values() for wl in jobs.jobs.values()),
                         key=lambda w: w.admitted_seq):
            if wl.cluster_queue in self.infos:
                self.cache.charge(wl.cluster_queue, wl.usage)
            self._index(wl)
        for name in list(holds):  # still holding, when its queue is still there
            hold = holds[name]
            if hold.wl.cluster_queue in self.infos and hold.need.flavor in self.config.flavors:
                self.cache.charge(hold.wl.cluster_queue, hold.usage)
            else:
                del holds[name]
                pending.append(hold.wl)
        self.orphans = {}
        for wl in pending:
            wl.estimate = None
            wl.cluster_queue = self._cluster_queue_of(wl.local_queue)
            self._enqueue(wl)
            self.unreported[wl.name] = wl

    def _cluster_queue_of(self, local_queue: str) -> str:
        lq = self.config.local_queues.get(local_queue)
        if lq is None or lq.cluster_queue not in self.config.cluster_queues:
            return ""
        return lq.cluster_queue

    def _enqueue(self, wl: Workload) -> None:
        # Waiting for the next cycle, whatever its class was told before it came.
        wl.reason, wl.reason_serial = QUEUED, self.tick_reason()
        if wl.cluster_queue:
            self.queues.push(wl)
        else:
            self.orphans[wl.name] = wl

    # ------------------------------------------------------------------ reasons
    def tick_reason(self) -> int:
        self.reason_clock += 1
        return self.reason_clock

    def reason_of(self, wl: Workload) -> PendingReason:
        """A pending job's reason: the latest of its own, its class's and, in a StrictFIFO
        queue blocked behind another job, the queue's. Reasons are given to whole classes and
        queues, never copied to every member: under a deep queue whose head's numbers change
        every cycle, copying would be most of a cycle's work."""
        reason, serial = wl.reason, wl.reason_serial
        if wl.name in self.waiting:  # a preemptor's wait is its own business
            return reason or QUEUED
        cls = self.queues.class_of(wl)
        if cls is not None:
            if cls.reason_serial > serial:
                latest = cls.latest_reason()
                if latest is not None:
                    reason, serial = latest, cls.reason_serial
            q = self.queues.queues.get(cls.cluster_queue)
            if (q is not None and q.strict_reason is not None and q.strict_serial > serial
                    and q.strict_head != wl.name):
                reason = q.strict_reason if q.strict_unnamed is None \
                    or wl.local_queue == q.strict_local_queue else q.strict_unnamed
        return reason or QUEUED

    # ------------------------------------------------------------------ nodes
    def upsert_node(self, node: Node) -> None:
        self.pool.upsert(with_health_label(node) if self.health_labels else node)
        self.node_free_version += 1
        self.nodes_version += 1

    def remove_node(self, name: str) -> None:
        self.pool.remove(name)
        self.node_free_version += 1
        self.nodes_version += 1

    # ------------------------------------------------------------------ jobs
    def _new(self, spec: JobSpec, priority: int, submitted_at: float) -> Workload:
        if spec.name in self.jobs:
            existing = self.jobs[spec.name]
            if existing.admitted:
                raise Conflict(
                    f"job {spec.name} is already admitted", field="name",
                    fix="requeue or remove it first",
                )
            self.remove(spec.name)
        self.seq += 1
        return make_workload(
            spec, local_queue=spec.queue, cluster_queue=self._cluster_queue_of(spec.queue),
            priority=priority, submitted_at=submitted_at, seq=self.seq,
        )

    def submit(self, spec: JobSpec, priority: int, submitted_at: float) -> None:
        wl = self._new(spec, priority, submitted_at)
        self.jobs[wl.name] = wl
        self._enqueue(wl)
        self.unreported[wl.name] = wl

    def restore(self, spec: JobSpec, priority: int, submitted_at: float,
                admission: Admission) -> None:
        wl = self._new(spec, priority, submitted_at)
        cq = admission.cluster_queue
        info = self.infos.get(cq)
        by_name = {ps.name: ps for ps in wl.pod_sets}
        usage: dict[FR, int] = {}
        groups: list[PodGroup] = []
        nodes: list[tuple[str, ...]] = []
        for assigned in admission.pod_sets:
            ps = by_name.get(assigned.name)
            if ps is None:
                raise SpecError(
                    f"admission names pod set {assigned.name!r}, which job {spec.name} lacks",
                    field="admission.podSets", fix="restore the job with the spec it ran with",
                )
            for res, per_pod in ps.requests:
                flavor = assigned.flavors.get(res, "")
                fr = (flavor, res)
                usage[fr] = usage.get(fr, 0) + per_pod * assigned.count
            if info is not None and info.covers_pods:
                flavor = assigned.flavors.get(PODS) or _group_flavor(info, assigned.flavors)
                fr = (flavor, PODS)
                usage[fr] = usage.get(fr, 0) + POD_MILLIS * assigned.count
            groups.append(PodGroup(ps.name, len(assigned.nodes), len(assigned.nodes),
                                   ps.requests))
            nodes.append(tuple(assigned.nodes))
        wl.cluster_queue = cq
        self.jobs[wl.name] = wl
        self._admit(wl, admission, usage)
        self.pool.reserve(wl.name, groups, Placement(tuple(len(n) for n in nodes), tuple(nodes)))

    def _admit(self, wl: Workload, admission: Admission, usage: dict[FR, int]) -> None:
        self.admit_seq += 1
        wl.admission = admission
        wl.usage = usage
        wl.usage_key = tuple(sorted(usage.items()))
        wl.admitted_seq = self.admit_seq
        wl.reason, wl.reason_serial = None, 0
        if self.now is not None:
            wl.started_at = self.now
        self.cache.charge(admission.cluster_queue, usage)
        self._index(wl)

    def _index(self, wl: Workload) -> None:
        jobs = self.admitted.get(wl.cluster_queue)
        if jobs is None:
            jobs = self.admitted[wl.cluster_queue] = AdmittedJobs()
        jobs.add(wl)

    def mark_terminating(self, wl: Workload) -> None:
        """A preempted or drained job: it holds its capacity until it is requeued or removed."""
        self.admitted[wl.cluster_queue].mark_terminating(wl)

    def _release(self, wl: Workload) -> None:
        """Give back an admitted job's quota and nodes."""
        self.cache.charge(wl.cluster_queue, wl.usage, -1)
        self.pool.release(wl.name)
        self.node_free_version += 1
        jobs = self.admitted.get(wl.cluster_queue)
        if jobs is not None:
            jobs.discard(wl)
        wl.admission = None
        wl.usage = {}
        wl.usage_key = ()
        wl.terminating = False
        wl.preempted_by = ""
        wl.checkpoint_at = 0.0

    def requeue(self, name: str, submitted_at: float | None = None) -> None:
        wl = self.jobs.get(name)
        if wl is None:
            raise SpecError(f"job {name} is not known to the scheduler", field="name",
                            fix="submit it instead")
        if wl.admitted:
            self._release(wl)
            wl.cluster_queue = self._cluster_queue_of(wl.local_queue)
        else:
            self._dequeue(wl)
        if submitted_at is not None:
            wl.submitted_at = submitted_at
        self._enqueue(wl)
        self.unreported[wl.name] = wl

    def expire_protection(self) -> None:
        """A job's minRuntime ended: its queue's tree has a candidate more, as if its usage
        changed, so the jobs blocked on that tree are looked at again."""
        for tree in {node.tree for node in self.cache.cqs.values()}:
            tree.any_version += 1

    def report_checkpoint(self, name: str, at: float) -> None:
        """An admitted job saved its work at ``at``: a preemption now loses less of it."""
        wl = self.jobs.get(name)
        if wl is None or not wl.admitted or at <= wl.checkpoint_at:
            return
        self.preemption_history.checkpoint(wl, at)
        jobs = self.admitted.get(wl.cluster_queue)
        if jobs is not None:
            jobs.note_checkpoint(wl, at)

    def release_hold(self, name: str) -> bool:
        """Give back a provisioning hold's quota; whether the job had one."""
        hold = self.provisioning.holds.pop(name, None)
        if hold is None:
            return False
        self.cache.charge(hold.wl.cluster_queue, hold.usage, -1)
        return True

    def _dequeue(self, wl: Workload) -> None:
        self.release_hold(wl.name)
        self.queues.discard(wl)
        self.orphans.pop(wl.name, None)
        self.waiting.pop(wl.name, None)

    def remove(self, name: str) -> None:
        wl = self.jobs.pop(name, None)
        if wl is None:
            return
        if wl.admitted:
            self._release(wl)
        else:
            self._dequeue(wl)
        self.unreported.pop(name, None)
        self.demands.forget(wl)
        self.provisioning.forget(name)
        self.preemption_history.forget(name)


def _group_flavor(info: QueueInfo, flavors: dict[str, str]) -> str:
    """The flavor a pod set got for the resource group that covers ``pods``."""
    group = info.groups[info.group_of[PODS]]
    for res in sorted(group.resources):
        if res in flavors:
            return flavors[res]
    return group.flavors[0].name


def with_health_label(node: Node) -> Node:
    """The node as placement sees it: labelled with its health (``phalanx.dev/health``), so
    a ClusterQueue that avoids degraded nodes can select healthy ones."""
    value = HEALTH_LABEL_VALUES[node.health]
    if node.labels.get(HEALTH_LABEL) == value:
        return node
    return node.model_copy(update={"labels": {**node.labels, HEALTH_LABEL: value}})


def _avoids_degraded(config: QueueConfig) -> bool:
    return any(cq.avoid_degraded_nodes for cq in config.cluster_queues.values())
