"""A uid of its own for each running attempt: ``phalanx up --pod-uids FIRST-LAST``.

Under ``--run-as-user`` every pod of every job runs as one user, so one team's pod can
read another's ``/proc/<pid>/environ``, credential file and checkpoints. With
``--pod-uids`` each attempt of a job takes a uid of the range while it runs, as
systemd's ``DynamicUser=`` does: the uids need no entry in the user database (they
must have none), the gid is the uid, the attempt's directories (credential file,
checkpoint directory, working directory) are owned by it and owner-only, and no other
attempt holds that uid while this one has a pod or a process left. All pods of one
attempt share it: they are one gang, whose rendezvous (MPI's rsh agent, torch's store)
stays between them.

The uid an attempt holds is written in its bookkeeping (``attempt.json``), so a
restarted plane re-adopts it with its uid and gives that uid to no one else. A uid is
taken again only once its attempt was forgotten and no process of it is left (the
plane kills what an attempt's processes left behind, even outside their group, when
it gives the uid back).
"""

from __future__ import annotations

import contextlib
import logging
import os
import pwd
import re
import shutil
import signal
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from phalanx.compute.local.checkpoints import CheckpointDirs
from phalanx.compute.local.credentials import CredentialFiles
from phalanx.compute.local.poddirs import attempt_workdir, own_tree, owned_dir
from phalanx.compute.local.users import ROOT_UID, PodUser
from phalanx.errors import SpecError

log = logging.getLogger("phalanx.compute.local")

FIELD = "--pod-uids"
_RANGE = re.compile(r"^\s*(\d+)\s*-\s*(\d+)\s*$")
# The largest uid Linux takes (2**32 - 1 means "no uid"; 65535 is the old 16-bit one).
MAX_UID = 2**32 - 2
OLD_NO_UID = 65535
# systemd hands out this range to its own DynamicUser= services: never share it.
SYSTEMD_DYNAMIC = range(61184, 65520)
# Shared places where a pod may leave files behind under its uid; emptied of them when
# the uid is given back, so its next holder finds none.
SCRATCH = (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"))
# Subordinate ids that rootless containers map their users to.
SUBORDINATE = (Path("/etc/subuid"), Path("/etc/subgid"))
RANGE_FIX = ("give a range of uids no user of this machine has, e.g. --pod-uids 200000-200999 "
             "(see docs/security.md: how to choose a range)")


@dataclass(frozen=True, slots=True)
class UidRange:
    first: int
    last: int

    def __len__(self) -> int:
        return self.last - self.first + 1

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.first, self.last + 1))

    def __contains__(self, uid: object) -> bool:
        return isinstance(uid, int) and self.first <= uid <= self.last

    def __str__(self) -> str:
        return f"{self.first}-{self.last}"


def parse_uid_range(text: str) -> UidRange:
    """``FIRST-LAST`` as a range, or a SpecError naming ``--pod-uids``."""
    match = _RANGE.match(text)
    if match is None:
        raise SpecError(f"{text!r} is not a range of uids", field=FIELD, fix=RANGE_FIX)
    first, last = int(match[1]), int(match[2])
    if first > last:
        raise SpecError(f"{text!r} ends before it starts", field=FIELD,
                        fix="write the lower uid first, e.g. 200000-200999")
    if first <= ROOT_UID or last > MAX_UID:
        raise SpecError(f"{text!r} is outside 1-{MAX_UID}", field=FIELD, fix=RANGE_FIX)
    return UidRange(first, last)


def subordinate_overlaps(uids: UidRange, files: Iterable[Path] = SUBORDINATE) -> list[str]:
    """Entries of ``/etc/subuid`` and ``/etc/subgid`` (``name:first:count``) the range meets."""
    found = []
    for path in files:
        try:
            lines = path.read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            parts = line.strip().split(":")
            if len(parts) != 3 or not (parts[1].isdigit() and parts[2].isdigit()):
                continue
            first, count = int(parts[1]), int(parts[2])
            if count and first <= uids.last and uids.first <= first + count - 1:
                found.append(f"{parts[0]}'s {first}-{first + count - 1} in {path}")
    return found


def check_uid_range(uids: UidRange, *, control_plane_uid: int | None = None,
                    subordinate: Iterable[Path] = SUBORDINATE) -> None:
    """Refuse a range this control plane could not give out safely: it must run as root
    (only root starts processes as other uids), and no uid of the range may be a user of
    this machine, a subordinate id of ``/etc/subuid`` or ``/etc/subgid`` (containers'),
    the 16-bit "no uid", or systemd's own dynamic uids."""
    own = os.geteuid() if control_plane_uid is None else control_plane_uid
    if own != ROOT_UID:
        raise SpecError(
            f"the control plane runs as uid {own}, which cannot start processes as other "
            "uids", field=FIELD,
            fix="start the control plane as root to give each attempt a uid of its own, or "
            "leave --pod-uids out (pods then run as the control plane's user)")
    if OLD_NO_UID in uids:
        raise SpecError(f"{uids} holds {OLD_NO_UID}, which means no uid to some tools",
                        field=FIELD, fix=RANGE_FIX)
    if uids.first < SYSTEMD_DYNAMIC.stop and uids.last >= SYSTEMD_DYNAMIC.start:
        raise SpecError(
            f"{uids} overlaps {SYSTEMD_DYNAMIC.start}-{SYSTEMD_DYNAMIC.stop - 1}, the uids "
            "systemd gives its own DynamicUser= services", field=FIELD, fix=RANGE_FIX)
    users = sorted((e.pw_uid, e.pw_name) for e in pwd.getpwall() if e.pw_uid in uids)
    if users:
        shown = ", ".join(f"{name} ({uid})" for uid, name in users[:3])
        raise SpecError(f"{uids} holds uids of users of this machine: {shown}", field=FIELD,
                        fix=RANGE_FIX)
    overlaps = subordinate_overlaps(uids, subordinate)
    if overlaps:
        raise SpecError(f"{uids} overlaps subordinate ids containers use: "
                        f"{', '.join(overlaps[:3])}", field=FIELD, fix=RANGE_FIX)


def attempt_user(uid: int, home: Path) -> PodUser:
    """The identity of an attempt's pods: its uid, the same number as gid, no groups;
    HOME is the attempt's own working directory."""
    return PodUser(uid=uid, gid=uid, groups=(), name=None, home=str(home))


def process_uids() -> dict[int, list[int]]:
    """pid lists of every uid that has a process on this machine (real or effective)."""
    found: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status", encoding="ascii", errors="replace") as f:
                for line in f:
                    if line.startswith("Uid:"):
                        for uid in {int(v) for v in line.split()[1:3]}:
                            found.setdefault(uid, []).append(int(entry.name))
                        break
        except (OSError, ValueError):  # gone while we looked
            continue
    return found


class UidPool:
    """Which uid of the range each attempt holds; one attempt per uid."""

    def __init__(self, uids: UidRange) -> None:
        self.uids = uids
        self.held: dict[int, tuple[str, int]] = {}  # uid -> (job, attempt)

    def hold(self, uid: int, owner: tuple[str, int]) -> None:
        """An adopted attempt keeps its uid."""
        self.held[uid] = owner

    def of(self, owner: tuple[str, int]) -> int | None:
        return next((uid for uid, held in self.held.items() if held == owner), None)

    def take(self, owner: tuple[str, int]) -> int | None:
        """The lowest uid no attempt holds and no process runs as (None: all are busy)."""
        mine = self.of(owner)
        if mine is not None:
            return mine
        free = [uid for uid in self.uids if uid not in self.held]
        if not free:
            return None
        busy = process_uids()
        uid = next((u for u in free if u not in busy), None)
        if uid is not None:
            self.held[uid] = owner
        return uid

    def drop(self, owner: tuple[str, int]) -> None:
        """Forget a uid taken for an attempt that never started a process."""
        uid = self.of(owner)
        if uid is not None:
            del self.held[uid]

    def busy_reason(self) -> str:
        return (f"waiting for a pod uid: all {len(self.uids)} uids of --pod-uids {self.uids} "
                "are held by running attempts (or their leftover processes)")

    def release(self, owner: tuple[str, int]) -> None:
        """Give the attempt's uid back, once nothing of it is left: its leftover processes
        are killed and its files in the shared scratch places removed."""
        uid = self.of(owner)
        if uid is None:
            return
        kill_processes_of(uid)
        remove_files_of(uid, SCRATCH)
        del self.held[uid]


class AttemptUids:
    """The plane's side of ``--pod-uids``: which uid each attempt holds, its working
    directory (also its HOME), and handing the attempt's directories to its uid."""

    def __init__(self, uids: UidRange, workdirs: Path) -> None:
        self.pool = UidPool(uids)
        self.workdirs = workdirs

    def workdir(self, job: str, attempt: int) -> Path:
        return attempt_workdir(self.workdirs, job, attempt)

    def user(self, uid: int, job: str, attempt: int) -> PodUser:
        return attempt_user(uid, self.workdir(job, attempt))

    def take(self, job: str, attempt: int) -> PodUser | None:
        """The attempt's identity, its working directory made (root's until ``own``);
        None while every uid is held."""
        workdir = self.workdir(job, attempt)
        owned_dir(workdir.parent, workdir.name, None, shared=True)
        uid = self.pool.take((job, attempt))
        return None if uid is None else self.user(uid, job, attempt)

    def own(self, job: str, attempt: int, owner: PodUser, credentials: CredentialFiles,
            checkpoints: CheckpointDirs) -> None:
        """Hand the attempt's directories to its uid: its pods' working directories (with
        the code unpacked there), credential, and the job's checkpoints (with what earlier
        attempts, other uids, wrote there)."""
        own_tree(self.workdir(job, attempt), owner.uid, owner.gid)
        credentials.own(job, attempt, owner)
        own_tree(checkpoints.prepare(job, owner), owner.uid, owner.gid)

    def release(self, job: str, attempt: int) -> None:
        """Nothing of a forgotten attempt outlives its uid."""
        self.pool.release((job, attempt))
        shutil.rmtree(self.workdir(job, attempt), ignore_errors=True)


def kill_processes_of(uid: int) -> None:
    """SIGKILL every process running as ``uid`` (a range uid: only its attempt's)."""
    for pid in process_uids().get(uid, []):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def remove_files_of(uid: int, places: Iterable[Path]) -> None:
    """Remove what ``uid`` left at the top of ``places`` (its files, its directories)."""
    for place in places:
        try:
            entries = list(os.scandir(place))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.stat(follow_symlinks=False).st_uid != uid:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
            except OSError as exc:
                log.warning("could not remove %s, left by uid %d: %s", entry.path, uid, exc)

