"""The control plane's store of jobs, job events and queue configuration.

Every method is one short transaction on a pooled connection, so the scheduling
loop and the HTTP request threads can share one Store. The loop's writes come in
batches (``save_jobs``): one transaction and one executemany per table per cycle.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import copy
import json
import threading
import time
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Insert,
    Select,
    delete,
    func,
    insert,
    select,
    tuple_,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DBAPIError, IntegrityError

from phalanx.errors import Conflict, InternalError, NotFound, NotLeader, ServerError, SpecError
from phalanx.spec.config import QueueConfig
from phalanx.spec.status import TERMINAL_STATUSES, JobEvent, JobRecord, JobStatus
from phalanx.store import migrate
from phalanx.store.engine import (
    WRITE_OPTION,
    create_store_engine,
    default_url,
    display_url,
    is_sqlite,
    parse_url,
    unavailable_reason,
)
from phalanx.store.groupcommit import GroupCommit
from phalanx.store.leases import NOT_LEADER_FIX, Fence, check_fence
from phalanx.store.rows import (
    event_from_row,
    event_row,
    job_from_row,
    job_row,
    label_rows,
    stored,
)
from phalanx.store.submits import IdempotentRequest as IdempotentRequest
from phalanx.store.submits import SubmitRows, insert_submits
from phalanx.store.submits import insert_audit as insert_audit
from phalanx.store.tables import (
    idempotency_keys,
    job_events,
    job_labels,
    job_manifests,
    jobs,
    queue_config,
)

_CONFIG_ROW = 1
_FINISHED = sorted(s.value for s in TERMINAL_STATUSES)
CONTINUE_FIX = "pass the continue token of the previous page as it was given, or leave it out"


@dataclass(frozen=True, slots=True)
class JobFilter:
    """Which jobs a list or bulk action is about; every given part must match."""

    statuses: Collection[JobStatus] | None = None
    queue: str | None = None
    user: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)

    def matches(self, record: JobRecord) -> bool:
        return (
            (self.statuses is None or record.status in self.statuses)
            and (self.queue is None or record.queue == self.queue)
            and (self.user is None or record.user == self.user)
            and all(record.spec.labels.get(k) == v for k, v in self.labels.items())
        )


@dataclass(frozen=True, slots=True)
class JobPage:
    """One page of a list, newest first; ``next`` continues it, ``remaining`` jobs follow."""

    items: list[JobRecord]
    next: str | None
    remaining: int


def _cursor(record_key: tuple[float, str]) -> str:
    raw = json.dumps(list(record_key), separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _parse_cursor(token: str) -> tuple[float, str]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        submitted_at, name = json.loads(raw)
        if isinstance(submitted_at, int | float) and isinstance(name, str):
            return float(submitted_at), name
    except (binascii.Error, ValueError, TypeError):
        pass
    raise SpecError("is not a continue token of this API", field="continue", fix=CONTINUE_FIX)


class Store:
    """Jobs, events and the queue configuration in SQLite (default) or PostgreSQL."""

    def __init__(self, url: str) -> None:
        self._url = parse_url(url)
        self.engine = create_store_engine(self._url)
        self._writer = self.engine.execution_options(**{WRITE_OPTION: True})
        # SQLite has one writer at a time anyway; queueing this process's writers on a
        # lock is fairer and cheaper than having them spin in SQLite's busy handler.
        self._write_lock = threading.Lock() if is_sqlite(self.engine) else None
        # Submits that arrive together share a transaction (and on PostgreSQL the wait for
        # its commit to reach the disk); each answers once its own is committed.
        self._submits: GroupCommit[Connection, SubmitRows] = GroupCommit(
            self.write, insert_submits, self._write_alone)
        # Set by a replica that leads (store/leases.py): every write then checks, in its own
        # transaction, that this replica still holds the lease under this term.
        self.fence: Fence | None = None
        # end_idle_transactions_after: the server ends a write transaction idle this long.
        self._idle_write_limit_ms: int | None = None
        # Set on a read-only view (``reader``): why every write is refused.
        self.refusal: str | None = None
        # Why the last write failed, while the database cannot be reached (dropped or
        # refused connections): cleared by the next write that commits.
        self.unavailable: str | None = None
        dialect_insert = sqlite.insert if is_sqlite(self.engine) else postgresql.insert
        upsert = dialect_insert(jobs)
        self._upsert_jobs: Insert = upsert.on_conflict_do_update(
            index_elements=[jobs.c.name],
            set_={c.name: upsert.excluded[c.name] for c in jobs.c if not c.primary_key},
        )
        config_upsert = dialect_insert(queue_config)
        self._upsert_config: Insert = config_upsert.on_conflict_do_update(
            index_elements=[queue_config.c.id],
            set_={
                "revision": queue_config.c.revision + 1,
                "saved_at": config_upsert.excluded.saved_at,
                "document": config_upsert.excluded.document,
            },
        )
        try:
            migrate.upgrade(self.engine)
        except DBAPIError as exc:
            self.engine.dispose()
            raise ServerError(
                f"cannot open the store at {self.url}: {exc.orig or exc}",
                field="db",
                fix="check the URL, that the database server is running and that you may "
                "create tables in it",
            ) from exc
        except BaseException:
            self.engine.dispose()
            raise

    @classmethod
    def for_home(cls, home: Path, url: str | None = None) -> Store:
        """The store of a state directory: ``url`` if given, else its SQLite file."""
        return cls(url or default_url(home))

    @property
    def url(self) -> str:
        """The database URL with any password masked."""
        return display_url(self._url)

    def reader(self, why: str) -> Store:
        """This store, on the same connections, with every write refused (``NotLeader``,
        saying ``why``): what a replica that follows answers reads from."""
        view = copy.copy(self)
        view.refusal = why
        view.fence = None
        # Its own group of submits, written through its own (refusing) write().
        view._submits = GroupCommit(view.write, insert_submits, view._write_alone)
        return view

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @contextlib.contextmanager
    def write(self) -> Iterator[Connection]:
        """A write transaction (queued on this process's write lock on SQLite), fenced:
        with ``fence`` set, it raises ``NotLeader`` and writes nothing unless this replica
        still leads under the fence's term."""
        with self.unfenced_write() as connection:
            fence = self.fence
            if fence is not None:
                check_fence(connection, fence)
            yield connection

    def end_idle_transactions_after(self, seconds: float) -> None:
        """On PostgreSQL, have the server end this process's write transactions left idle
        longer than ``seconds``: a replica frozen in the middle of a write (SIGSTOP, a VM
        paused) then stops holding the lease row's lock, and a follower can take the lease.
        Reads are left alone: they hold no lock a takeover waits on, and on a loaded
        machine a read paused that long (a thread descheduled between its statements) would
        otherwise fail for nothing."""
        if not is_sqlite(self.engine):
            self._idle_write_limit_ms = max(1, int(seconds * 1000))

    def confirm_lead(self) -> None:
        """With ``fence`` set, NotLeader unless this replica still leads: asked before the
        loop sends a plane what the store says, so an old leader sends nothing."""
        if self.fence is not None:
            with self.write():
                pass

    @contextlib.contextmanager
    def unfenced_write(self) -> Iterator[Connection]:
        """A write transaction that does not check the fence: for the lease itself only."""
        if self.refusal is not None:
            raise NotLeader(self.refusal, field="leader", fix=NOT_LEADER_FIX)
        try:
            with self._write_lock or contextlib.nullcontext(), \
                    self._writer.begin() as connection:
                if self._idle_write_limit_ms is not None:  # this transaction only
                    connection.exec_driver_sql(
                        "SET LOCAL idle_in_transaction_session_timeout = "
                        f"{self._idle_write_limit_ms}")
                yield connection
        except Exception as exc:
            reason = unavailable_reason(exc)
            if reason is not None:
                self.unavailable = reason
            raise
        self.unavailable = None

    # ------------------------------------------------------------------ config
    def load_config(self) -> QueueConfig | None:
        """The last saved queue configuration, or None if none was ever saved."""
        with self.engine.connect() as connection:
            document = connection.execute(
                select(queue_config.c.document).where(queue_config.c.id == _CONFIG_ROW)
            ).scalar_one_or_none()
        if document is None:
            return None
        return stored(QueueConfig, document, "stored queue configuration")

    def save_config(self, config: QueueConfig) -> None:
        """Replace the stored configuration as a whole."""
        row = {"id": _CONFIG_ROW, "revision": 1, "saved_at": time.time(),
               "document": config.to_dict()}
        with self.write() as connection:
            connection.execute(self._upsert_config, row)

    # ------------------------------------------------------------------ jobs
    def create_job(
        self, record: JobRecord, event: JobEvent | None = None,
        request: IdempotentRequest | None = None, audit: Sequence[object] = (),
        manifest: Mapping[str, Any] | None = None,
    ) -> None:
        """Store a new job (and its first event, and the manifest it was submitted as);
        Conflict if the name is taken.

        ``request``: the Idempotency-Key the submit carried, stored in the same transaction
        (Conflict naming ``Idempotency-Key`` if another request stored it first); ``audit``:
        its audit entries (``store.identity.AuditEntry``), in the same transaction.
        """
        if event is not None and event.job != record.name:
            raise InternalError(
                f"names job {event.job!r}, not the job being created ({record.name!r})",
                field="event.job", fix="pass an event of the job being created",
            )
        try:
            self._submits.run(SubmitRows(
                [job_row(record)], label_rows(record),
                {} if manifest is None else {record.name: manifest},
                [] if event is None else [event_row(event)], request, audit))
        except IntegrityError:
            self._check_request_is_new(request)
            if self._job_exists(record.name):
                raise Conflict(
                    f"a job named {record.name!r} already exists", field="name",
                    fix="choose another name (names of finished jobs stay taken)",
                ) from None
            raise

    def create_jobs(
        self, records: list[JobRecord], events: Iterable[JobEvent] = (),
        request: IdempotentRequest | None = None, audit: Sequence[object] = (),
        manifests: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        """Store new jobs (and their first events, and the manifests some were submitted
        as, by job name) in one transaction, all or none.

        Conflict, naming the position (``items[i].name``) of the first job whose name is
        taken, if any is; nothing is stored then.
        """
        rows = [job_row(record) for record in records]
        if not rows:
            return
        event_rows = [event_row(event) for event in events]
        labels = [row for record in records for row in label_rows(record)]
        try:
            self._submits.run(SubmitRows(rows, labels, manifests or {}, event_rows, request,
                                         audit))
        except IntegrityError:
            self._check_request_is_new(request)
            names = [record.name for record in records]
            with self.engine.connect() as connection:
                taken = set(connection.execute(
                    select(jobs.c.name).where(jobs.c.name.in_(names))
                ).scalars())
            for i, name in enumerate(names):
                if name in taken or names.index(name) != i:
                    raise Conflict(
                        f"a job named {name!r} already exists; no job of the batch was created",
                        field=f"items[{i}].name",
                        fix="choose another name (names of finished jobs stay taken)",
                    ) from None
            raise

    def _write_alone(self, submit: SubmitRows) -> None:
        with self.write() as connection:
            insert_submits(connection, [submit])

    def get_request(self, key: str) -> IdempotentRequest | None:
        """The submit stored under an Idempotency-Key, if one is."""
        with self.engine.connect() as connection:
            row = connection.execute(
                select(idempotency_keys).where(idempotency_keys.c.key == key)
            ).mappings().one_or_none()
        if row is None:
            return None
        return IdempotentRequest(row["key"], row["request_hash"], tuple(row["jobs"]))

    def _check_request_is_new(self, request: IdempotentRequest | None) -> None:
        """Conflict if another request stored ``request``'s key first (a concurrent retry)."""
        if request is not None and self.get_request(request.key) is not None:
            raise Conflict(
                "another request with this Idempotency-Key was stored first",
                field="Idempotency-Key", fix="retry it: the first request's answer comes back",
            )

    def get_manifest(self, name: str) -> dict[str, Any] | None:
        """The manifest job ``name`` was submitted as, if it was submitted as one."""
        with self.engine.connect() as connection:
            document = connection.execute(
                select(job_manifests.c.document).where(job_manifests.c.job == name)
            ).scalar_one_or_none()
        return dict(document) if document is not None else None

    def get_job(self, name: str) -> JobRecord:
        with self.engine.connect() as connection:
            row = connection.execute(
                select(jobs.c.name, jobs.c.record).where(jobs.c.name == name)
            ).mappings().one_or_none()
        if row is None:
            raise NotFound(
                f"job {name!r} does not exist", field="name",
                fix="check the name with `phalanx jobs`",
            )
        return job_from_row(row)

    def list_jobs(
        self,
        *,
        statuses: Collection[JobStatus] | None = None,
        queue: str | None = None,
        limit: int | None = None,
    ) -> list[JobRecord]:
        """Jobs ordered by submission time then name; ``limit`` keeps the newest."""
        query = select(jobs.c.name, jobs.c.record)
        if statuses is not None:
            query = query.where(jobs.c.status.in_([_status(s) for s in statuses]))
        if queue is not None:
            query = query.where(jobs.c.queue == queue)
        newest_first = limit is not None
        if limit is not None:
            if limit < 0:
                raise SpecError(f"is {limit}", field="limit", fix="use 0 or more")
            query = query.order_by(jobs.c.submitted_at.desc(), jobs.c.name.desc()).limit(limit)
        else:
            query = query.order_by(jobs.c.submitted_at, jobs.c.name)
        with self.engine.connect() as connection:
            rows = connection.execute(query).mappings().all()
        records = [job_from_row(row) for row in rows]
        if newest_first:
            records.reverse()
        return records

    def page_jobs(
        self, where: JobFilter, *, limit: int | None = None, after: str | None = None,
    ) -> JobPage:
        """Jobs matching ``where``, newest submission first (then name, descending).

        ``limit`` caps the page; ``after`` is the ``next`` token of the previous page. The
        count of the jobs after the page is one index range count, so a page costs about
        the same at the start or the end of 100,000 jobs.
        """
        if limit is not None and limit < 1:
            raise SpecError(f"is {limit}", field="limit", fix="use 1 or more")
        conditions = self._conditions(where)
        key = tuple_(jobs.c.submitted_at, jobs.c.name)
        if after is not None:
            conditions.append(key < tuple_(*_parse_cursor(after)))
        query: Select[Any] = select(jobs.c.name, jobs.c.record, jobs.c.submitted_at).where(
            *conditions).order_by(jobs.c.submitted_at.desc(), jobs.c.name.desc())
        if limit is not None:
            query = query.limit(limit)
        with self.engine.connect() as connection:
            rows = connection.execute(query).mappings().all()
            remaining = 0
            if limit is not None and len(rows) == limit:
                last = (rows[-1]["submitted_at"], rows[-1]["name"])
                remaining = connection.execute(
                    select(func.count()).select_from(jobs).where(
                        *conditions, key < tuple_(*last))
                ).scalar_one()
        items = [job_from_row(row) for row in rows]
        token = _cursor((items[-1].submitted_at, items[-1].name)) if remaining else None
        return JobPage(items, token, remaining)

    def _conditions(self, where: JobFilter) -> list[ColumnElement[bool]]:
        conditions: list[ColumnElement[bool]] = []
        if where.statuses is not None:
            conditions.append(jobs.c.status.in_([_status(s) for s in where.statuses]))
        if where.queue is not None:
            conditions.append(jobs.c.queue == where.queue)
        if where.user is not None:
            conditions.append(jobs.c.user_name == where.user)
        for key, value in where.labels.items():
            conditions.append(jobs.c.name.in_(
                select(job_labels.c.job).where(job_labels.c.key == key,
                                               job_labels.c.value == value)))
        return conditions

    def finished_before(self, cutoff: float, limit: int) -> list[str]:
        """Names of up to ``limit`` jobs that finished before ``cutoff``, oldest first."""
        query = (select(jobs.c.name)
                 .where(jobs.c.finished_at < cutoff, jobs.c.status.in_(_FINISHED))
                 .order_by(jobs.c.finished_at).limit(limit))
        with self.engine.connect() as connection:
            return list(connection.execute(query).scalars())

    def forget_requests_before(self, cutoff: float) -> int:
        """Forget Idempotency-Keys stored before ``cutoff``; how many were forgotten."""
        with self.write() as connection:
            result = connection.execute(
                delete(idempotency_keys).where(idempotency_keys.c.created_at < cutoff))
        return int(result.rowcount or 0)

    def delete_finished_jobs(self, names: Collection[str]) -> list[str]:
        """Delete those of ``names`` that are finished, with their events and labels, in one
        transaction; the names deleted. A job that is not finished is left alone, so a
        caller racing the control loop never deletes a live job."""
        if not names:
            return []
        with self.write() as connection:
            gone = list(connection.execute(
                delete(jobs).where(jobs.c.name.in_(list(names)), jobs.c.status.in_(_FINISHED))
                .returning(jobs.c.name)
            ).scalars())
        return sorted(gone)

    def count_jobs_by_status(self) -> dict[str, int]:
        """The number of jobs in each status, every status present (zero included)."""
        counts = {status.value: 0 for status in JobStatus}
        with self.engine.connect() as connection:
            for status, count in connection.execute(
                select(jobs.c.status, func.count()).group_by(jobs.c.status)
            ):
                counts[status] = count
        return counts

    def save_jobs(self, records: Iterable[JobRecord], events: Iterable[JobEvent] = ()) -> None:
        """Upsert the records and add the events, all in one transaction.

        A name given twice keeps its last record. Events may belong to jobs of this
        batch; an event of a job that exists nowhere fails the whole batch (NotFound).
        """
        rows = list({record.name: job_row(record) for record in records}.values())
        event_rows = [event_row(event) for event in events]
        if not rows and not event_rows:
            return
        try:
            with self.write() as connection:
                if rows:
                    connection.execute(self._upsert_jobs, rows)
                if event_rows:
                    connection.execute(insert(job_events), event_rows)
        except IntegrityError:
            self._raise_unknown_jobs(event_rows, {row["name"] for row in rows})
            raise

    def _job_exists(self, name: str) -> bool:
        with self.engine.connect() as connection:
            found = connection.execute(select(jobs.c.name).where(jobs.c.name == name)).first()
        return found is not None

    def _raise_unknown_jobs(self, event_rows: list[dict[str, Any]], batch: set[str]) -> None:
        """After a failed write: NotFound naming the events' unknown jobs, if any."""
        names = {row["job"] for row in event_rows} - batch
        if not names:
            return
        with self.engine.connect() as connection:
            known = set(connection.execute(
                select(jobs.c.name).where(jobs.c.name.in_(names))
            ).scalars())
        missing = sorted(names - known)
        if missing:
            raise NotFound(
                f"events name job(s) that do not exist: {', '.join(missing)}; nothing was saved",
                field="events.job", fix="create the job before adding its events",
            )

    # ------------------------------------------------------------------ events
    def add_events(self, events: Iterable[JobEvent]) -> None:
        self.save_jobs((), events)

    def list_events(self, job: str, limit: int | None = None) -> list[JobEvent]:
        """A job's events in time order; ``limit`` keeps the newest."""
        query = select(job_events).where(job_events.c.job == job)
        if limit is not None:
            if limit < 0:
                raise SpecError(f"is {limit}", field="limit", fix="use 0 or more")
            query = query.order_by(job_events.c.time.desc(), job_events.c.id.desc()).limit(limit)
        else:
            query = query.order_by(job_events.c.time, job_events.c.id)
        with self.engine.connect() as connection:
            rows = connection.execute(query).mappings().all()
        events = [event_from_row(row) for row in rows]
        if limit is not None:
            events.reverse()
        return events


def _status(value: JobStatus | str) -> str:
    try:
        return JobStatus(value).value
    except ValueError:
        known = ", ".join(s.value for s in JobStatus)
        raise SpecError(f"unknown job status {value!r}", field="status",
                        fix=f"use one of {known}") from None
