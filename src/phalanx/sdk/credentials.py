"""The per-user credentials file: one context (an API key) per control plane, like kubeconfig.

``phalanx login`` writes it (mode 0600) and makes its server the current context;
``phalanx logout`` removes the context. Its path is ``$PHALANX_CREDENTIALS``, else
``$XDG_CONFIG_HOME/phalanx/credentials.json``, else ``~/.config/phalanx/credentials.json``.

Beside it, ``tokens.json`` (also 0600) keeps the short-lived tokens the CLI's keys were
exchanged for (``TokenFile``), so that one command reuses the token of the last while it is
good: the key is exchanged (and audited as a login) only when its token nears expiry. It
holds no key: each token is filed under the control plane's URL and a hash of the key.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

CREDENTIALS_ENV = "PHALANX_CREDENTIALS"


def credentials_path() -> Path:
    if explicit := os.environ.get(CREDENTIALS_ENV):
        return Path(explicit).expanduser()
    config = os.environ.get("XDG_CONFIG_HOME") or "~/.config"
    return Path(config).expanduser() / "phalanx" / "credentials.json"


def _load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {"contexts": {}}
    if not isinstance(data, dict) or not isinstance(data.get("contexts"), dict):
        return {"contexts": {}}
    return data


def _save(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    # Its own name per process: two commands saving at once each replace the file whole.
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(data, handle, indent=2)
    os.replace(partial, path)


def current_url() -> str | None:
    """The server of the last login, if its context is still there."""
    data = _load(credentials_path())
    url = data.get("current")
    return url if isinstance(url, str) and url in data["contexts"] else None


def key_for(url: str) -> str | None:
    context = _load(credentials_path())["contexts"].get(url.rstrip("/"))
    key = context.get("key") if isinstance(context, dict) else None
    return key if isinstance(key, str) and key else None


def save_context(url: str, key: str, user: str) -> Path:
    """Store ``key`` for ``url`` and make it the current context; the file's path."""
    path = credentials_path()
    data = _load(path)
    url = url.rstrip("/")
    data["contexts"][url] = {"key": key, "user": user}
    data["current"] = url
    _save(path, data)
    return path


def remove_context(url: str) -> bool:
    """Forget ``url``'s key (and the current context if it was that); whether it was there."""
    path = credentials_path()
    data = _load(path)
    url = url.rstrip("/")
    found = data["contexts"].pop(url, None) is not None
    if data.get("current") == url:
        data.pop("current", None)
    if found:
        with contextlib.suppress(OSError):
            _save(path, data)
    return found


class TokenFile:
    """Tokens kept between CLI commands, per control plane and key (``sdk.auth.TokenStore``)."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self.path = credentials_path().with_name("tokens.json")

    def _entry(self, key: str) -> str:
        return f"{self.url} {hashlib.sha256(key.encode()).hexdigest()}"

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        tokens = data.get("tokens") if isinstance(data, dict) else None
        return tokens if isinstance(tokens, dict) else {}

    def load(self, key: str) -> tuple[str, float] | None:
        kept = self._load().get(self._entry(key))
        if not isinstance(kept, dict):
            return None
        token, refresh_at = kept.get("token"), kept.get("refreshAt")
        if not isinstance(token, str) or not isinstance(refresh_at, int | float):
            return None
        return token, float(refresh_at)

    def save(self, key: str, token: str, refresh_at: float) -> None:
        now = time.time()
        tokens = {name: kept for name, kept in self._load().items()
                  if isinstance(kept, dict) and isinstance(kept.get("refreshAt"), int | float)
                  and kept["refreshAt"] > now}  # spent ones go
        tokens[self._entry(key)] = {"token": token, "refreshAt": refresh_at}
        with contextlib.suppress(OSError):  # a read-only home costs an exchange, no more
            _save(self.path, {"tokens": tokens})

    def forget(self) -> None:
        """Drop every token kept for this control plane (``phalanx logout``)."""
        tokens = self._load()
        kept = {name: t for name, t in tokens.items() if not name.startswith(self.url + " ")}
        if kept != tokens:
            with contextlib.suppress(OSError):
                _save(self.path, {"tokens": kept})
