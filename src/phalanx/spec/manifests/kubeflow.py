"""Kubeflow's ``kubeflow.org/v1`` PyTorchJob and ``kubeflow.org/v2beta1`` MPIJob.

A PyTorchJob runs as ``kind: torch``: its Master (pod set ``master``, rank 0) and Workers
(``worker``) get the training operator's environment (``MASTER_ADDR``, ``WORLD_SIZE``,
``RANK``, the ``PET_*`` names); ``nprocPerNode`` becomes ``NPROC_PER_NODE``. An MPIJob runs
as ``kind: mpi``: the Launcher runs mpirun, the Workers host the ranks (Phalanx starts them
without sshd) with ``slotsPerWorker`` slots each.
"""

from __future__ import annotations

import os

from phalanx.errors import SpecError
from phalanx.spec.manifests.base import (
    Draft,
    Fields,
    add_pod_set,
    check_min_available,
    pod_template,
    run_policy,
)

PYTORCH = ("kubeflow.org/v1", "PyTorchJob")
MPI = ("kubeflow.org/v2beta1", "MPIJob")


def _replica_specs(spec: Fields, key: str, roles: tuple[str, ...]) -> dict[str, Fields]:
    specs = spec.fields(key)
    if specs is None:
        raise spec.refuse(key, "is missing", f"give the replica specs ({', '.join(roles)})")
    found = {}
    for role in roles:
        replica = specs.fields(role)
        if replica is not None:
            found[role] = replica
    for role in specs.data:
        if role not in roles:
            raise specs.refuse(role, "is not a replica type of this kind",
                               f"use {' and '.join(roles)}")
    specs.done()
    return found


def _replicas(replica: Fields) -> int:
    replica.take("restartPolicy", str)  # a failed pod restarts the gang, under the budget
    value: int = replica.take("replicas", int, 1)
    return value


def translate_pytorch(manifest: Fields, draft: Draft) -> None:
    spec = manifest.fields("spec")
    if spec is None:
        raise manifest.refuse("spec", "is missing", "give the PyTorchJob's spec")
    draft.set("kind", "torch", manifest.at("kind"))
    specs = _replica_specs(spec, "pytorchReplicaSpecs", ("Master", "Worker"))
    if "Worker" not in specs and "Master" not in specs:
        raise spec.refuse("pytorchReplicaSpecs", "names no Master or Worker",
                          "give a Worker replica spec (and a Master, rank 0, if you like)")
    nproc = spec.take("nprocPerNode", (str, int))
    elastic = spec.fields("elasticPolicy")
    if elastic is not None:
        low, high = elastic.take("minReplicas", int), elastic.take("maxReplicas", int)
        workers = specs["Worker"].data.get("replicas", 1) if "Worker" in specs else 0
        if low is None or low != high or high != workers:
            raise SpecError(
                f"asks for {low}..{high} workers; elastic training cannot be honoured by "
                "Phalanx", field=elastic.path,
                fix=f"remove elasticPolicy, or set minReplicas and maxReplicas to {workers} "
                    "(the Worker replicas): a Phalanx job's gang has a fixed size")
        if nproc is None:
            nproc = elastic.take("nProcPerNode", int)
        elastic.ignore("rdzvBackend", "rdzvHost", "rdzvPort", "rdzvId", "rdzvConf",
                       "standalone", "maxRestarts", "metrics", "nProcPerNode")
        elastic.done()
    env = {}
    if nproc is not None:
        env = {"NPROC_PER_NODE": str(nproc), "PET_NPROC_PER_NODE": str(nproc)}
    draft.paths["podSets"] = spec.at("pytorchReplicaSpecs")
    for role in ("Master", "Worker"):
        if role not in specs:
            continue
        replica = specs[role]
        replicas = _replicas(replica)
        if role == "Master" and replicas != 1:
            raise SpecError(f"is {replicas}; a PyTorchJob has one Master",
                            field=replica.at("replicas"), fix="set the Master's replicas to 1")
        template = replica.fields("template")
        if template is None:
            raise replica.refuse("template", "is missing", "give the pods' template")
        made = pod_template(template)
        replica.done()
        add_pod_set(draft, role.lower(), replicas, replica.at("replicas"), template.path, made,
                    env=env)
    run_policy(spec.fields("runPolicy"), draft)
    spec.done()
    check_min_available(draft)


def _worker_command(container: Fields, command: list[str], args: list[str]) -> list[str]:
    """An MPI worker's own command is sshd for mpirun to reach; Phalanx starts the ranks in
    the worker itself, so sshd is not needed, and nothing else may run there."""
    if command and os.path.basename(command[0]) != "sshd":
        raise SpecError(
            "runs a program of its own; an MPI worker hosts the ranks the launcher's mpirun "
            "starts", field=container.at("command"),
            fix="remove the workers' command (or leave sshd: Phalanx starts the ranks "
                "without it) and put the program in the launcher's mpirun command line")
    return []


def translate_mpi(manifest: Fields, draft: Draft) -> None:
    spec = manifest.fields("spec")
    if spec is None:
        raise manifest.refuse("spec", "is missing", "give the MPIJob's spec")
    draft.set("kind", "mpi", manifest.at("kind"))
    specs = _replica_specs(spec, "mpiReplicaSpecs", ("Launcher", "Worker"))
    for role in ("Launcher", "Worker"):
        if role not in specs:
            raise spec.refuse("mpiReplicaSpecs", f"has no {role}",
                              "give a Launcher (runs mpirun) and a Worker (hosts the ranks)")
    implementation = spec.take("mpiImplementation", str, "OpenMPI")
    if implementation != "OpenMPI":
        raise SpecError(f"{implementation} cannot be honoured by Phalanx",
                        field=spec.at("mpiImplementation"),
                        fix="use OpenMPI (Phalanx starts OpenMPI's ranks in the workers)")
    slots = spec.take("slotsPerWorker", int, 1)
    spec.take("sshAuthMountPath", str)  # no ssh: the ranks start without it
    spec.take("launcherCreationPolicy", str)  # the launcher waits for every worker anyway
    draft.paths["podSets"] = spec.at("mpiReplicaSpecs")
    for role in ("Launcher", "Worker"):
        replica = specs[role]
        replicas = _replicas(replica)
        template = replica.fields("template")
        if template is None:
            raise replica.refuse("template", "is missing", "give the pods' template")
        worker = role == "Worker"
        made = pod_template(template, command=_worker_command if worker else None)
        replica.done()
        if worker and template.data["spec"]["containers"][0].get("command"):
            draft.note(f"{template.path}.spec.containers[0].command",
                       "sshd is not run: Phalanx starts the ranks in the workers itself")
        env = {"NPROC_PER_NODE": str(slots)} if worker else {}
        add_pod_set(draft, role.lower(), replicas, replica.at("replicas"), template.path, made,
                    env=env)
        if worker:
            draft.paths[f"podSets[{len(draft.pod_sets) - 1}].env.NPROC_PER_NODE"] = \
                spec.at("slotsPerWorker")
    run_policy(spec.fields("runPolicy"), draft)
    spec.done()
    check_min_available(draft)
