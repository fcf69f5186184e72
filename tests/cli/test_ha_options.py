"""``phalanx up --ha``'s refusals: each names its option and the fix, and starts nothing."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner, Result

from phalanx.cli.main import app

runner = CliRunner()


def up(home: Path, *args: str) -> Result:
    env = {"PHALANX_HOME": str(home), "COLUMNS": "200"}
    return runner.invoke(app, ["up", "--port", "0", *args], env=env)


def test_ha_on_a_sqlite_store_is_refused_saying_why(tmp_path: Path) -> None:
    result = up(tmp_path, "--ha")
    assert result.exit_code == 2, result.output
    assert "--db" in result.stderr and "one process" in result.stderr
    assert "postgresql://" in result.stderr  # the fix
    assert not (tmp_path / "server.json").exists()


def test_ha_in_the_background_is_refused(tmp_path: Path) -> None:
    result = up(tmp_path, "--ha", "-d")
    assert result.exit_code == 2, result.output
    assert "--detach" in result.stderr and "supervisor" in result.stderr


def test_a_lease_of_no_time_is_refused(tmp_path: Path) -> None:
    result = up(tmp_path, "--ha", "--lease", "0s", "--db", "postgresql://nobody@127.0.0.1:1/x")
    assert result.exit_code == 2, result.output
    assert "--lease" in result.stderr


def test_a_replicas_setting_without_ha_is_refused(tmp_path: Path) -> None:
    for args in (["--lease", "5s"], ["--advertise-url", "http://10.0.0.1:7780"],
                 ["--leader-lease", "kubernetes"]):
        result = up(tmp_path, *args)
        assert result.exit_code == 2, result.output
        assert args[0] in result.stderr and "--ha" in result.stderr
        assert not (tmp_path / "server.json").exists()


def test_a_leader_lease_of_no_known_kind_is_refused(tmp_path: Path) -> None:
    result = up(tmp_path, "--ha", "--leader-lease", "etcd",
                "--db", "postgresql://nobody@127.0.0.1:1/x")
    assert result.exit_code == 2, result.output
    assert "--leader-lease" in result.stderr and "kubernetes:NAMESPACE/NAME" in result.stderr
    assert not (tmp_path / "server.json").exists()
