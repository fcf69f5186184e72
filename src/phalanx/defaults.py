"""Conventions the server, SDK, CLI and deployment share: port, state directory, its files.

Only the standard library is imported here: the SDK and every CLI verb load this
module, and the scheduler core must not pay for the server's dependencies.
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 7780
DEFAULT_URL = f"http://{DEFAULT_HOST}:{DEFAULT_PORT}"

HOME_ENV = "PHALANX_HOME"
DEFAULT_HOME = "~/.phalanx"

# Files of the state directory.
SERVER_FILE = "server.json"  # what a running server tells clients: URL, pid, plane, store
TOKEN_FILE = "token"
LOG_FILE = "server.log"  # output of a server started in the background


def phalanx_home(home: str | Path | None = None) -> Path:
    """The state directory: ``home`` if given, else ``$PHALANX_HOME``, else ``~/.phalanx``."""
    chosen = home or os.environ.get(HOME_ENV) or DEFAULT_HOME
    return Path(chosen).expanduser()


def redact_url(url: str) -> str:
    """``url`` with the password of its user info masked, for logs and status output.

    ``postgresql://me:s3cret@db:5432/phalanx`` becomes ``postgresql://me:***@db:5432/phalanx``;
    a URL without a password is returned as it is.
    """
    scheme, sep, rest = url.partition("://")
    # The last "@": a password someone did not percent-encode may hold "@" or "/" itself.
    # Masking too much beats showing a password.
    userinfo, at, host = rest.rpartition("@")
    if not sep or not at or ":" not in userinfo:
        return url
    user = userinfo.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}"
