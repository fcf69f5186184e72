"""Reading a job's pod logs incrementally, for one pod or all of them."""

from __future__ import annotations

from collections.abc import Iterator

from phalanx.errors import NotFound
from phalanx.spec.status import JobRecord
from phalanx.store import LogStore


def pod_names(record: JobRecord) -> list[str]:
    """Pod names in rank order (pod sets in spec order), as the compute planes name them."""
    counts: dict[str, int] = {}
    if record.admission is not None:
        counts = {p.name: p.count for p in record.admission.pod_sets}
    return [
        f"{record.name}-{ps.name}-{i}"
        for ps in record.spec.pod_sets
        for i in range(counts.get(ps.name, ps.replicas))
    ]


def select_pod(record: JobRecord, pod: str) -> str:
    names = pod_names(record)
    if pod.isdigit():
        rank = int(pod)
        if rank >= len(names):
            raise NotFound(
                f"job {record.name} has no pod of rank {rank}", field="pod",
                fix=f"use a rank from 0 to {len(names) - 1} or a pod name",
            )
        return names[rank]
    if pod in names:
        return pod
    if f"{record.name}-{pod}" in names:
        return f"{record.name}-{pod}"
    raise NotFound(
        f"job {record.name} has no pod {pod!r}", field="pod",
        fix=f"use a rank (0-{len(names) - 1}) or one of {', '.join(names[:4])}",
    )


class LogFollower:
    """Yields new complete lines of the chosen pods' logs each time ``drain`` is called."""

    def __init__(self, logs: LogStore, record: JobRecord, pod: str | None) -> None:
        self.logs = logs
        self.job = record.name
        self.fixed = [select_pod(record, pod)] if pod is not None else None
        self.prefix = pod is None and record.spec.pod_count > 1
        self.offsets: dict[str, int] = {}
        self.partial: dict[str, bytes] = {}

    def drain(self, final: bool = False) -> Iterator[bytes]:
        pods = self.fixed if self.fixed is not None else self.logs.pods(self.job)
        for pod in pods:
            data, self.offsets[pod] = self.logs.read(self.job, pod, self.offsets.get(pod, 0))
            buffered = self.partial.pop(pod, b"") + data
            if not buffered:
                continue
            lines = buffered.split(b"\n")
            rest = lines.pop()
            if rest and not final:
                self.partial[pod] = rest
            elif rest:
                lines.append(rest)
            prefix = f"[{pod}] ".encode() if self.prefix else b""
            out = b"".join(prefix + line + b"\n" for line in lines)
            if out:
                yield out
