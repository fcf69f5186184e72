"""A real headless Chromium (Debian's ``chromium``) driven through Debian's
``chromium-driver`` by Selenium; never a downloaded browser."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", "--window-size=1280,900",
)
RESULTS = Path(os.environ.get("PHALANX_TEST_RESULTS",
                              Path(__file__).resolve().parents[2] / ".test-results"))


def need_chromium() -> None:
    """Skip without Chromium on a developer's machine; under CI (scripts/test.sh installs
    it) its absence fails."""
    if Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists():
        return
    message = "needs Debian's chromium and chromium-driver (scripts/chromium.sh installs them)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@contextmanager
def chromium() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    need_chromium()
    profile = tempfile.mkdtemp(prefix="phalanx-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def console_errors(driver: Any) -> list[str]:
    """The browser console's errors since the last call (reading the log empties it)."""
    return [entry["message"] for entry in driver.get_log("browser")
            if entry["level"] == "SEVERE"]
