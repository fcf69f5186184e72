"""Secrets: what a team keeps encrypted in the control plane, and how a job names them.

A secret belongs to a team or to one user; its values are never shown back. A job uses
one in Kubernetes' spellings:

- ``envFrom: [{secret: NAME}]`` (or ``[{secretRef: {name: NAME}}]``): every key of the
  secret as an environment variable of each pod of the pod set;
- ``env: [{name: VAR, valueFrom: {secretKeyRef: {name: NAME, key: KEY}}}]`` (the list
  form of ``env``; the map form stays): one key as one variable. Stored as
  ``secretEnv``, beside the plain variables of ``env``;
- ``volumes: [{name: V, secret: {secretName: NAME}}]`` on the job and
  ``mounts: [{name: V, mountPath: /etc/creds}]`` on a pod set: the keys as files, 0400
  (a source of phalanx.spec.volumes.Volume like any other);
- ``imagePullSecrets: [{name: NAME}]`` (a secret of type ``docker``): Kubernetes pulls
  the pod set's image with it.

A name is ``NAME`` (the submitter's own secret, else one of their teams': exactly one
may match) or ``TEAM/NAME``.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, StringConstraints, model_validator

from phalanx.spec.base import Model, Name

SecretType = Literal["env", "file", "ssh", "docker"]
DOCKER_KEY = ".dockerconfigjson"  # Kubernetes' key of a kubernetes.io/dockerconfigjson Secret
SSH_KEY = "ssh-privatekey"  # and of a kubernetes.io/ssh-auth Secret
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# A key: a file name in a mounted directory, as Kubernetes' Secret keys are.
SECRET_KEY = re.compile(r"^[-._A-Za-z0-9]{1,253}$")
# A reference: NAME or TEAM/NAME.
SECRET_REF = re.compile(r"^(?:([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)/)?"
                        r"([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)$")
SecretRef = Annotated[str, StringConstraints(pattern=SECRET_REF.pattern)]
MAX_SECRET_BYTES = 1 << 20  # Kubernetes' limit on a Secret's data, all keys together


def check_secret_data(kind: str, data: dict[str, bytes]) -> None:
    """ValueError naming the key at fault when ``data`` does not suit a secret of ``kind``."""
    if not data:
        raise ValueError("a secret needs at least one key; pass --from-literal K=V or "
                         "--from-file K=PATH")
    for key in data:
        if not SECRET_KEY.fullmatch(key) or key in (".", ".."):
            raise ValueError(f"key {key[:80]!r} is not a file name; use letters, digits, "
                             "'-', '_' and '.' (at most 253)")
        if kind == "env" and not ENV_NAME.fullmatch(key):
            raise ValueError(f"key {key[:80]!r} of an env secret is not a variable name; use "
                             "letters, digits and '_', not starting with a digit")
    if sum(len(v) for v in data.values()) > MAX_SECRET_BYTES:
        raise ValueError(f"the values add up to more than {MAX_SECRET_BYTES} bytes; keep a "
                         "secret under 1 MiB (Kubernetes' limit)")
    if kind == "docker":
        if set(data) != {DOCKER_KEY}:
            raise ValueError(f"a docker secret has one key, {DOCKER_KEY}: a registry "
                             f"config.json; pass --from-file {DOCKER_KEY}=~/.docker/config.json")
        try:
            auths = json.loads(data[DOCKER_KEY]).get("auths")
        except (ValueError, AttributeError):
            auths = None
        if not isinstance(auths, dict):
            raise ValueError(f"{DOCKER_KEY} is not a docker config (JSON with 'auths'); "
                             "pass the file `docker login` writes")
    if kind == "ssh" and SSH_KEY not in data:
        raise ValueError(f"an ssh secret holds its private key under {SSH_KEY}; pass "
                         f"--from-file {SSH_KEY}=~/.ssh/id_ed25519")


class SecretCreate(Model):
    """A secret to create: values base64-encoded (``data``), as in a Kubernetes Secret."""

    name: Name
    type: SecretType = "env"
    team: Name | None = Field(default=None, description="The owning team (the caller must be "
                              "a member); none: the caller's own secret")
    data: dict[str, str] = Field(description="Key to base64-encoded value")


class SecretView(Model):
    """A secret as listed: never its values."""

    name: str
    type: SecretType
    keys: list[str]
    team: str | None = Field(default=None, description="The owning team; none: a user's own")
    user: str | None = Field(default=None, description="The owning user, for a user's own")
    created_at: float
    created_by: str


class SecretList(Model):
    items: list[SecretView]


# --------------------------------------------------------------------------- references
class EnvFromSecret(Model):
    secret: SecretRef = Field(description="Every key of this secret becomes a variable")


def _env_from(value: object) -> object:
    # Kubernetes' spelling: {secretRef: {name: NAME}}.
    if isinstance(value, dict) and set(value) == {"secretRef"} and isinstance(
            value["secretRef"], dict) and set(value["secretRef"]) <= {"name", "optional"}:
        return {"secret": value["secretRef"].get("name")}
    return value


EnvFromItem = Annotated[EnvFromSecret, BeforeValidator(_env_from)]


class SecretKeySelector(Model):
    name: SecretRef
    key: Annotated[str, StringConstraints(pattern=SECRET_KEY.pattern)]


class SecretValueSource(Model):
    secret_key_ref: SecretKeySelector


class SecretEnvVar(Model):
    """One variable taken from one key of a secret."""

    name: Annotated[str, StringConstraints(pattern=ENV_NAME.pattern)]
    value_from: SecretValueSource

    @model_validator(mode="before")
    @classmethod
    def _short_form(cls, value: object) -> object:
        # The short form {name, secretKeyRef: {...}} reads as Kubernetes' valueFrom.
        if isinstance(value, dict) and "secretKeyRef" in value and "valueFrom" not in value:
            rest = {k: v for k, v in value.items() if k != "secretKeyRef"}
            return {**rest, "valueFrom": {"secretKeyRef": value["secretKeyRef"]}}
        return value


class PullSecret(Model):
    name: SecretRef


def _pull_secret(value: object) -> object:
    return {"name": value} if isinstance(value, str) else value


PullSecretItem = Annotated[PullSecret, BeforeValidator(_pull_secret)]


def split_env(value: object) -> tuple[object, list[object]]:
    """``env`` as written (a map, or Kubernetes' list) as the plain map and the list of
    variables taken from secrets. A list item with ``value`` is plain."""
    if not isinstance(value, list):
        return value, []
    plain: dict[object, object] = {}
    from_secrets: list[object] = []
    for item in value:
        if isinstance(item, dict) and ("valueFrom" in item or "secretKeyRef" in item):
            from_secrets.append(item)
        elif isinstance(item, dict) and set(item) <= {"name", "value"} and "name" in item:
            plain[item["name"]] = item.get("value", "")
        else:
            raise ValueError(f"env item {str(item)[:80]} is neither {{name, value}} nor "
                             "{name, valueFrom: {secretKeyRef: {name, key}}}")
    return plain, from_secrets
