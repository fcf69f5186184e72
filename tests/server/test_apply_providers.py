"""A flavor whose node pools this control plane cannot buy is refused at apply, whole: the
simulated compute plane has no provider (``simulated`` is ``phalanx sim``'s alone)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml

from tests.sdk.live_server import LiveServer

FILE = """\
kind: ResourceFlavor
name: spot
nodeLabels: {pool: spot}
provisioning:
  provider: %s
  node: {cpu: "8", memory: 32Gi}
---
kind: ClusterQueue
name: burst
resourceGroups:
- coveredResources: [cpu, memory]
  flavors:
  - name: spot
    resources: [{name: cpu, nominalQuota: "64"}, {name: memory, nominalQuota: 256Gi}]
"""


@pytest.mark.parametrize("provider", ["simulated", "local", "kubernetes-provisioningrequest"])
def test_apply_refuses_a_provider_this_control_plane_lacks(api: httpx.Client,
                                                          provider: str) -> None:
    before = api.get("/v1/config").json()
    answer = api.post("/v1/config/apply",
                      json={"documents": list(yaml.safe_load_all(FILE % provider))})
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["type"] == "SpecError"
    assert error["field"] == "documents[0] (ResourceFlavor spot).provisioning.provider"
    assert "the providers this control plane has: none" in error["message"]
    assert "nothing was applied" in error["message"]
    assert error["fix"]
    assert api.get("/v1/config").json() == before  # not the ClusterQueue either


def test_phalanx_apply_says_which_field_and_applies_nothing(sim_server: LiveServer,
                                                           tmp_path: Path) -> None:
    path = tmp_path / "pools.yaml"
    path.write_text(FILE % "simulated")
    done = subprocess.run([sys.executable, "-m", "phalanx.cli.main", "apply", "-f", str(path)],
                          env={**sim_server.env, "COLUMNS": "300"}, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    said = " ".join(done.stderr.split())
    assert "documents[0] (ResourceFlavor spot).provisioning.provider:" in said
    assert "phalanx sim" in said
    with sim_server.client() as api:
        names = {d["name"] for d in api.get("/v1/config").json()["documents"]}
    assert "spot" not in names and "burst" not in names


# Which providers serve a plane, and why one does not, asked of a simulated and a local
# plane in a fresh interpreter: nothing of the Kubernetes plane (an optional extra) loads.
NO_EXTRA = """
import sys, tempfile
from pathlib import Path
from phalanx.compute.local import LocalPlane
from phalanx.compute.simulated import SimulatedPlane
from phalanx.provisioning.registry import PROVIDERS, available_providers, unavailable_reason
from phalanx.spec import Node
simulated = SimulatedPlane([Node(name="n", allocatable={"cpu": "1"})])
local = LocalPlane(Path(tempfile.mkdtemp()))
print(available_providers(simulated), available_providers(local))
for name in sorted(PROVIDERS):
    print(name, "|", unavailable_reason(name, local))
local.close()
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("kubernetes", "urllib3")
                or m.startswith("phalanx.compute.kubernetes"))
print("loaded", loaded)
"""


def test_choosing_providers_imports_no_plane_of_an_extra() -> None:
    done = subprocess.run([sys.executable, "-c", NO_EXTRA], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "[] ['local']"
    assert "loaded []" in lines, done.stdout
    refusal = next(line for line in lines if line.startswith("kubernetes-provisioningrequest"))
    assert "drives the local plane" in refusal and "--compute kubernetes" in refusal
