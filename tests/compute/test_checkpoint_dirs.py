"""Where the local plane keeps jobs' checkpoint directories, and what it reads from them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from phalanx.compute.local.checkpoints import (
    CHECKPOINT_ROOT_ENV,
    CheckpointDirs,
    checkpoint_root,
)


def test_under_the_state_directory_when_pods_run_as_the_control_planes_user(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CHECKPOINT_ROOT_ENV, raising=False)
    assert checkpoint_root(tmp_path, shared=False) == tmp_path / "checkpoints"


def test_outside_the_owner_only_state_directory_for_another_user(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CHECKPOINT_ROOT_ENV, raising=False)
    root = checkpoint_root(tmp_path, shared=True, tag="-abc123")
    assert not root.is_relative_to(tmp_path)
    assert root == Path("/var/tmp") / f"phalanx-checkpoints-{os.getuid()}-abc123"
    monkeypatch.setenv(CHECKPOINT_ROOT_ENV, str(tmp_path / "ckpt"))
    assert checkpoint_root(tmp_path, shared=True, tag="-abc123") == tmp_path / "ckpt"


def test_a_job_directory_of_the_untagged_root_of_earlier_versions_is_moved_in(
        tmp_path: Path) -> None:
    legacy = tmp_path / "legacy"
    (legacy / "train").mkdir(parents=True)
    (legacy / "train" / "model.pt").write_text("weights")
    dirs = CheckpointDirs(tmp_path / "tagged", shared=True, legacy=legacy)
    path = dirs.prepare("train", None)
    assert path == tmp_path / "tagged" / "train"
    assert (path / "model.pt").read_text() == "weights"
    assert not (legacy / "train").exists()
    (legacy / "train").mkdir()  # a job that has its tagged directory keeps it
    assert dirs.prepare("train", None) == path and (legacy / "train").exists()


def test_a_shared_root_is_traversable_but_not_listable(tmp_path: Path) -> None:
    dirs = CheckpointDirs(tmp_path / "root", shared=True)
    path = dirs.prepare("job", None)
    assert (tmp_path / "root").stat().st_mode & 0o777 == 0o711
    assert path.stat().st_mode & 0o777 == 0o700


def test_the_last_save_is_the_newest_entry(tmp_path: Path) -> None:
    dirs = CheckpointDirs(tmp_path)
    assert dirs.last_saved("job") is None  # no directory yet
    path = dirs.prepare("job", None)
    assert dirs.last_saved("job") is None  # nothing saved
    (path / "a").write_text("1")
    (path / "b").write_text("2")
    os.utime(path / "a", (1000, 1000))
    os.utime(path / "b", (2000, 2000))
    assert dirs.last_saved("job") == 2000
    dirs.remove("job")
    assert not path.exists() and dirs.last_saved("job") is None
