"""ResourceFlavor.provisioning and ProvisioningPolicy: the issue's shape, checked at apply."""

from __future__ import annotations

from pathlib import Path

import pytest

from phalanx.errors import SpecError
from phalanx.spec.config import QueueConfig, load_config_yaml, load_job_yaml
from phalanx.spec.provisioning import DEFAULT_TIMEOUT

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

SHAPE = """
kind: ResourceFlavor
name: burst
nodeLabels: {pool: burst}
provisioning:
  provider: local          # local | kubernetes-provisioningrequest | simulated
  nodesPerPool: auto       # auto: as many nodes as the gang needs; or a slice size
  node: {cpu: "2", memory: 4Gi, nvidia.com/gpu: 0}
  maxNodes: 8
  pricePerNodeHour: 1.2
  idleTTL: 0s
  timeout: 15m
  options: {delay: 3s}     # provider-specific (the local provider: delay, stockout)
"""


def test_the_issues_shape_loads_and_round_trips() -> None:
    (flavor,) = load_config_yaml(SHAPE)
    spec = flavor.provisioning  # type: ignore[union-attr]
    assert spec is not None
    assert (spec.provider, spec.nodes_per_pool, spec.max_nodes) == ("local", "auto", 8)
    assert spec.node == {"cpu": 2000, "memory": 4 * 2**30 * 1000, "nvidia.com/gpu": 0}
    assert spec.timeout == DEFAULT_TIMEOUT and spec.idle_ttl == 0
    assert spec.option_delay() == 3.0
    (again,) = load_config_yaml(__import__("yaml").safe_dump(flavor.to_dict()))
    assert again == flavor


def bad(text: str) -> SpecError:
    base = "kind: ResourceFlavor\nname: b\nnodeLabels: {pool: b}\nprovisioning:\n"
    with pytest.raises(SpecError) as caught:
        load_config_yaml(base + text)
    return caught.value


@pytest.mark.parametrize(("text", "field", "words"), [
    ("  provider: aws\n  node: {cpu: 1}\n", "provisioning.provider", "local"),
    ("  provider: local\n  node: {cpu: 1}\n  options: {dely: 1s}\n", "provisioning.options.dely",
     "options.dely is no option of provider local"),
    ("  provider: local\n  node: {cpu: 1}\n  options: {stockout: maybe}\n",
     "provisioning.options.stockout",
     "options.stockout"),
    ("  provider: local\n  node: {cpu: 1}\n  nodesPerPool: 0\n", "provisioning.nodesPerPool",
     "slice size"),
    ("  provider: local\n  node: {cpu: 0}\n", "provisioning.node", "holds nothing"),
    ("  provider: local\n  node: {cpu: 1}\n  nodesPerPool: 4\n  maxNodes: 2\n", "provisioning.maxNodes",
     "maxNodes (2) is below nodesPerPool (4)"),
    ("  provider: local\n  node: {cpu: 1}\n  timeout: 0s\n", "provisioning.timeout",
     "timeout is zero"),
    ("  provider: kubernetes-provisioningrequest\n  node: {cpu: 1}\n  options: {delay: 1s}\n",
     "provisioning.options.delay", "no option of provider kubernetes-provisioningrequest"),
])
def test_bad_provisioning_names_the_field_and_the_fix(text: str, field: str, words: str
                                                      ) -> None:
    error = bad(text)
    assert error.field is not None and error.field.endswith(field), error
    assert words in str(error) and error.fix


def test_a_provisionable_flavor_needs_node_labels() -> None:
    with pytest.raises(SpecError) as caught:
        load_config_yaml("kind: ResourceFlavor\nname: b\nprovisioning:\n  provider: local\n"
                         "  node: {cpu: 1}\n")
    assert "nodeLabels is empty" in caught.value.message and "{pool: burst}" in str(caught.value)


def test_one_provisioning_policy_named_default() -> None:
    with pytest.raises(SpecError) as caught:
        load_config_yaml("kind: ProvisioningPolicy\nname: other\n")
    assert caught.value.field is not None and caught.value.field.endswith("name")
    config = QueueConfig().merged(load_config_yaml("kind: ProvisioningPolicy\ncreatePools: "
                                                   "false\nmaxPools: 2\n"))
    assert config.provisioning_policy.create_pools is False
    assert config.provisioning_policy.max_pools == 2
    assert QueueConfig().provisioning_policy.create_pools is True  # none applied: no limits


def test_the_examples_load() -> None:
    config = QueueConfig().merged(load_config_yaml((EXAMPLES / "provisioning.yaml").read_text()))
    assert sorted(config.provisionable_flavors()) == ["burst", "spare"]
    job = load_job_yaml((EXAMPLES / "provisioning-job.yaml").read_text())
    assert job.queue == "burst" and job.pod_count == 4
