"""Which node each recent change of free capacity was on, so that tables kept per version
(a signature's room per topology domain) are brought up to date instead of rebuilt."""

from __future__ import annotations

# Version changes remembered, and the most worth replaying: beyond that, rebuilding a table
# costs less than walking the changes.
LOG_KEPT = 4096
REPLAY_LIMIT = 256


class ChangeLog:
    __slots__ = ("_base", "_log", "version")

    def __init__(self) -> None:
        self.version = 0  # bumped whenever free capacity or the node set changes
        # ``_log[i]`` is the node whose change made version ``_base + i + 1`` ("" for a
        # change of the node set).
        self._log: list[str] = []
        self._base = 0

    def bump(self, node: str) -> None:
        self.version += 1
        log = self._log
        log.append(node)
        if len(log) > 2 * LOG_KEPT:
            del log[:LOG_KEPT]
            self._base += LOG_KEPT

    def changed_since(self, version: int) -> set[str] | None:
        """The nodes whose free capacity changed after ``version``; None when the node set
        changed too, or the changes are too many (or too old) to be worth replaying."""
        start = version - self._base
        if start < 0 or self.version - version > REPLAY_LIMIT:
            return None
        changed = set(self._log[start:])
        return None if "" in changed else changed
