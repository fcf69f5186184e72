"""The queue configuration in the store."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from phalanx.spec import QueueConfig, parse_config_documents
from phalanx.store import Store
from phalanx.store.tables import queue_config

DOCUMENTS: list[dict[str, Any]] = [
    {"kind": "ResourceFlavor", "name": "h100", "nodeLabels": {"gpu": "h100"},
     "nodeTaints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]},
    {"kind": "Cohort", "name": "research"},
    {"kind": "ClusterQueue", "name": "team-a", "cohort": "research",
     "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
     "resourceGroups": [{"coveredResources": ["cpu", "nvidia.com/gpu"], "flavors": [
         {"name": "h100", "resources": [
             {"name": "cpu", "nominalQuota": "64"},
             {"name": "nvidia.com/gpu", "nominalQuota": 16, "borrowingLimit": 8,
              "lendingLimit": 4}]}]}]},
    {"kind": "LocalQueue", "name": "default", "clusterQueue": "team-a"},
    {"kind": "LocalQueue", "name": "urgent", "clusterQueue": "team-a"},
    {"kind": "PriorityClass", "name": "critical", "value": 10000},
]


def config(documents: list[dict[str, Any]]) -> QueueConfig:
    return QueueConfig().merged(parse_config_documents(documents))


def revision(store: Store) -> int:
    with store.engine.connect() as connection:
        return int(connection.execute(select(queue_config.c.revision)).scalar_one())


def test_nothing_saved_loads_as_none(store: Store) -> None:
    assert store.load_config() is None


def test_config_round_trips(store: Store) -> None:
    saved = config(DOCUMENTS)

    store.save_config(saved)

    loaded = store.load_config()
    assert loaded == saved
    assert loaded is not None and loaded.cluster_queues["team-a"].cohort == "research"
    assert loaded.priority_value("critical") == 10000


def test_saving_replaces_the_whole_config(store: Store) -> None:
    store.save_config(config(DOCUMENTS))
    smaller = config([d for d in DOCUMENTS if d.get("name") != "urgent"])

    store.save_config(smaller)

    loaded = store.load_config()
    assert loaded == smaller
    assert loaded is not None and sorted(loaded.local_queues) == ["default"]
    assert revision(store) == 2


def test_config_survives_reopening(db_url: str) -> None:
    saved = config(DOCUMENTS)
    with Store(db_url) as store:
        store.save_config(saved)
    with Store(db_url) as store:
        assert store.load_config() == saved
