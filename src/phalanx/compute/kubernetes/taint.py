"""The ``phalanx.dev/unhealthy=ERR:NoSchedule`` taint on nodes whose doctor reports ERR.

Level-triggered: each time the plane observes, every node whose doctor says ERR and
lacks the taint gets it, and every node that carries it while its doctor no longer
says ERR loses it, so a control plane that restarts (or missed a change) converges.
Only this taint is touched: the node's other taints are sent back as they are, with the
node's resourceVersion, so a concurrent change of them makes the API refuse the patch
(409) and the next observation tries again on the fresh node. Nothing is written
unless the plane was allowed to write nodes (``worker.rbac.allowNodeWrites``).
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import quote

from phalanx.compute.kubernetes.client import KubeClient, KubeError
from phalanx.compute.kubernetes.health import doctor_verdict
from phalanx.spec.resources import NodeHealth

log = logging.getLogger("phalanx.compute.kubernetes")

Object = dict[str, Any]
TAINT_KEY = "phalanx.dev/unhealthy"
TAINT = {"key": TAINT_KEY, "value": "ERR", "effect": "NoSchedule"}


def is_health_taint(taint: Object) -> bool:
    return taint.get("key") == TAINT_KEY


def wanted_taints(obj: Object) -> list[Object] | None:
    """The node's taints as they should be, or None when they already are."""
    taints = list((obj.get("spec") or {}).get("taints") or [])
    others = [t for t in taints if not is_health_taint(t)]
    sick = doctor_verdict(obj) is NodeHealth.UNHEALTHY
    wanted = [*others, dict(TAINT)] if sick else others
    has = [t for t in taints if is_health_taint(t)]
    if (sick and has == [TAINT]) or (not sick and not has):
        return None
    return wanted


class HealthTainter:
    """Keeps the health taint in line with each node's doctor report."""

    def __init__(self, client: KubeClient, *, allowed: bool) -> None:
        self.client = client
        self.allowed = allowed
        self._told = False  # the reason nothing is written was logged
        # node -> the resourceVersion last patched from: until the watch brings the
        # patched node, the same patch is not sent again.
        self._sent: dict[str, str] = {}

    def reconcile(self, nodes: list[Object]) -> None:
        for obj in nodes:
            wanted = wanted_taints(obj)
            if wanted is None:
                continue
            meta = obj.get("metadata") or {}
            name = str(meta.get("name"))
            version = str(meta.get("resourceVersion"))
            if self._sent.get(name) == version:
                continue
            if not self.allowed:
                self._refuse(f"node {name} needs its {TAINT_KEY} taint changed, but the "
                             "control plane may not write nodes (set "
                             "worker.rbac.allowNodeWrites)")
                return
            body: Object = {"metadata": {"resourceVersion": meta.get("resourceVersion")},
                            "spec": {"taints": wanted or None}}
            try:
                self.client.patch(f"/api/v1/nodes/{quote(name, safe='')}", body)
                self._sent[name] = version
            except KubeError as exc:
                if exc.status == 403:
                    self.allowed = False
                    self._refuse(f"the API refused to patch node {name} ({exc}); "
                                 f"{TAINT_KEY} taints are not written")
                    return
                # 404 (gone) or 409 (changed meanwhile): the next observation sees it anew.
                log.info("node %s: health taint not patched: %s", name, exc)

    def _refuse(self, why: str) -> None:
        if not self._told:
            self._told = True
            log.warning("%s", why)
