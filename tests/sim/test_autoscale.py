"""Autoscaling in the replay: node pools bought for held gangs in virtual time.

The scenarios' expected numbers are worked out by hand in their docstrings (8-GPU pool
nodes, pools Ready ``delay`` after they are asked for, deleted 30 s (the deletion check)
plus their idle TTL after their job ends, a request over a limit asking again 30 s later);
the random traces check invariants that must hold for any trace.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from phalanx.errors import SpecError
from phalanx.sim import SimResult, TraceJob, simulate
from phalanx.sim.autoscale import LIMIT_RETRY, fixed_equivalent
from phalanx.spec import QueueConfig
from phalanx.spec.provisioning import ProvisioningPolicy
from tests.sim.conftest import FOUR_JOBS, config, trace

REPO = Path(__file__).resolve().parents[2]
DELETE_CHECK = ProvisioningPolicy().deletion_check_delay  # 30 s
STOCKOUT_BLOCK = ProvisioningPolicy().stockout_block  # 5 min


def flavor(name: str = "burst", *, max_nodes: int | None = 2, delay: str = "60s",
           idle_ttl: str = "0s", price: float = 10.0, extra: str = "") -> str:
    limit = f"  maxNodes: {max_nodes}\n" if max_nodes is not None else ""
    return (f"kind: ResourceFlavor\nname: {name}\nnodeLabels: {{pool: {name}}}\n"
            "provisioning:\n  provider: simulated\n  node: {nvidia.com/gpu: 8}\n"
            f"{limit}  pricePerNodeHour: {price}\n  idleTTL: {idle_ttl}\n"
            f"  options: {{delay: {delay}{extra}}}\n")


def queue(flavors: list[str], nominal: int = 16, name: str = "team-a") -> str:
    listed = "".join(f"  - name: {f}\n    resources: [{{name: nvidia.com/gpu, "
                     f"nominalQuota: {nominal}}}]\n" for f in flavors)
    return (f"kind: ClusterQueue\nname: {name}\nresourceGroups:\n"
            f"- coveredResources: [nvidia.com/gpu]\n  flavors:\n{listed}"
            f"---\nkind: LocalQueue\nname: {name}\nclusterQueue: {name}\n")


def autoscaled(*flavors: str, nominal: int = 16) -> QueueConfig:
    names = [f.split("name: ", 1)[1].split("\n", 1)[0] for f in flavors]
    return config("---\n".join([*flavors, queue(names, nominal)]))


def times(result: SimResult) -> dict[str, tuple[float | None, float | None]]:
    return {j.name: (j.first_admit, j.finish) for j in result.jobs}


def test_pools_bought_per_gang_and_deleted_after_it() -> None:
    """Four jobs, one queue of 16 GPUs, pools of 8-GPU nodes up to maxNodes 2, Ready 60 s
    after they are asked for. j1 (8 GPUs, at 0) gets pool j1-1, placed at 60, runs until 160.
    j2 (16, at 10) does not fit the quota beside j1 and waits. j3 (4, at 20) gets j3-1,
    placed at 80, ends at 110. j4 (8, at 30) fits the quota at 110, but j3-1 counts against
    maxNodes until it is deleted at 140 (110 + 30 s): j4 gives its quota back and asks again
    at 140, when j3-1 is gone: j4-1, placed at 200, ends at 240. j2 fits the quota then, but
    j4-1 is there until 270: j2-1 (2 nodes) is bought at 270, placed at 330, ends at 380
    and is deleted at 410."""
    assert LIMIT_RETRY == DELETE_CHECK == 30
    result = simulate(autoscaled(flavor()), [], trace(FOUR_JOBS), "config")
    assert times(result) == {"j1": (60, 160), "j2": (330, 380), "j3": (80, 110),
                             "j4": (200, 240)}
    s = result.summary
    # Paid node-seconds: j1-1 0-190, j3-1 20-140, j4-1 140-270, j2-1 2 x 270-410.
    assert s["node_hours"] == pytest.approx((190 + 120 + 130 + 280) / 3600)
    # Idle: every node boots 60 s and waits 30 s after its job.
    assert s["idle_node_hours"] == pytest.approx(5 * 90 / 3600)
    assert s["spend"] == pytest.approx(720 / 3600 * 10)
    assert s["makespan"] == 410
    pools = s["autoscaling"]
    assert (pools["pools_created"], pools["pools_reused"]) == (4, 0)
    assert (pools["peak_pool_nodes"], pools["waited_for_limits"]) == (2, 2)
    # GPU utilisation is of the GPUs paid for: busy 8x100 + 4x30 + 8x40 + 16x50 = 2040.
    assert s["gpu_utilisation"] == pytest.approx(2040 / (720 * 8))
    assert result.series.capacity[-1] == 0  # every pool is gone at the end


def test_idle_ttl_keeps_a_pool_for_the_next_job_of_its_shape() -> None:
    """With idleTTL 300 s, j3's one-node pool is idle from 140 (110 + the 30 s check) to
    440. j4 (8 GPUs) fits the quota at 110, is over maxNodes then, asks again at 140 and
    takes j3-1 over: it runs at once (140-180) instead of waiting for a pool of its own. But
    idle pools count against maxNodes until deleted (30 s + 300 s after their job): j2 (2
    nodes, no idle pool of its shape) fits the quota at 180 and asks every 30 s; j1-1 goes at
    490 and j3-1 at 510, when j2-1 is bought: Ready at 570, j2 runs until 620, and j2-1 is
    kept until 950."""
    result = simulate(autoscaled(flavor(idle_ttl="300s")), [], trace(FOUR_JOBS), "config")
    assert times(result) == {"j1": (60, 160), "j2": (570, 620), "j3": (80, 110),
                             "j4": (140, 180)}
    pools = result.summary["autoscaling"]
    assert (pools["pools_created"], pools["pools_reused"]) == (3, 1)
    assert result.summary["makespan"] == 620 + 30 + 300


ONE_JOB = "submit,duration,gpus,team,name\n0,100,8,team-a,j1\n"


def test_a_stockout_delays_until_the_flavor_is_tried_again() -> None:
    """The first attempt finds no capacity: the hold is released and the flavor blocked for
    STOCKOUT_BLOCK seconds; the second attempt's pool is Ready 60 s after that."""
    plain = simulate(autoscaled(flavor()), [], trace(ONE_JOB), "config")
    out = simulate(autoscaled(flavor(extra=", stockout: [1]")), [], trace(ONE_JOB), "config")
    assert times(plain) == {"j1": (60, 160)}
    assert times(out) == {"j1": (STOCKOUT_BLOCK + 60, STOCKOUT_BLOCK + 160)}
    assert out.summary["autoscaling"]["stockouts"] == 1
    assert out.summary["autoscaling"]["pools_created"] == 1
    # Nothing is paid for the pool that was never made.
    assert out.summary["node_hours"] == pytest.approx((100 + 60 + DELETE_CHECK) / 3600)


def test_a_stockout_fails_over_to_the_next_flavor() -> None:
    """burst-a is always out of stock; burst-b, next in the queue's order, gets the pool
    (Ready after 120 s) at once, at the nodes' price of burst-b."""
    result = simulate(autoscaled(flavor("burst-a", extra=", stockout: true"),
                                 flavor("burst-b", delay="120s", price=4.0)),
                      [], trace(ONE_JOB), "config")
    assert times(result) == {"j1": (120, 220)}
    pools = result.summary["autoscaling"]
    assert (pools["stockouts"], pools["pools_created"]) == (1, 1)
    assert result.summary["spend"] == pytest.approx((220 + DELETE_CHECK) / 3600 * 4.0)


def test_always_out_of_stock_leaves_the_job_unfinished_instead_of_looping() -> None:
    result = simulate(autoscaled(flavor(extra=", stockout: true")), [], trace(ONE_JOB),
                      "config")
    assert times(result) == {"j1": (None, None)}
    assert result.summary["unfinished"] == 1
    assert result.summary["node_hours"] == 0


def random_trace(jobs: int, seed: int, gap: float = 120.0) -> list[TraceJob]:
    """Jobs arriving ``gap`` seconds apart on average, for 1 to 30 minutes on 1 to 16 GPUs."""
    rng = random.Random(seed)
    at = 0.0
    out = []
    for i in range(jobs):
        at += rng.expovariate(1 / gap)
        out.append(TraceJob(f"job-{i:03d}", round(at), rng.randrange(60, 1800),
                            rng.choice((1, 2, 4, 8, 8, 16)), "team-a"))
    return out


@pytest.mark.parametrize("idle_ttl", [0.0, 300.0])
def test_pools_stay_within_max_nodes_and_go_after_their_jobs(idle_ttl: float) -> None:
    """Any trace: the pools never have more than maxNodes nodes together; every node's
    idle time is its boot plus at most 30 s + idleTTL after each job it served; and no pool
    outlives the last job by more than that."""
    jobs = random_trace(150, seed=3)
    result = simulate(autoscaled(flavor(max_nodes=3, idle_ttl=f"{idle_ttl:g}s"),
                                 nominal=64), [], jobs, "config")
    s = result.summary
    pools = s["autoscaling"]
    assert s["completed"] == 150
    assert pools["peak_pool_nodes"] <= 3 and max(result.series.capacity) <= 3 * 8
    assert pools["waited_for_limits"] > 0  # the limit did bind
    keep = DELETE_CHECK + idle_ttl
    bound = (pools["pool_nodes_created"] * 60
             + (pools["pool_nodes_created"] + pools["pool_nodes_reused"]) * keep)
    assert 0 < s["idle_node_hours"] * 3600 <= bound
    last = max(j.finish for j in result.jobs if j.finish is not None)
    assert s["makespan"] <= last + keep
    assert result.series.capacity[-1] == 0
    if idle_ttl:
        assert pools["pools_reused"] > 0


def test_same_inputs_same_result() -> None:
    jobs = random_trace(80, seed=5)
    cfg = autoscaled(flavor(max_nodes=4, extra=", stockoutRate: 0.3"), nominal=64)
    runs = [simulate(cfg, [], jobs, "config", seed=seed) for seed in (1, 1, 2)]
    keys = ("node_hours", "idle_node_hours", "spend", "autoscaling")
    first, again, other = runs
    assert first.fingerprint() == again.fingerprint()
    assert [first.summary[k] for k in keys] == [again.summary[k] for k in keys]
    assert first.summary["autoscaling"]["stockouts"] > 0
    # The seed draws the stockouts: another seed gives another history.
    assert first.fingerprint() != other.fingerprint()


def test_a_pool_that_boots_past_its_timeout_is_refused() -> None:
    cfg = autoscaled(flavor(delay="20m"))
    with pytest.raises(SpecError) as err:
        simulate(cfg, [], trace(ONE_JOB), "config")
    assert err.value.field == "ResourceFlavor burst: provisioning.timeout"
    assert "raise timeout" in err.value.fix


def test_fixed_equivalent_buys_the_peak_up_front() -> None:
    fixed = fixed_equivalent(autoscaled(flavor(max_nodes=3)), [])
    nodes = fixed.nodes
    assert [n.name for n in nodes] == ["burst-fixed-0", "burst-fixed-1", "burst-fixed-2"]
    assert all(n.labels == {"pool": "burst"} for n in nodes)
    assert not fixed.config.provisionable_flavors()
    result = simulate(fixed.config, nodes, trace(ONE_JOB), "config",
                      node_prices=fixed.prices)
    assert times(result) == {"j1": (0, 100)}
    # Three nodes paid for the whole run, at the flavor's price; two never hold a pod.
    assert result.summary["node_hours"] == pytest.approx(3 * 100 / 3600)
    assert result.summary["idle_node_hours"] == pytest.approx(2 * 100 / 3600)
    assert result.summary["spend"] == pytest.approx(3 * 100 / 3600 * 10)
    with pytest.raises(SpecError) as err:
        fixed_equivalent(autoscaled(flavor(max_nodes=None)), [])
    assert err.value.field == "ResourceFlavor burst: provisioning.maxNodes"


def test_cli_compares_autoscaled_with_fixed(tmp_path: Path) -> None:
    """`phalanx sim --against-fixed`: each policy on the autoscaled cluster and on the fixed
    one of the same peak size, in the table, the JSON and the plots."""
    queues = tmp_path / "queues.yaml"
    queues.write_text("---\n".join([flavor(max_nodes=4), queue(["burst"], 32)]))
    jobs = tmp_path / "trace.csv"
    jobs.write_text("submit,duration,gpus,team\n" + "".join(
        f"{j.submit:g},{j.duration:g},{j.gpus},{j.team}\n" for j in random_trace(40, 9, gap=3600)))
    out = tmp_path / "out.json"
    plots = tmp_path / "plots"
    done = subprocess.run(
        [sys.executable, "-m", "phalanx.cli.main", "sim", "--trace", str(jobs), "--queues",
         str(queues), "--against-fixed", "--json", str(out),
         "--plots", str(plots)],
        capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert "node-hours paid (idle)" in done.stdout and "pools created" in done.stdout
    data = json.loads(out.read_text())
    assert data["inputs"]["againstFixed"] is True
    auto, fixed = (r["summary"] for r in data["runs"])
    assert [r["policy"] for r in data["runs"]] == ["config autoscaled", "config fixed"]
    assert auto["completed"] == fixed["completed"] == 40
    assert fixed["autoscaling"] is None and fixed["nodes"] == 4
    assert fixed["node_hours"] == pytest.approx(4 * fixed["makespan"] / 3600)
    # An hour between arrivals, jobs of at most half an hour: the pools cost less than four
    # nodes kept all along, and jobs wait for them to boot.
    assert auto["node_hours"] < fixed["node_hours"]
    assert auto["queueing_delay"]["mean"] > fixed["queueing_delay"]["mean"]
    assert "capacity.png" in {p.name for p in plots.iterdir()}

    plain = tmp_path / "plain.yaml"
    plain.write_text("kind: ResourceFlavor\nname: gpu\n---\n" + queue(["gpu"], 32))
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text("- {name: gpu, count: 4, allocatable: {nvidia.com/gpu: 8}}\n")
    bad = subprocess.run(
        [sys.executable, "-m", "phalanx.cli.main", "sim", "--trace", str(jobs), "--queues",
         str(plain), "--nodes", str(nodes), "--against-fixed"],
        capture_output=True, text=True, timeout=60, cwd=REPO)
    assert bad.returncode != 0
    assert "--against-fixed" in bad.stderr and "add provisioning" in bad.stderr


def test_a_request_no_limit_will_ever_allow_waits_without_looping() -> None:
    """maxSpendPerHour 15 with nodes at 10 an hour: j1's one-node pool fits, j2's two-node
    pool (20 an hour) never will; j2 waits and stays unfinished."""
    jobs = "submit,duration,gpus,team,name\n0,100,8,team-a,j1\n0,100,16,team-a,j2\n"
    cfg = autoscaled(flavor(max_nodes=4).replace("  pricePerNodeHour: 10.0\n",
                                                 "  pricePerNodeHour: 10.0\n"
                                                 "  maxSpendPerHour: 15\n"), nominal=32)
    result = simulate(cfg, [], trace(jobs), "config")
    assert times(result) == {"j1": (60, 160), "j2": (None, None)}
    assert result.summary["autoscaling"]["waited_for_limits"] == 1
