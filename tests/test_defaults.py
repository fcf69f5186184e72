"""The conventions shared by server, SDK, CLI and deployment."""

from __future__ import annotations

import pytest

from phalanx.defaults import DEFAULT_PORT, DEFAULT_URL, redact_url
from phalanx.deploy.values import Values


@pytest.mark.parametrize(("url", "shown"), [
    ("postgresql://me:s3cret@db:5432/phalanx", "postgresql://me:***@db:5432/phalanx"),
    ("postgresql+psycopg://me:s3cret@db/phalanx?sslmode=require",
     "postgresql+psycopg://me:***@db/phalanx?sslmode=require"),
    # an unencoded "@" or "/" in the password: more is masked, nothing of it is shown
    ("postgresql://me:p@ss/w@db/phalanx", "postgresql://me:***@db/phalanx"),
    ("postgresql://me@db/phalanx", "postgresql://me@db/phalanx"),  # no password
    ("postgresql://db/phalanx", "postgresql://db/phalanx"),
    ("sqlite:////var/lib/phalanx/phalanx.db", "sqlite:////var/lib/phalanx/phalanx.db"),
    ("not a url", "not a url"),
])
def test_redact_url_masks_the_password_only(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_one_port_for_server_sdk_and_deployment() -> None:
    assert DEFAULT_URL.endswith(f":{DEFAULT_PORT}")
    assert Values().worker.service.port == DEFAULT_PORT
