"""List-then-watch of one kind of object, in a background thread.

The informer pattern: list (the full state and a resourceVersion), then watch
from that version; a watch that ends (server timeout, dropped connection) is
resumed from the last version seen; a 410 Gone (the version is older than the
server keeps) means a fresh list, after which the consumer replaces what it
knows. Bookmarks keep the version fresh on quiet watches.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Callable
from typing import Any

import urllib3

from phalanx.compute.kubernetes.client import KubeClient, KubeError, Object

log = logging.getLogger("phalanx.compute.kubernetes")

OnList = Callable[[list[Object], str], None]  # items, and the list's resourceVersion
OnEvent = Callable[[str, Object], None]


class Gone(Exception):
    """The watch's resourceVersion is too old: relist."""


class Informer:
    """Keeps a consumer up to date with the objects at ``path`` that match the selectors."""

    def __init__(
        self,
        client: KubeClient,
        path: str,
        *,
        on_list: OnList,
        on_event: OnEvent,
        label_selector: str | None = None,
        field_selector: str | None = None,
        name: str = "informer",
        watch_seconds: int = 300,
        read_timeout: float = 60.0,
    ) -> None:
        self.client = client
        self.path = path
        self.on_list = on_list
        self.on_event = on_event
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.name = name
        self.watch_seconds = watch_seconds
        self.read_timeout = read_timeout
        self.synced = threading.Event()  # the first list has been delivered
        self.lists = 0  # how many times it listed (the first, then one per 410 or error)
        self._stop = threading.Event()
        self._response: urllib3.BaseHTTPResponse | None = None
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.error: KubeError | None = None  # the last error that stopped a list

    def start(self) -> Informer:
        self._thread = threading.Thread(target=self._run, name=f"phalanx-k8s-{self.name}",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            response = self._response
        if response is not None:  # unblock a read waiting on a quiet watch
            with contextlib.suppress(Exception):  # closing is best effort
                response.shutdown()
        if self._thread is not None:
            self._thread.join(timeout=10)

    # ------------------------------------------------------------------ the loop
    def _run(self) -> None:
        failures = 0
        version: str | None = None
        while not self._stop.is_set():
            try:
                if version is None:
                    version = self._list()
                version = self._watch(version)
                failures = 0
            except Gone:
                log.info("%s: resourceVersion %s is too old; relisting", self.name, version)
                version = None
            except KubeError as exc:
                if exc.status == 410:  # answered as a status rather than as a watch event
                    version = None
                    continue
                self.error = exc
                if exc.status in (401, 403, 404):
                    log.warning("%s: %s", self.name, exc)
                else:
                    log.info("%s: %s", self.name, exc)
                failures += 1
                version = None
                self._stop.wait(min(10.0, 0.2 * 2 ** min(failures, 6)))
            except Exception:  # keep watching; the next list repairs any missed change
                if self._stop.is_set():
                    return
                log.exception("%s: watch failed", self.name)
                failures += 1
                self._stop.wait(min(10.0, 0.2 * 2 ** min(failures, 6)))

    def _list(self) -> str:
        answer = self.client.request("GET", self.path, query={
            "labelSelector": self.label_selector, "fieldSelector": self.field_selector,
        })
        self.lists += 1
        self.error = None
        version = str(answer.get("metadata", {}).get("resourceVersion") or "0")
        self.on_list(list(answer.get("items") or []), version)
        self.synced.set()
        return version

    def _watch(self, version: str) -> str:
        """Deliver events from ``version`` until the watch ends; the last version seen."""
        response = self.client.open_stream(self.path, {
            "watch": True, "resourceVersion": version, "allowWatchBookmarks": True,
            "timeoutSeconds": self.watch_seconds, "labelSelector": self.label_selector,
            "fieldSelector": self.field_selector,
        }, read_timeout=self.read_timeout)
        with self._lock:
            self._response = response
        if self._stop.is_set():  # stopped while the request was on its way
            with contextlib.suppress(Exception):
                response.shutdown()
        try:
            for line in self.client.iter_lines(response):
                if self._stop.is_set():
                    break
                event: dict[str, Any] = json.loads(line)
                kind = event.get("type")
                obj = event.get("object") or {}
                if kind == "ERROR":
                    code = int(obj.get("code") or 0)
                    if code == 410:
                        raise Gone()
                    raise KubeError(code, str(obj.get("reason") or "Error"),
                                    str(obj.get("message") or ""))
                new = obj.get("metadata", {}).get("resourceVersion")
                if new:
                    version = str(new)
                if kind in ("ADDED", "MODIFIED", "DELETED"):
                    self.on_event(str(kind), obj)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            if not self._stop.is_set():
                log.debug("%s: watch ended: %s", self.name, exc)
        finally:
            with self._lock:
                self._response = None
            response.release_conn()
            response.close()
        return version
