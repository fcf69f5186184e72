"""Dashboard sessions: the key in, a signed cookie out; edited, foreign or expired cookies
are no session; CSRF tokens belong to one session."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from phalanx.server.ui.session import ADMIN_ROLE, COOKIE, VIEWER_ROLE, Session, Sessions
from phalanx.spec.resources import JobSpec
from phalanx.spec.status import JobRecord


def request_with(cookie: str | None, scheme: str = "http") -> Request:
    headers = [(b"cookie", f"{COOKIE}={cookie}".encode())] if cookie else []
    return Request({"type": "http", "method": "GET", "path": "/ui/", "headers": headers,
                    "scheme": scheme, "server": ("127.0.0.1", 80), "query_string": b""})


def cookie_of(sessions: Sessions, session: Session, scheme: str = "http") -> tuple[str, str]:
    response = Response()
    sessions.set_cookie(response, request_with(None, scheme), session)
    header = response.headers["set-cookie"]
    return header.split(";")[0].split("=", 1)[1], header


def test_the_server_token_signs_in_as_admin_and_nothing_else_does() -> None:
    sessions = Sessions("the-token")
    assert sessions.sign_in("wrong") is None
    assert sessions.sign_in("") is None
    session = sessions.sign_in(" the-token\n")
    assert session is not None and session.role == ADMIN_ROLE and session.queues is None


def test_a_cookie_reads_back_and_carries_its_attributes() -> None:
    sessions = Sessions("the-token")
    session = sessions.sign_in("the-token")
    assert session is not None
    value, header = cookie_of(sessions, session)
    assert "HttpOnly" in header and "SameSite=strict" in header and "Path=/ui" in header
    assert "Secure" not in header
    assert "Secure" in cookie_of(sessions, session, scheme="https")[1]
    again = sessions.session_of(request_with(value))
    assert again == session


def test_edited_foreign_and_expired_cookies_are_no_session() -> None:
    sessions = Sessions("the-token")
    session = sessions.sign_in("the-token")
    assert session is not None
    value, _ = cookie_of(sessions, session)
    body, mac = value.split(".")
    viewer = Session("admin", VIEWER_ROLE, frozenset({"team-a"}), session.sid,
                     session.expires_at)
    forged_body = cookie_of(sessions, viewer)[0].split(".")[0]
    assert sessions.session_of(request_with(f"{forged_body}.{mac}")) is None  # body swapped
    assert sessions.session_of(request_with(body + ".x" + mac[1:])) is None
    assert sessions.session_of(request_with("garbage")) is None
    assert Sessions("another-token").session_of(request_with(value)) is None
    expired = Sessions("the-token", seconds=-1)
    old = expired.sign_in("the-token")
    assert old is not None
    assert expired.session_of(request_with(cookie_of(expired, old)[0])) is None


def test_csrf_tokens_belong_to_one_session() -> None:
    sessions = Sessions("the-token")
    one, two = sessions.sign_in("the-token"), sessions.sign_in("the-token")
    assert one is not None and two is not None
    assert sessions.csrf_ok(one, sessions.csrf_token(one))
    assert not sessions.csrf_ok(one, sessions.csrf_token(two))
    assert not sessions.csrf_ok(one, None)
    assert not sessions.csrf_ok(one, "")


def test_what_a_previewed_viewer_sees_and_may_change() -> None:
    spec = JobSpec.model_validate({"name": "j", "queue": "team-b", "podSets": [{}]})
    record = JobRecord(name="j", spec=spec, queue="team-b", cluster_queue="cq-b",
                       submitted_at=0, queued_at=0, user="bob")
    admin = Session("admin", ADMIN_ROLE)
    assert admin.sees(record) and admin.may_change(record)
    viewer = admin.viewing_as(VIEWER_ROLE, frozenset({"team-a"}))
    assert not viewer.sees(record) and not viewer.may_change(record)
    team_b_viewer = admin.viewing_as(VIEWER_ROLE, frozenset({"team-b"}))
    assert team_b_viewer.sees(record) and not team_b_viewer.may_change(record)
    member = admin.viewing_as("member", frozenset({"team-b"}))
    assert member.may_change(record)
