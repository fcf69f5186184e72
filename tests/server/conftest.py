"""A live control plane on the simulated compute plane, over real HTTP, one per test module.

The simulated plane runs nothing on this machine, so the jobs a test (or the fuzzer)
submits are safe whatever their commands say.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.sdk.live_server import LiveServer

NODES = """\
nodes:
  - name: sim-a
    labels: {rack: r1}
    allocatable: {cpu: 8, memory: 32Gi, nvidia.com/gpu: 4}
  - name: sim-b
    labels: {rack: r2}
    allocatable: {cpu: 8, memory: 32Gi}
"""


@pytest.fixture(scope="module")
def sim_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with LiveServer.simulated(tmp_path_factory.mktemp("phalanx-sim"), NODES) as server:
        yield server


@pytest.fixture(scope="module")
def api(sim_server: LiveServer) -> Iterator[httpx.Client]:
    """The module's server's API, with its token."""
    with sim_server.client() as client:
        yield client
