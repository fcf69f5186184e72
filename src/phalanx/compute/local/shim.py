"""The supervisor of one local pod; standard library only, so it starts in milliseconds.

The local plane starts it by file path (``python -I -S shim.py EXIT_FILE``) in a
new session: it is the session and process-group leader, outliving the control
plane that started it. It reads the pod (command, env, working directory, log
file) as JSON from stdin, which doubles as a handshake: the plane writes it only
after recording the supervisor's pid, so a plane that dies mid-launch leaves no
command running untracked (the supervisor sees end-of-file and runs nothing).

It then runs the command as its child, in its own process group, with stdout
and stderr going through a pipe to a thread of the supervisor that appends them
to the pod's log, rotating it past its size cap and keeping its time index
(``phalanx/store/logfile.py``, loaded by path: the log layout has one owner, the
store). The command runs as the user the pod names if any (the child drops
privileges before exec; the supervisor keeps its own, to write the log and the
exit record and kill leftovers). It waits, and writes the exit record (exit code
or signal, times) atomically to EXIT_FILE once the output is in the log. When the
command exits, any
process it left in the group is killed, as Kubernetes does when a container's
main process ends. While the command runs, the supervisor also serves the pod's
exec channel (``ExecChannel``: ``phalanx exec``), when the plane names its socket.
When the plane names a lease file (a compute-plane worker's, ``compute/lease.py``), the
supervisor reads it every LEASE_POLL seconds and stops the command (SIGTERM to its
group, SIGKILL after the grace the lease file gives, else FENCE_GRACE) once it lapsed:
the fence that keeps a rank from running on two clusters when the worker was killed or
cut off. The exit record then says ``fenced``.
When the plane acts for a leading replica, the pod carries the replica's term and the
gate's directory (``compute/terms.py``): just before starting the command the supervisor
refuses a term older than the newest a replica has acted on (a replica that led, was
paused, and resumed mid-launch after another took the lead), says so in the pod's log and
writes an exit record that says ``refused``, and runs nothing.
A pod with mounts or a ``shm`` size gets a mount namespace of its own (``mountns.py``),
made by the supervisor before the command starts, so the command and ``phalanx exec``
see the pod's volumes; the pod's emptyDirs are removed once the command has ended.
Group-wide SIGTERM/SIGINT/SIGHUP do not stop the supervisor
(it stays to record how the command ended); SIGKILL does, which the plane
accounts for.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
from types import ModuleType
from typing import Any, cast

ATTEMPT_HEADER = "=== attempt {attempt} ===\n"
# Bookkeeping and logs are the control plane's, owner-only (phalanx.defaults says the same;
# this module imports nothing outside the standard library so it starts fast).
PRIVATE_FILE_MODE = 0o600
# The command's umask: the conventional one, not the control plane's owner-only 077.
POD_UMASK = 0o022
# The log writer, beside this package: phalanx/store/logfile.py (standard library only).
_PACKAGE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOGFILE = os.path.join(_PACKAGE, "store", "logfile.py")
# The exec channel's wire format, beside the package root (phalanx/relay.py, standard
# library only): ``phalanx exec`` runs commands in the pod through it.
RELAY = os.path.join(_PACKAGE, "relay.py")
# A pod's own mount namespace (its volumes, its /dev/shm), beside this file.
MOUNTNS = os.path.join(_PACKAGE, "compute", "local", "mountns.py")
# The leader's term gate (phalanx/compute/terms.py, standard library only): a start from a
# replica that no longer leads is refused.
TERMS = os.path.join(_PACKAGE, "compute", "terms.py")
PIPE_READ = 64 * 1024
# How long the output of a finished command may take to drain once its group is gone
# (a process that left the group may still hold the pipe; it is not waited for).
DRAIN_SECONDS = 5.0
# The lease fence: how often the lease file is read, and SIGTERM-to-SIGKILL once it lapsed.
LEASE_POLL = 0.5
FENCE_GRACE = 5.0
# Not running a command that cannot be started is reported like a shell does.
EXIT_NOT_FOUND, EXIT_NOT_EXECUTABLE = 127, 126


def write_json_atomic(path: str, data: dict[str, Any]) -> None:
    """Write ``data`` so readers see the old file or the whole new one, never a torn one."""
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE_MODE)
    with open(fd, "w", encoding="utf-8") as out:
        json.dump(data, out)
    os.replace(tmp, path)


def oom_kills() -> int | None:
    """OOM kills so far in this process's memory cgroup (v2 or v1), None when unknown."""
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            candidate = f"/sys/fs/cgroup{path}/memory.events"
        elif "memory" in controllers.split(","):
            candidate = f"/sys/fs/cgroup/memory{path}/memory.oom_control"
        else:
            continue
        try:
            with open(candidate, encoding="utf-8") as f:
                for entry in f:
                    key, _, value = entry.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            continue
    return None


def identity(user: dict[str, Any] | None) -> dict[str, Any]:
    """Popen's arguments that make the command run as ``user`` (None: as this supervisor).

    The child sets its groups (replacing every supplementary group, root's included),
    then its gid, then its uid, before exec: once the uid is dropped it cannot take
    any of them back. The log was opened before, by this supervisor, so the command
    writes its output to a file it could not open itself.
    """
    if user is None:
        return {}
    return {"user": user["uid"], "group": user["gid"], "extra_groups": list(user["groups"])}
def load_by_path(name: str, path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while defining a class
    spec.loader.exec_module(module)
    return module


def load_logfile() -> ModuleType:
    return load_by_path("phalanx_logfile", LOGFILE)


class ExecChannel:
    """Runs what ``phalanx exec`` asks inside the pod: the pod's environment, working
    directory, user and process group (``relay.py``), on an owner-only Unix socket
    beside the pod's bookkeeping. Open while the pod's command runs."""

    def __init__(self, path: str, env: dict[str, str], cwd: str, popen: dict[str, Any]) -> None:
        self.path = path
        self.relay = load_by_path("phalanx_relay", RELAY)
        self.launch = self.relay.Launch(env=env, cwd=cwd, popen=popen)
        self.listener = self.relay.listen_unix(path)
        threading.Thread(target=self.relay.serve_forever, args=(self.listener, self.launch),
                         name="exec", daemon=True).start()

    def close(self) -> None:
        """No new command; the terminal sessions started here end with the pod."""
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        self.listener.close()
        self.launch.kill_sessions()


def copy_output(pipe: int, log: Any) -> None:
    """Append what comes through the pipe to the log, until every writer has closed it."""
    try:
        while chunk := os.read(pipe, PIPE_READ):
            log.write(chunk)
    except OSError as exc:  # a full disk: drain the pipe so the command never blocks on it
        sys.stderr.write(f"phalanx: cannot write the log: {exc}\n")
        while os.read(pipe, PIPE_READ):
            pass
    finally:
        os.close(pipe)


def lease_expiry(path: str) -> tuple[float | None, float | None]:
    """The lease's ``expiresAt`` and the fence's grace, as ``compute/lease.py`` writes them
    (None, None: unreadable)."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        value, grace = data.get("expiresAt"), data.get("grace", FENCE_GRACE)
    except (OSError, ValueError, AttributeError):
        return None, None
    grace = float(grace) if isinstance(grace, int | float) and grace >= 0 else FENCE_GRACE
    return (float(value) if isinstance(value, int | float) else None), grace


class LeaseFence:
    """Stops the command's group once the lease lapses (a thread of the supervisor)."""

    def __init__(self, path: str, child: subprocess.Popen[bytes]) -> None:
        self.path = path
        self.child = child
        self.fenced_at: float | None = None
        self.done = threading.Event()
        threading.Thread(target=self._watch, name="fence", daemon=True).start()

    def _watch(self) -> None:
        grace = FENCE_GRACE
        while not self.done.wait(LEASE_POLL):
            expiry, read = lease_expiry(self.path)
            grace = grace if read is None else read  # (the last one read, if it is gone)
            if expiry is not None and expiry > time.time():
                continue
            self.fenced_at = time.time()
            # The command shares this supervisor's group; the supervisor ignores SIGTERM.
            with contextlib.suppress(OSError):
                os.killpg(os.getpgid(0), signal.SIGTERM)
            if not self.done.wait(grace):
                kill_group_leftovers()
            return


def run_pod(pod: dict[str, Any]) -> dict[str, Any]:
    """Run the pod's command to its end; the exit record to write."""
    started = time.time()
    ooms_before = oom_kills()
    try:
        log = load_logfile().RotatingLog(pod["log"], pod["logMaxBytes"], pod["logKeep"])
    except OSError as exc:
        return {"error": f"cannot open the log file: {exc}", "errorKind": "system",
                "startedAt": started, "finishedAt": time.time()}
    try:
        if log.size or pod["attempt"] > 1:  # mark where this attempt starts in a shared log
            log.write(b"\n" if log.size and log.last_byte() != b"\n" else b"")
            log.write(ATTEMPT_HEADER.format(attempt=pod["attempt"]).encode())
        env = dict(os.environ)
        env.update(pod["env"])
        if pod.get("cpus"):  # pinned: the command (and all it starts) inherits the mask
            try:
                os.sched_setaffinity(0, pod["cpus"])
            except OSError as exc:
                return {"error": f"cannot pin to CPUs {pod['cpus']}: {exc}",
                        "errorKind": "system", "startedAt": started, "finishedAt": time.time()}
        refusal = term_refusal(pod)
        if refusal is not None:
            log.write(f"phalanx: not started: {refusal}\n".encode())
            return {"error": refusal, "errorKind": "system", "refused": True,
                    "startedAt": started, "finishedAt": time.time()}
        namespace = enter_namespace(pod)
        if isinstance(namespace, str):
            log.write(f"phalanx: {namespace}\n".encode())
            return {"error": namespace, "errorKind": "system", "startedAt": started,
                    "finishedAt": time.time()}
        read_end, write_end = os.pipe()
        try:
            child = subprocess.Popen(
                pod["command"], cwd=pod["cwd"], env=env,
                stdin=subprocess.DEVNULL, stdout=write_end, stderr=subprocess.STDOUT,
                umask=POD_UMASK, **identity(pod.get("user")),
            )
        except OSError as exc:  # not found, not executable, bad working directory
            os.close(read_end)
            os.close(write_end)
            message = f"cannot start {pod['command'][0]!r}: {exc.strerror or exc}"
            log.write(f"phalanx: {message}\n".encode())
            code = EXIT_NOT_FOUND if isinstance(exc, FileNotFoundError) else EXIT_NOT_EXECUTABLE
            return {"exitCode": code, "error": message, "errorKind": "user",
                    "startedAt": started, "finishedAt": time.time()}
        os.close(write_end)  # the command (and what it starts) holds the only write end
        channel = open_exec_channel(pod, env, **identity(pod.get("user")))
        copier = threading.Thread(target=copy_output, args=(read_end, log), name="copier",
                                  daemon=True)
        copier.start()
        fence = LeaseFence(pod["lease"], child) if pod.get("lease") else None
        code = child.wait()
        finished = time.time()
        if fence is not None:
            fence.done.set()
        if channel is not None:
            channel.close()
        # What the command left in its group goes now, as it would after the record; then
        # the pipe ends and its last output is in the log before anyone reads the record.
        kill_group_leftovers()
        copier.join(DRAIN_SECONDS)
        if namespace is not None:
            namespace.remove_volumes(pod)
    finally:
        # Left open while a process outside the group still writes: closing it would let
        # a later open reuse the descriptor under the copier. Exiting closes it anyway.
        if not any(t.name == "copier" and t.is_alive() for t in threading.enumerate()):
            log.close()
    ooms_after = oom_kills()
    if fence is not None and fence.fenced_at is not None:
        log_fenced = f"phalanx: stopped: the compute plane's lease lapsed ({pod['lease']})\n"
        with contextlib.suppress(OSError, ValueError):
            log.write(log_fenced.encode())
        return {"error": "fenced: the compute plane's lease lapsed (its worker is gone or "
                         "cut off from the control plane)", "errorKind": "system",
                "fenced": True, "childPid": child.pid, "startedAt": started,
                "finishedAt": finished}
    return {
        "exitCode": code if code >= 0 else None,
        "signal": -code if code < 0 else None,
        "childPid": child.pid,
        "startedAt": started,
        "finishedAt": finished,
        "oomKilled": ooms_before is not None and ooms_after is not None
        and ooms_after > ooms_before,
    }


def term_refusal(pod: dict[str, Any]) -> str | None:
    """Why the pod may not start (its term is older than the newest acted on), or None."""
    if pod.get("term") is None or not pod.get("termGate"):
        return None
    gate = load_by_path("phalanx_terms", TERMS).TermGate(pod["termGate"])
    return cast(str | None, gate.refusal(pod["term"], f"start of the pod (attempt "
                                                      f"{pod['attempt']})"))


def enter_namespace(pod: dict[str, Any]) -> ModuleType | str | None:
    """Give the pod its mount namespace if it has mounts (``mountns.py``): the module that
    made it, or why it could not be made (None: the pod needs none)."""
    if not (pod.get("mounts") or pod.get("shm")):
        return None
    mountns = load_by_path("phalanx_mountns", MOUNTNS)
    try:
        mountns.enter(pod)
    except (mountns.MountError, OSError) as exc:
        return f"cannot give the pod its mounts: {exc}"
    return mountns


def open_exec_channel(pod: dict[str, Any], env: dict[str, str],
                      **popen: Any) -> ExecChannel | None:
    """The pod's exec channel, if the plane asked for one (none when it cannot be opened:
    the pod runs regardless, and ``phalanx exec`` says the pod takes no commands)."""
    path = pod.get("execSocket")
    if not path:
        return None
    try:
        return ExecChannel(path, env, pod["cwd"], {"umask": POD_UMASK, **popen})
    except OSError as exc:
        sys.stderr.write(f"phalanx: cannot open the exec channel: {exc}\n")
        return None


def kill_group_leftovers() -> None:
    """SIGKILL every other process still in this process group (children of the command)."""
    me, group = os.getpid(), os.getpgid(0)
    if group != me:
        # Not started as the plane starts a supervisor (leading a session of its own): the
        # group is whoever called us, not the pod's, and is none of ours to kill.
        return
    if not os.path.isdir("/proc"):  # no way to spare ourselves: take the whole group down
        os.killpg(group, signal.SIGKILL)
    relay = sys.modules.get("phalanx_relay") or load_by_path("phalanx_relay", RELAY)
    for _ in range(100):  # loop: a leftover may fork while we kill its siblings
        found = relay.group_members(group, spare=(me,))
        for pid in found:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if not found:
            return
        time.sleep(0.01)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: shim.py EXIT_FILE  (the pod comes as JSON on stdin)", file=sys.stderr)
        return 2
    exit_file = argv[0]
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        # A handler rather than SIG_IGN: handlers are reset in the command, SIG_IGN is inherited.
        signal.signal(sig, lambda *_: None)
    raw = sys.stdin.buffer.read()
    if not raw:  # the plane went away before handing the pod over: run nothing
        return 0
    try:
        record = run_pod(json.loads(raw))
    except Exception as exc:  # report instead of vanishing, which would read as a lost pod
        record = {"error": f"supervisor failed: {exc!r}", "errorKind": "system",
                  "finishedAt": time.time()}
    write_json_atomic(exit_file, record)
    kill_group_leftovers()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
