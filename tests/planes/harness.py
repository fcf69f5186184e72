"""One control plane and its compute-plane workers, as real processes over real HTTP.

``Federation`` starts ``phalanx up --no-local-plane`` with short timers, registers planes
(``POST /v1/planes``, the key written to a file as ``phalanx plane add`` does) and starts
``phalanx worker`` processes, each with its own state directory. ``Gate`` is a TCP relay
between a worker and the control plane that a test can close: a network partition.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.leftovers import kill_pods_under
from tests.sdk.live_server import LiveServer

QUEUES = """
kind: ResourceFlavor
name: default
---
kind: ClusterQueue
name: default
resourceGroups:
  - coveredResources: [cpu, memory, pods]
    flavors:
      - name: default
        resources:
          - {name: cpu, nominalQuota: "%(cpu)s"}
          - {name: memory, nominalQuota: 1000Gi}
          - {name: pods, nominalQuota: "1000"}
---
kind: LocalQueue
name: default
clusterQueue: default
"""


def wait_until(check: Callable[[], Any], timeout: float = 30.0, every: float = 0.1,
               what: str = "the condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")


class Gate:
    """A TCP relay to ``target`` that can be cut (a partition) and healed."""

    def __init__(self, target: str) -> None:
        host, port = target.removeprefix("http://").rsplit(":", 1)
        self.target = (host, int(port))
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.open = threading.Event()
        self.open.set()
        # Cleared: requests still reach the target, but its answers are lost (the
        # connection closes instead), as when a network drops a reply.
        self.answering = threading.Event()
        self.answering.set()
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if not self.open.is_set():
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._conns += [client, upstream]
            for a, b, answers in ((client, upstream, False), (upstream, client, True)):
                threading.Thread(target=self._pipe, args=(a, b, answers), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, answers: bool) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                if answers and not self.answering.is_set():
                    break  # the answer is lost
                dst.sendall(data)
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        self.open.clear()
        with self._lock:
            conns, self._conns = self._conns, []
        for s in conns:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def heal(self) -> None:
        self.open.set()
        self.answering.set()

    def lose_answers(self) -> None:
        self.answering.clear()

    def close(self) -> None:
        self.cut()
        self.listener.close()


class WorkerProcess:
    def __init__(self, root: Path, name: str, key_file: Path, args: Sequence[str],
                 env: Mapping[str, str] | None = None) -> None:
        self.name = name
        self.state_dir = root / f"worker-{name}"
        self.key_file = key_file
        self.args = list(args)
        self.env = dict(env or {})  # on top of this process's, without its PHALANX_*
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, url: str) -> WorkerProcess:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        log = (self.state_dir.parent / f"worker-{self.name}.log").open("ab")
        env = {k: v for k, v in os.environ.items() if not k.startswith("PHALANX_")}
        env.update(self.env)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "phalanx.cli.main", "worker", "--control-plane", url,
             "--plane", self.name, "--api-key-file", str(self.key_file),
             "--state-dir", str(self.state_dir), *self.args],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
            start_new_session=True,
        )
        log.close()
        return self

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def log(self) -> str:
        with contextlib.suppress(OSError):
            return (self.state_dir.parent / f"worker-{self.name}.log").read_text()[-3000:]
        return ""


class Federation:
    """A control plane that only waits for workers, and the workers of its planes."""

    def __init__(self, root: Path, *, grace: str = "1s", lost_after: str = "8s",
                 cpu: str = "100", extra: Sequence[str] = (), queues: bool = True) -> None:
        """``queues``: apply a default queue of ``cpu`` CPUs at start (False: keep the
        built-in default, which follows the nodes of the planes that join)."""
        self.root = root
        self.queues = queues
        self.server = LiveServer(root / "home", ["--no-local-plane", "--worker-grace", grace,
                                                 "--worker-lost-after", lost_after,
                                                 "--run-as-user", str(os.geteuid()), *extra])
        self.cpu = cpu
        self.workers: dict[str, WorkerProcess] = {}
        self.gates: list[Gate] = []

    def __enter__(self) -> Federation:
        self.server.start()
        if not self.queues:
            return self
        with self.api() as api:
            documents = list(yaml.safe_load_all(QUEUES % {"cpu": self.cpu}))
            answer = api.post("/v1/config/apply", json={"documents": documents})
            if answer.status_code >= 400:
                raise AssertionError(answer.text)
        return self

    def __exit__(self, *_: object) -> None:
        for worker in self.workers.values():
            worker.stop()
            kill_pods_under(worker.state_dir)
        self.server.stop()
        for gate in self.gates:
            gate.close()

    def api(self) -> httpx.Client:
        return self.server.client()

    def cli_env(self) -> dict[str, str]:
        """The environment of a user's CLI that talks to this control plane."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("PHALANX_")}
        return {**env, "PHALANX_URL": self.server.url, "PHALANX_TOKEN": self.server.token,
                "PHALANX_HOME": str(self.server.home)}

    def cli(self, *args: str, stdin: bytes | None = None,
            timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
        """The real CLI in a process of its own, as a user runs it."""
        return subprocess.run([sys.executable, "-m", "phalanx.cli", *args], input=stdin,
                              capture_output=True, timeout=timeout, env=self.cli_env())

    def add_plane(self, name: str) -> Path:
        with self.api() as api:
            answer = api.post("/v1/planes", json={"name": name})
            assert answer.status_code == 201, answer.text
        key_file = self.root / f"{name}.key"
        key_file.write_text(answer.json()["key"] + "\n")
        key_file.chmod(0o600)
        return key_file

    def start_worker(self, name: str, *args: str, via: Gate | None = None,
                     compute: Sequence[str] = (),
                     env: Mapping[str, str] | None = None) -> WorkerProcess:
        key_file = self.root / f"{name}.key"
        if not key_file.exists():
            self.add_plane(name)
        worker = self.workers.get(name) or WorkerProcess(self.root, name, key_file,
                                                          [*compute, *args], env)
        self.workers[name] = worker
        worker.start(via.url if via is not None else self.server.url)
        self.wait_connected(name)
        return worker

    def gate(self) -> Gate:
        gate = Gate(self.server.url)
        self.gates.append(gate)
        return gate

    def plane(self, name: str) -> dict[str, Any]:
        with self.api() as api:
            return dict(api.get(f"/v1/planes/{name}").json())

    def wait_connected(self, name: str, timeout: float = 30.0) -> None:
        wait_until(lambda: self.plane(name).get("state") == "connected" and
                   self.plane(name).get("nodes"), timeout, what=f"plane {name} to connect:\n"
                   + self.workers[name].log())

    def submit(self, spec: dict[str, Any]) -> dict[str, Any]:
        with self.api() as api:
            answer = api.post("/v1/jobs", json=spec)
            assert answer.status_code in (200, 201), answer.text
            return dict(answer.json())

    def job(self, name: str) -> dict[str, Any]:
        with self.api() as api:
            return dict(api.get(f"/v1/jobs/{name}").json())

    def wait_status(self, name: str, *statuses: str, timeout: float = 60.0) -> dict[str, Any]:
        try:
            return dict(wait_until(lambda: (j := self.job(name))["status"] in statuses and j,
                                   timeout, what=f"{name} to be {'/'.join(statuses)}"))
        except AssertionError as exc:
            job = self.job(name)
            raise AssertionError(f"{exc}: it is {job['status']} "
                                 f"({job.get('pendingMessage') or job.get('message')})") from None


def job_spec(name: str, code: str, *, replicas: int = 1, cpu: str = "100m",
             system_restarts: int = 0, selector: dict[str, str] | None = None) -> dict[str, Any]:
    pod_set: dict[str, Any] = {"name": "main", "replicas": replicas,
                               "resources": {"cpu": cpu, "memory": "16Mi"},
                               "command": [sys.executable, "-c", code]}
    if selector:
        pod_set["nodeSelector"] = selector
    spec: dict[str, Any] = {"name": name, "queue": "default", "podSets": [pod_set]}
    if system_restarts:
        spec["restart"] = {"maxSystemRestarts": system_restarts}
    return spec


SIM_NODES = "nodes:\n" + "".join(
    f"  - {{name: n{i}, allocatable: {{cpu: 8, memory: 64Gi, pods: 110}}}}\n"
    for i in range(4))


def sim_job(name: str, replicas: int, cpu: str = "8") -> dict[str, Any]:
    """A job for simulated planes (its pods run nowhere)."""
    return {"name": name, "queue": "default", "podSets": [{
        "name": "main", "replicas": replicas, "resources": {"cpu": cpu}}]}


@contextlib.contextmanager
def two_simulated_planes(root: Path) -> Iterator[tuple[Federation, Gate]]:
    """Planes gcp-a (behind a gate that can cut it off) and onprem (cordoned, so every job
    lands on gcp-a), 4 simulated 8-CPU nodes each; silent after 1 s, lost after 60 s (long
    enough to look at a silent plane); the team's quota 24 CPUs."""
    (root / "nodes.yaml").write_text(SIM_NODES)
    compute = ["--compute", "simulated", "--nodes", str(root / "nodes.yaml")]
    with Federation(root, lost_after="60s", cpu="24") as federation:
        gate = federation.gate()
        federation.start_worker("gcp-a", "--fence-after", "45s", via=gate, compute=compute)
        federation.start_worker("onprem", "--fence-after", "45s", compute=compute)
        with federation.api() as api:
            api.post("/v1/planes/onprem/cordon", json={"cordoned": True})
        yield federation, gate
