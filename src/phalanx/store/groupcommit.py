"""Group commit: writes that arrive together share one transaction, and each caller returns
only once the transaction holding its write has committed.

Many clients submitting one job each would otherwise pay a transaction each: the write
lock, BEGIN, the fence check of a replica, and a COMMIT that on PostgreSQL waits for the
disk. Here the first caller to find no transaction under way becomes the leader: it takes
every write queued so far, runs them in one transaction and commits it, then wakes their
callers; writes that arrive meanwhile queue for the next leader, one of their own callers.
An idle store adds no wait: a lone write is led by its own caller at once.

A write that fails (a job's name taken) must not undo the others it shares the
transaction with, and must get its own error: when a shared transaction fails, nothing of
it was committed, and each of its writes is run again alone, in a transaction of its own,
so each caller gets exactly the outcome it would have had alone. Nothing is acknowledged
before the commit that holds it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Generic, TypeVar

Connection = TypeVar("Connection")
Item = TypeVar("Item")


@dataclass(slots=True)
class _Write(Generic[Item]):
    item: Item
    done: bool = False  # its transaction ended, committed or not
    committed: bool = False
    error: BaseException | None = None


class GroupCommit(Generic[Connection, Item]):
    """Writes items in shared transactions of ``transaction()``, ``write_all(connection,
    items)`` writing the items of one; ``alone(item)`` is how an item is written when its
    shared transaction failed (in a transaction of its own, a failure its caller's error)."""

    def __init__(self, transaction: Callable[[], AbstractContextManager[Connection]],
                 write_all: Callable[[Connection, list[Item]], None],
                 alone: Callable[[Item], None], max_batch: int = 256) -> None:
        self._transaction = transaction
        self._write_all = write_all
        self._alone = alone
        self._max_batch = max_batch
        self._changed = threading.Condition()
        self._queued: list[_Write[Item]] = []
        self._leading = False

    @property
    def queued(self) -> int:
        """Writes waiting for the next transaction."""
        with self._changed:
            return len(self._queued)

    def run(self, item: Item) -> None:
        """Write ``item`` in the next shared transaction; return once that committed (or
        raise the item's own error, nothing of it stored)."""
        write = _Write(item)
        with self._changed:
            self._queued.append(write)
        while True:
            with self._changed:
                while self._leading and not write.done:
                    self._changed.wait()
                if write.done:
                    break
                self._leading = True  # no transaction under way: lead one
            self._lead()
        if write.error is not None:
            raise write.error
        assert write.committed

    def _lead(self) -> None:
        """Commit one batch (the queued writes, this leader's among them), then let a
        waiting caller lead the next: no caller's answer waits for writes after its own."""
        with self._changed:
            batch = self._queued[:self._max_batch]
            del self._queued[:len(batch)]
        try:
            self._commit(batch)
        except BaseException as exc:  # interrupted: what was not committed fails
            for write in batch:
                if not write.committed and write.error is None:
                    write.error = exc
            raise
        finally:
            with self._changed:
                for write in batch:
                    write.done = True
                self._leading = False
                self._changed.notify_all()

    def _commit(self, batch: list[_Write[Item]]) -> None:
        if len(batch) > 1:
            try:
                with self._transaction() as connection:
                    self._write_all(connection, [write.item for write in batch])
            except Exception:  # nothing of the batch was committed: each alone, below
                pass
            else:
                for write in batch:
                    write.committed = True
                return
        for write in batch:
            try:
                self._alone(write.item)
            except Exception as exc:  # the caller's own error, raised in its thread
                write.error = exc
            else:
                write.committed = True
