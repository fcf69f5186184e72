"""The Kubernetes compute plane: admitted gangs run as pods on a cluster's nodes."""

from phalanx.compute.kubernetes.client import KubeClient, KubeError, configure
from phalanx.compute.kubernetes.plane import KubernetesPlane, Settings

__all__ = ["KubeClient", "KubeError", "KubernetesPlane", "Settings", "configure"]
