"""Node health on Kubernetes: what the doctor writes on its own Node, and how it is read back.

The doctor (a DaemonSet pod per node) writes its report in three places of its
Node: the status condition ``PhalanxHealthy`` (True unless a check answered ERR;
reason ChecksPassed, ChecksWarned or ChecksFailed; the reasons as message), the
label ``phalanx.dev/health=PASS|WARN|ERR`` (so ``kubectl get nodes -l`` finds sick
nodes), and the annotation ``phalanx.dev/checks`` (every check's last answer, as
JSON). Those need ``nodes get, patch`` and ``nodes/status patch``, and nothing else.

The control plane's node informer maps them back onto the scheduler's Node.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from pydantic import TypeAdapter, ValidationError

from phalanx.compute.kubernetes.client import KubeClient
from phalanx.health.doctor import Report
from phalanx.spec.quantity import MILLI, parse_quantity
from phalanx.spec.resources import GPU, CheckStatus, NodeCheck, NodeHealth

log = logging.getLogger("phalanx.compute.kubernetes")

Object = dict[str, Any]
CONDITION = "PhalanxHealthy"
HEALTH_LABEL = "phalanx.dev/health"
CHECKS_ANNOTATION = "phalanx.dev/checks"
STRATEGIC = "application/strategic-merge-patch+json"
_REASON = {CheckStatus.PASS: "ChecksPassed", CheckStatus.WARN: "ChecksWarned",
           CheckStatus.ERR: "ChecksFailed"}
_CHECKS = TypeAdapter(list[NodeCheck])


def now_rfc3339() -> str:
    """Now, as the API server writes times (RFC 3339, seconds, UTC)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class NodeReporter:
    """Writes the doctor's reports on one Node."""

    def __init__(self, client: KubeClient, node: str) -> None:
        self.client = client
        self.node = node
        self.path = f"/api/v1/nodes/{quote(node, safe='')}"
        self._last_status: CheckStatus | None = None
        self._since = now_rfc3339()

    def advertised_gpus(self) -> int | None:
        """The GPUs the node advertises (its capacity), None when it advertises none."""
        obj = self.client.get(self.path)
        value = ((obj.get("status") or {}).get("capacity") or {}).get(GPU)
        return parse_quantity(value) // MILLI if value is not None else None

    def report(self, report: Report) -> None:
        status = report.status
        if status is not self._last_status:
            self._last_status, self._since = status, now_rfc3339()
        message = "; ".join(report.reasons) or "every check passed"
        condition = {
            "type": CONDITION, "status": "False" if status is CheckStatus.ERR else "True",
            "reason": _REASON[status], "message": message[:1024],
            "lastHeartbeatTime": now_rfc3339(), "lastTransitionTime": self._since,
        }
        # Conditions merge by type under a strategic merge patch: the kubelet's stay.
        self.client.request("PATCH", f"{self.path}/status", content_type=STRATEGIC,
                            body={"status": {"conditions": [condition]}})
        checks = [c.to_dict() for c in report.checks]
        self.client.patch(self.path, {"metadata": {
            "labels": {HEALTH_LABEL: status.value},
            "annotations": {CHECKS_ANNOTATION: json.dumps(checks, separators=(",", ":"))},
        }})


def _condition(obj: Object) -> Object | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or []
                 if c.get("type") == CONDITION), None)


def doctor_verdict(obj: Object) -> NodeHealth:
    """The health the node's doctor last reported, without reading its checks."""
    label = ((obj.get("metadata") or {}).get("labels") or {}).get(HEALTH_LABEL)
    if label == CheckStatus.ERR.value or (_condition(obj) or {}).get("status") == "False":
        return NodeHealth.UNHEALTHY
    if label == CheckStatus.WARN.value:
        return NodeHealth.DEGRADED
    return NodeHealth.HEALTHY


def doctor_health(obj: Object) -> tuple[NodeHealth, list[str], list[NodeCheck]]:
    """What the node's doctor last said: health, reasons and checks (healthy when silent)."""
    meta = obj.get("metadata") or {}
    label = (meta.get("labels") or {}).get(HEALTH_LABEL)
    condition = _condition(obj)
    checks: list[NodeCheck] = []
    raw = (meta.get("annotations") or {}).get(CHECKS_ANNOTATION)
    if raw:
        try:
            checks = _CHECKS.validate_python(json.loads(raw))
        except (ValueError, ValidationError) as exc:
            log.warning("node %s: unreadable %s: %s", meta.get("name"), CHECKS_ANNOTATION, exc)
    health = doctor_verdict(obj)
    reasons = [f"{c.name}: {c.message}" for c in checks
               if c.status in (CheckStatus.ERR, CheckStatus.WARN)]
    if health is not NodeHealth.HEALTHY and not reasons:
        reasons = [f"{CONDITION}: {(condition or {}).get('message') or label}"]
    return health, reasons, checks
