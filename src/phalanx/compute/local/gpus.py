"""This machine's NVIDIA GPUs through NVML, and handing their indices out to pods.

Discovery never fails: no driver, no library or any NVML error means no GPUs.
Indices are NVML's, which follow PCI bus order; pods get them together with
``CUDA_DEVICE_ORDER=PCI_BUS_ID`` so CUDA numbers the devices the same way.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from phalanx.errors import PhalanxError

log = logging.getLogger("phalanx.compute.local")


@dataclass(frozen=True, slots=True)
class GPUInfo:
    index: int
    uuid: str
    name: str  # product name, e.g. "NVIDIA A100-SXM4-80GB"
    memory_bytes: int


def discover_gpus() -> list[GPUInfo]:
    """Every GPU NVML reports, by index; ``[]`` when there is no GPU, driver or library."""
    try:
        import pynvml
    except ImportError:
        return []
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:  # no driver, or a driver that does not answer
        log.debug("NVML unavailable, reporting no GPUs: %s", exc)
        return []
    except OSError as exc:
        log.debug("NVML library could not be loaded, reporting no GPUs: %s", exc)
        return []
    try:
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            gpus.append(GPUInfo(
                index=index,
                uuid=_text(pynvml.nvmlDeviceGetUUID(handle)),
                name=_text(pynvml.nvmlDeviceGetName(handle)),
                memory_bytes=int(pynvml.nvmlDeviceGetMemoryInfo(handle).total),
            ))
        return gpus
    except pynvml.NVMLError as exc:
        log.warning("NVML failed while listing GPUs, reporting none: %s", exc)
        return []
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()


def _text(value: str | bytes) -> str:
    # Older NVML bindings return bytes.
    return value.decode() if isinstance(value, bytes) else value


class GPUsUnavailable(PhalanxError):
    """Pods asked for more GPUs than are free on this machine right now."""

    status_code = 409


def assign_gpus(
    wanted: Sequence[int], gpus: Sequence[int], held: Collection[int]
) -> list[tuple[int, ...]]:
    """Pick GPU indices for pods wanting ``wanted[i]`` whole GPUs, avoiding ``held`` ones.

    All or nothing: raises GPUsUnavailable, having assigned nothing, when they do not fit.
    Lowest indices first, so a pod's GPUs are neighbours when the machine is idle.
    """
    free = [g for g in sorted(gpus) if g not in held]
    need = sum(wanted)
    if need > len(free):
        busy = sorted(set(held) & set(gpus))
        raise GPUsUnavailable(
            f"the pods need {need} GPU(s) but {len(free)} of {len(gpus)} are free "
            f"(held by running pods: {busy})",
            field="nvidia.com/gpu",
            fix="wait for the pods holding GPUs to stop, then launch again",
        )
    assigned = []
    for count in wanted:
        assigned.append(tuple(free[:count]))
        free = free[count:]
    return assigned
