"""What the benchmarks share: a real control plane in a subprocess, machine facts, output."""

from __future__ import annotations

import json
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from phalanx.sdk import Client

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"


def machine() -> dict[str, Any]:
    """Where a figure was measured, and with which build of the core: it means little
    without this."""
    from phalanx.scheduler import COMPILED

    model = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu_model": model,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "scheduler_core": core_build(COMPILED),
    }


def core_build(compiled: bool) -> str:
    return "compiled (mypyc)" if compiled else "Python (editable install: figures run slower)"


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


def write_json(name: str, payload: dict[str, Any], out: Path | None = None) -> Path:
    path = out or RESULTS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"machine": machine(), **payload}, indent=2) + "\n")
    return path


def process_cpu_s(pid: int) -> float | None:
    """CPU seconds (user and system) a live process has used so far; None where /proc does
    not say (not Linux). On a machine shared with other work a server's CPU time per
    request is the figure that the load moves least."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def with_source(env: dict[str, str], source: Path | None) -> dict[str, str]:
    """``env`` whose Python imports ``phalanx`` from ``source`` (a tree's ``src`` folder,
    e.g. an earlier commit's, to measure before and after in one run); as it is if None."""
    if source is None:
        return env
    path = [str(source.resolve()), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    return {**env, "PYTHONPATH": os.pathsep.join(path)}


class ServerProcess:
    """``phalanx up`` in the foreground of a child process, on a free port, in its own home
    (``source``: running the code of that ``src`` folder, see ``with_source``)."""

    def __init__(self, home: Path, *up_args: str, source: Path | None = None) -> None:
        self.home = home
        self.args = list(up_args)
        self.source = source
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""
        self.token = ""

    def __enter__(self) -> ServerProcess:
        self.home.mkdir(parents=True, exist_ok=True)
        log = (self.home / "server.log").open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "phalanx.cli.main", "up", "--port", "0", *self.args],
            cwd=REPO, stdout=log, stderr=log,
            env=with_source({**os.environ, "PHALANX_HOME": str(self.home)}, self.source),
        )
        deadline = time.monotonic() + 60
        info = self.home / "server.json"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("control plane exited:\n" + self.log_tail())
            if info.exists():
                self.url = json.loads(info.read_text())["url"]
                self.token = (self.home / "token").read_text().strip()
                with self.client() as client:
                    if client.healthy():
                        return self
            time.sleep(0.1)
        raise RuntimeError("control plane did not answer within 60 s:\n" + self.log_tail())

    def client(self, timeout: float = 60.0) -> Client:
        return Client(self.url, self.token, timeout=timeout)

    def log_tail(self, lines: int = 30) -> str:
        path = self.home / "server.log"
        return "\n".join(path.read_text().splitlines()[-lines:]) if path.exists() else ""

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
