"""The package root loads its names on first use, and still offers all of them."""

from __future__ import annotations

import subprocess
import sys

import pytest

import phalanx


def _python(code: str) -> subprocess.CompletedProcess[str]:
    # A fresh interpreter: this one has imported everything already.
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)


def test_importing_the_scheduler_does_not_load_the_http_client() -> None:
    result = _python(
        "import sys, phalanx.scheduler\n"
        "assert 'httpx' not in sys.modules, 'httpx loaded'\n"
        "assert 'phalanx.sdk' not in sys.modules, 'phalanx.sdk loaded'\n"
    )
    assert result.returncode == 0, result.stderr


def test_the_simulator_loads_no_database_http_or_cluster_client() -> None:
    result = _python(
        "import sys, phalanx.sim\n"
        "loaded = {'sqlalchemy', 'httpx', 'fastapi', 'kubernetes'} & set(sys.modules)\n"
        "assert not loaded, loaded\n"
    )
    assert result.returncode == 0, result.stderr


def test_the_root_loads_the_sdk_when_a_name_asks_for_it() -> None:
    result = _python(
        "import sys, phalanx\n"
        "assert 'httpx' not in sys.modules\n"
        "from phalanx import Client\n"
        "assert 'httpx' in sys.modules and Client.__module__ == 'phalanx.sdk.client'\n"
    )
    assert result.returncode == 0, result.stderr


def test_the_sdk_loads_nothing_of_jupyter() -> None:
    # Notebook widgets are an extra (phalanx[notebook]); IPython only draws in a kernel.
    result = _python(
        "import sys, phalanx, phalanx.sdk, phalanx.ray\n"
        "from phalanx import Client, login, logout, TokenAuthentication\n"
        "loaded = {'ipywidgets', 'IPython', 'ipykernel', 'comm'} & set(sys.modules)\n"
        "assert not loaded, loaded\n"
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("name", phalanx.__all__)
def test_every_exported_name_resolves(name: str) -> None:
    assert getattr(phalanx, name) is not None
    assert name in dir(phalanx)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Clinet'"):
        _ = phalanx.Clinet  # type: ignore[attr-defined]
