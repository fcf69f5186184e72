"""The secret vault on a real store: encryption at rest, rotation, resolution and its
refusals (each naming the field and the fix)."""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from phalanx.errors import NotFound, SpecError
from phalanx.server.secrets import SECRET_KEYS_FILE, SecretVault
from phalanx.spec.resources import JobSpec
from phalanx.spec.secrets import check_secret_data
from phalanx.store import AuditEntry, Store
from phalanx.store.secrets import SecretStore
from phalanx.store.tables import secrets as secrets_table

VALUE = b"marker-3b8e1f"
TEAMS = {"alice": ("team-a",), "bob": ("team-b",)}


@pytest.fixture
def vault(tmp_path: Path) -> Iterator[SecretVault]:
    store = Store.for_home(tmp_path)
    yield SecretVault(tmp_path, SecretStore(store), lambda user: TEAMS.get(user, ()))
    store.close()


def _create(vault: SecretVault, name: str, data: dict[str, bytes], *, user: str = "alice",
            team: str | None = "team-a", kind: str = "env") -> None:
    vault.create(name=name, kind=kind, data=data, user=user, team=team,
                 audit=AuditEntry(user, "test", "secret-create", name))


def _job(**pod_set: Any) -> JobSpec:
    return JobSpec.model_validate({"name": "j", "podSets": [
        {"command": ["true"], **pod_set}]})


def _ciphertexts(vault: SecretVault) -> list[str]:
    with vault.store.engine.connect() as connection:
        return list(connection.execute(select(secrets_table.c.ciphertext)).scalars())


def test_values_are_stored_encrypted_and_survive_a_rotation(vault: SecretVault,
                                                            tmp_path: Path) -> None:
    _create(vault, "hf", {"HF_TOKEN": VALUE})
    keys_file = tmp_path / SECRET_KEYS_FILE
    assert stat.S_IMODE(keys_file.stat().st_mode) == 0o600
    [before] = _ciphertexts(vault)
    assert VALUE not in before.encode() and b"HF_TOKEN" not in before.encode()
    job = _job(envFrom=[{"secret": "hf"}])
    assert vault.material(job, "alice", TEAMS["alice"]).env == {"worker": {"HF_TOKEN": "marker-3b8e1f"}}

    old_kids = [k["kid"] for k in json.loads(keys_file.read_text())["keys"]]
    assert vault.rotate() == 1
    [after] = _ciphertexts(vault)
    assert after != before  # re-encrypted under the new key
    kids = [k["kid"] for k in json.loads(keys_file.read_text())["keys"]]
    assert kids[:-1] == old_kids[-1:] and kids[-1] not in old_kids
    vault.rotate()  # the first key is dropped now: every value must be under a later one
    assert old_kids[0] not in [k["kid"] for k in json.loads(keys_file.read_text())["keys"]]
    again = SecretVault(tmp_path, vault.store, vault.teams_of)  # a restarted control plane
    assert again.for_attempt(job, "alice").env["worker"]["HF_TOKEN"] == "marker-3b8e1f"


def test_another_teams_secret_is_answered_as_a_missing_one(vault: SecretVault) -> None:
    _create(vault, "hf", {"HF_TOKEN": VALUE})
    answers = []
    for ref in ("hf", "team-a/hf", "nope", "team-a/nope"):
        with pytest.raises(NotFound) as refused:
            vault.material(_job(envFrom=[{"secret": ref}]), "bob", TEAMS["bob"])
        answers.append((refused.value.message.replace(ref, "REF"), refused.value.field,
                        refused.value.fix))
    assert len(set(answers)) == 1, answers
    assert answers[0][1] == "podSets[0].envFrom[0].secret"
    assert vault.visible("bob", TEAMS["bob"]) == []
    # alice's own secret of the same name makes the short name ambiguous for her only.
    _create(vault, "hf", {"HF_TOKEN": b"own"}, team=None)
    with pytest.raises(SpecError, match="both your own and team team-a's"):
        vault.material(_job(envFrom=[{"secret": "hf"}]), "alice", TEAMS["alice"])
    picked = vault.material(_job(envFrom=[{"secret": "team-a/hf"}]), "alice", TEAMS["alice"])
    assert picked.env["worker"]["HF_TOKEN"] == VALUE.decode()


@pytest.mark.parametrize(("pod_set", "field", "says"), [
    ({"secretEnv": [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "files",
                                                                 "key": "absent"}}}]},
     "podSets[0].secretEnv[0].valueFrom.secretKeyRef.key", "has no key 'absent'"),
    ({"envFrom": [{"secret": "files"}]}, "podSets[0].envFrom[0].secret", "not a variable name"),
    ({"imagePullSecrets": ["files"]}, "podSets[0].imagePullSecrets[0].name", "not docker"),
])
def test_a_use_that_does_not_fit_the_secret_is_refused(
        vault: SecretVault, pod_set: dict[str, Any], field: str, says: str) -> None:
    _create(vault, "files", {"config.json": b"{}"}, kind="file")
    with pytest.raises(SpecError, match=says) as refused:
        vault.material(_job(**pod_set), "alice", TEAMS["alice"])
    assert refused.value.field == field and refused.value.fix


@pytest.mark.parametrize(("kind", "data", "says"), [
    ("env", {"not-a-var": b"x"}, "not a variable name"),
    ("docker", {"config.json": b"{}"}, "one key, .dockerconfigjson"),
    ("docker", {".dockerconfigjson": b"[]"}, "not a docker config"),
    ("ssh", {"id": b"k"}, "ssh-privatekey"),
    ("file", {"../escape": b"x"}, "not a file name"),
    ("file", {}, "at least one key"),
])
def test_data_that_does_not_suit_the_type_is_refused(kind: str, data: dict[str, bytes],
                                                     says: str) -> None:
    with pytest.raises(ValueError, match=says):
        check_secret_data(kind, data)


def test_the_list_form_of_env_keeps_the_map_form_and_refuses_a_variable_set_twice() -> None:
    job = _job(env=[{"name": "A", "value": "1"},
                    {"name": "B", "secretKeyRef": {"name": "s", "key": "k"}}])
    assert job.pod_sets[0].env == {"A": "1"}
    assert [e.name for e in job.pod_sets[0].secret_env] == ["B"]
    assert job.to_dict()["podSets"][0]["secretEnv"] == [
        {"name": "B", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]
    assert JobSpec.model_validate(job.to_dict()) == job  # the stored form reads back
    with pytest.raises(Exception, match="set twice"):
        _job(env={"B": "1"}, secretEnv=[{"name": "B", "secretKeyRef": {"name": "s", "key": "k"}}])
    with pytest.raises(Exception, match="which the job does not list"):
        _job(mounts=[{"name": "creds", "mountPath": "/etc/creds"}])
