"""API keys: their format, their hash, and the state directory's bootstrap admin key.

A key is ``phx_<id>_<secret>``: ``id`` (12 hex digits) is the visible prefix that names
the key in lists and revocations; ``secret`` is 32 random bytes. The store keeps only
HMAC-SHA256(pepper, key). Keys are random, 256 bits of entropy, so no one can guess one
from its hash whatever the hash costs to compute: a slow KDF (argon2, scrypt) protects
low-entropy passwords and would only make each exchange slower. The pepper (a random
secret in the state directory, never in the store) means a copy of the store alone
cannot even test a candidate key.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
from pathlib import Path

from phalanx.defaults import TOKEN_FILE

KEY_PREFIX = "phx_"
PEPPER_FILE = "key-pepper"
TOKEN_ENV = "PHALANX_TOKEN"
_KEY = re.compile(r"^phx_([0-9a-f]{12})_[A-Za-z0-9_-]{20,}$")


def new_key() -> tuple[str, str]:
    """A new key and its id."""
    key_id = secrets.token_hex(6)
    return f"{KEY_PREFIX}{key_id}_{secrets.token_urlsafe(32)}", key_id


def key_id_of(key: str) -> str | None:
    """The id of a key of this format, or None (the bootstrap key may be any string)."""
    match = _KEY.match(key)
    return match.group(1) if match else None


def _read_or_create(path: Path, make: str) -> str:
    """The file's content, creating it owner-only with ``make`` if it does not exist."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    with os.fdopen(fd, "w") as handle:
        handle.write(make + "\n")
    return make


class KeyHasher:
    """HMAC-SHA256 of keys under the state directory's pepper."""

    def __init__(self, pepper: bytes) -> None:
        self.pepper = pepper

    @classmethod
    def for_home(cls, home: Path) -> KeyHasher:
        return cls(bytes.fromhex(_read_or_create(home / PEPPER_FILE, secrets.token_hex(32))))

    def hash(self, key: str) -> str:
        return hmac.new(self.pepper, key.encode(), hashlib.sha256).hexdigest()

    def matches(self, key: str, stored_hash: str) -> bool:
        return hmac.compare_digest(self.hash(key), stored_hash)


def ensure_bootstrap_key(home: Path) -> str:
    """The state directory's admin key, creating it (mode 0600) on first use.

    ``$PHALANX_TOKEN`` wins when set (on Kubernetes it comes from the API key Secret) and
    is written to the file too, so the state directory always holds the key in force. A
    file left by an earlier version holds its single token, which stays the admin key.
    """
    path = home / TOKEN_FILE
    from_env = os.environ.get(TOKEN_ENV, "").strip()
    if from_env:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)  # an older file may have been created with looser bits
        with os.fdopen(fd, "w") as handle:
            handle.write(from_env + "\n")
        return from_env
    return _read_or_create(path, new_key()[0])


CONTROL_PLANE_ID_FILE = "control-plane-id"


def control_plane_id(home: Path) -> str:
    """This control plane's identity (made once, kept in the state directory): workers
    record it and refuse to act for another control plane with the same state directory."""
    return _read_or_create(home / CONTROL_PLANE_ID_FILE, f"cp-{secrets.token_hex(6)}")
