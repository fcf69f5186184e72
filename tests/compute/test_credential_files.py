"""The local plane's per-attempt key files: owner-only, written once, gone with the attempt."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from phalanx.compute.local.credentials import CredentialFiles


def test_a_key_file_is_owner_only_and_written_once(tmp_path: Path) -> None:
    files = CredentialFiles(tmp_path, shared=False)
    path = files.write("train", 2, "phj_key", None)
    assert path == tmp_path / "credentials" / "train.2" / "api-key"
    assert path.read_text() == "phj_key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    inode = path.stat().st_ino
    assert files.write("train", 2, "phj_key", None) == path  # a repeated launch: the same file
    assert path.stat().st_ino == inode
    files.write("train", 3, "phj_next", None)
    files.remove("train", 2)
    assert not path.parent.exists()
    assert (tmp_path / "credentials" / "train.3" / "api-key").read_text() == "phj_next"


def test_pods_of_another_user_get_theirs_outside_the_state_directory(tmp_path: Path) -> None:
    files = CredentialFiles(tmp_path, shared=True, tag="-abc123")
    assert files.root == Path("/var/tmp") / f"phalanx-credentials-{os.getuid()}-abc123"
    assert files.shared
