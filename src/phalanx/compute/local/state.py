"""The local plane's bookkeeping on disk, which lets a new plane re-adopt running pods.

Layout, under ``<home>/pods/<job>/<attempt>/``:
- ``attempt.json``: the attempt's plan (every pod, its node and GPUs, the master
  port), written before any process starts, plus the terminate request, if any.
- ``<pod-name>.json``: the supervisor's pid and start time, written by the plane
  after starting it and before handing it the pod.
- ``<pod-name>.exit.json``: how the command ended, written by the supervisor.
- ``<pod-name>.sock``: the supervisor's exec channel while the command runs.
- ``launches.json``: what each pod runs, kept only while the attempt waits for a uid of
  its own (``uids.py``), so a restarted plane starts it once one frees.
Every file is replaced atomically, so a reader never sees half of one. Directories
are 0700 and files 0600: pods (another user, where ``--run-as-user`` says so) have
no business here.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from phalanx.compute.base import PodRef
from phalanx.compute.local.shim import write_json_atomic
from phalanx.compute.local.users import PodUser
from phalanx.defaults import make_private_dir

log = logging.getLogger("phalanx.compute.local")

ATTEMPT_FILE = "attempt.json"
EXIT_SUFFIX = ".exit.json"
LAUNCHES_FILE = "launches.json"


@dataclass(frozen=True, slots=True)
class PlannedPod:
    ref: PodRef
    node: str
    gpus: tuple[int, ...] = ()
    cpus: tuple[int, ...] = ()  # pinned CPUs: held until the pod ends, across restarts


@dataclass(slots=True)
class AttemptRecord:
    job: str
    attempt: int
    master_port: int
    launched_at: float
    pods: list[PlannedPod]
    terminate_requested_at: float | None = None
    kill_deadline: float | None = None
    ports: list[int] = field(default_factory=list)  # every port the attempt's pods were given
    endpoints: dict[str, str] = field(default_factory=dict)  # the kind's (a dashboard's URL)
    uid: int | None = None  # the attempt's own uid (--pod-uids): held until it is forgotten
    waiting: bool = False  # planned, its pods waiting for a uid of the range to free

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["pods"] = [
            {**asdict(p.ref), "node": p.node, "gpus": list(p.gpus), "cpus": list(p.cpus)}
            for p in self.pods
        ]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AttemptRecord:
        pods = [
            PlannedPod(
                ref=PodRef(job=p["job"], attempt=p["attempt"], pod_set=p["pod_set"],
                           index=p["index"], rank=p["rank"]),
                node=p["node"], gpus=tuple(p["gpus"]), cpus=tuple(p.get("cpus", ())),
            )
            for p in data["pods"]
        ]
        return cls(**{**data, "pods": pods})


@dataclass(frozen=True, slots=True)
class PodLaunch:
    """Everything the supervisor needs to run one pod."""

    command: list[str]
    cwd: str
    env: dict[str, str]
    user: PodUser | None  # None: the supervisor's own user
    cpus: tuple[int, ...] = ()  # pinned: the supervisor sets this affinity before starting
    # The pod's mount namespace (volumes, mounts, shm: ``volumes.py``); empty: none.
    namespace: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"command": self.command, "cwd": self.cwd, "env": self.env,
                "cpus": list(self.cpus), "namespace": self.namespace}

    @classmethod
    def from_json(cls, data: dict[str, Any], user: PodUser | None) -> PodLaunch:
        return cls(list(data["command"]), data["cwd"], dict(data["env"]), user,
                   tuple(data.get("cpus", ())), dict(data.get("namespace", {})))


@dataclass(frozen=True, slots=True)
class ProcessRecord:
    """The supervisor of one pod: pid plus start time identify it across pid reuse."""

    pid: int
    start: float
    launched_at: float
    log: str = field(default="")


class StateDir:
    def __init__(self, root: Path) -> None:
        self.root = root

    def attempt_dir(self, job: str, attempt: int) -> Path:
        return self.root / job / str(attempt)

    @staticmethod
    def process_file(directory: Path, pod: str) -> Path:
        return directory / f"{pod}.json"

    @staticmethod
    def exit_file(directory: Path, pod: str) -> Path:
        return directory / f"{pod}{EXIT_SUFFIX}"

    def create(self, record: AttemptRecord) -> Path:
        directory = self.attempt_dir(record.job, record.attempt)
        make_private_dir(directory)
        self.save(record)
        return directory

    def save(self, record: AttemptRecord) -> None:
        path = self.attempt_dir(record.job, record.attempt) / ATTEMPT_FILE
        write_json_atomic(str(path), record.to_json())

    def save_process(self, directory: Path, pod: str, record: ProcessRecord) -> None:
        write_json_atomic(str(self.process_file(directory, pod)), asdict(record))

    def save_launches(self, directory: Path, launches: list[PodLaunch]) -> None:
        write_json_atomic(str(directory / LAUNCHES_FILE),
                          {"pods": [launch.to_json() for launch in launches]})

    def drop_launches(self, directory: Path) -> None:
        (directory / LAUNCHES_FILE).unlink(missing_ok=True)

    def take_launches(self, directory: Path, user: PodUser | None) -> list[PodLaunch]:
        """The launches a waiting attempt kept, now for ``user``; the file goes (it holds
        the pods' env)."""
        data = read_json(directory / LAUNCHES_FILE)
        (directory / LAUNCHES_FILE).unlink(missing_ok=True)
        return [PodLaunch.from_json(pod, user) for pod in (data or {}).get("pods", [])]

    def load(self) -> Iterator[tuple[AttemptRecord, dict[str, ProcessRecord]]]:
        """Every attempt on disk with the supervisors started for it, by pod name."""
        for plan in sorted(self.root.glob(f"*/*/{ATTEMPT_FILE}")):
            try:
                record = AttemptRecord.from_json(json.loads(plan.read_text()))
            except (OSError, ValueError, KeyError, TypeError) as exc:
                log.error("ignoring unreadable pod bookkeeping %s: %s", plan, exc)
                continue
            processes = {}
            for pod in record.pods:
                data = read_json(self.process_file(plan.parent, pod.ref.name))
                if data is not None:
                    processes[pod.ref.name] = ProcessRecord(**data)
            yield record, processes

    def remove(self, job: str, attempt: int) -> None:
        shutil.rmtree(self.attempt_dir(job, attempt), ignore_errors=True)
        with contextlib.suppress(OSError):  # only once the job's last attempt is gone
            (self.root / job).rmdir()


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON file written atomically, or None when it does not exist (yet)."""
    try:
        with open(path, encoding="utf-8") as f:
            data: dict[str, Any] = json.load(f)
            return data
    except FileNotFoundError:
        return None
