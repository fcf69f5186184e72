"""The exceptions Phalanx raises, as one small hierarchy.

Every error a user can cause names the field at fault and says how to fix it,
so the CLI, the SDK and the HTTP API can all print the same sentence.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator

ERROR_TYPES: dict[str, type[PhalanxError]] = {}
"""Every error class by its name (filled as the classes are defined; the first of a name
wins, so a later class cannot take over a name the wire already uses)."""


class PhalanxError(Exception):
    """Base class of every error Phalanx raises on purpose.

    Every subclass registers itself by name (``ERROR_TYPES``), so an error sent over the
    wire as ``{"type": ...}`` comes back as the same class without a list to keep up.
    """

    status_code = 500

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        ERROR_TYPES.setdefault(cls.__name__, cls)

    def __init__(self, message: str, *, field: str | None = None, fix: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.fix = fix

    def __str__(self) -> str:
        text = f"{self.field}: {self.message}" if self.field else self.message
        if self.fix:
            text += f" ({self.fix})"
        return text

    def to_dict(self) -> dict[str, str | None]:
        return {
            "type": type(self).__name__,
            "message": self.message,
            "field": self.field,
            "fix": self.fix,
        }


class SpecError(PhalanxError):
    """A spec or config document is invalid; nothing was applied."""

    status_code = 400


class NotFound(PhalanxError):
    status_code = 404


class Conflict(PhalanxError):
    status_code = 409


class TooManyPending(PhalanxError):
    """A queue already holds as many pending jobs as its limit allows; try again later."""

    status_code = 429


class PayloadTooLarge(PhalanxError):
    """The request body is larger than the control plane takes."""

    status_code = 413


class AuthError(PhalanxError):
    status_code = 401


class Forbidden(PhalanxError):
    """The caller is known but may not do this; the message names the role or team needed."""

    status_code = 403


class TooManyRequests(PhalanxError):
    """A bound on concurrent use (e.g. log followers) is reached; retry once others end."""

    status_code = 429


class ServerError(PhalanxError):
    status_code = 500


class InternalError(PhalanxError):
    """An invariant of Phalanx itself broke (not the caller's fault); the server logs it."""

    status_code = 500


class Unavailable(PhalanxError):
    """The control plane answers but cannot do its work now (its loop is stuck or stopped)."""

    status_code = 503


class NotLeader(Unavailable):
    """This replica of the control plane does not lead (or no longer does): its writes are
    refused by the store's fence, and a client retries on the leader."""


class LeaderOnly(NotLeader):
    """A read a replica that follows cannot answer from the store (it needs the leader's
    loop or planes): the follower redirects it to the leader."""


class ConnectionFailed(PhalanxError):
    """The control plane could not be reached."""

    status_code = 503


class NotSupported(PhalanxError):
    """The control plane cannot do this for this object, ever (not a passing condition):
    the message says why, the fix what to do instead."""

    status_code = 501




class InsufficientStorage(PhalanxError):
    """The control plane's state directory (``PHALANX_HOME``) has no space left: nothing
    was written; the request can be sent again once space is freed."""

    status_code = 507


ERROR_TYPES[PhalanxError.__name__] = PhalanxError


def error_by_status(status: int, default: type[PhalanxError]) -> type[PhalanxError]:
    """The error class that stands for an HTTP status: the first one defined here with that
    status (``SpecError`` for 400, ``Unavailable`` for 503...), else ``default``."""
    return _BY_STATUS.get(status, default)


_BY_STATUS: dict[int, type[PhalanxError]] = {}
for _cls in ERROR_TYPES.values():
    _BY_STATUS.setdefault(_cls.status_code, _cls)
_BY_STATUS.pop(500, None)  # a 500 is whatever the caller says it is (ServerError, mostly)


# SQLite's "database or disk is full" (SQLITE_FULL), as its driver's exception says it.
_SQLITE_FULL = "database or disk is full"
_SQLITE_FULL_CODE = 13


def chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and every exception it wraps (its causes and contexts, and the driver's
    exception SQLAlchemy keeps as ``orig``), each once."""
    seen: set[int] = set()
    stack: list[BaseException | None] = [exc]
    while stack:
        current = stack.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        orig = getattr(current, "orig", None)
        stack.extend([current.__cause__, current.__context__,
                      orig if isinstance(orig, BaseException) else None])


def is_no_space(exc: BaseException) -> bool:
    """Whether ``exc``, or an exception it wraps, is a write that found no space left."""
    for current in chain(exc):
        if isinstance(current, OSError) and current.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if getattr(current, "sqlite_errorcode", None) == _SQLITE_FULL_CODE:
            return True
        driver = type(current).__module__.partition(".")[0] in ("sqlite3", "sqlalchemy")
        if driver and _SQLITE_FULL in str(current):
            return True
    return False
