"""What the API server lets an update change in a pod's spec, for the fake API server.

A pod's spec is immutable but for a few fields; while the pod has scheduling gates
(Kubernetes' pod scheduling readiness), its gates may be removed (never added), its
``nodeSelector`` may gain entries, and the required node affinity may gain requirements in
its existing terms (nothing existing changed): placement may only be narrowed before the
pod is scheduled."""

from __future__ import annotations

from typing import Any

from tests.k8s_plane.fake_apiserver import merge_patch

Object = dict[str, Any]
_MUTABLE = ("schedulingGates", "nodeSelector", "affinity", "activeDeadlineSeconds")


def spec_change(found: Object, patch: Object) -> str | None:
    """Why the API server would refuse ``patch`` (a merge patch) of pod ``found``."""
    old = found.get("spec") or {}
    new = merge_patch(found, patch).get("spec") or {}
    if old == new:
        return None
    others = sorted(k for k in set(old) | set(new)
                    if k not in _MUTABLE and old.get(k) != new.get(k))
    if others:
        return f"spec: Forbidden: pod updates may not change fields other than {_MUTABLE} " \
               f"(changed: {', '.join(others)})"
    old_gates = [g["name"] for g in old.get("schedulingGates") or []]
    new_gates = [g["name"] for g in new.get("schedulingGates") or []]
    if any(g not in old_gates for g in new_gates):
        return "spec.schedulingGates: Forbidden: only deletion is allowed"
    placement_changed = (old.get("nodeSelector") != new.get("nodeSelector")
                         or old.get("affinity") != new.get("affinity"))
    if placement_changed and not old_gates:
        return "spec: Forbidden: node selector and affinity change only on a gated pod"
    old_selector, new_selector = old.get("nodeSelector") or {}, new.get("nodeSelector") or {}
    if any(new_selector.get(k) != v for k, v in old_selector.items()):
        return "spec.nodeSelector: Invalid value: only additions are allowed"
    return _affinity_change(old.get("affinity") or {}, new.get("affinity") or {})


def _required(affinity: Object) -> Any:
    return ((affinity.get("nodeAffinity") or {})
            .get("requiredDuringSchedulingIgnoredDuringExecution"))


def _affinity_change(old: Object, new: Object) -> str | None:
    rest = ({k: v for k, v in (a.get("nodeAffinity") or {}).items()
             if k != "requiredDuringSchedulingIgnoredDuringExecution"} for a in (old, new))
    if next(rest) != next(rest) or {k: v for k, v in old.items() if k != "nodeAffinity"} \
            != {k: v for k, v in new.items() if k != "nodeAffinity"}:
        return "spec.affinity: Invalid value: only the required node affinity may change"
    before, after = _required(old), _required(new)
    if before is None:
        return None  # set anew: allowed
    old_terms = before.get("nodeSelectorTerms") or []
    new_terms = (after or {}).get("nodeSelectorTerms") or []
    if len(old_terms) != len(new_terms):
        return "spec.affinity: Invalid value: nodeSelectorTerms may not be added or removed"
    for was, now in zip(old_terms, new_terms, strict=True):
        for kind in ("matchExpressions", "matchFields"):
            kept = was.get(kind) or []
            if (now.get(kind) or [])[:len(kept)] != kept:
                return f"spec.affinity: Invalid value: existing {kind} may not change"
    return None
