"""Bad input exits 2 with the field and the fix on stderr, and sends nothing.

The control plane here is a recording loopback server: if the CLI sent anything,
``recorder.requests`` would show it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from phalanx.cli.main import app
from tests.sdk.http_recorder import TOKEN, Recorder

runner = CliRunner()
GOOD_JOB = "name: hello\npodSets:\n- name: w\n  command: [echo, hi]\n"


def invoke(recorder: Recorder, home: Path, *args: str) -> Result:
    env = {"PHALANX_URL": recorder.url, "PHALANX_TOKEN": "t", "PHALANX_HOME": str(home),
           "COLUMNS": "200"}
    return runner.invoke(app, list(args), env=env)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("name: hello\npodSets: [\n", ["not valid YAML", "line", "fix: fix the YAML syntax"]),
        ("name: hello\npodSets: [{name: w}]\ngpus: 2\n",
         ["gpus: unknown field", "fix: remove it"]),
        ("name: hello\npodSets: [{name: w, resources: {memory: 2GB}}]\n",
         ["podSets[0].resources.memory", "not a quantity", "fix: write a number", "64Gi"]),
        ("name: Hello_World\npodSets: [{name: w}]\n", ["name:", "use at most 63 lowercase"]),
        ("name: hello\n", ["podSets: is required", "fix: add it"]),
    ],
)
def test_submit_of_a_bad_file(
    recorder: Recorder, tmp_path: Path, text: str, expected: list[str]
) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(text)
    result = invoke(recorder, tmp_path, "submit", "-f", str(job), "--wait")
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    for words in expected:
        assert words in result.stderr
    assert recorder.requests == []


def test_unreadable_files(recorder: Recorder, tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    result = invoke(recorder, tmp_path, "submit", "-f", str(missing))
    assert result.exit_code == 2
    assert f"{missing}: no such file" in result.stderr
    result = invoke(recorder, tmp_path, "apply", "-f", str(tmp_path))
    assert result.exit_code == 2
    assert "is a directory" in result.stderr
    assert recorder.requests == []


def test_bad_overrides_are_checked_like_the_file(recorder: Recorder, tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(GOOD_JOB)
    result = invoke(recorder, tmp_path, "submit", "-f", str(job), "--name", "Not OK")
    assert result.exit_code == 2
    assert "name:" in result.stderr and "'Not OK' is not a valid name" in result.stderr
    assert recorder.requests == []


def test_apply_of_a_bad_config(recorder: Recorder, tmp_path: Path) -> None:
    config = tmp_path / "queues.yaml"
    config.write_text(
        "kind: ClusterQueue\nname: team-a\nresourceGroups:\n- coveredResources: [cpu]\n"
        "  flavors:\n  - name: local\n    resources: [{name: cpu, nominalQuota: 2, bogus: 1}]\n"
    )
    result = invoke(recorder, tmp_path, "apply", "-f", str(config))
    assert result.exit_code == 2
    assert "resourceGroups[0].flavors[0].resources[0].bogus: unknown field" in result.stderr
    assert recorder.requests == []


def test_bad_options(recorder: Recorder, tmp_path: Path) -> None:
    result = invoke(recorder, tmp_path, "jobs", "--status", "Sleeping")
    assert result.exit_code == 2
    assert "unknown job status 'Sleeping'" in result.stderr
    assert "Queued" in result.stderr  # the fix lists the valid values
    result = invoke(recorder, tmp_path, "up", "--compute", "cloud")
    assert result.exit_code == 2
    result = invoke(recorder, tmp_path, "up", "--pod-api-url", "phalanx:7780")
    assert result.exit_code == 2 and "--pod-api-url" in result.stderr
    assert "not an http(s) URL" in result.stderr
    result = invoke(recorder, tmp_path, "submit")
    assert result.exit_code == 2  # --file is required
    assert recorder.requests == []


def test_server_refusals_keep_their_exit_codes(recorder: Recorder, tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(GOOD_JOB)
    recorder.answer(400, {"error": {"type": "SpecError", "message": "unknown queue 'gpu'",
                                    "field": "queue", "fix": "submit to an existing LocalQueue"}})
    result = invoke(recorder, tmp_path, "submit", "-f", str(job), "--queue", "gpu")
    assert result.exit_code == 2
    assert "queue: unknown queue 'gpu'" in result.stderr
    assert "fix: submit to an existing LocalQueue" in result.stderr
    assert result.stdout == ""

    recorder.answer(404, {"error": {"type": "NotFound", "message": "no job 'ghost'"}})
    for command in (["describe", "ghost"], ["logs", "ghost"], ["cancel", "ghost"]):
        result = invoke(recorder, tmp_path, *command)
        assert result.exit_code == 2, command
        assert "no job 'ghost'" in result.stderr

    recorder.answer(500, {"error": {"type": "ServerError", "message": "database is locked"}})
    result = invoke(recorder, tmp_path, "jobs")
    assert result.exit_code == 1
    assert "database is locked" in result.stderr

    recorder.answer(401, {"error": {"type": "AuthError", "message": "missing or wrong API token"}})
    result = invoke(recorder, tmp_path, "queues", "--json")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert "wrong API token" in result.stderr
    assert [path for _, path in recorder.requests] == [
        "/v1/jobs", "/v1/jobs/ghost", "/v1/jobs/ghost/logs?follow=false",
        "/v1/jobs/ghost/cancel", "/v1/jobs?limit=50",
        "/v1/queues", "/v1/queues",  # a 401 is tried again with a fresh token
    ]


def test_no_server_is_exit_1_with_the_way_to_start_one(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["--url", "http://127.0.0.1:9", "status"], env={"PHALANX_HOME": str(tmp_path)}
    )
    assert result.exit_code == 1
    assert "no Phalanx control plane at http://127.0.0.1:9" in result.stderr
    assert "phalanx up -d" in result.stderr
    version = runner.invoke(
        app, ["--url", "http://127.0.0.1:9", "version"], env={"PHALANX_HOME": str(tmp_path)}
    )
    assert version.exit_code == 0
    assert "client 0.1.0" in version.stdout and "no Phalanx control plane" in version.stdout


def test_down_without_a_server(tmp_path: Path) -> None:
    result = runner.invoke(app, ["down"], env={"PHALANX_HOME": str(tmp_path)})
    assert result.exit_code == 0
    assert "No Phalanx control plane is running" in result.stderr


def test_global_options_choose_the_server_and_token(recorder: Recorder, tmp_path: Path) -> None:
    recorder.answer(200, {"items": []})
    env = {"PHALANX_HOME": str(tmp_path), "PHALANX_URL": None, "PHALANX_TOKEN": "from-env"}
    result = runner.invoke(app, ["--url", recorder.url, "jobs", "--json"], env=env)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "[]"
    result = runner.invoke(app, ["--url", recorder.url, "--token", "from-flag", "jobs"], env=env)
    assert result.exit_code == 0
    assert "No jobs." in result.stdout
    # Each key is exchanged for a token, which every request then carries.
    assert recorder.exchanged == ["from-env", "from-flag"]
    assert recorder.authorizations == [f"Bearer {TOKEN}"] * 2
