"""The worker's HTTP client: a plane key exchanged for short-lived tokens, re-read on refresh.

The key file is read again at every exchange, so rotating a plane's key needs no restart:
write the new key into the file (both keys are valid until the old one is revoked) and
the next exchange uses it. A 401 answer triggers one fresh exchange and one retry.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
from websockets.exceptions import InvalidHandshake, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from phalanx import relay
from phalanx.errors import (
    AuthError,
    Conflict,
    ConnectionFailed,
    PhalanxError,
    ServerError,
    SpecError,
)
from phalanx.spec.planes import (
    DesiredState,
    ExecRequest,
    ExecRequests,
    PlaneHello,
    PlaneReport,
    PlaneWelcome,
    ReportAck,
)
from phalanx.store.workdirs import WorkdirStore

REFRESH_MARGIN = 0.2  # exchange again once this share of the token's life is left


def read_key(path: Path) -> str:
    try:
        key = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise SpecError(f"cannot read the plane's key file: {exc.strerror or exc}",
                        field="--api-key-file",
                        fix="pass the file `phalanx plane add NAME --key-file FILE` wrote") \
            from None
    if not key:
        raise SpecError("the plane's key file is empty", field="--api-key-file",
                        fix="pass the file `phalanx plane add NAME --key-file FILE` wrote")
    return key


class PlaneClient:
    """Speaks for plane ``plane`` to the control plane at ``url``."""

    def __init__(self, url: str, plane: str, key_file: Path, *, timeout: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self.plane = plane
        self.key_file = key_file
        self.timeout = timeout
        self._http = httpx.Client(timeout=timeout)
        self._token: str | None = None
        self._renew_at = 0.0

    def close(self) -> None:
        self._http.close()

    def _exchange(self) -> str:
        answer = self._send("POST", "/v1/auth/token", json={"key": read_key(self.key_file)},
                            auth=False)
        body = answer.json()
        self._token = str(body["token"])
        lifetime = float(body.get("expiresIn") or 60.0)
        self._renew_at = time.monotonic() + lifetime * (1 - REFRESH_MARGIN)
        return self._token

    def _bearer(self) -> str:
        if self._token is None or time.monotonic() >= self._renew_at:
            return self._exchange()
        return self._token

    def _send(self, method: str, path: str, *, auth: bool = True, timeout: float | None = None,
              **kwargs: Any) -> httpx.Response:
        for retry in (False, True):
            headers = {"Authorization": f"Bearer {self._bearer()}"} if auth else {}
            try:
                answer = self._http.request(method, self.url + path, headers=headers,
                                            timeout=timeout or self.timeout, **kwargs)
            except httpx.HTTPError as exc:
                raise ConnectionFailed(f"cannot reach the control plane at {self.url}: {exc}",
                                       fix="check --control-plane and the network") from None
            if answer.status_code == 401 and auth and not retry:
                self._token = None  # revoked or expired early: exchange the key again
                continue
            if answer.status_code >= 400:
                error, fix = _error_of(answer)
                cls: type[PhalanxError] = ServerError
                if answer.status_code in (401, 403):
                    cls = AuthError
                elif answer.status_code == 400:
                    cls = SpecError  # refused for good: the worker stops and says why
                elif answer.status_code == 409:
                    cls = Conflict  # another worker has taken this plane over
                raise cls(f"{method} {path}: {error}", fix=fix or "see the control plane's log")
            return answer
        raise AssertionError("unreachable")

    def hello(self, hello: PlaneHello) -> PlaneWelcome:
        answer = self._send("POST", f"/v1/planes/{self.plane}/hello", json=hello.to_dict())
        return PlaneWelcome.model_validate(answer.json())

    def report(self, report: PlaneReport) -> ReportAck:
        answer = self._send("POST", f"/v1/planes/{self.plane}/report", json=report.to_dict())
        return ReportAck.model_validate(answer.json())

    def desired(self, after: int, wait: float, worker: str | None = None) -> DesiredState:
        params: dict[str, str | int | float] = {"after": after, "wait": wait}
        if worker is not None:
            params["worker"] = worker
        answer = self._send("GET", f"/v1/planes/{self.plane}/desired",
                            params=params, timeout=wait + self.timeout)
        return DesiredState.model_validate(answer.json())


    def fetch_workdir(self, sha256: str, store: WorkdirStore, max_bytes: int) -> None:
        """Put the workdir archive ``sha256`` of an attempt wanted here into ``store``."""
        path = f"/v1/planes/{self.plane}/workdirs/{sha256}"
        for retry in (False, True):
            headers = {"Authorization": f"Bearer {self._bearer()}"}
            try:
                with self._http.stream("GET", self.url + path, headers=headers,
                                       timeout=max(self.timeout, 60.0)) as answer:
                    if answer.status_code == 401 and not retry:
                        self._token = None
                        continue
                    if answer.status_code >= 400:
                        answer.read()
                        error, fix = _error_of(answer)
                        raise ServerError(f"GET {path}: {error}",
                                          fix=fix or "see the control plane's log")
                    store.upload(sha256, max_bytes).put(answer.iter_bytes())
                    return
            except httpx.HTTPError as exc:
                raise ConnectionFailed(f"cannot reach the control plane at {self.url}: {exc}",
                                       fix="check --control-plane and the network") from None
        raise AssertionError("unreachable")

    def exec_requests(self, wait: float) -> list[ExecRequest]:
        """Commands to run in this plane's pods (a long poll of ``wait`` seconds)."""
        answer = self._send("GET", f"/v1/planes/{self.plane}/exec", params={"wait": wait},
                            timeout=wait + self.timeout)
        return ExecRequests.model_validate(answer.json()).sessions

    def exec_socket(self, session: str) -> ClientConnection:
        """The WebSocket of command ``session``, dialed out to the control plane."""
        scheme, _, rest = self.url.partition("://")
        url = f"{'wss' if scheme == 'https' else 'ws'}://{rest}/v1/planes/{self.plane}/exec/" \
              f"{session}"
        for retry in (False, True):
            headers = {"Authorization": f"Bearer {self._bearer()}"}
            try:
                return connect(url, additional_headers=headers, compression=None, proxy=None,
                               open_timeout=self.timeout,
                               max_size=relay.MAX_FRAME + relay.HEADER.size)
            except InvalidStatus as exc:
                answer = httpx.Response(exc.response.status_code,
                                        content=bytes(exc.response.body or b""))
                if answer.status_code == 401 and not retry:
                    self._token = None
                    continue
                error, fix = _error_of(answer)
                cls: type[PhalanxError] = (AuthError if answer.status_code in (401, 403)
                                           else ServerError)
                raise cls(f"exec session {session}: {error}",
                          fix=fix or "see the control plane's log") from None
            except (OSError, TimeoutError, InvalidHandshake) as exc:
                raise ConnectionFailed(f"cannot reach the control plane at {self.url}: {exc}",
                                       fix="check --control-plane and the network") from None
        raise AssertionError("unreachable")


def _error_of(answer: httpx.Response) -> tuple[str, str | None]:
    """The answer's error message and fix, from the API's error envelope."""
    try:
        error = answer.json().get("error", {})
        return f"{answer.status_code} {error.get('message', answer.text)}", error.get("fix")
    except (ValueError, AttributeError):
        return f"{answer.status_code} {answer.text[:200]}", None
