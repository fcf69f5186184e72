"""The jobs widget in JupyterLab (from PyPI) in a real headless Chromium: a notebook shows
``view_jobs()``, a click on a running job's cancel button cancels it in the control plane.
A screenshot of the widget goes to ``.test-results/notebook`` (``$PHALANX_TEST_RESULTS``)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.sdk.live_server import LiveServer
from tests.ui.browser import RESULTS, chromium, need_chromium

pytest.importorskip("jupyterlab")
pytest.importorskip("ipywidgets")
nbformat = pytest.importorskip("nbformat")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
WAIT = 120.0
SHOTS = RESULTS / "notebook"
LAB_TOKEN = "phalanx-test"
SLEEPER = "browser-sleeper"
WAITING = "browser-waiting"


def until(check: Callable[[], Any], what: str, seconds: float = WAIT) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        try:
            found = check()
        except Exception:  # the page is still being drawn
            found = None
        if found:
            return found
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.5)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    need_chromium()
    with LiveServer(tmp_path_factory.mktemp("phalanx-lab"),
                    ["--run-as-user", str(os.geteuid())]) as live:
        yield live


@pytest.fixture(scope="module")
def lab(server: LiveServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """JupyterLab serving a notebook that shows the jobs widget; its URL."""
    root = tmp_path_factory.mktemp("lab")
    notebook = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell("from phalanx.widgets import view_jobs\n"
                                         "view_jobs(interval=1.0)")],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}})
    nbformat.write(notebook, root / "jobs.ipynb")
    # No "Jupyter news?" toast over the screenshot.
    settings = root / ".lab-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')
    port = free_port()
    env = {**os.environ, "PHALANX_URL": server.url, "PHALANX_TOKEN": server.token,
           "PHALANX_CREDENTIALS": str(root / "credentials.json"),
           "JUPYTER_CONFIG_DIR": str(root / ".jupyter"),
           "JUPYTERLAB_SETTINGS_DIR": str(root / ".lab-settings"),
           "JUPYTER_RUNTIME_DIR": str(root / ".runtime")}
    log = (root / "lab.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root",
         f"--port={port}", "--ServerApp.ip=127.0.0.1", f"--ServerApp.token={LAB_TOKEN}",
         f"--ServerApp.root_dir={root}",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        until(lambda: httpx.get(f"{base}/api/status", params={"token": LAB_TOKEN},
                                timeout=2).status_code == 200, "JupyterLab answers")
        yield f"{base}/lab/tree/jobs.ipynb?token={LAB_TOKEN}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def test_the_cancel_button_in_jupyterlab_cancels_a_running_job(
    server: LiveServer, lab: str,
) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    with server.client() as api:
        response = api.post("/v1/jobs", json={"name": SLEEPER, "podSets": [{
            "name": "w", "resources": {"cpu": "100m"}, "command": ["sleep", "300"]}]})
        assert response.status_code == 201, response.text
        until(lambda: api.get(f"/v1/jobs/{SLEEPER}").json()["status"] == "Running",
              "the job runs")
        # The whole quota while the sleeper holds some: it waits, and its row says why.
        response = api.post("/v1/jobs", json={"name": WAITING, "podSets": [{
            "name": "w", "resources": {"cpu": "2"}, "command": ["sleep", "300"]}]})
        assert response.status_code == 201, response.text
        until(lambda: "cpu" in (api.get(f"/v1/jobs/{WAITING}").json()["pendingMessage"] or ""),
              "the second job says why it waits")
        with chromium() as driver:
            driver.get(lab)
            SHOTS.mkdir(parents=True, exist_ok=True)

            def click_the_cell() -> bool:
                driver.find_element(By.CSS_SELECTOR, ".jp-Notebook .jp-Cell .cm-content").click()
                return True

            try:
                until(click_the_cell, "the notebook opens")
                until(lambda: "| Idle" in driver.find_element(By.ID, "jp-main-statusbar").text,
                      "the kernel is ready")
            finally:
                driver.save_screenshot(str(SHOTS / "opened.png"))
            ActionChains(driver).key_down(Keys.SHIFT).send_keys(Keys.ENTER).key_up(
                Keys.SHIFT).perform()
            row = ("//div[contains(@class,'widget-hbox')]"
                   f"[.//*[normalize-space(text())='{SLEEPER}']]")
            cancel = until(lambda: driver.find_element(
                By.XPATH, f"{row}//button[normalize-space()='cancel']"),
                "the widget shows the job with its cancel button")
            until(lambda: driver.find_element(
                By.XPATH, f"{row}//*[normalize-space(text())='Running']"),
                "the row says Running")
            waiting = ("//div[contains(@class,'widget-hbox')]"
                       f"[.//*[normalize-space(text())='{WAITING}']]")
            why = api.get(f"/v1/jobs/{WAITING}").json()["pendingMessage"]
            until(lambda: why[:30] in driver.find_element(By.XPATH, waiting).text,
                  "the waiting row says why")
            driver.save_screenshot(str(SHOTS / "jobs-widget.png"))
            assert (SHOTS / "jobs-widget.png").stat().st_size > 10_000
            cancel.click()
            until(lambda: api.get(f"/v1/jobs/{SLEEPER}").json()["status"] == "Cancelled",
                  "the control plane cancelled the job")
            until(lambda: driver.find_element(
                By.XPATH, f"{row}//*[normalize-space(text())='Cancelled']"),
                "the widget shows it cancelled")
            assert not cancel.is_enabled()
            driver.save_screenshot(str(SHOTS / "jobs-widget-cancelled.png"))
        api.post(f"/v1/jobs/{WAITING}/cancel")
