"""The Python client of the control plane's HTTP API (``/v1``)."""

from __future__ import annotations

import builtins
import ssl
import time
import uuid
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

import httpx

from phalanx.display import Listing
from phalanx.errors import (
    AuthError,
    ConnectionFailed,
    ServerError,
    SpecError,
)
from phalanx.sdk.auth import KeyAuth, looks_like_jwt
from phalanx.sdk.config import Endpoint, resolve_endpoint
from phalanx.sdk.failover import Failover
from phalanx.sdk.identity import IdentityCalls
from phalanx.sdk.planes import PlaneCalls
from phalanx.sdk.responses import error_from_response
from phalanx.sdk.secrets import SecretCalls
from phalanx.sdk.sources import SourceCalls
from phalanx.spec.names import ACT_AS_HEADER

if TYPE_CHECKING:
    from pydantic import BaseModel

    from phalanx.spec.api import (
        AppliedObject,
        DeletedObject,
        NodeDrained,
        NodeView,
        PoolView,
        QueuesOverview,
        ServerStatus,
    )
    from phalanx.spec.detailrows import DetailRow
    from phalanx.spec.resources import ConfigObject
    from phalanx.spec.rows import JobRows
    from phalanx.spec.status import JobDetail, JobEvent, JobList, JobRecord, JobStatus

M = TypeVar("M", bound="BaseModel")

# A submit whose answer was lost (the connection dropped, the answer timed out) is sent
# again with the same Idempotency-Key, so the control plane answers it without a second job.
SUBMIT_ATTEMPTS = 3
SUBMIT_RETRY_SECONDS = 0.5


def _since_param(since: str | timedelta | datetime) -> str:
    """``since`` as the logs route takes it."""
    if isinstance(since, timedelta):
        return f"{since.total_seconds():g}s"
    if isinstance(since, datetime):
        return (since if since.tzinfo else since.astimezone()).isoformat()
    return since


_KEY_FIX = ("check the API key: `phalanx login` stores yours; $PHALANX_TOKEN or the state "
            "directory's token file (the admin key) are used without a login")
# Pages ``list`` asks for when it gathers every job: big enough to be few requests,
# small enough that no answer is huge.
LIST_PAGE = 1000


def _selector_params(labels: Mapping[str, str] | None) -> builtins.list[tuple[str, str]]:
    return [("label", f"{k}={v}") for k, v in (labels or {}).items()]


def _job_path(name: str, *rest: str) -> str:
    return "/".join(["/v1/jobs", quote(name, safe=""), *rest])


def _node_path(name: str, verb: str | None = None) -> str:
    return f"/v1/nodes/{quote(name, safe='')}" + (f":{verb}" if verb else "")


def _list_params(
    status: JobStatus | str | Iterable[JobStatus | str] | None, queue: str | None, limit: int,
    user: str | None, labels: Mapping[str, str] | None, continue_token: str | None,
) -> list[tuple[str, str]]:
    params = [("status", s) for s in _status_params(status)]
    if queue is not None:
        params.append(("queue", queue))
    if user is not None:
        params.append(("user", user))
    params += _selector_params(labels)
    params.append(("limit", str(limit)))
    if continue_token is not None:
        params.append(("continue", continue_token))
    return params


def _status_params(status: JobStatus | str | Iterable[JobStatus | str] | None) -> list[str]:
    from phalanx.spec.jobstatus import JobStatus

    if status is None:
        return []
    items = [status] if isinstance(status, str) else list(status)
    out = []
    for item in items:
        try:
            out.append(JobStatus(item).value)
        except ValueError:
            matches = [s.value for s in JobStatus if s.value.lower() == str(item).lower()]
            if not matches:
                raise SpecError(
                    f"unknown job status {item!r}",
                    field="status",
                    fix=f"use one of {', '.join(s.value for s in JobStatus)}",
                ) from None
            out.append(matches[0])
    return out


def _tls(verify: bool | str) -> bool | ssl.SSLContext:
    """httpx's ``verify``: a CA bundle's path becomes the context that trusts it."""
    if not isinstance(verify, str):
        return verify
    try:
        return ssl.create_default_context(cafile=verify)
    except (OSError, ssl.SSLError) as exc:
        raise SpecError(f"cannot read the CA bundle {verify}: {exc}", field="verify",
                        fix="name a PEM file of the CAs that signed the server's "
                        "certificate") from None


class Client(IdentityCalls, PlaneCalls, SecretCalls, SourceCalls):
    """A connection to one Phalanx control plane.

    ``url`` and ``token`` default to ``$PHALANX_URL`` / ``$PHALANX_TOKEN``, then (inside a
    job's pod) to the key in ``$PHALANX_API_KEY_FILE``, then to the
    current context of ``phalanx login`` and its key, then to what the server running on
    the state directory (``home``, default ``$PHALANX_HOME`` or ``~/.phalanx``) wrote there.
    ``token`` is an API key, exchanged for short-lived tokens that are refreshed before
    they expire (``sdk/auth.py``), or a token to send as it is. ``act_as``: an admin's
    requests act as that user (``X-Phalanx-Act-As``; each is audited with both names).
    ``verify``: how to check the server's TLS certificate (True: the system's CAs; a CA
    bundle's path; False: no check); default: what ``phalanx.login`` stored for the server.
    """

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        home: str | Path | None = None,
        timeout: float = 30.0,
        act_as: str | None = None,
        verify: bool | str | None = None,
    ) -> None:
        self.endpoint: Endpoint = resolve_endpoint(url, token, home, verify)
        self.timeout = timeout
        headers = {"Accept": "application/json"}
        if act_as is not None:
            headers[ACT_AS_HEADER] = act_as
        self.auth: KeyAuth | None = None
        self._exchange: httpx.Client | None = None
        key = self.endpoint.token
        tls = _tls(self.endpoint.verify)
        # Several URLs are replicas of one control plane: requests go to the one that
        # leads (sdk/failover.py); so does a follower's redirect, with one URL too.
        urls = self.endpoint.url.split(",")
        if key and looks_like_jwt(key):
            headers["Authorization"] = f"Bearer {key}"
        elif key:
            self._exchange = httpx.Client(base_url=urls[0], timeout=timeout,
                                          headers={"Accept": "application/json"},
                                          transport=Failover(urls, verify=tls))
            self.auth = KeyAuth(key, self._exchange)
        self._http = httpx.Client(base_url=urls[0], headers=headers, timeout=timeout,
                                  auth=self.auth, transport=Failover(urls, verify=tls))

    @property
    def url(self) -> str:
        return self.endpoint.url

    # ------------------------------------------------------------------ plumbing
    def close(self) -> None:
        self._http.close()
        if self._exchange is not None:
            self._exchange.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client({self.url!r})"

    def _unreachable(self, exc: httpx.TransportError) -> ConnectionFailed:
        if isinstance(exc, httpx.TimeoutException) and not isinstance(exc, httpx.ConnectTimeout):
            return ConnectionFailed(
                f"the Phalanx control plane at {self.url} did not answer in time ({exc})",
                fix="check `phalanx status`, or pass a longer timeout",
            )
        return ConnectionFailed(
            f"no Phalanx control plane at {self.url}",
            fix="start one with `phalanx up -d`, or set PHALANX_URL to where it runs",
        )

    def _answer(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """The route's answer, a refusal raised as the error it names."""
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise self._unreachable(exc) from None
        except AuthError as exc:  # exchanging the key for a token failed
            raise AuthError(exc.message, field="key", fix=_KEY_FIX) from None
        if response.is_error:
            raise error_from_response(response)
        return response

    def _request(self, model: type[M], method: str, path: str, **kwargs: Any) -> M:
        """The answer of the route, parsed into the model the API declares for it."""
        from pydantic import ValidationError

        response = self._answer(method, path, **kwargs)
        try:
            return model.model_validate_json(response.content)
        except ValidationError as exc:
            raise _not_a(model.__name__, method, path,
                         exc.errors(include_url=False)[0]["msg"]) from None

    def _held(self, path: str) -> bool:
        """Whether ``HEAD path`` answers 200 (False on 404)."""
        try:
            response = self._http.request("HEAD", path)
        except httpx.TransportError as exc:
            raise self._unreachable(exc) from None
        if response.status_code == 404:
            return False
        if response.is_error:
            raise error_from_response(response)
        return True

    # ------------------------------------------------------------------ server
    def healthy(self) -> bool:
        """Whether the control plane answers ``/healthz`` (needs no token)."""
        try:
            return self._http.get("/healthz", auth=None).status_code == 200
        except httpx.TransportError:
            return False

    def version(self) -> str:
        """The server's version."""
        # Read without the API's models: `phalanx version` answers without loading them.
        response = self._answer("GET", "/v1/version")
        try:
            version = response.json()["version"]
        except (ValueError, TypeError, KeyError):
            version = None
        if not isinstance(version, str):
            raise _not_a("VersionInfo", "GET", "/v1/version", "no version string")
        return version

    def status(self) -> ServerStatus:
        """The server's version, start time, compute plane, store, job counts and nodes."""
        from phalanx.spec.api import ServerStatus

        return self._request(ServerStatus, "GET", "/v1/status")

    # ------------------------------------------------------------------ jobs
    def submit(self, job: object, *, base: str | Path | None = None) -> JobRecord:
        """Submit a job (a JobSpec, a ``phalanx.Job`` builder, a dict or a YAML file path,
        or a Kubernetes workload manifest as a dict or a YAML file).

        The job is validated locally first: bad input raises SpecError and sends nothing.
        Its ``workdir``, a path relative to ``base`` (default: the YAML file's directory,
        else the current one), is packed and uploaded, and a ``git`` ref resolved
        (``with_sources``).
        """
        from phalanx.sdk.documents import to_submission
        from phalanx.spec.manifests import Translation
        from phalanx.spec.status import JobRecord

        item = to_submission(job)
        if isinstance(item, Translation):
            return self.submit_manifests([item], base=_base_of(job, base))[0]
        spec = self.with_sources(item, _base_of(job, base))
        return self._submit(JobRecord, "/v1/jobs", spec.to_dict())

    def submit_manifests(
        self, jobs: Iterable[object] | str | Path, *, base: str | Path | None = None,
    ) -> builtins.list[JobRecord]:
        """Submit Kubernetes workload manifests (batch Job, JobSet, PyTorchJob, MPIJob,
        RayJob, RayCluster, AppWrapper; dicts or a YAML file of them), mixed with jobs, all
        or nothing. Each is checked locally first; the control plane keeps each manifest
        with its job (``get(name).manifest``). docs/manifests.md lists what each field
        becomes. The jobs among them have their sources packed as ``submit`` does, and so
        has a manifest's workdir (its ``phalanx.dev/workdir`` annotation, a directory
        relative to ``base``, default the YAML file's)."""
        from phalanx.sdk.documents import to_submissions
        from phalanx.spec.manifests import Translation, wire
        from phalanx.spec.status import JobList

        if isinstance(jobs, str | Path):
            items, bases = to_submissions(jobs), None
        else:
            originals = builtins.list(jobs)
            items, bases = to_submissions(originals), originals
        sent = []
        for i, item in enumerate(items):
            where = _base_of(jobs if bases is None else bases[i], base)
            item = (self.manifest_with_sources(item, where) if isinstance(item, Translation)
                    else self.with_sources(item, where))
            sent.append(wire(item))
        return self._submit(JobList, "/v1/manifests", {"items": sent}).items

    def submit_many(self, jobs: Iterable[object], *,
                    base: str | Path | None = None) -> builtins.list[JobRecord]:
        """Submit several jobs in one request, all or nothing (as ``submit`` takes them).

        Every job is validated locally first; the server stores all of them or, naming
        the first bad one as ``items[i]``, none.
        """
        from phalanx.sdk.documents import to_job_spec
        from phalanx.spec.manifests import Translation, is_manifest
        from phalanx.spec.status import JobList

        jobs = builtins.list(jobs)
        if any(isinstance(job, Translation) or is_manifest(job) for job in jobs):
            return self.submit_manifests(jobs, base=base)  # kept with their jobs, as written
        specs = []
        for i, job in enumerate(jobs):
            try:
                specs.append(self.with_sources(to_job_spec(job),
                                               _base_of(job, base)).to_dict())
            except SpecError as exc:
                where = f"items[{i}]" + (f".{exc.field}" if exc.field else "")
                raise SpecError(exc.message, field=where, fix=exc.fix) from None
        return self._submit(JobList, "/v1/jobs:batch", {"items": specs}).items

    def _submit(self, model: type[M], path: str, body: object) -> M:
        """POST a submit under a fresh Idempotency-Key, sent again with the same key while
        the control plane cannot be reached: a retry never makes a second job."""
        headers = {"Idempotency-Key": str(uuid.uuid4())}
        for attempt in range(1, SUBMIT_ATTEMPTS + 1):
            try:
                return self._request(model, "POST", path, json=body, headers=headers)
            except ConnectionFailed:
                if attempt == SUBMIT_ATTEMPTS:
                    raise
                time.sleep(SUBMIT_RETRY_SECONDS * attempt)
        raise AssertionError("unreachable")  # the loop returns or raises

    def get(self, name: str) -> JobDetail:
        """A job with its status, pods and events."""
        from phalanx.spec.status import JobDetail

        return self._request(JobDetail, "GET", _job_path(name))

    def get_row(self, name: str) -> DetailRow:
        """A job as ``get`` has it, as rows of the fields ``phalanx describe`` shows
        (``spec/detailrows.py``): read without building the job's whole record."""
        from phalanx.spec.detailrows import DetailRow

        path = _job_path(name)
        response = self._answer("GET", path)
        try:
            return DetailRow.of(response.json())
        except (ValueError, TypeError, KeyError, AttributeError, SpecError) as exc:
            raise _not_a("JobDetail", "GET", path, repr(exc)) from None

    def list(
        self,
        status: JobStatus | str | Iterable[JobStatus | str] | None = None,
        queue: str | None = None,
        limit: int | None = None,
        *,
        user: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> builtins.list[JobRecord]:
        """Jobs, newest submission first, filtered by status, LocalQueue, user and labels
        (all that are given); the first ``limit`` of them, or all, fetched page by page.
        A notebook shows the list as a table."""
        from phalanx.spec.tables import jobs_table

        if limit is not None:
            first = self.list_page(status, queue, limit, user=user, labels=labels).items
            return Listing(first, jobs_table)
        records: builtins.list[JobRecord] = Listing([], jobs_table)
        token: str | None = None
        while True:
            page = self.list_page(status, queue, LIST_PAGE, user=user, labels=labels,
                                  continue_token=token)
            records += page.items
            token = page.continue_token
            if token is None:
                return records

    def list_page(
        self,
        status: JobStatus | str | Iterable[JobStatus | str] | None = None,
        queue: str | None = None,
        limit: int = 50,
        *,
        user: str | None = None,
        labels: Mapping[str, str] | None = None,
        continue_token: str | None = None,
    ) -> JobList:
        """One page of jobs, newest first: ``items``, ``remaining_item_count`` (how many
        follow) and ``continue_token`` (pass it back for the next page; None on the last)."""
        from phalanx.spec.status import JobList

        params = _list_params(status, queue, limit, user, labels, continue_token)
        return self._request(JobList, "GET", "/v1/jobs", params=params)

    def list_rows(
        self, status: JobStatus | str | Iterable[JobStatus | str] | None = None,
        queue: str | None = None, limit: int | None = 50, *, user: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> JobRows:
        """The first ``limit`` jobs (all with None, page by page) as ``list`` has them, as
        rows of the fields a table of jobs shows (``spec/rows.py``): read without building
        each job's whole record."""
        from phalanx.spec.rows import JobRows

        rows: builtins.list[JobRows] = []
        token: str | None = None
        while True:
            params = _list_params(status, queue, LIST_PAGE if limit is None else limit,
                                  user, labels, token)
            response = self._answer("GET", "/v1/jobs", params=params)
            try:
                rows.append(JobRows.of(response.json()))
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                raise _not_a("JobList", "GET", "/v1/jobs", repr(exc)) from None
            token = rows[-1].continue_token
            if limit is not None or token is None:
                return rows[0] if len(rows) == 1 else JobRows(
                    items=[row for page in rows for row in page.items])

    def wait(
        self,
        name: str,
        timeout: float | None = None,
        poll: float = 0.5,
        *,
        on_update: Callable[[JobDetail], None] | None = None,
    ) -> JobRecord:
        """Block until the job is Succeeded, Failed or Cancelled and return it.

        ``on_update`` sees the job at each poll (for progress displays). Raises
        TimeoutError if the job is still going after ``timeout`` seconds.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            record = self.get(name)
            if on_update is not None:
                on_update(record)
            if record.status.terminal:
                return record
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"job {name} is still {record.status.value} after {timeout}s")
            pause = poll if deadline is None else min(poll, max(0.0, deadline - time.monotonic()))
            time.sleep(pause)

    def logs(
        self, name: str, pod: int | str | None = None, follow: bool = False, *,
        tail: int | None = None, since: str | timedelta | datetime | None = None,
    ) -> Iterator[str]:
        """The job's log lines (one pod's, by rank or name, or all, prefixed by pod name).

        With ``follow`` the iterator keeps going while the job runs and ends once it is
        finished and its logs are drained. ``tail`` keeps the last N lines of each pod;
        ``since`` the lines written since a time: a datetime, a timedelta back from now, or
        the server's text form ("10m", "2025-01-31T12:00:00Z"); exact to the second.
        """
        params = {"follow": "true" if follow else "false"}
        if pod is not None:
            params["pod"] = str(pod)
        if tail is not None:
            params["tail"] = str(tail)
        if since is not None:
            params["since"] = _since_param(since)
        # A followed log may stay silent for as long as the job does: no read timeout then.
        timeout = httpx.Timeout(self.timeout, read=None) if follow else self.timeout
        try:
            with self._http.stream(
                "GET", _job_path(name, "logs"), params=params, timeout=timeout
            ) as response:
                if response.is_error:
                    response.read()
                    raise error_from_response(response)
                yield from response.iter_lines()
        except httpx.TransportError as exc:
            raise self._unreachable(exc) from None

    # ------------------------------------------------------------------ Ray dashboards
    def bearer(self) -> str | None:
        """The bearer token requests carry now (exchanged from the key, refreshed before it
        expires), for another client speaking to a proxied route (Ray's
        ``JobSubmissionClient``); None when this client sends none."""
        try:
            if self.auth is not None:
                return self.auth.token()
        except httpx.TransportError as exc:
            raise self._unreachable(exc) from None
        header = self._http.headers.get("Authorization")
        return header[len("Bearer "):] if header and header.startswith("Bearer ") else None

    def ray_dashboard(self, name: str) -> str:
        """The address of job ``name``'s Ray dashboard and job-submission API as the control
        plane proxies it, behind this client's token (``server/routes/ray.py``)."""
        from phalanx.spec.ray import dashboard_proxy

        return self.url.rstrip("/") + dashboard_proxy(name)

    def ray_request(self, name: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """``method`` on ``path`` of job ``name``'s proxied Ray dashboard (``api/...``), as
        the dashboard answered it (a refusal of the control plane's is raised)."""
        from phalanx.spec.ray import dashboard_proxy

        try:
            response = self._http.request(method, f"{dashboard_proxy(name)}/{path}", **kwargs)
        except httpx.TransportError as exc:
            raise self._unreachable(exc) from None
        if response.is_error and _is_envelope(response):
            raise error_from_response(response)
        return response

    def cancel(self, name: str) -> JobRecord:
        """Cancel a job (a no-op for a finished one); its pods are stopped."""
        from phalanx.spec.status import JobRecord

        return self._request(JobRecord, "POST", _job_path(name, "cancel"))

    def cancel_matching(
        self, *, queue: str | None = None, labels: Mapping[str, str] | None = None,
        user: str | None = None,
    ) -> builtins.list[JobRecord]:
        """Cancel every live job in ``queue`` with ``labels`` submitted by ``user`` (all that
        are given; at least one); returns the jobs cancelled."""
        from phalanx.spec.status import JobList

        body: dict[str, Any] = {"labels": dict(labels or {})}
        if queue is not None:
            body["queue"] = queue
        if user is not None:
            body["user"] = user
        return self._request(JobList, "POST", "/v1/jobs:cancel", json=body).items

    def delete_job(self, name: str) -> JobRecord:
        """Delete a finished job with its events and logs (Conflict for a live one)."""
        from phalanx.spec.status import JobRecord

        return self._request(JobRecord, "DELETE", _job_path(name))

    def events(self, name: str) -> builtins.list[JobEvent]:
        from phalanx.spec.api import EventList

        return self._request(EventList, "GET", _job_path(name, "events")).items

    # ------------------------------------------------------------------ queues, nodes, config
    def queues(self) -> QueuesOverview:
        """ClusterQueues with their usage per flavor and resource, LocalQueues and cohorts."""
        from phalanx.spec.api import QueuesOverview

        return self._request(QueuesOverview, "GET", "/v1/queues")

    def nodes(self) -> builtins.list[NodeView]:
        """Nodes with allocatable and used resources, labels, taints and health."""
        from phalanx.spec.api import NodeList

        return self._request(NodeList, "GET", "/v1/nodes").items

    def pools(self, job: str | None = None) -> builtins.list[PoolView]:
        """Node pools not yet deleted, or every attempt of ``job`` (why each failed)."""
        from phalanx.spec.api import PoolList

        params = {"job": job} if job is not None else {}
        return self._request(PoolList, "GET", "/v1/pools", params=params).items

    def node(self, name: str) -> NodeView:
        """One node, with the last answer of each of its health checks."""
        from phalanx.spec.api import NodeView

        return self._request(NodeView, "GET", _node_path(name))

    def cordon(self, name: str) -> NodeView:
        """Place no new pods on the node."""
        from phalanx.spec.api import NodeView

        return self._request(NodeView, "POST", _node_path(name, "cordon"))

    def uncordon(self, name: str) -> NodeView:
        from phalanx.spec.api import NodeView

        return self._request(NodeView, "POST", _node_path(name, "uncordon"))

    def drain(self, name: str, grace_seconds: float | None = None) -> NodeDrained:
        """Cordon the node and stop its gangs with ``grace_seconds`` to end; they requeue."""
        from phalanx.spec.api import DrainRequest, NodeDrained

        return self._request(NodeDrained, "POST", _node_path(name, "drain"),
                             json=DrainRequest(grace_seconds=grace_seconds).to_dict())

    def apply(
        self, documents: Sequence[Mapping[str, Any]] | str | Path
    ) -> builtins.list[AppliedObject]:
        """Create or update flavors, cohorts, queues and priority classes, all or nothing.

        Returns what was done to each document (created, configured or unchanged). Kueue's
        own objects are read too; what they say that Phalanx keeps nowhere is warned of.
        """
        from phalanx.sdk.documents import to_config_documents
        from phalanx.spec.api import ConfigApplied

        notes: builtins.list[str] = []
        docs = to_config_documents(documents, notes)
        for note in notes:
            warnings.warn(note, UserWarning, stacklevel=2)
        return self._request(
            ConfigApplied, "POST", "/v1/config/apply", json={"documents": docs}
        ).applied

    def delete(
        self, documents: Sequence[Mapping[str, Any]] | str | Path,
    ) -> builtins.list[DeletedObject]:
        """Delete the flavors, cohorts, queues and priority classes the documents name (a
        YAML file, as applied), all or nothing; refused while any is in use."""
        from phalanx.sdk.documents import to_config_documents
        from phalanx.spec.api import ConfigDeleted

        docs = to_config_documents(documents)
        refs = [{"kind": d["kind"], "name": d["name"]} for d in docs]
        return self._request(
            ConfigDeleted, "POST", "/v1/config/delete", json={"documents": refs}
        ).deleted

    def delete_object(self, kind: str, name: str) -> builtins.list[DeletedObject]:
        """Delete one config object (kind as kubectl takes it: clusterqueue, cq, ...)."""
        from phalanx.spec.api import ConfigDeleted

        path = f"/v1/config/{quote(kind, safe='')}/{quote(name, safe='')}"
        return self._request(ConfigDeleted, "DELETE", path).deleted

    def config(self) -> builtins.list[ConfigObject]:
        """The current queue configuration: flavors, cohorts, queues and priority classes."""
        from phalanx.spec.api import ConfigDocuments

        return list(self._request(ConfigDocuments, "GET", "/v1/config").documents)


def _not_a(model: str, method: str, path: str, why: str) -> ServerError:
    """An answer that is not what the API declares: client and server differ in version."""
    return ServerError(f"the answer of {method} {path} is not a {model}: {why}",
                       fix="check that the client and the control plane have the same version")


def _is_envelope(response: httpx.Response) -> bool:
    """Whether an error answer is the control plane's envelope (not the dashboard's own)."""
    try:
        body = response.json()
    except ValueError:
        return False
    return isinstance(body, dict) and isinstance(body.get("error"), dict) \
        and "type" in body["error"]


def _base_of(job: object, base: str | Path | None) -> Path | None:
    """What a relative workdir is relative to: ``base``, else a YAML file's directory."""
    if base is not None:
        return Path(base)
    if isinstance(job, str | Path):
        return Path(job).expanduser().resolve().parent
    return None
