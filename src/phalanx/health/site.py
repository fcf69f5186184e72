"""Site checks: each executable in a directory is a check of the site's own.

The exit code is the answer (0 PASS, 1 WARN, 2 ERR) and the last line the check
printed is its message, as IBM Autopilot's health-check plugins work. A check
that cannot run, runs past its timeout or exits otherwise answers ERR, saying why.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from phalanx.health.checks import ERR, PASS, WARN, result
from phalanx.spec.resources import NodeCheck

STATUS_OF_EXIT = {0: PASS, 1: WARN, 2: ERR}
# Enough of the check's output to find its last line, however chatty it is.
TAIL_BYTES = 4096


@dataclass(frozen=True, slots=True)
class SiteCheck:
    path: Path
    timeout: float = 60.0

    @property
    def name(self) -> str:
        return f"site/{self.path.name}"

    def run(self) -> NodeCheck:
        try:
            done = subprocess.run(
                [str(self.path)], stdin=subprocess.DEVNULL, capture_output=True,
                timeout=self.timeout, check=False,
            )
        except subprocess.TimeoutExpired:
            return result(self.name, ERR, f"timed out after {self.timeout:g}s",
                          timeout_seconds=self.timeout)
        except OSError as exc:
            return result(self.name, ERR, f"cannot run {self.path}: {exc.strerror or exc}")
        lines = done.stdout[-TAIL_BYTES:].decode(errors="replace").strip().splitlines()
        message = lines[-1].strip() if lines else ""
        status = STATUS_OF_EXIT.get(done.returncode)
        if status is None:
            why = f"killed by signal {-done.returncode}" if done.returncode < 0 else \
                f"exited with {done.returncode} (0, 1 or 2 expected)"
            err = done.stderr[-TAIL_BYTES:].decode(errors="replace").strip().splitlines()
            detail = message or (err[-1].strip() if err else "")
            return result(self.name, ERR, why + (f": {detail}" if detail else ""),
                          exit_code=done.returncode)
        return result(self.name, status, message or f"exited with {done.returncode}",
                      exit_code=done.returncode)


def site_checks(directory: Path | None, timeout: float = 60.0) -> list[SiteCheck]:
    """One check per regular file in ``directory``, by name (none when there is no directory).

    Files that are not executable are still checks: they answer ERR, so a check that lost
    its mode bit is noticed rather than skipped.
    """
    if directory is None or not directory.is_dir():
        return []
    return [SiteCheck(path, timeout) for path in sorted(directory.iterdir())
            if path.is_file() and not path.name.startswith(".")]
