"""Which env values API answers redact, and that the stored job keeps the real ones."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from phalanx.compute.simulated import SimulatedPlane
from phalanx.control import Controller
from phalanx.errors import SpecError
from phalanx.server.app import create_app
from phalanx.server.auth import Authenticator
from phalanx.server.redaction import (
    REDACTED,
    SecretEnvRule,
    Viewer,
    job_as_seen_by,
    name_words,
)
from phalanx.spec.resources import Node
from phalanx.store import IdentityStore, LogStore, Store, User


@pytest.mark.parametrize("name", [
    "HF_TOKEN", "hf_token", "GITHUB_TOKENS", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD",
    "MYSQL_PASSWD", "WANDB_API_KEY", "wandbApiKey", "APIKey", "OPENAI_APIKEY", "KEY",
    "ssh-key", "GOOGLE_APPLICATION_CREDENTIALS", "AccessToken", "gpg.passphrase",
    "S3_SECRETKEY",
])
def test_names_with_a_secret_word_are_secret(name: str) -> None:
    assert SecretEnvRule().is_secret(name)


@pytest.mark.parametrize("name", [
    "TOKENIZERS_PARALLELISM", "KEYBOARD_LAYOUT", "MONKEY_PATCH", "HOCKEY", "PWD",
    "MASTER_ADDR", "NCCL_SOCKET_IFNAME", "CUDA_VISIBLE_DEVICES", "SECRETARY", "PASSES",
    "PHALANX_JOB",
])
def test_names_that_merely_contain_a_secret_word_are_not(name: str) -> None:
    assert not SecretEnvRule().is_secret(name)


def test_words_split_at_separators_and_camel_case() -> None:
    assert name_words("wandbApiKey") == ["WANDB", "API", "KEY"]
    assert name_words("APIKey_2") == ["API", "KEY", "2"]
    assert name_words("TOKENIZERS_PARALLELISM") == ["TOKENIZERS", "PARALLELISM"]


def test_the_operator_extends_the_rule_with_names_and_globs() -> None:
    rule = SecretEnvRule(extra=("corp_*", "LOGIN"))
    assert rule.is_secret("CORP_ANYTHING") and rule.is_secret("Corp_x")
    assert rule.is_secret("login") and not rule.is_secret("LOGIN_URL")
    assert not SecretEnvRule().is_secret("CORP_ANYTHING")


def test_a_bad_pattern_names_the_option_and_the_fix() -> None:
    with pytest.raises(SpecError) as caught:
        SecretEnvRule(extra=("A B",))
    assert caught.value.field == "--secret-env" and caught.value.fix


# --------------------------------------------------------------------------- over the API
NODE = Node(name="n1", allocatable={"cpu": "4", "memory": "8Gi"})
ENV = {"HF_TOKEN": "hf-real", "CORP_LOGIN": "corp-real", "TOKENIZERS_PARALLELISM": "false"}


@pytest.fixture
def app_client(tmp_path: Path) -> Iterator[tuple[TestClient, Controller]]:
    store = Store.for_home(tmp_path)
    plane = SimulatedPlane([NODE])
    controller = Controller(store, plane)
    identity = IdentityStore(controller.store)
    for name in ("ann", "me"):  # admins, so they may submit to any queue
        identity.put_user(User(name, "admin"), None)
    app = create_app(controller, Authenticator(tmp_path, identity, bootstrap_key="tok"),
                     LogStore(tmp_path / "logs"), db_label="sqlite",
                     secrets=SecretEnvRule(extra=("CORP_*",)))
    with TestClient(app, headers={"Authorization": "Bearer tok"}) as client:
        yield client, controller
    plane.close()
    store.close()


def _job(name: str) -> dict[str, Any]:
    return {"name": name, "podSets": [{"name": "w", "resources": {"cpu": "1"},
                                        "command": ["true"], "env": dict(ENV)}]}


def _env(answer: dict[str, Any]) -> dict[str, str]:
    env: dict[str, str] = answer["spec"]["podSets"][0]["env"]
    return env


def test_every_answer_that_carries_a_spec_is_redacted_but_to_its_owner(
    app_client: tuple[TestClient, Controller],
) -> None:
    client, controller = app_client
    ann = {"X-Phalanx-Act-As": "ann"}  # the bootstrap key's admin acts as ann
    expected = {"HF_TOKEN": REDACTED, "CORP_LOGIN": REDACTED, "TOKENIZERS_PARALLELISM": "false"}
    submitted = client.post("/v1/jobs", json=_job("one"), headers=ann)
    assert submitted.status_code == 201 and _env(submitted.json()) == ENV
    batch = client.post("/v1/jobs:batch", json={"items": [_job("two"), _job("three")]},
                        headers=ann)
    assert batch.status_code == 201
    assert [_env(j) for j in batch.json()["items"]] == [ENV, ENV]
    # The admin, who did not submit them, sees them redacted; ann sees hers in full.
    assert all(_env(j) == expected for j in client.get("/v1/jobs").json()["items"])
    assert all(_env(j) == ENV for j in client.get("/v1/jobs", headers=ann).json()["items"])
    assert _env(client.get("/v1/jobs/one").json()) == expected
    assert _env(client.get("/v1/jobs/one", headers=ann).json()) == ENV
    assert _env(client.post("/v1/jobs/one/cancel").json()) == expected
    # What the control plane keeps, and hands the pods, is the real value.
    stored = controller.service.get("two")
    assert stored.spec.pod_sets[0].env == ENV
    assert controller.store.get_job("two").spec.pod_sets[0].env == ENV


def test_only_the_submitter_owns_a_job(
    app_client: tuple[TestClient, Controller],
) -> None:
    client, controller = app_client
    client.post("/v1/jobs", json=_job("mine"), headers={"X-Phalanx-Act-As": "me"})
    record = controller.service.get("mine")
    rule = SecretEnvRule()
    assert job_as_seen_by(record, Viewer("me", "member"), rule).spec.pod_sets[0].env == ENV
    hidden = job_as_seen_by(record, Viewer("someone", "admin"), rule)
    assert hidden.spec.pod_sets[0].env["HF_TOKEN"] == REDACTED
    assert record.spec.pod_sets[0].env == ENV  # redacting copies; the original is untouched
