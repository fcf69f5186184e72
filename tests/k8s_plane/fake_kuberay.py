"""A small KubeRay operator for the fake API server: a thread that makes each RayCluster's
pods from its groups and keeps its status, as KubeRay's RayCluster controller does.

What it does, as KubeRay does it: one pod per replica of the head group and of each
worker group, named ``<cluster>-head-<suffix>`` and ``<cluster>-<group>-worker-<suffix>``,
labelled ``ray.io/cluster``, ``ray.io/group`` and ``ray.io/node-type``, owned by the
RayCluster (deleting it deletes them); the container's command replaced by a generated
``ray start`` unless the RayCluster says ``ray.io/overwrite-container-cmd: "true"``;
nothing for a suspended RayCluster (its pods deleted, state ``suspended``); a pod that
ends replaced by a new one; the head
Service ``<cluster>-head-svc``; and ``status`` (state ``ready`` once every pod runs,
the head's Service and the endpoints' ports).
"""

from __future__ import annotations

import copy
import itertools
import threading
from typing import Any

from tests.k8s_plane.fake_apiserver import FakeAPIServer

Object = dict[str, Any]
_suffix = itertools.count(10000)


class FakeKubeRay:
    def __init__(self, api: FakeAPIServer, namespace: str) -> None:
        self.api = api
        self.namespace = namespace
        self.made: list[str] = []  # every pod made, in order
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fake-kuberay", daemon=True)

    def start(self) -> FakeKubeRay:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            with self.api.lock:
                for cluster in self.api.list("rayclusters", self.namespace):
                    self._reconcile(cluster)

    def _reconcile(self, cluster: Object) -> None:
        meta, spec = cluster["metadata"], cluster["spec"]
        if meta.get("deletionTimestamp"):
            return
        name, uid = meta["name"], meta["uid"]
        owned = [p for p in self.api.list("pods", self.namespace)
                 if any(o.get("uid") == uid for o in p["metadata"].get("ownerReferences") or [])]
        if spec.get("suspend"):
            for pod in owned:
                self.api.remove("pods", pod["metadata"]["name"], self.namespace)
            if owned or (cluster.get("status") or {}).get("state") not in (None, "suspended"):
                self.api.update("rayclusters", name, {"status": {"state": "suspended"}},
                                self.namespace)
            return
        groups = [("headgroup", "head", spec["headGroupSpec"], 1)] + [
            (g["groupName"], "worker", g, g.get("replicas", 1))
            for g in spec.get("workerGroupSpecs") or []]
        overwrite = (meta.get("annotations") or {}).get("ray.io/overwrite-container-cmd") == "true"
        for group, node_type, group_spec, replicas in groups:
            live = [p for p in owned if p["metadata"]["labels"].get("ray.io/group") == group
                    and p.get("status", {}).get("phase") not in ("Succeeded", "Failed")
                    and not p["metadata"].get("deletionTimestamp")]
            for _ in range(replicas - len(live)):
                self._make_pod(cluster, group, node_type, group_spec["template"], overwrite)
        if self.api.get("services", f"{name}-head-svc", self.namespace) is None:
            self.api.add("services", {"metadata": {
                "name": f"{name}-head-svc", "ownerReferences": [_owner(cluster)]},
                "spec": {"selector": {"ray.io/cluster": name, "ray.io/node-type": "head"},
                         "ports": [{"name": "dashboard", "port": 8265}]}}, self.namespace)
        running = [p for p in owned if p.get("status", {}).get("phase") == "Running"]
        expected = sum(r for *_, r in groups)
        status = {"state": "ready" if len(running) >= expected else "",
                  "head": {"serviceName": f"{name}-head-svc"},
                  "endpoints": {"dashboard": "8265", "client": "10001", "gcs-server": "6379"},
                  "desiredWorkerReplicas": expected - 1}
        if cluster.get("status") != {**cluster.get("status", {}), **status}:
            self.api.update("rayclusters", name, {"status": status}, self.namespace)

    def _make_pod(self, cluster: Object, group: str, node_type: str, template: Object,
                  overwrite: bool) -> None:
        name = cluster["metadata"]["name"]
        pod_name = (f"{name}-head-{next(_suffix)}" if node_type == "head"
                    else f"{name}-{group}-worker-{next(_suffix)}")
        spec = copy.deepcopy(template["spec"])
        if not overwrite:  # KubeRay's own command, which would drop Phalanx's
            container = spec["containers"][0]
            container["command"] = ["/bin/bash", "-lc", "--"]
            container["args"] = [f"ulimit -n 65536; ray start --{node_type} --block"]
        labels = {**(template.get("metadata", {}).get("labels") or {}),
                  "ray.io/cluster": name, "ray.io/group": group, "ray.io/node-type": node_type}
        self.api.add("pods", {"metadata": {
            "name": pod_name, "labels": labels,
            "annotations": dict(template.get("metadata", {}).get("annotations") or {}),
            "ownerReferences": [_owner(cluster)]}, "spec": spec}, self.namespace)
        self.made.append(pod_name)


def _owner(cluster: Object) -> Object:
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": cluster["metadata"]["name"],
            "uid": cluster["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
