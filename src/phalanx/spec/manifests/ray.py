"""KubeRay's ``ray.io/v1`` RayCluster and RayJob, as ``kind: ray``.

The head group is the pod set ``head``; each worker group is a pod set named after its
``groupName`` with ``replicas x numOfHosts`` pods. Phalanx starts Ray in every pod itself
(``ray start`` with the pod's resources), so the containers give no command; their image is
recorded. A RayJob's ``entrypoint`` is submitted once every Ray node has joined and the job
ends with it, taking the cluster down (``shutdownAfterJobFinishes: true``).
"""

from __future__ import annotations

from typing import Any

import yaml

from phalanx.spec.manifests.base import (
    Draft,
    Fields,
    active_deadline,
    add_pod_set,
    backoff_limit,
    pod_template,
    unsuspended,
)

API_VERSION = "ray.io/v1"
RAY_CLUSTER, RAY_JOB = "RayCluster", "RayJob"
HEAD = "head"
# ray start parameters that change nothing Phalanx decides (the dashboard listens where
# Phalanx puts it; the node blocks either way).
HARMLESS_START_PARAMS = frozenset({"dashboard-host", "block"})


def _ray_command(container: Fields, command: list[str], args: list[str]) -> list[str]:
    if command or args:
        key = "command" if command else "args"
        raise container.refuse(
            key, "is given, but Phalanx starts Ray in this pod itself",
            "remove it: Phalanx runs `ray start` with the pod's resources; put the program "
            "in the RayJob's entrypoint")
    return []


def _start_params(group: Fields) -> None:
    params = group.fields("rayStartParams")
    if params is None:
        return
    for key in list(params.data):
        if key not in HARMLESS_START_PARAMS:
            raise params.refuse(key, "cannot be honoured by Phalanx",
                                "remove it: Phalanx starts Ray with the pod's resources "
                                "(set them in the container's resources)")
        params.take(key)
    params.done()


def cluster(spec: Fields, draft: Draft) -> None:
    """The pod sets of a RayCluster spec (a RayCluster's, or a RayJob's rayClusterSpec)."""
    draft.set("kind", "ray", spec.path)
    spec.take("rayVersion", str)  # the image's Ray runs
    if spec.take("enableInTreeAutoscaling", bool, False):
        raise spec.refuse("enableInTreeAutoscaling", "cannot be honoured by Phalanx",
                          "remove it: a Phalanx job's gang has a fixed size; give each "
                          "worker group its replicas")
    unsuspended(spec)
    head = spec.fields("headGroupSpec")
    if head is None:
        raise spec.refuse("headGroupSpec", "is missing", "give the head group's template")
    draft.paths["podSets"] = spec.path
    _group(head, draft, HEAD, None)
    for group in spec.items("workerGroupSpecs"):
        name = group.take("groupName", str)
        if name is None:
            raise group.refuse("groupName", "is missing", "name the worker group")
        if name == HEAD:
            raise group.refuse("groupName", f"{HEAD!r} names the head",
                               "give the worker group another name")
        _group(group, draft, name, group)
    spec.done()


def _group(group: Fields, draft: Draft, name: str, worker: Fields | None) -> None:
    _start_params(group)
    group.take("serviceType", str)  # the dashboard is reached through the head's address
    replicas, replicas_path = 1, group.path
    if worker is not None:
        replicas = worker.take("replicas", int, worker.data.get("minReplicas", 1))
        replicas_path = worker.at("replicas")
        hosts = worker.take("numOfHosts", int, 1)
        replicas *= hosts
        worker.take("minReplicas", int)  # no autoscaling: replicas is the size
        worker.take("maxReplicas", int)
        unsuspended(worker)
    template = group.fields("template")
    if template is None:
        raise group.refuse("template", "is missing", "give the pods' template")
    made = pod_template(template, command=_ray_command)
    group.done()
    if replicas == 0:
        draft.note(replicas_path, f"0: worker group {name!r} runs no pod")
        return
    add_pod_set(draft, name, replicas, replicas_path, template.path, made)


def translate_cluster(manifest: Fields, draft: Draft) -> None:
    spec = manifest.fields("spec")
    if spec is None:
        raise manifest.refuse("spec", "is missing", "give the RayCluster's spec")
    cluster(spec, draft)


def translate_job(manifest: Fields, draft: Draft) -> None:
    spec = manifest.fields("spec")
    if spec is None:
        raise manifest.refuse("spec", "is missing", "give the RayJob's spec")
    entrypoint = spec.take("entrypoint", str)
    if not entrypoint:
        raise spec.refuse("entrypoint", "is missing",
                          "give the command to run, or submit a RayCluster for a cluster "
                          "without one")
    ray: dict[str, Any] = {"entrypoint": entrypoint}
    draft.paths["ray.entrypoint"] = spec.at("entrypoint")
    runtime_env = spec.take("runtimeEnvYAML", str)
    if runtime_env:
        try:
            parsed = yaml.safe_load(runtime_env)
        except yaml.YAMLError:
            parsed = None
        if not isinstance(parsed, dict):
            raise spec.refuse("runtimeEnvYAML", "is not a YAML mapping",
                              "give Ray's runtime_env as YAML, e.g. 'pip: [requests]'")
        ray["runtimeEnv"] = parsed
        draft.paths["ray.runtimeEnv"] = spec.at("runtimeEnvYAML")
    for key, wire in (("entrypointNumCpus", "entrypointNumCpus"),
                      ("entrypointNumGpus", "entrypointNumGpus")):
        value = spec.take(key, (int, float))
        if value is not None:
            ray[wire] = value
            draft.paths[f"ray.{wire}"] = spec.at(key)
    draft.set("ray", ray, spec.path)
    shutdown = spec.take("shutdownAfterJobFinishes", bool)
    if shutdown is False:
        raise spec.refuse("shutdownAfterJobFinishes", "cannot be honoured by Phalanx",
                          "set it to true (the cluster goes when the entrypoint ends), or "
                          "submit a RayCluster and run the entrypoint with `ray job submit`")
    if shutdown is None:
        draft.note(spec.at("shutdownAfterJobFinishes"), "unset: the cluster is taken down "
                   "when the entrypoint ends")
    mode = spec.take("submissionMode", str, "K8sJobMode")
    if mode not in ("K8sJobMode", "HTTPMode"):
        raise spec.refuse("submissionMode", f"{mode} cannot be honoured by Phalanx",
                          "use K8sJobMode or HTTPMode: Phalanx submits the entrypoint once "
                          "the cluster is ready")
    active_deadline(spec, draft)
    backoff_limit(spec, draft)
    spec.take("ttlSecondsAfterFinished", int)  # finished jobs follow the retention
    unsuspended(spec)
    cluster_spec = spec.fields("rayClusterSpec")
    if cluster_spec is None:
        raise spec.refuse("rayClusterSpec", "is missing",
                          "give the cluster the entrypoint runs on (clusterSelector is not "
                          "supported: a Phalanx RayJob brings its own cluster)")
    cluster(cluster_spec, draft)
    spec.done()
