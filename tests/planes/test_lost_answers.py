"""A worker's report whose answer is lost: sent again under its number, its logs are kept
once and the job runs once (real processes, real HTTP, the answers dropped by a relay)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.planes.harness import Federation, job_spec, wait_until

pytestmark = pytest.mark.timeout(180)

LINES = 60


def test_a_report_whose_answer_is_lost_keeps_each_log_line_once(tmp_path: Path) -> None:
    code = ("import time\n"
            f"for i in range({LINES}):\n"
            "    print(f'line {i} of the count', flush=True)\n"
            "    time.sleep(0.05)\n")
    with Federation(tmp_path, lost_after="60s") as fed:
        gate = fed.gate()
        fed.start_worker("east", "--fence-after", "30s", "--report-interval", "0.2",
                         via=gate)
        fed.submit(job_spec("counts", code))
        with fed.api() as api:
            wait_until(lambda: "line 3 of" in api.get("/v1/jobs/counts/logs").text,
                       what="the first lines")
            # Every report from here is taken, but its answer never reaches the worker.
            gate.lose_answers()
            time.sleep(2.0)
            gate.heal()
            done = fed.wait_status("counts", "Succeeded")
            wait_until(lambda: f"line {LINES - 1} of" in api.get("/v1/jobs/counts/logs").text,
                       what="the last line")
            logs = api.get("/v1/jobs/counts/logs").text
        assert done["attempt"] == 1
        counts = {i: logs.count(f"line {i} of the count") for i in range(LINES)}
        assert set(counts.values()) == {1}, {i: n for i, n in counts.items() if n != 1}
