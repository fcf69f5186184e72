"""`phalanx backup` and `phalanx restore` as commands, with --passphrase-file, on the state
directory's own SQLite store (tests/e2e/test_backup.py runs them around control planes)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from phalanx.spec import JobSpec
from phalanx.spec.status import JobRecord
from phalanx.store import Store
from phalanx.store.backup import PASSPHRASE_ENV

REPO = Path(__file__).resolve().parents[2]


def _phalanx(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != PASSPHRASE_ENV}
    return subprocess.run([sys.executable, "-m", "phalanx.cli", "--home", str(home), *args],
                          cwd=REPO, env={**env, "COLUMNS": "200"}, capture_output=True,
                          text=True, timeout=120)


def test_backup_and_restore_with_a_passphrase_file(tmp_path: Path) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir()
    spec = JobSpec.model_validate({"name": "kept", "podSets": [
        {"name": "w", "resources": {"cpu": "1"}, "command": ["true"]}]})
    with Store.for_home(old) as store:
        store.create_job(JobRecord(name="kept", spec=spec, queue="default",
                                   cluster_queue="default", submitted_at=time.time(),
                                   queued_at=time.time(), user="ann"))
    (old / "signing-keys.json").write_text('{"keys": "as written"}')
    passphrase, empty = tmp_path / "pass", tmp_path / "empty"
    passphrase.write_text("a long passphrase\n")
    empty.write_text("")
    file = tmp_path / "phalanx.backup"

    refused = _phalanx(old, "backup", str(file), "--passphrase-file", str(empty))
    assert refused.returncode == 2 and "--passphrase-file" in refused.stderr, refused.stderr
    assert not file.exists()
    made = _phalanx(old, "backup", str(file), "--passphrase-file", str(passphrase))
    assert made.returncode == 0, made.stderr
    assert "1 jobs" in made.stderr

    restored = _phalanx(new, "restore", str(file), "--passphrase-file", str(passphrase))
    assert restored.returncode == 0, restored.stderr
    with Store.for_home(new) as store:
        assert [r.name for r in store.list_jobs()] == ["kept"]
    assert (new / "signing-keys.json").read_text() == '{"keys": "as written"}'
    assert oct((new / "signing-keys.json").stat().st_mode & 0o777) == "0o600"

    again = _phalanx(new, "restore", str(file), "--passphrase-file", str(passphrase))
    assert again.returncode == 2 and "--db" in again.stderr and "not empty" in again.stderr

    # A state directory without a store: nothing to back up, and none is created.
    missing = _phalanx(tmp_path / "nowhere", "backup", str(tmp_path / "b2"),
                       "--passphrase-file", str(passphrase))
    assert missing.returncode == 2 and "no store" in missing.stderr, missing.stderr
    assert not (tmp_path / "nowhere" / "phalanx.db").exists()
