"""The RayJob submitter: what the head pod of a Ray job with an entrypoint runs once its
Ray head has started (KubeRay runs the same steps in a submitter pod).

It is shipped to the pod as the source text ``SUBMITTER`` (``python -c``), not imported
there: a pod's image has Ray and Python, not Phalanx. It reads its settings from the
``PHALANX_RAY_*`` variables the Ray kind sets, then

1. waits until every Ray node of the gang is alive (the dashboard's state API), so the
   entrypoint's tasks can spread over the whole cluster from its first line;
2. submits the entrypoint through Ray's JobSubmissionClient, with the job's runtime_env;
3. copies the entrypoint's log to its own output, so the Phalanx job's logs are the
   entrypoint's;
4. exits 0 when the Ray job succeeded, else with the driver's exit code (1 when Ray knows
   none), printing Ray's message: the Phalanx job fails when its entrypoint fails.

A SIGTERM (the job cancelled or preempted) stops the Ray job and exits at once.
"""

from __future__ import annotations

SUBMITTER = r'''
import asyncio, json, logging, os, signal, sys, time, urllib.request
from ray.job_submission import JobStatus, JobSubmissionClient

logging.getLogger("ray.dashboard").setLevel(logging.WARNING)  # the log is the entrypoint's

env = os.environ
url = env["PHALANX_RAY_DASHBOARD"]
wanted = int(env["PHALANX_RAY_NODES"])
submission = env["PHALANX_RAY_SUBMISSION_ID"]
alive_url = (url + "/api/v0/nodes?limit=10000&filter_keys=state&filter_predicates=%3D"
             "&filter_values=ALIVE")

def alive():
    try:
        with urllib.request.urlopen(alive_url, timeout=10) as answer:
            body = json.load(answer)
        return len(body["data"]["result"]["result"])
    except Exception:
        return 0

while alive() < wanted:
    time.sleep(1)

client = JobSubmissionClient(url)
client.submit_job(
    entrypoint=env["PHALANX_RAY_ENTRYPOINT"], submission_id=submission,
    runtime_env=json.loads(env.get("PHALANX_RAY_RUNTIME_ENV") or "{}") or None,
    entrypoint_num_cpus=float(env["PHALANX_RAY_ENTRYPOINT_CPUS"] or 0) or None,
    entrypoint_num_gpus=float(env["PHALANX_RAY_ENTRYPOINT_GPUS"] or 0) or None,
)

def stop(signum, frame):
    try:
        client.stop_job(submission)
    finally:
        os._exit(128 + signum)

signal.signal(signal.SIGTERM, stop)

async def follow():
    async for lines in client.tail_job_logs(submission):
        sys.stdout.write(lines)
        sys.stdout.flush()

asyncio.run(follow())
info = client.get_job_info(submission)
while not info.status.is_terminal():
    time.sleep(0.5)
    info = client.get_job_info(submission)
if info.status == JobStatus.SUCCEEDED:
    sys.exit(0)
# Ray's message repeats the log's tail after its first line: the log is above already.
why = (info.message or "").splitlines()[0].rstrip(",: ") if info.message else ""
print(f"ray job {submission} {info.status}" + (f": {why}" if why else ""), file=sys.stderr,
      flush=True)
code = getattr(info, "driver_exit_code", None)
sys.exit(code if isinstance(code, int) and 0 < code < 256 else 1)
'''
