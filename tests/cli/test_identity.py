"""The CLI's identity verbs against a real control plane: the local quick start needs no
login, `login` stores a key per server (0600, read from stdin, never argv), users, keys,
teams and the audit log, and a state directory of an earlier version keeps its token."""

from __future__ import annotations

import json
import os
import stat
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
name: cq
resourceGroups:
- coveredResources: [cpu]
  flavors: [{name: default, resources: [{name: cpu, nominalQuota: 4}]}]
---
kind: LocalQueue
name: team-q
clusterQueue: cq
"""
JOB = """\
name: {name}
queue: team-q
podSets: [{{name: w, resources: {{cpu: 100m}}, command: [x], env: {{PHALANX_SIM_DURATION: 1h}}}}]
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with LiveServer.simulated(tmp_path_factory.mktemp("phalanx-cli-identity"), NODES) as live:
        yield live


def local(server: LiveServer, *args: str, stdin: str | None = None) -> Result:
    """The CLI as on the machine of the control plane: the state directory, no login."""
    env = {"PHALANX_HOME": str(server.home), "PHALANX_URL": None, "PHALANX_TOKEN": None,
           "COLUMNS": "200"}
    return runner.invoke(app, list(args), env=env, input=stdin)


def remote(server: LiveServer, credentials: Path, *args: str, stdin: str | None = None) -> Result:
    """The CLI elsewhere: no state directory, only what `phalanx login` stored."""
    env = {"PHALANX_HOME": str(credentials.parent / "no-home"), "PHALANX_URL": None,
           "PHALANX_TOKEN": None, "PHALANX_CREDENTIALS": str(credentials), "COLUMNS": "200"}
    return runner.invoke(app, list(args), env=env, input=stdin)


def test_the_local_quick_start_needs_no_login(server: LiveServer) -> None:
    key_file = server.home / "token"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert key_file.read_text().startswith("phx_")  # the bootstrap admin key
    me = local(server, "whoami", "--json")
    assert me.exit_code == 0, me.output
    assert json.loads(me.stdout)["role"] == "admin"
    assert json.loads(me.stdout)["key"] == "bootstrap"


def test_an_admin_sets_up_a_team_and_a_member_logs_in_and_works(
    server: LiveServer, tmp_path: Path,
) -> None:
    queues = tmp_path / "queues.yaml"
    queues.write_text(QUEUES)
    assert local(server, "apply", "-f", str(queues)).exit_code == 0
    assert local(server, "teams", "create", "nlp", "--queue", "team-q").exit_code == 0
    created = local(server, "users", "create", "ann", "--team", "nlp")
    assert created.exit_code == 0, created.output
    listed = local(server, "users", "list", "--json")
    assert {"name": "ann", "role": "member", "teams": ["nlp"]}.items() <= next(
        u for u in json.loads(listed.stdout) if u["name"] == "ann").items()
    made = local(server, "keys", "create", "--user", "ann", "--description", "laptop")
    assert made.exit_code == 0, made.output
    key = made.stdout.strip()
    assert key.startswith("phx_") and "shown only now" in made.stderr

    credentials = tmp_path / "config" / "credentials.json"
    logged = remote(server, credentials, "login", "--url", server.url, stdin=key + "\n")
    assert logged.exit_code == 0, logged.output
    assert "as ann (member)" in logged.stderr and key not in logged.output
    assert stat.S_IMODE(credentials.stat().st_mode) == 0o600
    assert json.loads(credentials.read_text())["contexts"][server.url]["key"] == key
    me = remote(server, credentials, "whoami")
    assert me.exit_code == 0 and "ann (member)" in me.stdout and "team-q" in me.stdout

    job = tmp_path / "job.yaml"
    job.write_text(JOB.format(name="ann-1"))
    assert remote(server, credentials, "submit", "-f", str(job)).exit_code == 0
    job.write_text(JOB.format(name="admins-1"))
    assert local(server, "submit", "-f", str(job)).exit_code == 0
    mine = remote(server, credentials, "jobs", "--mine", "--json")
    assert [j["name"] for j in json.loads(mine.stdout)] == ["ann-1"]
    refused = remote(server, credentials, "cordon", "sim-a")
    assert refused.exit_code == 1 and "needs role admin; ann is a member" in refused.stderr

    keys = json.loads(local(server, "keys", "list", "--user", "ann", "--json").stdout)
    assert [k["description"] for k in keys] == ["laptop"] and "key" not in keys[0]
    assert local(server, "keys", "revoke", keys[0]["id"]).exit_code == 0
    after = remote(server, credentials, "jobs")
    assert after.exit_code == 1 and "wrong, expired or revoked" in after.stderr

    audit = json.loads(local(server, "audit", "--since", "1h", "--json").stdout)
    actions = [(e["user"], e["action"]) for e in audit]
    local_user = "admin"  # the bootstrap key is the user admin, whoever runs the CLI
    for expected in [(local_user, "team-set"), (local_user, "user-create"),
                     (local_user, "key-create"), ("ann", "login"), ("ann", "submit"),
                     (local_user, "key-revoke")]:
        assert expected in actions
    only_ann = json.loads(local(server, "audit", "--user", "ann", "--json").stdout)
    assert {e["user"] for e in only_ann} == {"ann"}
    assert remote(server, credentials, "logout").exit_code == 0
    assert json.loads(credentials.read_text())["contexts"] == {}


def test_login_reads_no_key_from_the_command_line(server: LiveServer, tmp_path: Path) -> None:
    result = remote(server, tmp_path / "c.json", "login", "--url", server.url, "phx_x")
    assert result.exit_code == 2  # no such argument
    empty = remote(server, tmp_path / "c.json", "login", "--url", server.url, stdin="\n")
    assert empty.exit_code == 2 and "no API key was given" in empty.stderr
    assert not (tmp_path / "c.json").exists()


def test_a_state_directory_of_an_earlier_version_keeps_its_token(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "token").write_text("the-single-token-of-before\n")
    os.chmod(home / "token", 0o600)
    server = LiveServer.simulated(tmp_path, NODES)
    server.home = home
    with server:
        assert server.token == "the-single-token-of-before"
        me = local(server, "whoami", "--json")  # exchanged for a token as an admin key
        assert me.exit_code == 0 and json.loads(me.stdout)["role"] == "admin"
        with server.client() as raw:  # and still taken as a bearer, as scripts send it
            assert raw.get("/v1/queues").status_code == 200


def test_users_set_enable_and_the_last_admin(server: LiveServer) -> None:
    assert local(server, "users", "create", "cli-user", "--role", "viewer").exit_code == 0
    taken = local(server, "users", "create", "cli-user", "--role", "admin")
    assert taken.exit_code != 0 and "user cli-user already exists" in taken.stderr
    assert "phalanx users set cli-user" in taken.stderr
    changed = local(server, "users", "set", "cli-user", "--role", "member", "--json")
    assert changed.exit_code == 0 and json.loads(changed.stdout)["role"] == "member"
    assert local(server, "users", "disable", "cli-user").exit_code == 0
    enabled = local(server, "users", "enable", "cli-user")
    assert enabled.exit_code == 0 and "user cli-user enabled" in enabled.stderr
    users = {u["name"]: u for u in json.loads(local(server, "users", "list", "--json").stdout)}
    assert users["cli-user"]["disabled"] is False
    last = local(server, "users", "disable", "admin")
    assert last.exit_code != 0 and "admin is the last enabled admin" in last.stderr
    assert local(server, "jobs").exit_code == 0  # the local admin still works
    acting = local(server, "--as", "cli-user", "whoami")
    assert acting.exit_code == 0 and "cli-user (member)" in acting.stdout
