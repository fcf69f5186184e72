"""``--set PATH=VALUE`` and ``--env K=V`` over a job file, typed as the schema says;
``generateName`` and the code sources in the schema."""

from __future__ import annotations

import re

import pytest

from phalanx.errors import SpecError
from phalanx.spec import JobSpec, validate
from phalanx.spec.overrides import apply_overrides
from phalanx.spec.sources import check_resolved

BASE = {"name": "train", "podSets": [{"name": "w", "command": ["python", "t.py"]},
                                     {"name": "ps", "command": ["python", "ps.py"]}]}


def _job() -> JobSpec:
    return validate(JobSpec, BASE)


def test_fields_are_set_as_their_types_say() -> None:
    spec = apply_overrides(_job(), sets=[
        "podSets[0].replicas=4", "maxRuntime=2h", "name=007", "podSets[1].env.SEED=010",
        "podSets[0].command=[python, -c, 'print(1)']", "restart.maxRestarts=2",
        "podSets[0].resources.cpu=500m",
    ], env=["WANDB_MODE=offline"])
    assert spec.pod_sets[0].replicas == 4 and spec.max_runtime == 7200
    assert spec.name == "007"  # a text field keeps the text: not the number 7
    assert spec.pod_sets[1].env == {"SEED": "010", "WANDB_MODE": "offline"}
    assert spec.pod_sets[0].env == {"WANDB_MODE": "offline"}
    assert spec.pod_sets[0].command == ["python", "-c", "print(1)"]
    assert spec.restart.max_restarts == 2 and spec.pod_sets[0].resources["cpu"] == 500


@pytest.mark.parametrize(("assignment", "field"), [
    ("podSets[0].replica=3", "podSets[0].replica"),
    ("podSets[5].replicas=3", "podSets[5].replicas"),
    ("maxRuntim=1h", "maxRuntim"),
    ("podSets[0].env.A.B=1", "podSets[0].env.A.B"),
    ("name[0]=x", "name[0]"),
])
def test_a_path_that_names_no_field_is_refused_naming_it(assignment: str, field: str) -> None:
    with pytest.raises(SpecError) as caught:
        apply_overrides(_job(), sets=[assignment])
    assert caught.value.field == field


def test_a_value_the_field_does_not_take_is_refused_naming_the_field() -> None:
    with pytest.raises(SpecError) as caught:
        apply_overrides(_job(), sets=["podSets[0].replicas=many"])
    assert caught.value.field == "podSets[0].replicas"
    with pytest.raises(SpecError) as caught:
        apply_overrides(_job(), env=["NOEQUALS"])
    assert caught.value.field == "--env"


def test_unique_asks_for_a_generated_name_and_generate_name_names_a_nameless_job() -> None:
    assert apply_overrides(_job(), unique=True).generate_name == "train-"
    spec = validate(JobSpec, {"generateName": "sweep-", "podSets": BASE["podSets"]})
    assert re.fullmatch(r"sweep-[a-z0-9]{5}", spec.name)
    with pytest.raises(SpecError) as caught:
        validate(JobSpec, {"generateName": "Bad_", "podSets": BASE["podSets"]})
    assert caught.value.field == "generateName"


def test_one_code_source_and_the_control_plane_takes_only_resolved_ones() -> None:
    with pytest.raises(SpecError):
        validate(JobSpec, {**BASE, "workdir": ".", "git": {"repo": "https://x/y.git"}})
    path = validate(JobSpec, {**BASE, "workdir": "."})
    with pytest.raises(SpecError) as caught:
        check_resolved(path.workdir, path.git)
    assert caught.value.field == "workdir"
    git = validate(JobSpec, {**BASE, "git": {"repo": "https://x/y.git", "ref": "main"}})
    with pytest.raises(SpecError) as caught:
        check_resolved(git.workdir, git.git)
    assert caught.value.field == "git.commit"
    with pytest.raises(SpecError) as caught:
        validate(JobSpec, {**BASE, "workdir": {"sha256": "not-a-digest"}})
    assert caught.value.field.startswith("workdir")
