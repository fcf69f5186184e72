"""``phalanx doctor``: the node health agent.

Runs this node's checks once (``--once``, exit 1 on any ERR) or every
``--interval``. With ``--report kubernetes`` (the node-doctor DaemonSet) each
report goes onto this node's Node object, where the control plane reads it.
"""

from __future__ import annotations

import os
import socket
import tempfile
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from phalanx.cli.output import EXIT_FAILED, note, out, print_json, reports_errors
from phalanx.defaults import phalanx_home
from phalanx.spec.quantity import parse_duration

if TYPE_CHECKING:
    from phalanx.health import Report

STYLES = {"PASS": "green", "WARN": "yellow", "ERR": "bold red", "N/A": "dim"}
SITE_DIR = Path("/etc/phalanx/checks.d")


class ReportTo(StrEnum):
    NONE = "none"
    KUBERNETES = "kubernetes"


@reports_errors
def doctor(
    once: Annotated[bool, typer.Option("--once", help="Run the checks once and exit "
                                       "(1 if any answered ERR)")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print each report as JSON")] = False,
    interval: Annotated[str, typer.Option(help="Time between runs, e.g. 60s, 5m")] = "60s",
    node: Annotated[str | None, typer.Option(help="This node's name (default: $NODE_NAME, "
                                             "else the host name)")] = None,
    expect_gpus: Annotated[int | None, typer.Option(
        help="GPUs this node should have (default: what its Node advertises with "
        "--report kubernetes, else not checked)")] = None,
    site_dir: Annotated[Path, typer.Option(
        help="Directory of site checks (executables: exit 0/1/2 = PASS/WARN/ERR)")] = SITE_DIR,
    site_timeout: Annotated[str, typer.Option(help="Time limit of each site check")] = "60s",
    disk: Annotated[list[Path] | None, typer.Option(
        help="Paths whose free disk to check (repeatable; default: the state directory and "
        "the temporary directory)")] = None,
    report: Annotated[ReportTo, typer.Option(
        help="Where reports go besides stdout: kubernetes writes them on this node's Node")
    ] = ReportTo.NONE,
    kubeconfig: Annotated[Path | None, typer.Option(
        help="Kubeconfig for --report kubernetes (default: in-cluster)")] = None,
) -> None:
    """Check this node's health: GPUs (NVML), disk, memory and the site's own checks."""
    from phalanx.health import make_doctor  # NVML and psutil load only for the doctor

    period = parse_duration(interval, field="--interval")
    name = node or os.environ.get("NODE_NAME") or socket.gethostname()
    reporter = None
    if report is ReportTo.KUBERNETES:
        from phalanx.compute.kubernetes.client import KubeClient, configure
        from phalanx.compute.kubernetes.health import NodeReporter

        configuration, _ = configure(kubeconfig=kubeconfig)
        reporter = NodeReporter(KubeClient(configuration), name)

    def expected() -> int | None:
        if expect_gpus is not None:
            return expect_gpus
        return reporter.advertised_gpus() if reporter is not None else None

    paths = disk or [phalanx_home(None), Path(tempfile.gettempdir())]
    doctor_ = make_doctor(name, expected_gpus=expected, disk_paths=paths, site_dir=site_dir,
                          site_timeout=parse_duration(site_timeout, field="--site-timeout"))

    def show(result: Report) -> None:
        if reporter is not None:
            reporter.report(result)
        if as_json:
            print_json(result.to_dict())
        else:
            out().print(report_table(result))

    try:
        if once:
            result = doctor_.run()
            show(result)
            if result.status == "ERR":
                raise typer.Exit(EXIT_FAILED)
            return
        note(f"node doctor on {name}: checking every {period:g}s")
        doctor_.start(period, show)
        doctor_.wait()
    finally:
        doctor_.close()


def report_table(report: Report) -> Table:
    table = Table(title=f"{report.node}: {report.health.value}", title_justify="left")
    for column in ("CHECK", "STATUS", "MESSAGE"):
        table.add_column(column)
    for check in report.checks:
        table.add_row(check.name, f"[{STYLES[check.status.value]}]{check.status.value}[/]",
                      check.message)
    return table
