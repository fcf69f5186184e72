"""The example notebooks run, cell by cell in a real Jupyter kernel (nbclient), against a
live control plane: one server for all of them, its URL and key given to the notebook in
``PHALANX_URL`` / ``PHALANX_TOKEN``, which it signs in with."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import REPO, ControlPlane, running

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("ipywidgets")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
NOTEBOOKS = REPO / "examples" / "notebooks"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    with running(ControlPlane(tmp_path_factory.mktemp("notebooks") / "home")) as cp:
        yield cp


def execute(plane: ControlPlane, name: str, tmp_path: Path,
            monkeypatch: pytest.MonkeyPatch) -> object:
    # The kernel inherits this environment: the server and its admin key, and a
    # credentials file of the test's own for the notebook's login.
    monkeypatch.setenv("PHALANX_URL", str(plane.api.base_url).rstrip("/"))
    monkeypatch.setenv("PHALANX_TOKEN", (plane.home / "token").read_text().strip())
    monkeypatch.setenv("PHALANX_CREDENTIALS", str(tmp_path / "credentials.json"))
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    return notebook


def outputs(notebook: object) -> list[dict[str, object]]:
    return [o for cell in notebook.cells if cell.cell_type == "code"  # type: ignore[attr-defined]
            for o in cell.outputs]


def test_every_example_notebook_is_tested() -> None:
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == sorted(
        ["quickstart.ipynb", "queue-sharing.ipynb", "ray-cluster.ipynb"])


def test_the_quick_start_runs(plane: ControlPlane, tmp_path: Path,
                              monkeypatch: pytest.MonkeyPatch) -> None:
    notebook = execute(plane, "quickstart.ipynb", tmp_path, monkeypatch)
    job = plane.job("quickstart-ddp")
    assert job["status"] == "Succeeded" and job["user"] == "admin"
    shown = outputs(notebook)
    # It signed in (the context is stored), showed tables and live widgets.
    assert json.loads((tmp_path / "credentials.json").read_text())["current"]
    html = [o["data"]["text/html"] for o in shown if "text/html" in o.get("data", {})]
    assert any("job quickstart-ddp (not submitted)" in h for h in html)
    assert sum(WIDGET_VIEW in o.get("data", {}) for o in shown) == 2  # jobs and the log tail
    assert any("done: 2 ranks" in str(o.get("text", "")) for o in shown)


def test_the_queue_sharing_demo_runs(plane: ControlPlane, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    notebook = execute(plane, "queue-sharing.ipynb", tmp_path, monkeypatch)
    assert plane.job("team-a-big")["preemptions"] >= 1
    assert any("team-a-big waits:" in str(o.get("text", "")) for o in outputs(notebook))


def test_the_ray_cluster_notebook_runs(plane: ControlPlane, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("ray")
    notebook = execute(plane, "ray-cluster.ipynb", tmp_path, monkeypatch)
    assert plane.job("notebook-ray")["status"] == "Cancelled"
    html = [str(o["data"]["text/html"]) for o in outputs(notebook)
            if "text/html" in o.get("data", {})]
    # The progress bar was updated in place to its end: both Ray nodes alive.
    assert any("phalanx-progress" in h and "2/2" in h and "Ray nodes alive" in h
               for h in html), html
    assert any("Ray cluster notebook-ray (not up)" in h for h in html)
    assert "ClusterStatus.DOWN" in str(outputs(notebook)[-1].get("data", {}))
