"""The discrete-event simulator: a trace replayed in virtual time through the real scheduler.

Time jumps from one event to the next (a job arrives, a job finishes, a node
fails or comes back). Every event at one instant is applied first (finishes,
then repairs, failures and arrivals), then, if any job waits, ``Scheduler.cycle``
runs; its admissions start jobs that will finish ``duration`` later, and its preemptions
stop their victims on the spot and queue them again (termination takes no
simulated time), after which the cycle runs again at the same instant so the
preemptor gets the room it made. The scheduler is the same object the control
plane drives; the simulator only plays the cluster around it.

A job stopped early (preempted, or on a node that failed) restarts from zero by
default, as training without checkpoints does; ``restart="resume"`` keeps its
progress instead, as if it checkpointed continuously. In between,
``checkpoint_every`` (or a trace job's own ``checkpoint_every``) saves progress
every so many seconds of a run: a stopped run keeps what it last saved and loses
the rest, and the scheduler hears of each save (``Scheduler.report_checkpoint``), so
preemption takes the equal candidate that loses least. Either way a job keeps its
submission time, so it keeps its place in its queue. ``min_runtime`` gives every
ClusterQueue that sets none that minRuntime (preemption protection); cycles run with
the simulated clock, so protection counts in simulated time. ``reserve_after`` likewise
sets reserveAfter (reservations and backfill, ``scheduler/backfill.py``); the expected
run times they rest on come from the replay's own finished jobs, as the control plane's
estimates do (``control/forecast.py``), never from the trace's durations.

A node that fails is taken out of the scheduler's inventory; when some ClusterQueue
has ``capacityFollowsHealth`` it stays in, unhealthy, so that queue's quota shrinks
by it until the repair.

The control plane's lifecycle rules (``phalanx.control.lifecycle``) apply as they
do on a real cluster: a preempted job is queued again at once; a job lost with
its node is a system failure, charged to its restart budget and queued again
after its backoff, or failed once the budget is spent; and with ``max_runtime``
a job that runs longer than that since it first started fails.

With ``tick`` > 0 the scheduler runs periodically, as the control plane's loop
does, instead of at every event: events still apply at their own time (a
finished job frees its GPUs when it ends), but the cycle they call for runs at
the next multiple of ``tick``, together with every other event up to then.
Each job then waits up to ``tick`` longer, and a long trace needs far fewer
cycles (the cycles, not the events, are what a replay spends its time on).

Same inputs, same result: events are ordered by (time, kind, sequence), the
scheduler is deterministic and node failures come from a seeded generator.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from phalanx.control.forecast import RunHistory, collector_paused
from phalanx.control.lifecycle import deadline_at, restart_decision
from phalanx.errors import SpecError
from phalanx.scheduler import Scheduler
from phalanx.sim.autoscale import Autoscaler, node_price, pool_gpus
from phalanx.sim.estimates import EstimateRecorder
from phalanx.sim.failures import FailureModel
from phalanx.sim.meter import NodeMeter
from phalanx.sim.metrics import (
    JobOutcome,
    Series,
    SimResult,
    TeamShare,
    by_gang_size,
    preemptions_per_job,
    stats,
)
from phalanx.sim.policy import Policy, policy_named
from phalanx.sim.trace import TraceJob
from phalanx.spec import GPU, JobSpec, Node, QueueConfig, validate
from phalanx.spec.resources import NodeHealth, RestartPolicy

Restart = Literal["restart", "resume"]
MAX_CYCLES_PER_INSTANT = 64  # cycles re-run while preemptions free room at one instant
PROGRESS_EVERY = 1000  # arrivals between two progress calls
# Event kinds at one instant, in the order they apply: capacity comes back before it is used.
_REPAIR, _FAIL = 0, 1


@dataclass(slots=True)
class _Run:
    outcome: JobOutcome
    start: float
    remaining: float  # seconds of work left when this run started
    attempt: int
    nodes: tuple[str, ...]
    spec: JobSpec
    priority: int


class Simulator:
    """Replays ``trace`` on ``nodes`` under ``config`` as transformed by ``policy``."""

    def __init__(self, config: QueueConfig, nodes: Sequence[Node], trace: Sequence[TraceJob],
                 policy: Policy | str = "config", *, restart: Restart = "restart",
                 failures: FailureModel | None = None, tick: float = 0.0,
                 max_runtime: float | None = None, restart_policy: RestartPolicy | None = None,
                 progress: Callable[[int, int, float], None] | None = None,
                 checkpoint_every: float | None = None,
                 min_runtime: float | None = None, seed: int = 0,
                 node_prices: dict[str, float] | None = None, estimate_every: int = 0,
                 reserve_after: float | None = None) -> None:
        # Forecast start times at every Nth arrival and score them (sim/estimates.py).
        self.estimate_every = max(0, estimate_every)
        self.seed = seed  # for stockouts drawn at a rate (options.stockoutRate)
        # Per node-hour by node name; otherwise that of the provisionable flavor it belongs to.
        self.node_prices = node_prices or {}
        for value, what in ((checkpoint_every, "checkpointEvery"), (min_runtime, "minRuntime")):
            if value is not None and not (math.isfinite(value) and value >= 0):
                raise SpecError(f"{what} {value:g} s is out of range", field=what,
                                fix="use 0 or more seconds, or leave it out")
        self.checkpoint_every = checkpoint_every
        self.min_runtime = min_runtime
        if not math.isfinite(tick) or tick < 0:
            raise SpecError(f"scheduling period {tick:g} s is out of range", field="tick",
                            fix="use 0 (a cycle at every event) or a positive number of seconds")
        self.tick = tick
        if max_runtime is not None and not (math.isfinite(max_runtime) and max_runtime > 0):
            raise SpecError(f"maxRuntime {max_runtime:g} s is out of range", field="maxRuntime",
                            fix="use a positive number of seconds, or leave it out")
        self.max_runtime = max_runtime
        # Every job's restart budgets and backoff: a job's default unless given.
        self.restart_policy = restart_policy or RestartPolicy()
        if restart not in ("restart", "resume"):
            raise SpecError(f"unknown restart mode {restart!r}", field="restart",
                            fix="use 'restart' (from zero) or 'resume'")
        self.policy = policy if isinstance(policy, Policy) else policy_named(policy)
        if reserve_after is not None and not (math.isfinite(reserve_after)
                                              and reserve_after >= 0):
            raise SpecError(f"reserveAfter {reserve_after:g} s is out of range",
                            field="reserveAfter", fix="use 0 or more seconds, or leave it out")
        self.reserve_after = reserve_after
        self.config = with_queue_default(
            with_queue_default(self.policy.apply(config), "min_runtime", min_runtime),
            "reserve_after", reserve_after)
        self.slack = any(cq.capacity_follows_health for cq in self.config.cluster_queues.values())
        self.nodes = {n.name: n for n in nodes}
        if len(self.nodes) != len(nodes):
            raise SpecError("two nodes share a name", field="nodes",
                            fix="give every node its own name")
        self.trace = list(trace)
        self.restart = restart
        self.failures = failures if failures is not None and failures.enabled else None
        # Called as (jobs arrived, jobs in the trace, simulated seconds) every PROGRESS_EVERY.
        self.progress = progress
        # Pool nodes count as much as nodes that exist: a gang is split to fit either.
        self.max_gpus_per_node = max((n.allocatable.get(GPU, 0) // 1000 for n in nodes),
                                     default=0)
        self.max_gpus_per_node = max(self.max_gpus_per_node, pool_gpus(self.config))
        if self.max_gpus_per_node < 1:
            raise SpecError("no node has a GPU", field="nodes",
                            fix=f"give the nodes allocatable {GPU}, or a flavor's "
                                f"provisioning.node {GPU}")

    # ------------------------------------------------------------------ jobs
    def pods_for(self, gpus: int) -> tuple[int, int]:
        """(replicas, GPUs per pod): the fewest pods of equal size that fit on a node."""
        per_pod = max(d for d in range(1, min(gpus, self.max_gpus_per_node) + 1)
                      if gpus % d == 0)
        return gpus // per_pod, per_pod

    def _templates(self, scheduler: Scheduler
                   ) -> tuple[list[tuple[JobSpec, int] | str], dict[str, str]]:
        """Per trace job: (spec template, priority value), or why it can never run."""
        config = self.config
        cache: dict[tuple[str, int, str | int], tuple[JobSpec, int] | str] = {}
        out: list[tuple[JobSpec, int] | str] = []
        for job in self.trace:
            key = (job.team, job.gpus, job.priority)
            found = cache.get(key)
            if found is None:
                where = f"trace row {job.row}"
                if job.team not in config.local_queues:
                    known = ", ".join(sorted(config.local_queues)) or "none"
                    raise SpecError(f"team {job.team!r} is not a LocalQueue of the queues file",
                                    field=f"{where}, column team",
                                    fix=f"add a LocalQueue {job.team!r} or use one of {known}")
                priority = config.priority_value(job.priority, f"{where}, column priority")
                replicas, per_pod = self.pods_for(job.gpus)
                spec = validate(JobSpec, {
                    "name": "template", "queue": job.team, "priority": priority,
                    "maxRuntime": self.max_runtime,
                    "restart": self.restart_policy.to_dict(),
                    "podSets": [{"name": "worker", "replicas": replicas,
                                 "resources": {GPU: per_pod}}],
                })
                try:
                    scheduler.check_feasible(spec)
                    found = (spec, priority)
                except SpecError as exc:
                    found = str(exc)
                cache[key] = found
            out.append(found)
        cq_of = {name: lq.cluster_queue for name, lq in config.local_queues.items()}
        return out, cq_of

    def interval(self, job: TraceJob) -> float | None:
        """Seconds between the job's checkpoints: 0 keeps all progress, None none."""
        if job.checkpoint_every is not None:
            return job.checkpoint_every
        if self.checkpoint_every is not None:
            return self.checkpoint_every
        return 0.0 if self.restart == "resume" else None

    # ------------------------------------------------------------------ the run
    def run(self) -> SimResult:
        with collector_paused():
            return self._run()

    def _run(self) -> SimResult:
        started = time.perf_counter()
        scheduler = Scheduler(self.config, self.nodes.values())
        scheduler.set_fair_sharing(self.policy.fair_sharing)
        meter = NodeMeter()
        for fixed in self.nodes.values():
            price = self.node_prices.get(fixed.name)
            meter.add(fixed.name, 0.0,
                      price if price is not None else node_price(self.config, fixed))
        autoscaler = (Autoscaler(self.config, scheduler, meter, self.seed)
                      if self.config.provisionable_flavors() else None)
        templates, cq_of = self._templates(scheduler)
        recorder = (EstimateRecorder(self.estimate_every, self.max_runtime)
                    if self.estimate_every else None)
        # Run times of finished jobs: for estimates, and for reservations' expected ends.
        reserving = any(cq.reserve_after is not None
                        for cq in self.config.cluster_queues.values())
        history = recorder.history if recorder is not None else (
            RunHistory() if reserving else None)
        if reserving:
            assert history is not None
            max_runtime = self.max_runtime

            def expected(spec: JobSpec, elapsed: float) -> float:
                team = spec.queue
                return history.expected(team, spec.name, team, max_runtime, elapsed).seconds

            scheduler.set_run_estimator(expected)
        gpus_of = {name: n.allocatable.get(GPU, 0) // 1000 for name, n in self.nodes.items()}
        outcomes = [
            JobOutcome(j.name, j.team, cq_of[j.team], j.gpus, j.submit, j.duration)
            for j in self.trace
        ]
        by_name = {o.name: o for o in outcomes}
        arrivals = list(zip(self.trace, templates, outcomes, strict=True))
        intervals = {j.name: self.interval(j) for j in self.trace}
        track_nodes = self.failures is not None
        saves: list[tuple[float, int, str, int]] = []  # (a checkpoint's time, seq, job, attempt)
        wakes: list[float] = []  # when minRuntime protections that held a preemptor back end

        running: dict[str, _Run] = {}
        finishes: list[tuple[float, int, str, int]] = []  # (time, seq, job, attempt)
        deadlines: list[tuple[float, int, str, int]] = []  # (time, seq, job, attempt)
        releases: list[tuple[float, int, _Run]] = []  # (backoff's end, seq, the stopped run)
        first_start: dict[str, float] = {}
        specs: dict[str, tuple[JobSpec, int]] = {}  # per job, to submit it again after a backoff
        node_events: list[tuple[float, int, int, str, float]] = []  # (time, kind, seq, node, down)
        node_jobs: dict[str, set[str]] = {}
        down: set[str] = set()
        attempts: dict[str, int] = {}
        remaining: dict[str, float] = {}
        kept_seconds: dict[str, float] = {}  # per job, what its stopped runs saved
        team_seconds: dict[str, float] = {}
        series = Series()
        seq = 0
        busy = 0
        capacity = sum(gpus_of.values())
        pending = 0
        cycles = instants = preemptions = evictions = node_failures = failed = 0
        wasted = goodput = lost_to_failures = 0.0

        if self.failures is not None:
            for f in self.failures.start(self.nodes):
                seq += 1
                heapq.heappush(node_events, (f.at, _FAIL, seq, f.node, f.down_for))

        def stop(name: str, now: float, requeue: bool, failure: bool = False) -> None:
            """A run ends early: account for it and (``requeue``) queue the job again."""
            nonlocal busy, pending, wasted, lost_to_failures
            run = running.pop(name)
            o = run.outcome
            ran = now - run.start
            busy -= o.gpus
            team_seconds[o.cluster_queue] = team_seconds.get(o.cluster_queue, 0.0) + ran * o.gpus
            kept = kept_progress(ran, intervals[name])
            wasted += (ran - kept) * o.gpus
            if failure:
                lost_to_failures += (ran - kept) * o.gpus
            remaining[name] = run.remaining - kept
            kept_seconds[name] = kept_seconds.get(name, 0.0) + kept
            meter.free(run.nodes, now)
            for node in run.nodes if track_nodes else ():
                node_jobs[node].discard(name)
            if requeue:
                scheduler.requeue(name)
                pending += 1
            else:
                scheduler.remove(name)

        def lost(name: str, now: float) -> None:
            """The job's node failed: a system failure, charged as the control plane does."""
            nonlocal seq, failed
            run = running[name]
            o = run.outcome
            decision = restart_decision(run.spec.restart, "system", 0, o.system_restarts)
            o.system_restarts = decision.system_restarts
            if decision.restart and decision.delay <= 0:
                stop(name, now, requeue=True, failure=True)
                return
            stop(name, now, requeue=False, failure=True)
            if decision.restart:
                seq += 1
                heapq.heappush(releases, (now + decision.delay, seq, run))
            else:
                o.failed = decision.message
                failed += 1
                if autoscaler is not None:
                    autoscaler.ended(name, now)

        def paid() -> int:
            """GPUs paid for: the nodes that are up, and pool nodes from their creation."""
            return capacity + (autoscaler.gpus if autoscaler is not None else 0)

        tick = self.tick
        due: float | None = None  # when the next cycle runs (with tick > 0), once one is owed
        index, total = 0, len(arrivals)
        while True:
            pools_busy = autoscaler is not None and autoscaler.busy()
            if due is None:
                if not (index < total or running or pending or releases or wakes
                        or pools_busy):
                    break
                if index >= total and not running and not down and not releases \
                        and not pools_busy:
                    break  # pending jobs that nothing will ever let in: never admitted
            now = float("inf") if due is None else due
            if index < total and arrivals[index][0].submit < now:
                now = arrivals[index][0].submit
            if finishes and finishes[0][0] < now:
                now = finishes[0][0]
            if node_events and node_events[0][0] < now:
                now = node_events[0][0]
            if deadlines and deadlines[0][0] < now:
                now = deadlines[0][0]
            if releases and releases[0][0] < now:
                now = releases[0][0]
            if wakes and wakes[0] < now:
                now = wakes[0]
            pool_event = autoscaler.next_at() if autoscaler is not None else None
            if pool_event is not None and pool_event < now:
                now = pool_event
            while wakes and wakes[0] <= now:
                heapq.heappop(wakes)
            instants += 1

            while finishes and finishes[0][0] == now:
                _, _, name, attempt = heapq.heappop(finishes)
                run = running.get(name)
                if run is None or run.attempt != attempt:
                    continue  # a run that was stopped early
                del running[name]
                o = run.outcome
                busy -= o.gpus
                team_seconds[o.cluster_queue] = (team_seconds.get(o.cluster_queue, 0.0)
                                                 + (now - run.start) * o.gpus)
                # The last run and what earlier runs saved: the work the job kept.
                goodput += (now - run.start + kept_seconds.pop(name, 0.0)) * o.gpus
                o.finish = now
                if history is not None:
                    history.add(o.team, o.team, o.name, now - run.start)
                scheduler.remove(name)
                meter.free(run.nodes, now)
                if autoscaler is not None:
                    autoscaler.ended(name, now)
                for node in run.nodes if track_nodes else ():
                    node_jobs[node].discard(name)

            while deadlines and deadlines[0][0] == now:
                _, _, name, attempt = heapq.heappop(deadlines)
                run = running.get(name)
                if run is None or run.attempt != attempt:
                    continue
                stop(name, now, requeue=False)
                run.outcome.failed = f"ran longer than maxRuntime ({self.max_runtime:g}s)"
                failed += 1
                if autoscaler is not None:
                    autoscaler.ended(name, now)

            while node_events and node_events[0][0] == now:
                _, kind, _, node, down_for = heapq.heappop(node_events)
                if kind == _REPAIR:
                    down.discard(node)
                    scheduler.upsert_node(self.nodes[node])
                    capacity += gpus_of[node]
                    assert self.failures is not None
                    nxt = self.failures.after_repair(node, now)
                    if nxt is not None:
                        seq += 1
                        heapq.heappush(node_events, (nxt.at, _FAIL, seq, node, nxt.down_for))
                    continue
                if node in down:
                    continue
                node_failures += 1
                down.add(node)
                capacity -= gpus_of[node]
                if self.slack:  # out, but still counted against its flavor's slack quotas
                    scheduler.upsert_node(self.nodes[node].model_copy(
                        update={"health": NodeHealth.UNHEALTHY}))
                else:
                    scheduler.remove_node(node)
                for name in sorted(node_jobs.get(node, ())):
                    by_name[name].evictions += 1
                    evictions += 1
                    lost(name, now)
                seq += 1
                heapq.heappush(node_events, (now + down_for, _REPAIR, seq, node, 0.0))

            if autoscaler is not None:
                autoscaler.advance(now)  # pools Ready, timed out or deleted

            while releases and releases[0][0] == now:
                _, _, run = heapq.heappop(releases)
                scheduler.submit(run.spec, priority=run.priority,
                                 submitted_at=run.outcome.submit)
                pending += 1

            sampled: list[str] = []  # arrivals whose start is estimated now
            while index < total and arrivals[index][0].submit == now:
                job, template, outcome = arrivals[index]
                index += 1
                if self.progress is not None and index % PROGRESS_EVERY == 0:
                    self.progress(index, total, now)
                if isinstance(template, str):
                    outcome.rejected = template
                    continue
                spec, priority = template
                spec = spec.model_copy(update={"name": job.name})
                specs[job.name] = (spec, priority)
                scheduler.submit(spec, priority=priority, submitted_at=job.submit)
                pending += 1
                if recorder is not None and recorder.arrived(outcome):
                    sampled.append(job.name)
            if recorder is not None and sampled:
                recorder.estimate(scheduler, now, sampled)

            if not pending:
                due = None  # nothing waits, so a cycle has nothing to decide
            elif due is None:
                # Every event calls for a cycle: now, or at the next multiple of the period.
                due = max(now, math.ceil(now / tick) * tick) if tick else now
            if due is None or now < due:
                series.record(now, busy, paid(), pending, len(running))
                continue
            due = None
            while saves and saves[0][0] <= now:  # the runs' checkpoints up to now
                at, _, name, attempt = heapq.heappop(saves)
                run = running.get(name)
                if run is None or run.attempt != attempt:
                    continue
                scheduler.report_checkpoint(name, at)
                every = intervals[name]
                assert every  # only runs with an interval above 0 schedule saves
                if at + every < run.start + run.remaining:
                    seq += 1
                    heapq.heappush(saves, (at + every, seq, name, attempt))
            for _ in range(MAX_CYCLES_PER_INSTANT):
                result = scheduler.cycle(now)
                cycles += 1
                for adm in result.admissions:
                    name = adm.job
                    o = by_name[name]
                    if o.first_admit is None:
                        o.first_admit = now
                    attempt = attempts[name] = attempts.get(name, 0) + 1
                    left = remaining.get(name, o.duration)
                    placed = tuple(n for ps in adm.pod_sets for n in ps.nodes)
                    spec, priority = specs[name]
                    running[name] = _Run(o, now, left, attempt, placed, spec, priority)
                    meter.place(placed, now)
                    if autoscaler is not None:
                        autoscaler.placed(name)
                    busy += o.gpus
                    pending -= 1
                    seq += 1
                    heapq.heappush(finishes, (now + left, seq, name, attempt))
                    every = intervals[name]
                    if every and every < left:
                        seq += 1
                        heapq.heappush(saves, (now + every, seq, name, attempt))
                    # Pods start as they are admitted here, so the first admission is the start.
                    limit = deadline_at(self.max_runtime, first_start.setdefault(name, now), now)
                    if limit is not None and limit < now + left:
                        heapq.heappush(deadlines, (limit, seq, name, attempt))
                    for node in placed if track_nodes else ():
                        node_jobs.setdefault(node, set()).add(name)
                for p in result.preemptions:
                    if p.victim in running:
                        by_name[p.victim].preemptions += 1
                        preemptions += 1
                        stop(p.victim, now, requeue=True)
                # New pools asked for; a pool taken over or a stockout calls for a cycle now.
                again = (autoscaler is not None and bool(result.provisioning)
                         and autoscaler.needs(result.provisioning, now))
                if not result.preemptions and not again:
                    break
            ends = scheduler.protection_ends()
            if pending and ends is not None and ends > now and (not wakes or wakes[0] != ends):
                heapq.heappush(wakes, ends)  # the protected may then make room
            series.record(now, busy, paid(), pending, len(running))

        end = max(series.t[-1] if series.t else 0.0,
                  max((o.finish for o in outcomes if o.finish is not None), default=0.0))
        if autoscaler is not None:
            autoscaler.close(end)
        meter.close(end)
        wall = time.perf_counter() - started
        replay = self._result(outcomes, series, team_seconds, {
            "cycles": cycles, "instants": instants, "preemptions": preemptions,
            "evictions": evictions, "node_failures": node_failures, "wasted": wasted,
            "failed": failed, "lost_to_failures": lost_to_failures,
            "goodput": goodput, "wall": wall,
        }, meter, autoscaler)
        replay.summary["estimates"] = recorder.report(outcomes) if recorder else None
        return replay

    # ------------------------------------------------------------------ results
    def _nominal_gpus(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for name, cq in self.config.cluster_queues.items():
            out[name] = sum(q.nominal_quota for g in cq.resource_groups for f in g.flavors
                            for q in f.resources if q.name == GPU) / 1000
        return out

    def _result(self, outcomes: list[JobOutcome], series: Series,
                team_seconds: dict[str, float], counts: dict[str, float], meter: NodeMeter,
                autoscaler: Autoscaler | None) -> SimResult:
        finished = [o for o in outcomes if o.finish is not None]
        makespan = max((o.finish for o in finished if o.finish is not None), default=0.0)
        end = max(makespan, series.t[-1] if series.t else 0.0)
        area = series.integrals(end)
        delays = [d for o in outcomes if (d := o.delay) is not None]
        jcts = [j for o in outcomes if (j := o.jct) is not None]
        rejected = [o for o in outcomes if o.rejected]
        never = [o for o in outcomes if not o.rejected and not o.failed and o.finish is None]
        cap = area["capacity"] or 1.0
        used_total = sum(team_seconds.values()) or 1.0
        wall = counts["wall"]
        summary: dict[str, object] = {
            "policy": self.policy.name,
            "restart": self.restart,
            "tick_seconds": self.tick,
            "jobs": len(outcomes),
            "completed": len(finished),
            "rejected": len(rejected),
            "failed": int(counts["failed"]),
            "unfinished": len(never),
            "gpus": sum(n.allocatable.get(GPU, 0) // 1000 for n in self.nodes.values()),
            "nodes": len(self.nodes),
            "makespan": end,
            "gpu_utilisation": area["busy"] / cap,
            "gpu_hours_paid": area["capacity"] / 3600,  # GPUs up, or paid while booting
            "utilisation_while_waiting": (area["wait_busy"] / area["wait_capacity"]
                                          if area["wait_capacity"] else 0.0),
            "time_with_waiting_jobs": area["wait_time"] / end if end else 0.0,
            "goodput": counts["goodput"] / cap,
            "queueing_delay": stats(delays),
            "jct": stats(jcts),
            "gang_sizes": by_gang_size(outcomes),
            "preemptions": int(counts["preemptions"]),
            "preemptions_per_job": preemptions_per_job(outcomes),
            "evictions": int(counts["evictions"]),
            "node_failures": int(counts["node_failures"]),
            "wasted_gpu_hours": counts["wasted"] / 3600,
            "lost_to_preemption_gpu_hours": (counts["wasted"] - counts["lost_to_failures"]) / 3600,
            "lost_to_failures_gpu_hours": counts["lost_to_failures"] / 3600,
            "checkpoint_every": self.checkpoint_every,
            "min_runtime": self.min_runtime,
            "reserve_after": self.reserve_after,
            "cycles": int(counts["cycles"]),
            "instants": int(counts["instants"]),
            "wall_seconds": wall,
            "jobs_per_wall_second": len(outcomes) / wall if wall > 0 else 0.0,
            "rejected_examples": [f"{o.name}: {o.rejected}" for o in rejected[:5]],
            **meter.figures(),
            "autoscaling": autoscaler.stats.to_dict() if autoscaler is not None else None,
        }
        nominal = self._nominal_gpus()
        all_nominal = sum(nominal.values()) or 1.0
        demand: dict[str, float] = {}
        by_cq: dict[str, list[JobOutcome]] = {}
        for o in outcomes:
            demand[o.cluster_queue] = demand.get(o.cluster_queue, 0.0) + o.duration * o.gpus
            by_cq.setdefault(o.cluster_queue, []).append(o)
        all_demand = sum(demand.values()) or 1.0
        teams = []
        for name in sorted(self.config.cluster_queues):
            jobs = by_cq.get(name, [])
            team_delays = stats([d for o in jobs if (d := o.delay) is not None])
            used = team_seconds.get(name, 0.0)
            teams.append(TeamShare(
                cluster_queue=name, jobs=len(jobs), nominal_gpus=nominal[name],
                entitlement=nominal[name] / all_nominal, demand=demand.get(name, 0.0) / all_demand,
                gpu_hours=used / 3600, share=used / used_total, share_of_capacity=used / cap,
                mean_delay=team_delays["mean"], p99_delay=team_delays["p99"],
                preemptions=sum(o.preemptions for o in jobs),
            ))
        return SimResult(self.policy.name, summary, teams, series, outcomes)


def kept_progress(ran: float, every: float | None) -> float:
    """What a run of ``ran`` seconds keeps when it stops: its last checkpoint's worth."""
    if every is None:
        return 0.0
    if every == 0:
        return ran
    return math.floor(ran / every) * every


def with_queue_default(config: QueueConfig, field: str, value: float | None) -> QueueConfig:
    """``config`` with ``value`` as ``field`` (minRuntime, reserveAfter) of every ClusterQueue
    that sets none; None (and a minRuntime of 0) leaves it as it is."""
    if value is None or (field == "min_runtime" and not value):
        return config
    changed = [cq.model_copy(update={field: value})
               for cq in config.cluster_queues.values() if getattr(cq, field) is None]
    return config.merged(changed) if changed else config


def simulate(config: QueueConfig, nodes: Sequence[Node], trace: Sequence[TraceJob],
             policy: Policy | str = "config", *, restart: Restart = "restart",
             failures: FailureModel | None = None, tick: float = 0.0,
             max_runtime: float | None = None, restart_policy: RestartPolicy | None = None,
             progress: Callable[[int, int, float], None] | None = None,
             checkpoint_every: float | None = None,
             min_runtime: float | None = None, seed: int = 0,
             node_prices: dict[str, float] | None = None,
             estimate_every: int = 0, reserve_after: float | None = None) -> SimResult:
    """Run one simulation (see ``Simulator``)."""
    return Simulator(config, nodes, trace, policy, restart=restart, failures=failures,
                     tick=tick, max_runtime=max_runtime, restart_policy=restart_policy,
                     progress=progress, checkpoint_every=checkpoint_every,
                     min_runtime=min_runtime, seed=seed, node_prices=node_prices,
                     estimate_every=estimate_every, reserve_after=reserve_after).run()

