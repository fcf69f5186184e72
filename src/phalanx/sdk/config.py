"""Finding the control plane: its URL and API key.

Explicit arguments win, then the ``PHALANX_URL`` / ``PHALANX_TOKEN`` environment
variables, then the key in the file ``PHALANX_API_KEY_FILE`` names (inside a job's pod:
its attempt's credential, which acts as the job's owner), then the current context of
``phalanx login`` and its key (``credentials.py``), then the files a running server keeps
in its state directory (``$PHALANX_HOME``, default ``~/.phalanx``): ``server.json`` and
``token`` (the bootstrap admin key).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from phalanx.defaults import (
    API_KEY_FILE_ENV,
    DEFAULT_URL,
    SERVER_FILE,
    TOKEN_FILE,
    URL_ENV,
    phalanx_home,
)
from phalanx.errors import AuthError
from phalanx.sdk.credentials import current_url, key_for, verify_for
from phalanx.sdk.failover import split_urls


def read_server_info(home: Path) -> dict[str, Any] | None:
    """What a running server wrote to ``server.json``, or None if there is none (or it is torn)."""
    try:
        info = json.loads((home / SERVER_FILE).read_text())
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


def read_key_file() -> str | None:
    """The key in the file ``$PHALANX_API_KEY_FILE`` names, if it is set; AuthError naming
    the variable when that file cannot be read (a pod of an attempt that ended, say)."""
    path = os.environ.get(API_KEY_FILE_ENV)
    if not path:
        return None
    try:
        key = Path(path).read_text().strip()
    except OSError as exc:
        raise AuthError(f"cannot read the API key file {path}: {exc.strerror}",
                        field=API_KEY_FILE_ENV,
                        fix="unset it, or point it at a file holding an API key") from None
    return key or None


def read_token(home: Path) -> str | None:
    try:
        token = (home / TOKEN_FILE).read_text().strip()
    except OSError:
        return None
    return token or None


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where the control plane is and how to authenticate to it."""

    url: str
    token: str | None
    home: Path
    verify: bool | str = True  # TLS: the system's CAs, a CA bundle's path, or no check


def resolve_endpoint(
    url: str | None = None, token: str | None = None, home: str | Path | None = None,
    verify: bool | str | None = None,
) -> Endpoint:
    state = phalanx_home(home)
    if not url:
        url = os.environ.get(URL_ENV)
    if not url:
        url = current_url()
    if not url:
        info = read_server_info(state)
        url = str(info["url"]) if info and info.get("url") else DEFAULT_URL
    if not token:
        token = (os.environ.get("PHALANX_TOKEN") or read_key_file()
                 or key_for(url.split(",")[0].strip().rstrip("/"))
                 or read_token(state))
    url = ",".join(split_urls(url)) if "," in url else url.rstrip("/")
    first = url.split(",")[0]  # replicas of one control plane share its login
    return Endpoint(url=url, token=token, home=state,
                    verify=verify_for(first) if verify is None else verify)
