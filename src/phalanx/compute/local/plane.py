"""The local compute plane: a job's pods as supervised process groups on this machine.

Each pod runs under its own supervisor (``shim.py``), started in a new session
so it belongs to no control plane: the server may stop or crash and the pods
keep running. Everything needed to find them again lives in ``<home>/pods``
(see ``state.py``), so a new LocalPlane over the same home re-adopts running
pods, reads the exit records of finished ones, and reports pods whose
supervisor vanished without a record as lost.

Stopping a pod signals its whole process group: the command and everything it
started, unless a descendant moved to a session or group of its own (``setsid``,
``setpgid``), which puts it out of reach, as on any Unix. When the command ends
by itself, its supervisor kills what it left in the group.

GPUs: on a machine with GPUs every pod gets ``CUDA_VISIBLE_DEVICES`` set by the
plane, to the indices assigned to it or to "" when it requested none, so pods
only see their own GPUs; this is the one variable the pod set's env cannot
override. On a machine without GPUs it is left alone.

CPU pinning: each pod of a pod set with ``cpuPinning: exclusive`` gets whole CPUs
that no other pinned pod has, from one NUMA node when they fit (``cpus.py``); its
supervisor sets the affinity before starting the command. The CPUs are part of the
attempt's plan on disk, so they stay held after a restart until the pod ends.

Each pod starts in a fresh directory of its own, never the control plane's: a copy of the
job's ``workdir``, a clone of its ``git`` commit, or empty (``workdirs.py``); a relative
``workingDir`` is inside it.

Pods inherit the control plane's environment without its own settings (every
``PHALANX_*`` name, such as ``PHALANX_HOME`` and ``PHALANX_TOKEN``: a pod must not
find the state directory or act with the admin token), then the distributed
environment of the job's kind (``phalanx.kinds``, whose ``PHALANX_JOB``, ``PHALANX_RANK``, ...
are the pod's own), then their pod set's env. When the control plane gives the attempt a
credential, ``PHALANX_URL`` and ``PHALANX_API_KEY_FILE`` point at the API and at a file
only the pod's user can read (``credentials.py``), with which the SDK and CLI act as the
job's owner (see docs/security.md). ``PYTHONUNBUFFERED=1`` is set
(unless the pod set says otherwise) so Python output reaches the log line by
line. Memory requests are accounted by the scheduler, not enforced here.

Volumes: a pod whose pod set has ``mounts`` or ``shm`` gets a mount namespace of its own
(``volumes.py`` plans it, the supervisor makes it); what the plane cannot honour is refused
at submit (``check_job``) or, for what the machine lacks now, at launch.

Pods run as the user ``run_as`` names (``phalanx up --run-as-user``, see
``users.py``), with that user's HOME, USER and LOGNAME, or, with ``--pod-uids``, each
attempt as a uid of its own (``uids.py``: a pending "WaitingForPodUid" while none is
free), with its own working directory as HOME; umask 022. Their
supervisor keeps the control plane's user, opens the pod's log (owner-only, in
the state directory) before dropping privileges, and writes the exit record.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from phalanx import relay
from phalanx.compute.base import (
    CHECKPOINT_DIR_ENV,
    AttemptSecrets,
    ComputePlane,
    ExecSession,
    NodeTable,
    PodCredential,
    PodPhase,
    PodState,
    check_process_pods,
    control_plane_tag,
)
from phalanx.compute.local import cpus as pinning
from phalanx.compute.local import procs, shim
from phalanx.compute.local.checkpoints import CheckpointDirs
from phalanx.compute.local.credentials import CredentialFiles
from phalanx.compute.local.gpus import GPUInfo, assign_gpus, discover_gpus
from phalanx.compute.local.inventory import DEFAULT_MAX_PODS, default_node_name, machine_node
from phalanx.compute.local.machine import MachineNode
from phalanx.compute.local.network import LocalNetwork
from phalanx.compute.local.outcome import DISK_FULL_BYTES, LOST, outcome_of
from phalanx.compute.local.poddirs import reachable_root
from phalanx.compute.local.state import (
    AttemptRecord,
    PlannedPod,
    PodLaunch,
    ProcessRecord,
    StateDir,
    read_json,
)
from phalanx.compute.local.uids import AttemptUids, UidRange
from phalanx.compute.local.users import PodUser
from phalanx.compute.local.volumes import LocalVolumes
from phalanx.compute.local.workdirs import PodWorkdirs
from phalanx.compute.terms import TermGate
from phalanx.errors import Conflict, NotFound, SpecError
from phalanx.health import Doctor
from phalanx.health.stale import DoctorWatch
from phalanx.kinds import framework_of
from phalanx.scheduler.types import Admission
from phalanx.spec.gitrepo import ssh_key_env
from phalanx.spec.quantity import MILLI
from phalanx.spec.resources import GPU, JobSpec, Node
from phalanx.spec.status import JobEvent
from phalanx.store.logs import LogStore
from phalanx.store.workdirs import WorkdirStore

log = logging.getLogger("phalanx.compute.local")

SHIM = Path(shim.__file__).resolve()
# -I -S: no site-packages, no PYTHON* variables, no package __init__ to import.
SHIM_COMMAND = (sys.executable, "-I", "-S", str(SHIM))
# Names of the control plane's own settings, kept from pods (the distributed environment
# adds back the PHALANX_* names that describe the pod itself).
CONTROL_PLANE_PREFIX = "PHALANX_"
GIT_KEYS_DIR = "git-keys"  # under the state directory: a git source's key, during a clone
# The reason of pods waiting for a uid of their own (--pod-uids exhausted).
WAITING_FOR_UID = "WaitingForPodUid"
# Under the state directory: the newest term of a leading replica that acted on the pods
# (``compute/terms.py``); the replicas' planes and the pods' supervisors refuse older ones.
TERM_GATE = "plane-term"


def _home_identity(home: Path) -> str:
    """An identity for a plane told none: its state directory's, one per control plane."""
    return "home-" + hashlib.sha256(str(home.resolve()).encode()).hexdigest()[:12]


def without_control_plane_settings(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` without the control plane's ``PHALANX_*`` settings: what a pod inherits."""
    return {k: v for k, v in environ.items() if not k.startswith(CONTROL_PLANE_PREFIX)}


@dataclass(slots=True)
class _Pod:
    plan: PlannedPod
    process: ProcessRecord | None = None  # None: planned, never started
    child: bool = False  # started by this plane and not yet reaped
    killed: bool = False  # SIGKILL sent after the grace period
    final: PodState | None = None  # once done, the state never changes again


@dataclass(slots=True)
class _Attempt:
    record: AttemptRecord
    directory: Path
    pods: list[_Pod]


class LocalPlane(MachineNode, ComputePlane):
    """Runs admitted jobs' pods as process groups on this machine (one node)."""

    name = "local"

    def __init__(
        self,
        home: Path,
        *,
        node_name: str | None = None,
        logs: LogStore | None = None,
        gpus: Sequence[GPUInfo] | None = None,
        run_as: PodUser | None = None,
        max_pods: int = DEFAULT_MAX_PODS,
        lease: Path | None = None,
        pod_uids: UidRange | None = None,
        control_plane: str | None = None,
        workdirs: WorkdirStore | None = None,
        term: int | None = None,
    ) -> None:
        """Pods' output goes to ``logs`` (default: the state directory's).

        ``gpus`` replaces NVML discovery (for machines NVML cannot see, and tests).
        ``run_as`` is the user pods run as (None: this process's user); switching
        users needs root, which ``users.pod_user_for`` checks at ``phalanx up``.
        ``max_pods`` is how many pods this machine runs at once (``phalanx up --max-pods``).
        ``lease``: the lease file of a worker (``compute/lease.py``); each pod's supervisor
        stops the pod once the lease has lapsed, even if the worker was killed.
        ``pod_uids``: each attempt runs as a uid of its own from this range (``uids.py``;
        ``uids.check_uid_range`` vets it at ``phalanx up``). ``control_plane``: the identity
        whose tag keys the directories pods share outside the state directory (default:
        one derived from ``home``), so two control planes on one machine never meet there.
        ``workdirs``: the archives of jobs' ``workdir`` (default: the state directory's).
        ``term``: the term of the leading replica that drives it (None: a lone control
        plane). It is kept in the state directory (``plane-term``) before the pods on disk
        are read, and every start and stop carries it: this plane, and each pod's
        supervisor, refuse one older than the newest kept, so a replica that led before
        and was paused starts and stops nothing once another leads.
        """
        if pod_uids is not None and run_as is not None:
            raise SpecError("--run-as-user and --pod-uids both say whom pods run as",
                            field="--pod-uids", fix="pass one of them: --pod-uids gives each "
                            "attempt a uid of its own, --run-as-user one user for every pod")
        if max_pods < 1:
            raise SpecError(f"{max_pods} is not a number of pods", field="--max-pods",
                            fix="pass --max-pods 1 or more (the default is 110)")
        super().__init__()
        self.home = Path(home)
        self.node_name = node_name or default_node_name()
        self.logs = logs if logs is not None else LogStore.for_home(self.home)
        self.gpus = list(discover_gpus() if gpus is None else gpus)
        self.cpu_topology = pinning.numa_topology()  # NUMA node -> CPUs, for pinned pods
        self.run_as = run_as
        # Supervisors start with this, so not even /proc/<supervisor>/environ holds a secret.
        self._supervisor_env = without_control_plane_settings(os.environ)
        # What the node advertised at start: a GPU that falls off the bus later is missed.
        self.expected_gpus = len(self.gpus)
        self._doctor: Doctor | None = None
        self._doctor_watch = DoctorWatch()  # a doctor that stops reporting
        self.max_pods = max_pods
        self.lease = lease
        self._node = NodeTable([machine_node(self.node_name, self.gpus, max_pods)],
                               self._nodes_changed)
        self.term = term
        self.terms = TermGate(self.home / TERM_GATE)
        # Kept before the pods on disk are read: a start of an older term that got past its
        # supervisor's check was recorded before, so it is adopted below; any later one
        # is refused.
        if not self.terms.admits(term):
            raise Conflict(f"the local plane was driven under term {self.terms.term} since "
                           f"this replica took the lead under term {term}", field="term",
                           fix="nothing to do: this replica no longer leads; it follows")
        self._state = StateDir(self.home / "pods")
        shared = pod_uids is not None or (run_as is not None and run_as.uid != os.getuid())
        tag = control_plane_tag(control_plane or _home_identity(self.home))
        self.checkpoints = CheckpointDirs.for_plane(self.home, shared, tag)
        self.credentials = CredentialFiles(self.home, shared, tag)
        self.workdir_archives = workdirs if workdirs is not None \
            else WorkdirStore.for_home(self.home)
        # Each pod's own directory; under --pod-uids its attempt's uid owns it (uids.py).
        self.pod_dirs = PodWorkdirs(reachable_root(self.home, shared, "work", tag), shared,
                                    self.workdir_archives)
        self.uids = None if pod_uids is None else AttemptUids(pod_uids, self.pod_dirs.root)
        # A pod's mounts may hide none of what the plane and its supervisors use.
        self.volumes = LocalVolumes([
            self.home, self.logs.root, self.checkpoints.root, self.credentials.root,
            SHIM.parents[2], sys.prefix, sys.base_prefix, sys.exec_prefix,
            self.pod_dirs.root])
        self._lock = threading.RLock()
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._escalator: threading.Thread | None = None
        self._attempts: dict[tuple[str, int], _Attempt] = {}
        for record, processes in self._state.load():
            pods = [_Pod(plan, processes.get(plan.ref.name)) for plan in record.pods]
            directory = self._state.attempt_dir(record.job, record.attempt)
            self._attempts[(record.job, record.attempt)] = _Attempt(record, directory, pods)
            if record.uid is not None and self.uids is not None:
                self.uids.pool.hold(record.uid, (record.job, record.attempt))  # adopted: kept
            if record.kill_deadline is not None:
                self._start_escalator()  # honour a grace period a previous plane started
        self._resume_launches()

    def _resume_launches(self) -> None:
        """Start the pods of a launch cut short: the process that launched an attempt died
        after some of its pods started (their supervisors were recorded first) and before
        the others did. Those start now from the plans kept on disk, so the gang is whole
        and no pod of the attempt starts twice (one with a supervisor on record, running
        or not, is never started again)."""
        for current in self._attempts.values():
            record = current.record
            if record.waiting:  # not started at all yet: _start_waiting does it
                continue
            if record.terminate_requested_at is not None or all(
                    pod.process is not None for pod in current.pods):
                self._state.drop_launches(current.directory)
                continue
            owner = self.run_as
            if self.uids is not None and record.uid is not None:
                owner = self.uids.user(record.uid, record.job, record.attempt)
            launches = self._state.take_launches(current.directory, owner)
            if len(launches) != len(current.pods):  # none kept (a plane before this one)
                continue
            started = [pod.plan.ref.name for pod in current.pods if pod.process is None]
            log.warning("%s attempt %d: its launch was cut short; starting its %d pod(s) "
                        "not started yet: %s", record.job, record.attempt, len(started),
                        ", ".join(started))
            if self.uids is not None and owner is not None:  # (done again: it may not have been)
                self.uids.own(record.job, record.attempt, owner, self.credentials,
                              self.checkpoints)
            for pod, launch in zip(current.pods, launches, strict=True):
                if pod.process is None:
                    self._start(current, pod, launch)

    # ------------------------------------------------------------------ ComputePlane
    def inventory(self) -> list[Node]:
        return self._node.snapshot()

    def check_job(self, job: JobSpec) -> None:
        """Every pod set whose kind does not supply a command needs one: here a pod is a
        process, and no image supplies one."""
        check_process_pods(job)
        self.volumes.check(job)

    def launch(self, job: JobSpec, attempt: int, admission: Admission, *,
               credential: PodCredential | None = None) -> None:
        """Start the attempt's pods; nothing happens if this attempt was launched before.

        Everything is checked before anything starts: a bad admission, a missing
        working directory or GPUs that are not free raise and start nothing.
        """
        self.check_job(job)
        with self._lock:
            if (job.name, attempt) in self._attempts or self._refused(f"launch of {job.name} "
                                                                      f"attempt {attempt}"):
                return
            now = time.time()
            self._refresh(now)  # pods that ended since the last look give their GPUs back
            owner = self.run_as if self.uids is None else self.uids.take(job.name, attempt)
            try:
                record, launches = self._plan(job, attempt, admission, now, credential, owner)
            except BaseException:
                if self.uids is not None:
                    self.uids.pool.drop((job.name, attempt))
                raise
            if self.uids is not None:
                record.uid, record.waiting = (owner.uid, False) if owner else (None, True)
            directory = self._state.create(record)
            current = _Attempt(record, directory, [_Pod(plan) for plan in record.pods])
            self._attempts[(job.name, attempt)] = current
            # Kept until every pod has started: a plane that dies mid-launch (kill -9 of
            # the control plane) leaves the rest to start from here (_resume_launches).
            self._state.save_launches(directory, launches)
            if record.waiting:  # started by observe() once a uid frees
                log.warning("%s attempt %d: %s", job.name, attempt, self._waiting_reason())
                return
            self._start_all(current, launches, owner)
            self._state.drop_launches(directory)  # it holds the pods' env

    def observe(self) -> list[PodState]:
        with self._lock:
            now = time.time()
            self._escalate(now)
            self._start_waiting(now)
            self._check_doctor(now)
            return [
                self._observe(current, pod, now)
                for current in self._attempts.values()
                for pod in current.pods
            ]

    def terminate(self, job: str, attempt: int, grace_seconds: float = 10.0) -> None:
        """SIGTERM every pod's process group now, SIGKILL what is left once the grace ends.

        Asking again never extends the grace, nor repeats the SIGTERM; a shorter
        grace brings the deadline forward. The request is recorded on disk so a
        new plane honours it too.
        """
        with self._lock:
            current = self._attempts.get((job, attempt))
            if current is None or self._refused(f"stop of {job} attempt {attempt}"):
                return
            now = time.time()
            deadline = now + max(0.0, grace_seconds)
            record = current.record
            first = record.terminate_requested_at is None
            if not first and record.kill_deadline is not None and record.kill_deadline <= deadline:
                return
            for pod in current.pods:  # settle pods that ended on their own before the request
                self._observe(current, pod, now)
            if first:
                record.terminate_requested_at = now
            record.kill_deadline = deadline
            self._state.save(record)
            if first:
                for pod in self._live(current):
                    assert pod.process is not None
                    procs.signal_group(pod.process.pid, pod.process.start, signal.SIGTERM)
            self._escalate(now)
        self._start_escalator()
        self._wake.set()

    def forget(self, job: str, attempt: int) -> None:
        """Drop the attempt's bookkeeping (its logs stay); kills any pod still running."""
        with self._lock:
            if self._refused(f"removal of {job} attempt {attempt}"):
                return
            current = self._attempts.pop((job, attempt), None)
            if current is not None:
                now = time.time()
                for pod in current.pods:
                    self._observe(current, pod, now)
                for pod in self._live(current):  # never leave a process nobody tracks
                    assert pod.process is not None
                    if pod.final is None:
                        log.warning("forgetting %s while it runs: killing it", pod.plan.ref.name)
                    procs.signal_group(pod.process.pid, pod.process.start, signal.SIGKILL)
            self._state.remove(job, attempt)
            self.credentials.remove(job, attempt)
            self.pod_dirs.remove(job, attempt)
            if self.uids is not None:
                self.uids.release(job, attempt)

    def pod_events(self, job: str) -> list[JobEvent]:
        """Why an attempt's pods have not started: they wait for a uid of their own."""
        with self._lock:
            return [JobEvent(job=job, time=c.record.launched_at, type="Warning",
                             reason=WAITING_FOR_UID, message=self._waiting_reason())
                    for c in self._attempts.values()
                    if c.record.job == job and c.record.waiting
                    and c.record.terminate_requested_at is None]

    def last_checkpoint(self, job: str) -> float | None:
        return self.checkpoints.last_saved(job)

    def release_checkpoints(self, job: str) -> None:
        self.checkpoints.remove(job)

    def exec(self, job: str, pod: str | None, argv: list[str], *, tty: bool = False,
             cols: int = 80, rows: int = 24) -> ExecSession:
        """Run ``argv`` in the pod through its supervisor's exec channel (``shim.py``)."""
        with self._lock:
            now = time.time()
            running = [
                (current, p) for current in self._attempts.values()
                if current.record.job == job for p in current.pods
                if self._observe(current, p, now).phase is PodPhase.RUNNING
                and ((pod is None and p.plan.ref.rank == 0) or pod in (
                    str(p.plan.ref.rank), p.plan.ref.name))
            ]
        if not running:
            raise NotFound(
                f"job {job!r} has no running pod {pod if pod is not None else 'of rank 0'}",
                field="pod", fix="name a running pod by rank or name (phalanx describe lists "
                "them), or wait until the job runs")
        current, found = max(running, key=lambda item: item[0].record.attempt)
        path = self._exec_socket(current.directory, found.plan.ref.name)
        try:
            sock = relay.connect_unix(str(path))
        except OSError as exc:
            raise NotFound(f"pod {found.plan.ref.name} takes no commands ({exc.strerror})",
                           field="pod", fix="run the command in a pod started by this "
                           "version of Phalanx") from exc
        sock.sendall(relay.open_request(argv, tty=tty, cols=cols, rows=rows))
        return relay.SocketSession(sock)

    @staticmethod
    def _exec_socket(directory: Path, pod: str) -> Path:
        return directory / f"{pod}.sock"

    def close(self) -> None:
        """Stop the plane's own thread; pods keep running and a new plane re-adopts them."""
        self._closed.set()
        self._wake.set()
        if self._doctor is not None:
            self._doctor.close()
            self._doctor = None
        if self._escalator is not None:
            self._escalator.join(timeout=5)
            self._escalator = None

    # ------------------------------------------------------------------ launching
    def _plan(
        self, job: JobSpec, attempt: int, admission: Admission, now: float,
        credential: PodCredential | None, owner: PodUser | None,
    ) -> tuple[AttemptRecord, list[PodLaunch]]:
        """The attempt's record and its pods' launches, run as ``owner`` (None: this
        process's user, or under --pod-uids a uid given later, ``_own``)."""
        framework = framework_of(job)
        count = sum(p.count for p in admission.pod_sets)
        network = LocalNetwork(count, self._ports_taken())
        plans = framework.plan(job, attempt, admission, network)
        pod_sets = {p.name: (i, p) for i, p in enumerate(job.pod_sets)}
        wanted, wanted_cpus, namespaces = [], [], []
        volumes_dir = self._state.attempt_dir(job.name, attempt) / "volumes"
        secrets = credential.secrets if credential is not None else AttemptSecrets()
        secrets_dir = self.credentials.secrets_dir(job.name, attempt)
        # Under --pod-uids an attempt still waiting for its uid is checked as any uid of the
        # range would be: one that owns nothing outside its own directories.
        stranger = None if self.uids is None else PodUser(
            uid=self.uids.pool.uids.first, gid=self.uids.pool.uids.first, groups=(), name=None,
            home="/")
        for plan in plans:
            ref, node = plan.ref, plan.node
            i, pod_set = pod_sets[ref.pod_set]
            virtual = node != self.node_name
            if virtual and node not in self._node.names():
                raise SpecError(
                    f"pod {ref.name} is placed on node {node!r}, but this machine is "
                    f"{self.node_name!r}", field="admission.podSets.nodes",
                    fix="admit the job onto the node the local plane's inventory reports",
                )
            if pod_set.working_dir is not None and os.path.isabs(pod_set.working_dir) \
                    and not os.path.isdir(pod_set.working_dir):
                raise SpecError(
                    f"working directory {pod_set.working_dir!r} does not exist on this machine",
                    field=f"podSets[{i}].workingDir", fix="create it, give an existing directory, "
                    "or a relative one (inside the pod's own directory)",
                )
            gpus = pod_set.resources.get(GPU, 0)
            if gpus % MILLI:
                raise SpecError(
                    f"{gpus / MILLI:g} GPUs requested; pods get whole GPUs on this machine",
                    field=f"podSets[{i}].resources.{GPU}", fix="request a whole number of GPUs",
                )
            # A virtual node's pods run here too, but its GPUs and CPUs are only advertised:
            # they get none of this machine's devices or pinned CPUs.
            wanted.append(0 if virtual else gpus // MILLI)
            exclusive = pod_set.cpu_pinning == "exclusive" and not virtual
            wanted_cpus.append(pod_set.resources.get("cpu", 0) // MILLI if exclusive else 0)
            namespaces.append(self.volumes.plan(
                job, i, volumes_dir / ref.name, owner, owner or stranger,
                secrets_dir=secrets_dir if credential is not None else None,
                secret_keys=secrets.volumes))
        self.pod_dirs.check(job)
        assigned = assign_gpus(wanted, [g.index for g in self.gpus], self._held_gpus())
        pinned = pinning.assign_cpus(wanted_cpus, self.cpu_topology, self._held_cpus())
        checkpoint_dir = str(self.checkpoints.prepare(job.name, owner))
        api: dict[str, str] = {}
        if credential is not None:
            key_file = self.credentials.write(job.name, attempt, credential.key, owner)
            api = credential.environment(str(key_file))
        if secrets.volumes:  # each pod's namespace binds them at their mountPaths
            self.credentials.write_secrets(job.name, attempt, secrets.volumes, owner)
        # Each pod starts in a directory of its own, never the control plane's. The key of
        # a git source (git.sshKeySecret) is on disk while the attempt's clones run only.
        with ssh_key_env(secrets.git, self.home / GIT_KEYS_DIR) as git_env:
            try:
                cwds = [self.pod_dirs.prepare(job, attempt, plan.ref.name,
                                              pod_sets[plan.ref.pod_set][1], owner, git_env)
                        for plan in plans]
            except BaseException:
                self.pod_dirs.remove(job.name, attempt)
                raise
        planned, launches = [], []
        for plan, gpus_of_pod, cpus_of_pod, namespace, cwd in zip(
                plans, assigned, pinned, namespaces, cwds, strict=True):
            pod_set = pod_sets[plan.ref.pod_set][1]
            # Under --pod-uids a pod's HOME is its own directory, which its uid owns.
            user_env = {"HOME": str(self.pod_dirs.pod_dir(job.name, attempt, plan.ref.name))} \
                if self.uids is not None else (
                    self.run_as.environment() if self.run_as is not None else {})
            planned.append(PlannedPod(plan.ref, plan.node, gpus_of_pod, cpus_of_pod))
            # A secret's variables, as Kubernetes' envFrom, yield to the pod set's own env.
            env = {"PYTHONUNBUFFERED": "1", **user_env, CHECKPOINT_DIR_ENV: checkpoint_dir,
                   **api, **secrets.env.get(pod_set.name, {}), **plan.env}
            if "PATH" not in env:
                # `python` in a command means the Python Phalanx runs on (its venv's packages),
                # whether or not that venv was activated in the shell that started it.
                bin_dir = os.path.dirname(sys.executable)
                env["PATH"] = os.pathsep.join([bin_dir, os.environ.get("PATH", os.defpath)])
            if self.gpus:
                env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
                env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in gpus_of_pod)
            launches.append(PodLaunch(plan.command, cwd, env, owner, cpus_of_pod, namespace))
        master_port = plans[0].ports.get("master", 0) if plans else 0
        record = AttemptRecord(job=job.name, attempt=attempt, master_port=master_port,
                               launched_at=now, pods=planned, ports=sorted(network.chosen.values()),
                               endpoints=framework.endpoints(job, plans))
        return record, launches

    def _start_all(self, current: _Attempt, launches: list[PodLaunch],
                   owner: PodUser | None) -> None:
        if self.uids is not None and owner is not None:
            self.uids.own(current.record.job, current.record.attempt, owner, self.credentials,
                          self.checkpoints)
        for pod, launch in zip(current.pods, launches, strict=True):
            self._start(current, pod, launch)

    # ------------------------------------------------------------------ uids of attempts
    def _waiting_reason(self) -> str:
        assert self.uids is not None
        return self.uids.pool.busy_reason()

    def _start_waiting(self, now: float) -> None:
        """Start attempts that waited for a uid, oldest first, as uids free."""
        if self.uids is None:
            return
        waiting = sorted((c for c in self._attempts.values() if c.record.waiting
                          and c.record.terminate_requested_at is None),
                         key=lambda c: c.record.launched_at)
        for current in waiting:
            record = current.record
            owner = self.uids.take(record.job, record.attempt)
            if owner is None:
                return
            launches = self._state.take_launches(current.directory, owner)
            record.uid, record.waiting = owner.uid, False
            self._state.save(record)  # the uid is on disk before any pod runs as it
            log.info("%s attempt %d got uid %d", record.job, record.attempt, owner.uid)
            self._start_all(current, launches, owner)

    def _refused(self, what: str) -> bool:
        """Whether ``what`` is refused: another replica has driven the pods under a newer
        term than this plane's (said in the log, and nothing is done)."""
        refusal = self.terms.refusal(self.term, what)
        if refusal is not None:
            log.warning("%s", refusal)
        return refusal is not None

    def _start(self, current: _Attempt, pod: _Pod, launch: PodLaunch) -> None:
        ref = pod.plan.ref
        if self._refused(f"start of pod {ref.name}"):  # its supervisor would refuse it too
            return
        log_file = self.logs.path(ref.job, ref.name)
        exit_file = StateDir.exit_file(current.directory, ref.name)
        pid, stdin = procs.spawn_session([*SHIM_COMMAND, str(exit_file)], self._supervisor_env)
        start = procs.start_time(pid)
        pod.child = True
        pod.process = ProcessRecord(
            pid=pid, start=-1.0 if start is None else start, launched_at=time.time(),
            log=str(log_file),
        )
        # Recorded before the supervisor gets the pod: it never runs a command untracked.
        self._state.save_process(current.directory, ref.name, pod.process)
        payload = {
            "command": launch.command, "cwd": launch.cwd, "env": launch.env,
            "log": str(log_file), "attempt": ref.attempt,
            "execSocket": str(self._exec_socket(current.directory, ref.name)),
            "user": launch.user.to_json() if launch.user is not None else None,
            "logMaxBytes": self.logs.rotation.max_bytes, "logKeep": self.logs.rotation.keep,
            "cpus": list(launch.cpus),
            "lease": str(self.lease) if self.lease is not None else None,
            "term": self.term, "termGate": str(self.terms.path),
            **launch.namespace,
        }
        try:
            with open(stdin, "wb") as pipe:
                pipe.write(json.dumps(payload).encode())
        except BrokenPipeError:  # it died already; observe() reports the pod lost
            log.error("supervisor of %s exited before it got the pod", ref.name)

    def _held_gpus(self) -> set[int]:
        return {g for pod in self._unfinished() for g in pod.plan.gpus}

    def _held_cpus(self) -> set[int]:
        return {c for pod in self._unfinished() for c in pod.plan.cpus}

    def _unfinished(self) -> list[_Pod]:
        """Pods that still hold what they were given (GPUs, pinned CPUs)."""
        return [pod for current in self._attempts.values() for pod in current.pods
                if pod.final is None]

    def _ports_taken(self) -> set[int]:
        """Ports given to the pods of attempts this plane knows: never handed out twice."""
        return {
            port for current in self._attempts.values()
            for port in (current.record.master_port, *current.record.ports)
        }

    def endpoints(self, job: str, attempt: int) -> dict[str, str]:
        with self._lock:
            current = self._attempts.get((job, attempt))
            return dict(current.record.endpoints) if current is not None else {}

    # ------------------------------------------------------------------ observing
    def _refresh(self, now: float) -> None:
        for current in self._attempts.values():
            for pod in current.pods:
                self._observe(current, pod, now)

    def _observe(self, current: _Attempt, pod: _Pod, now: float) -> PodState:
        if pod.final is not None:
            return pod.final
        ref, process = pod.plan.ref, pod.process
        if current.record.waiting and current.record.terminate_requested_at is None:
            return PodState(ref=ref, node=pod.plan.node, phase=PodPhase.PENDING,
                            reason=WAITING_FOR_UID)
        if process is not None and self._running(pod, process):
            return PodState(ref=ref, node=pod.plan.node, phase=PodPhase.RUNNING,
                            pid=process.pid, started_at=process.launched_at,
                            cpus=pod.plan.cpus)
        # The supervisor is gone: it wrote its exit record first, unless it was killed.
        record = None
        if process is not None:
            record = read_json(StateDir.exit_file(current.directory, ref.name))
        outcome = outcome_of(
            record, terminate_requested_at=current.record.terminate_requested_at,
            killed=pod.killed, now=now,
            disk_full=record is None and _free_bytes(current.directory) < DISK_FULL_BYTES,
        )
        pod.final = PodState(
            ref=ref, node=pod.plan.node, phase=outcome.phase, exit_code=outcome.exit_code,
            signal=outcome.signal, reason=outcome.reason, failure=outcome.failure,
            pid=process.pid if process else None,
            started_at=process.launched_at if process else None,
            finished_at=outcome.finished_at, cpus=pod.plan.cpus,
        )
        return pod.final

    @staticmethod
    def _running(pod: _Pod, process: ProcessRecord) -> bool:
        if pod.child:  # our own child: collect it once it exits, leaving no zombie
            try:
                if not procs.reap(process.pid):
                    return True
                pod.child = False
                return False
            except ChildProcessError:  # collected elsewhere (e.g. SIGCHLD ignored)
                pod.child = False
        return procs.is_running(process.pid, process.start)

    @staticmethod
    def _live(current: _Attempt) -> list[_Pod]:
        """Pods whose process group may still have members: running, or lost (a supervisor
        killed on its own leaves its command running in the group)."""
        return [
            p for p in current.pods
            if p.process is not None and (p.final is None or p.final.reason == LOST)
        ]

    # ------------------------------------------------------------------ escalation
    def _escalate(self, now: float) -> float | None:
        """SIGKILL pods whose grace has ended; the next deadline still to come, if any."""
        upcoming: float | None = None
        for current in self._attempts.values():
            deadline = current.record.kill_deadline
            if deadline is None:
                continue
            pending = [p for p in self._live(current) if not p.killed]
            if not pending:
                continue
            if deadline > now:
                upcoming = deadline if upcoming is None else min(upcoming, deadline)
                continue
            for pod in pending:
                assert pod.process is not None
                procs.signal_group(pod.process.pid, pod.process.start, signal.SIGKILL)
                pod.killed = True
        return upcoming

    def _start_escalator(self) -> None:
        with self._lock:
            if self._escalator is None and not self._closed.is_set():
                self._escalator = threading.Thread(
                    target=self._run_escalator, name="phalanx-local-escalator", daemon=True
                )
                self._escalator.start()

    def _run_escalator(self) -> None:
        while not self._closed.is_set():
            with self._lock:
                upcoming = self._escalate(time.time())
            timeout = None if upcoming is None else max(0.0, upcoming - time.time()) + 0.01
            self._wake.wait(timeout)
            self._wake.clear()


def _free_bytes(directory: Path) -> int:
    """Free bytes on the disk of ``directory`` (as much as can be: unknown counts as room)."""
    try:
        return shutil.disk_usage(directory).free
    except OSError:
        return DISK_FULL_BYTES
