"""Turning an API key into short-lived tokens, and refreshing them before they expire.

This is MosaicML's JwtRefresh built into the client: ``KeyAuth`` exchanges the key at
``POST /v1/auth/token`` on first use, sends the token with every request, exchanges again
when a fifth of the token's life (at most a minute) is left, and once more if the server
still answers 401 (its clock, a restart with a new signing key, a role change). A request
is never sent with a token known to be expired, so the user notices nothing.

A ``TokenStore`` keeps tokens between processes (the CLI's ``credentials.TokenFile``): a
process that finds a token still good for its key sends it rather than exchanging the key
again, so a short command costs the control plane no exchange (and its audit log no login).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Generator
from typing import Protocol

import httpx

from phalanx.errors import AuthError
from phalanx.sdk.responses import error_from_response

TOKEN_PATH = "/v1/auth/token"
REFRESH_MARGIN = 60.0  # seconds; at most a fifth of the token's life


def looks_like_jwt(token: str) -> bool:
    """A token to send as it is (a per-job token, a dashboard's), not a key to exchange."""
    return token.count(".") == 2 and token.startswith("eyJ")


class TokenStore(Protocol):
    """Where tokens outlive the process that fetched them."""

    def load(self, key: str) -> tuple[str, float] | None:
        """A token kept for ``key`` and when to refresh it (epoch seconds); None: none."""

    def save(self, key: str, token: str, refresh_at: float) -> None: ...


class KeyAuth(httpx.Auth):
    """Bearer tokens exchanged for an API key, refreshed before they expire."""

    def __init__(self, key: str, exchange: httpx.Client,
                 store: TokenStore | None = None) -> None:
        self.key = key
        self._exchange = exchange
        self.store = store  # None: tokens live as long as this object
        self._lock = threading.Lock()
        self._token: str | None = None
        self._refresh_at = 0.0
        self.exchanges = 0  # how many tokens were fetched (for tests and benchmarks)
        self.legacy = False  # the server predates tokens: send the key itself

    def token(self, *, force: bool = False) -> str:
        with self._lock:
            if self.legacy:
                return self.key
            if self._token is None and not force and self.store is not None:
                kept = self.store.load(self.key)
                if kept is not None and time.time() < kept[1]:
                    self._token, self._refresh_at = kept
            if force or self._token is None or time.time() >= self._refresh_at:
                self._token = self._fetch()
                if self.store is not None and not self.legacy:
                    self.store.save(self.key, self._token, self._refresh_at)
            return self._token

    def _fetch(self) -> str:
        # The key goes as a bearer too: a control plane older than tokens takes it so and
        # answers 404 here (no such route), and the client then sends the key itself.
        response = self._exchange.post(TOKEN_PATH, json={"key": self.key},
                                       headers={"Authorization": f"Bearer {self.key}"})
        if response.status_code == 404:
            self.legacy = True
            return self.key
        if response.is_error:
            raise error_from_response(response)
        body = response.json()
        lifetime = float(body["expiresIn"])
        self._refresh_at = time.time() + lifetime - min(REFRESH_MARGIN, lifetime / 5)
        self.exchanges += 1
        token = body["token"]
        if not isinstance(token, str):
            raise AuthError("the control plane answered no token", field="key")
        return token

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        sent = self.token()
        request.headers["Authorization"] = f"Bearer {sent}"
        response = yield request
        if response.status_code == 401 and not self.legacy:
            response.read()
            fresh = self.token(force=self._token == sent)
            request.headers["Authorization"] = f"Bearer {fresh}"
            yield request
