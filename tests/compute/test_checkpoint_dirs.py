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
from phalanx.compute.local.users import PodUser


def test_under_the_state_directory_when_pods_run_as_the_control_planes_user(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CHECKPOINT_ROOT_ENV, raising=False)
    me = PodUser(uid=os.getuid(), gid=os.getgid(), groups=(), name=None, home="/")
    assert checkpoint_root(tmp_path, None) == tmp_path / "checkpoints"
    assert checkpoint_root(tmp_path, me) == tmp_path / "checkpoints"


def test_outside_the_owner_only_state_directory_for_another_user(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CHECKPOINT_ROOT_ENV, raising=False)
    other = PodUser(uid=os.getuid() + 1, gid=os.getgid(), groups=(), name=None, home="/")
    root = checkpoint_root(tmp_path, other)
    assert not root.is_relative_to(tmp_path)
    assert root == Path("/var/tmp") / f"phalanx-checkpoints-{os.getuid()}"
    monkeypatch.setenv(CHECKPOINT_ROOT_ENV, str(tmp_path / "ckpt"))
    assert checkpoint_root(tmp_path, other) == tmp_path / "ckpt"


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
