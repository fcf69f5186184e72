"""Reading a job's pod logs incrementally, for one pod or all of them, and streaming them.

A log is never held whole: ``LogFollower.drain`` reads at most a budget of bytes from
disk per call and gives back complete lines. ``stream_logs`` is the async body of the
logs route: every read runs in a worker thread under a small limiter of its own, so a
follower holds no thread while it waits, and it polls with a growing pause, checking
at each poll whether its client went away and whether the job has ended.
``FollowerSlots`` bounds followers per job, per client and in all (a client can reach the
server from many addresses, loopback's 127.0.0.0/8 among them).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

import anyio
from anyio import to_thread
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from phalanx.errors import NotFound, SpecError, TooManyRequests
from phalanx.spec.quantity import parse_duration
from phalanx.spec.status import JobRecord
from phalanx.store import LogStore
from phalanx.store.logs import START, LogPosition

# Bytes read from disk per step of a stream: what one response holds in memory at a time.
READ_BUDGET = 256 * 1024
# A line longer than this is cut, rather than buffered without end.
MAX_LINE = 1024 * 1024
# Pauses between polls of a silent follower: short while output flows, longer when idle.
POLL_MIN, POLL_MAX = 0.1, 1.0
# Threads all log reads of the server share, apart from the pool the other routes use.
READ_THREADS = 8

TEXT = "text/plain; charset=utf-8"
PER_JOB_ENV = "PHALANX_LOG_FOLLOWERS_PER_JOB"
PER_CLIENT_ENV = "PHALANX_LOG_FOLLOWERS_PER_CLIENT"
TOTAL_ENV = "PHALANX_LOG_FOLLOWERS"


def pod_names(record: JobRecord) -> list[str]:
    """Pod names in rank order (pod sets in spec order), as the compute planes name them."""
    counts: dict[str, int] = {}
    if record.admission is not None:
        counts = {p.name: p.count for p in record.admission.pod_sets}
    return [
        f"{record.name}-{ps.name}-{i}"
        for ps in record.spec.pod_sets
        for i in range(counts.get(ps.name, ps.replicas))
    ]


def select_pod(record: JobRecord, pod: str) -> str:
    names = pod_names(record)
    if pod.isdigit():
        rank = int(pod)
        if rank >= len(names):
            raise NotFound(
                f"job {record.name} has no pod of rank {rank}", field="pod",
                fix=f"use a rank from 0 to {len(names) - 1} or a pod name",
            )
        return names[rank]
    if pod in names:
        return pod
    if f"{record.name}-{pod}" in names:
        return f"{record.name}-{pod}"
    raise NotFound(
        f"job {record.name} has no pod {pod!r}", field="pod",
        fix=f"use a rank (0-{len(names) - 1}) or one of {', '.join(names[:4])}",
    )


class LogFollower:
    """Yields new complete lines of the chosen pods' logs each time ``drain`` is called.

    ``tail`` (last lines of each pod) and ``since`` (epoch seconds) choose where each pod's
    log starts; a pod whose log appears later is read from its start.
    """

    def __init__(
        self, logs: LogStore, record: JobRecord, pod: str | None, *,
        tail: int | None = None, since: float | None = None,
    ) -> None:
        self.logs = logs
        self.job = record.name
        self.fixed = [select_pod(record, pod)] if pod is not None else None
        self.prefix = pod is None and record.spec.pod_count > 1
        self.tail = tail
        self.since = since
        self.positions: dict[str, LogPosition] = {}
        self.partial: dict[str, bytes] = {}
        self.started = False
        self.cursor = 0  # the pod the next drain starts with, so every pod gets its turn

    def _pods(self) -> list[str]:
        pods = self.fixed if self.fixed is not None else self.logs.pods(self.job)
        if not self.started:
            self.started = True
            if self.tail is not None or self.since is not None:
                for pod in pods:
                    self.positions[pod] = self.logs.start_position(
                        self.job, pod, tail=self.tail, since=self.since)
        return pods

    def drain(self, final: bool = False, budget: int = READ_BUDGET) -> tuple[bytes, bool]:
        """New complete lines (up to about ``budget`` bytes read), and whether any byte was
        read: when none was, the logs are read up to their end for now.

        With ``final`` a last line without newline is given too (the writers are done).
        """
        pods = self._pods()
        out: list[bytes] = []
        used = 0
        for k in range(len(pods)):
            pod = pods[(self.cursor + k) % len(pods)]
            while used < budget:
                data, self.positions[pod] = self.logs.read_from(
                    self.job, pod, self.positions.get(pod, START), budget - used)
                if not data:
                    break
                used += len(data)
                out.append(self._lines(pod, data))
            if used >= budget:
                self.cursor = (self.cursor + k) % len(pods)
                break
        else:
            self.cursor = 0
        if final and not used:
            for pod in pods:
                rest = self.partial.pop(pod, b"")
                if rest:
                    out.append(self._prefixed(pod, rest + b"\n"))
        return b"".join(out), used > 0

    def _lines(self, pod: str, data: bytes) -> bytes:
        buffered = self.partial.pop(pod, b"") + data
        end = buffered.rfind(b"\n") + 1
        complete, rest = buffered[:end], buffered[end:]
        if len(rest) >= MAX_LINE:
            complete, rest = complete + rest + b"\n", b""
        if rest:
            self.partial[pod] = rest
        return self._prefixed(pod, complete)

    def _prefixed(self, pod: str, lines: bytes) -> bytes:
        if not self.prefix or not lines:
            return lines
        prefix = f"[{pod}] ".encode()
        return prefix + lines[:-1].replace(b"\n", b"\n" + prefix) + b"\n"


async def stream_logs(
    follower: LogFollower, *, follow: bool, finished: Callable[[], bool],
    flush: Callable[[], None], disconnected: Callable[[], Awaitable[bool]],
    limiter: anyio.CapacityLimiter,
) -> AsyncIterator[bytes]:
    """The logs as they are read; with ``follow``, until the job has ended (then what its
    pods wrote last) or the client has gone."""
    pause = POLL_MIN
    while True:
        data, read = await to_thread.run_sync(follower.drain, limiter=limiter)
        if data:
            yield data
        if read:
            pause = POLL_MIN
            continue
        if not follow:
            break
        # Nothing new: the moment to notice a client that left while the job was silent.
        if await disconnected():
            return
        if await to_thread.run_sync(finished, limiter=limiter):
            await to_thread.run_sync(flush, limiter=limiter)
            break
        await anyio.sleep(pause)
        pause = min(pause * 2, POLL_MAX)
    while True:
        data, read = await to_thread.run_sync(follower.drain, True, limiter=limiter)
        if data:
            yield data
        if not read:
            return


@dataclass(frozen=True, slots=True)
class LogLimits:
    """How many followed log streams the server serves at once, per job, per client
    address and in all (a follower waits on its job, so each holds a connection for as
    long; the total bounds what clients with many addresses can hold)."""

    per_job: int = 32
    per_client: int = 16
    total: int = 256

    def __post_init__(self) -> None:
        for env, value in ((PER_JOB_ENV, self.per_job), (PER_CLIENT_ENV, self.per_client),
                           (TOTAL_ENV, self.total)):
            if value < 1:
                raise SpecError(f"is {value}", field=env, fix="use 1 or more followers")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> LogLimits:
        """``$PHALANX_LOG_FOLLOWERS_PER_JOB``, ``$PHALANX_LOG_FOLLOWERS_PER_CLIENT`` and
        ``$PHALANX_LOG_FOLLOWERS`` (all followers of the server)."""
        values = {}
        for env, name in ((PER_JOB_ENV, "per_job"), (PER_CLIENT_ENV, "per_client"),
                          (TOTAL_ENV, "total")):
            raw = environ.get(env, "").strip()
            if not raw:
                continue
            try:
                values[name] = int(raw)
            except ValueError:
                raise SpecError(f"{raw!r} is not a whole number", field=env,
                                fix="set it to a number of followers, or unset it") from None
        return cls(**values)


class FollowerSlots:
    """The followers being served, by job, by client address and in all.

    Taken and given back on the event loop's thread only, so the counts need no lock.
    """

    def __init__(self, limits: LogLimits) -> None:
        self.limits = limits
        self.by_job: Counter[str] = Counter()
        self.by_client: Counter[str] = Counter()

    def take(self, job: str, client: str) -> None:
        served = sum(self.by_job.values())
        if served >= self.limits.total:
            raise TooManyRequests(
                f"the server already serves {served} log followers, its most", field="follow",
                fix="stop a follower, read without follow=true, or raise "
                    f"${TOTAL_ENV} on the server",
            )
        if self.by_job[job] >= self.limits.per_job:
            raise TooManyRequests(
                f"job {job} already has {self.by_job[job]} log followers", field="follow",
                fix="stop a follower of this job, read without follow=true, or raise "
                    f"${PER_JOB_ENV} on the server",
            )
        if self.by_client[client] >= self.limits.per_client:
            raise TooManyRequests(
                f"client {client} already follows {self.by_client[client]} logs",
                field="follow",
                fix="stop one of your followers, read without follow=true, or raise "
                    f"${PER_CLIENT_ENV} on the server",
            )
        self.by_job[job] += 1
        self.by_client[client] += 1

    def give_back(self, job: str, client: str) -> None:
        for counter, key in ((self.by_job, job), (self.by_client, client)):
            counter[key] -= 1
            if counter[key] <= 0:
                del counter[key]


class FollowedResponse(StreamingResponse):
    """A streamed log that calls ``release`` once it is over, however it ends: finished,
    client gone, or cancelled before its first byte."""

    def __init__(self, body: AsyncIterator[bytes], release: Callable[[], None]) -> None:
        super().__init__(body, media_type=TEXT)
        self.release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.release()


def parse_since(value: str, now: float) -> float:
    """``since`` as epoch seconds: a duration back from ``now`` ("10m") or a time (ISO 8601,
    UTC unless it says otherwise)."""
    fix = ('use a duration back from now such as "90s", "10m" or "1h30m", or a time such '
           'as "2025-01-31T12:00:00Z"')
    text = value.strip()
    if text and text[0].isdigit() and not any(c in text for c in "-:T"):
        try:
            return now - parse_duration(text, field="since")
        except SpecError:
            raise SpecError(f"{value!r} is not a duration", field="since", fix=fix) from None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise SpecError(f"{value!r} is neither a duration nor a time", field="since",
                        fix=fix) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()
