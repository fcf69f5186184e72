import pytest

import phalanx
from phalanx import Job, JobSpec, PodSetBuilder, SpecError
from phalanx.spec import GPU, load_job_yaml, load_jobs_yaml


def test_builder_matches_the_same_job_written_in_yaml() -> None:
    built = (
        Job("train", queue="team-a", priority="high", kind="torch")
        .pod_set("worker", replicas=2, command=["python", "train.py"],
                 resources={"cpu": "1", "memory": "2Gi"}, env={"EPOCHS": "3"})
        .max_runtime("2h")
        .restart(3, max_system_restarts=5, backoff="5s")
        .topology(required="rack")
        .labels(team="a")
        .build()
    )
    written = load_job_yaml(
        """
name: train
queue: team-a
priority: high
kind: torch
maxRuntime: 2h
restart: {maxRestarts: 3, maxSystemRestarts: 5, backoff: 5s}
topology: {required: rack}
labels: {team: a}
podSets:
  - name: worker
    replicas: 2
    resources: {cpu: "1", memory: 2Gi}
    env: {EPOCHS: "3"}
    command: [python, train.py]
"""
    )
    assert isinstance(built, JobSpec)
    assert built == written
    assert built.max_runtime == 7200.0
    assert built.pod_sets[0].resources == {"cpu": 1000, "memory": 2 * 2**30 * 1000}


def test_pod_set_builder_chains_and_merges_resources() -> None:
    pods = (
        PodSetBuilder("trainer", 4)
        .replicas(4, minimum=2)
        .command("torchrun", "train.py")
        .cpu("500m")
        .memory("1Gi")
        .gpus(1)
        .resources(cpu=2)  # a later call wins for the same resource
        .env(A="1")
        .env({"B": "2"})
        .working_dir("/work")
        .node_selector(zone="a")
        .tolerate("gpu", "h100", effect="NoSchedule")
        .tolerate(exists=True)
    )
    spec = Job("multi").add(pods).pod_set("evaluator", command=["python", "eval.py"]).build()
    trainer, evaluator = spec.pod_sets
    assert trainer.replicas == 4 and trainer.min_replicas == 2
    assert trainer.resources == {"cpu": 2000, "memory": 2**30 * 1000, GPU: 1000}
    assert trainer.env == {"A": "1", "B": "2"}
    assert trainer.working_dir == "/work"
    assert trainer.node_selector == {"zone": "a"}
    assert [t.operator for t in trainer.tolerations] == ["Equal", "Exists"]
    assert trainer.tolerations[0].key == "gpu" and trainer.tolerations[1].key is None
    assert evaluator.replicas == 1 and evaluator.command == ["python", "eval.py"]
    assert spec.pod_count == 5


def test_builders_accept_prebuilt_pod_sets_and_do_not_share_state() -> None:
    base = Job("a").pod_set("w", command=["true"])
    doc = base.to_dict()
    doc["podSets"][0]["replicas"] = 99  # a copy: the builder is untouched
    assert base.build().pod_sets[0].replicas == 1
    pod_set = PodSetBuilder("w", 3).build()
    assert Job("b").add(pod_set).build().pod_sets[0].replicas == 3


@pytest.mark.parametrize(
    ("job", "field", "words"),
    [
        (Job("t").pod_set(resources={"cpu": "lots"}), "podSets[0].resources.cpu",
         "not a quantity"),
        (Job("t").pod_set(replicas=0), "podSets[0].replicas", "greater than or equal to 1"),
        (Job("t").pod_set(replicas=2, min_replicas=3), "podSets[0].minReplicas", "minReplicas"),
        (Job("T_bad").pod_set(), "name", "not a valid name"),
        (Job("t", kind="slurm").pod_set(), "kind", "torch"),
        (Job("t").pod_set().max_runtime("forever"), "maxRuntime", "not a duration"),
        (Job("t").pod_set("w").pod_set("w"), "podSets", "share a name"),
        (Job("t"), "podSets", "no pod sets"),
    ],
)
def test_build_errors_name_the_field(job: Job, field: str | None, words: str) -> None:
    with pytest.raises(SpecError) as info:
        job.build()
    assert info.value.field == field
    assert words in str(info.value)


def test_public_api_is_exported() -> None:
    assert phalanx.__version__ == "0.1.0"
    for name in ("Client", "Job", "PodSetBuilder", "JobSpec", "PodSet", "JobStatus",
                 "SpecError", "NotFound", "Conflict", "AuthError", "ConnectionFailed"):
        assert hasattr(phalanx, name), name


def test_after_and_pin_cpus_build_what_the_yaml_says() -> None:
    prep = Job("prep").pod_set(command=["python", "prep.py"])
    train = (
        Job("train")
        .add(PodSetBuilder("worker").command("python", "train.py").cpu(2).pin_cpus())
        .after(prep)
        .after("fetch", condition="Finished")
    )
    written = load_jobs_yaml(
        "name: train\n"
        "dependsOn: [prep, {job: fetch, condition: Finished}]\n"
        "podSets:\n"
        "- {name: worker, command: [python, train.py], resources: {cpu: 2},"
        " cpuPinning: exclusive}\n"
    )[0]
    assert train.build() == written


def test_volumes_mounts_and_shm_build_as_written_in_yaml() -> None:
    job = Job("train").volume("data", hostPath={"path": "/datasets", "type": "Directory"})
    job.volume("scratch", emptyDir={})
    job.add(PodSetBuilder("worker", command=["python", "train.py"]).shm("16Gi").mount(
        "data", "/mnt/data", read_only=True).mount("scratch", "/scratch", sub_path="tmp"))
    written = load_job_yaml("""
name: train
volumes:
- {name: data, hostPath: {path: /datasets, type: Directory}}
- {name: scratch, emptyDir: {}}
podSets:
- name: worker
  command: [python, train.py]
  shm: 16Gi
  volumeMounts:
  - {name: data, mountPath: /mnt/data, readOnly: true}
  - {name: scratch, mountPath: /scratch, subPath: tmp}
""")
    assert job.build() == written
