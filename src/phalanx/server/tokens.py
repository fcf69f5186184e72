"""Short-lived signed tokens (JWTs, HS256) and the signing keys kept in the state directory.

The signing keys live in ``signing-keys.json`` (0600): the current one signs, and the one
before it still verifies until the tokens it signed have expired, so rotating the key
(``phalanx auth rotate-signing-key``) logs no one out.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt

from phalanx.defaults import replace_private

ALGORITHM = "HS256"
ISSUER = "phalanx"
SIGNING_FILE = "signing-keys.json"


@dataclass(frozen=True, slots=True)
class SigningKey:
    kid: str
    secret: bytes
    created_at: float


class SigningKeys:
    """The current signing key and the previous one, persisted owner-only."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self.keys: list[SigningKey] = self._load()
        if not self.keys:
            self.rotate()

    def _load(self) -> list[SigningKey]:
        try:
            raw = json.loads(self.path.read_text())
            return [SigningKey(k["kid"], bytes.fromhex(k["secret"]), float(k["createdAt"]))
                    for k in raw["keys"]]
        except (OSError, ValueError, KeyError, TypeError):
            return []

    def reload(self) -> None:
        """The keys as the file holds them now (another process may have rotated them)."""
        keys = self._load()
        if keys:
            with self._lock:
                self.keys = keys

    def rotate(self) -> SigningKey:
        """A new current key; the current one is kept to verify the tokens it signed."""
        key = SigningKey(secrets.token_hex(4), secrets.token_bytes(32), time.time())
        with self._lock:
            keys = [*self.keys[-1:], key]
            replace_private(self.path, json.dumps({"keys": [
                {"kid": k.kid, "secret": k.secret.hex(), "createdAt": k.created_at}
                for k in keys]}), self.path.with_suffix(".tmp"))
            self.keys = keys
        return key

    @property
    def current(self) -> SigningKey:
        return self.keys[-1]

    def sign(self, claims: dict[str, Any]) -> str:
        key = self.current
        return jwt.encode({**claims, "iss": ISSUER}, key.secret, algorithm=ALGORITHM,
                          headers={"kid": key.kid})

    def verify(self, token: str) -> dict[str, Any]:
        """The token's claims; ``jwt.InvalidTokenError`` (or a subclass: expired, bad
        signature, wrong algorithm, ``alg: none``) if it is not one of ours and in force."""
        keys = self.keys
        for key in reversed(keys):
            try:
                claims: dict[str, Any] = jwt.decode(
                    token, key.secret, algorithms=[ALGORITHM], issuer=ISSUER,
                    options={"require": ["exp", "iat", "sub", "iss"]})
                return claims
            except jwt.InvalidSignatureError:
                if key is keys[0]:
                    raise
        raise jwt.InvalidTokenError("no signing key")
