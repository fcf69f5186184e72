"""On Kubernetes the bootstrap admin key comes from a Secret through $PHALANX_TOKEN.

A real control plane in a subprocess, over real HTTP: the env token is the one
it accepts, and the state directory's token file follows it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.leftovers import STARTUP_SECONDS, stop_process

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    home = tmp_path / "home"
    home.mkdir()
    # A token left by an earlier run without the Secret must lose to the env token.
    (home / "token").write_text("old-file-token\n")
    code = ("from pathlib import Path; from phalanx.server import serve; "
            f"serve(home=Path({str(home)!r}), port=0, compute='local', "
            f"run_as_user={str(os.geteuid())!r})")
    env = {**os.environ, "PHALANX_HOME": str(home), "PHALANX_TOKEN": "from-the-secret"}
    log = open(home / "server.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, env=env, stdout=log,
                            stderr=log)
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while not (home / "server.json").exists():
            assert proc.poll() is None, (home / "server.log").read_text()
            assert time.monotonic() < deadline, "the control plane did not start"
            time.sleep(0.1)
        url = json.loads((home / "server.json").read_text())["url"]
        yield url, home
    finally:
        stop_process(proc)
        log.close()


def test_the_env_token_is_the_one_accepted(server: tuple[str, Path]) -> None:
    url, home = server
    with httpx.Client(base_url=url, timeout=30) as http:
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            try:
                if http.get("/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline
            time.sleep(0.1)
        good = http.get("/v1/jobs", headers={"Authorization": "Bearer from-the-secret"})
        old = http.get("/v1/jobs", headers={"Authorization": "Bearer old-file-token"})
        # The Secret is the bootstrap admin key: it exchanges for an admin's token.
        issued = http.post("/v1/auth/token", json={"key": "from-the-secret"})
        refused = http.post("/v1/auth/token", json={"key": "old-file-token"})
    assert good.status_code == 200
    assert old.status_code == 401
    assert issued.status_code == 200 and issued.json()["role"] == "admin"
    assert refused.status_code == 401
    assert (home / "token").read_text().strip() == "from-the-secret"
    assert (home / "token").stat().st_mode & 0o777 == 0o600
