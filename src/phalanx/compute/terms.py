"""The newest leader's term acted on, kept on disk: a command of an older term is refused.

Replicas of the control plane lead one after another under increasing terms (the store's
lease, ``store/leases.py``). A replica that led, was paused or cut off, and acts once
resumed, before it finds another leads, may send a command of its old term: a start the new
leader did not ask for would run ranks twice, a stop would kill what the new leader runs.
So whoever carries out commands keeps the highest term it has acted on and refuses an
older one: a remote worker (``worker/agent.py``), the local plane in each replica, and the
local plane's pod supervisors (``local/shim.py``, which loads this file by path: standard
library only).

Several processes share one gate (the replicas' local planes and every supervisor on one
state directory), and any of them may be frozen at any instant (``SIGSTOP``), so the gate
takes no lock: each term acted on is a file of its own in the gate's directory, made with
``O_EXCL``, and the newest term is the highest name there. Terms only grow: two replicas
raising it at once both leave their file, and the higher wins. Files of terms well below the
newest are pruned.
"""

from __future__ import annotations

import contextlib
import os

# Files of older terms kept (beyond the newest), so that pruning never races a reader
# into seeing no file at all.
KEEP_TERMS = 8


class TermGate:
    """The highest leader's term acted on through ``path`` (a directory, made on first use)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._migrate()

    @property
    def term(self) -> int:
        """The newest term acted on (0: none yet)."""
        try:
            names = os.listdir(self.path)
        except FileNotFoundError:
            return 0
        return max((int(n) for n in names if n.isdigit()), default=0)

    def admits(self, term: int | None) -> bool:
        """Whether a command of ``term`` may be acted on; a newer term is kept (None: a lone
        control plane, which has no terms)."""
        if term is None:
            return True
        newest = self.term
        if term < newest:
            return False
        if term > newest:
            self._record(term)
        return True

    def refusal(self, term: int | None, what: str) -> str | None:
        """Why ``what`` of ``term`` is refused, or None if it may be done (and ``term`` is kept)."""
        if self.admits(term):
            return None
        return (f"{what} refused: it comes from a leader of term {term}, and a leader of term "
                f"{self.term} has acted since (the replica that sent it no longer leads)")

    def _record(self, term: int) -> None:
        os.makedirs(self.path, mode=0o700, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            os.close(os.open(os.path.join(self.path, str(term)),
                             os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        for name in os.listdir(self.path):
            if name.isdigit() and int(name) < term - KEEP_TERMS:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(self.path, name))

    def _migrate(self) -> None:
        """A gate kept as one file holding the term (a worker's state directory before
        terms had a directory) becomes a directory holding that term."""
        if not os.path.isfile(self.path):
            return
        try:
            with open(self.path, encoding="utf-8") as f:
                text = f.read().strip()
            old = int(text or 0)
        except (OSError, ValueError):
            old = 0
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        if old:
            self._record(old)
        else:
            os.makedirs(self.path, mode=0o700, exist_ok=True)
