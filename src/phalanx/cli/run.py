"""``phalanx run -- COMMAND...``: a job from the command line, as ``sky launch`` or
``sbatch --wrap``, with the current directory as its ``workdir``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

import typer

from phalanx.cli.output import note, reports_errors, write_line
from phalanx.cli.settings import settings_of
from phalanx.errors import SpecError
from phalanx.spec import JobSpec, validate
from phalanx.spec.overrides import split_assignment

_NOT_NAME = re.compile(r"[^a-z0-9-]+")


def name_prefix(command: list[str]) -> str:
    """A generateName from the program a command runs: ``python train.py`` -> ``python-``."""
    program = Path(command[0]).name.lower() if command else ""
    clean = _NOT_NAME.sub("-", program).strip("-")[:40].rstrip("-")
    return f"{clean or 'run'}-"


def run_spec(command: list[str], *, gpus: int, cpus: str | None, memory: str | None,
             nodes: int, queue: str | None, image: str | None, env: list[str],
             name: str | None, kind: str, workdir: str | None) -> JobSpec:
    """The job ``phalanx run`` submits (validated: errors name the option at fault)."""
    if not command:
        raise SpecError("no command to run", field="COMMAND",
                        fix="give it after --, e.g. phalanx run -- python train.py")
    resources: dict[str, Any] = {}
    if cpus is not None:
        resources["cpu"] = cpus
    if memory is not None:
        resources["memory"] = memory
    if gpus:
        resources["nvidia.com/gpu"] = gpus
    pod_set: dict[str, Any] = {"name": "worker", "replicas": nodes, "command": command,
                               "resources": resources,
                               "env": dict(split_assignment(e, "--env") for e in env)}
    if image is not None:
        pod_set["image"] = image
    document: dict[str, Any] = {"kind": kind, "podSets": [pod_set]}
    if name is not None:
        document["name"] = name
    else:
        document["generateName"] = name_prefix(command)
    if queue is not None:
        document["queue"] = queue
    if workdir is not None:
        document["workdir"] = workdir
    return validate(JobSpec, document)


@reports_errors
def run(
    ctx: typer.Context,
    command: Annotated[list[str], typer.Argument(help="The command, after --")],
    gpus: Annotated[int, typer.Option(min=0, help="GPUs per pod")] = 0,
    cpus: Annotated[str | None, typer.Option(help="CPUs per pod, e.g. 4 or 500m")] = None,
    memory: Annotated[str | None, typer.Option(help="Memory per pod, e.g. 16Gi")] = None,
    nodes: Annotated[int, typer.Option(min=1, help="Pods (one per node for torch)")] = 1,
    queue: Annotated[str | None, typer.Option("--queue", "-q", help="The LocalQueue")]
    = None,
    image: Annotated[str | None, typer.Option(help="The image (Kubernetes)")] = None,
    env: Annotated[list[str] | None, typer.Option(
        "--env", "-e", help="K=V in the pods' environment (repeatable)")] = None,
    name: Annotated[str | None, typer.Option(
        help="The job's name (default: the program's name and 5 random characters)")]
    = None,
    kind: Annotated[str, typer.Option(help="generic, torch, mpi or ray")] = "generic",
    workdir: Annotated[str, typer.Option(
        help="The directory the pods start in, a copy of it ('' for none)")] = ".",
    follow: Annotated[bool, typer.Option(
        "--follow", "-f", help="Stream the logs, then wait for the end")] = False,
    wait: Annotated[bool, typer.Option(
        "--wait", help="Wait for the job; exit 0 only if it succeeded")] = False,
) -> None:
    """Run COMMAND as a job, in a copy of the current directory (like sbatch --wrap)."""
    spec = run_spec(command, gpus=gpus, cpus=cpus, memory=memory, nodes=nodes,
                    queue=queue, image=image, env=env or [], name=name, kind=kind,
                    workdir=workdir or None)
    with settings_of(ctx).client() as client:
        record = client.submit(spec, base=Path.cwd())
        write_line(record.name)
        note(f"job {record.name} submitted to queue {record.queue} "
             f"({record.status.value})")
        if follow:
            for line in client.logs(record.name, follow=True):
                write_line(line)
        if wait or follow:
            from phalanx.cli.jobs import _finish

            _finish(client, record.name)


# Everything after the command's first word is the command's own (``phalanx run -- ls -l``).
run.context_settings = {"allow_interspersed_args": False}  # type: ignore[attr-defined]
