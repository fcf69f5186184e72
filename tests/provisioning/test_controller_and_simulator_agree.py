"""The control plane's provisioning controller and the simulator's autoscaler decide alike:
the same configuration and the same events (two gangs held at once, a limit that lets one
pool exist, the first gang's end, its pool kept idle and taken over by the second) give the
same pools, the same limit message and the same reuse.

The live side is a real control plane in this process: its store (SQLite), the local compute
plane with the local provider (pods are real processes), and a clock the test moves, so the
deletion check and the limit's retry come when the test says. The simulated side is the
scheduler core with the simulator's ``Autoscaler``, played in virtual time as ``phalanx
sim`` plays it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from phalanx.compute.local.plane import LocalPlane
from phalanx.control import Controller
from phalanx.scheduler import Scheduler
from phalanx.sim.autoscale import Autoscaler
from phalanx.sim.meter import NodeMeter
from phalanx.spec import JobSpec
from phalanx.spec.base import validate
from phalanx.spec.config import QueueConfig, load_config_yaml
from phalanx.spec.status import JobStatus
from phalanx.store import Store
from phalanx.store.pools import PoolPhase
from tests.leftovers import kill_pods_under

# One flavor whose limit lets one pool of two nodes exist, kept an hour after its job.
CONFIG = """
kind: ResourceFlavor
name: burst
nodeLabels: {pool: burst}
provisioning:
  provider: local
  node: {cpu: "1", memory: 1Gi}
  maxNodes: 2
  pricePerNodeHour: 1.5
  idleTTL: 1h
  options: {delay: 0s}
---
kind: ClusterQueue
name: cloud
resourceGroups:
- coveredResources: [cpu, memory]
  flavors:
  - name: burst
    resources: [{name: cpu, nominalQuota: "8"}, {name: memory, nominalQuota: 16Gi}]
---
kind: LocalQueue
name: cloud
clusterQueue: cloud
---
kind: ProvisioningPolicy
name: default
deletionCheckDelay: 30s
"""
START = 1000.0


def gang(name: str) -> JobSpec:
    """Two pods of one CPU: a pool of two of the flavor's nodes, no node of this machine."""
    return validate(JobSpec, {
        "name": name, "queue": "cloud",
        "podSets": [{"name": "worker", "replicas": 2,
                     "resources": {"cpu": "1", "memory": "100Mi"},
                     "command": ["python", "-c", "import time; time.sleep(600)"]}]})


@dataclass
class Decisions:
    """What a side decided, in the terms both share."""

    pools: list[tuple[str, int, str]] = field(default_factory=list)  # name, nodes, hash
    waiting: str = ""  # the second gang's pending message while the limit holds it
    second_pool: str = ""  # the pool the second gang was placed on


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


def step_until(ctl: Controller, check: object, what: str, timeout: float = 30.0) -> None:
    assert callable(check)
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        ctl.step()
        time.sleep(0.05)


def live_side(home: Path) -> Decisions:
    clock = Clock()
    plane = LocalPlane(home, gpus=[])
    ctl = Controller(Store(f"sqlite:///{home / 'state.db'}"), plane, clock=clock)
    out = Decisions()
    try:
        ctl.service.apply_config(load_config_yaml(CONFIG))
        ctl.service.submit_many([gang("a"), gang("b")])
        step_until(ctl, lambda: ctl.state.jobs["a"].admission is not None, "a's admission")
        reason = ctl.state.scheduler.pending_reason("b")
        out.waiting = reason.message if reason is not None else ""
        ctl.service.cancel("a")
        step_until(ctl, lambda: ctl.service.get("a").status is JobStatus.CANCELLED, "a's end")
        # The deletion check passes once, then again 30 s later: the pool is idle, kept.
        ctl.step()
        clock.now += 30.0
        step_until(ctl, lambda: ctl.state.jobs["b"].admission is not None, "b's admission")
        admission = ctl.state.jobs["b"].admission
        assert admission is not None
        out.second_pool = {n.rsplit("-", 1)[0] for ps in admission.pod_sets
                           for n in ps.nodes}.pop()
        rows = ctl.provisioning.pools.live() + ctl.provisioning.pools.of_job("a")
        seen = {r.name: r for r in rows if r.state is not PoolPhase.DELETED}
        out.pools = sorted((r.name, r.node_count, r.config_hash) for r in seen.values())
        ctl.service.cancel("b")
        return out
    finally:
        ctl.stop()
        # b's pods (sleep 600) outlive a controller stopped right after cancelling them.
        kill_pods_under(home)
        plane.close()
        ctl.store.close()


def simulated_side() -> Decisions:
    config = QueueConfig().merged(load_config_yaml(CONFIG))
    scheduler = Scheduler(config, [])
    auto = Autoscaler(config, scheduler, NodeMeter())
    out = Decisions()

    def cycle(now: float) -> None:
        auto.advance(now)
        for _ in range(5):  # as the engine: again while a pool taken over is Ready at once
            result = scheduler.cycle(now)
            for admission in result.admissions:
                auto.placed(admission.job)
            if not (result.provisioning and auto.needs(result.provisioning, now)):
                break

    now = START
    for i, name in enumerate(("a", "b")):
        scheduler.submit(gang(name), priority=0, submitted_at=now + i * 1e-3)
    cycle(now)
    cycle(now)
    assert "a" in scheduler.admitted_jobs()
    reason = scheduler.pending_reason("b")
    out.waiting = reason.message if reason is not None else ""
    out.pools = sorted((p.request.name, p.request.node_count, p.request.config_hash)
                       for p in auto.pools.values())
    scheduler.remove("a")
    auto.ended("a", now)
    now += 30.0
    cycle(now)
    assert "b" in scheduler.admitted_jobs()
    out.second_pool = auto.owned["b"]
    return out


def test_the_controller_and_the_simulator_decide_alike(tmp_path: Path) -> None:
    live, simulated = live_side(tmp_path), simulated_side()
    # The same pool, asked for the first gang (the simulator plays the provider as its own,
    # which the configuration hash includes, so names and sizes are compared).
    assert [p[:2] for p in live.pools] == [p[:2] for p in simulated.pools] == [("a-1", 2)]
    # The second gang waited for the same limit, told the same thing...
    assert live.waiting == simulated.waiting
    assert "maxNodes (2 of 2 in use)" in live.waiting
    # ...and took over the first gang's idle pool instead of buying another.
    assert live.second_pool == simulated.second_pool == "a-1"
