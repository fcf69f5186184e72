"""How long a CLI call takes before and while it answers: ``phalanx version``, ``phalanx
jobs`` (the first page) and ``phalanx describe JOB``, each a whole process against a live
local control plane, beside ``python -c pass`` measured in the same run.

It starts a real control plane (``phalanx up``, simulated compute plane), submits one job,
then runs the commands in turn, round after round (so a machine that slows down slows all
of them alike), and prints the median wall and CPU time of each with the aim of 150 ms
wall. Three more runs of each under ``python -X importtime`` says where its start-up goes,
by top-level package (the median of three runs).

    python -m benchmarks.cli_start                 # 20 rounds
    python -m benchmarks.cli_start --rounds 5      # smoke run
    python -m benchmarks.cli_start --baseline /tmp/before/src   # and an earlier tree's CLI

With ``--baseline`` each command also runs from an earlier tree's ``src`` folder (e.g.
``git archive REV src | tar -x -C /tmp/before``), in the same rounds, as "before: ...".
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from benchmarks.harness import ServerProcess, percentile, with_source, write_json
from phalanx.spec import JobSpec

console = Console(stderr=True)
AIM_MS = 150.0
NODES = "nodes:\n  - name: sim-a\n    allocatable: {cpu: 8, memory: 32Gi}\n"
JOB = "bench-start"
PHALANX = [sys.executable, "-m", "phalanx.cli.main"]
COMMANDS: dict[str, list[str]] = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "phalanx version": [*PHALANX, "version"],
    "phalanx jobs": [*PHALANX, "jobs"],
    f"phalanx describe {JOB}": [*PHALANX, "describe", JOB],
}
# Packages whose import time is shown on its own; the rest is summed as "other".
SHOWN = ("typer", "pydantic", "pydantic_core", "rich", "httpx", "httpcore", "h11", "anyio",
         "trio", "click", "pygments", "yaml", "phalanx")


def run_once(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one whole run of ``argv``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    subprocess.run(argv, env=env, check=True, capture_output=True)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def package_of(module: str) -> str:
    top = module.split(".")[0]
    if top == "phalanx":  # the project's own, by subpackage: spec and sdk are the big ones
        return ".".join(module.split(".")[:2])
    return top if top in SHOWN else "other"


def import_breakdown(argv: list[str], env: dict[str, str], runs: int = 3) -> dict[str, float]:
    """Milliseconds of import time per package under ``-X importtime`` (self times, so
    nothing counts twice), the median of ``runs`` runs per package."""
    spent: dict[str, list[float]] = defaultdict(lambda: [0.0] * runs)
    for run in range(runs):
        done = subprocess.run([argv[0], "-X", "importtime", *argv[1:]], env=env, check=True,
                              capture_output=True, text=True)
        for line in done.stderr.splitlines():
            parts = line.split("|")
            if not line.startswith("import time:") or len(parts) != 3 or "self" in parts[0]:
                continue
            spent[package_of(parts[2].strip())][run] += int(parts[0].split(":")[1]) / 1000
    medians = {package: percentile(times, 50) for package, times in spent.items()}
    return dict(sorted(medians.items(), key=lambda item: -item[1]))


def measure(rounds: int, baseline: Path | None = None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="phalanx-bench-") as tmp:
        home = Path(tmp) / "home"
        (Path(tmp) / "nodes.yaml").write_text(NODES)
        args = ["--compute", "simulated", "--nodes", str(Path(tmp) / "nodes.yaml")]
        with ServerProcess(home, *args) as server:
            console.log(f"control plane at {server.url}")
            with server.client() as client:
                client.submit(JobSpec.model_validate({
                    "name": JOB, "podSets": [{"name": "w", "resources": {"cpu": "100m"},
                                              "command": ["sleep", "0"]}]}))
            env = {**os.environ, "PHALANX_HOME": str(home), "COLUMNS": "200"}
            env.pop("PHALANX_URL", None)
            env.pop("PHALANX_TOKEN", None)
            # Bytecode as an installed package has it (pip compiles it at install): a shell
            # that sets PYTHONDONTWRITEBYTECODE would otherwise have every run of a source
            # tree compile its modules anew, tens of milliseconds that no user pays.
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            # Each command with its environment; an earlier tree's beside this one's.
            commands = {name: (argv, env) for name, argv in COMMANDS.items()}
            if baseline is not None:
                commands |= {f"before: {name}": (argv, with_source(env, baseline))
                             for name, argv in COMMANDS.items() if name != "python -c pass"}
            for argv, cmd_env in commands.values():  # warm the file cache and the bytecode
                run_once(argv, cmd_env)
            walls: dict[str, list[float]] = {name: [] for name in commands}
            cpus: dict[str, list[float]] = {name: [] for name in commands}
            for _ in range(rounds):
                for name, (argv, cmd_env) in commands.items():
                    wall, cpu = run_once(argv, cmd_env)
                    walls[name].append(wall)
                    cpus[name].append(cpu)
            imports = {name: import_breakdown(argv, cmd_env)
                       for name, (argv, cmd_env) in commands.items()
                       if name != "python -c pass"}
    python = percentile(walls["python -c pass"], 50)
    results = {
        name: {"wall_p50_ms": percentile(walls[name], 50) * 1000,
               "wall_min_ms": min(walls[name]) * 1000,
               "cpu_p50_ms": percentile(cpus[name], 50) * 1000,
               "times_python": percentile(walls[name], 50) / python}
        for name in commands
    }
    return {"rounds": rounds, "aim_ms": AIM_MS, "commands": results, "imports_ms": imports,
            "load_average": os.getloadavg()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20, help="runs of each command")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--baseline", type=Path, default=None, metavar="SRC",
                        help="also run each command from this src folder, in the same rounds")
    args = parser.parse_args()

    result = measure(args.rounds, args.baseline)
    table = Table(title=f"CLI calls, whole process, median of {args.rounds} "
                  f"(aim: under {AIM_MS:.0f} ms wall on a quiet machine; load average "
                  f"{result['load_average'][0]:.1f} at the end)")
    table.add_column("command", no_wrap=True)
    for column in ("wall p50 ms", "wall min ms", "CPU p50 ms", "x python -c pass"):
        table.add_column(column, justify="right")
    for name, r in result["commands"].items():
        table.add_row(name, f"{r['wall_p50_ms']:.0f}", f"{r['wall_min_ms']:.0f}",
                      f"{r['cpu_p50_ms']:.0f}", f"{r['times_python']:.1f}")
    Console().print(table)
    imports = Table(title="Where start-up goes: import time by package, ms (median of 3)")
    imports.add_column("package")
    for name in result["imports_ms"]:
        imports.add_column(name.replace("phalanx ", "").replace(f" {JOB}", ""), justify="right")
    packages = sorted({p for spent in result["imports_ms"].values() for p in spent},
                      key=lambda p: -max(s.get(p, 0.0) for s in result["imports_ms"].values()))
    for package in packages:
        imports.add_row(package, *(f"{spent.get(package, 0.0):.0f}"
                                   for spent in result["imports_ms"].values()))
    imports.add_row("total", *(f"{sum(spent.values()):.0f}"
                               for spent in result["imports_ms"].values()))
    Console().print(imports)
    path = write_json("cli_start", result, args.out)
    console.log(f"wrote {path}")


if __name__ == "__main__":
    main()
