"""A command run on a pseudo-terminal, as a user at a shell would run it (``exec -t``)."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time
from collections.abc import Mapping, Sequence


def run_on_terminal(argv: Sequence[str], env: Mapping[str, str], typed: bytes,
                    timeout: float = 30) -> tuple[int, str]:
    """Start ``argv`` on a new terminal, type ``typed`` into it and read it until the
    command exits: (exit code, everything the terminal showed)."""
    controller, terminal = pty.openpty()
    proc = subprocess.Popen(list(argv), stdin=terminal, stdout=terminal, stderr=terminal,
                            env=dict(env), start_new_session=True)
    os.close(terminal)
    output = b""
    try:
        os.write(controller, typed)
        deadline = time.time() + timeout
        while proc.poll() is None and time.time() < deadline:
            ready, _, _ = select.select([controller], [], [], 0.1)
            if ready:
                try:
                    output += os.read(controller, 4096)
                except OSError:
                    break
        code = proc.wait(timeout=10)
    finally:
        os.close(controller)
        if proc.poll() is None:
            proc.kill()
    return code, output.decode(errors="replace")
