"""Kueue's own configuration objects, read as Phalanx's and written back.

``from_kueue`` turns one Kubernetes-style document (``apiVersion: kueue.x-k8s.io/v1beta1``
or ``v1beta2``, or ``scheduling.k8s.io/v1`` PriorityClass; ``metadata``, ``spec``) into
Phalanx's short form, which the models then validate as any document. ``to_kueue``
writes a Phalanx object back in Kueue's form, so ``phalanx export --as kueue`` then
``phalanx apply`` changes nothing. Pure: no Kubernetes client, no cluster.

Every field is accounted for: read (its path in the document names it in any error),
ignored because Kubernetes sets it (``metadata.uid``, ``status``... as kubectl does), or
refused with what Phalanx does instead. Nothing is dropped in silence: what is read but
kept nowhere (a flavor's ``topologyName``, a LocalQueue's own name) comes back as a note
the CLI prints. docs/kueue-files.md has the table.

Phalanx's own fields that Kueue lacks (a ClusterQueue's ``maxPendingJobs``, a flavor's
``provisioning``...) travel as ``phalanx.dev/<field>`` annotations holding JSON, which
Kueue keeps and ignores and Phalanx reads back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from phalanx.errors import SpecError

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSIONS = ("v1beta1", "v1beta2")
DEFAULT_KUEUE_VERSION = "v1beta1"
SCHEDULING_API = "scheduling.k8s.io/v1"
ANNOTATION_PREFIX = "phalanx.dev/"
# Kubernetes' namespace for an object that names none (kubectl's default context).
DEFAULT_NAMESPACE = "default"

# Each Kueue kind and the Phalanx kind it becomes.
KUEUE_KINDS = {
    "ResourceFlavor": "ResourceFlavor",
    "ClusterQueue": "ClusterQueue",
    "Cohort": "Cohort",
    "LocalQueue": "LocalQueue",
    "WorkloadPriorityClass": "PriorityClass",
}

# metadata that Kubernetes sets, or that says nothing about scheduling: skipped as
# `kubectl apply` skips it (docs/kueue-files.md says so).
IGNORED_METADATA = frozenset({
    "uid", "resourceVersion", "creationTimestamp", "managedFields", "generation",
    "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds", "finalizers",
    "ownerReferences", "labels", "annotations",
})
# Top-level keys every Kubernetes object may carry besides its fields.
ENVELOPE = frozenset({"apiVersion", "kind", "metadata", "status"})


class Refused:
    """A field Kueue has and Phalanx has no meaning for; ``instead`` says what Phalanx does."""

    def __init__(self, instead: str) -> None:
        self.instead = instead


# A rule for a mapping's keys: None (read as is), a nested rule set (a mapping),
# a one-element list holding a rule set (a list of mappings), or Refused.
Rules = dict[str, Any]

_NO_CHECKS = Refused(
    "Phalanx has no admission checks but Kueue's provisioning-request one, read as a "
    "ResourceFlavor's provisioning (docs/provisioning.md): put the AdmissionCheck and its "
    "ProvisioningRequestConfig in the same file")
_RESOURCE_GROUPS: Rules = {
    "coveredResources": None,
    "flavors": [{"name": None, "resources": [{
        "name": None, "nominalQuota": None, "borrowingLimit": None, "lendingLimit": None}]}],
}
_FAIR_SHARING: Rules = {"weight": None}
_TAINT: Rules = {"key": None, "value": None, "effect": None, "timeAdded": None}
_TOLERATION: Rules = {
    "key": None, "operator": None, "value": None, "effect": None,
    "tolerationSeconds": Refused("Phalanx evicts no pod after a time under a taint; "
                                 "remove tolerationSeconds"),
}


def _cluster_queue_rules(version: str) -> Rules:
    rules: Rules = {
        "resourceGroups": [_RESOURCE_GROUPS],
        "queueingStrategy": None,
        "namespaceSelector": None,  # checked on its own: only {} has a meaning here
        "flavorFungibility": {
            "whenCanBorrow": None, "whenCanPreempt": None,
            "preference": Refused("Phalanx tries the flavors in their order under "
                                  "whenCanBorrow and whenCanPreempt; remove preference"),
        },
        "preemption": {
            "withinClusterQueue": None, "reclaimWithinCohort": None,
            "borrowWithinCohort": {"policy": None, "maxPriorityThreshold": None},
        },
        "stopPolicy": None,
        "fairSharing": _FAIR_SHARING,
        "admissionChecksStrategy": _NO_CHECKS,
        "admissionScope": Refused(
            "Phalanx orders a ClusterQueue's jobs by priority, then submission time, "
            "whichever LocalQueue they came through; remove admissionScope"),
        "concurrentAdmissionPolicy": Refused(
            "Phalanx admits a job on one flavor at a time; remove concurrentAdmissionPolicy"),
    }
    if version == "v1beta1":
        rules["cohort"] = None
        rules["admissionChecks"] = _NO_CHECKS
    else:
        rules["cohortName"] = None
    return rules


_SPEC_RULES: dict[str, Rules] = {
    "ResourceFlavor": {"nodeLabels": None, "nodeTaints": [_TAINT], "tolerations": [_TOLERATION],
                       "topologyName": None},
    "Cohort": {"parentName": None, "resourceGroups": [_RESOURCE_GROUPS],
               "fairSharing": _FAIR_SHARING},
    "LocalQueue": {
        "clusterQueue": None, "stopPolicy": None,
        "fairSharing": Refused(
            "Phalanx has no fair sharing between the LocalQueues of one ClusterQueue; it "
            "shares between ClusterQueues and cohorts (their spec.fairSharing)"),
    },
}
_TOP_RULES: dict[str, Rules] = {
    "WorkloadPriorityClass": {"value": None, "description": None},
    "PriorityClass": {"value": None, "description": None, "globalDefault": None,
                      "preemptionPolicy": None},
}


@dataclass
class Translated:
    """A Kueue document in Phalanx's short form, and what was read but is kept nowhere."""

    document: dict[str, Any]
    notes: list[str] = field(default_factory=list)


def is_kubernetes_document(doc: dict[str, Any]) -> bool:
    """Whether ``doc`` is a Kubernetes-style object (it has ``apiVersion``)."""
    return "apiVersion" in doc


def _refuse(path: str, instead: str) -> SpecError:
    return SpecError("Phalanx has no meaning for this field", field=path, fix=instead)


def _check(value: Any, rules: Rules, path: str, what: str) -> None:
    """Refuse every key of ``value`` (at any depth) that ``rules`` does not read."""
    if not isinstance(value, dict):
        return  # the model names a wrong type at its path
    for key, sub in value.items():
        where = f"{path}.{key}"
        if key not in rules:
            raise SpecError(
                f"is no field of Kueue's {what} that Phalanx reads", field=where,
                fix="check its spelling against Kueue's API; docs/kueue-files.md lists the "
                    "fields Phalanx reads")
        rule = rules[key]
        if isinstance(rule, Refused):
            raise _refuse(where, rule.instead)
        if isinstance(rule, dict):
            _check(sub, rule, where, what)
        elif isinstance(rule, list) and isinstance(sub, list):
            for i, item in enumerate(sub):
                _check(item, rule[0], f"{where}[{i}]", what)


def _api(doc: dict[str, Any], where: str) -> tuple[str, str]:
    """(kind, version) of a Kubernetes document Phalanx reads; SpecError otherwise."""
    api = doc.get("apiVersion")
    kind = doc.get("kind")
    if api == SCHEDULING_API and kind == "PriorityClass":
        return "PriorityClass", "v1"
    group, _, version = str(api).partition("/")
    if group != KUEUE_GROUP:
        raise SpecError(
            f"apiVersion {api!r} is not one Phalanx reads", field=f"{where}.apiVersion",
            fix=f"use {KUEUE_GROUP}/v1beta1 or /v1beta2 (Kueue), {SCHEDULING_API} for a "
                "PriorityClass, or Phalanx's own form (no apiVersion)")
    if version not in KUEUE_VERSIONS:
        raise SpecError(
            f"Kueue version {version!r} is not one Phalanx reads", field=f"{where}.apiVersion",
            fix=f"use {KUEUE_GROUP}/v1beta1 or {KUEUE_GROUP}/v1beta2")
    if kind not in KUEUE_KINDS:
        raise SpecError(
            f"Kueue kind {kind!r} is not one Phalanx reads", field=f"{where}.kind",
            fix=f"use one of {', '.join(KUEUE_KINDS)} (docs/kueue-files.md says what Phalanx "
                "does instead of the others)")
    return str(kind), version


def kueue_label(doc: dict[str, Any], source: str, index: int) -> str:
    """How errors name a Kueue document: ``documents[2] (ClusterQueue team-a)``."""
    meta = doc.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    return f"{source}[{index}] ({doc.get('kind')} {name})"


def from_kueue(doc: dict[str, Any], where: str) -> Translated:
    """Phalanx's short form of a Kueue (or scheduling.k8s.io) document; ``where`` names it
    in errors. Refuses, naming the field's path, what Phalanx has no meaning for."""
    kind, version = _api(doc, where)
    meta = doc.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
        raise SpecError("is required", field=f"{where}.metadata.name",
                        fix="give the object a name (metadata.name)")
    for key in meta:
        if key not in IGNORED_METADATA and key not in ("name", "namespace"):
            raise _refuse(f"{where}.metadata.{key}",
                          "name the object with metadata.name" if key == "generateName"
                          else f"remove metadata.{key}")
    for key in doc:
        if key not in ENVELOPE and not (kind in _TOP_RULES or key == "spec"):
            raise SpecError(f"is no field of {kind}", field=f"{where}.{key}",
                            fix="put the object's fields under spec")
    what = f"{kind} {version}"
    if kind in _TOP_RULES:
        body = {k: v for k, v in doc.items() if k not in ENVELOPE}
        _check(body, _TOP_RULES[kind], where, what)
    else:
        spec = doc.get("spec") or {}
        if not isinstance(spec, dict):
            raise SpecError("is not a mapping", field=f"{where}.spec",
                            fix="write the object's fields as a mapping under spec")
        rules = _cluster_queue_rules(version) if kind == "ClusterQueue" else _SPEC_RULES[kind]
        _check(spec, rules, f"{where}.spec", what)
        body = dict(spec)
    name = meta["name"]
    notes: list[str] = []
    out: dict[str, Any] = {"kind": KUEUE_KINDS.get(kind, "PriorityClass"), "name": name}
    if kind == "ResourceFlavor":
        topology = body.pop("topologyName", None)
        if topology is not None:
            notes.append(
                f"ResourceFlavor {name}: topologyName {topology} is not kept; Phalanx places "
                "by topology on every flavor, and a job names the node label of the level it "
                "needs (topology: {required: <label>})")
    elif kind == "ClusterQueue":
        cohort = body.pop("cohort" if version == "v1beta1" else "cohortName", None)
        if cohort is not None:
            body["cohort"] = cohort
        selector = body.pop("namespaceSelector", None)
        if selector not in (None, {}):
            raise _refuse(
                f"{where}.spec.namespaceSelector",
                "Phalanx decides who may submit to a queue by team (`phalanx teams set TEAM "
                "--queue QUEUE`, docs/security.md); write namespaceSelector: {} (every "
                "LocalQueue that points at the queue)")
        fungibility = body.get("flavorFungibility")
        # v1beta2 says MayStopSearch for v1beta1's Borrow and Preempt (and newer v1beta1
        # servers take it too).
        if isinstance(fungibility, dict):
            body["flavorFungibility"] = {
                k: ({"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"}[k]
                    if v == "MayStopSearch" else v)
                for k, v in fungibility.items()}
    elif kind == "Cohort":
        parent = body.pop("parentName", None)
        if parent is not None:
            body["parent"] = parent
    elif kind == "LocalQueue":
        namespace = meta.get("namespace") or DEFAULT_NAMESPACE
        out["name"] = namespace
        if namespace != name:
            notes.append(
                f"LocalQueue {name} of namespace {namespace} becomes Phalanx's queue "
                f"{namespace}: a namespace is one team's queue (jobs write queue: {namespace})")
    elif kind == "PriorityClass":
        if body.pop("globalDefault", False) and name != "default":
            raise _refuse(f"{where}.globalDefault",
                          "jobs that name no priority get the PriorityClass named default; "
                          "name this class default, or remove globalDefault")
        if body.pop("preemptionPolicy", "PreemptLowerPriority") != "PreemptLowerPriority":
            raise _refuse(f"{where}.preemptionPolicy",
                          "a Phalanx priority preempts wherever the ClusterQueue's preemption "
                          "policy allows; remove preemptionPolicy")
    if isinstance(body.get("fairSharing"), dict) and "weight" in body["fairSharing"]:
        body["fairSharing"] = {"weight": _weight(body["fairSharing"]["weight"],
                                                 f"{where}.spec.fairSharing.weight")}
    out.update(body)
    out.update(_annotations(meta, where))
    if kind == "ClusterQueue":
        for key in PREEMPTION_ONLY:
            if key in out:
                preemption = out.get("preemption")
                out["preemption"] = {**(preemption if isinstance(preemption, dict) else {}),
                                     key: out.pop(key)}
    return Translated(out, notes)


def _weight(value: Any, path: str) -> Any:
    """A fair-sharing weight: Kueue writes a quantity ("0.5", "500m", 2)."""
    from phalanx.spec.quantity import parse_quantity

    if isinstance(value, str):
        try:
            return parse_quantity(value) / 1000
        except SpecError as exc:
            raise SpecError(exc.message, field=path, fix="write a weight such as 1, 0.5 "
                            "or \"500m\"") from None
    return value


def _annotations(meta: dict[str, Any], where: str) -> dict[str, Any]:
    """Phalanx's own fields carried as ``phalanx.dev/<field>`` annotations (JSON)."""
    fields: dict[str, Any] = {}
    annotations = meta.get("annotations") or {}
    if not isinstance(annotations, dict):
        return fields
    for key, text in annotations.items():
        if not (isinstance(key, str) and key.startswith(ANNOTATION_PREFIX)):
            continue
        path = f"{where}.metadata.annotations.{key}"
        try:
            fields[key.removeprefix(ANNOTATION_PREFIX)] = json.loads(text)
        except (TypeError, ValueError):
            raise SpecError("is not JSON", field=path,
                            fix="write the Phalanx field's value as JSON, e.g. \"10m\" "
                                "or {\"provider\": \"local\", ...}") from None
    return fields


# Phalanx's fields that Kueue's form lacks, by kind: written as annotations.
PHALANX_ONLY: dict[str, tuple[str, ...]] = {
    "ResourceFlavor": ("provisioning",),
    "ClusterQueue": ("maxPendingJobs", "minRuntime", "reserveAfter", "holdForLargeGangs",
                     "capacityFollowsHealth", "avoidDegradedNodes", "protectAfterStart",
                     "maxPreemptions", "maxPreemptionsWindow"),
    "PriorityClass": ("minRuntime",),
}
# Of those, the ones that live in Phalanx's ``preemption`` (Kueue's has no such fields).
PREEMPTION_ONLY = ("protectAfterStart", "maxPreemptions", "maxPreemptionsWindow")


def validate_kueue(doc: dict[str, Any], source: str, index: int,
                   namespaces: dict[str, str] | None = None) -> tuple[Any, list[str]]:
    """The Phalanx object a Kueue document describes, validated, and its notes.

    Errors name the field's path in the Kueue document (``spec.resourceGroups[0]...``,
    ``metadata.annotations.phalanx.dev/maxPendingJobs``). ``namespaces``: the namespaces
    earlier LocalQueues of the same file took, and the names they had (one each)."""
    from phalanx.spec.base import check_name, validate
    from phalanx.spec.config import CONFIG_KINDS

    where = kueue_label(doc, source, index)
    translated = from_kueue(doc, where)
    kind = translated.document["kind"]
    if doc.get("kind") == "LocalQueue" and namespaces is not None:
        queue = translated.document["name"]
        if queue in namespaces:
            raise SpecError(
                f"namespace {queue} holds LocalQueue {namespaces[queue]} already, and a "
                "namespace is one Phalanx queue (named after it)",
                field=f"{where}.metadata.namespace",
                fix="write this queue in Phalanx's form with a name of its own (kind: "
                    "LocalQueue, name: ..., clusterQueue: ...), or give it its own namespace")
        namespaces[queue] = doc["metadata"]["name"]
    own = PHALANX_ONLY.get(kind, ())
    meta = doc["metadata"]
    for key in (meta.get("annotations") or {}):
        field_name = str(key).removeprefix(ANNOTATION_PREFIX)
        if str(key).startswith(ANNOTATION_PREFIX) and field_name not in own:
            raise SpecError(
                f"names no field Phalanx keeps on a {kind} outside Kueue's form",
                field=f"{where}.metadata.annotations.{key}",
                fix=f"use one of {', '.join(ANNOTATION_PREFIX + f for f in own) or 'none'}, "
                    "or remove it")
    name_field = "metadata.namespace" if doc.get("kind") == "LocalQueue" else "metadata.name"
    try:
        check_name(translated.document["name"])
    except ValueError as exc:
        message, _, fix = str(exc).partition("; ")
        raise SpecError(message, field=f"{where}.{name_field}", fix=fix) from None
    body_prefix = where if doc.get("kind") in _TOP_RULES else f"{where}.spec"
    try:
        obj = validate(CONFIG_KINDS[kind], translated.document, prefix=body_prefix)
    except SpecError as exc:
        path = exc.field or ""
        for name in own:
            inside = f"{body_prefix}.preemption.{name}" if name in PREEMPTION_ONLY \
                else f"{body_prefix}.{name}"
            if path.startswith(inside):
                exc.field = path.replace(
                    inside,
                    f"{where}.metadata.annotations.{ANNOTATION_PREFIX}{name}", 1)
        raise
    return obj, translated.notes


# --------------------------------------------------------------------------- writing back
def _format_weight(weight: float) -> int | str:
    return int(weight) if float(weight).is_integer() else f"{weight:g}"


def to_kueue(obj: Any, version: str = DEFAULT_KUEUE_VERSION) -> dict[str, Any]:
    """Kueue's form of a Phalanx config object (``version``: v1beta1 or v1beta2).

    A kind Kueue has no counterpart for (ProvisioningPolicy) stays in Phalanx's form,
    which ``phalanx apply`` reads in the same file."""
    if version not in KUEUE_VERSIONS:
        raise SpecError(f"Kueue version {version!r} is not one Phalanx writes",
                        field="--api-version", fix="use v1beta1 or v1beta2")
    doc = obj.to_dict()
    kind = doc.pop("kind")
    name = doc.pop("name")
    if kind not in KUEUE_KINDS.values():
        return {"kind": kind, "name": name, **doc}
    meta: dict[str, Any] = {"name": name}
    preemption = doc.get("preemption") if kind == "ClusterQueue" else None
    if isinstance(preemption, dict):
        for key in PREEMPTION_ONLY:
            if key in preemption:
                doc[key] = preemption.pop(key)
    annotations = {f"{ANNOTATION_PREFIX}{key}": json.dumps(doc.pop(key), sort_keys=True)
                   for key in PHALANX_ONLY.get(kind, ()) if key in doc}
    # Defaults Phalanx writes out in full that Kueue's form leaves unsaid.
    if doc.get("fairSharing") == {"weight": 1.0}:
        doc.pop("fairSharing")
    elif "fairSharing" in doc:
        doc["fairSharing"] = {"weight": _format_weight(doc["fairSharing"]["weight"])}
    for key in ("capacityFollowsHealth", "avoidDegradedNodes"):
        if annotations.get(f"{ANNOTATION_PREFIX}{key}") == "false":
            annotations.pop(f"{ANNOTATION_PREFIX}{key}")
    if annotations:
        meta["annotations"] = annotations
    api = f"{KUEUE_GROUP}/{version}"
    if kind == "PriorityClass":
        return {"apiVersion": api, "kind": "WorkloadPriorityClass", "metadata": meta, **doc}
    if kind == "LocalQueue":
        meta["namespace"] = name
    elif kind == "ClusterQueue":
        cohort = doc.pop("cohort", None)
        # Kueue admits from no namespace without a selector; Phalanx's queues take every
        # LocalQueue that points at them.
        doc = {"namespaceSelector": {}, **doc}
        if cohort is not None:
            doc = {("cohort" if version == "v1beta1" else "cohortName"): cohort, **doc}
        if version == "v1beta2":
            doc["flavorFungibility"] = {
                k: "MayStopSearch" if v in ("Borrow", "Preempt") else v
                for k, v in doc["flavorFungibility"].items()}
    elif kind == "Cohort":
        parent = doc.pop("parent", None)
        if parent is not None:
            doc = {"parentName": parent, **doc}
    return {"apiVersion": api, "kind": kind, "metadata": meta, "spec": doc}
