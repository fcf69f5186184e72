"""This machine as one Node: usable CPUs, memory and GPUs, with descriptive labels."""

from __future__ import annotations

import os
import platform
import re
import socket
from collections.abc import Sequence

import psutil

from phalanx.compute.local.gpus import GPUInfo
from phalanx.spec.resources import GPU, Node, NodeHealth

_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}
# Pods one node runs at most, as a Kubernetes kubelet's default --max-pods: the scheduler
# counts ``pods`` like any resource, so no job can ask this machine for more.
DEFAULT_MAX_PODS = 110


def default_node_name() -> str:
    return socket.gethostname() or "localhost"


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask), not every CPU of the machine."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not available on macOS
        return os.cpu_count() or 1


def machine_node(name: str, gpus: Sequence[GPUInfo], max_pods: int = DEFAULT_MAX_PODS) -> Node:
    """The Node the local plane offers: everything usable on this machine, healthy, and at
    most ``max_pods`` pods at once."""
    labels = {
        "kubernetes.io/hostname": label_value(name),
        "kubernetes.io/os": platform.system().lower(),
        "kubernetes.io/arch": _ARCH.get(platform.machine(), platform.machine().lower()),
        "phalanx.io/compute": "local",
    }
    if gpus:
        labels["phalanx.io/gpu-product"] = label_value(gpus[0].name)
        labels["phalanx.io/gpu-count"] = str(len(gpus))
        labels["phalanx.io/gpu-memory"] = str(min(g.memory_bytes for g in gpus) // 2**20)  # MiB
    return Node(
        name=name,
        labels=labels,
        allocatable={  # whole units (bytes for memory); the Node keeps milli-units
            "cpu": usable_cpus(),
            "memory": psutil.virtual_memory().total,
            GPU: len(gpus),
            "pods": max_pods,
        },
        health=NodeHealth.HEALTHY,
    )


def label_value(text: str) -> str:
    """``text`` as a Kubernetes label value: at most 63 of [A-Za-z0-9._-], alphanumeric ends."""
    value = re.sub(r"[^A-Za-z0-9._-]+", "-", text)[:63]
    return value.strip("-._")
