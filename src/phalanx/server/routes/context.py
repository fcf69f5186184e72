"""What every ``/v1`` route shares: the control plane, who calls, how answers are redacted,
and the error answers a route declares and gives."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from fastapi.responses import JSONResponse, Response
from pydantic import TypeAdapter

from phalanx.control import Controller
from phalanx.control.planes import PlaneRegistry
from phalanx.control.service import JobService
from phalanx.errors import NotFound, PhalanxError
from phalanx.server.auth import Authenticator
from phalanx.server.logstream import FollowerSlots
from phalanx.server.principal import Principal
from phalanx.server.redaction import Occupancy, SecretEnvRule
from phalanx.server.storage import StateDisk
from phalanx.spec.api import ErrorResponse
from phalanx.spec.status import JobRecord
from phalanx.store import IdentityStore, LogStore
from phalanx.store.workdirs import WorkdirStore


@dataclass
class ApiContext:
    """The parts of the control plane the routes use. Routers look these up as they are
    built and call them only when a request comes (``phalanx.server.openapi`` builds the
    app from stand-ins to write the document)."""

    controller: Controller
    auth: Authenticator
    logs: LogStore
    db_label: str
    secret_env: SecretEnvRule
    slots: FollowerSlots
    log_reads: anyio.CapacityLimiter
    planes: PlaneRegistry | None = None  # the compute planes; None: their routes not served
    control_plane_id: str = ""
    disk: StateDisk | None = None  # the state directory's disk, when the app watches it
    archives: WorkdirStore | None = None  # jobs' packed working directories
    # Typed bodies are checked by FastAPI first; when they fail, the route's own parser
    # (by the route's path) looks at the same body again so the error names the field and
    # the fix as before.
    parsers: dict[str, Callable[[object], object]] = field(default_factory=dict)

    @property
    def service(self) -> JobService:
        return self.controller.service

    @property
    def identity(self) -> IdentityStore:
        return self.auth.identity

    @property
    def occupancy(self) -> Occupancy:
        return Occupancy(self.auth.hasher.pepper)

    def visible_job(self, name: str, viewer: Principal) -> JobRecord:
        """The job, if ``viewer`` may see it; NotFound otherwise, the same answer as for a
        job that does not exist, so a refusal never tells whether one does."""
        missing = NotFound(f"job {name!r} does not exist", field="name",
                           fix="check the name with `phalanx jobs`")
        try:
            record = self.service.get(name)
        except NotFound:
            raise missing from None
        if not viewer.sees(record):
            raise missing
        return record


def error_response(exc: PhalanxError) -> JSONResponse:
    """The error envelope of ``exc``, with its status."""
    return JSONResponse({"error": exc.to_dict()}, status_code=exc.status_code)


class Answer:
    """A route's answer of one model, written to JSON here: the bytes FastAPI would send
    for the route's ``response_model`` (camelCase, every field), without FastAPI checking
    the answer against that model again in a worker thread of its own, which cost a
    submit more than its own validation. The route declares the model
    (``response_model=``), so /openapi.json says the same."""

    def __init__(self, model: type[Any]) -> None:
        self._adapter: TypeAdapter[Any] = TypeAdapter(model)

    def __call__(self, value: Any, status_code: int) -> Response:
        return Response(self._adapter.dump_json(value, by_alias=True),
                        status_code=status_code, media_type="application/json")


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The error answers a route declares, all in the error envelope."""
    words = {
        400: "The request is invalid; the error names the field and the fix",
        401: "Missing, expired or wrong token, or (exchanging a key) a wrong key",
        403: "The caller's role, team or key scope does not allow this; the error says "
             "what was needed",
        404: "No such job or object",
        409: "The name is taken, the object is in use, or the Idempotency-Key came with "
             "another request",
        413: "The request body is larger than the control plane takes",
        429: "The queue holds as many pending jobs as its maxPendingJobs allows, or (exchanging "
             "a key) the client failed too often",
        500: "The control plane failed; it logged why",
        501: "The control plane cannot do this for this object; the error says why",
        503: "The control loop is stuck or stopped",
        507: "No space left in the control plane's state directory (PHALANX_HOME); "
             "nothing was written",
    }
    return {code: {"model": ErrorResponse, "description": words[code]}
            for code in (*codes, 500, 507)}


V1 = errors(401)
# Routes reserved to some roles answer 403 too.
ROLE_ERRORS = errors(401, 403)
