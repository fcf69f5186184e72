"""What-if: replay a trace through the simulator on the server, bounded, and show the report.

The replay is ``phalanx sim`` in a subprocess of its own (the simulator is not the
server's to import, and a process can be stopped): at most ``MAX_JOBS`` jobs, an upload
of at most ``MAX_UPLOAD_BYTES``, ``TIME_LIMIT_SECONDS`` of wall time, one replay at a
time. The bundled sample is the first 1,500 jobs of Microsoft's Philly trace (see
``samples/README.md``) with its teams as queues in one cohort on 256 GPUs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from anyio import to_thread
from fastapi import APIRouter, Request
from starlette.datastructures import UploadFile
from starlette.responses import HTMLResponse

from phalanx.errors import PayloadTooLarge, SpecError, TooManyRequests
from phalanx.server.ui import charts
from phalanx.server.ui.context import Dashboard

SAMPLES = Path(__file__).parent / "samples"
SAMPLE_TRACE = SAMPLES / "philly-sample.csv"
SAMPLE_QUEUES = SAMPLES / "philly-queues.yaml"
SAMPLE_NODES = SAMPLES / "philly-nodes.yaml"
MAX_UPLOAD_BYTES = 4 * 2**20
MAX_YAML_BYTES = 256 * 2**10
MAX_JOBS = 20_000
TIME_LIMIT_SECONDS = 120.0
TICK_SECONDS = 60.0
POLICIES = ("config", "phalanx", "fifo")


class Replay:
    """One replay at a time: a second is refused while the first runs."""

    def __init__(self) -> None:
        self._busy = threading.Lock()

    def run(self, trace: bytes, queues: str, nodes: str, limit: int,
            policies: list[str]) -> dict[str, Any]:
        if not self._busy.acquire(blocking=False):
            raise TooManyRequests("another what-if replay is running", field="trace",
                                  fix="wait for it to finish (at most "
                                      f"{TIME_LIMIT_SECONDS:.0f} s), then run yours")
        try:
            with tempfile.TemporaryDirectory(prefix="phalanx-whatif-") as tmp:
                work = Path(tmp)
                (work / "trace.csv").write_bytes(trace)
                (work / "queues.yaml").write_text(queues)
                (work / "nodes.yaml").write_text(nodes)
                command = [
                    sys.executable, "-m", "phalanx.cli.main", "sim",
                    "--trace", str(work / "trace.csv"), "--queues", str(work / "queues.yaml"),
                    "--nodes", str(work / "nodes.yaml"), "--limit", str(limit),
                    "--tick", str(TICK_SECONDS), "--json", str(work / "out.json"),
                ]
                for policy in policies:
                    command += ["--policy", policy]
                try:
                    done = subprocess.run(command, capture_output=True, text=True, cwd=work,
                                          timeout=TIME_LIMIT_SECONDS, stdin=subprocess.DEVNULL)
                except subprocess.TimeoutExpired:
                    raise SpecError(
                        f"the replay took longer than {TIME_LIMIT_SECONDS:.0f} s", field="limit",
                        fix="replay fewer jobs (a smaller limit) or compare fewer policies",
                    ) from None
                if done.returncode != 0:
                    # phalanx sim names the field and the fix on its last lines.
                    message = (done.stderr.strip() or done.stdout.strip()).splitlines()[-3:]
                    raise SpecError(" ".join(message) or "the replay failed", field="trace",
                                    fix="correct the trace, queues or nodes as the message says")
                result: dict[str, Any] = json.loads((work / "out.json").read_text())
                return result
        finally:
            self._busy.release()


def report(result: dict[str, Any]) -> dict[str, Any]:
    """The policies side by side: their summaries and teams (one column each), and charts
    of the replay's series with one line per policy, on the same axes."""
    runs = []
    utilisation, pending = [], []
    t0 = min((run["series"]["t"][0] for run in result["runs"] if run["series"]["t"]),
             default=0.0)
    for run in result["runs"]:
        series = run["series"]
        hours = [(x - t0) / 3600 for x in series["t"]]
        utilisation.append(charts.Line(run["policy"], [
            (h, 100 * b / c if c else 0.0)
            for h, b, c in zip(hours, series["busy"], series["capacity"], strict=False)]))
        pending.append(charts.Line(run["policy"],
                                   list(zip(hours, series["pending"], strict=False))))
        runs.append({"policy": run["policy"], "summary": run["summary"],
                     "teams": run["teams"]})
    end = max((line.points[-1][0] for line in utilisation if line.points), default=0.0)
    axis = "simulated time since the first job (h)"
    ends = ("0", f"{end:.1f} h")
    return {
        "runs": runs,
        "utilisation": charts.lines_chart(
            utilisation, title="GPU utilisation by policy", y_axis="GPUs busy (%)",
            x_axis=axis, unit="%", top=100, x_labels=ends),
        "pending": charts.lines_chart(
            pending, title="Jobs pending by policy", y_axis="jobs pending (jobs)",
            x_axis=axis, unit="jobs", x_labels=ends),
    }


def router(d: Dashboard) -> APIRouter:
    r = APIRouter()
    replay = Replay()

    def form_page(request: Request, **values: Any) -> HTMLResponse:
        session = d.session(request)
        defaults: dict[str, Any] = {
            "queues": SAMPLE_QUEUES.read_text(), "nodes": SAMPLE_NODES.read_text(),
            "limit": 1500, "policies": ["config"], "report": None, "error": None,
            "max_jobs": MAX_JOBS, "all_policies": POLICIES, "time_limit": TIME_LIMIT_SECONDS}
        return d.page(request, "whatif.html", session, page="whatif", **(defaults | values))

    @r.get("/whatif")
    def whatif_form(request: Request) -> HTMLResponse:
        return form_page(request)

    @r.post("/whatif")
    async def whatif(request: Request) -> HTMLResponse:
        _, form = await d.acting(request)
        queues = str(form.get("queues", ""))
        nodes = str(form.get("nodes", ""))
        policies = [p for p in POLICIES if form.get(f"policy-{p}")] or ["config"]
        limit_text = str(form.get("limit", "")).strip() or str(MAX_JOBS)
        upload = form.get("trace")
        if not limit_text.isdigit() or not 1 <= int(limit_text) <= MAX_JOBS:
            raise SpecError(f"{limit_text!r} is not a number of jobs", field="limit",
                            fix=f"give a number from 1 to {MAX_JOBS}")
        if len(queues) > MAX_YAML_BYTES or len(nodes) > MAX_YAML_BYTES:
            raise PayloadTooLarge(f"queues and nodes take at most {MAX_YAML_BYTES} bytes each",
                                  field="queues", fix="describe fewer queues or nodes")
        if isinstance(upload, UploadFile) and upload.filename:
            trace = await upload.read(MAX_UPLOAD_BYTES + 1)
            if len(trace) > MAX_UPLOAD_BYTES:
                raise PayloadTooLarge(
                    f"the trace is larger than {MAX_UPLOAD_BYTES // 2**20} MiB", field="trace",
                    fix=f"upload fewer jobs (at most {MAX_JOBS:,} are replayed anyway)")
        else:
            trace = SAMPLE_TRACE.read_bytes()
        result = await to_thread.run_sync(replay.run, trace, queues, nodes, int(limit_text),
                                          policies)
        return form_page(request, queues=queues, nodes=nodes, limit=int(limit_text),
                         policies=policies, report=report(result),
                         sample=not (isinstance(upload, UploadFile) and upload.filename))

    return r
