"""Prometheus metrics of one control plane, in a registry of its own."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from phalanx.scheduler.types import ClusterQueueStatus
from phalanx.spec.planes import PLANE_LABEL
from phalanx.spec.resources import Node


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.pending = Gauge(
            "phalanx_pending_jobs", "Jobs waiting in a ClusterQueue", ["cluster_queue"],
            registry=self.registry,
        )
        self.admitted = Gauge(
            "phalanx_admitted_jobs", "Jobs holding quota in a ClusterQueue", ["cluster_queue"],
            registry=self.registry,
        )
        self.quota_used = Gauge(
            "phalanx_quota_used", "Quota in use (resource units)",
            ["cluster_queue", "flavor", "resource"], registry=self.registry,
        )
        self.quota_nominal = Gauge(
            "phalanx_quota_nominal", "Nominal quota (resource units)",
            ["cluster_queue", "flavor", "resource"], registry=self.registry,
        )
        self.node_health = Gauge(
            "phalanx_node_healthy", "1 when the node is healthy, 0.5 degraded, 0 unhealthy",
            ["node"], registry=self.registry,
        )
        self.node_plane = Gauge(
            "phalanx_node_plane", "1 for the compute plane (cluster) each node belongs to",
            ["node", "plane"], registry=self.registry,
        )
        self.node_check = Gauge(
            "phalanx_node_check", "The last answer of a node's health check: 0 PASS, 1 WARN, "
            "2 ERR (checks that do not apply are left out)", ["node", "check"],
            registry=self.registry,
        )
        self.admission_latency = Histogram(
            "phalanx_admission_latency_seconds", "Time from entering the queue to admission",
            ["cluster_queue"], registry=self.registry,
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600),
        )
        self.cycle_seconds = Histogram(
            "phalanx_scheduling_cycle_seconds", "Duration of a scheduling cycle",
            registry=self.registry,
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
        )
        self.jobs_finished = Counter(
            "phalanx_jobs_finished", "Jobs that reached a final status", ["status"],
            registry=self.registry,
        )
        self.preemptions = Counter(
            "phalanx_preemptions", "Jobs preempted", ["reason"], registry=self.registry,
        )
        self.estimated_wait = Gauge(
            "phalanx_estimated_wait_seconds", "Estimated wait before a ClusterQueue's next "
            "(job=next) and last (job=last) pending job starts, from the latest forecast; 0 "
            "when none waits or none has an estimate", ["cluster_queue", "job"],
            registry=self.registry,
        )
        self.loop_errors = Counter(
            "phalanx_control_loop_errors", "Control-loop steps that failed with an error",
            registry=self.registry,
        )
        self.workdir_uploads = Counter(
            "phalanx_workdir_uploads", "Working-directory archives received (an upload the "
            "caller could skip, the archive being held for it, is not counted)",
            registry=self.registry,
        )

    def observe_queues(self, queues: list[ClusterQueueStatus]) -> None:
        for cq in queues:
            self.pending.labels(cq.name).set(cq.pending)
            self.admitted.labels(cq.name).set(cq.admitted)
            for u in cq.usage:
                self.quota_used.labels(cq.name, u.flavor, u.resource).set(u.used / 1000)
                self.quota_nominal.labels(cq.name, u.flavor, u.resource).set(u.nominal / 1000)

    def observe_waits(self, head: dict[str, float], tail: dict[str, float],
                      queues: list[str]) -> None:
        for cq in queues:
            self.estimated_wait.labels(cq, "next").set(head.get(cq, 0.0))
            self.estimated_wait.labels(cq, "last").set(tail.get(cq, 0.0))

    def observe_nodes(self, nodes: list[Node]) -> None:
        score = {"healthy": 1.0, "degraded": 0.5, "unhealthy": 0.0}
        answer = {"PASS": 0, "WARN": 1, "ERR": 2}
        for node in nodes:
            self.node_health.labels(node.name).set(score[node.health.value])
            plane = node.labels.get(PLANE_LABEL)
            if plane is not None:
                self.node_plane.labels(node.name, plane).set(1)
            for check in node.checks:
                if check.status.value in answer:
                    self.node_check.labels(node.name, check.name).set(answer[check.status.value])
