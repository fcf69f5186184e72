"""The control-loop benchmark takes its jobs through the loop and reports every step.

Timings are not asserted (they depend on the machine); that every job succeeded in
three steps, and the shape of the figures, are.
"""

from __future__ import annotations

from benchmarks import control_loop


def test_a_small_run_settles_every_job_in_three_steps() -> None:
    # run_once raises unless every job ended Succeeded after the three steps.
    figures = control_loop.run_once(40)
    assert list(figures) == list(control_loop.STEPS)
    for step in figures.values():
        assert set(step) == {"wall_ms_per_job", "cpu_ms_per_job"}
        assert step["wall_ms_per_job"] > 0 and step["cpu_ms_per_job"] >= 0
