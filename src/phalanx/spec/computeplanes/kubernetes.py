"""The ``kubernetes`` compute plane: pods of a Kubernetes cluster (``compute/kubernetes/``,
which alone loads the Kubernetes client, an optional extra)."""

from __future__ import annotations

from phalanx.spec.computeplanes.base import OptionKind, PlaneInfo, PlaneOption, register_plane

KUBECONFIG = PlaneOption(
    "kubeconfig", "--kubeconfig",
    "Kubeconfig (default: in-cluster, then ~/.kube/config)", kind=OptionKind.FILE)
NAMESPACE = PlaneOption("namespace", "--namespace", "Namespace the job pods run in")
DEFAULT_IMAGE = PlaneOption(
    "default_image", "--default-image",
    "Image of pod sets that name none (without it such jobs are refused)",
    refusal="the {plane} compute plane runs commands, not images")
NODE_LOST_GRACE = PlaneOption(
    "node_lost_grace", "--node-lost-grace",
    "How long a Kubernetes node may stop reporting before its gangs are requeued elsewhere "
    "(default 60s)", kind=OptionKind.DURATION, verbs=("up",))
# The env var is the plane's own (compute/kubernetes/settings.py), named here as text:
# importing that package would load the Kubernetes client.
FENCE_IMAGE = PlaneOption(
    "fence_image", "--fence-image",
    "Image holding Phalanx, from which each pod's fence is copied (the worker's own image)",
    verbs=("worker",), refusal="the {plane} compute plane has no fence to copy into pods",
    envvar="PHALANX_K8S_FENCE_IMAGE")

ALLOW_SERVICE_ACCOUNT = PlaneOption(
    "allowed_service_accounts", "--allow-service-account",
    "A ServiceAccount a job's pod set may name as serviceAccountName (repeat for several; "
    "none by default)", kind=OptionKind.LIST,
    refusal="the {plane} compute plane runs no pods as ServiceAccounts")

# Kubernetes-native admission (compute/kubernetes/native.py, docs/kubernetes.md): the
# control plane's own plane watches these namespaces' workloads; a worker's plane does not.
MANAGE_NAMESPACES = PlaneOption(
    "manage_namespaces", "--manage-namespaces",
    "Label selector of the namespaces whose workloads created with kubectl (Jobs, JobSets, "
    "PyTorchJobs, ...) Phalanx queues and admits, e.g. phalanx.dev/managed=true "
    "(docs/kubernetes.md)", verbs=("up",),
    refusal="the {plane} compute plane has no namespaces to manage")

KUBERNETES = register_plane(PlaneInfo(
    "kubernetes", what="runs pods on a Kubernetes cluster",
    build="phalanx.compute.kubernetes.build:build",
    options=(KUBECONFIG, NAMESPACE, DEFAULT_IMAGE, NODE_LOST_GRACE, FENCE_IMAGE,
             ALLOW_SERVICE_ACCOUNT, MANAGE_NAMESPACES),
    worker_fence="plane", labelled=True, pods_elsewhere=True,
))
