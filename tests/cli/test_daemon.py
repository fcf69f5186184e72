"""`phalanx up -d`, `status` and `down` as real processes on their own state directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

pytestmark = pytest.mark.slow


def phalanx(home: Path, *args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PHALANX_URL", "PHALANX_TOKEN")}
    env["PHALANX_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "phalanx.cli.main", *args], env=env, cwd=home,
        capture_output=True, text=True, timeout=timeout,
    )


def test_up_detached_status_down_round_trip(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    try:
        started = phalanx(home, "up", "-d", "--port", "0", "--run-as-user", str(os.geteuid()))
        assert started.returncode == 0, started.stderr
        info = json.loads((home / "server.json").read_text())
        assert f"running at {info['url']}" in started.stderr
        server = psutil.Process(info["pid"])
        assert server.is_running()
        assert os.getsid(info["pid"]) == info["pid"]  # its own session: survives the terminal
        assert (home / "token").stat().st_mode & 0o777 == 0o600

        status = phalanx(home, "status", "--json")
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["url"] == info["url"]

        again = phalanx(home, "up", "-d", "--port", "0")
        assert again.returncode == 0
        assert "already running" in again.stderr
        assert json.loads((home / "server.json").read_text())["pid"] == info["pid"]

        stopped = phalanx(home, "down")
        assert stopped.returncode == 0, stopped.stderr
        assert "stopped" in stopped.stderr
        assert not server.is_running() or server.status() == psutil.STATUS_ZOMBIE
        assert not (home / "server.json").exists()

        after = phalanx(home, "status")
        assert after.returncode == 1
        assert "no Phalanx control plane" in after.stderr
    finally:
        phalanx(home, "down", timeout=60)


def test_up_detached_reports_a_server_that_dies(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    result = phalanx(home, "up", "-d", "--port", "0", "--db", "nosuchdb://nowhere")
    assert result.returncode == 1
    # The server said why in its one error line: that line and its fix, as `up` in the
    # foreground prints them, not the log around it.
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == ["error: db: unsupported database 'nosuchdb'"], result.stderr
    assert "fix: use sqlite:///" in result.stderr
    assert "alembic" not in result.stderr and "see the log above" not in result.stderr
    assert not (home / "server.json").exists()


def test_stale_server_files_are_never_trusted(tmp_path: Path) -> None:
    from phalanx.cli.daemon import StopResult, server_info, stop_server

    dead = subprocess.Popen(["true"])
    dead.wait()
    (tmp_path / "server.json").write_text(json.dumps({"url": "http://127.0.0.1:9",
                                                      "pid": dead.pid}))
    assert server_info(tmp_path) is None
    assert stop_server(tmp_path, timeout=1) is StopResult.NOT_RUNNING

    # A live process that is not a control plane (a reused pid) is left alone.
    stranger = subprocess.Popen(["sleep", "30"])
    try:
        (tmp_path / "server.json").write_text(json.dumps({"url": "http://127.0.0.1:9",
                                                          "pid": stranger.pid}))
        assert server_info(tmp_path) is None
        assert stop_server(tmp_path, timeout=1) is StopResult.NOT_RUNNING
        assert stranger.poll() is None
    finally:
        stranger.kill()
        stranger.wait()
