"""Provisioning's rules (provisioning/rules.py), one row per rule: the control plane's
controller and the simulator's autoscaler both decide by them."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from phalanx.provisioning.base import (
    ConfigurationError,
    ProvisioningTimeout,
    Stockout,
    TransientError,
)
from phalanx.provisioning.rules import (
    FailureDecision,
    IdlePool,
    OwnerGone,
    PoolUsage,
    ProvisioningSettings,
    Retention,
    creation_refusal,
    failure_decision,
    idle_expired,
    over_limit,
    owner_gone,
    pool_request,
    retention,
    reuse_order,
    timed_out,
)
from phalanx.scheduler.provisioning import PodSetNeed, ProvisioningNeed
from phalanx.spec.config import QueueConfig, load_config_yaml
from phalanx.spec.provisioning import POOL_LABEL, RESERVED_FOR, ProvisioningPolicy

CONFIG = """
kind: ResourceFlavor
name: burst
nodeLabels: {pool: burst}
nodeTaints: [{key: spot, value: "yes", effect: NoSchedule}]
provisioning:
  provider: local
  node: {cpu: "4"}
  maxPools: 2
  maxNodes: 3
  maxSpendPerHour: 10
  pricePerNodeHour: 2
---
kind: ResourceFlavor
name: spare
nodeLabels: {pool: spare}
provisioning: {provider: local, node: {cpu: "4"}}
---
kind: ProvisioningPolicy
name: default
maxNodes: 5
createPools: false
"""

S = ProvisioningSettings()  # stockout block 300 s, backoff 60 s doubling, 3 tries, check 30 s
NEED = ProvisioningNeed("train", "team", "burst", (PodSetNeed("worker", 2, {"cpu": 4000}, 2),))


def config() -> QueueConfig:
    return QueueConfig().merged(load_config_yaml(CONFIG))


def request() -> Any:
    return pool_request(config(), NEED, 3)


def failure(error: Exception, tries: int = 0) -> FailureDecision:
    assert isinstance(error, Stockout | ConfigurationError | TransientError
                      | ProvisioningTimeout)
    return failure_decision(error, "pool p failed", 1000.0, S, transient_tries=tries)


def limit(flavor: PoolUsage, every: PoolUsage = PoolUsage()) -> str:
    return over_limit(request(), config(), flavor, every)


ROWS: list[tuple[str, Callable[[], object], object]] = [
    # requesting a pool
    ("the pool is named <job>-<attempt>", lambda: request().name, "train-3"),
    ("it is sized by the need", lambda: request().node_count, 2),
    ("its nodes carry the flavor's labels, the reservation and the pool's",
     lambda: request().node_labels, {"pool": "burst", RESERVED_FOR: "train",
                                     POOL_LABEL: "train-3"}),
    ("its nodes carry the flavor's taints and the reservation's",
     lambda: request().node_taints, (("spot", "yes", "NoSchedule"),
                                     (RESERVED_FOR, "train", "NoSchedule"))),
    ("its pod sets select the flavor's nodes",
     lambda: request().pod_sets[0].node_selector, {"pool": "burst"}),
    ("a simulator plays any provider as its own",
     lambda: pool_request(config(), NEED, 1, "simulated").provider, "simulated"),
    ("the hash ignores whom the pool is for",
     lambda: pool_request(config(), NEED, 1).config_hash == pool_request(
         config(), ProvisioningNeed("other", "team", "burst", NEED.pod_sets), 2).config_hash,
     True),
    ("createPools false refuses new pools",
     lambda: creation_refusal(config().provisioning_policy),
     "no new node pool is created now (ProvisioningPolicy createPools: false)"),
    ("createPools true refuses nothing",
     lambda: creation_refusal(ProvisioningPolicy()), ""),
    # limits
    ("within every limit", lambda: limit(PoolUsage(1, 1, 2.0)), ""),
    ("the flavor's maxPools", lambda: limit(PoolUsage(2, 0, 0.0)),
     "waits: 2 node pool(s) exist for flavor burst, whose maxPools is 2"),
    ("the flavor's maxNodes", lambda: limit(PoolUsage(1, 2, 0.0)),
     "waits: 2 more node(s) would take flavor burst over its maxNodes (2 of 3 in use)"),
    ("the flavor's maxSpendPerHour", lambda: limit(PoolUsage(1, 0, 7.0)),
     "waits: 4/h more would take flavor burst over its maxSpendPerHour (7 of 10 spent per "
     "hour)"),
    ("the policy's maxNodes over every flavor",
     lambda: limit(PoolUsage(), PoolUsage(3, 4, 0.0)),
     "waits: 2 more node(s) would take all flavors (ProvisioningPolicy) over its maxNodes "
     "(4 of 5 in use)"),
    ("usage adds up live pools", lambda: PoolUsage.of([(2, 4.0), (1, 1.5)]),
     PoolUsage(2, 3, 5.5)),
    # failures
    ("a stockout blocks the flavor for every job",
     lambda: failure(Stockout("none left")),
     FailureDecision("pool p failed", until=1300.0, every_job=True)),
    ("a configuration error fails the job, never retried",
     lambda: failure(ConfigurationError("bad machine")),
     FailureDecision("pool p failed; the provider refused the request, which is not retried",
                     fail_job=True)),
    ("a transient error retries the same place after the backoff",
     lambda: failure(TransientError("hiccup"), tries=2),
     FailureDecision("pool p failed; retrying in 120s (try 3 of 3)", until=1120.0,
                     every_flavor=True)),
    ("transient errors past max tries go to the next flavor",
     lambda: failure(TransientError("hiccup"), tries=3),
     FailureDecision("pool p failed (3 tries; trying the next flavor)", until=1300.0)),
    ("the backoff has jitter when given a generator",
     lambda: 54.0 <= failure_decision(TransientError("x"), "", 0.0, S, transient_tries=1,
                                      rng=random.Random(1)).until <= 66.0, True),
    ("a timeout blocks the flavor for the job",
     lambda: failure(ProvisioningTimeout("slow")), FailureDecision("pool p failed",
                                                                   until=1300.0)),
    ("a pool not Ready past its timeout timed out", lambda: timed_out(0.0, 901.0, 900.0, False),
     True),
    ("a Ready pool never times out", lambda: timed_out(0.0, 901.0, 900.0, True), False),
    ("at its timeout it has not yet", lambda: timed_out(0.0, 900.0, 900.0, False), False),
    # an ended job's pool
    ("the deletion check passes a first time",
     lambda: owner_gone(None, 100.0, S, ready=True, idle_ttl=0.0), OwnerGone.FIRST_CHECK),
    ("it waits for the second check",
     lambda: owner_gone(100.0, 129.0, S, ready=True, idle_ttl=60.0), OwnerGone.WAIT),
    ("a Ready pool with an idle TTL is kept",
     lambda: owner_gone(100.0, 130.0, S, ready=True, idle_ttl=60.0), OwnerGone.KEEP_IDLE),
    ("a pool not Ready is deleted despite a TTL",
     lambda: owner_gone(100.0, 130.0, S, ready=False, idle_ttl=60.0), OwnerGone.DELETE),
    ("a pool without a TTL is deleted",
     lambda: owner_gone(100.0, 130.0, S, ready=True, idle_ttl=0.0), OwnerGone.DELETE),
    ("an idle pool lives out its TTL", lambda: idle_expired(130.0, 189.0, 60.0), False),
    ("then it is deleted", lambda: idle_expired(130.0, 190.0, 60.0), True),
    ("checks on time: idle from the second check until the TTL",
     lambda: retention(100.0, S, ready=True, idle_ttl=60.0), Retention(130.0, 190.0, 190.0)),
    ("checks on time: no TTL, deleted at the second check",
     lambda: retention(100.0, S, ready=True, idle_ttl=0.0), Retention(130.0, 100.0, 130.0)),
    # which idle pool a request takes
    ("an idle pool of the same provider and hash, by name",
     lambda: reuse_order("local", "h1", [IdlePool("b-1", "local", "h1"),
                                         IdlePool("a-2", "local", "h1"),
                                         IdlePool("c-1", "local", "h2"),
                                         IdlePool("d-1", "other", "h1")]), ["a-2", "b-1"]),
    ("none of another shape", lambda: reuse_order("local", "h1", [IdlePool("a", "local", "h2")]),
     []),
]


@pytest.mark.parametrize(("rule", "decide", "expected"), ROWS, ids=[r[0] for r in ROWS])
def test_rule(rule: str, decide: Callable[[], object], expected: object) -> None:
    assert decide() == expected, rule
