"""The kubernetes-provisioningrequest options are checked at apply, and a gang with more
pod sets than a ProvisioningRequest carries is refused at submit, naming the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from phalanx.control import Controller
from phalanx.errors import SpecError
from phalanx.spec import JobSpec
from phalanx.spec.base import validate
from phalanx.spec.resources import ClusterQueue, ResourceFlavor
from phalanx.store import Store
from tests.k8s_plane.conftest import PlaneFactory
from tests.k8s_plane.fake_apiserver import FakeAPIServer


def _flavor(**options: Any) -> dict[str, Any]:
    return {"kind": "ResourceFlavor", "name": "burst", "nodeLabels": {"pool": "burst"},
            "provisioning": {"provider": "kubernetes-provisioningrequest",
                             "node": {"cpu": "8", "memory": "32Gi"}, "options": options}}


def test_class_and_parameters_are_accepted() -> None:
    flavor = validate(ResourceFlavor, _flavor(className="queued-provisioning.gke.io",
                                              parameters={"maxRunDurationSeconds": "3600"}))
    assert flavor.provisioning is not None
    assert flavor.provisioning.options["className"] == "queued-provisioning.gke.io"


@pytest.mark.parametrize(("options", "words"), [
    ({"className": "Check Capacity"}, "options.className"),
    ({"parameters": {"a": 1}}, "options.parameters"),
    ({"parameters": {"a": "x" * 256}}, "at most 255"),
    ({"parameters": {f"k{i}": "v" for i in range(101)}}, "at most 100"),
    ({"delay": "3s"}, "options.delay is no option"),
])
def test_bad_options_are_refused_at_apply(options: dict[str, Any], words: str) -> None:
    with pytest.raises(SpecError) as caught:
        validate(ResourceFlavor, _flavor(**options))
    assert words in str(caught.value)
    assert "provisioning" in (caught.value.field or "")


def test_a_gang_of_33_pod_sets_is_refused_at_submit(
        tmp_path: Path, api: FakeAPIServer, make_plane: PlaneFactory) -> None:
    # (on a Kubernetes plane: the only one whose control plane has this provider)
    api.add_node("n0", cpu="64", memory="64Gi")
    plane = make_plane()
    ctl = Controller(Store(f"sqlite:///{tmp_path / 'state.db'}"), plane)
    try:
        queue = ctl.state.config.cluster_queues["default"]
        group = queue.resource_groups[0]
        burst = group.flavors[0].model_copy(update={"name": "burst"})
        grown = queue.model_copy(update={"resource_groups": [
            group.model_copy(update={"flavors": [*group.flavors, burst]})]})
        ctl.service.apply_config([validate(ResourceFlavor, _flavor()),
                                  validate(ClusterQueue, grown.to_dict())])

        def gang(pod_sets: int) -> JobSpec:
            return validate(JobSpec, {"name": f"g{pod_sets}", "podSets": [
                {"name": f"p{i}", "resources": {"cpu": "100m"}, "command": ["x"],
                 "image": "busybox"}
                for i in range(pod_sets)]})

        with pytest.raises(SpecError) as caught:
            ctl.service.submit_many([gang(33)])
        assert caught.value.field == "items[0].podSets"
        assert "at most 32" in caught.value.message and "burst" in caught.value.message
        ctl.service.submit_many([gang(32)])
        assert "g32" in ctl.state.jobs and "g33" not in ctl.state.jobs
    finally:
        ctl.stop()
        ctl.store.close()
