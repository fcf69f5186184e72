"""Reaching the leader among several replicas of the control plane.

A client may be given several URLs (``PHALANX_URL=http://a:7780,http://b:7780``): the
replicas of one control plane (``phalanx up --ha``), of which one leads. ``Failover`` is
the httpx transport that sends each request to the replica that last answered, and

- follows a follower's 307 to the leader itself, keeping the method, the body and the
  Authorization header (httpx drops that header on a redirect to another origin, and
  every replica is another origin);
- moves to the next URL when one cannot be connected to (nothing was sent), or when it
  fails mid-request and the request is idempotent (GET, HEAD, PUT, DELETE, OPTIONS, or a
  submit's ``Idempotency-Key``);
- while an election is under way (503 ``NotLeader``: no live leader known, or a replica
  that just lost the lead; or a follower redirecting to a leader that is gone, whose
  lease has not run out yet), tries the URLs again for up to ``wait_seconds``.

With one URL it only follows redirects and waits out elections: an unreachable server
fails at once, as before.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

import httpx

from phalanx.errors import SpecError

IDEMPOTENCY_HEADER = "Idempotency-Key"  # a submit sent again under it makes no second job
IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
MAX_REDIRECTS = 3
ELECTION_WAIT_SECONDS = 30.0
_PAUSE = 0.1  # between rounds of the URLs while no replica leads
URLS_FIX = "write one URL, or several separated by commas: http://a:7780,http://b:7780"


def split_urls(value: str, field: str = "PHALANX_URL") -> list[str]:
    """The URLs of a comma-separated list, each an http(s) URL without a trailing slash."""
    urls = [part.strip().rstrip("/") for part in value.split(",") if part.strip()]
    if not urls:
        raise SpecError("names no URL", field=field, fix=URLS_FIX)
    for url in urls:
        parsed = httpx.URL(url)
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise SpecError(f"{url[:80]!r} is not an http(s) URL", field=field, fix=URLS_FIX)
    return urls


def _not_leader(response: httpx.Response) -> bool:
    if response.status_code != 503:
        return False
    try:
        error = json.loads(response.read()).get("error") or {}
    except (ValueError, AttributeError):
        return False
    return isinstance(error, dict) and error.get("type") == "NotLeader"


class _LeaderGone(Exception):
    """A follower redirected to a leader that cannot be connected to, or replicas
    redirected in a loop."""

    def __init__(self, cause: httpx.TransportError) -> None:
        super().__init__(str(cause))
        self.cause = cause


class Failover(httpx.BaseTransport):
    """An httpx transport over several replicas' URLs; see the module's docstring."""

    def __init__(self, urls: Sequence[str], *, verify: object = True,
                 wait_seconds: float = ELECTION_WAIT_SECONDS) -> None:
        self.urls = [httpx.URL(url) for url in urls]
        self.current = 0
        self.wait_seconds = wait_seconds
        self._verify = verify
        # One connection pool per scheme, made when first used: an https pool loads the
        # CA certificates (tens of milliseconds), which a plain-http control plane never
        # needs; a plain pool is told not to, as it never speaks TLS.
        self._pools: dict[str, httpx.HTTPTransport] = {}

    def _pool(self, url: httpx.URL) -> httpx.HTTPTransport:
        tls = url.scheme == "https"
        key = "https" if tls else "http"
        if key not in self._pools:
            self._pools[key] = httpx.HTTPTransport(
                verify=self._verify if tls else False)  # type: ignore[arg-type]
        return self._pools[key]

    def close(self) -> None:
        for pool in self._pools.values():
            pool.close()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.read()  # a body sent again must be whole in memory
        retry_any = request.method in IDEMPOTENT or IDEMPOTENCY_HEADER in request.headers
        deadline = time.monotonic() + self.wait_seconds
        failures = 0  # URLs in a row that could not be reached since one answered
        while True:
            base = self.urls[self.current]
            try:
                response = self._follow(request, request.url.copy_with(
                    scheme=base.scheme, host=base.host, port=base.port))
            except _LeaderGone as gone:
                # A follower named a leader that is gone: its lease has not run out yet.
                if time.monotonic() >= deadline:
                    raise gone.cause from None
                failures = 0  # a replica answered: the election is what is awaited
                self._pause_then_next()
                continue
            except httpx.TransportError as exc:
                reached = not isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout)
                failures += 1
                if len(self.urls) == 1 or (reached and not retry_any) \
                        or failures >= len(self.urls):
                    raise
                self._next()
                continue
            failures = 0
            if not _not_leader(response) or time.monotonic() >= deadline:
                return response
            response.close()
            self._pause_then_next()

    def _next(self) -> None:
        self.current = (self.current + 1) % len(self.urls)

    def _pause_then_next(self) -> None:
        """The next URL, after a pause once every URL was tried in this round."""
        self._next()
        if self.current == 0:
            time.sleep(_PAUSE)

    def _follow(self, request: httpx.Request, url: httpx.URL) -> httpx.Response:
        """Send ``request`` to ``url``, following 307/308 redirects to the leader."""
        for hop in range(MAX_REDIRECTS + 1):
            headers = [(k, v) for k, v in request.headers.raw if k.lower() != b"host"]
            try:
                response = self._pool(url).handle_request(httpx.Request(
                    request.method, url, headers=headers, content=request.content,
                    extensions=request.extensions))
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                if hop == 0:
                    raise
                raise _LeaderGone(exc) from None
            location = response.headers.get("location")
            if response.status_code not in (307, 308) or not location:
                return response
            response.close()
            url = url.join(location)
        # Replicas naming one another while the lead changes hands: wait as for a leader
        # that is gone (the answer last read is closed, never handed back).
        raise _LeaderGone(httpx.RemoteProtocolError(
            f"redirected {MAX_REDIRECTS} times without reaching the leader"))
