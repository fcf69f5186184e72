"""The scheduler core benchmark runs end to end at small scale and reports every figure.

Timings are not asserted (they depend on the machine); the counts and the
shape of the JSON are.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from benchmarks import scheduler_core


def test_quick_run_writes_sensible_json(tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    returned = scheduler_core.main(["--quick", "--json", str(out), "--seed", "3"])
    written = json.loads(out.read_text())
    assert written == json.loads(json.dumps(returned))

    assert set(written) >= {"benchmark", "command", "machine", "params", "placement", "core",
                            "peak_rss_mb"}
    assert set(written["machine"]) >= {"cpu_model", "cpus", "python", "scheduler_core"}
    assert written["params"]["jobs"] == 2_000 and written["params"]["nodes"] == 64

    core = written["core"]
    assert set(core["events_us"]) == {"submit", "remove", "requeue", "node_update"}
    assert set(core["cycles"]) == {"count", "p50_s", "p99_s", "mean_s", "max_s", "cpu_p50_s",
                                   "cpu_mean_s"}
    assert all(c["cpu_seconds"] > 0 for c in core["per_cycle"])
    assert core["first_cycle"]["admissions"] > 0
    assert core["admissions"] >= core["first_cycle"]["admissions"]
    assert core["cycles"]["count"] == written["params"]["cycles"] - 1
    assert len(core["per_cycle"]) == written["params"]["cycles"]
    assert sum(c["admissions"] for c in core["per_cycle"]) == core["admissions"]
    assert core["admissions_per_s"] > 0
    # 64 nodes x 8 GPUs can never hold more than 512 pods of at least one GPU each.
    assert core["running_at_end"] <= 512

    placement = written["placement"]
    assert placement["nodes"] == 64
    assert set(placement["place_us"]) >= {"1 pod x 1 GPU", "16 pods x 8 GPU, rack required"}
    assert written["peak_rss_mb"] > 0


def test_generated_jobs_never_exceed_their_cohort() -> None:
    scale = scheduler_core.Scale(jobs=500, queues=20, cohorts=4, nodes=64, cycles=1, seed=1)
    config = scheduler_core.build_config(scale)
    cohort_gpus = scheduler_core.queue_gpus(scale) * 5 * 1000
    jobs = scheduler_core.build_jobs(scale, 500, random.Random(1))
    assert len({j.name for j in jobs}) == 500
    for job in jobs:
        pod_set = job.pod_sets[0]
        assert 1 <= pod_set.replicas <= 64
        assert pod_set.replicas * pod_set.resources["nvidia.com/gpu"] <= cohort_gpus
        assert job.queue in config.local_queues
    sizes = [j.pod_sets[0].replicas for j in jobs]
    assert sizes.count(1) > sizes.count(64), "gang sizes are skewed toward small jobs"
    assert {j.priority for j in jobs} == {"low", "default", "high"}
