"""The PostgreSQL cases are skipped only outside CI."""

from __future__ import annotations

import pytest

from tests.store.postgres import POSTGRES_ENV, postgres_admin_url


def test_without_a_server_under_ci_the_cases_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(POSTGRES_ENV, raising=False)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=POSTGRES_ENV):
        postgres_admin_url()


def test_without_a_server_elsewhere_the_cases_skip(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(POSTGRES_ENV, raising=False)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception):
        postgres_admin_url()
