"""`phalanx secrets`: create from literals and files, list without values, delete, and bad
input refused naming the option and the fix; the CLI against a real control plane."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from phalanx.cli.main import app
from tests.sdk.live_server import LiveServer

pytestmark = pytest.mark.slow
runner = CliRunner()
NODES = "nodes:\n  - name: sim-a\n    allocatable: {cpu: 8, memory: 32Gi}\n"
VALUE = "cli-marker-0c4d"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with LiveServer.simulated(tmp_path_factory.mktemp("phalanx-cli-secrets"), NODES) as live:
        yield live


def cli(server: LiveServer, *args: str) -> Result:
    env = {"PHALANX_HOME": str(server.home), "PHALANX_URL": None, "PHALANX_TOKEN": None,
           "COLUMNS": "200"}
    return runner.invoke(app, list(args), env=env)


def test_create_list_delete_never_print_a_value(server: LiveServer, tmp_path: Path) -> None:
    key_file = tmp_path / "id"
    key_file.write_text(f"-----BEGIN KEY----- {VALUE}\n")
    made = cli(server, "secrets", "create", "deploy", "--type", "ssh",
               "--from-file", f"ssh-privatekey={key_file}")
    assert made.exit_code == 0, made.output
    made = cli(server, "secrets", "create", "hf", "--from-literal", f"HF_TOKEN={VALUE}")
    assert made.exit_code == 0, made.output
    listed = cli(server, "secrets", "list", "--json")
    assert listed.exit_code == 0, listed.output
    assert [(s["name"], s["type"], s["keys"]) for s in json.loads(listed.output)] == [
        ("deploy", "ssh", ["ssh-privatekey"]), ("hf", "env", ["HF_TOKEN"])]
    table = cli(server, "secrets", "list")
    assert "HF_TOKEN" in table.output
    for answer in (made, listed, table):
        assert VALUE not in answer.output
    again = cli(server, "secrets", "create", "hf", "--from-literal", "HF_TOKEN=x")
    assert again.exit_code != 0 and "exists" in again.output
    assert cli(server, "secrets", "delete", "hf").exit_code == 0
    gone = cli(server, "secrets", "delete", "hf")
    assert gone.exit_code != 0 and "no secret 'hf'" in gone.output


@pytest.mark.parametrize(("args", "says"), [
    (["--from-literal", "NOEQUALS"], "is not KEY=VALUE"),
    ([], "no values given"),
    (["--from-file", "k=/no/such/file"], "cannot read /no/such/file"),
    (["--type", "docker", "--from-literal", "x=1"], ".dockerconfigjson"),
    (["--from-literal", "bad-name=1"], "not a variable name"),
])
def test_bad_input_is_refused_naming_the_fix(server: LiveServer, args: list[str],
                                             says: str) -> None:
    refused = cli(server, "secrets", "create", "bad", *args)
    assert refused.exit_code != 0
    assert says in refused.output, refused.output
