"""Queue configuration: the set of flavors, cohorts, queues and priorities, checked as a whole.

``QueueConfig.merged`` applies documents on top of an existing config and
validates the result before anything is stored, so an invalid document set
changes nothing (all-or-nothing, like ``kubectl apply`` of a single list).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import yaml
from pydantic import Field

from phalanx.errors import Conflict, NotFound, SpecError
from phalanx.spec.base import Model, validate
from phalanx.spec.kueue import is_kubernetes_document, validate_kueue
from phalanx.spec.kueue_checks import FOLDED, resolve_admission_checks
from phalanx.spec.provisioning import FlavorProvisioning, ProvisioningPolicy
from phalanx.spec.quantity import format_quantity
from phalanx.spec.resources import (
    BUILTIN_PRIORITY_CLASSES,
    ClusterQueue,
    Cohort,
    ConfigObject,
    FlavorQuotas,
    JobSpec,
    LocalQueue,
    Node,
    PriorityClass,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
)

# The one flavor of a fresh control plane, whichever compute plane it drives: it names
# "the capacity there is", not a plane, so queue documents read the same everywhere.
DEFAULT_FLAVOR = "default"

CONFIG_KINDS: dict[str, type[Model]] = {
    "ResourceFlavor": ResourceFlavor,
    "Cohort": Cohort,
    "ClusterQueue": ClusterQueue,
    "LocalQueue": LocalQueue,
    "PriorityClass": PriorityClass,
    "ProvisioningPolicy": ProvisioningPolicy,
}


# What `phalanx delete KIND NAME` and ``DELETE /v1/config/{kind}/{name}`` accept for a kind,
# as kubectl does: any case, singular or plural, or a short name.
_KIND_NAMES = {
    **{kind.lower(): kind for kind in CONFIG_KINDS},
    **{kind.lower() + ("es" if kind.endswith("s") else "s"): kind for kind in CONFIG_KINDS},
    "flavor": "ResourceFlavor", "flavors": "ResourceFlavor", "rf": "ResourceFlavor",
    "cq": "ClusterQueue", "lq": "LocalQueue", "queue": "LocalQueue", "queues": "LocalQueue",
    "pc": "PriorityClass", "provisioning": "ProvisioningPolicy",
}


def config_kind(text: str, field: str = "kind") -> str:
    """The config kind ``text`` names (``clusterqueue``, ``cq``, ``ClusterQueues``...)."""
    kind = _KIND_NAMES.get(text.lower())
    if kind is None:
        raise SpecError(
            f"unknown kind {text!r}", field=field,
            fix=f"use one of {', '.join(k.lower() for k in CONFIG_KINDS)} (or job)",
        )
    return kind


class QueueConfig(Model):
    flavors: dict[str, ResourceFlavor] = Field(default_factory=dict)
    cohorts: dict[str, Cohort] = Field(default_factory=dict)
    cluster_queues: dict[str, ClusterQueue] = Field(default_factory=dict)
    local_queues: dict[str, LocalQueue] = Field(default_factory=dict)
    priority_classes: dict[str, PriorityClass] = Field(
        default_factory=lambda: {p.name: p for p in BUILTIN_PRIORITY_CLASSES}
    )
    provisioning_policies: dict[str, ProvisioningPolicy] = Field(default_factory=dict)
    # The built-in default (``default_for``), untouched: the control loop derives it again
    # from the nodes of every plane as they change (a worker joins, a pool is added).
    # Applying or deleting anything ends that; the configuration is then the user's.
    follows_nodes: bool = False

    # ------------------------------------------------------------------ building
    def objects(self) -> list[ConfigObject]:
        return [
            *self.flavors.values(),
            *self.cohorts.values(),
            *self.cluster_queues.values(),
            *self.local_queues.values(),
            *self.priority_classes.values(),
            *self.provisioning_policies.values(),
        ]

    def merged(self, objects: Iterable[ConfigObject]) -> QueueConfig:
        """A new config with ``objects`` created or replaced; validated, self unchanged."""
        new = self.model_copy(deep=True)
        for obj in objects:
            new._table(obj.kind)[obj.name] = obj
        new.check()
        return new

    def without(self, refs: Iterable[tuple[str, str]]) -> QueueConfig:
        """A new config without the objects ``refs`` names (kind, name), all or none.

        NotFound names an object that does not exist; Conflict names an object that one left
        behind still names (a flavor a ClusterQueue or Cohort uses, a cohort with member
        queues or child cohorts, a ClusterQueue a LocalQueue points at). Objects removed
        together may name each other.
        """
        new = self.model_copy(deep=True)
        for kind, name in refs:
            if name not in new._table(kind) and name not in self._table(kind):
                raise NotFound(f"{kind} {name!r} does not exist", field=f"{kind} {name}",
                               fix="check the name with `phalanx config`")
            new._table(kind).pop(name, None)
        users = {
            "ResourceFlavor": {
                flavor: [f"ClusterQueue {cq.name}" for cq in new.cluster_queues.values()
                         if any(f.name == flavor for g in cq.resource_groups
                                for f in g.flavors)]
                + [f"Cohort {c.name}" for c in new.cohorts.values()
                   if any(f.name == flavor for g in c.resource_groups for f in g.flavors)]
                for flavor in self.flavors.keys() - new.flavors.keys()
            },
            "Cohort": {
                cohort: [f"ClusterQueue {cq.name}" for cq in new.cluster_queues.values()
                         if cq.cohort == cohort]
                + [f"Cohort {c.name}" for c in new.cohorts.values() if c.parent == cohort]
                for cohort in self.cohorts.keys() - new.cohorts.keys()
            },
            "ClusterQueue": {
                cq: [f"LocalQueue {lq.name}" for lq in new.local_queues.values()
                     if lq.cluster_queue == cq]
                for cq in self.cluster_queues.keys() - new.cluster_queues.keys()
            },
        }
        for kind, by_name in users.items():
            for name, named_by in sorted(by_name.items()):
                if named_by:
                    raise Conflict(
                        f"{kind} {name} is in use: {', '.join(sorted(named_by))} "
                        f"name{'s' if len(named_by) == 1 else ''} it; nothing was deleted",
                        field=f"{kind} {name}",
                        fix=f"delete or change {', '.join(sorted(named_by))} first, "
                        "or delete them in the same request",
                    )
        new.check()
        return new

    def _table(self, kind: str) -> dict[str, Any]:
        tables: dict[str, dict[str, Any]] = {
            "ResourceFlavor": self.flavors,
            "Cohort": self.cohorts,
            "ClusterQueue": self.cluster_queues,
            "LocalQueue": self.local_queues,
            "PriorityClass": self.priority_classes,
            "ProvisioningPolicy": self.provisioning_policies,
        }
        return tables[kind]

    # ------------------------------------------------------------------ checks
    def check(self) -> None:
        """Cross-object validation: every reference resolves, cohorts form a forest."""
        for cq in self.cluster_queues.values():
            where = f"ClusterQueue {cq.name}"
            if cq.cohort is not None and cq.cohort not in self.cohorts:
                # Kueue creates cohorts implicitly when a ClusterQueue names one.
                self.cohorts[cq.cohort] = Cohort(name=cq.cohort)
            self._check_groups(cq.resource_groups, where)
        for cohort in list(self.cohorts.values()):
            if cohort.parent is not None and cohort.parent not in self.cohorts:
                raise SpecError(
                    f"names parent cohort {cohort.parent!r}, which does not exist",
                    field=f"Cohort {cohort.name}.parent",
                    fix="create that Cohort first or fix the name",
                )
            self._check_groups(cohort.resource_groups, f"Cohort {cohort.name}")
        for cohort in self.cohorts.values():
            seen = [cohort.name]
            parent = cohort.parent
            while parent is not None:
                if parent in seen:
                    chain = " -> ".join([*seen, parent])
                    raise SpecError(
                        f"cohorts form a cycle: {chain}",
                        field=f"Cohort {cohort.name}.parent",
                        fix="make the cohort hierarchy a tree",
                    )
                seen.append(parent)
                parent = self.cohorts[parent].parent
        for lq in self.local_queues.values():
            if lq.cluster_queue not in self.cluster_queues:
                raise SpecError(
                    f"points at ClusterQueue {lq.cluster_queue!r}, which does not exist",
                    field=f"LocalQueue {lq.name}.clusterQueue",
                    fix="create that ClusterQueue or fix the name",
                )
        values: dict[int, str] = {}
        for pc in self.priority_classes.values():
            values.setdefault(pc.value, pc.name)

    def _check_groups(self, groups: list[ResourceGroup], where: str) -> None:
        for g, group in enumerate(groups):
            for f, flavor in enumerate(group.flavors):
                if flavor.name not in self.flavors:
                    raise SpecError(
                        f"names ResourceFlavor {flavor.name!r}, which does not exist",
                        field=f"{where}.resourceGroups[{g}].flavors[{f}].name",
                        fix="create that ResourceFlavor first (in the same file is fine)",
                    )

    # ------------------------------------------------------------------ look-ups
    @property
    def provisioning_policy(self) -> ProvisioningPolicy:
        """The operator's limits on node pools (no limits when none was applied)."""
        return self.provisioning_policies.get("default") or ProvisioningPolicy()

    def provisioning_of(self, cluster_queue: str) -> dict[str, FlavorProvisioning]:
        """How the provisionable flavors ``cluster_queue`` offers buy their pools, by flavor."""
        cq = self.cluster_queues[cluster_queue]
        named = {f.name for group in cq.resource_groups for f in group.flavors}
        return {n: f.provisioning for n, f in self.flavors.items()
                if n in named and f.provisioning is not None}

    def provisionable_flavors(self) -> dict[str, ResourceFlavor]:
        """The flavors whose node pools are bought on demand (they have ``provisioning``)."""
        return {n: f for n, f in self.flavors.items() if f.provisioning is not None}

    def priority_value(self, priority: str | int, field: str = "priority") -> int:
        if isinstance(priority, int):
            return priority
        pc = self.priority_classes.get(priority)
        if pc is None:
            known = ", ".join(sorted(self.priority_classes))
            raise SpecError(
                f"unknown priority class {priority!r}",
                field=field,
                fix=f"use one of {known}, or an integer",
            )
        return pc.value

    def cluster_queue_for(self, local_queue: str, field: str = "queue") -> ClusterQueue:
        lq = self.local_queues.get(local_queue)
        if lq is None:
            known = ", ".join(sorted(self.local_queues)) or "none"
            raise SpecError(
                f"unknown queue {local_queue!r}",
                field=field,
                fix=f"submit to an existing LocalQueue ({known}) or create one with phalanx apply",
            )
        return self.cluster_queues[lq.cluster_queue]

    @classmethod
    def default_for(cls, nodes: Iterable[Node], flavor: str = DEFAULT_FLAVOR) -> QueueConfig:
        """One flavor, one ClusterQueue ``default`` holding the nodes' capacity, one LocalQueue.

        Only a store without a configuration gets this, so a stored one (earlier versions
        named the flavor ``local``) is kept as it is. It follows the nodes
        (``follows_nodes``) until a configuration is applied.
        """
        totals: dict[str, int] = {}
        for node in nodes:
            for res, amount in node.allocatable.items():
                totals[res] = totals.get(res, 0) + amount
        for res in ("cpu", "memory"):
            totals.setdefault(res, 0)
        resources = sorted(totals)
        cq = ClusterQueue(
            name="default",
            preemption={"withinClusterQueue": "LowerPriority"},
            resource_groups=[
                ResourceGroup(
                    covered_resources=resources,
                    flavors=[
                        FlavorQuotas(
                            name=flavor,
                            resources=[
                                ResourceQuota(name=r, nominal_quota=format_quantity(totals[r], r))
                                for r in resources
                            ],
                        )
                    ],
                )
            ],
        )
        config = cls(
            flavors={flavor: ResourceFlavor(name=flavor)},
            cluster_queues={"default": cq},
            local_queues={"default": LocalQueue(name="default", cluster_queue="default")},
            follows_nodes=True,
        )
        config.check()
        return config


# --------------------------------------------------------------------------- YAML
def yaml_documents(text: str, source: str) -> list[Any]:
    """The non-empty documents of a YAML text; a syntax error names its line and column."""
    try:
        # libyaml's parser when PyYAML has it: a file of thousands of jobs loads in a fraction
        # of the time the pure-Python one takes, with the same safe types.
        return [d for d in yaml.load_all(text, Loader=_SAFE_LOADER) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecError(
            f"is not valid YAML{where}: {problem}", field=source, fix="fix the YAML syntax"
        ) from None


_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml_documents(text: str, source: str) -> list[Any]:
    docs = yaml_documents(text, source)
    if not docs:
        raise SpecError("holds no documents", field=source, fix="write at least one document")
    for i, doc in enumerate(docs):
        if not isinstance(doc, dict):
            raise SpecError(
                f"document {i + 1} is a {type(doc).__name__}, not a mapping",
                field=source,
                fix="each document must be a mapping of fields",
            )
    return docs


def parse_config_documents(
    docs: list[Any], source: str = "documents", notes: list[str] | None = None,
) -> list[ConfigObject]:
    """Config objects of Phalanx's short form or Kueue's own (``apiVersion``, ``metadata``,
    ``spec``: ``phalanx.spec.kueue``), mixed freely. ``notes`` receives what Kueue
    documents said that Phalanx read but keeps nowhere."""
    objects: list[ConfigObject] = []
    namespaces: dict[str, str] = {}
    docs, said = resolve_admission_checks(docs, source)
    if notes is not None:
        notes.extend(said)
    for i, doc in enumerate(docs):
        if doc is FOLDED:  # an admission check, read into the flavors it applies to
            continue
        if not isinstance(doc, dict):
            raise SpecError(f"document {i + 1} is not a mapping", field=source)
        if is_kubernetes_document(doc):
            obj, said = validate_kueue(doc, source, i, namespaces)
            objects.append(obj)
            if notes is not None:
                notes.extend(said)
            continue
        kind = doc.get("kind")
        model = CONFIG_KINDS.get(kind) if isinstance(kind, str) else None
        label = f"{source}[{i}]" + (f" ({kind} {doc.get('name')})" if model else "")
        if model is None:
            raise SpecError(
                f"unknown kind {kind!r}",
                field=f"{source}[{i}].kind",
                fix=f"use one of {', '.join(CONFIG_KINDS)}, or Kueue's own objects "
                    "(apiVersion kueue.x-k8s.io/v1beta1 or v1beta2)",
            )
        objects.append(validate(model, doc, prefix=label))  # type: ignore[arg-type]
    return objects


def load_config_yaml(
    text: str, source: str = "config", notes: list[str] | None = None,
) -> list[ConfigObject]:
    return parse_config_documents(load_yaml_documents(text, source), source, notes)


def load_job_yaml(text: str, source: str = "job") -> JobSpec:
    docs = load_yaml_documents(text, source)
    if len(docs) != 1:
        raise SpecError(
            f"holds {len(docs)} documents", field=source, fix="put one job in each file"
        )
    return validate(JobSpec, docs[0])


def load_jobs_yaml(text: str, source: str = "jobs") -> list[JobSpec]:
    """Every job of a YAML text of one or more documents; an error names the document's
    index and field (``jobs.yaml[3].podSets[0].replicas``)."""
    docs = load_yaml_documents(text, source)
    return [validate(JobSpec, doc, prefix=f"{source}[{i}]") for i, doc in enumerate(docs)]
