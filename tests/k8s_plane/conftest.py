"""A fake API server on loopback, and planes connected to it through a kubeconfig."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from phalanx.compute.kubernetes import KubernetesPlane, Settings
from tests.k8s_plane.fake_apiserver import FakeAPIServer

RUNS = "runs"


@pytest.fixture
def api() -> Iterator[FakeAPIServer]:
    server = FakeAPIServer(namespaces=("default", RUNS)).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def kubeconfig(api: FakeAPIServer, tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(api.kubeconfig())
    return path


PlaneFactory = Callable[..., KubernetesPlane]


@pytest.fixture
def make_plane(kubeconfig: Path, tmp_path: Path) -> Iterator[PlaneFactory]:
    planes: list[KubernetesPlane] = []

    def make(**settings: Any) -> KubernetesPlane:
        options = {"namespace": RUNS, "read_timeout": 5.0, **settings}
        plane = KubernetesPlane.connect(home=tmp_path / "home", kubeconfig=kubeconfig,
                                        namespace=RUNS, settings=Settings(**options))
        planes.append(plane)
        return plane

    yield make
    for plane in planes:
        plane.close()


def wait_until(condition: Callable[[], Any], timeout: float = 10.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what or condition}")
