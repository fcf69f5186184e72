"""Pure job-lifecycle rules: whether and when a stopped job runs again, and when it has
run too long.

Kept free of I/O so the control loop stays a thin driver, the rules are tested on
their own, and the simulator replays a trace under the same rules the control
plane applies (restart budgets, backoff, deadlines). It needs nothing but the job's
spec, so the simulator loads no compute plane for it (``phalanx.kinds`` reads pods).
"""

from __future__ import annotations

from dataclasses import dataclass

from phalanx.spec.resources import RestartPolicy


def backoff_seconds(policy: RestartPolicy, restarts: int) -> float:
    """Exponential backoff: base, 2x base, 4x base ... capped at maxBackoff."""
    if restarts <= 0:
        return 0.0
    return float(min(policy.max_backoff, policy.backoff * 2 ** (restarts - 1)))


@dataclass(frozen=True, slots=True)
class RestartDecision:
    restart: bool
    user_restarts: int
    system_restarts: int
    delay: float
    message: str


def restart_decision(
    policy: RestartPolicy, failure: str, user_restarts: int, system_restarts: int
) -> RestartDecision:
    """Charge a failure to its budget and say whether the job runs again."""
    if failure == "system":
        if system_restarts < policy.max_system_restarts:
            n = system_restarts + 1
            return RestartDecision(
                True, user_restarts, n, backoff_seconds(policy, n),
                f"system failure {n} of {policy.max_system_restarts} allowed; restarting",
            )
        return RestartDecision(
            False, user_restarts, system_restarts, 0.0,
            f"system failure budget spent ({policy.max_system_restarts} restarts)",
        )
    if user_restarts < policy.max_restarts:
        n = user_restarts + 1
        return RestartDecision(
            True, n, system_restarts, backoff_seconds(policy, n),
            f"restart {n} of {policy.max_restarts} after a failure",
        )
    budget = (
        f"restart budget spent ({policy.max_restarts} restarts)"
        if policy.max_restarts
        else "no restarts allowed (restart.maxRestarts is 0)"
    )
    return RestartDecision(False, user_restarts, system_restarts, 0.0, budget)


def deadline_at(
    max_runtime: float | None, started_at: float | None, admitted_at: float | None
) -> float | None:
    """When a job that may run ``max_runtime`` seconds has run too long (None: never).

    The clock starts when its pods first run, or at admission while they have not: a
    job whose pods never start must not hold its quota for ever either.
    """
    if max_runtime is None:
        return None
    since = started_at if started_at is not None else admitted_at
    return None if since is None else since + max_runtime


def deadline_passed(
    max_runtime: float | None, started_at: float | None, admitted_at: float | None, now: float
) -> bool:
    at = deadline_at(max_runtime, started_at, admitted_at)
    return at is not None and now > at
