"""The API token: created once per state directory, readable only by its owner."""

from __future__ import annotations

import hmac
import os
import secrets
from pathlib import Path

from phalanx.defaults import TOKEN_FILE

TOKEN_ENV = "PHALANX_TOKEN"


def ensure_token(home: Path) -> str:
    """Return the state directory's token, creating it (mode 0600) on first use.

    ``$PHALANX_TOKEN`` wins when set (on Kubernetes it comes from a Secret); it is
    written to the token file too, so the state directory always holds the token
    in force.
    """
    path = home / TOKEN_FILE
    from_env = os.environ.get(TOKEN_ENV, "").strip()
    if from_env:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)  # an older file may have been created with looser bits
        with os.fdopen(fd, "w") as handle:
            handle.write(from_env + "\n")
        return from_env
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(token + "\n")
    return token


def token_matches(header: str | None, token: str) -> bool:
    if not header or not header.startswith("Bearer "):
        return False
    return hmac.compare_digest(header.removeprefix("Bearer ").strip(), token)
