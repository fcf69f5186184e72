"""Submits from many threads share transactions (group commit): each caller returns only
once its own job is committed, and a job that cannot be stored fails alone, with its own
error, while the jobs it shared a transaction with are stored."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

from phalanx.errors import Conflict
from phalanx.store import Store
from phalanx.store.groupcommit import GroupCommit
from tests.store.factories import make_event, make_record
from tests.store.test_concurrency import run_threads

THREADS = 16


def test_concurrent_submits_all_stored_and_a_taken_name_fails_alone(db_url: str) -> None:
    with Store(db_url) as store:
        store.create_job(make_record("taken"), make_event("taken", 1.0))
        acknowledged: list[str] = []
        lock = threading.Lock()

        def submitter(index: int) -> None:
            for n in range(10):
                # Every thread also tries the taken name once, in the middle of its run.
                name = "taken" if n == 5 else f"g{index}-{n}"
                store.create_job(make_record(name), make_event(name, 2.0))
                with lock:
                    acknowledged.append(name)

        errors = run_threads(submitter, THREADS)
    assert len(errors) == THREADS  # each thread stopped at its own taken name
    assert all(isinstance(e, Conflict) and e.field == "name" for e in errors)
    with Store(db_url) as reopened:  # what was acknowledged is stored, from a new connection
        stored = {r.name for r in reopened.list_jobs()}
        assert set(acknowledged) <= stored
        assert len(acknowledged) == THREADS * 5
        assert stored == {"taken", *acknowledged}
        assert all(reopened.list_events(name) for name in acknowledged)


class ListTransactions:
    """Transactions over a list: what one wrote is kept only if it ends without error. The
    first waits for ``gate``, so writes queue behind it. The item "bad" cannot be written."""

    def __init__(self) -> None:
        self.committed: list[str] = []
        self.transactions = 0
        self.gate = threading.Event()

    @contextmanager
    def transaction(self) -> Iterator[list[str]]:
        self.transactions += 1
        assert self.gate.wait(30)
        pending: list[str] = []
        yield pending
        self.committed.extend(pending)

    @staticmethod
    def write_all(pending: list[str], items: list[str]) -> None:
        for item in items:
            if item == "bad":
                raise ValueError("bad cannot be written")
            pending.append(item)

    def alone(self, item: str) -> None:
        with self.transaction() as pending:
            self.write_all(pending, [item])


def queue_behind_a_transaction(items: list[str]) -> tuple[ListTransactions, dict[str, str]]:
    """A write leads a transaction held open; one thread per item queues behind it, then
    the transaction is let go. The transactions, and each item's outcome."""
    log = ListTransactions()
    transaction: Callable[[], AbstractContextManager[list[str]]] = log.transaction
    group: GroupCommit[list[str], str] = GroupCommit(transaction, log.write_all, log.alone)
    outcome: dict[str, str] = {}

    def write(item: str) -> None:
        try:
            group.run(item)
            outcome[item] = "committed"
        except ValueError as exc:
            outcome[item] = str(exc)

    first = threading.Thread(target=write, args=("first",))
    first.start()
    while log.transactions == 0:  # the first leads, and waits at the gate
        threading.Event().wait(0.01)
    writers = [threading.Thread(target=write, args=(item,)) for item in items]
    for thread in writers:
        thread.start()
    while group.queued < len(items):
        threading.Event().wait(0.01)
    log.gate.set()
    for thread in [first, *writers]:
        thread.join(30)
    assert not any(t.is_alive() for t in [first, *writers])
    return log, outcome


def test_writes_queued_behind_a_transaction_share_the_next_one() -> None:
    items = [f"w{i}" for i in range(THREADS)]
    log, outcome = queue_behind_a_transaction(items)
    assert log.transactions == 2  # the first's, then one for all that queued behind it
    assert sorted(log.committed) == sorted(["first", *items])
    assert set(outcome.values()) == {"committed"}


def test_a_bad_write_fails_alone_and_the_others_of_its_transaction_commit() -> None:
    items = [f"w{i}" for i in range(THREADS)]
    log, outcome = queue_behind_a_transaction([*items[:3], "bad", *items[3:]])
    assert outcome.pop("bad") == "bad cannot be written"
    assert set(outcome.values()) == {"committed"}
    # The shared transaction kept nothing; each of its writes then ran alone, once.
    assert sorted(log.committed) == sorted(["first", *items])
    assert log.transactions == 2 + THREADS + 1
