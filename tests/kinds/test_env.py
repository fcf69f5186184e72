"""The environment every plane gives a job's pods, by kind (generic and torch)."""

from __future__ import annotations

import pytest

from phalanx.errors import SpecError
from phalanx.kinds import OwnAddressNetwork, PodRef, framework_of
from phalanx.scheduler.types import Admission, PodSetAssignment
from phalanx.spec.resources import JobSpec

PodEnvironment = tuple[PodRef, str, dict[str, str]]


def pod_environments(
    job: JobSpec, attempt: int, admission: Admission, *, master_port: int,
    pod_addresses: list[str],
) -> list[PodEnvironment]:
    """What the job's kind plans for each pod, on a plane whose pods have addresses of their own."""
    network = OwnAddressNetwork(pod_addresses)
    plans = framework_of(job).plan(job, attempt, admission, network)
    return [(p.ref, p.node, p.env) for p in plans]

JOB = JobSpec.model_validate({
    "name": "mixed",
    "kind": "torch",
    "podSets": [
        {"name": "launcher", "replicas": 1, "command": ["python", "launch.py"],
         "env": {"MASTER_PORT": "7000", "EXTRA": "yes"}},
        {"name": "worker", "replicas": 4, "minReplicas": 2, "command": ["python", "train.py"]},
    ],
})
# Partial admission: 3 of the 4 workers, spread over two nodes.
ADMISSION = Admission(
    job="mixed", cluster_queue="default",
    pod_sets=(
        PodSetAssignment("worker", 3, {}, ("n1", "n1", "n2")),
        PodSetAssignment("launcher", 1, {}, ("n0",)),
    ),
)
ADDRESSES = ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"]


def environments() -> list[tuple[str, str, dict[str, str]]]:
    pods = pod_environments(JOB, 2, ADMISSION, master_port=29500,
                            pod_addresses=ADDRESSES)
    return [(ref.name, node, env) for ref, node, env in pods]


def test_pods_come_in_rank_order_with_admitted_counts_and_nodes() -> None:
    pods = pod_environments(JOB, 2, ADMISSION, master_port=29500,
                            pod_addresses=ADDRESSES)
    assert [(r.name, r.rank, r.index, r.attempt, node) for r, node, _ in pods] == [
        ("mixed-launcher-0", 0, 0, 2, "n0"),
        ("mixed-worker-0", 1, 0, 2, "n1"),
        ("mixed-worker-1", 2, 1, 2, "n1"),
        ("mixed-worker-2", 3, 2, 2, "n2"),
    ]


def test_torchrun_and_training_operator_variables() -> None:
    _, _, env = environments()[2]  # worker 1, rank 2
    expected = {
        "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500",
        "PET_MASTER_ADDR": "10.0.0.1", "PET_MASTER_PORT": "29500",
        "WORLD_SIZE": "4", "RANK": "2", "NODE_RANK": "2", "PET_NODE_RANK": "2",
        "LOCAL_RANK": "0", "NNODES": "4", "PET_NNODES": "4",
        "NPROC_PER_NODE": "1", "PET_NPROC_PER_NODE": "1",
        "PHALANX_JOB": "mixed", "PHALANX_ATTEMPT": "2", "PHALANX_EPOCH": "2", "PHALANX_POD_SET": "worker",
        "PHALANX_POD_INDEX": "1", "PHALANX_POD_NAME": "mixed-worker-1", "PHALANX_RANK": "2",
        "PHALANX_WORLD_SIZE": "4", "PHALANX_NODE_IPS": ",".join(ADDRESSES),
        "PHALANX_MASTER_ADDR": "10.0.0.1", "PHALANX_MASTER_PORT": "29500",
    }
    assert env == expected


def test_pod_set_env_is_applied_last() -> None:
    _, _, launcher = environments()[0]
    assert launcher["MASTER_PORT"] == "7000" and launcher["EXTRA"] == "yes"
    assert launcher["PET_MASTER_PORT"] == "29500"  # only what the user named changes
    assert "EXTRA" not in environments()[1][2]  # and only in its own pod set


def test_nproc_per_node_from_the_pod_set_scales_world_size() -> None:
    job = JobSpec.model_validate({
        "name": "multi", "kind": "torch",
        "podSets": [{"name": "w", "replicas": 2, "env": {"NPROC_PER_NODE": "4"}}],
    })
    admission = Admission("multi", "q", (PodSetAssignment("w", 2, {}, ("a", "b")),))
    pods = pod_environments(job, 1, admission, master_port=29500,
                            pod_addresses=["a", "b"])
    env = pods[1][2]
    assert (env["NPROC_PER_NODE"], env["PET_NPROC_PER_NODE"]) == ("4", "4")
    assert (env["WORLD_SIZE"], env["NNODES"], env["PHALANX_WORLD_SIZE"]) == ("8", "2", "2")


def test_generic_jobs_get_phalanx_names_and_no_framework_names() -> None:
    job = JobSpec.model_validate({"name": "plain", "podSets": [{"replicas": 2}]})
    admission = Admission("plain", "q", (PodSetAssignment("worker", 2, {}, ("a", "a")),))
    pods = pod_environments(job, 1, admission, master_port=29500,
                            pod_addresses=["127.0.0.1"] * 2)
    assert [env["RANK"] for _, _, env in pods] == ["0", "1"]
    env = pods[1][2]
    assert env["WORLD_SIZE"] == "2" and env["PHALANX_MASTER_ADDR"] == "127.0.0.1"
    assert env["PHALANX_MASTER_PORT"] == "29500"
    # torchrun's contract belongs to kind: torch
    assert not {"MASTER_ADDR", "PET_NNODES", "NPROC_PER_NODE"} & set(env)


@pytest.mark.parametrize(
    ("admission", "addresses", "field"),
    [
        (Admission("other", "q", ADMISSION.pod_sets), ADDRESSES, "admission.job"),
        (Admission("mixed", "q", ADMISSION.pod_sets[:1]), ADDRESSES[:3], "admission.podSets"),
        (Admission("mixed", "q", (*ADMISSION.pod_sets, PodSetAssignment("x", 1, {}, ("n",)))),
         ADDRESSES, "admission.podSets"),
        (Admission("mixed", "q", (PodSetAssignment("worker", 5, {}, ("n",) * 5),
                                  ADMISSION.pod_sets[1])), [*ADDRESSES, "x", "y"],
         "admission.podSets[0].count"),
        (Admission("mixed", "q", (PodSetAssignment("worker", 3, {}, ("n",)),
                                  ADMISSION.pod_sets[1])), ADDRESSES, "admission.podSets[0].nodes"),
        (ADMISSION, ADDRESSES[:3], "pod_addresses"),
    ],
)
def test_inconsistent_admissions_are_refused_naming_the_field(
    admission: Admission, addresses: list[str], field: str
) -> None:
    with pytest.raises(SpecError) as caught:
        pod_environments(JOB, 1, admission, master_port=29500,
                         pod_addresses=addresses)
    assert caught.value.field == field
    assert caught.value.fix
