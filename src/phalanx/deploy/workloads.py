"""The control plane Deployment, its Service, Secrets and volume, and the NodeDoctor DaemonSet.

With ``mode: cluster`` the Deployment is the worker of a compute plane instead:
``phalanx worker`` dialling out to the remote control plane, with the plane's key
mounted as a file (a Secret volume, so a rotated key reaches the running worker
without a restart) and nothing listening.
"""

from __future__ import annotations

import json
from typing import Any

from phalanx.defaults import LEADER_LEASE_NAME
from phalanx.deploy import webhook
from phalanx.deploy.rbac import (
    Manifest,
    doctor_account,
    labels,
    metadata,
    runs_account,
    worker_account,
    worker_component,
)
from phalanx.deploy.values import (
    API_PORT,
    KEY_DIR,
    KEY_FILE,
    STATE_DIR,
    NodeDoctor,
    Resources,
    Values,
    Worker,
)

SERVICE_NAME = "phalanx"
STATE_CLAIM = "phalanx-state"
# A fixed non-root identity; fsGroup makes the state volume writable by it.
RUN_AS = 10001
# Node labels that mark a node with an NVIDIA GPU: Node Feature Discovery's PCI vendor
# label, and the GPU operator's. A worker kept off both stays on CPU nodes.
GPU_NODE_LABELS = ("feature.node.kubernetes.io/pci-10de.present", "nvidia.com/gpu.present")


def _selector(component: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": "phalanx", "app.kubernetes.io/component": component}


def namespaces(values: Values) -> list[Manifest]:
    if not values.create_namespaces:
        return []
    names = dict.fromkeys([values.namespace, values.runs.namespace])  # ordered, deduplicated
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {
            "name": name, "labels": {"app.kubernetes.io/part-of": "phalanx"}}}
        for name in names
    ]


def secrets(values: Values) -> list[Manifest]:
    """Secrets created from values; without a value the named Secret must already exist."""
    out: list[Manifest] = []
    if values.api_key.value is not None:
        out.append(_secret(values, values.api_key.secret_name, values.api_key.key,
                           values.api_key.value))
    pg = values.store.postgresql
    if values.store.kind == "postgresql" and pg.url is not None:
        out.append(_secret(values, pg.secret_name, pg.key, pg.url))
    return out


def _secret(values: Values, name: str, key: str, value: str) -> Manifest:
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": metadata(name, worker_component(values), values.namespace),
            "type": "Opaque", "stringData": {key: value}}


def state_claim(values: Values) -> list[Manifest]:
    p = values.persistence
    if not p.enabled or p.existing_claim:
        return []
    spec: dict[str, Any] = {
        # Replicas share the state directory's keys, from whichever nodes they run on.
        "accessModes": ["ReadWriteMany" if replicated(values) else "ReadWriteOnce"],
        "resources": {"requests": {"storage": p.size}},
    }
    if p.storage_class_name:
        spec["storageClassName"] = p.storage_class_name
    return [{"apiVersion": "v1", "kind": "PersistentVolumeClaim",
             "metadata": metadata(STATE_CLAIM, "control-plane", values.namespace), "spec": spec}]


def api_service(values: Values) -> Manifest:
    svc = values.worker.service
    meta = metadata(SERVICE_NAME, "control-plane", values.namespace)
    if svc.annotations:
        meta["annotations"] = dict(svc.annotations)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {
            "type": svc.type,
            "selector": _selector("control-plane"),
            "ports": [{"name": "http", "port": svc.port, "targetPort": "http",
                       "protocol": "TCP"},
                      *([{"name": "webhook", "port": webhook.SERVICE_PORT,
                          "targetPort": "webhook", "protocol": "TCP"}]
                        if webhook.enabled(values) else [])],
        },
    }


def api_url(values: Values) -> str:
    return f"http://{SERVICE_NAME}.{values.namespace}.svc:{values.worker.service.port}"


def _resources(resources: Resources) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if resources.requests:
        out["requests"] = dict(resources.requests)
    if resources.limits:
        out["limits"] = dict(resources.limits)
    return out


def _secret_env(name: str, secret: str, key: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}


def _container_security() -> dict[str, Any]:
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }


def _pod_security() -> dict[str, Any]:
    return {
        "runAsNonRoot": True,
        "runAsUser": RUN_AS,
        "runAsGroup": RUN_AS,
        "fsGroup": RUN_AS,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _placement(spec: dict[str, Any], component: Worker | NodeDoctor, values: Values) -> None:
    if component.node_selector:
        spec["nodeSelector"] = dict(component.node_selector)
    if isinstance(component, Worker) and component.cpu_nodes_only:
        spec["affinity"] = cpu_nodes_affinity()
    if component.tolerations:
        spec["tolerations"] = [t.to_dict() for t in component.tolerations]
    if component.priority_class_name:
        spec["priorityClassName"] = component.priority_class_name
    if values.image_pull_secrets:
        spec["imagePullSecrets"] = [{"name": name} for name in values.image_pull_secrets]


def cpu_nodes_affinity() -> dict[str, Any]:
    """A required node affinity: none of the GPU labels (a nodeSelector cannot say "not")."""
    terms = [{"key": label, "operator": "DoesNotExist"} for label in GPU_NODE_LABELS]
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": terms}]}}}


def control_plane_args(values: Values) -> list[str]:
    """``phalanx up`` in the foreground, listening on every address of the pod."""
    args = ["up", "--host", "0.0.0.0", "--port", str(API_PORT), "--compute", "kubernetes",
            "--namespace", values.runs.namespace,
            # Where job pods call the API with their attempt's credential.
            "--pod-api-url", values.runs.api_url or api_url(values)]
    if values.runs.default_image:
        args += ["--default-image", values.runs.default_image]
    if not values.worker.enable_run_interactivity:
        args += ["--no-interactive"]  # phalanx exec refused with 403, as the RBAC would
    if values.store.kind == "postgresql":
        # The kubelet expands $(VAR) from the container's env, so the URL stays in the Secret.
        args += ["--db", "$(PHALANX_DB_URL)"]
    if replicated(values):
        # Followers send clients to the leader's own pod address (Services route to it too,
        # as only the leader is ready).
        args += ["--ha", "--advertise-url", f"http://$(POD_IP):{API_PORT}"]
        if values.worker.leader_lease == "kubernetes":
            args += ["--leader-lease", f"kubernetes:{values.namespace}/{LEADER_LEASE_NAME}"]
    if webhook.enabled(values):  # the admission webhook, over TLS (deploy/webhook.py)
        args += ["--webhook-cert-dir", webhook.CERT_DIR,
                 "--webhook-port", str(webhook.WEBHOOK_PORT)]
    return args


def replicated(values: Values) -> bool:
    """Several control-plane replicas, one leading (values.check saw PostgreSQL)."""
    return values.mode == "full" and values.worker.replicas > 1


def _state_volume(values: Values) -> dict[str, Any]:
    p = values.persistence
    if not p.enabled:
        return {"name": "state", "emptyDir": {}}
    return {"name": "state",
            "persistentVolumeClaim": {"claimName": p.existing_claim or STATE_CLAIM}}


def plane_env(values: Values) -> list[dict[str, Any]]:
    """What the Kubernetes compute plane reads from its environment, in either mode."""
    worker = values.worker
    env: list[dict[str, Any]] = [
        {"name": "PHALANX_HOME", "value": STATE_DIR},
        # The compute plane runs job pods as this ServiceAccount.
        {"name": "PHALANX_RUNS_SERVICE_ACCOUNT", "value": runs_account(values)},
        # What the role grants on nodes: the plane writes its health taint only if allowed.
        {"name": "PHALANX_K8S_NODE_WRITES",
         "value": "true" if worker.rbac.allow_node_writes else "false"},
        {"name": "PHALANX_K8S_RAY_USE_KUBERAY", "value": values.ray.use_kube_ray},
    ]
    if values.manage_namespaces is not None:  # Kubernetes-native admission
        env.append({"name": "PHALANX_K8S_MANAGE_NAMESPACES", "value": values.manage_namespaces})
    if values.runs.allowed_service_accounts:
        env.append({"name": "PHALANX_K8S_ALLOWED_SERVICE_ACCOUNTS",
                    "value": ",".join(values.runs.allowed_service_accounts)})
    checkpoint_volume = values.runs.checkpoints.volume()
    if checkpoint_volume is not None:
        env += [{"name": "PHALANX_K8S_CHECKPOINT_VOLUME",
                 "value": json.dumps(checkpoint_volume, sort_keys=True)},
                {"name": "PHALANX_K8S_CHECKPOINT_CLEANUP_IMAGE",
                 "value": values.runs.checkpoints.cleanup_image}]
    return env


def _control_plane_container(values: Values) -> dict[str, Any]:
    env = plane_env(values)
    env.insert(1, _secret_env("PHALANX_TOKEN", values.api_key.secret_name, values.api_key.key))
    if values.store.kind == "postgresql":
        pg = values.store.postgresql
        env.append(_secret_env("PHALANX_DB_URL", pg.secret_name, pg.key))
    probe = {"httpGet": {"path": "/healthz", "port": "http"}}
    # Replicas: ready only on the leader, so the Service sends every request to it.
    ready = {"httpGet": {"path": "/readyz", "port": "http"}} if replicated(values) else probe
    if replicated(values):
        env.append({"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}})
    ports = [{"name": "http", "containerPort": API_PORT, "protocol": "TCP"}]
    mounts: list[dict[str, Any]] = [{"name": "state", "mountPath": STATE_DIR},
                                    {"name": "tmp", "mountPath": "/tmp"}]
    if webhook.enabled(values):
        ports.append({"name": "webhook", "containerPort": webhook.WEBHOOK_PORT,
                      "protocol": "TCP"})
        mounts.append({"name": "webhook-tls", "mountPath": webhook.CERT_DIR,
                       "readOnly": True})
    return {
        "name": "phalanx",
        "image": values.image.reference,
        "imagePullPolicy": values.image.pull_policy,
        "command": ["phalanx"],
        "args": control_plane_args(values),
        "env": env,
        "ports": ports,
        # Migrations run before the server listens: give startup its own, longer budget.
        "startupProbe": {**probe, "periodSeconds": 2, "failureThreshold": 90},
        "readinessProbe": {**ready, "periodSeconds": 2 if replicated(values) else 5},
        "livenessProbe": {**probe, "periodSeconds": 10, "failureThreshold": 6},
        "resources": _resources(values.worker.resources),
        "securityContext": _container_security(),
        "volumeMounts": mounts,
    }


def worker_args(values: Values) -> list[str]:
    """``phalanx worker`` for this cluster's compute plane, dialling out to the control plane."""
    assert values.control_plane.url is not None and values.plane.name is not None  # checked
    args = ["worker", "--control-plane", values.control_plane.url,
            "--plane", values.plane.name, "--api-key-file", KEY_FILE,
            "--compute", "kubernetes", "--namespace", values.runs.namespace]
    if values.runs.default_image:
        args += ["--default-image", values.runs.default_image]
    if values.worker.fence_after is not None:
        args += ["--fence-after", values.worker.fence_after]
    return args


def _worker_container(values: Values) -> dict[str, Any]:
    # Every rank runs under the fence, which an init container copies from this image.
    env = [*plane_env(values), {"name": "PHALANX_K8S_FENCE_IMAGE",
                                "value": values.image.reference}]
    return {
        "name": "worker",
        "image": values.image.reference,
        "imagePullPolicy": values.image.pull_policy,
        "command": ["phalanx"],
        "args": worker_args(values),
        "env": env,
        # No ports and no HTTP probes: nothing connects into the worker.
        "resources": _resources(values.worker.resources),
        "securityContext": _container_security(),
        "volumeMounts": [{"name": "state", "mountPath": STATE_DIR},
                         {"name": "tmp", "mountPath": "/tmp"},
                         {"name": "plane-key", "mountPath": KEY_DIR, "readOnly": True}],
    }


def _key_volume(values: Values) -> dict[str, Any]:
    # A whole-Secret volume (not subPath): the kubelet swaps in a rotated key, and the
    # worker re-reads the file, so a rotation needs no restart.
    return {"name": "plane-key", "secret": {
        "secretName": values.api_key.secret_name,
        "items": [{"key": values.api_key.key, "path": KEY_FILE.rsplit("/", 1)[1]}],
        "defaultMode": 0o400}}


def deployment(values: Values, tls: webhook.ServingCertificate | None = None) -> Manifest:
    """The control plane's (or the worker's) Deployment; ``tls``: the webhook's certificate
    the render made, whose digest on the pod template rolls the pods when it changes."""
    worker = values.worker
    cluster = values.mode == "cluster"
    component = worker_component(values)
    volumes = ([{"name": "state", "emptyDir": {}}, {"name": "tmp", "emptyDir": {}},
                _key_volume(values)] if cluster
               else [_state_volume(values), {"name": "tmp", "emptyDir": {}}])
    if webhook.enabled(values):
        volumes.append({"name": "webhook-tls", "secret": {
            "secretName": webhook.TLS_SECRET, "defaultMode": 0o400,
            "items": [{"key": "tls.crt", "path": "tls.crt"},
                      {"key": "tls.key", "path": "tls.key"}]}})
    pod: dict[str, Any] = {
        "serviceAccountName": worker_account(values),
        "automountServiceAccountToken": True,  # in-cluster config reads the mounted token
        "securityContext": _pod_security(),
        # Time for the controller (or worker) to flush its last cycle on SIGTERM.
        "terminationGracePeriodSeconds": 30,
        "containers": [_worker_container(values) if cluster
                       else _control_plane_container(values)],
        "volumes": volumes,
    }
    _placement(pod, worker, values)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata("phalanx-worker" if cluster else "phalanx", component,
                             values.namespace),
        "spec": {
            "replicas": worker.replicas,
            "strategy": _strategy(values),
            "selector": {"matchLabels": _selector(component)},
            "template": {"metadata": _template_meta(component, tls), "spec": pod},
        },
    }


def _template_meta(component: str, tls: webhook.ServingCertificate | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"labels": labels(component)}
    if tls is not None:
        meta["annotations"] = {webhook.CERT_ANNOTATION: tls.digest}
    return meta


def _strategy(values: Values) -> dict[str, Any]:
    if not replicated(values):
        # One writer: the old pod lets go of the state volume (or, for a worker, of its
        # plane) before the new one starts.
        return {"type": "Recreate"}
    # Only the leader is ever ready, so a rollout cannot wait for new replicas to be: one
    # new replica starts while every old one stops (the leader hands over on SIGTERM), and
    # the rest follow. Waiting for readiness would never replace the leader.
    return {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": "100%"}}


def disruption_budget(values: Values) -> list[Manifest]:
    """Replicas: voluntary evictions (drains) keep one ready replica, the leader; followers
    (never ready) may be evicted at any time."""
    if not replicated(values) or not values.worker.enabled:
        return []
    return [{"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
             "metadata": metadata("phalanx", "control-plane", values.namespace),
             "spec": {"minAvailable": 1, "selector": {"matchLabels": _selector("control-plane")}}}]


def _doctor_api_env(values: Values) -> list[dict[str, Any]]:
    """The in-cluster API Service for the doctor; a cluster-only install has none, and the
    doctor's reports reach the remote control plane through the Node and the worker."""
    if values.mode == "cluster":
        return []
    return [{"name": "PHALANX_URL", "value": api_url(values)},
            _secret_env("PHALANX_TOKEN", values.api_key.secret_name, values.api_key.key)]


def node_doctor(values: Values) -> list[Manifest]:
    doctor = values.node_doctor
    if not doctor.enabled:
        return []
    container: dict[str, Any] = {
        "name": "node-doctor",
        "image": values.image.reference,
        "imagePullPolicy": values.image.pull_policy,
        "command": ["phalanx"],
        "args": ["doctor", "--report", "kubernetes"],
        "env": [
            *_doctor_api_env(values),
            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            # The NVIDIA container runtime then exposes NVML for probing without the pod
            # requesting (and so taking away) any nvidia.com/gpu.
            {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
            {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "utility"},
        ],
        "resources": _resources(doctor.resources),
        "securityContext": _container_security(),
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
    }
    pod: dict[str, Any] = {
        "serviceAccountName": doctor_account(values),
        "automountServiceAccountToken": True,
        "securityContext": _pod_security(),
        "containers": [container],
        "volumes": [{"name": "tmp", "emptyDir": {}}],
    }
    _placement(pod, doctor, values)
    return [{
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": metadata("phalanx-node-doctor", "node-doctor", values.namespace),
        "spec": {
            "selector": {"matchLabels": _selector("node-doctor")},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {"metadata": {"labels": labels("node-doctor")}, "spec": pod},
        },
    }]
