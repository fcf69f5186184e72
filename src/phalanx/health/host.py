"""Host checks: free disk under the paths jobs and Phalanx write to, and memory pressure."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

from phalanx.health.checks import ERR, NOT_APPLICABLE, PASS, WARN, result
from phalanx.spec.resources import NodeCheck

GIB = 2**30


@dataclass(frozen=True, slots=True)
class DiskCheck:
    """Free space on the filesystems under ``paths`` (the state directory, scratch space).

    WARN below ``warn_fraction`` free, ERR below ``err_fraction`` or ``err_bytes``: a full
    disk fails checkpoints and logs of whatever runs next.
    """

    paths: Sequence[Path]
    warn_fraction: float = 0.10
    err_fraction: float = 0.03
    err_bytes: int = 1 * GIB
    name: str = "disk"

    def run(self) -> NodeCheck:
        seen: dict[int, Path] = {}
        missing = []
        for path in self.paths:
            try:
                seen.setdefault(os.stat(path).st_dev, Path(path))
            except OSError:
                missing.append(str(path))
        if not seen:
            return result(self.name, NOT_APPLICABLE,
                          f"none of the paths exist: {', '.join(missing) or '(none given)'}")
        worst_path, worst_free, worst_fraction = None, 0, 2.0
        for path in seen.values():
            usage = psutil.disk_usage(str(path))
            fraction = usage.free / usage.total if usage.total else 1.0
            if fraction < worst_fraction:
                worst_path, worst_free, worst_fraction = path, usage.free, fraction
        where = f"{worst_path}: {worst_free / GIB:.1f} GiB free ({worst_fraction:.0%})"
        values = {"free_bytes": worst_free, "free_fraction": worst_fraction}
        if worst_fraction < self.err_fraction or worst_free < self.err_bytes:
            return result(self.name, ERR, f"disk almost full under {where}", **values)
        if worst_fraction < self.warn_fraction:
            return result(self.name, WARN, f"disk low under {where}", **values)
        return result(self.name, PASS, f"enough disk under {where}", **values)


@dataclass(frozen=True, slots=True)
class MemoryCheck:
    """Memory available to new processes: WARN and ERR below the given fractions."""

    warn_fraction: float = 0.10
    err_fraction: float = 0.03
    name: str = "memory"

    def run(self) -> NodeCheck:
        memory = psutil.virtual_memory()
        fraction = memory.available / memory.total if memory.total else 1.0
        values = {"available_bytes": memory.available, "available_fraction": fraction}
        text = f"{memory.available / GIB:.1f} of {memory.total / GIB:.1f} GiB available " \
               f"({fraction:.0%})"
        if fraction < self.err_fraction:
            return result(self.name, ERR, f"memory exhausted: {text}", **values)
        if fraction < self.warn_fraction:
            return result(self.name, WARN, f"memory pressure: {text}", **values)
        return result(self.name, PASS, text, **values)
