"""``pods/exec`` for the fake API server: a real WebSocket, and the command run for real.

The fake kubelet runs the command as a local process with the pod's container env
(what the pod spec says) and relays it on the channels of ``v5.channel.k8s.io`` (or
``v4``): 0 stdin, 1 stdout, 2 stderr, 3 the final ``Status``, 4 terminal size, and
v5's close message (255, channel) for the end of stdin.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import struct
import subprocess
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
V5, V4 = "v5.channel.k8s.io", "v4.channel.k8s.io"
OP_BINARY, OP_TEXT, OP_CLOSE, OP_PING, OP_PONG = 0x2, 0x1, 0x8, 0x9, 0xA


def _frame(opcode: int, payload: bytes) -> bytes:
    size = len(payload)
    if size < 126:
        header = struct.pack(">BB", 0x80 | opcode, size)
    elif size < 1 << 16:
        header = struct.pack(">BBH", 0x80 | opcode, 126, size)
    else:
        header = struct.pack(">BBQ", 0x80 | opcode, 127, size)
    return header + payload


def _read_frame(rfile: Any) -> tuple[int, bytes] | None:
    head = rfile.read(2)
    if len(head) < 2:
        return None
    opcode, size = head[0] & 0x0F, head[1] & 0x7F
    if size == 126:
        size = struct.unpack(">H", rfile.read(2))[0]
    elif size == 127:
        size = struct.unpack(">Q", rfile.read(8))[0]
    mask = rfile.read(4) if head[1] & 0x80 else b"\0\0\0\0"
    data = rfile.read(size)
    return opcode, bytes(b ^ mask[i % 4] for i, b in enumerate(data))


def serve_exec(handler: BaseHTTPRequestHandler, pod: dict[str, Any],
               query: dict[str, list[str]]) -> None:
    """Upgrade ``handler``'s request and run the command in ``pod`` (already running)."""
    offered = [p.strip() for p in handler.headers.get("Sec-WebSocket-Protocol", "").split(",")]
    protocol = V5 if V5 in offered else V4
    accept = base64.b64encode(hashlib.sha1(
        (handler.headers["Sec-WebSocket-Key"] + GUID).encode()).digest()).decode()
    handler.send_response(101)
    handler.send_header("Upgrade", "websocket")
    handler.send_header("Connection", "Upgrade")
    handler.send_header("Sec-WebSocket-Accept", accept)
    handler.send_header("Sec-WebSocket-Protocol", protocol)
    handler.end_headers()
    handler.wfile.flush()
    handler.close_connection = True
    send_lock = threading.Lock()

    def send(channel: int, data: bytes, opcode: int = OP_BINARY) -> None:
        with send_lock, contextlib.suppress(OSError):
            handler.wfile.write(_frame(opcode, bytes([channel]) + data if opcode != OP_CLOSE
                                       else data))
            handler.wfile.flush()

    container = pod["spec"]["containers"][0]
    env = {**os.environ, **{e["name"]: e.get("value", "") for e in container.get("env", [])}}
    tty = query.get("tty", ["false"])[-1] == "true"
    try:
        child = subprocess.Popen(query.get("command", []), env=env, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT if tty else subprocess.PIPE)
    except OSError as exc:
        status = {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                  "reason": "InternalError", "message": f"executable not found: {exc}"}
        send(3, json.dumps(status).encode())
        send(0, struct.pack(">H", 1000), OP_CLOSE)
        return

    def pump(stream: Any, channel: int) -> None:
        while chunk := stream.read1(65536):
            send(channel, chunk)

    pumps = [threading.Thread(target=pump, args=(child.stdout, 1), daemon=True)]
    if child.stderr is not None:
        pumps.append(threading.Thread(target=pump, args=(child.stderr, 2), daemon=True))
    for thread in pumps:
        thread.start()

    def read_input() -> None:
        assert child.stdin is not None
        while (frame := _read_frame(handler.rfile)) is not None:
            opcode, data = frame
            if opcode == OP_CLOSE:
                break
            if opcode not in (OP_BINARY, OP_TEXT) or not data:
                continue
            if data[0] == 0:
                with contextlib.suppress(OSError):
                    child.stdin.write(data[1:])
                    child.stdin.flush()
            elif data[0] == 255 and data[1:2] == b"\0":  # v5: stdin closed
                with contextlib.suppress(OSError):
                    child.stdin.close()

    threading.Thread(target=read_input, daemon=True).start()
    code = child.wait()
    for thread in pumps:
        thread.join()
    if code == 0:
        status: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "status": "Success"}
    else:
        status = {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                  "reason": "NonZeroExitCode",
                  "message": f"command terminated with non-zero exit code: {code}",
                  "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}
    send(3, json.dumps(status).encode())
    send(0, struct.pack(">H", 1000), OP_CLOSE)
