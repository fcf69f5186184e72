"""Kubernetes workload manifests translated into jobs: what each field becomes, and every
refusal naming the manifest's field."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from phalanx.errors import SpecError
from phalanx.spec.manifests import (
    WORKDIR_ANNOTATION,
    Translation,
    load_submissions,
    translate,
    with_overrides,
)
from phalanx.spec.resources import JobKind
from phalanx.spec.sources import WorkdirArchive

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "manifests"


def example(name: str) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((EXAMPLES / name).read_text())
    return document


def test_every_example_translates() -> None:
    kinds = {}
    for path in sorted(EXAMPLES.glob("*.yaml")):
        [item] = load_submissions(path.read_text(), str(path))
        assert isinstance(item, Translation)
        kinds[path.name] = item.spec.kind
    assert kinds == {
        "appwrapper-pytorchjob.yaml": JobKind.TORCH, "indexed-job.yaml": JobKind.GENERIC,
        "job.yaml": JobKind.GENERIC, "jobset.yaml": JobKind.GENERIC,
        "mpijob.yaml": JobKind.MPI, "pytorchjob.yaml": JobKind.TORCH,
        "raycluster.yaml": JobKind.RAY, "rayjob.yaml": JobKind.RAY,
    }


def test_a_batch_job_becomes_one_gang_with_its_budget_queue_and_deadline() -> None:
    made = translate(example("job.yaml"))
    spec = made.spec
    assert spec.name == "hello-job" and spec.queue == "default"
    assert spec.max_runtime == 600 and spec.restart.max_restarts == 2
    [pod_set] = spec.pod_sets
    assert pod_set.replicas == 2 and pod_set.image == "python:3.12-slim"
    assert pod_set.command[:2] == ["python", "-c"]  # command then args
    assert pod_set.resources == {"cpu": 100, "memory": 64 * 2**20 * 1000}  # milli-units
    assert any("DisruptionTarget" not in n and "system failure" in n for n in made.notes)
    assert spec.labels["kueue.x-k8s.io/queue-name"] == "default"


def test_an_indexed_job_gets_its_completion_index_and_priority() -> None:
    spec = translate(example("indexed-job.yaml")).spec
    assert spec.priority == "high"
    [pod_set] = spec.pod_sets
    assert pod_set.command[:2] == ["/bin/sh", "-c"]
    assert 'JOB_COMPLETION_INDEX="$PHALANX_POD_INDEX"' in pod_set.command[2]
    assert pod_set.command[4:] == ["python", "-c",
                                   "import os; print('index', os.environ['JOB_COMPLETION_INDEX'])"]
    assert pod_set.env == {"PYTHONUNBUFFERED": "1"}


def test_a_jobset_puts_its_leader_first_and_restarts_as_a_whole() -> None:
    spec = translate(example("jobset.yaml")).spec
    assert [(p.name, p.replicas) for p in spec.pod_sets] == [("leader", 1), ("workers", 2)]
    assert spec.restart.max_restarts == 1
    assert spec.pod_sets[1].env == {"JOBSET_NAME": "leader-workers",
                                    "REPLICATED_JOB_NAME": "workers"}


def test_a_pytorchjob_runs_as_torch_with_nproc_per_node() -> None:
    spec = translate(example("pytorchjob.yaml")).spec
    assert spec.kind is JobKind.TORCH and spec.restart.max_restarts == 1
    [worker] = spec.pod_sets
    assert worker.replicas == 2
    assert worker.env["NPROC_PER_NODE"] == worker.env["PET_NPROC_PER_NODE"] == "1"


def test_an_mpijob_drops_the_workers_sshd_and_gives_them_their_slots() -> None:
    spec = translate(example("mpijob.yaml")).spec
    launcher, worker = spec.pod_sets
    assert (launcher.name, worker.name) == ("launcher", "worker")
    assert launcher.command[0] == "mpirun" and worker.command == []
    assert worker.env["NPROC_PER_NODE"] == "1" and worker.replicas == 3


def test_a_rayjob_brings_its_entrypoint_and_groups() -> None:
    spec = translate(example("rayjob.yaml")).spec
    assert spec.kind is JobKind.RAY and spec.ray is not None
    assert spec.ray.entrypoint == "python examples/ray_spread.py"
    assert [(p.name, p.replicas) for p in spec.pod_sets] == [("head", 1), ("small-group", 2)]
    assert spec.pod_sets[0].resources["cpu"] == 500  # limits only: the request is the limit


def test_an_appwrapper_takes_its_own_metadata() -> None:
    wrapper = example("appwrapper-pytorchjob.yaml")
    wrapper["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "team-a"
    wrapper["spec"]["components"][0]["template"]["metadata"]["labels"] = {
        "kueue.x-k8s.io/queue-name": "ignored"}
    spec = translate(wrapper).spec
    assert spec.name == "wrapped-ddp" and spec.queue == "team-a"
    assert [p.name for p in spec.pod_sets] == ["master", "worker"]


def test_fields_kubernetes_sets_are_ignored_and_left_out_of_the_stored_manifest() -> None:
    document = example("job.yaml")
    document["metadata"].update(uid="abc", resourceVersion="7",
                                creationTimestamp="2026-01-01T00:00:00Z", managedFields=[])
    document["status"] = {"succeeded": 2}
    made = translate(document)
    assert "status" not in made.manifest and "uid" not in made.manifest["metadata"]
    assert made.spec.name == "hello-job"


def test_overrides_rewrite_the_manifest_that_is_kept() -> None:
    document = with_overrides(example("job.yaml"), name="other", queue="q2", priority="high")
    spec = translate(document).spec
    assert (spec.name, spec.queue, spec.priority) == ("other", "q2", "high")
    assert document["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "q2"


def test_an_error_about_the_job_names_the_manifests_field() -> None:
    made = translate(example("pytorchjob.yaml"))
    exc = made.error_at_manifest(SpecError("no command", field="podSets[0].command"))
    assert exc.field == ("spec.pytorchReplicaSpecs.Worker.template.spec.containers[0]"
                         ".command")
    assert made.draft.manifest_path("queue") == (
        'metadata.labels["kueue.x-k8s.io/queue-name"]')
    assert made.draft.manifest_path("podSets[0].resources.cpu") == (
        "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].resources.requests.cpu")


def test_a_document_set_mixes_manifests_and_phalanx_jobs() -> None:
    text = (EXAMPLES / "job.yaml").read_text() + "\n---\nname: own\npodSets: [{command: [x]}]\n"
    items = load_submissions(text, "mixed.yaml")
    assert isinstance(items[0], Translation) and not isinstance(items[1], Translation)
    with pytest.raises(SpecError) as caught:
        load_submissions(text.replace("parallelism: 2", "parallelism: 2\n  foo: 1"), "m.yaml")
    assert caught.value.field == "m.yaml[0].spec.foo"


# --------------------------------------------------------------------------- refusals
def _set(document: dict[str, Any], path: str, value: Any) -> None:
    """Set ``a.b[0].c`` in ``document`` (creating mappings on the way)."""
    parts = path.replace("[", ".[").split(".")
    node: Any = document
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        key: Any = int(part[1:-1]) if part.startswith("[") else part
        if last and isinstance(node, list) and key == len(node):
            node.append(value)
        elif last:
            node[key] = value
        else:
            if isinstance(key, str) and key not in node:
                node[key] = {}
            node = node[key]


JOB_POD = "spec.template.spec"
JOB_C = f"{JOB_POD}.containers[0]"
TORCH_C = "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0]"
MPI_W = "spec.mpiReplicaSpecs.Worker.template.spec.containers[0]"
RAY_HEAD = "spec.rayClusterSpec.headGroupSpec"
JOBSET = "spec.replicatedJobs[0]"
WRAPPED = "spec.components[0].template"

# (example, path to set, value, the field the refusal names, words in its fix)
REFUSALS: list[tuple[str, str, Any, str, str]] = [
    ("job.yaml", f"{JOB_C}.ports", [{"containerPort": 80}], f"{JOB_C}.ports", "assigns"),
    # volumes and mounts
    ("job.yaml", f"{JOB_POD}.volumes", [{"name": "v", "emptyDir": {}},
                                        {"name": "w", "csi": {"driver": "x"}}],
     f"{JOB_POD}.volumes[1].csi", "persistentVolumeClaim"),
    ("job.yaml", f"{JOB_POD}.volumes", [{"name": "v", "downwardAPI": {}}],
     f"{JOB_POD}.volumes[0].downwardAPI", "PHALANX_POD_NAME"),
    ("job.yaml", f"{JOB_POD}.volumes", [{"name": "v", "emptyDir": {}},
                                        {"name": "v", "emptyDir": {}}],
     f"{JOB_POD}.volumes[1].name", "its own name"),
    ("job.yaml", f"{JOB_POD}.volumes", [{"name": "v", "secret": {"secretName": "s",
                                                                 "items": []}}],
     f"{JOB_POD}.volumes[0].secret.items", "subPath names one key"),
    ("job.yaml", f"{JOB_POD}.volumes", [{"name": "v", "hostPath": {"path": "/d",
                                                                   "readOnly": True}}],
     f"{JOB_POD}.volumes[0].hostPath.readOnly", "hostPath takes path, type"),
    ("job.yaml", f"{JOB_C}.volumeMounts", [{"name": "nope", "mountPath": "/d"}],
     f"{JOB_C}.volumeMounts[0].name", "add it to the pod's volumes"),
    ("job.yaml", f"{JOB_C}.volumeMounts", [{"name": "v"}], f"{JOB_C}.volumeMounts[0].name",
     "add it"),  # no volumes: the name is checked first
    # env from secrets, fields and resources
    ("job.yaml", f"{JOB_C}.envFrom", [{"configMapRef": {"name": "c"}}],
     f"{JOB_C}.envFrom[0].configMapRef", "phalanx secrets create"),
    ("job.yaml", f"{JOB_C}.envFrom", [{"prefix": "X_", "secretRef": {"name": "s"}}],
     f"{JOB_C}.envFrom[0].prefix", "remove prefix"),
    ("job.yaml", f"{JOB_C}.envFrom", [{"secretRef": {"name": "s", "optional": True}}],
     f"{JOB_C}.envFrom[0].secretRef.optional", "must exist"),
    ("job.yaml", f"{JOB_C}.env", [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "s"}}}],
     f"{JOB_C}.env[0].valueFrom.secretKeyRef.key", "name the secret's key"),
    ("job.yaml", f"{JOB_C}.env", [{"name": "T", "valueFrom": {"configMapKeyRef": {}}}],
     f"{JOB_C}.env[0].valueFrom.configMapKeyRef", "secretKeyRef"),
    ("job.yaml", f"{JOB_C}.env", [{"name": "T", "valueFrom": {"fieldRef": {
        "fieldPath": "status.podIP"}}}],
     f"{JOB_C}.env[0].valueFrom.fieldRef.fieldPath", "PHALANX_NODE_IPS"),
    ("job.yaml", f"{JOB_C}.env", [{"name": "T", "value": "x", "valueFrom": {"fieldRef": {
        "fieldPath": "metadata.name"}}}], f"{JOB_C}.env[0].value", "not both"),
    ("job.yaml", f"{JOB_C}.env", [{"name": "T", "valueFrom": {"resourceFieldRef": {
        "resource": "limits.nvidia.com/gpu"}}}],
     f"{JOB_C}.env[0].valueFrom.resourceFieldRef.resource", "limits.cpu"),
    ("job.yaml", f"{JOB_C}.env", [{"name": "T", "valueFrom": {"resourceFieldRef": {
        "resource": "limits.ephemeral-storage"}}}],
     f"{JOB_C}.env[0].valueFrom.resourceFieldRef.resource", "ephemeral-storage request"),
    ("rayjob.yaml", f"{RAY_HEAD}.template.spec.containers[0].env", [{
        "name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
     f"{RAY_HEAD}.template.spec.containers[0].env[0].valueFrom.fieldRef.fieldPath",
     "PHALANX_POD_NAME"),
    ("job.yaml", f"{JOB_POD}.imagePullSecrets", [{}], f"{JOB_POD}.imagePullSecrets[0].name",
     "docker secret"),
    # security contexts: whom a pod runs as is the plane's
    ("job.yaml", f"{JOB_C}.securityContext", {"runAsUser": 1000},
     f"{JOB_C}.securityContext.runAsUser", "--run-as-user"),
    ("job.yaml", f"{JOB_POD}.securityContext", {"fsGroup": 100},
     f"{JOB_POD}.securityContext.fsGroup", "compute plane's"),
    ("pytorchjob.yaml", f"{TORCH_C}.securityContext", {"capabilities": {"add": ["IPC_LOCK"]}},
     f"{TORCH_C}.securityContext.capabilities", "compute plane's"),
    ("job.yaml", f"{JOB_C}.env", [{"name": "T", "valueFrom": {"fieldRef": {}}}],
     f"{JOB_C}.env[0].valueFrom.fieldRef.fieldPath", "PHALANX_POD_NAME"),
    ("job.yaml", f"{JOB_POD}.affinity", {}, f"{JOB_POD}.affinity", "nodeSelector"),
    ("job.yaml", f"{JOB_POD}.initContainers", [], f"{JOB_POD}.initContainers", "one container"),
    ("job.yaml", f"{JOB_POD}.containers[1]", {"name": "side"}, f"{JOB_POD}.containers[1]",
     "sidecars"),
    ("job.yaml", f"{JOB_C}.livenessProbe", {}, f"{JOB_C}.livenessProbe", "process"),
    ("job.yaml", "spec.completions", 5, "spec.completions", "set completions to 2"),
    ("job.yaml", "spec.completionMode", "Sometimes", "spec.completionMode", "Indexed"),
    ("job.yaml", "spec.suspend", True, "spec.suspend", "waits in its queue"),
    ("job.yaml", "spec.backoffLimitPerIndex", 1, "spec.backoffLimitPerIndex", "remove it"),
    ("job.yaml", "spec.podFailurePolicy.rules[0].action", "FailJob",
     "spec.podFailurePolicy.rules[0].action", "Ignore"),
    ("job.yaml", "spec.podFailurePolicy.rules[0].onExitCodes", {"values": [3]},
     "spec.podFailurePolicy.rules[0].onExitCodes", "backoffLimit"),
    ("jobset.yaml", f"{JOBSET}.replicas", 0, f"{JOBSET}.replicas", "1 or more"),
    ("job.yaml", "metadata.name", "Not_A_Name", "metadata.name", ""),
    ("job.yaml", "metadata.labels", {"kueue.x-k8s.io/queue-name": "-bad-"},
     'metadata.labels["kueue.x-k8s.io/queue-name"]', ""),
    ("job.yaml", f"{JOB_C}.resources.requests.cpu", "lots",
     f"{JOB_C}.resources.requests.cpu", ""),
    ("job.yaml", f"{JOB_C}.command", None, f"{JOB_C}.args", "give command too"),
    ("job.yaml", "spec.foo", 1, "spec.foo", "docs/manifests.md"),
    ("job.yaml", "kind", "CronJob", "kind", "batch/v1 Job"),
    ("jobset.yaml", "spec.successPolicy", {"operator": "Any"}, "spec.successPolicy",
     "all its pods"),
    ("jobset.yaml", "spec.network", {"enableDNSHostnames": True}, "spec.network",
     "PHALANX_NODE_IPS"),
    ("jobset.yaml", "spec.failurePolicy.rules", [], "spec.failurePolicy.rules", "remove it"),
    ("jobset.yaml", "spec.coordinator", {"replicatedJob": "nope"},
     "spec.coordinator.replicatedJob", "workers"),
    ("jobset.yaml", f"{JOBSET}.template.spec.template.spec.containers[0].ports", [],
     f"{JOBSET}.template.spec.template.spec.containers[0].ports", "assigns"),
    ("pytorchjob.yaml", f"{TORCH_C}.ports", [{"containerPort": 23456}], f"{TORCH_C}.ports",
     "MASTER_PORT"),
    ("pytorchjob.yaml", "spec.elasticPolicy", {"minReplicas": 1, "maxReplicas": 4},
     "spec.elasticPolicy", "fixed size"),
    ("pytorchjob.yaml", "spec.pytorchReplicaSpecs.Chief", {}, "spec.pytorchReplicaSpecs.Chief",
     "Master and Worker"),
    ("pytorchjob.yaml", "spec.pytorchReplicaSpecs.Master", {"replicas": 2, "template": {}},
     "spec.pytorchReplicaSpecs.Master.replicas", "to 1"),
    ("pytorchjob.yaml", "spec.runPolicy.schedulingPolicy", {"minAvailable": 1},
     "spec.runPolicy.schedulingPolicy.minAvailable", "set it to 2"),
    ("mpijob.yaml", f"{MPI_W}.command", ["python", "w.py"], f"{MPI_W}.command", "mpirun"),
    ("mpijob.yaml", "spec.mpiImplementation", "Intel", "spec.mpiImplementation", "OpenMPI"),
    ("rayjob.yaml", "spec.shutdownAfterJobFinishes", False, "spec.shutdownAfterJobFinishes",
     "RayCluster"),
    ("rayjob.yaml", "spec.submissionMode", "InteractiveMode", "spec.submissionMode",
     "K8sJobMode"),
    ("rayjob.yaml", "spec.clusterSelector", {"a": "b"}, "spec.clusterSelector", "remove it"),
    ("rayjob.yaml", "spec.rayClusterSpec.enableInTreeAutoscaling", True,
     "spec.rayClusterSpec.enableInTreeAutoscaling", "fixed size"),
    ("rayjob.yaml", f"{RAY_HEAD}.rayStartParams.num-cpus", "4",
     f"{RAY_HEAD}.rayStartParams.num-cpus", "resources"),
    ("rayjob.yaml", f"{RAY_HEAD}.template.spec.containers[0].command", ["ray", "start"],
     f"{RAY_HEAD}.template.spec.containers[0].command", "entrypoint"),
    ("rayjob.yaml", "spec.entrypoint", None, "spec.entrypoint", "RayCluster"),
    ("appwrapper-pytorchjob.yaml", "spec.components[1]", {"template": {}},
     "spec.components[1]", "AppWrapper"),
    ("appwrapper-pytorchjob.yaml",
     f"{WRAPPED}.spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].ports", [],
     f"{WRAPPED}.spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].ports", "assigns"),
    ("appwrapper-pytorchjob.yaml", f"{WRAPPED}.kind", "Deployment", f"{WRAPPED}.kind",
     "kubeflow.org/v1 PyTorchJob"),
]


@pytest.mark.parametrize(("name", "path", "value", "field", "fix"), REFUSALS,
                         ids=[f"{r[0]}:{r[1]}" for r in REFUSALS])
def test_a_refusal_names_the_manifests_field(name: str, path: str, value: Any, field: str,
                                             fix: str) -> None:
    document = copy.deepcopy(example(name))
    _set(document, path, value)
    with pytest.raises(SpecError) as caught:
        translate(document)
    assert caught.value.field == field, caught.value
    assert fix in (caught.value.fix or "") + caught.value.message, caught.value


def test_a_refusal_in_a_file_names_the_document() -> None:
    text = (EXAMPLES / "pytorchjob.yaml").read_text().replace(
        "imagePullPolicy: IfNotPresent", "imagePullPolicy: IfNotPresent\n"
        "              ports: [{containerPort: 23456}]")
    with pytest.raises(SpecError) as caught:
        load_submissions(text, "torch.yaml")
    assert caught.value.field == f"torch.yaml[0].{TORCH_C}.ports"


def test_a_wrapped_workload_may_leave_its_name_to_the_appwrapper() -> None:
    wrapper = example("appwrapper-pytorchjob.yaml")
    del wrapper["spec"]["components"][0]["template"]["metadata"]
    made = translate(wrapper)
    assert made.spec.name == "wrapped-ddp"
    assert "metadata" not in made.manifest["spec"]["components"][0]["template"]  # as sent


def test_a_wrong_type_names_the_field_and_the_type_wanted() -> None:
    document = example("pytorchjob.yaml")
    document["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = "two"
    with pytest.raises(SpecError) as caught:
        translate(document)
    assert caught.value.field == "spec.pytorchReplicaSpecs.Worker.replicas"
    assert caught.value.message == "must be an integer, not str"


def test_an_mpijob_notes_that_the_workers_sshd_is_not_run() -> None:
    notes = translate(example("mpijob.yaml")).notes
    assert notes == ["spec.mpiReplicaSpecs.Worker.template.spec.containers[0].command: sshd "
                     "is not run: Phalanx starts the ranks in the workers itself"]


# --------------------------------------------------------------------------- volumes, secrets
def _job_pod(document: dict[str, Any]) -> dict[str, Any]:
    pod: dict[str, Any] = document["spec"]["template"]["spec"]
    return pod


def test_a_pods_volumes_and_mounts_become_the_jobs_volumes_and_the_pod_sets_mounts() -> None:
    document = example("job.yaml")
    pod = _job_pod(document)
    pod["volumes"] = [
        {"name": "scratch", "emptyDir": {}},
        {"name": "data", "hostPath": {"path": "/datasets", "type": "Directory"}},
        {"name": "ckpt", "persistentVolumeClaim": {"claimName": "team-a-ckpt"}},
        {"name": "conf", "configMap": {"name": "train-conf", "items": [
            {"key": "a.yaml", "path": "a.yaml"}]}},
        {"name": "creds", "secret": {"secretName": "gcs"}},
        {"name": "shared", "nfs": {"server": "nfs.example.com", "path": "/exports"}},
    ]
    pod["containers"][0]["volumeMounts"] = [
        {"name": "scratch", "mountPath": "/scratch", "subPath": "tmp"},
        {"name": "data", "mountPath": "/mnt/data", "readOnly": True},
        {"name": "ckpt", "mountPath": "/ckpt", "mountPropagation": "None"},
        {"name": "conf", "mountPath": "/etc/conf"},
        {"name": "creds", "mountPath": "/etc/gcs"},
        {"name": "shared", "mountPath": "/shared"},
    ]
    spec = translate(document).spec
    assert [(v.name, v.kind) for v in spec.volumes] == [
        ("scratch", "emptyDir"), ("data", "hostPath"), ("ckpt", "persistentVolumeClaim"),
        ("conf", "configMap"), ("creds", "secret"), ("shared", "nfs")]
    assert spec.volumes[1].to_kubernetes() == pod["volumes"][1]
    assert spec.volumes[3].to_kubernetes() == pod["volumes"][3]
    [pod_set] = spec.pod_sets
    mounts = [(m.name, m.mount_path, m.sub_path, m.read_only) for m in pod_set.mounts]
    assert mounts == [("scratch", "/scratch", "tmp", False), ("data", "/mnt/data", "", True),
                      ("ckpt", "/ckpt", "", False), ("conf", "/etc/conf", "", False),
                      ("creds", "/etc/gcs", "", False), ("shared", "/shared", "", False)]
    assert pod_set.shm is None


def test_a_memory_emptydir_at_dev_shm_becomes_shm_and_an_unmounted_volume_is_left_out() -> None:
    document = example("job.yaml")
    pod = _job_pod(document)
    pod["volumes"] = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}},
                      {"name": "unused", "emptyDir": {}}]
    pod["containers"][0]["volumeMounts"] = [{"name": "dshm", "mountPath": "/dev/shm"}]
    made = translate(document)
    [pod_set] = made.spec.pod_sets
    assert pod_set.shm == 2 * 2**30 * 1000 and pod_set.mounts == []  # milli-units
    assert made.spec.volumes == []
    assert made.notes[-1] == (f"{JOB_POD}.volumes[1]: mounted by no container: left out")
    # Without a sizeLimit it stays a volume: each plane sizes it as Kubernetes does.
    del pod["volumes"][0]["emptyDir"]["sizeLimit"]
    spec = translate(document).spec
    assert spec.pod_sets[0].shm is None
    assert [(m.name, m.mount_path) for m in spec.pod_sets[0].mounts] == [("dshm", "/dev/shm")]
    assert spec.volumes[0].empty_dir is not None
    assert spec.volumes[0].empty_dir.medium == "Memory"


def _torch_with_master(master_volumes: list[dict[str, Any]],
                       worker_volumes: list[dict[str, Any]]) -> dict[str, Any]:
    document = example("pytorchjob.yaml")
    specs = document["spec"]["pytorchReplicaSpecs"]
    specs["Master"] = copy.deepcopy(specs["Worker"])
    specs["Master"]["replicas"] = 1
    for role, volumes in (("Master", master_volumes), ("Worker", worker_volumes)):
        pod = specs[role]["template"]["spec"]
        pod["volumes"] = volumes
        pod["containers"][0]["volumeMounts"] = [{"name": v["name"], "mountPath": "/data"}
                                                for v in volumes]
    return document


def test_templates_share_a_volume_by_name_and_refuse_one_name_for_two_volumes() -> None:
    data = {"name": "data", "hostPath": {"path": "/datasets"}}
    spec = translate(_torch_with_master([data], [copy.deepcopy(data)])).spec
    assert [v.name for v in spec.volumes] == ["data"]
    assert [[m.name for m in p.mounts] for p in spec.pod_sets] == [["data"], ["data"]]
    other = {"name": "data", "hostPath": {"path": "/elsewhere"}}
    with pytest.raises(SpecError) as caught:
        translate(_torch_with_master([data], [other]))
    assert caught.value.field == "spec.pytorchReplicaSpecs.Worker.template.spec.volumes[0]"
    assert "spec.pytorchReplicaSpecs.Master.template.spec.volumes[0]" in caught.value.message
    # Two sizes of /dev/shm are two pod sets' own shm, not one volume.
    shm = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": size}}
           for size in ("1Gi", "4Gi")]
    document = _torch_with_master([shm[0]], [shm[1]])
    for role in ("Master", "Worker"):
        document["spec"]["pytorchReplicaSpecs"][role]["template"]["spec"]["containers"][0][
            "volumeMounts"][0]["mountPath"] = "/dev/shm"
    spec = translate(document).spec
    assert [p.shm for p in spec.pod_sets] == [2**30 * 1000, 4 * 2**30 * 1000]


def test_a_jobsets_replicated_jobs_refuse_one_name_for_two_volumes() -> None:
    document = example("jobset.yaml")
    for i, path in enumerate(("/a", "/b")):
        pod = document["spec"]["replicatedJobs"][i]["template"]["spec"]["template"]["spec"]
        pod["volumes"] = [{"name": "data", "hostPath": {"path": path}}]
        pod["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    with pytest.raises(SpecError) as caught:
        translate(document)
    # The leader is read first, so the workers' definition is the second one.
    assert caught.value.field == f"{JOBSET}.template.spec.template.spec.volumes[0]"


def test_secrets_reach_the_pod_set_as_secret_env_env_from_and_pull_secrets() -> None:
    document = example("job.yaml")
    pod = _job_pod(document)
    pod["imagePullSecrets"] = [{"name": "registry"}]
    container = pod["containers"][0]
    container["env"] = [
        {"name": "EPOCHS", "value": "3"},
        {"name": "HF", "valueFrom": {"secretKeyRef": {"name": "team-a/hf", "key": "HF_TOKEN",
                                                      "optional": False}}}]
    container["envFrom"] = [{"secretRef": {"name": "wandb"}}]
    [pod_set] = translate(document).spec.pod_sets
    assert pod_set.env == {"EPOCHS": "3"}
    [var] = pod_set.secret_env
    assert (var.name, var.value_from.secret_key_ref.name,
            var.value_from.secret_key_ref.key) == ("HF", "team-a/hf", "HF_TOKEN")
    assert [e.secret for e in pod_set.env_from] == ["wandb"]
    assert [s.name for s in pod_set.image_pull_secrets] == ["registry"]


def test_an_error_about_a_secret_or_a_mount_names_the_manifests_field() -> None:
    document = example("job.yaml")
    container = _job_pod(document)["containers"][0]
    container["env"] = [{"name": "A", "value": "1"}, {"name": "B", "valueFrom": {
        "secretKeyRef": {"name": "Not_A_Secret", "key": "k"}}}]
    with pytest.raises(SpecError) as caught:
        translate(document)
    assert caught.value.field == f"{JOB_C}.env[1].valueFrom.secretKeyRef.name"
    made = translate(example("job.yaml"))
    assert made.draft.manifest_path("podSets[0]") == "spec.template"
    document = example("job.yaml")
    _job_pod(document)["volumes"] = [{"name": "data", "hostPath": {"path": "relative"}}]
    container = _job_pod(document)["containers"][0]
    container["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    with pytest.raises(SpecError) as caught:
        translate(document)
    assert caught.value.field == f"{JOB_POD}.volumes[0].hostPath.path"
    container["volumeMounts"].append({"name": "data", "mountPath": "/data"})
    with pytest.raises(SpecError) as caught:
        translate(document)
    assert caught.value.field == f"{JOB_C}.volumeMounts", caught.value


def test_the_pods_name_and_its_resources_become_variables() -> None:
    document = example("job.yaml")
    container = _job_pod(document)["containers"][0]
    container["env"] = [
        {"name": "MY_POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name",
                                                      "apiVersion": "v1"}}},
        {"name": "MEM_MB", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory",
                                                              "divisor": "1Mi"}}},
        {"name": "CPUS", "valueFrom": {"resourceFieldRef": {"containerName": "hello",
                                                            "resource": "requests.cpu"}}},
        {"name": "MILLICPUS", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu",
                                                                 "divisor": "1m"}}}]
    [pod_set] = translate(document).spec.pod_sets
    assert pod_set.env == {"MEM_MB": "64", "CPUS": "1", "MILLICPUS": "100"}  # 100m: 1 CPU
    assert pod_set.command[:3] == ["/bin/sh", "-c",
                                   'export MY_POD="$PHALANX_POD_NAME"; exec "$@"']
    assert pod_set.command[3:5] == ["sh", "python"]


def test_an_empty_security_context_says_nothing() -> None:
    document = example("job.yaml")
    _job_pod(document)["securityContext"] = {}
    _job_pod(document)["containers"][0]["securityContext"] = {"capabilities": {}}
    assert translate(document).spec.name == "hello-job"


# --------------------------------------------------------------------------- workdir
def test_the_workdir_annotation_is_the_jobs_workdir_a_path_or_the_archive() -> None:
    document = with_overrides(example("job.yaml"), workdir="./src")
    assert document["metadata"]["annotations"] == {WORKDIR_ANNOTATION: "./src"}
    made = translate(document)
    assert made.spec.workdir == "./src"
    # What the control plane refuses about the workdir names the annotation.
    exc = made.error_at_manifest(SpecError("is a path", field="workdir"))
    assert exc.field == f'metadata.annotations["{WORKDIR_ANNOTATION}"]'
    archive = WorkdirArchive(sha256="a" * 64, size=10)
    sent = made.with_archive(archive)
    assert sent.spec.workdir == archive
    assert json.loads(sent.manifest["metadata"]["annotations"][WORKDIR_ANNOTATION]) == {
        "sha256": "a" * 64, "size": 10}
    with pytest.raises(SpecError) as caught:
        translate(with_overrides(example("job.yaml"), workdir=""))
    assert caught.value.field == f'metadata.annotations["{WORKDIR_ANNOTATION}"]'


def test_an_appwrappers_workdir_annotation_wins_over_its_components() -> None:
    wrapper = with_overrides(example("appwrapper-pytorchjob.yaml"), workdir="/outer")
    wrapper["spec"]["components"][0]["template"]["metadata"]["annotations"] = {
        WORKDIR_ANNOTATION: "/inner"}
    assert translate(wrapper).spec.workdir == "/outer"
    del wrapper["metadata"]["annotations"]
    assert translate(wrapper).spec.workdir == "/inner"
def test_a_service_account_and_a_pull_policy_become_the_pod_sets() -> None:
    document = example("job.yaml")
    pod = document["spec"]["template"]["spec"]
    pod["serviceAccountName"] = "trainer"
    pod["containers"][0]["imagePullPolicy"] = "Always"
    made = translate(document)
    [pod_set] = made.spec.pod_sets
    assert pod_set.service_account_name == "trainer"
    assert pod_set.image_pull_policy == "Always"
    assert made.draft.manifest_path("podSets[0].serviceAccountName") == \
        "spec.template.spec.serviceAccountName"
    pod["containers"][0]["imagePullPolicy"] = "Sometimes"  # refused naming its own field
    with pytest.raises(SpecError) as caught:
        translate(document)
    assert "imagePullPolicy" in str(caught.value.field), caught.value
