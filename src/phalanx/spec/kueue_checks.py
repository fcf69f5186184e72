"""Kueue's provisioning admission checks, read as a flavor's ``provisioning``.

In Kueue a ClusterQueue lists AdmissionChecks; one whose controller is
``kueue.x-k8s.io/provisioning-request`` names a ProvisioningRequestConfig, and a workload
is admitted once the cluster autoscaler has provisioned its pods through a
ProvisioningRequest of that config's class. Phalanx does the same per flavor: a
ResourceFlavor with ``provisioning`` (provider ``kubernetes-provisioningrequest``) buys one
pool per gang through a ProvisioningRequest (docs/provisioning.md). Phalanx also needs
the shape of one node, which no Kueue object has, so the flavor carries it in its
``phalanx.dev/provisioning`` annotation; without it the check is refused, naming the flavor.

``resolve_admission_checks`` rewrites a file's documents before they are read: the checks
and their configs are folded into the flavors they apply to, and leave the file.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from phalanx.errors import SpecError
from phalanx.spec.kueue import ANNOTATION_PREFIX, KUEUE_GROUP, KUEUE_VERSIONS, kueue_label

PROVISIONING_CONTROLLER = "kueue.x-k8s.io/provisioning-request"
PROVIDER = "kubernetes-provisioningrequest"
_PROVISIONING = f"{ANNOTATION_PREFIX}provisioning"
_CHECK_FIELDS = {"controllerName", "parameters"}
# What an AdmissionCheck or ProvisioningRequestConfig leaves in a file once read.
FOLDED: dict[str, Any] = {"folded": "into the flavors its checks apply to"}
_CONFIG_FIELDS = {"provisioningClassName", "parameters"}
_CONFIG_REFUSED = {
    "managedResources": "Phalanx asks a pool for every resource of the gang's pods",
    "retryStrategy": "retries are the ProvisioningPolicy's retries, retryBackoff and "
                     "retryBackoffMax (one for every flavor)",
    "podSetUpdates": "Phalanx's pool nodes carry the flavor's labels and its own reservation "
                     "label, which the gang's pods select",
    "podSetMergePolicy": "Phalanx asks one request per gang, a pod set per pod set",
}


def _kueue(doc: Any, kind: str) -> bool:
    return (isinstance(doc, dict) and doc.get("kind") == kind and doc.get("apiVersion") in
            [f"{KUEUE_GROUP}/{version}" for version in KUEUE_VERSIONS])


def _name(doc: dict[str, Any]) -> Any:
    meta = doc.get("metadata")
    return meta.get("name") if isinstance(meta, dict) else None


def _spec(doc: dict[str, Any]) -> dict[str, Any]:
    spec = doc.get("spec")
    return spec if isinstance(spec, dict) else {}


def _fields(doc: dict[str, Any], where: str, known: set[str],
            refused: dict[str, str]) -> None:
    for key in _spec(doc):
        if key in refused:
            raise SpecError("Phalanx has no meaning for this field", field=f"{where}.spec.{key}",
                            fix=refused[key])
        if key not in known:
            raise SpecError(f"is no field of Kueue's {doc.get('kind')} that Phalanx reads",
                            field=f"{where}.spec.{key}",
                            fix="check its spelling against Kueue's API (docs/kueue-files.md)")


def _check_class(check: dict[str, Any], where: str,
                 configs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The provisioning options an AdmissionCheck stands for (className, parameters)."""
    _fields(check, where, _CHECK_FIELDS, {})
    spec = _spec(check)
    if spec.get("controllerName") != PROVISIONING_CONTROLLER:
        raise SpecError(
            "Phalanx runs no admission check but Kueue's provisioning-request one",
            field=f"{where}.spec.controllerName",
            fix=f"use {PROVISIONING_CONTROLLER} with a ProvisioningRequestConfig, or remove "
                "the check (Phalanx admits a job when its quota and nodes allow)")
    ref = spec.get("parameters") or {}
    if not isinstance(ref, dict) or ref.get("kind") != "ProvisioningRequestConfig":
        raise SpecError("names no ProvisioningRequestConfig", field=f"{where}.spec.parameters",
                        fix="set parameters: {apiGroup: kueue.x-k8s.io, kind: "
                            "ProvisioningRequestConfig, name: ...}")
    config = configs.get(str(ref.get("name")))
    if config is None:
        raise SpecError(
            f"names ProvisioningRequestConfig {ref.get('name')!r}, which is not in this file",
            field=f"{where}.spec.parameters.name",
            fix="put the ProvisioningRequestConfig in the same file")
    options: dict[str, Any] = {}
    if config.get("provisioningClassName"):
        options["className"] = config["provisioningClassName"]
    if config.get("parameters"):
        options["parameters"] = config["parameters"]
    return options


def resolve_admission_checks(
    docs: list[Any], source: str,
) -> tuple[list[Any], list[str]]:
    """``docs`` with provisioning admission checks folded into their flavors.

    AdmissionChecks and ProvisioningRequestConfigs become FOLDED (indices stay, so errors
    still name ``source[i]``); a ClusterQueue loses its checks; each flavor a check applies
    to has ``provider: kubernetes-provisioningrequest`` and the config's class and
    parameters set in its ``phalanx.dev/provisioning`` annotation. Returns the notes."""
    if not any(_kueue(d, "AdmissionCheck") or _kueue(d, "ProvisioningRequestConfig")
               or (_kueue(d, "ClusterQueue") and ({"admissionChecks", "admissionChecksStrategy"}
                                                  & _spec(d).keys())) for d in docs):
        return docs, []
    out = [copy.deepcopy(d) for d in docs]
    configs: dict[str, dict[str, Any]] = {}
    checks: dict[str, tuple[dict[str, Any], str]] = {}
    flavors: dict[str, dict[str, Any]] = {}
    for i, doc in enumerate(out):
        where = kueue_label(doc, source, i) if isinstance(doc, dict) else source
        if _kueue(doc, "ProvisioningRequestConfig"):
            _fields(doc, where, _CONFIG_FIELDS, _CONFIG_REFUSED)
            configs[str(_name(doc))] = _spec(doc)
            out[i] = FOLDED
        elif _kueue(doc, "AdmissionCheck"):
            checks[str(_name(doc))] = (doc, where)
            out[i] = FOLDED
        elif _kueue(doc, "ResourceFlavor"):
            flavors[str(_name(doc))] = doc
    options_of = {name: _check_class(check, where, configs)
                  for name, (check, where) in checks.items()}
    used = {str(_spec(check).get("parameters", {}).get("name")) for check, _ in checks.values()}
    notes = [f"ProvisioningRequestConfig {name} is named by no AdmissionCheck of this file; "
             "it is not kept" for name in sorted(configs.keys() - used)]
    named: set[str] = set()
    for i, doc in enumerate(out):
        if not _kueue(doc, "ClusterQueue"):
            continue
        where = kueue_label(doc, source, i)
        spec = _spec(doc)
        rules: list[tuple[str, list[str] | None, str]] = []
        # v1beta2 has no spec.admissionChecks: its own reading refuses it there.
        listed = spec.pop("admissionChecks", None) if doc["apiVersion"].endswith("v1beta1") else []
        for j, name in enumerate(listed or []):
            rules.append((str(name), None, f"{where}.spec.admissionChecks[{j}]"))
        strategy = spec.pop("admissionChecksStrategy", None) or {}
        for j, rule in enumerate(strategy.get("admissionChecks") or []):
            path = f"{where}.spec.admissionChecksStrategy.admissionChecks[{j}]"
            extra = set(rule) - {"name", "onFlavors"}
            if extra:
                raise SpecError("is no field of an admission check rule",
                                field=f"{path}.{sorted(extra)[0]}", fix="use name and onFlavors")
            rules.append((str(rule.get("name")), rule.get("onFlavors"), path))
        offered = [f.get("name") for g in spec.get("resourceGroups") or []
                   for f in g.get("flavors") or []]
        for name, on_flavors, path in rules:
            if name not in checks:
                raise SpecError(f"names AdmissionCheck {name!r}, which is not in this file",
                                field=path, fix="put the AdmissionCheck and its "
                                "ProvisioningRequestConfig in the same file")
            named.add(name)
            options = options_of[name]
            for flavor_name in on_flavors or offered:
                _provision(flavors.get(str(flavor_name)), str(flavor_name), options, path)
                notes.append(f"AdmissionCheck {name} of ClusterQueue {_name(doc)} becomes "
                             f"ResourceFlavor {flavor_name}'s provisioning (one "
                             f"ProvisioningRequest per gang, class "
                             f"{options.get('className', 'the default')})")
    notes += [f"AdmissionCheck {name} is named by no ClusterQueue of this file; it is not kept"
              for name in sorted(checks.keys() - named)]
    return out, notes


def _provision(flavor: dict[str, Any] | None, name: str, options: dict[str, Any],
               path: str) -> None:
    """Set the check's provider and options in the flavor's provisioning annotation."""
    shape = f"{_PROVISIONING}: '{{\"node\": {{\"cpu\": \"8\", \"nvidia.com/gpu\": 4}}}}'"
    if flavor is None:
        raise SpecError(
            f"the check applies to ResourceFlavor {name}, which is not in this file",
            field=path, fix=f"put ResourceFlavor {name} in the same file, with the shape of "
                            f"one node of its pools ({shape})")
    meta = flavor.setdefault("metadata", {})
    annotations = meta.setdefault("annotations", {})
    text = annotations.get(_PROVISIONING)
    if text is None:
        raise SpecError(
            f"the check applies to ResourceFlavor {name}, and Phalanx buys whole node pools: "
            "it must know the shape of one node, which Kueue's objects do not say",
            field=path, fix=f"annotate ResourceFlavor {name} with {shape} "
                            "(docs/provisioning.md lists the other fields)")
    try:
        provisioning = json.loads(text)
    except (TypeError, ValueError):
        return  # the flavor's own reading names the annotation
    if not isinstance(provisioning, dict):
        return
    if provisioning.get("provider", PROVIDER) != PROVIDER:
        raise SpecError(
            f"ResourceFlavor {name} is provisioned by {provisioning['provider']}, and the "
            f"check asks for {PROVIDER}", field=path,
            fix=f"remove provider from the flavor's {_PROVISIONING} annotation")
    provisioning["provider"] = PROVIDER
    provisioning["options"] = {**provisioning.get("options", {}), **options}
    annotations[_PROVISIONING] = json.dumps(provisioning, sort_keys=True)
