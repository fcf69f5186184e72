"""``phalanx sim``: replay a job trace against queues and nodes in virtual time.

A what-if tool for quotas: no control plane is started; the scheduler core runs
in this process against simulated nodes. Prints a report, and optionally writes
JSON (``--json``) and PNG plots (``--plots``).
"""

from __future__ import annotations

import json
from dataclasses import replace
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from phalanx.cli.output import note, out, reports_errors
from phalanx.errors import SpecError
from phalanx.sdk.documents import read_text
from phalanx.sim import (
    FailureModel,
    NodeFailure,
    TraceFormat,
    load_nodes,
    policy_named,
    read_trace,
    simulate,
)
from phalanx.sim.autoscale import fixed_equivalent
from phalanx.sim.policy import Policy
from phalanx.sim.report import gang_table, summary_table, teams_table
from phalanx.spec import Node, QueueConfig, load_config_yaml
from phalanx.spec.quantity import parse_duration


class RestartMode(StrEnum):
    RESTART = "restart"
    RESUME = "resume"


def load_queues(path: Path) -> QueueConfig:
    return QueueConfig().merged(load_config_yaml(read_text(path), source=str(path)))


def load_failure_schedule(path: Path) -> list[NodeFailure]:
    """A YAML list of ``{at: SECONDS, node: NAME, downFor: SECONDS}``."""
    source = str(path)
    try:
        data = yaml.safe_load(read_text(path))
    except yaml.YAMLError as exc:
        raise SpecError(f"is not valid YAML: {exc}", field=source,
                        fix="fix the YAML syntax") from None
    if not isinstance(data, list):
        raise SpecError("is not a list", field=source,
                        fix="write a list of {at, node, downFor} entries")
    out = []
    for i, entry in enumerate(data):
        where = f"{source}[{i}]"
        if not isinstance(entry, dict) or set(entry) - {"at", "node", "downFor"}:
            raise SpecError("must be a mapping with at, node and downFor", field=where,
                            fix="e.g. {at: 3600, node: gpu-03, downFor: 7200}")
        try:
            at = float(entry["at"])
            down = float(entry.get("downFor", 3600))
            node = str(entry["node"])
        except KeyError as exc:
            raise SpecError("is required", field=f"{where}.{exc.args[0]}", fix="add it") from None
        except (TypeError, ValueError):
            raise SpecError("at and downFor must be numbers of seconds", field=where,
                            fix="e.g. {at: 3600, node: gpu-03, downFor: 7200}") from None
        out.append(NodeFailure(at, node, down))
    return out


@reports_errors
def sim(
    trace: Annotated[Path, typer.Option(help="Trace CSV: Philly's, or submit,duration,gpus,team")],
    queues: Annotated[Path, typer.Option(help="YAML queue config (as for phalanx apply)")],
    nodes: Annotated[
        Path | None, typer.Option(help="YAML list of nodes (entries may have count); may be "
                                       "left out when flavors buy node pools (provisioning)")
    ] = None,
    policy: Annotated[
        list[str] | None,
        typer.Option(help="config (the file as written), phalanx (defaults: borrowing, reclaim, "
                          "fair sharing), fifo (strict, no borrowing); repeat to compare")
    ] = None,
    trace_format: Annotated[
        TraceFormat, typer.Option("--format", help="Trace format")
    ] = TraceFormat.AUTO,
    restart: Annotated[
        RestartMode, typer.Option(help="After preemption or node loss: restart from zero or "
                                       "resume")
    ] = RestartMode.RESTART,
    failure_rate: Annotated[
        float, typer.Option(help="Random node failures per node per day (0: none)")
    ] = 0.0,
    repair_seconds: Annotated[
        float, typer.Option(help="Seconds a randomly failed node stays down")
    ] = 3600.0,
    failure_schedule: Annotated[
        Path | None, typer.Option(help="YAML list of {at, node, downFor} failures")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed for random node failures and stockouts "
                                           "drawn at a rate")] = 0,
    checkpoint_every: Annotated[
        str | None, typer.Option(help="Jobs checkpoint this often (e.g. 30m): a stopped run "
                                      "keeps its last checkpoint (a trace's checkpoint_every "
                                      "column sets it per job)")
    ] = None,
    min_runtime: Annotated[
        str | None, typer.Option(help="minRuntime (e.g. 30m) for every ClusterQueue that sets "
                                      "none: younger jobs are no reclaim or fair-sharing victims")
    ] = None,
    reserve_after: Annotated[
        str | None, typer.Option(help="reserveAfter (e.g. 1h) for every ClusterQueue that sets "
                                      "none: a head that waited this long gets a reservation "
                                      "at its earliest start, and later jobs backfill around it")
    ] = None,
    tick: Annotated[
        float, typer.Option(help="Scheduling period in simulated seconds (0: a cycle at every "
                                 "event)")
    ] = 0.0,
    limit: Annotated[
        int | None, typer.Option(help="Replay only the first N jobs (by submission time)",
                                 min=1)
    ] = None,
    against_fixed: Annotated[
        bool, typer.Option(help="With flavors that buy node pools (provisioning): replay "
                                "each policy again on a fixed cluster of the same peak size "
                                "(every such flavor's maxNodes bought up front), to compare "
                                "node-hours, idle node-hours, spend and delays")
    ] = False,
    estimates: Annotated[
        bool, typer.Option(help="Estimate each job's start at its submit with the control "
                                "plane's forecast (run times from the replay's finished jobs) "
                                "and report how close the estimates came to the actual starts "
                                "of jobs that waited over 10 minutes (a forecast per arrival: "
                                "slow on long traces; see --estimate-every)")
    ] = False,
    estimate_every: Annotated[
        int, typer.Option(help="With --estimates: estimate every Nth arriving job only",
                          min=1)
    ] = 1,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write results as JSON")] = None,
    plots: Annotated[Path | None, typer.Option(help="Directory for PNG plots")] = None,
) -> None:
    """Replay a job trace through the scheduler in virtual time and report what happened."""
    chosen = [policy_named(p) for p in policy or ["config"]]
    every = parse_duration(checkpoint_every, field="--checkpoint-every") \
        if checkpoint_every is not None else None
    protect = parse_duration(min_runtime, field="--min-runtime") \
        if min_runtime is not None else None
    reserve = parse_duration(reserve_after, field="--reserve-after") \
        if reserve_after is not None else None
    config = load_queues(queues)
    node_list = load_nodes(nodes) if nodes is not None else []
    if nodes is None and not config.provisionable_flavors():
        raise SpecError("no nodes, and no flavor buys node pools", field="--nodes",
                        fix="give a YAML list of nodes, or add provisioning to a flavor")
    jobs = read_trace(trace, trace_format)
    if limit is not None:
        jobs = jobs[:limit]
    schedule = load_failure_schedule(failure_schedule) if failure_schedule else []
    failures = FailureModel(rate_per_day=failure_rate, repair_seconds=repair_seconds,
                            schedule=schedule, seed=seed)
    # (label, queues, nodes, node prices, policy) of each replay
    runs: list[tuple[str, QueueConfig, list[Node], dict[str, float] | None, Policy]] = [
        (each.name, config, node_list, None, each) for each in chosen]
    pooled = sorted(config.provisionable_flavors())
    if pooled:
        note(f"flavors {', '.join(pooled)} buy node pools in virtual time (the simulated "
             "provider, whichever provider they name)")
    if against_fixed:
        if not pooled:
            raise SpecError("no ResourceFlavor has provisioning, so there is nothing to "
                            "compare a fixed cluster with", field="--against-fixed",
                            fix="add provisioning to a flavor of the queues file, or leave "
                                "out --against-fixed")
        fixed = fixed_equivalent(config, node_list)
        runs = [run for each in chosen for run in (
            (f"{each.name} autoscaled", config, node_list, None, each),
            (f"{each.name} fixed", fixed.config, fixed.nodes, fixed.prices, each))]
    results = []
    for label, run_config, run_nodes, prices, each in runs:
        note(f"replaying {len(jobs):,} jobs on {len(run_nodes):,} nodes, policy {each.name} "
             f"({each.description}){'' if label == each.name else f', {label}'}")
        result = simulate(run_config, run_nodes, jobs, each, restart=restart.value,
                          failures=failures, tick=tick, checkpoint_every=every,
                          min_runtime=protect, seed=seed, node_prices=prices,
                          estimate_every=estimate_every if estimates else 0,
                          reserve_after=reserve)
        results.append(replace(result, policy=label))
    console = out()
    console.print(summary_table(results, f"Simulation of {trace.name}"))
    console.print(gang_table(results))
    console.print(teams_table(results))
    for example in results[0].summary["rejected_examples"]:
        note(f"rejected {example}", style="yellow")
    if json_out is not None:
        payload: dict[str, Any] = {
            "inputs": {"trace": str(trace), "queues": str(queues),
                       "nodes": str(nodes) if nodes else None,
                       "policies": [p.name for p in chosen], "restart": restart.value,
                       "failureRate": failure_rate, "repairSeconds": repair_seconds,
                       "seed": seed, "limit": limit, "tick": tick,
                       "checkpointEvery": every, "minRuntime": protect,
                       "reserveAfter": reserve,
                       "estimateEvery": estimate_every if estimates else 0,
                       "againstFixed": against_fixed},
            "runs": [r.to_dict() for r in results],
        }
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(payload, indent=2) + "\n")
        note(f"wrote {json_out}")
    if plots is not None:
        from phalanx.sim.plots import write_plots  # matplotlib loads only when asked for

        for path in write_plots(results, plots):
            note(f"wrote {path}")
