"""Fluent builders for jobs and pod sets, checked by the schema when built.

    job = (
        phalanx.Job("train", queue="team-a", priority="high", kind="torch")
        .pod_set("worker", replicas=2, command=["python", "train.py"],
                 resources={"cpu": "1", "memory": "2Gi"})
        .max_runtime("2h")
        .restart(max_restarts=3)
        .build()
    )

Builders only collect fields in their document (YAML) form; ``build()`` runs the
same validation as a YAML file, so errors name the same fields.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from phalanx.display import Table, fields_table
from phalanx.errors import SpecError
from phalanx.spec import GPU, JobKind, JobSpec, PodSet, validate
from phalanx.spec.tables import spec_fields

QuantityValue = str | int | float
DurationValue = str | int | float
Effect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class PodSetBuilder:
    """Builds a PodSet: ``PodSetBuilder("worker", 4).command("python", "t.py").gpus(1)``."""

    def __init__(
        self,
        name: str = "worker",
        replicas: int = 1,
        *,
        command: Sequence[str] | None = None,
        resources: Mapping[str, QuantityValue] | None = None,
        env: Mapping[str, str] | None = None,
        working_dir: str | None = None,
        image: str | None = None,
        min_replicas: int | None = None,
        node_selector: Mapping[str, str] | None = None,
    ) -> None:
        self._doc: dict[str, Any] = {"name": name, "replicas": replicas}
        if command is not None:
            self.command(*command)
        if resources:
            self.resources(resources)
        if env:
            self.env(env)
        if working_dir is not None:
            self.working_dir(working_dir)
        if image is not None:
            self.image(image)
        if min_replicas is not None:
            self._doc["minReplicas"] = min_replicas
        if node_selector:
            self.node_selector(node_selector)

    @property
    def name(self) -> str:
        return str(self._doc["name"])

    def replicas(self, count: int, minimum: int | None = None) -> PodSetBuilder:
        """How many pods; ``minimum`` allows partial admission down to that many."""
        self._doc["replicas"] = count
        if minimum is not None:
            self._doc["minReplicas"] = minimum
        return self

    def command(self, *argv: str) -> PodSetBuilder:
        self._doc["command"] = list(argv)
        return self

    def resources(
        self, requests: Mapping[str, QuantityValue] | None = None, **more: QuantityValue
    ) -> PodSetBuilder:
        """Per-pod requests, merged into earlier ones: ``.resources(cpu="2", memory="8Gi")``."""
        merged = {**dict(requests or {}), **more}
        self._doc.setdefault("resources", {}).update(merged)
        return self

    def cpu(self, amount: QuantityValue) -> PodSetBuilder:
        return self.resources({"cpu": amount})

    def memory(self, amount: QuantityValue) -> PodSetBuilder:
        return self.resources({"memory": amount})

    def gpus(self, count: int) -> PodSetBuilder:
        return self.resources({GPU: count})

    def env(self, variables: Mapping[str, str] | None = None, **more: str) -> PodSetBuilder:
        self._doc.setdefault("env", {}).update({**dict(variables or {}), **more})
        return self

    def working_dir(self, path: str) -> PodSetBuilder:
        self._doc["workingDir"] = path
        return self

    def pin_cpus(self) -> PodSetBuilder:
        """Give each pod whole CPUs of its own (``cpuPinning: exclusive``; integer cpu)."""
        self._doc["cpuPinning"] = "exclusive"
        return self

    def image(self, image: str) -> PodSetBuilder:
        self._doc["image"] = image
        return self

    def mount(self, volume: str, path: str, *, read_only: bool = False,
              sub_path: str = "") -> PodSetBuilder:
        """Show the job's volume ``volume`` (``Job.volume``) at ``path`` in the pods."""
        mount: dict[str, Any] = {"name": volume, "mountPath": path}
        if read_only:
            mount["readOnly"] = True
        if sub_path:
            mount["subPath"] = sub_path
        self._doc.setdefault("mounts", []).append(mount)
        return self

    def shm(self, size: QuantityValue) -> PodSetBuilder:
        """A /dev/shm of ``size`` (e.g. "16Gi") for each pod."""
        self._doc["shm"] = size
        return self

    def node_selector(
        self, labels: Mapping[str, str] | None = None, **more: str
    ) -> PodSetBuilder:
        self._doc.setdefault("nodeSelector", {}).update({**dict(labels or {}), **more})
        return self

    def tolerate(
        self,
        key: str | None = None,
        value: str = "",
        *,
        exists: bool = False,
        effect: Effect | None = None,
    ) -> PodSetBuilder:
        """Tolerate a taint (``exists=True`` matches any value; no key matches every taint)."""
        toleration: dict[str, Any] = {"operator": "Exists" if exists else "Equal"}
        if key is not None:
            toleration["key"] = key
        if value:
            toleration["value"] = value
        if effect is not None:
            toleration["effect"] = effect
        self._doc.setdefault("tolerations", []).append(toleration)
        return self

    def to_dict(self) -> dict[str, Any]:
        """The pod set in its document form, as it would appear in a job's YAML."""
        return copy.deepcopy(self._doc)

    def build(self) -> PodSet:
        return validate(PodSet, self.to_dict())


class Job:
    """Builds a JobSpec; every method returns the builder so calls chain."""

    def __init__(
        self,
        name: str,
        *,
        queue: str = "default",
        priority: str | int = "default",
        kind: JobKind | str = JobKind.GENERIC,
        max_runtime: DurationValue | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        self._doc: dict[str, Any] = {
            "name": name,
            "queue": queue,
            "priority": priority,
            "kind": str(kind),
        }
        self._pod_sets: list[PodSetBuilder | PodSet] = []
        if max_runtime is not None:
            self.max_runtime(max_runtime)
        if labels:
            self.labels(labels)

    @property
    def name(self) -> str:
        return str(self._doc["name"])

    def pod_set(
        self,
        name: str = "worker",
        replicas: int = 1,
        *,
        command: Sequence[str] | None = None,
        resources: Mapping[str, QuantityValue] | None = None,
        env: Mapping[str, str] | None = None,
        working_dir: str | None = None,
        image: str | None = None,
        min_replicas: int | None = None,
        node_selector: Mapping[str, str] | None = None,
    ) -> Job:
        """Add a pod set (pods started together, each with these per-pod resources)."""
        return self.add(
            PodSetBuilder(
                name,
                replicas,
                command=command,
                resources=resources,
                env=env,
                working_dir=working_dir,
                image=image,
                min_replicas=min_replicas,
                node_selector=node_selector,
            )
        )

    def add(self, pod_set: PodSetBuilder | PodSet) -> Job:
        """Add a pod set built separately (a PodSetBuilder or a PodSet)."""
        self._pod_sets.append(pod_set)
        return self

    def queue(self, local_queue: str) -> Job:
        self._doc["queue"] = local_queue
        return self

    def priority(self, priority: str | int) -> Job:
        """A PriorityClass name (``low``, ``default``, ``high``, ...) or an integer."""
        self._doc["priority"] = priority
        return self

    def kind(self, kind: JobKind | str) -> Job:
        """``torch`` gives every pod the torchrun environment; ``generic`` runs commands as-is."""
        self._doc["kind"] = str(kind)
        return self

    def max_runtime(self, duration: DurationValue) -> Job:
        """Stop the job once it has run this long ("90s", "30m", "2h" or seconds)."""
        self._doc["maxRuntime"] = duration
        return self

    def restart(
        self,
        max_restarts: int | None = None,
        *,
        max_system_restarts: int | None = None,
        backoff: DurationValue | None = None,
        max_backoff: DurationValue | None = None,
    ) -> Job:
        """Restart budgets: user errors (non-zero exits) and system failures, counted apart."""
        policy = self._doc.setdefault("restart", {})
        for key, value in (
            ("maxRestarts", max_restarts),
            ("maxSystemRestarts", max_system_restarts),
            ("backoff", backoff),
            ("maxBackoff", max_backoff),
        ):
            if value is not None:
                policy[key] = value
        return self

    def topology(self, *, required: str | None = None, preferred: str | None = None) -> Job:
        """Keep the pods within one domain of a node label (such as a rack)."""
        constraint = {k: v for k, v in (("required", required), ("preferred", preferred)) if v}
        self._doc["topology"] = constraint
        return self

    def labels(self, labels: Mapping[str, str] | None = None, **more: str) -> Job:
        self._doc.setdefault("labels", {}).update({**dict(labels or {}), **more})
        return self

    def volume(self, name: str, **source: Mapping[str, Any]) -> Job:
        """A volume the pod sets mount, its source as Kubernetes spells it:
        ``.volume("data", hostPath={"path": "/datasets"})``, ``emptyDir={}``..."""
        self._doc.setdefault("volumes", []).append({"name": name, **source})
        return self

    def after(self, *jobs: str | Job, condition: Literal["Succeeded", "Finished"] = "Succeeded",
              ) -> Job:
        """Run only once these jobs have ended: succeeded (the default; the job fails if one
        does not), or ``condition="Finished"``, however they ended. Kubeflow Pipelines'
        ``.after()``; submit them together with ``Client.submit_many``."""
        deps = self._doc.setdefault("dependsOn", [])
        for job in jobs:
            name = job.name if isinstance(job, Job) else job
            deps.append(name if condition == "Succeeded" else
                        {"job": name, "condition": condition})
        return self

    def workdir(self, path: str | os.PathLike[str]) -> Job:
        """Start every pod in a copy of this directory (relative: to the current one),
        which ``Client.submit`` packs and uploads (docs/your-work.md)."""
        self._doc.pop("git", None)
        self._doc["workdir"] = os.fspath(path)
        return self

    def git(self, repo: str, ref: str = "HEAD") -> Job:
        """Start every pod in a clone of ``repo`` at ``ref``, which ``Client.submit``
        resolves to a commit so that every attempt runs the same code."""
        self._doc.pop("workdir", None)
        self._doc["git"] = {"repo": repo, "ref": ref}
        return self

    def to_dict(self) -> dict[str, Any]:
        """The job in its document form, as it would appear in a YAML file."""
        doc = copy.deepcopy(self._doc)
        doc["podSets"] = [p.to_dict() for p in self._pod_sets]
        return doc

    def build(self) -> JobSpec:
        """The validated JobSpec; raises SpecError naming the field at fault."""
        if not self._pod_sets:
            raise SpecError(
                f"job {self.name!r} has no pod sets", field="podSets",
                fix='add one with .pod_set("worker", replicas=..., command=[...])',
            )
        return validate(JobSpec, self.to_dict())

    # A notebook shows the job it would submit as an HTML table, rich's console as a table.
    def table(self) -> Table:
        """The job as built, or what is wrong with it."""
        try:
            return fields_table(f"job {self.name} (not submitted)", spec_fields(self.build()))
        except SpecError as exc:
            return fields_table(f"job {self.name} (not valid yet)",
                                [("error", str(exc)), ("field", exc.field or "-")])

    def _repr_html_(self) -> str:
        return self.table()._repr_html_()

    def __rich__(self) -> Any:
        return self.table().__rich__()
