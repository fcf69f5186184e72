"""Authentication: API keys exchanged for short-lived JWTs, and verifying those JWTs.

``Authenticator.verify(token) -> Principal`` is all a request needs: it checks the
signature (once per token) and expiry (no store read) and that the key behind the token has not been
revoked nor its user disabled or changed since it was issued (sets in memory, filled at
start from the store and kept current by this control plane's own changes).

Tokens live ``token_ttl`` seconds (5 minutes by default): a key revoked or a user
disabled on this control plane is refused at once; anywhere else (another replica on the
same store) within that lifetime, the longest a token can outlive what it came from. The
SDK and CLI exchange the key again before a token expires, so 5 minutes cost a client
one request per 4 minutes, and a stolen token is worth 5 minutes.

A job's credential (``server/jobkeys.py``) exchanges the same way; its tokens name the
job's attempt, which must still be running at the exchange and at every request.
"""

from __future__ import annotations

import hmac
import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt

from phalanx.errors import AuthError, Forbidden, NotFound, SpecError
from phalanx.server.jobkeys import AttemptLookup, JobKeys, job_of_key
from phalanx.server.keys import KeyHasher, ensure_bootstrap_key, key_id_of
from phalanx.server.principal import (
    ADMIN_ROLE,
    BOOTSTRAP_KEY,
    READ_SCOPE,
    JobBinding,
    Principal,
)
from phalanx.server.ratelimit import FailureLimiter, FailureLimits, tried_from, tried_key
from phalanx.server.secrets import SecretVault
from phalanx.server.tokens import SIGNING_FILE, SigningKeys
from phalanx.spec.api import ACT_AS_HEADER
from phalanx.spec.auth import USER_NAME
from phalanx.spec.status import JobRecord
from phalanx.store import AuditEntry, IdentityStore, StoredKey, User
from phalanx.store.secrets import SecretStore

log = logging.getLogger("phalanx.auth")

TOKEN_TTL = 300.0
VERIFIED_TOKENS = 10_000  # signatures remembered; all forgotten when full
BOOTSTRAP_USER = "admin"
PERSON_SCOPES = frozenset({"all", READ_SCOPE})  # a plane's key has a scope of its own
_EXCHANGE_FIX = ("exchange an API key for a token at POST /v1/auth/token (the SDK and CLI do "
                 "it themselves; `phalanx login` stores your key)")


@dataclass(frozen=True, slots=True)
class IssuedToken:
    token: str
    principal: Principal
    expires_at: float
    lifetime: float


def _unauthorized(message: str, fix: str = _EXCHANGE_FIX) -> AuthError:
    return AuthError(message, field="Authorization", fix=fix)


class Authenticator:
    def __init__(
        self, home: Path, identity: IdentityStore, *, token_ttl: float = TOKEN_TTL,
        failure_limits: FailureLimits | None = None, bootstrap_key: str | None = None,
        attempts: AttemptLookup | None = None,
    ) -> None:
        """``bootstrap_key``: the admin key to use instead of the state directory's;
        ``attempts``: the running attempts jobs' credentials act for (None: they act for
        none, as on a control plane that runs no jobs)."""
        self.identity = identity
        self.token_ttl = token_ttl
        self.hasher = KeyHasher.for_home(home)
        self.job_keys = JobKeys(self.hasher)
        self.attempts = attempts
        self.signing = SigningKeys(home / SIGNING_FILE)
        # Secrets' encryption keys live beside the signing keys and rotate with them.
        self.secrets = SecretVault(home, SecretStore(identity.store), self._teams_of)
        self.failures = FailureLimiter(failure_limits)
        self._lock = threading.Lock()
        # Tokens whose signature was checked: a client sends the same token for minutes,
        # and checking it again (HMAC, JSON) is most of a verification's cost. Expiry and
        # revocation are checked on every request all the same.
        self._verified: dict[str, tuple[Principal, float]] = {}
        self._revoked: frozenset[str] = frozenset(
            k.id for k in identity.revoked_since(0.0))
        # Tokens issued before these times are refused: the user was disabled or changed.
        self._changed: dict[str, float] = {}
        self._disabled = frozenset(u.name for u in identity.list_users() if u.disabled)
        # Kept for the dashboard, whose sessions the bootstrap key opens (server/ui).
        self.bootstrap_key = bootstrap_key or ensure_bootstrap_key(home)
        self._bootstrap_hash = self._bootstrap(self.bootstrap_key)

    def _teams_of(self, user: str) -> tuple[str, ...]:
        try:
            return self.identity.get_user(user).teams
        except NotFound:
            return ()

    def _bootstrap(self, key: str) -> str:
        """Make sure the admin user and the state directory's key exist; the key's hash."""
        key_hash = self.hasher.hash(key)
        try:
            admin = self.identity.get_user(BOOTSTRAP_USER)
            if admin.role != ADMIN_ROLE:
                log.warning("user %s has role %s; the bootstrap key acts as admin anyway",
                            BOOTSTRAP_USER, admin.role)
        except NotFound:
            self.identity.put_user(User(BOOTSTRAP_USER, ADMIN_ROLE), None, adopt_jobs=True)
        stored = self.identity.get_key(BOOTSTRAP_KEY)
        if stored is None or stored.hash != key_hash:
            # A new state directory, or a key changed (the Secret): the key in force is the
            # one the state directory holds.
            self.identity.replace_key(StoredKey(
                BOOTSTRAP_KEY, BOOTSTRAP_USER, key_hash, description="the state directory's "
                "admin key", created_at=time.time()))
            with self._lock:
                self._revoked = self._revoked - {BOOTSTRAP_KEY}
        return key_hash

    # ------------------------------------------------------------------ verifying
    def verify(self, token: str) -> Principal:
        """The principal a bearer token stands for; AuthError (401) if it stands for none."""
        if token.count(".") != 2:
            return self._bootstrap_bearer(token)
        known = self._verified.get(token)
        if known is None:
            try:
                claims = self.signing.verify(token)
            except jwt.ExpiredSignatureError:
                raise _unauthorized("the token has expired") from None
            except jwt.InvalidTokenError:
                raise _unauthorized("the token is not one this control plane signed") from None
            known = (_principal(claims), float(claims["iat"]))
            if len(self._verified) >= VERIFIED_TOKENS:
                self._verified.clear()
            self._verified[token] = known
        principal, issued_at = known
        if time.time() >= principal.expires_at:
            raise _unauthorized("the token has expired")
        self.check_standing(principal.name, principal.key, issued_at)
        if principal.job is not None:
            self._running_record(principal.job.job, principal.job.attempt,
                                 principal.job.submitted_at)
        return principal

    def _running_record(self, job: str, attempt: int,
                        submitted_at: float | None = None) -> JobRecord:
        """The record of ``job`` while ``attempt`` runs; AuthError once it has ended."""
        record = self.attempts(job, attempt) if self.attempts is not None else None
        if record is None or (submitted_at is not None and record.submitted_at != submitted_at):
            raise _unauthorized(
                f"job {job}'s attempt {attempt} has ended: its credential no longer acts",
                fix="a job's credential works only in the pods of its running attempt")
        return record

    def check_standing(self, name: str, key: str, issued_at: float) -> None:
        """AuthError unless ``key`` is in force, ``name`` enabled and unchanged since
        ``issued_at``: what a token or a dashboard session opened then still needs."""
        if key in self._revoked:
            raise _unauthorized(f"API key {key} was revoked",
                                fix="log in with another key (`phalanx login`)")
        if name in self._disabled:
            raise _unauthorized(f"user {name} is disabled", fix="ask an admin to enable you")
        changed = self._changed.get(name)
        if changed is not None and issued_at < changed:
            raise _unauthorized(f"user {name}'s role or teams changed since the token was "
                                "issued")

    def _bootstrap_bearer(self, token: str) -> Principal:
        """The single token of earlier versions, still taken as a bearer for one release."""
        if not token or not self.hasher.matches(token, self._bootstrap_hash):
            raise _unauthorized("missing or wrong token")
        # A raw key obeys what its user's tokens obey: revoked or disabled, refused.
        self.check_standing(BOOTSTRAP_USER, BOOTSTRAP_KEY, time.time())
        return Principal(BOOTSTRAP_USER, ADMIN_ROLE, key=BOOTSTRAP_KEY)

    # ------------------------------------------------------------------ acting as
    def act_as(self, principal: Principal, name: str, client: str, request: str) -> Principal:
        """The user ``name`` as an admin acting as it (``X-Phalanx-Act-As``): its role,
        teams and queues, the admin's key and scope, and an audit entry naming both.

        Forbidden for anyone but an admin with a person's key (not a job's credential nor
        a compute plane's key), before the name is even looked at: the refusal tells
        nothing of it."""
        if not principal.acts_as_admin or principal.scope not in PERSON_SCOPES:
            raise Forbidden(
                f"acting as another user ({ACT_AS_HEADER}) needs role admin and a person's "
                f"key; {principal.name}'s token is not an admin's", field=ACT_AS_HEADER,
                fix="leave the header out: requests act as the user who signed in")
        if name == principal.name:
            return principal
        if not USER_NAME.fullmatch(name):
            raise SpecError(f"{name[:80]!r} is not a user name", field=ACT_AS_HEADER,
                            fix="name a user `phalanx users list` shows")
        try:
            user = self.identity.get_user(name)
        except NotFound:
            raise SpecError(f"no user {name!r} to act as", field=ACT_AS_HEADER,
                            fix="name a user `phalanx users list` shows") from None
        if user.disabled:
            raise SpecError(f"user {name} is disabled: no one acts as it", field=ACT_AS_HEADER,
                            fix=f"enable it first (`phalanx users enable {name}`)")
        self.identity.append([AuditEntry(principal.name, client, "act-as", name,
                                         {"request": request, "key": principal.key})])
        return Principal(user.name, user.role, user.teams, self._queues_of(user),
                         principal.scope, principal.key, principal.expires_at,
                         acted_by=principal.name)

    # ------------------------------------------------------------------ exchanging
    def exchange(self, key: str, client: str) -> IssuedToken:
        """A token for an API key; AuthError if the key is not in force, TooManyRequests
        instead once what it tried (``server/ratelimit.py``) has failed too often. A key in
        force always exchanges, whatever failed before it."""
        now = time.time()
        try:
            principal = self._principal_of_key(key, now)
        except AuthError as exc:
            known = self._known_id(key)
            self.failures.failed(tried_key(known) if known else tried_from(client))
            self.identity.append([AuditEntry(
                "-", client, "login-failed", known or key_id_of(key) or "-",
                {"reason": exc.message})])
            raise
        expires = now + self.token_ttl
        claims: dict[str, Any] = {
            "sub": principal.name, "role": principal.role, "teams": list(principal.teams),
            "queues": sorted(principal.queues), "scope": principal.scope,
            "key": principal.key, "iat": now, "exp": expires,
        }
        if principal.job is not None:
            claims["job"] = {"name": principal.job.job, "attempt": principal.job.attempt,
                             "submittedAt": principal.job.submitted_at}
        token = self.signing.sign(claims)
        self.identity.append([AuditEntry(principal.name, client, "login", principal.key)])
        issued = Principal(principal.name, principal.role, principal.teams, principal.queues,
                           principal.scope, principal.key, expires, principal.job)
        return IssuedToken(token, issued, expires, self.token_ttl)

    def _known_id(self, key: str) -> str | None:
        """The id of the key ``key`` tries, if that names a key this control plane knows
        (revoked, expired or of a disabled user included); None for an id no key has."""
        if (named := job_of_key(key)) is not None:
            job, attempt = named
            known = self.attempts is not None and self.attempts(job, attempt) is not None
            return f"job/{job}/{attempt}" if known else None
        if self.hasher.matches(key, self._bootstrap_hash):
            return BOOTSTRAP_KEY
        key_id = key_id_of(key)
        return key_id if key_id and self.identity.get_key(key_id) is not None else None

    def _principal_of_key(self, key: str, now: float) -> Principal:
        wrong = _unauthorized("the API key is wrong, expired or revoked",
                              fix="check the key, or ask an admin for a new one")
        if (named := job_of_key(key)) is not None:
            return self._principal_of_job_key(key, *named, wrong=wrong)
        # The bootstrap key may have any form (an earlier version's token, a Secret's value).
        bootstrap = self.hasher.matches(key, self._bootstrap_hash)
        stored = self.identity.get_key(BOOTSTRAP_KEY if bootstrap else key_id_of(key) or "")
        if stored is None or not self.hasher.matches(key, stored.hash) or not stored.usable(now):
            raise wrong
        try:
            user = self.identity.get_user(stored.user)
        except NotFound:
            raise wrong from None
        if user.disabled:
            raise _unauthorized(f"user {user.name} is disabled", fix="ask an admin to enable you")
        role = ADMIN_ROLE if stored.id == BOOTSTRAP_KEY else user.role
        return Principal(user.name, role, user.teams, self._queues_of(user), stored.scope,
                         stored.id)

    def _principal_of_job_key(self, key: str, job: str, attempt: int, *,
                              wrong: AuthError) -> Principal:
        """The owner of the job a credential was issued to, while its attempt runs.

        A job an earlier version submitted through the bootstrap key names the OS user its
        client named, whom the store may not hold: its owner is that key's user, admin, and
        the job's credential acts as it (minus admin routes, as always).
        """
        record = self._running_record(job, attempt)
        if not self.job_keys.matches(key, record, attempt):
            raise wrong
        binding = JobBinding(job, attempt, record.submitted_at)
        key_id = f"job/{job}/{attempt}"
        try:
            user = self.identity.get_user(record.user)
        except NotFound:
            return Principal(BOOTSTRAP_USER, ADMIN_ROLE, key=key_id, job=binding)
        if user.disabled:
            raise _unauthorized(f"user {user.name} is disabled", fix="ask an admin to enable you")
        return Principal(user.name, user.role, user.teams, self._queues_of(user), key=key_id,
                         job=binding)

    def _queues_of(self, user: User) -> frozenset[str]:
        return frozenset(q for team in self.identity.list_teams() if team.name in user.teams
                         for q in team.queues)

    # ------------------------------------------------------------------ changes
    def reload_standing(self) -> None:
        """Read again what another process may have changed: the revoked keys, the
        disabled users and the signing keys (a replica that follows, whose leader changes
        them)."""
        revoked = frozenset(k.id for k in self.identity.revoked_since(0.0))
        disabled = frozenset(u.name for u in self.identity.list_users() if u.disabled)
        self.signing.reload()
        with self._lock:
            self._revoked, self._disabled = revoked, disabled

    def revoked(self, key_id: str) -> None:
        with self._lock:
            self._revoked = self._revoked | {key_id}

    def user_changed(self, name: str, disabled: bool | None = None) -> None:
        """Tokens of ``name`` issued until now are refused (it exchanges its key again)."""
        with self._lock:
            self._changed[name] = time.time()
            if disabled is True:
                self._disabled = self._disabled | {name}
            elif disabled is False:
                self._disabled = self._disabled - {name}


def token_matches(header: str | None, token: str) -> bool:
    """Whether an ``Authorization`` header carries ``token`` (the dashboard's key login)."""
    if not header or not header.startswith("Bearer "):
        return False
    return hmac.compare_digest(header.removeprefix("Bearer ").strip(), token)


def _principal(claims: dict[str, Any]) -> Principal:
    job = claims.get("job")
    return Principal(
        name=str(claims["sub"]), role=str(claims.get("role", "viewer")),
        teams=tuple(claims.get("teams", ())), queues=frozenset(claims.get("queues", ())),
        scope=str(claims.get("scope", "read")), key=str(claims.get("key", "")),
        expires_at=float(claims["exp"]),
        job=JobBinding(str(job["name"]), int(job["attempt"]), float(job["submittedAt"]))
        if isinstance(job, dict) else None,
    )
