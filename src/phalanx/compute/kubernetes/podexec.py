"""``pods/exec`` as a ``phalanx exec`` session: the API server runs the command in the pod.

The official client opens the WebSocket (``v5.channel.k8s.io``, else ``v4``): each
message's first byte is its channel (0 stdin, 1 stdout, 2 stderr, 3 the final
status, 4 terminal size). This adapter turns those into ``phalanx.relay``
frames, which the control plane's exec route forwards unchanged. Closing stdin needs
``v5`` (an API server older than Kubernetes 1.30 never sees the input end).
"""

from __future__ import annotations

import contextlib
import json
from collections import deque
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from kubernetes.stream import stream
from kubernetes.stream.ws_client import (
    ERROR_CHANNEL,
    RESIZE_CHANNEL,
    STDERR_CHANNEL,
    STDIN_CHANNEL,
    STDOUT_CHANNEL,
)

from phalanx import relay
from phalanx.compute.kubernetes.objects import CONTAINER
from phalanx.errors import Forbidden, NotFound

POLL_SECONDS = 1.0



def open_pod_exec(api: k8s.ApiClient, namespace: str, pod: str, argv: list[str], *,
                  tty: bool, cols: int, rows: int) -> PodExecSession:
    try:
        ws = stream(
            k8s.CoreV1Api(api).connect_get_namespaced_pod_exec, pod, namespace,
            command=argv, container=CONTAINER, stdin=True, stdout=True, stderr=not tty,
            tty=tty, _preload_content=False, binary=True,
        )
    except ApiException as exc:
        reason = str(exc.reason or exc)
        if "403" in reason:
            raise Forbidden(f"the cluster refused to exec into pod {pod}: {reason}",
                            field="pod", fix="grant the control plane pods/exec in the runs "
                            "namespace (worker.enableRunInteractivity)") from None
        raise NotFound(f"cannot exec into pod {pod}: {reason}", field="pod",
                       fix="wait until the pod runs (phalanx describe)") from None
    session = PodExecSession(ws)
    if tty:
        session.resize(cols, rows)
    return session


class PodExecSession:
    """One ``pods/exec`` WebSocket, spoken to in relay frames (``ComputePlane.exec``)."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self._ready: deque[bytes] = deque()
        self._ended = False

    def resize(self, cols: int, rows: int) -> None:
        self.ws.write_channel(RESIZE_CHANNEL, json.dumps({"Width": cols, "Height": rows}).encode())

    def send(self, frame: bytes) -> None:
        kind, payload = relay.split_frame(frame)
        if kind not in (relay.STDIN, relay.RESIZE):
            raise relay.RelayError(f"a client may send input or a terminal size, not {kind!r}")
        try:
            self._write(kind, payload)
        except (relay.RelayError, ValueError, KeyError):
            raise
        except Exception as exc:  # the WebSocket closed: the command has ended
            raise OSError(f"the pod's exec stream has ended: {exc}") from exc

    def _write(self, kind: bytes, payload: bytes) -> None:
        if kind == relay.STDIN and payload:
            self.ws.write_channel(STDIN_CHANNEL, payload)
        elif kind == relay.STDIN:
            self.ws.close_channel(STDIN_CHANNEL)
        else:
            size = json.loads(payload)
            self.resize(int(size["cols"]), int(size["rows"]))

    def receive(self) -> bytes | None:
        while not self._ready:
            if self._ended:
                return None
            if not self.ws.is_open():
                self._ended = True
                self._ready.append(relay.pack(relay.EXIT, json.dumps(self._exit()).encode()))
                break
            self.ws.update(timeout=POLL_SECONDS)
            for channel, kind in ((STDOUT_CHANNEL, relay.STDOUT), (STDERR_CHANNEL, relay.STDERR)):
                data = self.ws.read_channel(channel)
                if data:
                    self._ready.append(relay.pack(kind, data))
        return self._ready.popleft()

    def _exit(self) -> dict[str, Any]:
        """The exit record from the status on channel 3 (a ``metav1.Status``)."""
        raw = self.ws.read_channel(ERROR_CHANNEL)
        try:
            status = json.loads(raw) if raw else {}
        except ValueError:
            status = {}
        if status.get("status") == "Success":
            return {"exitCode": 0}
        for cause in (status.get("details") or {}).get("causes") or []:
            if cause.get("reason") == "ExitCode":
                with contextlib.suppress(ValueError, TypeError):
                    return {"exitCode": int(cause.get("message"))}
        message = status.get("message") or "the pod's command ended without a status"
        return {"error": message, "exitCode": relay.EXIT_NOT_EXECUTABLE}

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.ws.close()
