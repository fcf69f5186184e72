"""``kind: ray``: a Ray cluster as a gang, in the two shapes KubeRay users know.

A Ray job has a ``head`` pod set of one replica and any number of worker pod sets.
The head runs ``ray start --head --block`` (the GCS, the dashboard, the Ray client
server); each worker waits for the head's GCS and runs ``ray start --address=<head>
--block``. ``--num-cpus``, ``--num-gpus``, ``--memory`` and custom ``--resources`` come
from the pod's resources, so Ray schedules tasks within what Phalanx admitted.

- A long-lived cluster (no ``ray.entrypoint``, KubeRay's RayCluster) runs until it is
  taken down (``phalanx cluster down``: the job ends Cancelled); any pod failing fails
  the gang, as for every kind.
- A Ray job (``ray.entrypoint``, KubeRay's RayJob): the head starts Ray in the
  background, then runs the submitter (``ray_submitter.py``), which submits the
  entrypoint once every node joined and prints its logs. The job's outcome is the
  head's: it succeeds or fails with the entrypoint, and the workers are then stopped.
  The workers' own ``ray start`` output goes to a file beside Ray's logs, so the job's
  logs are the entrypoint's.

Ports: on Kubernetes every pod has an address of its own and the head listens on
Ray's well-known ports (GCS 6379, dashboard 8265, client 10001). On the local plane
every pod shares this machine, so every port a Ray node opens is one the plane chose
free (``PodNetwork.port``): GCS, dashboard, client, node manager, object manager,
runtime-env agent, dashboard agent (HTTP and gRPC), metrics, and one port per worker
process (``--worker-port-list``). Several clusters and several Ray nodes then share
the machine. Each local pod also gets a Ray temp dir of its own, on a short path (Ray's
Unix sockets live under it, and a socket path holds at most 107 bytes), removed when
the pod ends.

Addresses: on the local plane every port a Ray node opens is on the plane's pod
network, the loopback address the plane gives its pods, never the machine's external
interface. Ray replaces a loopback ``--node-ip-address`` (and head address) with the
machine's address, and its GCS, raylets and agents then listen on every interface; so
every local Ray pod runs with ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, which keeps
loopback addresses as Ray does on Windows and macOS. A worker's ``ray start`` refuses to
join a cluster that way, so it runs through ``LOOPBACK_RAY_START``: Ray's own command,
told to keep the loopback addresses it is given.

The dashboard's URL and the Ray client's address are recorded on the job
(``endpoints``).
"""

from __future__ import annotations

import json
import math
import os
import shlex
import tempfile
from collections.abc import Sequence

from phalanx.errors import SpecError
from phalanx.kinds.base import Framework, PodNetwork, PodPlan
from phalanx.kinds.env import PlacedPod, check_addresses, phalanx_environment, placed_pods
from phalanx.kinds.gangs import GangPhase, GangStatus, gang_status
from phalanx.kinds.pods import PodPhase, PodState
from phalanx.kinds.ray_submitter import SUBMITTER
from phalanx.scheduler.types import Admission
from phalanx.spec.quantity import MILLI
from phalanx.spec.ray import HEAD
from phalanx.spec.resources import GPU, JobKind, JobSpec, PodSet

# Ray's well-known ports, used where pods have addresses of their own (KubeRay's too).
GCS_PORT = 6379
DASHBOARD_PORT = 8265
CLIENT_PORT = 10001
METRICS_PORT = 8080
# Ray's smallest object store; below it `ray start` refuses to run.
MIN_OBJECT_STORE_BYTES = 75 * 1024 * 1024
# The share of a pod's memory its object store gets, as Ray sizes it inside a container.
OBJECT_STORE_SHARE = 0.3
# Ports a local Ray node gets for its worker processes: one each, beyond its CPUs for
# the drivers, actors and idle workers Ray keeps.
SPARE_WORKER_PORTS = 8
# Resources Ray has flags of its own for, or that are no Ray resource at all.
_NOT_CUSTOM = {"cpu", "memory", GPU, "ephemeral-storage", "pods"}

RAY_CLUSTER = "ray.io/v1 RayCluster"  # KubeRay's, which a Kubernetes plane may run it as
DASHBOARD_ENV = "PHALANX_RAY_DASHBOARD"
ADDRESS_ENV = "PHALANX_RAY_ADDRESS"
CLIENT_ENV = "PHALANX_RAY_CLIENT"
# Ray keeps loopback addresses with this off (see the module's docstring).
KEEP_LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
# `ray start` for a local worker node: Ray's command, keeping the loopback addresses it is
# given instead of resolving them to the machine's (shipped as source, like SUBMITTER).
LOOPBACK_RAY_START = (
    "import sys\n"
    "from ray._private import services\n"
    "services.resolve_ip_for_localhost = lambda host: host\n"
    "from ray.scripts.scripts import main\n"
    "sys.exit(main())\n"
)


class Ray(Framework):
    kind = JobKind.RAY
    operator_resource = RAY_CLUSTER

    # ------------------------------------------------------------------ submit
    def check(self, job: JobSpec) -> None:
        heads = [i for i, p in enumerate(job.pod_sets) if p.name == HEAD]
        if not heads:
            raise SpecError(
                "a Ray job has no head pod set", field="podSets",
                fix=f'add a pod set named "{HEAD}" with replicas: 1 (it runs the Ray head); '
                "the other pod sets are Ray workers",
            )
        head = job.pod_sets[heads[0]]
        where = f"podSets[{heads[0]}]"
        if head.replicas != 1:
            raise SpecError(
                f"the head pod set has {head.replicas} replicas", field=f"{where}.replicas",
                fix="give the head replicas: 1 (a Ray cluster has one head); put more "
                "nodes in a worker pod set",
            )
        for i, pod_set in enumerate(job.pod_sets):
            if pod_set.command:
                fix = ("remove it: Ray pods run `ray start`; put the program in "
                       "ray.entrypoint, or submit it to the cluster with `ray job submit`")
                raise SpecError(f"pod set {pod_set.name!r} of a Ray job has a command",
                                field=f"podSets[{i}].command", fix=fix)
            if pod_set.resources.get(GPU, 0) % MILLI:
                raise SpecError(
                    f"{pod_set.resources[GPU] / MILLI:g} GPUs requested; a Ray node "
                    "counts whole GPUs", field=f"podSets[{i}].resources.{GPU}",
                    fix="request a whole number of GPUs",
                )

    def needs_command(self, pod_set: PodSet) -> bool:
        return False

    # ------------------------------------------------------------------ launch
    def plan(
        self, job: JobSpec, attempt: int, admission: Admission, network: PodNetwork,
    ) -> list[PodPlan]:
        pods = placed_pods(job, attempt, admission)
        check_addresses(network.addresses, len(pods))
        head = next(p for p in pods if p.pod_set.name == HEAD)
        host = network.addresses[head.ref.rank]
        gcs = network.port(head.ref, "gcs", GCS_PORT)
        dashboard = network.port(head.ref, "dashboard", DASHBOARD_PORT)
        client = network.port(head.ref, "client", CLIENT_PORT)
        shared = {
            DASHBOARD_ENV: f"http://{host}:{dashboard}",
            ADDRESS_ENV: f"{host}:{gcs}",
            CLIENT_ENV: f"ray://{host}:{client}",
            # A stop is the plane's to time (its grace, then SIGKILL): Ray's own drain on
            # SIGTERM, meant for Serve upgrades, would only hold the stop up.
            "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0",
        }
        plans = []
        for pod in pods:
            ports = self._ports(pod, network, head=pod is head)
            env = phalanx_environment(pod, len(pods), master_addr=host, master_port=gcs,
                                      pod_addresses=network.addresses)
            env.update(shared)
            if network.shared_host:
                env[KEEP_LOOPBACK_ENV] = "0"
            if pod is head and job.ray is not None and job.ray.entrypoint is not None:
                env.update(_submitter_env(job, attempt, len(pods)))
            env.update(pod.pod_set.env)  # the user's word is last
            flags = _start_flags(pod, ports, network, gcs)
            command = (self._head_command(job, flags, network) if pod is head
                       else _worker_command(f"{host}:{gcs}", flags, network,
                                            quiet=_is_ray_job(job)))
            plans.append(PodPlan(pod.ref, pod.node, command, env, ports))
        return plans

    @staticmethod
    def _ports(pod: PlacedPod, network: PodNetwork, *, head: bool) -> dict[str, int]:
        """The ports this Ray node listens on, by purpose (the names its container's ports
        take on Kubernetes)."""
        ports: dict[str, int] = {}
        if head:
            ports["gcs"] = network.port(pod.ref, "gcs", GCS_PORT)
            ports["dashboard"] = network.port(pod.ref, "dashboard", DASHBOARD_PORT)
            ports["client"] = network.port(pod.ref, "client", CLIENT_PORT)
        ports["metrics"] = network.port(pod.ref, "metrics", METRICS_PORT)
        if not network.shared_host:
            return ports  # Ray picks the rest itself: nothing else listens in this pod
        for purpose in ("node-manager", "object-manager", "env-agent", "agent-http",
                        "agent-grpc"):
            ports[purpose] = network.port(pod.ref, purpose, 0)
        for i in range((_cpus(pod.pod_set) or 1) + SPARE_WORKER_PORTS):
            ports[f"worker-{i}"] = network.port(pod.ref, f"worker-{i}", 0)
        return ports

    @staticmethod
    def _head_command(job: JobSpec, flags: list[str], network: PodNetwork) -> list[str]:
        start = ["ray", "start", "--head", *flags]
        if not _is_ray_job(job):
            if not network.shared_host:
                return [*start, "--block"]
            return ["sh", "-c", _script([], shlex.join([*start, "--block"]), flags, network)]
        # Ray in the background, then the submitter in the foreground: the pod ends when
        # the entrypoint does, and its supervisor stops what Ray left in the pod.
        started = (f"if ! out=$({shlex.join(start)} 2>&1); then "
                   'printf "%s\\n" "$out" >&2; exit 1; fi')
        script = _script([started], 'python -c "$1"', flags, network)
        return ["sh", "-c", script, "ray-head", SUBMITTER]

    # ------------------------------------------------------------------ outcome
    def status(self, job: JobSpec, pods: list[PodState], expected: int) -> GangStatus:
        """A cluster is a gang like any other; a Ray job ends with its head (the
        entrypoint's submitter): the workers are stopped then, whatever they do."""
        head = next((p for p in pods if p.ref.pod_set == HEAD), None)
        if not _is_ray_job(job) or head is None or not head.phase.done:
            return gang_status(pods, expected)
        all_done = len(pods) >= expected and all(p.phase.done for p in pods)
        if head.phase is PodPhase.SUCCEEDED:
            return GangStatus(GangPhase.SUCCEEDED, all_done, exit_code=0,
                              message="the Ray job's entrypoint succeeded")
        status = gang_status([head], 1)
        return GangStatus(GangPhase.FAILED, all_done, status.failure,
                          status.message.replace("failed", "(the Ray job's entrypoint) failed",
                                                 1), status.exit_code)

    def endpoints(self, job: JobSpec, plans: Sequence[PodPlan]) -> dict[str, str]:
        head = next((p for p in plans if p.ref.pod_set == HEAD), None)
        if head is None:
            return {}
        return {"dashboard": head.env[DASHBOARD_ENV], "client": head.env[CLIENT_ENV]}


def _is_ray_job(job: JobSpec) -> bool:
    return job.ray is not None and job.ray.entrypoint is not None


def _cpus(pod_set: PodSet) -> int | None:
    """Whole CPUs a Ray node offers: its request rounded up (Ray counts whole CPUs)."""
    millis = pod_set.resources.get("cpu")
    return None if millis is None else math.ceil(millis / MILLI)


def _start_flags(
    pod: PlacedPod, ports: dict[str, int], network: PodNetwork, gcs: int,
) -> list[str]:
    """``ray start`` flags both roles share: resources, ports, names, temp dir."""
    pod_set = pod.pod_set
    flags = [f"--node-name={pod.ref.name}", "--disable-usage-stats",
             "--log-style=record", "--log-color=false"]
    cpus = _cpus(pod_set)
    if cpus is not None:
        flags.append(f"--num-cpus={cpus}")
    flags.append(f"--num-gpus={pod_set.resources.get(GPU, 0) // MILLI}")
    memory = pod_set.resources.get("memory")
    if memory is not None:
        memory_bytes = memory // MILLI
        flags.append(f"--memory={memory_bytes}")
        if network.shared_host:  # in a container Ray sizes it from the memory limit itself
            store = max(MIN_OBJECT_STORE_BYTES, int(memory_bytes * OBJECT_STORE_SHARE))
            flags.append(f"--object-store-memory={store}")
    custom = {name: millis / MILLI for name, millis in sorted(pod_set.resources.items())
              if name not in _NOT_CUSTOM and millis}
    if custom:
        flags.append(f"--resources={json.dumps(custom, separators=(',', ':'))}")
    flags.append(f"--metrics-export-port={ports['metrics']}")
    if "gcs" in ports:
        flags += [f"--port={ports['gcs']}", "--include-dashboard=true",
                  f"--dashboard-port={ports['dashboard']}",
                  f"--ray-client-server-port={ports['client']}",
                  f"--dashboard-host={'127.0.0.1' if network.shared_host else '0.0.0.0'}"]
    if network.shared_host:
        workers = ",".join(str(p) for k, p in ports.items() if k.startswith("worker-"))
        flags += [f"--node-ip-address={network.addresses[pod.ref.rank]}",
                  f"--node-manager-port={ports['node-manager']}",
                  f"--object-manager-port={ports['object-manager']}",
                  f"--runtime-env-agent-port={ports['env-agent']}",
                  f"--dashboard-agent-listen-port={ports['agent-http']}",
                  f"--dashboard-agent-grpc-port={ports['agent-grpc']}",
                  f"--worker-port-list={workers}",
                  f"--temp-dir={temp_dir(gcs, pod.ref.rank)}"]
    return flags


def temp_dir(gcs: int, rank: int) -> str:
    """A local Ray node's temp dir: short, under one directory per cluster named after its
    GCS port, which no other live cluster on this machine holds."""
    return f"{tempfile.gettempdir()}/ray-{gcs}/{rank}"


def _worker_command(
    gcs: str, flags: list[str], network: PodNetwork, *, quiet: bool,
) -> list[str]:
    """Wait for the head's GCS (a worker may start first), then join the cluster.

    ``quiet`` (a Ray job): ``ray start``'s output goes to a file in the node's temp dir,
    shown only if it fails, so the job's logs are the entrypoint's.
    """
    wait = (f"until ray health-check --address={shlex.quote(gcs)} >/dev/null 2>&1; "
            "do sleep 1; done")
    ray = ["ray"]
    if network.shared_host:  # Ray refuses a worker with KEEP_LOOPBACK_ENV=0: see above
        ray = ["env", f"{KEEP_LOOPBACK_ENV}=1", "python", "-c", LOOPBACK_RAY_START]
    start = shlex.join([*ray, "start", f"--address={gcs}", *flags, "--block"])
    if not quiet:
        return ["sh", "-c", _script([wait], start, flags, network)]
    temp = _temp_dir_of(flags) or "/tmp"
    log = shlex.quote(f"{temp}/ray-start.log")
    lines = [wait, f"mkdir -p {shlex.quote(temp)}", f"{start} >{log} 2>&1", "code=$?",
             f"[ $code -eq 0 ] || tail -n 40 {log} >&2"]
    return ["sh", "-c", _script(lines, "exit $code", flags, network)]


def _script(lines: list[str], last: str, flags: list[str], network: PodNetwork) -> str:
    """A pod's shell script: ``lines``, then ``last``.

    On Kubernetes ``last`` replaces the shell (``exec``): the container's first process
    gets the kubelet's SIGTERM. On the local plane the whole pod's group gets it, so the
    shell stays to remove the node's temp dir when the pod ends; the head removes the
    cluster's (its workers', on this same machine, too: a Ray job's workers are killed
    once its entrypoint ended, with no time to remove their own).
    """
    temp = _temp_dir_of(flags)
    if not network.shared_host or temp is None:
        return "\n".join([*lines, last if last.startswith("exit ") else f"exec {last}"])
    head = any(f.startswith("--port=") for f in flags)
    removed = os.path.dirname(temp) if head else temp
    cleanup = [f"trap {shlex.quote(f'rm -rf {shlex.quote(removed)}')} EXIT",
               "trap 'exit 143' TERM"]
    return "\n".join([*cleanup, *lines, last])


def _temp_dir_of(flags: list[str]) -> str | None:
    return next((f.split("=", 1)[1] for f in flags if f.startswith("--temp-dir=")), None)


def _submitter_env(job: JobSpec, attempt: int, nodes: int) -> dict[str, str]:
    ray = job.ray
    assert ray is not None and ray.entrypoint is not None
    return {
        "PHALANX_RAY_NODES": str(nodes),
        "PHALANX_RAY_SUBMISSION_ID": f"{job.name}-{attempt}",
        "PHALANX_RAY_ENTRYPOINT": ray.entrypoint,
        "PHALANX_RAY_RUNTIME_ENV": json.dumps(ray.runtime_env) if ray.runtime_env else "",
        "PHALANX_RAY_ENTRYPOINT_CPUS": _number(ray.entrypoint_num_cpus),
        "PHALANX_RAY_ENTRYPOINT_GPUS": _number(ray.entrypoint_num_gpus),
    }


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:g}"
