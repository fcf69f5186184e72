"""What users write reaches the admin's terminal as text, never as terminal commands: every
table and ``describe`` field shows control characters as escapes (``\\x1b``), against a real
control plane."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from typer.testing import CliRunner, Result

from phalanx.cli.main import app
from phalanx.cli.output import escape_controls
from tests.sdk.live_server import LiveServer

pytestmark = pytest.mark.slow
runner = CliRunner()

NODES = """\
nodes:
  - name: sim-a
    allocatable: {cpu: 8, memory: 32Gi}
"""
# Set the window's title, clear the screen, and print a fake line in red.
HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x1b[31mFAKE: all keys revoked"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with LiveServer.simulated(tmp_path_factory.mktemp("phalanx-cli-escapes"), NODES) as live:
        yield live


def cli(server: LiveServer, *args: str) -> Result:
    env = {"PHALANX_HOME": str(server.home), "PHALANX_URL": None, "PHALANX_TOKEN": None,
           "COLUMNS": "250"}
    result = runner.invoke(app, list(args), env=env)
    assert result.exit_code == 0, result.output
    return result


def assert_shown_not_obeyed(output: str) -> None:
    assert "\x1b" not in output and "\x07" not in output, repr(output)
    assert "\\x1b]0;pwned\\x07\\x1b[2J\\x1b[31mFAKE" in output, output


def test_a_key_description_is_escaped_in_keys_list(server: LiveServer) -> None:
    cli(server, "keys", "create", "--description", HOSTILE)
    assert_shown_not_obeyed(cli(server, "keys", "list").stdout)


def test_a_command_is_escaped_in_describe(server: LiveServer) -> None:
    with server.client() as api:
        body = {"name": "hostile", "podSets": [{"name": "w", "command": ["echo", HOSTILE],
                                                "env": {"PHALANX_SIM_DURATION": "1h"}}]}
        assert api.post("/v1/jobs", json=body).status_code == 201
    assert_shown_not_obeyed(cli(server, "describe", "hostile").stdout)


def test_revoked_keys_are_listed_with_all_only(server: LiveServer) -> None:
    created = cli(server, "keys", "create", "--description", "short-lived").stdout.strip()
    with server.client() as api:
        key_id = next(k["id"] for k in api.get("/v1/keys").json()["items"]
                      if k["description"] == "short-lived")
    assert created
    cli(server, "keys", "revoke", key_id)
    assert key_id not in cli(server, "keys", "list").stdout
    assert key_id in cli(server, "keys", "list", "--all").stdout


def test_escapes_are_text_and_leave_newlines_and_tabs() -> None:
    assert escape_controls("a\tb\nc\x1b[0m\u202e\x9b") == "a\tb\nc\\x1b[0m\\u202e\\x9b"
    assert escape_controls(escape_controls(HOSTILE)) == escape_controls(HOSTILE)
