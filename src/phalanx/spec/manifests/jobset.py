"""``jobset.x-k8s.io/v1alpha2`` JobSet: each replicated Job is a pod set, the leader first.

A replicated Job of ``replicas`` Jobs of ``parallelism`` pods is one pod set of
``replicas x parallelism`` pods; each pod gets JobSet's variables (``JOB_INDEX``,
``JOB_COMPLETION_INDEX``, ``REPLICATED_JOB_NAME``, ``JOBSET_NAME``). The leader (the
``coordinator``'s replicated Job, else one named ``leader``, else the first) comes first, so
rank 0 and ``PHALANX_MASTER_ADDR`` are its first pod. The set restarts as a whole under
``failurePolicy.maxRestarts``, as JobSet's Recreate does.
"""

from __future__ import annotations

from phalanx.errors import SpecError
from phalanx.spec.manifests.base import Draft, Fields, add_pod_set, unsuspended
from phalanx.spec.manifests.batch import job_shape

API_VERSION = "jobset.x-k8s.io/v1alpha2"
KIND = "JobSet"
LEADER = "leader"


def translate(manifest: Fields, draft: Draft) -> None:
    spec = manifest.fields("spec")
    if spec is None:
        raise manifest.refuse("spec", "is missing", "give the JobSet's spec")
    jobset = draft.doc["name"]
    replicated = spec.items("replicatedJobs")
    if not replicated:
        raise spec.refuse("replicatedJobs", "is empty", "give one replicated Job or more")
    names = [r.data.get("name") for r in replicated]
    coordinator = spec.fields("coordinator")
    leader = LEADER if LEADER in names else names[0]
    if coordinator is not None:
        leader = coordinator.take("replicatedJob", str, leader)
        coordinator.take("jobIndex", int)
        coordinator.take("podIndex", int)
        coordinator.done()
        if leader not in names:
            raise SpecError(f"names {leader!r}, which is no replicated Job",
                            field=coordinator.at("replicatedJob"),
                            fix=f"name one of {', '.join(map(str, names))}")
    ordered = sorted(replicated, key=lambda r: r.data.get("name") != leader)
    draft.set("kind", "generic", manifest.at("kind"))
    draft.paths["podSets"] = spec.at("replicatedJobs")
    for job in ordered:
        name = job.take("name", str)
        if name is None:
            raise job.refuse("name", "is missing", "name the replicated Job")
        replicas = job.take("replicas", int, 1)
        template = job.fields("template")
        if template is None:
            raise job.refuse("template", "is missing", "give the Jobs' template")
        template.fields("metadata")  # the child Jobs' labels: not Phalanx's to use
        child = template.fields("spec")
        if child is None:
            raise template.refuse("spec", "is missing", "give the Job spec")
        shape = job_shape(child, draft)
        if shape.backoff_limit:
            draft.note(shape.backoff_path, "a failed pod restarts the whole JobSet, under "
                       "failurePolicy.maxRestarts")
        child.done()
        template.done()
        job.done()
        per_job = shape.parallelism
        env = {"JOBSET_NAME": jobset, "REPLICATED_JOB_NAME": name}
        index_env = {"JOB_INDEX": f"$((PHALANX_POD_INDEX / {per_job}))",
                     "JOB_COMPLETION_INDEX": f"$((PHALANX_POD_INDEX % {per_job}))"}
        add_pod_set(draft, name, replicas * per_job, job.at("replicas"), shape.template_path,
                    shape.template, env=env, index_env=index_env)
    success = spec.fields("successPolicy")
    if success is not None:
        operator = success.take("operator", str, "All")
        targets = success.take("targetReplicatedJobs", list, [])
        success.done()
        if operator != "All" or (targets and sorted(targets) != sorted(map(str, names))):
            raise SpecError(
                "cannot be honoured by Phalanx", field=success.path,
                fix="remove successPolicy: a Phalanx job succeeds when all its pods succeed")
    failure = spec.fields("failurePolicy")
    restarts = 0
    if failure is not None:
        restarts = failure.take("maxRestarts", int, 0)
        failure.take("restartStrategy", str)  # the gang restarts as one either way
        failure.done()
    draft.set("restart", {"maxRestarts": restarts},
              failure.at("maxRestarts") if failure else spec.at("failurePolicy"))
    startup = spec.fields("startupPolicy")
    if startup is not None:
        startup.take("startupPolicyOrder", str)
        startup.done()
        draft.note(startup.path, "the pods start together, as one gang")
    spec.take("ttlSecondsAfterFinished", int)  # finished jobs follow the retention
    unsuspended(spec)
    spec.done()
