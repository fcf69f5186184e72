"""A job's code reaches its pods on the local plane: the submitter's directory (``workdir``)
or a git commit, through a real control plane (``phalanx up``) and the real CLI."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml
from typer.testing import CliRunner, Result

from phalanx import Client, Job
from phalanx.cli.main import app
from phalanx.spec.manifests import WORKDIR_ANNOTATION
from tests.sdk.live_server import LiveServer, live_server

__all__ = ["live_server"]

pytestmark = pytest.mark.slow
runner = CliRunner()
UPLOADS = re.compile(r"^phalanx_workdir_uploads_total (\S+)$", re.M)


def cli(server: LiveServer, *args: str, stdin: str | None = None) -> Result:
    env = {"PHALANX_HOME": str(server.home), "PHALANX_URL": None, "PHALANX_TOKEN": None,
           "COLUMNS": "200"}
    return runner.invoke(app, list(args), env=env, input=stdin)


def uploads(server: LiveServer) -> float:
    text = httpx.get(server.url + "/metrics", timeout=10).text
    found = UPLOADS.search(text)
    assert found is not None, text
    return float(found.group(1))


def job_file(where: Path, name: str, code: str, workdir: str | None = ".") -> Path:
    path = where / f"{name}.yaml"
    document: dict[str, object] = {
        "name": name,
        "podSets": [{"resources": {"cpu": "100m"}, "command": [sys.executable, "-c", code]}]}
    if workdir is not None:
        document["workdir"] = workdir
    path.write_text(yaml.safe_dump(document))
    return path


def logs(server: LiveServer, name: str) -> str:
    result = cli(server, "logs", name)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_a_job_reads_its_workdir_and_each_submit_sees_the_files_as_they_were(
        live_server: LiveServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "data.txt").write_text("first\n")
    (project / "big.bin").write_bytes(b"x" * 1000)
    (project / ".gitignore").write_text("*.bin\n")
    read = "import os; print(open('data.txt').read().strip(), os.path.exists('big.bin'))"
    path = job_file(project, "reader", read)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the file's directory is the workdir, not the shell's

    before = uploads(live_server)
    first = cli(live_server, "submit", "-f", str(path), "--wait")
    assert first.exit_code == 0, first.output
    assert logs(live_server, "reader") == "first False\n"  # .gitignore left big.bin out
    assert uploads(live_server) == before + 1
    described = cli(live_server, "describe", "reader")
    assert re.search(r"Code\s+workdir [0-9a-f]{12} \(", described.stdout), described.stdout

    # Unchanged: the same archive, not uploaded again.
    again = cli(live_server, "submit", "-f", str(path), "--unique", "--wait")
    assert again.exit_code == 0, again.output
    second_name = again.stdout.splitlines()[0]
    assert re.fullmatch(r"reader-[a-z0-9]{5}", second_name)
    assert uploads(live_server) == before + 1

    # An edit between two submits: the second job sees it, the first's copy did not change.
    (project / "data.txt").write_text("second\n")
    edited = cli(live_server, "submit", "-f", str(path), "--name", "reader-edited", "--wait")
    assert edited.exit_code == 0, edited.output
    assert logs(live_server, "reader-edited") == "second False\n"
    assert logs(live_server, "reader") == "first False\n"
    assert uploads(live_server) == before + 2


def test_phalanx_run_packs_the_current_directory(
        live_server: LiveServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "hello.txt").write_text("hello from the workdir\n")
    monkeypatch.chdir(tmp_path)
    result = cli(live_server, "run", "--cpus", "100m", "--env", "GREETING=hi", "--wait", "--",
                 sys.executable, "-c",
                 "import os; print(os.environ['GREETING'], open('hello.txt').read().strip())")
    assert result.exit_code == 0, result.output
    name = result.stdout.splitlines()[0]
    assert re.fullmatch(r"python[0-9.]*-[a-z0-9]{5}", name), name
    assert logs(live_server, name) == "hi hello from the workdir\n"


def test_a_pod_without_a_workdir_starts_in_a_fresh_directory_of_its_own(
        live_server: LiveServer, tmp_path: Path) -> None:
    code = "import os; print(os.getcwd()); print(sorted(os.listdir('.')))"
    path = job_file(tmp_path, "where", code, workdir=None)
    result = cli(live_server, "submit", "-f", str(path), "--wait")
    assert result.exit_code == 0, result.output
    cwd, listing = logs(live_server, "where").splitlines()
    # phalanx up ran in its home (live_server's cwd): the pod did not start there.
    assert Path(cwd) != live_server.home and Path(cwd) != Path.cwd()
    assert Path(cwd).name == "where-0" or "where" in Path(cwd).parent.name
    assert listing == "[]"


def test_a_relative_working_dir_is_inside_the_pods_copy(
        live_server: LiveServer, tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("print('training')\n")
    path = tmp_path / "nested.yaml"
    path.write_text(yaml.safe_dump({
        "name": "nested", "workdir": ".",
        "podSets": [{"resources": {"cpu": "100m"}, "workingDir": "src",
                     "command": [sys.executable, "train.py"]}]}))
    result = cli(live_server, "submit", "-f", str(path), "--wait")
    assert result.exit_code == 0, result.output
    assert logs(live_server, "nested") == "training\n"


def test_a_git_commit_is_resolved_at_submit_and_cloned_per_pod(
        live_server: LiveServer, tmp_path: Path) -> None:
    work, bare = tmp_path / "work", tmp_path / "repo.git"
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True)
    (work / "version.txt").write_text("v1\n")
    subprocess.run([*git, "-C", str(work), "add", "."], check=True)
    subprocess.run([*git, "-C", str(work), "commit", "-qm", "v1"], check=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True)
    path = tmp_path / "git.yaml"
    path.write_text(yaml.safe_dump({
        "generateName": "from-git-", "git": {"repo": f"file://{bare}", "ref": "main"},
        "podSets": [{"resources": {"cpu": "100m"}, "command": [
            sys.executable, "-c", "print(open('version.txt').read().strip())"]}]}))
    result = cli(live_server, "submit", "-f", str(path))
    assert result.exit_code == 0, result.output
    name = result.stdout.splitlines()[0]
    # A later push does not change the job: its commit was recorded at submit.
    (work / "version.txt").write_text("v2\n")
    subprocess.run([*git, "-C", str(work), "commit", "-qam", "v2"], check=True)
    subprocess.run(["git", "-C", str(work), "push", "-q", str(bare), "main"], check=True)
    with Client(live_server.url, token=live_server.token) as client:
        record = client.wait(name, timeout=120)
        assert record.status.value == "Succeeded", record
        commit = client.get(name).spec.git
        assert commit is not None and commit.commit is not None and len(commit.commit) == 40
    assert logs(live_server, name) == "v1\n"
    described = cli(live_server, "describe", name).stdout
    assert f"git file://{bare} at {commit.commit[:12]} (main)" in described, described


def test_the_archive_is_refused_to_another_team_as_if_absent(
        live_server: LiveServer, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("team a's code\n")
    with Client(live_server.url, token=live_server.token) as client:
        archive = client.upload_workdir(tmp_path)
    with live_server.client() as http:
        # The state directory's key is the SDK's: the archive is its principal's.
        mine = http.head(f"/v1/workdirs/{archive.sha256}")
        assert mine.status_code == 200
        made = http.put("/v1/teams/wd-other", json={"queues": ["default"]})
        assert made.status_code == 200, made.text
        user = http.post("/v1/users", json={"name": "wd-bob", "teams": ["wd-other"]})
        assert user.status_code in (200, 201), user.text
        key = http.post("/v1/keys", json={"user": "wd-bob"})
        assert key.status_code == 201, key.text
    with httpx.Client(base_url=live_server.url, timeout=10) as raw:
        token = raw.post("/v1/auth/token", json={"key": key.json()["key"]}).json()["token"]
        headers = {"Authorization": f"Bearer {token}"}
        absent = "0" * 64
        answers = []
        for digest in (archive.sha256, absent):
            job = {"name": f"bob-{digest[:6]}", "workdir": {"sha256": digest},
                   "podSets": [{"command": ["true"]}]}
            answers.append([raw.head(f"/v1/workdirs/{digest}", headers=headers),
                            raw.get(f"/v1/workdirs/{digest}", headers=headers),
                            raw.post("/v1/jobs", json=job, headers=headers)])
        held, missing = answers
        # Held by another team or held by nobody: the same answers, but for the digest.
        for seen, unseen in zip(held, missing, strict=True):
            assert seen.status_code == unseen.status_code == 404
            assert seen.text.replace(archive.sha256[:12], "X") \
                == unseen.text.replace(absent[:12], "X")
        assert b"team a" not in held[1].content


def test_submit_reads_standard_input_and_overrides_its_fields(
        live_server: LiveServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "msg.txt").write_text("from stdin\n")
    monkeypatch.chdir(tmp_path)  # standard input has no directory: the workdir is the cwd's
    document = yaml.safe_dump({"name": "stdin-job", "workdir": ".", "podSets": [
        {"resources": {"cpu": "100m"}, "command": ["false"]}]})
    code = "import os; print(open('msg.txt').read().strip(), os.environ['X'])"
    result = cli(live_server, "submit", "-f", "-", "--env", "X=42", "--wait",
                 "--set", f'podSets[0].command=[{sys.executable}, -c, "{code}"]',
                 stdin=document)
    assert result.exit_code == 0, result.output
    assert logs(live_server, "stdin-job") == "from stdin 42\n"
    refused = cli(live_server, "submit", "-f", "-", "--set", "podSets[0].replica=2",
                  stdin=document)
    assert refused.exit_code != 0 and "podSets[0].replica" in refused.output


def test_the_sdks_builder_takes_a_workdir(live_server: LiveServer, tmp_path: Path) -> None:
    (tmp_path / "sdk.txt").write_text("built\n")
    job = Job("built", queue="default").workdir(tmp_path).pod_set(
        command=[sys.executable, "-c", "print(open('sdk.txt').read().strip())"],
        resources={"cpu": "100m"})
    with Client(live_server.url, token=live_server.token) as client:
        record = client.submit(job)
        assert record.spec.workdir is not None and not isinstance(record.spec.workdir, str)
        assert client.wait("built", timeout=120).status.value == "Succeeded"
    assert logs(live_server, "built") == "built\n"


def _manifest(name: str, code: str, annotations: dict[str, str] | None = None,
              ) -> dict[str, object]:
    metadata: dict[str, object] = {"name": name}
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": {
        "template": {"spec": {"restartPolicy": "Never", "containers": [{
            "name": "main", "command": [sys.executable, "-c", code],
            "resources": {"requests": {"cpu": "100m"}}}]}}}}


def test_a_manifest_runs_in_the_directory_submit_or_its_annotation_names(
        live_server: LiveServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    (project / "code").mkdir(parents=True)
    elsewhere.mkdir()
    (project / "code" / "data.txt").write_text("manifest code\n")
    read = "print(open('data.txt').read().strip())"
    path = project / "job.yaml"
    path.write_text(yaml.safe_dump(_manifest("manifest-wd", read)))
    monkeypatch.chdir(project)
    result = cli(live_server, "submit", "-f", str(path), "--workdir", "code", "--wait")
    assert result.exit_code == 0, result.output
    assert logs(live_server, "manifest-wd") == "manifest code\n"
    with Client(live_server.url, token=live_server.token) as client:
        detail = client.get("manifest-wd")
    assert detail.spec.workdir is not None and not isinstance(detail.spec.workdir, str)
    kept = detail.manifest
    assert kept is not None
    assert json.loads(kept["metadata"]["annotations"][WORKDIR_ANNOTATION])["sha256"] == \
        detail.spec.workdir.sha256  # the manifest kept says which code ran

    # The same option gives a Phalanx job its workdir.
    plain = job_file(elsewhere, "plain-wd", read, workdir=None)
    result = cli(live_server, "submit", "-f", str(plain), "--workdir", "code", "--wait")
    assert result.exit_code == 0, result.output
    assert logs(live_server, "plain-wd") == "manifest code\n"

    # The annotation in the file: relative to the file's directory, from anywhere.
    path.write_text(yaml.safe_dump(_manifest("manifest-annotated", read,
                                             {WORKDIR_ANNOTATION: "code"})))
    monkeypatch.chdir(elsewhere)
    result = cli(live_server, "submit", "-f", str(path), "--wait")
    assert result.exit_code == 0, result.output
    assert logs(live_server, "manifest-annotated") == "manifest code\n"

    # A path sent as it is (not through the CLI or SDK) is refused, naming the annotation.
    with live_server.client() as http:
        refused = http.post("/v1/manifests", json={"items": [_manifest(
            "manifest-path", read, {WORKDIR_ANNOTATION: "/somewhere"})]})
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["field"] == f'metadata.annotations["{WORKDIR_ANNOTATION}"]'
    missing = cli(live_server, "submit", "-f", str(path), "--workdir", "nowhere")
    assert missing.exit_code != 0
    assert f'metadata.annotations["{WORKDIR_ANNOTATION}"]' in missing.output, missing.output
