"""The CLI's everyday verbs against a real control plane: `-f -` reads stdin, `phalanx wait`
has `submit --wait`'s exit codes, one CLI call after another reuses the last one's token,
and a port already taken is one line naming --port, with or without -d."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from phalanx.cli.main import app
from tests.sdk.live_server import LiveServer

pytestmark = pytest.mark.slow
runner = CliRunner()

NODES = """\
nodes:
  - name: sim-a
    allocatable: {cpu: 8, memory: 32Gi}
"""
QUEUES = """\
kind: ClusterQueue
name: stdin-cq
resourceGroups:
- coveredResources: [cpu]
  flavors: [{name: default, resources: [{name: cpu, nominalQuota: 4}]}]
---
kind: LocalQueue
name: stdin-q
clusterQueue: stdin-cq
"""


def job(name: str, duration: str = "200ms", exit_code: int = 0) -> str:
    env = f"{{PHALANX_SIM_DURATION: {duration}, PHALANX_SIM_EXIT_CODE: '{exit_code}'}}"
    return (f"name: {name}\nqueue: stdin-q\npodSets: [{{name: w, resources: {{cpu: 100m}}, "
            f"command: [x], env: {env}}}]\n")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with LiveServer.simulated(tmp_path_factory.mktemp("phalanx-cli-everyday"), NODES) as live:
        yield live


def cli(server: LiveServer, *args: str, stdin: str | None = None,
        credentials: Path | None = None) -> Result:
    env = {"PHALANX_HOME": str(server.home), "PHALANX_URL": None, "PHALANX_TOKEN": None,
           "COLUMNS": "200"}
    if credentials is not None:
        env["PHALANX_CREDENTIALS"] = str(credentials)
    return runner.invoke(app, list(args), env=env, input=stdin)


def test_apply_and_submit_read_stdin_with_dash(server: LiveServer) -> None:
    applied = cli(server, "apply", "-f", "-", stdin=QUEUES)
    assert applied.exit_code == 0, applied.output
    assert "stdin-q" in applied.stdout
    submitted = cli(server, "submit", "-f", "-", stdin=job("from-stdin") + "---\n"
                    + job("from-stdin-2"))
    assert submitted.exit_code == 0, submitted.output
    assert submitted.stdout.split() == ["from-stdin", "from-stdin-2"]
    bad = cli(server, "submit", "-f", "-", stdin="name: x\npodSets: 3\n")
    assert bad.exit_code == 2 and "<stdin>" in bad.stderr, bad.output


def test_wait_exits_as_submit_wait_does(server: LiveServer) -> None:
    assert cli(server, "apply", "-f", "-", stdin=QUEUES).exit_code == 0
    for name, code in (("wait-ok", 0), ("wait-bad", 3)):
        assert cli(server, "submit", "-f", "-", stdin=job(name, exit_code=code)).exit_code == 0
    assert cli(server, "submit", "-f", "-", stdin=job("wait-long", "1h")).exit_code == 0
    ok = cli(server, "wait", "wait-ok")
    assert ok.exit_code == 0, ok.output
    assert "job wait-ok Succeeded" in ok.stderr
    both = cli(server, "wait", "wait-ok", "wait-bad")
    assert both.exit_code == 1, both.output
    assert "job wait-bad Failed" in both.stderr
    late = cli(server, "wait", "wait-long", "--timeout", "0.5")
    assert late.exit_code == 1, late.output
    assert "wait-long is still" in late.stderr and "--timeout" in late.stderr
    unknown = cli(server, "wait", "wait-ok", "no-such-job")
    assert unknown.exit_code == 2, unknown.output
    assert "wait-ok" not in unknown.stderr  # refused before waiting for anything


def _logins(server: LiveServer) -> int:
    with server.client() as http:
        entries = http.get("/v1/audit").json()
    items = entries["items"] if isinstance(entries, dict) else entries
    return sum(1 for e in items if e["action"] == "login")


def test_cli_calls_reuse_a_token_until_it_nears_expiry(server: LiveServer,
                                                       tmp_path: Path) -> None:
    credentials = tmp_path / "config" / "credentials.json"
    before = _logins(server)
    for _ in range(3):
        listed = cli(server, "jobs", credentials=credentials)
        assert listed.exit_code == 0, listed.output
    # One exchange for three calls: the first call's token served the other two.
    assert _logins(server) == before + 1
    kept = credentials.with_name("tokens.json")
    assert oct(kept.stat().st_mode & 0o777) == "0o600"
    key = (server.home / "token").read_text().strip()
    assert key not in kept.read_text()  # tokens only, filed under a hash of the key
    # A kept token the server no longer takes (spent, or signed by another server) is
    # replaced by a fresh exchange, and the call still succeeds.
    data = json.loads(kept.read_text())
    for entry in data["tokens"].values():
        entry["token"] = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl"
    kept.write_text(json.dumps(data))
    assert cli(server, "jobs", credentials=credentials).exit_code == 0
    assert _logins(server) == before + 2


def _taken_port() -> tuple[socket.socket, int]:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    return holder, holder.getsockname()[1]


@pytest.mark.parametrize("detach", [False, True], ids=["foreground", "detached"])
def test_a_taken_port_is_one_line_naming_the_flag(tmp_path: Path, detach: bool) -> None:
    holder, port = _taken_port()
    with holder:
        home = tmp_path / "home"
        env = {**os.environ, "PHALANX_HOME": str(home)}
        env.pop("PHALANX_URL", None)
        done = subprocess.run(
            [sys.executable, "-m", "phalanx.cli.main", "up", *(["-d"] if detach else []),
             "--port", str(port), "--compute", "simulated", "--nodes", str(_nodes(tmp_path))],
            capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode != 0
    said = done.stderr
    assert "Traceback" not in said and "see the log above" not in said, said
    assert f"--port: port {port} on 127.0.0.1 is already in use" in said, said
    assert "another --port" in said, said
    errors = [line for line in said.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, said


def _nodes(root: Path) -> Path:
    path = root / "nodes.yaml"
    path.write_text(NODES)
    return path
