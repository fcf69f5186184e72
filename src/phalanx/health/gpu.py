"""GPU checks through NVML (the ``nvidia-ml-py`` binding of the driver's libnvidia-ml).

One NVML session serves every GPU check of a run (``NVMLSession``). It stays open
between runs, because XID errors arrive as events: only a session registered
before an XID happens hears of it. When NVML cannot start (no library, no
driver) every GPU check answers N/A and the next run tries again.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from phalanx.health.checks import ERR, NOT_APPLICABLE, PASS, WARN, result
from phalanx.spec.resources import NodeCheck

log = logging.getLogger("phalanx.health")

# XIDs after which the GPU needs a reset or a replacement (NVIDIA's XID catalogue):
# double-bit ECC, row-remap failure, NVLink, fallen off the bus, uncontained errors, GSP.
CRITICAL_XIDS = frozenset({48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140})
# Reasons the clocks are held down that mean the hardware is in trouble (the others, idle,
# application clocks, software power cap and sync boost, are normal operation).
THERMAL_OR_BRAKE = {
    0x08: "hardware slowdown",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "power brake",
}
UNCORRECTED, VOLATILE, AGGREGATE = 1, 0, 1
GPU_SENSOR, THRESHOLD_SHUTDOWN, THRESHOLD_SLOWDOWN = 0, 0, 1
XID_EVENT = 0x8


@dataclass(slots=True)
class GPU:
    index: int
    uuid: str
    name: str
    handle: Any


@dataclass(slots=True)
class NVMLSession:
    """NVML, opened on first use and kept open; its GPUs and their XID events.

    ``xids`` keeps every critical XID seen since the session opened, by GPU index: a GPU
    that needed a reset stays reported until the doctor restarts (after the reset).
    """

    nvml: Any = None
    gpus: list[GPU] = field(default_factory=list)
    problem: str | None = None  # why NVML is not available, when it is not
    xids: dict[int, list[int]] = field(default_factory=dict)
    _events: Any = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def refresh(self) -> None:
        """Open NVML if needed, list the GPUs and collect the XID events since last time."""
        with self._lock:
            if self.nvml is None:
                self._open()
            if self.nvml is None:
                return
            try:
                self._list()
                self._drain()
            except Exception as exc:  # NVML errors mid-run: report, reopen next time
                self.problem = f"NVML failed: {exc}"
                self._close()

    def close(self) -> None:
        with self._lock:
            self._close()

    def _open(self) -> None:
        try:
            import pynvml
        except ImportError:
            self.problem = "the NVML binding (nvidia-ml-py) is not installed"
            return
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:  # no driver, or no libnvidia-ml
            self.problem = f"NVML unavailable: {exc}"
            return
        except OSError as exc:
            self.problem = f"libnvidia-ml could not be loaded: {exc}"
            return
        self.nvml, self.problem = pynvml, None
        try:
            self._list()
            events = pynvml.nvmlEventSetCreate()
            for gpu in self.gpus:
                try:
                    pynvml.nvmlDeviceRegisterEvents(gpu.handle, XID_EVENT, events)
                except pynvml.NVMLError as exc:  # some GPUs (vGPU) offer no events
                    log.info("no XID events for GPU %d: %s", gpu.index, exc)
            self._events = events
        except pynvml.NVMLError as exc:
            log.info("no XID events: %s", exc)

    def _list(self) -> None:
        nvml = self.nvml
        gpus = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            gpus.append(GPU(index, _text(nvml.nvmlDeviceGetUUID(handle)),
                            _text(nvml.nvmlDeviceGetName(handle)), handle))
        self.gpus = gpus

    def _drain(self) -> None:
        if self._events is None:
            return
        nvml = self.nvml
        by_uuid = {gpu.uuid: gpu.index for gpu in self.gpus}
        while True:
            try:
                event = nvml.nvmlEventSetWait(self._events, 0)
            except nvml.NVMLError_Timeout:
                return
            xid = int(event.eventData)
            try:
                index = by_uuid.get(_text(nvml.nvmlDeviceGetUUID(event.device)), -1)
            except nvml.NVMLError:
                index = -1
            self.xids.setdefault(index, []).append(xid)

    def _close(self) -> None:
        if self.nvml is None:
            return
        with contextlib.suppress(Exception):
            if self._events is not None:
                self.nvml.nvmlEventSetFree(self._events)
        with contextlib.suppress(Exception):
            self.nvml.nvmlShutdown()
        self.nvml, self._events, self.gpus = None, None, []


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


@dataclass(slots=True)
class _GPUCheck:
    """A check that asks each GPU one thing: WARN/ERR name the GPUs at fault."""

    session: NVMLSession
    name: str
    probe: Callable[[Any, GPU], tuple[Any, str, dict[str, float]]]
    ok: str

    def run(self) -> NodeCheck:
        if self.session.nvml is None:
            return result(self.name, NOT_APPLICABLE, self.session.problem or "no NVML")
        if not self.session.gpus:
            return result(self.name, NOT_APPLICABLE, "no GPUs")
        findings: list[tuple[Any, str]] = []
        values: dict[str, float] = {}
        unsupported = []
        for gpu in self.session.gpus:
            try:
                status, message, numbers = self.probe(self.session.nvml, gpu)
            except self.session.nvml.NVMLError_NotSupported:
                unsupported.append(gpu.index)
                continue
            for key, number in numbers.items():
                values[f"gpu{gpu.index}_{key}"] = number
            if status is not PASS:
                findings.append((status, f"GPU {gpu.index}: {message}"))
        if len(unsupported) == len(self.session.gpus):
            return result(self.name, NOT_APPLICABLE, "not supported by these GPUs")
        if not findings:
            return result(self.name, PASS, self.ok, **values)
        status = ERR if any(s is ERR for s, _ in findings) else WARN
        return result(self.name, status, "; ".join(m for _, m in findings), **values)


def _ecc(nvml: Any, gpu: GPU) -> tuple[Any, str, dict[str, float]]:
    volatile = nvml.nvmlDeviceGetTotalEccErrors(gpu.handle, UNCORRECTED, VOLATILE)
    aggregate = nvml.nvmlDeviceGetTotalEccErrors(gpu.handle, UNCORRECTED, AGGREGATE)
    numbers = {"uncorrected_volatile": volatile, "uncorrected_aggregate": aggregate}
    if volatile:
        return ERR, f"{volatile} uncorrectable ECC error(s) since the last reset", numbers
    if aggregate:
        return WARN, f"{aggregate} uncorrectable ECC error(s) over its lifetime", numbers
    return PASS, "", numbers


def _remapped_rows(nvml: Any, gpu: GPU) -> tuple[Any, str, dict[str, float]]:
    corrected, uncorrected, pending, failed = nvml.nvmlDeviceGetRemappedRows(gpu.handle)
    numbers = {"corrected": corrected, "uncorrected": uncorrected, "pending": pending,
               "failed": failed}
    if failed:
        return ERR, "row remapping failed: the GPU needs replacing", numbers
    if pending:
        return ERR, "a row remap is pending: the GPU needs a reset", numbers
    return PASS, "", numbers


def _throttle(nvml: Any, gpu: GPU) -> tuple[Any, str, dict[str, float]]:
    try:
        reasons = nvml.nvmlDeviceGetCurrentClocksEventReasons(gpu.handle)
    except nvml.NVMLError_FunctionNotFound:  # drivers before 535 name it "throttle"
        reasons = nvml.nvmlDeviceGetCurrentClocksThrottleReasons(gpu.handle)
    found = [text for bit, text in THERMAL_OR_BRAKE.items() if reasons & bit]
    numbers = {"reasons": reasons}
    if found:
        return WARN, "clocks held down by " + ", ".join(found), numbers
    return PASS, "", numbers


def _pcie(nvml: Any, gpu: GPU) -> tuple[Any, str, dict[str, float]]:
    gen = nvml.nvmlDeviceGetCurrPcieLinkGeneration(gpu.handle)
    gen_max = nvml.nvmlDeviceGetMaxPcieLinkGeneration(gpu.handle)
    width = nvml.nvmlDeviceGetCurrPcieLinkWidth(gpu.handle)
    width_max = nvml.nvmlDeviceGetMaxPcieLinkWidth(gpu.handle)
    numbers = {"gen": gen, "gen_max": gen_max, "width": width, "width_max": width_max}
    if width < width_max:
        # A lane down is a seating or riser fault; host-device copies run at a fraction.
        return WARN, f"PCIe link x{width} of x{width_max}", numbers
    if gen < gen_max:
        return WARN, f"PCIe link gen {gen} of {gen_max}", numbers
    return PASS, "", numbers


@dataclass(frozen=True, slots=True)
class TemperatureLimits:
    """Margins below the GPU's own slowdown threshold: WARN within ``warn_margin`` degrees,
    ERR at or above the threshold (the GPU is already slowing itself down)."""

    warn_margin: int = 5


def _temperature(limits: TemperatureLimits) -> Callable[[Any, GPU], tuple[Any, str, dict]]:
    def probe(nvml: Any, gpu: GPU) -> tuple[Any, str, dict[str, float]]:
        temp = nvml.nvmlDeviceGetTemperature(gpu.handle, GPU_SENSOR)
        slowdown = nvml.nvmlDeviceGetTemperatureThreshold(gpu.handle, THRESHOLD_SLOWDOWN)
        numbers = {"celsius": temp, "slowdown_celsius": slowdown}
        if temp >= slowdown:
            return ERR, f"{temp}°C, at or above its slowdown threshold {slowdown}°C", numbers
        if temp >= slowdown - limits.warn_margin:
            return WARN, f"{temp}°C, within {limits.warn_margin}°C of slowdown " \
                         f"({slowdown}°C)", numbers
        return PASS, "", numbers
    return probe


@dataclass(slots=True)
class GPUCountCheck:
    """The GPUs NVML sees against the count the node advertises."""

    session: NVMLSession
    expected: Callable[[], int | None]
    name: str = "gpu-count"

    def run(self) -> NodeCheck:
        expected = self.expected()
        if self.session.nvml is None:
            if expected:  # the node offers GPUs the driver cannot show: that is a failure
                return result(self.name, ERR, f"the node advertises {expected} GPU(s) but "
                              f"{self.session.problem}", expected=expected, found=0)
            return result(self.name, NOT_APPLICABLE, self.session.problem or "no NVML")
        found = len(self.session.gpus)
        if expected is None:
            return result(self.name, PASS, f"{found} GPU(s)", found=found)
        if found < expected:
            return result(self.name, ERR, f"{found} of {expected} GPU(s) visible",
                          expected=expected, found=found)
        return result(self.name, PASS, f"{found} GPU(s), as advertised", expected=expected,
                      found=found)


@dataclass(slots=True)
class XIDCheck:
    session: NVMLSession
    name: str = "gpu-xid"

    def run(self) -> NodeCheck:
        if self.session.nvml is None:
            return result(self.name, NOT_APPLICABLE, self.session.problem or "no NVML")
        if not self.session.xids:
            return result(self.name, PASS, "no XID errors", xids=0)
        critical = sorted({(i, x) for i, xs in self.session.xids.items() for x in xs
                           if x in CRITICAL_XIDS})
        seen = sorted({(i, x) for i, xs in self.session.xids.items() for x in xs})
        text = ", ".join(f"XID {x} on GPU {i}" if i >= 0 else f"XID {x}" for i, x in seen)
        count = sum(len(xs) for xs in self.session.xids.values())
        if critical:
            return result(self.name, ERR, text, xids=count, critical=len(critical))
        return result(self.name, WARN, text, xids=count, critical=0)


def gpu_checks(
    session: NVMLSession, expected: Callable[[], int | None],
    limits: TemperatureLimits | None = None,
) -> list[Any]:
    """The built-in GPU checks over one session (``session.refresh()`` before each run)."""
    return [
        GPUCountCheck(session, expected),
        XIDCheck(session),
        _GPUCheck(session, "gpu-ecc", _ecc, "no uncorrectable ECC errors"),
        _GPUCheck(session, "gpu-remapped-rows", _remapped_rows, "no pending or failed row "
                  "remaps"),
        _GPUCheck(session, "gpu-throttle", _throttle, "no thermal or power-brake slowdown"),
        _GPUCheck(session, "gpu-pcie", _pcie, "PCIe links at full generation and width"),
        _GPUCheck(session, "gpu-temperature", _temperature(limits or TemperatureLimits()),
                  "temperatures below their slowdown thresholds"),
    ]
