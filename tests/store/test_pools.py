"""Node pools in the store: intents, phases, history per job (store/pools.py)."""

from __future__ import annotations

from phalanx.store import Store
from phalanx.store.pools import PoolPhase, PoolRecord, PoolStore


def record(name: str, job: str, attempt: int, state: PoolPhase = PoolPhase.INTENT
           ) -> PoolRecord:
    return PoolRecord(name=name, job=job, attempt=attempt, flavor="burst", provider="local",
                      config_hash="abc", state=state, node_count=4, price_per_node_hour=1.5,
                      created_at=float(attempt), updated_at=float(attempt),
                      request={"name": name, "nodeCount": 4})


def test_pools_move_through_their_phases_and_stay_as_history(store: Store) -> None:
    pools = PoolStore(store)
    first = record("train-1", "train", 1)
    pools.insert(first)
    pools.insert(record("other-1", "other", 1, PoolPhase.READY))
    assert [r.name for r in pools.live()] == ["other-1", "train-1"]  # oldest, then by name
    first.state, first.error_kind, first.message = PoolPhase.DELETED, "Stockout", "none left"
    pools.save(first)
    pools.insert(record("train-2", "train", 2, PoolPhase.CREATING))
    assert {r.name for r in pools.live()} == {"other-1", "train-2"}
    history = pools.of_job("train")
    assert [(r.name, r.state, r.error_kind) for r in history] == [
        ("train-1", PoolPhase.DELETED, "Stockout"), ("train-2", PoolPhase.CREATING, "")]
    assert history[1].request == {"name": "train-2", "nodeCount": 4}
    assert history[1].cost_per_hour == 6.0
    assert pools.last_attempt("train") == 2 and pools.last_attempt("nobody") == 0
    got = pools.get("train-1")
    assert got is not None and got.message == "none left"
    assert pools.forget_job("train") == 1  # the deleted one only
    assert [r.name for r in pools.of_job("train")] == ["train-2"]
