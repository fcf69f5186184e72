"""``ClusterConfiguration``: a Ray cluster described with the CodeFlare SDK's names.

CodeFlare's users write ``ClusterConfiguration(name=..., num_workers=2,
worker_cpu_requests=1, worker_memory_requests=4, ...)``; the same arguments work
here and become a ``kind: ray`` job: a ``head`` pod set of one replica and a
``worker`` pod set of ``num_workers``. CodeFlare's ``namespace`` (and ``local_queue``,
Kueue's LocalQueue) name the Phalanx queue the cluster waits in.

Memory given as a number counts gigabytes, as in CodeFlare ("4" is 4G); a string is
a quantity ("4Gi", "512Mi"). A pod gets what it requests and no more, so where both
``*_requests`` and ``*_limits`` are given they must agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from phalanx.errors import SpecError
from phalanx.spec import JobSpec, validate
from phalanx.spec.ray import HEAD
from phalanx.spec.resources import GPU

Amount = int | float | str
WORKER = "worker"


@dataclass
class ClusterConfiguration:
    name: str
    namespace: str | None = None  # CodeFlare's namespace: here the queue (LocalQueue)
    local_queue: str | None = None  # Kueue's LocalQueue, as CodeFlare names it
    num_workers: int = 1
    head_cpu_requests: Amount | None = None
    head_cpu_limits: Amount | None = None
    head_memory_requests: Amount | None = None
    head_memory_limits: Amount | None = None
    head_extended_resource_requests: dict[str, Amount] = field(default_factory=dict)
    worker_cpu_requests: Amount | None = None
    worker_cpu_limits: Amount | None = None
    worker_memory_requests: Amount | None = None
    worker_memory_limits: Amount | None = None
    worker_extended_resource_requests: dict[str, Amount] = field(default_factory=dict)
    # Short names (the Phalanx spelling; CodeFlare's older head_cpus / num_gpus style)
    head_cpu: Amount | None = None
    head_memory: Amount | None = None
    head_gpu: int | None = None
    worker_cpu: Amount | None = None
    worker_memory: Amount | None = None
    worker_gpu: int | None = None
    image: str | None = None  # the pods' image on Kubernetes
    envs: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    priority: str | int | None = None

    @property
    def queue(self) -> str:
        return self.local_queue or self.namespace or "default"

    def to_job_spec(self) -> JobSpec:
        """The ``kind: ray`` job this configuration describes (SpecError naming the
        argument at fault)."""
        if self.num_workers < 0:
            raise SpecError(f"{self.num_workers} is not a number of workers",
                            field="num_workers", fix="give 0 or more workers")
        pod_sets = [self._pod_set(HEAD, 1)]
        if self.num_workers:
            pod_sets.append(self._pod_set(WORKER, self.num_workers))
        body: dict[str, Any] = {"name": self.name, "queue": self.queue, "kind": "ray",
                                "podSets": pod_sets, "labels": dict(self.labels)}
        if self.priority is not None:
            body["priority"] = self.priority
        return validate(JobSpec, body)

    def _pod_set(self, role: str, replicas: int) -> dict[str, Any]:
        resources: dict[str, Any] = {}
        cpu = self._one(role, "cpu", _number)
        if cpu is not None:
            resources["cpu"] = cpu
        memory = self._one(role, "memory", _memory)
        if memory is not None:
            resources["memory"] = memory
        gpus = getattr(self, f"{role}_gpu")
        extended: Mapping[str, Amount] = getattr(self, f"{role}_extended_resource_requests")
        resources.update({k: _number(v) for k, v in extended.items()})
        if gpus:
            resources[GPU] = str(gpus)
        pod_set: dict[str, Any] = {"name": role, "replicas": replicas, "resources": resources}
        if self.envs:
            pod_set["env"] = dict(self.envs)
        if self.image:
            pod_set["image"] = self.image
        return pod_set

    def _one(self, role: str, resource: str, parse: Any) -> str | None:
        """The one amount of ``resource`` the ``role``'s arguments give (short name,
        ``_requests`` or ``_limits``): they must agree where several are given."""
        names = [f"{role}_{resource}", f"{role}_{resource}_requests", f"{role}_{resource}_limits"]
        given = {n: parse(getattr(self, n)) for n in names if getattr(self, n) is not None}
        values = set(given.values())
        if len(values) > 1:
            raise SpecError(
                f"{' and '.join(f'{n}={v}' for n, v in given.items())} disagree",
                field=next(iter(given)),
                fix="give one amount: a Phalanx pod gets exactly what it requests",
            )
        return values.pop() if values else None


def _number(value: Amount) -> str:
    return str(value)


def _memory(value: Amount) -> str:
    """CodeFlare counts memory in gigabytes when it is a number."""
    if isinstance(value, bool):
        raise SpecError(f"{value!r} is not an amount of memory", field="memory",
                        fix='give gigabytes (4) or a quantity ("4Gi")')
    return f"{value}G" if isinstance(value, int | float) else value
