"""Kubernetes workload manifests, as their projects document them, run to success on the
local plane: submitted over HTTP, through the SDK and through ``phalanx submit -f``.

One control plane serves the module; the examples go in one request (mixed with a Phalanx
job, all or nothing) and run side by side.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import secrets
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from phalanx import Client
from phalanx.cli.main import app
from tests.e2e.conftest import REPO, ControlPlane, running

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
EXAMPLES = REPO / "examples" / "manifests"
TOGETHER = ["job.yaml", "indexed-job.yaml", "jobset.yaml", "mpijob.yaml"]
runner = CliRunner()


def example(name: str) -> dict[str, Any]:
    """The example, its containers started in the repository: a local pod starts in an
    empty directory of its own, and the examples' commands name the repository's files."""
    document: dict[str, Any] = yaml.safe_load((EXAMPLES / name).read_text())
    _in_repo(document)
    return document


def _in_repo(node: object) -> None:
    if isinstance(node, dict):
        for container in node.get("containers", []):
            container.setdefault("workingDir", str(REPO))
        for value in node.values():
            _in_repo(value)
    elif isinstance(node, list):
        for value in node:
            _in_repo(value)


def example_file(name: str, directory: Path) -> Path:
    """``example(name)`` written to a file of ``directory``, as ``submit -f`` reads it."""
    path = directory / name
    path.write_text(yaml.safe_dump(example(name)))
    return path


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    with running(ControlPlane(tmp_path_factory.mktemp("manifests") / "home")) as cp:
        yield cp


@pytest.fixture(scope="module")
def submitted(plane: ControlPlane) -> list[str]:
    """The examples that need no extra, and a Phalanx job, in one request."""
    items = [example(name) for name in TOGETHER if name != "mpijob.yaml"
             or shutil.which("mpirun")]
    items.append({"name": "own-form", "podSets": [{"command": ["true"],
                                                   "resources": {"cpu": "100m"}}]})
    response = plane.api.post("/v1/manifests", json={"items": items})
    assert response.status_code == 201, response.text
    return [job["name"] for job in response.json()["items"]]


def _succeeds(plane: ControlPlane, name: str, timeout: float = 180) -> str:
    job = plane.wait_for(name, "Succeeded", "Failed", timeout=timeout)
    logs = plane.logs(name)
    assert job["status"] == "Succeeded", logs
    return logs


def test_a_batch_job_runs_its_pods_and_keeps_its_manifest(
        plane: ControlPlane, submitted: list[str]) -> None:
    assert submitted[0] == "hello-job" and "own-form" in submitted
    logs = _succeeds(plane, "hello-job")
    assert sorted(re.findall(r"hello from pod (\d)", logs)) == ["0", "1"]
    detail = plane.job("hello-job")
    assert detail["manifest"]["kind"] == "Job"
    assert detail["manifest"]["spec"]["parallelism"] == 2
    assert any("system failure" in note for note in detail["manifestNotes"])
    assert plane.job("own-form")["manifest"] is None


def test_an_indexed_job_gives_each_pod_its_index(plane: ControlPlane,
                                                 submitted: list[str]) -> None:
    logs = _succeeds(plane, "indexed-job")
    assert sorted(re.findall(r"index (\d)", logs)) == ["0", "1", "2"]
    assert plane.job("indexed-job")["priority"] == 100  # kueue.x-k8s.io/priority-class: high


def test_a_jobset_runs_its_leader_first_and_its_workers(plane: ControlPlane,
                                                        submitted: list[str]) -> None:
    logs = _succeeds(plane, "leader-workers")
    lines = re.findall(r"leader-workers (\w+) job (\d) rank (\d)", logs)
    assert sorted(lines) == [("leader", "0", "0"), ("workers", "0", "1"),
                             ("workers", "1", "2")]


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="OpenMPI is not installed")
def test_an_mpijob_runs_the_allreduce_example(plane: ControlPlane,
                                              submitted: list[str]) -> None:
    logs = _succeeds(plane, "mpi-allreduce-job")
    totals = re.findall(r"rank (\d) of 3 in \S+: allreduce sum = (\d+)", logs)
    assert sorted(totals) == [("0", "6"), ("1", "6"), ("2", "6")]


def test_a_pytorchjob_trains_ddp_with_two_workers_through_the_sdk(
        plane: ControlPlane, submitted: list[str], tmp_path: Path) -> None:
    with Client(home=plane.home) as client:
        record = client.submit(example_file("pytorchjob.yaml", tmp_path))
        assert record.spec.kind.value == "torch"
        assert [p.replicas for p in record.spec.pod_sets] == [2]
    logs = _succeeds(plane, "ddp-pytorchjob", timeout=300)
    assert "done: 2 ranks" in logs, logs


def test_an_appwrapper_of_a_pytorchjob_runs_through_the_cli(
        plane: ControlPlane, submitted: list[str], tmp_path: Path) -> None:
    env = {"PHALANX_HOME": str(plane.home), "PHALANX_URL": None, "PHALANX_TOKEN": None,
           "COLUMNS": "200"}
    manifest = example_file("appwrapper-pytorchjob.yaml", tmp_path)
    result = runner.invoke(app, ["submit", "-f", str(manifest), "--wait"], env=env)
    assert result.exit_code == 0, result.output
    assert "wrapped-ddp" in result.output
    described = runner.invoke(app, ["describe", "wrapped-ddp"], env=env)
    assert described.exit_code == 0, described.output
    assert "workload.codeflare.dev/v1beta2 AppWrapper" in described.output
    assert "recorded, not used" in described.output  # the image, on the local plane
    assert plane.job("wrapped-ddp")["status"] == "Succeeded"
    assert "done: 2 ranks" in plane.logs("wrapped-ddp")


def test_a_rayjob_runs_its_entrypoint_on_its_own_cluster(plane: ControlPlane,
                                                         submitted: list[str]) -> None:
    pytest.importorskip("ray")
    response = plane.api.post("/v1/manifests", json={"items": [example("rayjob.yaml")]})
    assert response.status_code == 201, response.text
    logs = _succeeds(plane, "ray-spread-job", timeout=400)
    assert "cluster of 3 nodes" in logs, logs


# The pod reports what it sees: a digest of the secret's value, never the value itself, and
# whether its emptyDir was empty at the start and takes a file.
SEES = """
import hashlib, json, os
scratch = os.environ["SCRATCH"]
empty = os.listdir(scratch) == []
with open(os.path.join(scratch, "note"), "w") as out:
    out.write("written")
print("SEES " + json.dumps({
    "token": hashlib.sha256(os.environ["HF_TOKEN"].encode()).hexdigest(),
    "empty": empty, "wrote": open(os.path.join(scratch, "note")).read()}), flush=True)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="an emptyDir is mounted in the pod's own "
                    "mount namespace, which needs a control plane running as root")
def test_a_job_manifest_gets_a_secret_as_a_variable_and_an_emptydir(
        plane: ControlPlane, tmp_path: Path) -> None:
    value = f"hf-{secrets.token_hex(12)}"
    created = plane.api.post("/v1/secrets", json={
        "name": "hf-manifest", "data": {"TOKEN": base64.b64encode(value.encode()).decode()}})
    assert created.status_code == 201, created.text
    scratch = tmp_path / "scratch"  # the mountPath: a directory of the machine, left empty
    scratch.mkdir()
    job = example("job.yaml")
    job["metadata"]["name"] = "sees-secret"
    job["spec"].update(parallelism=1, completions=1)
    pod = job["spec"]["template"]["spec"]
    pod["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    container = pod["containers"][0]
    container.update(command=[sys.executable, "-c", SEES], env=[
        {"name": "SCRATCH", "value": str(scratch)},
        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-manifest",
                                                            "key": "TOKEN"}}}],
        volumeMounts=[{"name": "scratch", "mountPath": str(scratch)}])
    del container["args"]
    response = plane.api.post("/v1/manifests", json={"items": [job]})
    assert response.status_code == 201, response.text
    logs = _succeeds(plane, "sees-secret")
    [line] = [x for x in logs.splitlines() if x.startswith("SEES ")]
    assert json.loads(line.removeprefix("SEES ")) == {
        "token": hashlib.sha256(value.encode()).hexdigest(), "empty": True, "wrote": "written"}
    assert list(scratch.iterdir()) == []  # the pod's own directory, not the machine's
    detail = plane.api.get("/v1/jobs/sees-secret").text
    assert value not in detail and value not in logs
    assert "hf-manifest" in detail  # the manifest, as written, names the secret


# --------------------------------------------------------------------------- refusals
def _refused(plane: ControlPlane, items: list[dict[str, Any]]) -> dict[str, Any]:
    response = plane.api.post("/v1/manifests", json={"items": items})
    assert response.status_code == 400, response.text
    error: dict[str, Any] = response.json()["error"]
    return error


def test_a_container_relying_on_its_images_entrypoint_is_refused_here(
        plane: ControlPlane) -> None:
    job = example("job.yaml")
    container = job["spec"]["template"]["spec"]["containers"][0]
    del container["command"], container["args"]
    error = _refused(plane, [job])
    assert error["field"] == "spec.template.spec.containers[0].command", error
    torch = example("pytorchjob.yaml")
    del torch["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0][
        "command"]
    error = _refused(plane, [example("job.yaml"), torch])
    assert error["field"] == ("items[1].spec.pytorchReplicaSpecs.Worker.template.spec"
                              ".containers[0].command"), error
    # All or nothing: the good one of the two was not submitted.
    assert plane.api.get("/v1/jobs/hello-job-2").status_code == 404


def test_checks_at_submit_name_the_manifests_field(plane: ControlPlane) -> None:
    job = example("job.yaml")
    job["metadata"]["name"] = "no-such-queue"
    job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "nowhere"
    error = _refused_any(plane, [job])
    assert error["field"] == 'metadata.labels["kueue.x-k8s.io/queue-name"]', error
    mpi = example("mpijob.yaml")
    del mpi["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0][
        "command"]
    error = _refused(plane, [mpi])
    assert error["field"] == "spec.mpiReplicaSpecs.Launcher.template.spec.containers[0].command"
    ports = example("job.yaml")
    ports["spec"]["template"]["spec"]["containers"][0]["ports"] = [{"containerPort": 8080}]
    assert _refused(plane, [ports])["field"] == "spec.template.spec.containers[0].ports"


def _refused_any(plane: ControlPlane, items: list[dict[str, Any]]) -> dict[str, Any]:
    response = plane.api.post("/v1/manifests", json={"items": items})
    assert 400 <= response.status_code < 500, response.text
    error: dict[str, Any] = response.json()["error"]
    return error


def test_the_examples_are_in_their_projects_shape() -> None:
    for path in sorted(Path(EXAMPLES).glob("*.yaml")):
        document = yaml.safe_load(path.read_text())
        assert {"apiVersion", "kind", "metadata", "spec"} <= set(document), path
