"""Conventions the server, SDK, CLI and deployment share: port, state directory, its files.

Only the standard library is imported here: the SDK and every CLI verb load this
module, and the scheduler core must not pay for the server's dependencies.
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 7780
# The admission webhook's TLS port (Kubernetes-native admission; server/webhook.py).
DEFAULT_WEBHOOK_PORT = 9443
DEFAULT_URL = f"http://{DEFAULT_HOST}:{DEFAULT_PORT}"

HOME_ENV = "PHALANX_HOME"
DEFAULT_HOME = "~/.phalanx"

# Files of the state directory.
SERVER_FILE = "server.json"  # what a running server tells clients: URL, pid, plane, store
TOKEN_FILE = "token"
URL_ENV = "PHALANX_URL"
# Inside a job's pod: the file holding the attempt's API credential (docs/security.md).
API_KEY_FILE_ENV = "PHALANX_API_KEY_FILE"
LOG_FILE = "server.log"  # output of a server started in the background

# The state directory holds the API token, the store and every job's logs: only its
# owner (the control plane's user) may read it. Pods run as another user where the
# control plane can arrange it (`phalanx up --run-as-user`), so these modes keep them out.
PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
PRIVATE_UMASK = 0o077  # what the control plane creates is owner-only from the start


def phalanx_home(home: str | Path | None = None) -> Path:
    """The state directory: ``home`` if given, else ``$PHALANX_HOME``, else ``~/.phalanx``."""
    chosen = home or os.environ.get(HOME_ENV) or DEFAULT_HOME
    return Path(chosen).expanduser()


def make_private_dir(path: Path) -> Path:
    """Create ``path`` (and missing parents) as owner-only directories; return it.

    An existing directory keeps its mode: ``tighten_state_dir`` is what corrects one.
    """
    missing = []
    for candidate in (path, *path.parents):
        if candidate.exists():
            break
        missing.append(candidate)
    for directory in reversed(missing):
        # exist_ok: another process may create it between the check and here.
        directory.mkdir(mode=PRIVATE_DIR_MODE, exist_ok=True)
    return path


def open_private(path: Path, flags: int) -> int:
    """``os.open`` creating ``path`` owner-only (mode 0600) if it does not exist yet."""
    return os.open(path, flags | os.O_CREAT, PRIVATE_FILE_MODE)


def replace_private(path: Path, data: str | bytes, partial: Path) -> None:
    """Write ``data`` to ``partial`` (owner-only) and rename it onto ``path``: a reader
    sees the old file or the new one, never half of it."""
    with os.fdopen(open_private(partial, os.O_WRONLY | os.O_TRUNC),
                   "wb" if isinstance(data, bytes) else "w") as handle:
        handle.write(data)
    os.replace(partial, path)


def tighten_state_dir(home: Path) -> list[Path]:
    """Make ``home`` and everything in it owner-only; the entries whose mode changed.

    Directories become 0700 and files 0600. Symbolic links are neither followed nor
    changed (what they point to is not the state directory's to change). Entries that
    cannot be changed (not ours, a read-only mount) are left as they are and not listed.
    """
    changed: list[Path] = []

    def tighten(path: Path, wanted: int) -> None:
        try:
            current = os.lstat(path).st_mode & 0o7777
            if current != wanted:
                os.chmod(path, wanted)
                changed.append(path)
        except OSError:
            pass

    tighten(home, PRIVATE_DIR_MODE)
    for root, dirs, files in os.walk(home):
        for name in dirs:
            if not os.path.islink(os.path.join(root, name)):
                tighten(Path(root, name), PRIVATE_DIR_MODE)
        for name in files:
            if not os.path.islink(os.path.join(root, name)):
                tighten(Path(root, name), PRIVATE_FILE_MODE)
    return changed


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

# The Kubernetes Lease a compute plane's worker renews in its runs namespace, one per
# plane; the deployment grants the plane's pods read access to exactly this name.
PLANE_LEASE_PREFIX = "phalanx-plane-"


def plane_lease_name(plane: str) -> str:
    return f"{PLANE_LEASE_PREFIX}{plane}"

# The Kubernetes Lease replicas of the control plane lead by (``--leader-lease kubernetes``).
LEADER_LEASE_NAME = "phalanx-control-plane"

# How long a silent leader of replicas (``phalanx up --ha``) keeps the store's lease.
DEFAULT_LEASE_SECONDS = 7.0
