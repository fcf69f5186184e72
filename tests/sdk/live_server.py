"""A real control plane started the way users start it: ``phalanx up`` in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx
import pytest

from tests.leftovers import STARTUP_SECONDS, kill_pods_under, stop_process


class LiveServer:
    def __init__(self, home: Path, args: Sequence[str] = ()) -> None:
        """``args`` go to ``phalanx up`` after ``--port 0`` (e.g. another compute plane)."""
        self.home = home
        self.args = list(args)
        self.url = ""
        self.token = ""
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def env(self) -> dict[str, str]:
        """Environment for a client that finds the server through the state directory only."""
        env = {k: v for k, v in os.environ.items() if k not in ("PHALANX_URL", "PHALANX_TOKEN")}
        env["PHALANX_HOME"] = str(self.home)
        return env

    @classmethod
    def simulated(cls, root: Path, nodes: str, *args: str) -> LiveServer:
        """A server on the simulated compute plane with the nodes YAML ``nodes``, in ``root``."""
        (root / "nodes.yaml").write_text(nodes)
        return cls(root / "home", ["--compute", "simulated", "--nodes", str(root / "nodes.yaml"),
                                   *args])

    def client(self, timeout: float = 30) -> httpx.Client:
        """An HTTP client of the server's API, with its token."""
        return httpx.Client(base_url=self.url, timeout=timeout,
                            headers={"Authorization": f"Bearer {self.token}"})

    def __enter__(self) -> LiveServer:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def start(self) -> LiveServer:
        self.home.mkdir(parents=True, exist_ok=True)
        log = (self.home / "server.log").open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "phalanx.cli.main", "up", "--port", "0", *self.args],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=self.env,
            cwd=self.home,
        )
        log.close()
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("phalanx up died:\n" + self.log())
            try:
                info = json.loads((self.home / "server.json").read_text())
                if httpx.get(info["url"] + "/healthz", timeout=1).status_code == 200:
                    self.url = info["url"]
                    self.token = (self.home / "token").read_text().strip()
                    return self
            except (OSError, ValueError, KeyError, httpx.HTTPError):
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError("phalanx up did not answer:\n" + self.log())

    def log(self) -> str:
        try:
            return (self.home / "server.log").read_text()[-4000:]
        except OSError:
            return ""

    def stop(self) -> None:
        try:
            if self.proc is not None:
                stop_process(self.proc)
        finally:
            self.proc = None
            kill_pods_under(self.home)


@pytest.fixture(scope="module")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    # Pods run as the test's own user, root included (said explicitly: a control plane
    # running as root refuses to start pods as root otherwise).
    with LiveServer(tmp_path_factory.mktemp("phalanx-home"),
                    ["--run-as-user", str(os.geteuid())]) as server:
        yield server
