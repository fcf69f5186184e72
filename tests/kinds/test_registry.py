"""Every plane asks the job's framework; each kind answers for itself."""

from __future__ import annotations

from phalanx.kinds import Framework, framework_of
from phalanx.kinds.generic import Generic
from phalanx.kinds.torch import Torch
from phalanx.spec.resources import JobKind, JobSpec


def test_a_job_is_run_by_the_framework_of_its_kind() -> None:
    torch = JobSpec.model_validate({"name": "t", "kind": "torch", "podSets": [{"command": ["x"]}]})
    plain = JobSpec.model_validate({"name": "g", "podSets": [{"command": ["x"]}]})
    assert isinstance(framework_of(torch), Torch)
    assert isinstance(framework_of(plain), Generic)
    assert framework_of(JobKind.TORCH) is framework_of(torch)


def test_every_framework_is_registered_under_its_own_kind() -> None:
    for kind in JobKind:
        try:
            framework = framework_of(kind)
        except Exception as exc:  # a kind with no framework is refused by name, never a KeyError
            assert getattr(exc, "field", None) == "kind"
            continue
        assert isinstance(framework, Framework) and framework.kind is kind
