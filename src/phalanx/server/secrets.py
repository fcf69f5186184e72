"""Secrets at rest and in use: encrypted in the store, resolved for a job's attempt.

Encryption: Fernet (``cryptography``: AES-128-CBC and HMAC-SHA256, authenticated, a random
IV per message) under a key kept in the state directory beside the signing keys
(``secret-keys.json``, 0600), never in the store: a copy of the database alone reveals no
value. The store holds one ciphertext per secret (its whole key -> value map) and the
keys' names in clear, for lists.

Rotation goes with the signing key's (``phalanx keys rotate-signing``, ``POST
/v1/auth/signing-key:rotate``): a new key is written beside the old ones, every secret is
re-encrypted under it in one transaction, and only then is the file trimmed to the new key
and the one before. A crash at any step leaves every ciphertext readable with the keys on
disk.

Use: a job names secrets by ``NAME`` (the submitter's own, else one of their teams') or
``TEAM/NAME``. Whoever is not the owner or a member of the owning team gets the answer a
missing secret gets, so a refusal never tells whether another team's secret exists. The
same resolution runs at submit (refusing what cannot resolve, naming the field) and at
each launch (with the owner's teams as they are then), which hands the values to the plane
for that attempt only (``compute/base.py``'s ``AttemptSecrets``).
"""

from __future__ import annotations

import base64
import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from phalanx.compute.base import AttemptSecrets
from phalanx.defaults import replace_private
from phalanx.errors import Forbidden, InternalError, NotFound, SpecError
from phalanx.spec.resources import JobSpec
from phalanx.spec.secrets import DOCKER_KEY, ENV_NAME, SECRET_REF, SSH_KEY
from phalanx.store.identity import AuditEntry
from phalanx.store.secrets import TEAM_OWNER, USER_OWNER, SecretStore, StoredSecret

SECRET_KEYS_FILE = "secret-keys.json"
# The teams a user is in now (empty for a name the store does not know).
TeamsOf = Callable[[str], Sequence[str]]


def owner_of(user: str, team: str | None) -> str:
    return f"{TEAM_OWNER}{team}" if team else f"{USER_OWNER}{user}"


def owners_for(user: str, teams: Iterable[str]) -> list[str]:
    """Whose secrets ``user`` may use: their own, then their teams', in that order."""
    return [owner_of(user, None), *(owner_of(user, t) for t in teams)]


@dataclass(frozen=True, slots=True)
class _Key:
    kid: str
    key: bytes
    created_at: float


class SecretKeys:
    """The encryption keys, newest last, persisted owner-only beside the signing keys."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.keys = self._load()
        if not self.keys:
            self._save([self._new()])

    def _load(self) -> list[_Key]:
        try:
            raw = json.loads(self.path.read_text())
            return [_Key(k["kid"], k["key"].encode(), float(k["createdAt"])) for k in raw["keys"]]
        except FileNotFoundError:
            return []
        except (OSError, ValueError, KeyError, TypeError) as exc:
            # Not a fresh start: making a new key would orphan every stored secret.
            raise InternalError(f"cannot read the secrets' keys {self.path}: {exc}",
                                fix="restore the file from a backup of the state "
                                    "directory") from None

    @staticmethod
    def _new() -> _Key:
        return _Key(os.urandom(4).hex(), Fernet.generate_key(), time.time())

    def _save(self, keys: list[_Key]) -> None:
        replace_private(self.path, json.dumps({"keys": [
            {"kid": k.kid, "key": k.key.decode(), "createdAt": k.created_at} for k in keys]}),
            self.path.with_suffix(".tmp"))
        self.keys = keys

    @property
    def fernet(self) -> MultiFernet:
        """Encrypts with the newest key, decrypts with any."""
        return MultiFernet([Fernet(k.key) for k in reversed(self.keys)])


class SecretVault:
    """Creates, lists, deletes and resolves secrets; the only holder of their values."""

    def __init__(self, home: Path, store: SecretStore, teams_of: TeamsOf) -> None:
        self.store = store
        self.keys = SecretKeys(home / SECRET_KEYS_FILE)
        self.teams_of = teams_of
        self._lock = threading.Lock()  # a rotation and a create never interleave

    # ------------------------------------------------------------------ values
    def _seal(self, data: dict[str, bytes]) -> str:
        plain = json.dumps({k: base64.b64encode(v).decode() for k, v in data.items()})
        return self.keys.fernet.encrypt(plain.encode()).decode()

    def _open(self, secret: StoredSecret) -> dict[str, bytes]:
        try:
            plain = self.keys.fernet.decrypt(secret.ciphertext.encode())
        except InvalidToken:
            raise InternalError(f"secret {secret.name!r} does not decrypt with the keys in "
                                f"{self.keys.path}", fix="restore the state directory's "
                                "secret-keys.json from the backup taken with the database"
                                ) from None
        return {k: base64.b64decode(v) for k, v in json.loads(plain).items()}

    # ------------------------------------------------------------------ management
    def create(self, *, name: str, kind: str, data: dict[str, bytes], user: str,
               team: str | None, audit: AuditEntry) -> StoredSecret:
        secret = StoredSecret(owner_of(user, team), name, kind, tuple(sorted(data)), "",
                              time.time(), user)
        with self._lock:
            sealed = replace(secret, ciphertext=self._seal(data))
            self.store.create(sealed, audit)
        return sealed

    def visible(self, user: str, teams: Sequence[str]) -> list[StoredSecret]:
        """The secrets ``user`` may use: an admin too sees only their own and their teams'."""
        return self.store.list(owners_for(user, teams))

    def delete(self, ref: str, user: str, teams: Sequence[str], audit: AuditEntry
               ) -> StoredSecret:
        found = self.resolve(ref, user, teams, field="name")
        return self.store.delete(found.owner, found.name, audit)

    def rotate(self) -> int:
        """A new key, every secret re-encrypted under it; how many were."""
        with self._lock:
            old = list(self.keys.keys)
            new = SecretKeys._new()
            self.keys._save([*old, new])  # first, so a crash leaves nothing unreadable
            fernet = self.keys.fernet
            count = self.store.reencrypt(lambda c: fernet.rotate(c.encode()).decode())
            self.keys._save([*old[-1:], new])
        return count

    # ------------------------------------------------------------------ use
    def resolve(self, ref: str, user: str, teams: Sequence[str], *, field: str
                ) -> StoredSecret:
        """The secret ``ref`` names for ``user``; NotFound, the same whether it does not
        exist or belongs to someone else, otherwise."""
        match = SECRET_REF.fullmatch(ref)
        missing = NotFound(f"no secret {ref!r} that {user} may use", field=field,
                           fix="name one of your own or your teams' secrets (`phalanx "
                               "secrets list`), or TEAM/NAME")
        if match is None:
            raise missing
        team, name = match.group(1), match.group(3)
        if team is not None:
            candidates = [owner_of(user, team)] if team in teams else []
        else:
            candidates = owners_for(user, teams)
        found = [s for s in (self.store.get(o, name) for o in candidates) if s is not None]
        if not found:
            raise missing
        if len(found) > 1:
            owners = ", ".join(s.owner.split(":", 1)[1] for s in found[1:])
            raise SpecError(f"secret {name!r} is both your own and team {owners}'s",
                            field=field, fix=f"write TEAM/{name} to use a team's")
        return found[0]

    def material(self, spec: JobSpec, user: str, teams: Sequence[str]) -> AttemptSecrets:
        """The values the job's pods get, checked: what the job names must exist, be the
        user's to use, hold the keys named, and suit its use. Submit and launch both ask."""
        if not spec.secret_refs():
            return AttemptSecrets()
        opened: dict[str, tuple[StoredSecret, dict[str, bytes]]] = {}

        def values(ref: str, field: str) -> tuple[StoredSecret, dict[str, bytes]]:
            if ref not in opened:
                found = self.resolve(ref, user, teams, field=field)
                opened[ref] = (found, self._open(found))
            return opened[ref]

        def text(value: bytes, field: str) -> str:
            try:
                return value.decode()
            except UnicodeDecodeError:
                raise SpecError("the secret's value is not UTF-8 text, so it cannot be a "
                                "variable", field=field, fix="mount it as a file "
                                "(volumes) instead") from None

        env: dict[str, dict[str, str]] = {}
        pull: dict[str, bytes] = {}
        for i, pod_set in enumerate(spec.pod_sets):
            variables: dict[str, str] = {}
            for j, source in enumerate(pod_set.env_from):
                field = f"podSets[{i}].envFrom[{j}].secret"
                _, data = values(source.secret, field)
                for key, value in data.items():
                    if not ENV_NAME.fullmatch(key):
                        raise SpecError(f"secret {source.secret!r} has key {key!r}, which is "
                                        "not a variable name", field=field,
                                        fix="use secretEnv (env with valueFrom) for that key, "
                                            "or mount the secret as files")
                    variables[key] = text(value, field)
            for j, item in enumerate(pod_set.secret_env):
                ref = item.value_from.secret_key_ref
                field = f"podSets[{i}].secretEnv[{j}].valueFrom.secretKeyRef"
                _, data = values(ref.name, f"{field}.name")
                if ref.key not in data:
                    raise SpecError(f"secret {ref.name!r} has no key {ref.key!r}",
                                    field=f"{field}.key",
                                    fix=f"use one of {', '.join(sorted(data))}")
                variables[item.name] = text(data[ref.key], field)
            if variables:
                env[pod_set.name] = variables
            for j, pulled in enumerate(pod_set.image_pull_secrets):
                field = f"podSets[{i}].imagePullSecrets[{j}].name"
                found, data = values(pulled.name, field)
                if found.type != "docker":
                    raise SpecError(f"secret {pulled.name!r} is of type {found.type}, not "
                                    "docker", field=field, fix="create a registry secret "
                                    f"with --type docker --from-file {DOCKER_KEY}=config.json")
                pull[pulled.name] = data[DOCKER_KEY]
        volumes = {v.name: values(v.secret.secret_name, f"volumes[{i}].secret.secretName")[1]
                   for i, v in enumerate(spec.volumes) if v.secret is not None}
        git: dict[str, bytes] = {}
        if spec.git is not None and spec.git.ssh_key_secret is not None:
            key_ref, field = spec.git.ssh_key_secret, "git.sshKeySecret"
            found, data = values(key_ref, field)
            if found.type != "ssh" or SSH_KEY not in data:
                raise SpecError(f"secret {key_ref!r} is of type {found.type}, not ssh",
                                field=field, fix="create a key secret with --type ssh "
                                f"--from-file {SSH_KEY}=~/.ssh/id_ed25519")
            git = data
        return AttemptSecrets(env=env, volumes=volumes, pull=pull, git=git)

    def for_attempt(self, spec: JobSpec, user: str) -> AttemptSecrets:
        """What a launch hands the plane: resolved with the owner's teams as they are now,
        so a user who left a team no longer brings its secrets to a new attempt."""
        return self.material(spec, user, self.teams_of(user))


def check_team(team: str | None, teams: Sequence[str]) -> None:
    """Forbidden unless the caller may create or delete a secret of ``team``."""
    if team is not None and team not in teams:
        raise Forbidden(f"secrets of team {team} are its members' to manage", field="team",
                        fix="name one of your teams, or leave --team out for a secret of "
                            "your own")
