"""Who is signed in to the dashboard: an API key in, a signed session cookie out.

The one place that knows how a key becomes a session. The key is exchanged as
``POST /v1/auth/token`` exchanges it (``server/auth.py``: the same rate limit on
failures, the same audit entry), and the session takes the user's role and the
LocalQueues of their teams. Every request checks the session's standing again: a
revoked key, a disabled user or changed teams end the session at once, as they end
the user's tokens.

The cookie is HttpOnly (no script reads it), SameSite=Strict (no other site's page
sends it), Secure when the dashboard is served over https, and signed with a key
derived from the server's token, so it cannot be forged or edited. Every action (a
POST) must carry the session's CSRF token as well, which a page of another origin
cannot read.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass, field, replace

from starlette.requests import Request
from starlette.responses import Response

from phalanx.errors import AuthError
from phalanx.server.auth import Authenticator, token_matches
from phalanx.server.principal import READ_SCOPE
from phalanx.server.redaction import ADMIN, Viewer
from phalanx.spec.status import JobRecord

COOKIE = "phalanx_session"
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
SESSION_SECONDS = 12 * 3600
ADMIN_ROLE = "admin"
MEMBER_ROLE = "member"
VIEWER_ROLE = "viewer"
ROLES = (ADMIN_ROLE, MEMBER_ROLE, VIEWER_ROLE)


@dataclass(frozen=True, slots=True)
class Session:
    """One signed-in person: their name, role and the LocalQueues of their teams.

    ``queues`` None means every queue (an admin)."""

    name: str
    role: str
    queues: frozenset[str] | None = None
    sid: str = field(default_factory=lambda: secrets.token_urlsafe(16))
    expires_at: float = 0.0
    key: str = ""  # the id of the API key that opened it
    issued_at: float = 0.0

    @property
    def is_admin(self) -> bool:
        return self.role == ADMIN_ROLE

    @property
    def writes(self) -> bool:
        return self.role != VIEWER_ROLE

    @property
    def viewer(self) -> Viewer:
        """Who the API's redaction rules see (``server/redaction.py``)."""
        return ADMIN if self.is_admin else Viewer(self.name, self.role)

    def sees(self, record: JobRecord) -> bool:
        """Whether the job is shown in full: admins see all, others their teams' and own."""
        return (self.queues is None or record.queue in self.queues
                or record.user == self.name)

    def may_change(self, record: JobRecord) -> bool:
        """Whether the session may cancel or resubmit the job."""
        return self.writes and (self.is_admin or self.sees(record))

    def viewing_as(self, role: str, queues: frozenset[str]) -> Session:
        """The same person seeing what a ``role`` of ``queues`` sees (an admin's preview)."""
        # Under a name of its own: the admin's own jobs are not the previewed role's.
        return replace(self, name=f"{self.name} (preview)", role=role, queues=queues)


class Sessions:
    """Signs sessions into cookies and reads them back; makes and checks CSRF tokens."""

    def __init__(
        self, token: str, seconds: float = SESSION_SECONDS,
        authenticator: Authenticator | None = None,
    ) -> None:
        """``authenticator``: the API's; without one only ``token`` signs in, as admin."""
        self._token = token
        self._auth = authenticator
        self._key = hmac.new(token.encode(), b"phalanx dashboard session", hashlib.sha256).digest()
        self.seconds = seconds

    def sign_in(self, key: str, client: str = "-") -> Session | None:
        """The session an API key opens, or None when the key is wrong (TooManyRequests
        while ``client`` has failed too often)."""
        key = key.strip()
        now = time.time()
        if self._auth is None:
            if not key or not token_matches(f"Bearer {key}", self._token):
                return None
            return Session("admin", ADMIN_ROLE, None, expires_at=now + self.seconds)
        try:
            principal = self._auth.exchange(key, client).principal
        except AuthError:
            return None
        if principal.job is not None:
            return None  # a pod's credential: a session cookie would outlive its attempt
        # A read-only key reads as a viewer of what its user sees.
        role = VIEWER_ROLE if principal.scope == READ_SCOPE else principal.role
        queues = None if principal.is_admin else frozenset(principal.queues)
        return Session(principal.name, role, queues, expires_at=now + self.seconds,
                       key=principal.key, issued_at=now)

    def session_of(self, request: Request) -> Session | None:
        """The request's session, if its cookie is ours, unedited and not expired."""
        raw = request.cookies.get(COOKIE)
        if not raw or raw.count(".") != 1:
            return None
        body, mac = raw.split(".")
        if not hmac.compare_digest(mac, self._mac(body)):
            return None
        try:
            data = json.loads(_unb64(body))
            queues = data["q"]
            session = Session(str(data["u"]), str(data["r"]),
                              None if queues is None else frozenset(map(str, queues)),
                              str(data["s"]), float(data["e"]), str(data.get("k", "")),
                              float(data.get("i", 0.0)))
        except (ValueError, KeyError, TypeError):
            return None
        if session.role not in ROLES or session.expires_at < time.time():
            return None
        if self._auth is not None:
            try:
                self._auth.check_standing(session.name, session.key, session.issued_at)
            except AuthError:
                return None
        return session

    def set_cookie(self, response: Response, request: Request, session: Session) -> None:
        data = {"u": session.name, "r": session.role, "s": session.sid, "e": session.expires_at,
                "q": None if session.queues is None else sorted(session.queues),
                "k": session.key, "i": session.issued_at}
        body = _b64(json.dumps(data, separators=(",", ":")).encode())
        response.set_cookie(
            COOKIE, f"{body}.{self._mac(body)}", max_age=int(session.expires_at - time.time()),
            path="/ui", httponly=True, samesite="strict", secure=request.url.scheme == "https",
        )

    @staticmethod
    def clear_cookie(response: Response) -> None:
        response.delete_cookie(COOKIE, path="/ui", httponly=True, samesite="strict")

    def csrf_token(self, session: Session) -> str:
        """The session's CSRF token: pages put it in every form and htmx request."""
        return self._mac("csrf:" + session.sid)

    def csrf_ok(self, session: Session, sent: str | None) -> bool:
        return bool(sent) and hmac.compare_digest(str(sent), self.csrf_token(session))

    def _mac(self, text: str) -> str:
        return _b64(hmac.new(self._key, text.encode(), hashlib.sha256).digest())


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
