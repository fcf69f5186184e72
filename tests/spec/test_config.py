import pytest

from phalanx.errors import SpecError
from phalanx.spec import QueueConfig, load_config_yaml, load_job_yaml
from phalanx.spec.resources import gpus_requested

FLAVOR = "kind: ResourceFlavor\nname: h100\n"


def cq(name: str, extra: str = "", flavor: str = "h100", lending: str = "") -> str:
    return f"""
kind: ClusterQueue
name: {name}
{extra}
resourceGroups:
- coveredResources: [nvidia.com/gpu]
  flavors:
  - name: {flavor}
    resources: [{{name: nvidia.com/gpu, nominalQuota: 8 {lending}}}]
"""


def test_valid_config_creates_implicit_cohort() -> None:
    objs = load_config_yaml(FLAVOR + "---" + cq("team-a", "cohort: research"))
    config = QueueConfig().merged(objs)
    assert "research" in config.cohorts
    assert config.cluster_queues["team-a"].resource_groups[0].flavors[0].resources[0].nominal_quota == 8000


@pytest.mark.parametrize(
    ("text", "field_part"),
    [
        (cq("team-a"), "flavors[0].name"),  # unknown flavor
        (FLAVOR + "---" + cq("team-a", lending=", lendingLimit: 9"), "resources[0]"),
        (FLAVOR + "---\nkind: LocalQueue\nname: q\nclusterQueue: nope\n", "clusterQueue"),
        (FLAVOR + "---\nkind: Cohort\nname: a\nparent: b\n---\nkind: Cohort\nname: b\nparent: a\n", "parent"),
        ("kind: Widget\nname: x\n", "kind"),
        (FLAVOR + "---" + cq("team-a").replace("nominalQuota: 8", "nominalQuota: -8"), "nominalQuota"),
        (FLAVOR + "---" + cq("team-a", "holdForLargeGangs: {minGPUs: 0, after: 6h}"),
         "holdForLargeGangs.minGPUs"),
        (FLAVOR + "---" + cq("team-a", "holdForLargeGangs: {minGPUs: '9', after: 6h}"),
         "holdForLargeGangs.minGPUs"),
        (FLAVOR + "---" + cq("team-a", "holdForLargeGangs: {minGPUs: 9, after: soon}"),
         "holdForLargeGangs.after"),
        (FLAVOR + "---" + cq("team-a", "holdForLargeGangs: {minGPUs: 9}"),
         "holdForLargeGangs.after"),
        (FLAVOR + "---" + cq("team-a", "holdForLargeGangs: {minGpus: 9, after: 6h}"),
         "holdForLargeGangs"),
    ],
)
def test_invalid_config_names_field_and_changes_nothing(text: str, field_part: str) -> None:
    before = QueueConfig()
    with pytest.raises(SpecError) as info:
        before.merged(load_config_yaml(text))
    assert field_part in (info.value.field or "")
    assert before.cluster_queues == {} and before.flavors == {}


def test_hold_for_large_gangs_reads_and_is_off_by_default() -> None:
    objs = load_config_yaml(FLAVOR + "---" + cq("team-a", "holdForLargeGangs: "
                                                 "{minGPUs: 9, after: 6h}") + "---" + cq("b"))
    config = QueueConfig().merged(objs)
    hold = config.cluster_queues["team-a"].hold_for_large_gangs
    assert hold is not None and (hold.min_gpus, hold.after) == (9, 21600.0)
    assert config.cluster_queues["team-a"].to_dict()["holdForLargeGangs"] == {
        "minGPUs": 9, "after": "6h"}
    assert config.cluster_queues["b"].hold_for_large_gangs is None


def test_gpus_requested_counts_every_known_gpu_resource_of_every_replica() -> None:
    job = load_job_yaml("""
name: mixed
queue: q
podSets:
- {name: a, replicas: 2, resources: {nvidia.com/gpu: 4, cpu: 8}}
- {name: b, replicas: 3, resources: {amd.com/gpu: 2}}
- {name: c, replicas: 1, resources: {cpu: 1}}
""")
    assert gpus_requested(job) == 14


def test_job_yaml_errors() -> None:
    with pytest.raises(SpecError) as info:
        load_job_yaml("name: x\npodSets: [{replicas: 2, minReplicas: 3}]")
    assert info.value.field == "podSets[0].minReplicas"
    with pytest.raises(SpecError) as info:
        load_job_yaml("name: x\npodSets: [\n")
    assert "line" in info.value.message
    with pytest.raises(SpecError) as info:
        load_job_yaml("name: Bad_Name\npodSets: [{}]")
    assert info.value.field == "name"


def test_priority_and_queue_lookups() -> None:
    config = QueueConfig.default_for([])
    assert config.priority_value("high") > config.priority_value("default") > config.priority_value("low")
    with pytest.raises(SpecError) as info:
        config.priority_value("urgent")
    assert "high" in (info.value.fix or "")
    with pytest.raises(SpecError):
        config.cluster_queue_for("nope")
    assert config.cluster_queue_for("default").name == "default"
