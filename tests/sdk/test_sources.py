"""Packing a workdir (gitignore rules, the size cap, a stable hash) and resolving git refs."""

from __future__ import annotations

import gzip
import io
import os
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from phalanx.errors import SpecError
from phalanx.sdk.sources import HashCache, pack, resolve_commit, stat_signature, workdir_files
from phalanx.spec.sources import WorkdirArchive
from phalanx.store.workdirs import WorkdirStore


def _names(directory: Path) -> list[str]:
    return [name for name, _ in workdir_files(directory)]


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_gitignore_and_phalanxignore_rules_are_honoured_where_they_lie(tmp_path: Path) -> None:
    _tree(tmp_path, {
        ".gitignore": "*.log\n/build/\n!keep.log\n",
        ".phalanxignore": "data/\n",
        "train.py": "", "run.log": "", "keep.log": "", "build/out.o": "",
        "data/big.bin": "", "src/data/small.txt": "",
        "src/.gitignore": "secret.txt\nlocal/\n", "src/secret.txt": "", "src/model.py": "",
        "src/local/x": "", "src/build/kept.txt": "",
        ".git/config": "",
    })
    assert _names(tmp_path) == [
        ".gitignore", ".phalanxignore", "keep.log", "src/.gitignore",
        "src/build/kept.txt",  # /build/ is anchored at the root
        "src/model.py", "train.py",
    ]  # data/ (no slash inside) matches at any depth; .git never goes


def test_the_same_files_pack_to_the_same_hash_and_an_edit_changes_it(tmp_path: Path) -> None:
    _tree(tmp_path, {"a.py": "print(1)\n", "pkg/b.py": "x = 2\n"})
    first = pack(tmp_path)
    (tmp_path / "a.py").touch()  # a new mtime alone changes nothing
    assert pack(tmp_path).sha256 == first.sha256
    (tmp_path / "a.py").write_text("print(2)\n")
    assert pack(tmp_path).sha256 != first.sha256
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(first.data))) as tar:
        assert sorted(tar.getnames()) == ["a.py", "pkg/b.py"]
        assert tar.extractfile("a.py").read() == b"print(1)\n"  # type: ignore[union-attr]


def test_a_directory_over_the_cap_is_refused_naming_its_largest_files(tmp_path: Path) -> None:
    (tmp_path / "weights.pt").write_bytes(b"0" * 3000)
    (tmp_path / "train.py").write_bytes(b"0" * 10)
    with pytest.raises(SpecError) as caught:
        pack(tmp_path, max_bytes=2000)
    assert caught.value.field == "workdir"
    assert "weights.pt" in caught.value.message and ".phalanxignore" in (caught.value.fix or "")
    (tmp_path / ".phalanxignore").write_text("*.pt\n")
    assert pack(tmp_path, max_bytes=2000).files == 2


def test_a_missing_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as caught:
        pack(tmp_path / "nope")
    assert caught.value.field == "workdir"


def test_a_ref_resolves_to_its_commit_in_a_local_and_a_file_url_repository(
        tmp_path: Path) -> None:
    work = tmp_path / "work"
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-C", str(work)]
    subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True)
    (work / "f").write_text("1")
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    subprocess.run([*git, "tag", "-a", "v1", "-m", "v1"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    bare = tmp_path / "repo.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True)
    assert resolve_commit(str(work), "main") == head
    assert resolve_commit(f"file://{bare}", "main") == head
    assert resolve_commit(f"file://{bare}", "v1") == head  # an annotated tag: its commit
    assert resolve_commit("anything", head) == head  # a commit is taken as it is
    with pytest.raises(SpecError) as caught:
        resolve_commit(f"file://{bare}", "no-such-branch")
    assert caught.value.field == "git.ref"


def test_the_stat_signature_moves_with_any_write_even_one_that_keeps_size_and_mtime(
        tmp_path: Path) -> None:
    _tree(tmp_path, {"a.py": "one\n", "notes.log": "x", ".gitignore": "*.log\n"})
    before = stat_signature(tmp_path)
    (tmp_path / "notes.log").write_text("ignored: no change")
    assert stat_signature(tmp_path) == before  # a file the pack leaves out
    info = (tmp_path / "a.py").stat()
    time.sleep(0.01)
    (tmp_path / "a.py").write_text("two\n")  # same size
    os.utime(tmp_path / "a.py", ns=(info.st_atime_ns, info.st_mtime_ns))  # same mtime
    assert stat_signature(tmp_path) != before


def test_the_hash_cache_remembers_the_newest_archives_only(tmp_path: Path) -> None:
    cache = HashCache(tmp_path / "cache.json", keep=2)
    for i in range(3):
        cache.put(f"sig-{i}", WorkdirArchive(sha256=f"{i}" * 64, size=i))
    assert cache.get("sig-0") is None
    found = cache.get("sig-2")
    assert found is not None and found.sha256 == "2" * 64
    assert (tmp_path / "cache.json").stat().st_mode & 0o777 == 0o600


def test_a_store_prunes_the_archives_nothing_needs(tmp_path: Path) -> None:
    store = WorkdirStore(tmp_path / "workdirs")
    kept, dropped = [pack(_tree(tmp_path / name, {"f": name})) for name in ("a", "b")]
    for packed in (kept, dropped):
        store.upload(packed.sha256, 10**6).put([packed.data])
    assert store.prune([kept.sha256]) == [dropped.sha256]
    assert store.has(kept.sha256) and not store.has(dropped.sha256)
    with pytest.raises(SpecError):  # bytes that are not the digest's are not kept
        store.upload(dropped.sha256, 10**6).put([kept.data])
    assert not store.has(dropped.sha256)


def test_a_git_source_with_a_key_is_left_for_the_control_plane_to_resolve(
        tmp_path: Path) -> None:
    """The client cannot read the key, so it does not resolve the ref; without a key it
    does (and a repository that does not exist is refused, naming the field)."""
    from phalanx import Client
    from phalanx.spec.resources import JobSpec

    missing = f"ssh://git.invalid{tmp_path}/none.git"
    spec = JobSpec.model_validate({"name": "k", "git": {
        "repo": missing, "ref": "main", "sshKeySecret": "deploy"},
        "podSets": [{"name": "w", "command": ["true"]}]})
    with Client("http://127.0.0.1:9", token="t") as client:
        assert client.with_sources(spec) is spec  # no git was run for it
        keyless = spec.model_copy(update={"git": spec.git.model_copy(  # type: ignore[union-attr]
            update={"ssh_key_secret": None, "repo": str(tmp_path / "none")})})
        with pytest.raises(SpecError) as caught:
            client.with_sources(keyless)
    assert caught.value.field in ("git.repo", "git.ref")


def test_a_key_is_only_for_a_repository_reached_over_ssh() -> None:
    from phalanx.spec.sources import GitSource

    for repo in ("ssh://git.example/x.git", "git@github.com:acme/vision.git",
                 "git+ssh://h/x"):
        assert GitSource(repo=repo, ssh_key_secret="k").ssh_key_secret == "k"
    for repo in ("https://github.com/acme/vision.git", "/srv/repo.git", "file:///srv/r",
                 "./rel:path"):
        with pytest.raises(ValueError, match="sshKeySecret"):
            GitSource(repo=repo, ssh_key_secret="k")
