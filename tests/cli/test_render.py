"""How results look to people: ages, quantities, and the tables built from API shapes."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console, RenderableType

from phalanx.cli import planeinfo, render
from phalanx.spec import load_job_yaml
from phalanx.spec.api import AppliedObject, NodeView, QueuesOverview
from phalanx.spec.detailrows import DetailRow
from phalanx.spec.manifests import translate
from phalanx.spec.planes import PlaneView
from phalanx.spec.rows import JobRows
from phalanx.spec.status import JobDetail, JobEvent, JobRecord, JobStatus, PodInfo

NOW = 1_700_000_000.0
SPEC = load_job_yaml(
    "name: train\npriority: high\nkind: torch\nmaxRuntime: 2h\n"
    "podSets:\n- name: worker\n  replicas: 2\n  resources: {cpu: 500m, memory: 2Gi}\n"
    "  command: [python, train.py]\n"
)


def text(renderable: RenderableType) -> str:
    buffer = io.StringIO()
    Console(file=buffer, width=200, color_system=None).print(renderable)
    return buffer.getvalue()


def record(**fields: Any) -> JobRecord:
    base: dict[str, Any] = {
        "name": "train", "spec": SPEC, "queue": "default", "cluster_queue": "default",
        "priority": 100, "submitted_at": NOW - 200, "queued_at": NOW - 200,
    }
    return JobRecord(**{**base, **fields})


@pytest.mark.parametrize(
    ("delta", "expected"),
    [(0.2, "just now"), (42, "42s ago"), (180, "3m ago"), (3 * 3600 + 5, "3h ago"),
     (2 * 86400, "2d ago")],
)
def test_ago(delta: float, expected: str) -> None:
    assert render.ago(NOW - delta, NOW) == expected


def test_ago_and_elapsed_of_nothing() -> None:
    assert render.ago(None) == "-"
    assert render.elapsed(None, None) == "-"
    assert render.elapsed(NOW - 90, NOW) == "1m30s"
    assert render.elapsed(NOW - 5, None, NOW) == "5s"  # still running: until now


@pytest.mark.parametrize(
    ("value", "resource", "expected"),
    [("2147483648", "memory", "2Gi"), ("1500m", "cpu", "1500m"), ("4", "nvidia.com/gpu", "4"),
     (1073741824, "memory", "1Gi"), ("weird", "cpu", "weird")],
)
def test_show_quantity_is_resource_aware(value: str | int, resource: str, expected: str) -> None:
    assert render.show_quantity(value, resource) == expected


def test_jobs_table_shows_pending_reason_for_queued_jobs() -> None:
    queued = record(
        pending_code="QuotaExhausted",
        pending_message="needs 1 cpu; default has 0.5 free",
    )
    running = record(
        name="other", status=JobStatus.RUNNING, started_at=NOW - 65,
        admission={"clusterQueue": "default",
                   "podSets": [{"name": "worker", "count": 1, "flavors": {}, "nodes": ["n"]}]},
    )
    failed = record(name="bad", status=JobStatus.FAILED, started_at=NOW - 100,
                    finished_at=NOW - 40, message="pod train-worker-1 exited with code 3")
    out = text(render.jobs_table([queued, running, failed], NOW))
    header = out.splitlines()[0].split()
    assert header == ["NAME", "QUEUE", "USER", "STATUS", "PRIORITY", "PODS", "AGE", "DURATION",
                      "STARTS", "REASON/MESSAGE"]
    lines = {line.split()[0]: line for line in out.splitlines()[1:] if line.strip()}
    assert "Queued" in lines["train"] and "needs 1 cpu; default has 0.5 free" in lines["train"]
    assert "high (100)" in lines["train"] and "3m ago" in lines["train"]
    assert "1/2" in lines["other"] and "1m5s" in lines["other"]
    assert "1m " in lines["bad"] and "exited with code 3" in lines["bad"]


def test_jobs_table_of_rows_read_from_the_api_json_is_the_table_of_records() -> None:
    # `phalanx jobs` draws rows read from the API's JSON without the models (spec/rows.py):
    # the same table as the records', for every column and state.
    records = [
        record(pending_message="needs 1 cpu", estimate={
            "position": 2, "cohortPosition": 5, "startsAt": NOW + 700, "guess": True,
            "basis": "NoHistory", "computedAt": NOW}),
        record(name="soon", estimate={"position": 1, "startsAt": NOW + 20, "basis": "Free",
                                      "computedAt": NOW}),
        record(name="later", priority=7, spec=SPEC.model_copy(update={"priority": 7})),
        record(name="placed", status=JobStatus.RUNNING, started_at=NOW - 65, plane="gcp-a",
               user="ann", admission={"clusterQueue": "default", "podSets": [
                   {"name": "worker", "count": 1, "flavors": {}, "nodes": ["n"]}]}),
        record(name="done", status=JobStatus.SUCCEEDED, started_at=NOW - 100,
               finished_at=NOW - 40, message="all pods succeeded"),
    ]
    rows = JobRows.of({"items": [r.model_dump(mode="json", by_alias=True) for r in records],
                       "remainingItemCount": 3}).items
    for planes in (False, True):
        assert text(render.jobs_table(rows, NOW, planes=planes)) == \
            text(render.jobs_table(records, NOW, planes=planes))
    assert "~12m*" in text(render.jobs_table(rows, NOW))  # the estimate came through


def test_describe_shows_placement_pods_events_and_why_pending() -> None:
    admission = {
        "job": "train", "clusterQueue": "default", "borrowing": True,
        "podSets": [{"name": "worker", "count": 2, "flavors": {"cpu": "local", "memory": "local"},
                     "nodes": ["box", "box"]}],
    }
    detail = JobDetail(
        **record(status=JobStatus.RUNNING, admission=admission, started_at=NOW - 30,
                 attempt=1).model_dump(),
        pods=[
            PodInfo(name="train-worker-0", pod_set="worker", index=0, rank=0, node="box",
                    phase="Running", pid=4242, started_at=NOW - 30, cpus=[2, 3]),
            PodInfo(name="train-worker-1", pod_set="worker", index=1, rank=1, node="box",
                    phase="Failed", exit_code=3, reason="Error"),
        ],
        events=[JobEvent(job="train", time=NOW - 60, reason="Admitted",
                         message="admitted to default")],
    )
    out = text(render.describe_job(detail, NOW))
    assert "default (ClusterQueue default)" in out
    assert "Max runtime  2h" in out
    assert "Status       Running" in out
    assert "cpu=500m memory=2Gi" in out
    assert "Placement on ClusterQueue default (borrowing from the cohort)" in out
    assert "cpu: local, memory: local" in out and "box x2" in out
    assert "4242" in out and "Error" in out
    assert "CPUS" in out and "2,3" in out  # the CPUs a pinned pod has to itself
    assert "admitted to default" in out and "1m ago" in out

    queued = JobDetail(**record(pending_code="NoNodeFits",
                                pending_message="no node has 2 free cpu").model_dump())
    out = text(render.describe_job(queued, NOW))
    assert "Waiting for  no node has 2 free cpu [NoNodeFits]" in out
    assert "Placement" not in out


def test_queues_view_from_api_shape() -> None:
    data = {
        "clusterQueues": [{
            "name": "team-a", "cohort": "research", "pending": 3, "admitted": 1,
            "stopped": False, "weightedShare": 0.5,
            "usage": [
                {"flavor": "local", "resource": "cpu", "nominal": "2", "used": "1500m",
                 "borrowed": "0", "lendable": "2", "withheld": "2"},
                {"flavor": "local", "resource": "memory", "nominal": "4294967296",
                 "used": "1Gi", "borrowed": "0", "lendable": "4Gi"},
            ],
        }],
        "localQueues": [{"name": "team-a", "clusterQueue": "team-a", "pending": 3,
                         "admitted": 1}],
        "cohorts": [{"name": "research", "parent": None}],
    }
    out = text(render.queues_view(QueuesOverview.model_validate(data)))
    rows = [line.split() for line in out.splitlines()]
    assert ["team-a", "research", "3", "1", "local", "cpu", "2", "1500m", "0", "2"] in rows
    assert ["local", "memory", "4Gi", "1Gi", "0", "0"] in rows  # nothing withheld
    assert ["team-a", "team-a", "3", "1"] in rows


def test_nodes_table_from_api_shape() -> None:
    nodes = [{
        "name": "box", "labels": {"phalanx.dev/flavor": "local"}, "taints": [],
        "allocatable": {"cpu": "2", "memory": "8Gi"}, "used": {"cpu": "500m"},
        "unschedulable": True, "health": "degraded", "healthReasons": ["GPU 0 hot"],
    }]
    out = text(render.nodes_table(NodeView.model_validate(n) for n in nodes))
    assert "CPU USED/ALLOC" in out and "MEMORY USED/ALLOC" in out
    assert "500m/2" in out and "0/8Gi" in out
    assert "degraded, cordoned (GPU 0 hot)" in out


def test_a_machines_memory_reads_as_people_write_it() -> None:
    node = NodeView.model_validate({
        "name": "box", "allocatable": {"cpu": "8", "memory": "24684084Ki", "nvidia.com/gpu": "2"},
        "used": {"cpu": "2500m", "memory": "4294967296", "nvidia.com/gpu": "1"}})
    table = text(render.nodes_table([node]))
    assert "2500m/8" in table and "4Gi/23.5Gi" in table and "1/2" in table
    assert "24684084" not in table
    shown = text(render.node_view(node))
    assert "cpu=8, memory=23.5Gi, nvidia.com/gpu=2" in shown


def test_applied_lines() -> None:
    applied = [{"kind": "ClusterQueue", "name": "team-a", "action": "created"}]
    assert render.applied_lines(map(AppliedObject.model_validate, applied)) == [
        "clusterqueue/team-a created"
    ]


# --------------------------------------------------------------------------- planes
def plane(**fields: Any) -> PlaneView:
    base: dict[str, Any] = {"name": "gcp-a", "state": "connected", "phase": "connected",
                            "remote": True, "nodes": 2, "lostAfter": 900}
    return PlaneView.model_validate({**base, **fields})


def test_jobs_table_has_a_plane_column_only_when_asked() -> None:
    running = record(status=JobStatus.RUNNING, plane="gcp-a")
    queued = record(name="waits")
    assert "PLANE" not in text(render.jobs_table([running, queued], NOW))
    out = text(render.jobs_table([running, queued], NOW, planes=True))
    header, first, second = out.splitlines()[:3]
    assert header.split()[:5] == ["NAME", "QUEUE", "USER", "STATUS", "PLANE"]
    assert first.split()[4] == "gcp-a"
    assert second.split()[4] == "-"  # queued: placed on no plane


def test_describe_says_the_plane_and_that_a_silent_one_keeps_the_quota() -> None:
    job = JobDetail(**record(status=JobStatus.RUNNING, plane="gcp-a").model_dump())
    silent = plane(phase="silent", state="disconnected (silent for 120s)", silentFor=120,
                   jobs=["train"], used={"cpu": "4"})
    line = planeinfo.plane_line(job, [silent])
    assert line == ("gcp-a (worker silent for 2m; the job keeps its quota until 15m of "
                    "silence, 13m from now)")
    shown = [" ".join(row.split()) for row in text(
        render.describe_job(job, NOW, plane=line)).splitlines()]
    assert f"Plane {line}" in shown
    assert planeinfo.plane_line(job, [plane()]) == "gcp-a"
    lost = plane(phase="lost", silentFor=950)
    assert planeinfo.plane_line(job, [lost]) == (
        "gcp-a (lost: worker silent for 15m50s; the job is requeued)")
    assert planeinfo.plane_line(record(), [silent]) is None  # queued: on no plane
    assert "Plane" not in text(render.describe_job(JobDetail(**record().model_dump()), NOW))


def test_what_a_silent_plane_holds() -> None:
    silent = plane(phase="silent", silentFor=60, jobs=["a", "b"],
                   used={"cpu": "12", "nvidia.com/gpu": "8"})
    assert planeinfo.holds_text(silent) == (
        "2 jobs keeping their quota (cpu=12 nvidia.com/gpu=8) for 14m more, until the plane "
        "is lost after 15m of silence")
    assert planeinfo.holds_text(plane(jobs=["a"], used={"cpu": "500m"})) == \
        "1 job using cpu=500m"
    assert planeinfo.holds_text(plane()) == "no jobs"
    assert planeinfo.state_text(silent) == "silent 1m"
    assert planeinfo.state_text(plane(cordoned=True)) == "connected, cordoned"
    assert planeinfo.state_text(plane(cordoned=True, draining=True)) == "connected, draining"


def test_status_planes_table() -> None:
    planes = [
        PlaneView.model_validate({"name": "local", "state": "in-process", "remote": False,
                                  "nodes": 1, "allocatable": {"cpu": "8"},
                                  "used": {"cpu": "1500m"}, "jobs": ["a"]}),
        plane(phase="silent", silentFor=30, jobs=["b"], allocatable={
            "cpu": "16", "nvidia.com/gpu": "8"}, used={"cpu": "4", "nvidia.com/gpu": "8"}),
    ]
    rows = [line.split() for line in text(planeinfo.planes_table(planes)).splitlines()]
    assert rows[0][:6] == ["PLANE", "STATE", "NODES", "JOBS", "CPU", "USED/ALLOC"]
    assert "GPU" in rows[0]
    assert rows[1][:7] == ["local", "in-process", "1", "1", "1500m/8", "-", "-"]
    assert rows[2][:7] == ["gcp-a", "silent", "30s", "2", "1", "4/16", "8/8"]
    assert "keeping their quota" in " ".join(rows[2])


def test_describe_shows_the_manifest_and_what_became_of_it() -> None:
    manifest = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train"},
                "spec": {"parallelism": 2, "template": {"spec": {"containers": [
                    {"name": "c", "image": "python:3.12", "command": ["python", "t.py"]}]}}}}
    made = translate(manifest)
    detail = JobDetail(**record(spec=made.spec, plane="local").model_dump(),
                       manifest=made.manifest, manifest_notes=made.notes)
    shown = text(render.describe_job(detail, NOW))
    assert "Manifest (batch/v1 Job, as submitted" in shown
    assert "spec.completions: unset: the job succeeds when all 2 pods succeed" in shown
    assert "image python:3.12: recorded, not used" in shown
    assert "parallelism: 2" in shown  # the manifest itself, as YAML
    elsewhere = JobDetail(**record(spec=made.spec, plane="gcp-a").model_dump(),
                          manifest=made.manifest)
    assert "recorded, not used" not in text(render.describe_job(elsewhere, NOW))
    assert "Manifest" not in text(render.describe_job(JobDetail(**record().model_dump()), NOW))


def test_describe_of_rows_read_from_the_api_json_is_the_page_of_the_record() -> None:
    # `phalanx describe` draws rows read from the API's JSON without the models
    # (spec/detailrows.py): the same page as the record's, for every field it shows.
    rich_spec = load_job_yaml(
        "name: train\npriority: 7\nkind: torch\nmaxRuntime: 2h30m\n"
        "restart: {maxRestarts: 2, maxSystemRestarts: 4}\n"
        "topology: {required: rack}\n"
        "dependsOn: [{job: prep}, {job: data, condition: Finished}]\n"
        "workdir: {sha256: " + "ab" * 32 + ", size: 52000000}\n"
        "podSets:\n- name: worker\n  replicas: 4\n  minReplicas: 2\n"
        "  resources: {cpu: 2, memory: 2Gi, nvidia.com/gpu: 2}\n"
        "  cpuPinning: exclusive\n  image: python:3.12\n  imagePullPolicy: Always\n"
        "  command: [python, train.py, --lr, '0.1']\n"
        "- name: ps\n  resources: {cpu: 1500m}\n  command: [serve]\n")
    git_spec = load_job_yaml(
        "name: g\ngit: {repo: 'https://example.com/r.git', ref: main, commit: "
        + "c" * 40 + "}\npodSets:\n- resources: {cpu: 1}\n  command: [x]\n")
    ray_spec = load_job_yaml(
        "name: r\nkind: ray\nray: {entrypoint: python run.py}\n"
        "podSets:\n- name: head\n  resources: {cpu: 1}\n  command: [x]\n")
    admission = {"job": "train", "clusterQueue": "default", "borrowing": True, "podSets": [
        {"name": "worker", "count": 3, "flavors": {"cpu": "a", "nvidia.com/gpu": "b"},
         "nodes": ["n1", "n1", "n2"]}]}
    pods = [PodInfo(name="train-worker-0", pod_set="worker", index=0, rank=0, node="n1",
                    phase="Running", pid=4242, started_at=NOW - 30, cpus=[2, 3]),
            PodInfo(name="train-worker-1", pod_set="worker", index=1, rank=1, node="n1",
                    phase="Failed", signal=9, reason="OOMKilled"),
            PodInfo(name="train-worker-2", pod_set="worker", index=2, rank=2, node="n2",
                    phase="Failed", exit_code=3, reason="Error", started_at=NOW - 90)]
    events = [JobEvent(job="train", time=NOW - 60, reason="Admitted", message="admitted"),
              JobEvent(job="train", time=NOW - 5, type="Warning", reason="PodFailed",
                       message="pod train-worker-2 exited with code 3")]
    manifest = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train"},
                "spec": {"parallelism": 2, "template": {"spec": {"containers": [
                    {"name": "c", "image": "python:3.12", "command": ["python", "t.py"]}]}}}}
    made = translate(manifest)
    details = [
        JobDetail(**record(spec=rich_spec, status=JobStatus.RUNNING, admission=admission,
                           admitted_at=NOW - 40, started_at=NOW - 30, attempt=2,
                           user_restarts=1, system_restarts=3, preemptions=2, plane="gcp-a",
                           endpoints={"dashboard": "http://n1:8265"}).model_dump(),
                  pods=pods, events=events),
        JobDetail(**record(spec=git_spec, status=JobStatus.FAILED, started_at=NOW - 100,
                           finished_at=NOW - 10, exit_code=3,
                           message="pod g-worker-0 exited with code 3").model_dump()),
        JobDetail(**record(spec=ray_spec, pending_code="NoNodeFits",
                           pending_message="waiting for no node has 2 free cpu",
                           estimate={"position": 2, "cohortPosition": 5,
                                     "startsAt": NOW + 700, "guess": True,
                                     "basis": "NoHistory", "message": "no history",
                                     "computedAt": NOW}).model_dump()),
        JobDetail(**record().model_dump()),
        JobDetail(**record(spec=made.spec, plane="local").model_dump(),
                  manifest=made.manifest, manifest_notes=made.notes),
    ]
    for detail in details:
        row = DetailRow.of(detail.model_dump(mode="json", by_alias=True))
        for plane in (None, "gcp-a (cordoned)"):
            assert text(render.describe_job(row, NOW, plane=plane)) == \
                text(render.describe_job(detail, NOW, plane=plane))
    shown = text(render.describe_job(DetailRow.of(
        details[0].model_dump(mode="json", by_alias=True)), NOW))
    assert "Max runtime  2h30m" in shown and "cpu=1500m" in shown  # parsed, not just copied
    assert "2 (min 2)" not in shown and "4 (min 2)" in shown
