"""Copying pods' container logs into the control plane's LogStore while they run.

One thread per pod follows ``pods/<name>/log?follow=true`` and appends what
arrives to ``<logs>/<job>/<pod>.log``, the file the local plane writes, so
``phalanx logs -f`` reads the same way on every plane and the log outlives the
pod. How many bytes of each pod's log are already copied is kept in a small
file beside, so a stream that drops, or a control plane that restarts, resumes
without writing anything twice (the container log of a pod that never
restarts only grows).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import urllib3

from phalanx.compute.kubernetes.client import KubeClient, KubeError, iter_chunks
from phalanx.compute.kubernetes.objects import CONTAINER
from phalanx.store.logs import LogStore

log = logging.getLogger("phalanx.compute.kubernetes")


@dataclass(slots=True)
class _Follower:
    thread: threading.Thread
    stop: threading.Event
    response: urllib3.BaseHTTPResponse | None = None

    def halt(self) -> None:
        self.stop.set()
        response = self.response
        if response is not None:  # unblock a read waiting on a quiet container
            with contextlib.suppress(Exception):
                response.shutdown()


class LogCopier:
    def __init__(
        self, client: KubeClient, namespace: str, logs: LogStore, offsets: Path,
        *, read_timeout: float = 600.0, retry_seconds: float = 0.5,
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.logs = logs
        self.offsets = offsets
        self.offsets.mkdir(parents=True, exist_ok=True)
        self.read_timeout = read_timeout
        self.retry_seconds = retry_seconds
        self._followers: dict[str, _Follower] = {}
        self._lock = threading.Lock()
        self._closed = threading.Event()

    def follow(self, pod: str, job: str, log_name: str, finished: Callable[[], bool]) -> None:
        """Copy pod ``pod``'s log into the job's ``log_name`` until ``finished()`` (idempotent)."""
        with self._lock:
            if pod in self._followers or self._closed.is_set():
                return
            stop = threading.Event()
            thread = threading.Thread(
                target=self._copy, args=(pod, job, log_name, finished),
                name=f"phalanx-k8s-log-{pod}", daemon=True,
            )
            self._followers[pod] = _Follower(thread, stop)
        thread.start()

    def following(self, pod: str) -> bool:
        with self._lock:
            return pod in self._followers

    def forget(self, pod: str) -> None:
        """Stop copying ``pod`` (if still at it) and drop its offset."""
        with self._lock:
            follower = self._followers.pop(pod, None)
        if follower is not None:
            follower.halt()
        with contextlib.suppress(FileNotFoundError):
            self._offset_file(pod).unlink()

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            followers = list(self._followers.values())
        for follower in followers:
            follower.halt()
        for follower in followers:
            follower.thread.join(timeout=2)

    # ------------------------------------------------------------------ one pod
    def _offset_file(self, pod: str) -> Path:
        return self.offsets / f"{pod}.offset"

    def _copy(self, pod: str, job: str, log_name: str, finished: Callable[[], bool]) -> None:
        with self._lock:
            follower = self._followers.get(pod)
        if follower is None:  # forgotten before its thread started
            return
        stop = follower.stop
        path = f"/api/v1/namespaces/{self.namespace}/pods/{pod}/log"
        offset = self._load_offset(pod)
        while not stop.is_set() and not self._closed.is_set():
            done = finished()  # read before the stream: a log read after the end is complete
            try:
                response = self.client.open_stream(
                    path, {"container": CONTAINER, "follow": True},
                    read_timeout=self.read_timeout,
                )
            except KubeError as exc:
                if exc.status == 404 or (done and exc.status == 400):
                    return  # the pod is gone (its log with it), or never started
                stop.wait(self.retry_seconds)  # 400: the container has not started yet
                continue
            follower.response = response
            if stop.is_set():
                follower.halt()
            seen = 0
            try:
                for chunk in iter_chunks(response):
                    if stop.is_set():
                        return
                    start = seen
                    seen += len(chunk)
                    if seen <= offset:
                        continue
                    self.logs.append(job, log_name, chunk[max(0, offset - start):])
                    offset = seen
                    self._save_offset(pod, offset)
            except Exception as exc:  # a dropped stream resumes at its offset
                log.debug("log stream of %s ended: %s", pod, exc)
            finally:
                follower.response = None
                response.release_conn()
                response.close()
            if done:
                return
            stop.wait(self.retry_seconds)

    def _load_offset(self, pod: str) -> int:
        try:
            return int(self._offset_file(pod).read_text().strip() or 0)
        except (FileNotFoundError, ValueError):
            return 0

    def _save_offset(self, pod: str, offset: int) -> None:
        path = self._offset_file(pod)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(str(offset))
        tmp.replace(path)
