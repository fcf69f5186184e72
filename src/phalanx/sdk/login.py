"""Signing in from Python: ``phalanx.login`` / ``phalanx.logout``, the CLI's contexts.

``login`` proves an API key against the control plane (the key is exchanged for a token)
and stores it as the current context of the credentials file, exactly as ``phalanx
login`` does (the CLI calls these functions): every later ``Client()``, ``phalanx``
command and notebook of the user finds it. ``logout`` forgets it and its tokens.

The CodeFlare SDK's names are here too. ``TokenAuthentication(token=KEY, server=URL,
skip_tls=...)`` is a login with a Phalanx API key; ``KubeConfigFileAuthentication
(kube_config_path=...)`` uses a Phalanx credentials file (the user's "kubeconfig" of
Phalanx) for this process. A Kubernetes kubeconfig itself means nothing to Phalanx: the
control plane signs users in with its own API keys, so it is refused with that fix.
"""

from __future__ import annotations

import getpass
import json
import os
from dataclasses import dataclass
from pathlib import Path

from phalanx.errors import SpecError
from phalanx.sdk.client import Client
from phalanx.sdk.credentials import (
    CREDENTIALS_ENV,
    TokenFile,
    credentials_path,
    remove_context,
    save_context,
)


@dataclass(frozen=True, slots=True)
class LoggedIn:
    """What ``login`` did: who the control plane takes the key for, and where it is kept."""

    url: str
    user: str
    role: str
    path: Path

    def __str__(self) -> str:
        return f"logged in to {self.url} as {self.user} ({self.role}); key stored in {self.path}"


def login(url: str | None = None, key: str | None = None, *, verify: bool | str = True,
          home: str | Path | None = None) -> LoggedIn:
    """Store an API key for a control plane and make it the current context.

    ``url`` defaults as ``Client`` finds one ($PHALANX_URL, the current context, the local
    server); ``key`` is asked for without echo when not given (a notebook shows a password
    box). ``verify``: how to check the server's TLS certificate (a CA bundle's path, or
    False to skip the check), kept with the context. The key is proven before it is kept:
    a wrong one raises AuthError and changes nothing.
    """
    if key is None:
        key = getpass.getpass("API key: ")
    key = key.strip()
    if not key:
        raise SpecError("no API key was given", field="key",
                        fix="pass the key, e.g. phalanx.login(url, key), or `phalanx keys "
                        "create` to make one")
    with Client(url, key, home=home, verify=verify) as client:
        me = client.whoami()  # exchanging the key proves it before it is stored
        server = client.url
    path = save_context(server, key, me.user, verify=verify)
    return LoggedIn(url=server, user=me.user, role=me.role, path=path)


def logout(url: str | None = None, *, home: str | Path | None = None) -> bool:
    """Forget the stored key (and tokens) of a control plane, the current one by default;
    whether there was one."""
    with Client(url, "", home=home) as client:
        server = client.url
    TokenFile(server).forget()
    return remove_context(server)


class TokenAuthentication:
    """CodeFlare's name for signing in with a token: here a Phalanx API key.

    ``TokenAuthentication(token=KEY, server=URL, skip_tls=False, ca_cert_path=None)
    .login()`` is ``phalanx.login(URL, KEY)``; ``.logout()`` forgets it again.
    """

    def __init__(self, token: str, server: str, skip_tls: bool = False,
                 ca_cert_path: str | None = None) -> None:
        if not server:
            raise SpecError("no server was given", field="server",
                            fix="pass the control plane's URL, e.g. https://phalanx:7780")
        self.token = token
        self.server = server
        self.skip_tls = skip_tls
        self.ca_cert_path = ca_cert_path

    def __repr__(self) -> str:  # never the key
        return f"TokenAuthentication(server={self.server!r}, skip_tls={self.skip_tls})"

    def login(self) -> str:
        verify: bool | str = False if self.skip_tls else (self.ca_cert_path or True)
        return str(login(self.server, self.token, verify=verify))

    def logout(self) -> str:
        return (f"logged out of {self.server}" if logout(self.server)
                else f"no stored key for {self.server}")


class KubeConfigFileAuthentication:
    """CodeFlare's name for signing in with a file: here a Phalanx credentials file (what
    ``phalanx login`` writes, one context per control plane), used by this process from
    ``login()`` until ``logout()``. A Kubernetes kubeconfig is refused: Phalanx signs users
    in with its own API keys."""

    def __init__(self, kube_config_path: str | os.PathLike[str]) -> None:
        self.kube_config_path = Path(kube_config_path).expanduser()
        self._before: str | None = None
        self._active = False

    def login(self) -> str:
        path = self.kube_config_path
        try:
            data = json.loads(path.read_text())
        except OSError as exc:
            raise SpecError(f"cannot read {path}: {exc.strerror}", field="kube_config_path",
                            fix="name a credentials file `phalanx login` wrote") from None
        except ValueError:
            data = None
        if not isinstance(data, dict) or not isinstance(data.get("contexts"), dict):
            raise SpecError(
                f"{path} is not a Phalanx credentials file (a Kubernetes kubeconfig gives "
                "no Phalanx identity)", field="kube_config_path",
                fix="sign in with an API key: phalanx.login(url, key) or "
                "TokenAuthentication(token=KEY, server=URL).login()")
        if not self._active:
            self._before = os.environ.get(CREDENTIALS_ENV)
            self._active = True
        os.environ[CREDENTIALS_ENV] = str(path)
        current = data.get("current")
        return f"using {path}" + (f" (current context {current})" if current else "")

    def logout(self) -> str:
        if not self._active:
            return f"not using {self.kube_config_path}"
        if self._before is None:
            os.environ.pop(CREDENTIALS_ENV, None)
        else:
            os.environ[CREDENTIALS_ENV] = self._before
        self._active = False
        return f"stopped using {self.kube_config_path}; credentials from {credentials_path()}"


__all__ = ["KubeConfigFileAuthentication", "LoggedIn", "TokenAuthentication", "login",
           "logout"]
