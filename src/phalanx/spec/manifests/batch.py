"""``batch/v1`` Job: one pod set of ``parallelism`` pods that run as one gang.

Kubernetes runs a Job's pods as they fit and retries each; Phalanx starts them together and
restarts the gang, so ``completions`` must equal ``parallelism`` (every pod runs once and
must succeed), ``backoffLimit`` is the job's budget of user-error restarts, and a pod lost
to its node (``podFailurePolicy``'s ``DisruptionTarget``) is a system failure, charged to a
budget of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from phalanx.errors import SpecError
from phalanx.spec.manifests.base import (
    Draft,
    Fields,
    PodTemplate,
    active_deadline,
    add_pod_set,
    pod_template,
    unsuspended,
)

API_VERSION = "batch/v1"
KIND = "Job"
# Kubernetes' default backoffLimit.
DEFAULT_BACKOFF_LIMIT = 6
POD_SET = "worker"  # the one pod set a Job becomes


@dataclass
class JobShape:
    """A Job spec's pods: how many run at once, whether indexed, and their template."""

    parallelism: int
    parallelism_path: str
    indexed: bool
    template: PodTemplate
    template_path: str
    backoff_limit: int | None
    backoff_path: str


def job_shape(spec: Fields, draft: Draft) -> JobShape:
    """Read a Job spec (a Job's, or a JobSet's child template's) for the fields every Job
    has; the caller reads the job-level ones (deadline) and calls ``spec.done()``."""
    parallelism = spec.take("parallelism", int, 1)
    completions = spec.take("completions", int)
    mode = spec.take("completionMode", str, "NonIndexed")
    if mode not in ("NonIndexed", "Indexed"):
        raise SpecError(f"{mode!r} is not a completion mode", field=spec.at("completionMode"),
                        fix="use NonIndexed or Indexed")
    if completions is not None and completions != parallelism:
        raise SpecError(
            f"is {completions} but parallelism is {parallelism}", field=spec.at("completions"),
            fix=f"set completions to {parallelism}: Phalanx runs the pods as one gang, each "
                "once, and the job succeeds when all succeed (submit more work as more jobs)")
    if completions is None and mode == "NonIndexed" and parallelism > 1:
        draft.note(spec.at("completions"), "unset: the job succeeds when all "
                   f"{parallelism} pods succeed (Kubernetes: when any succeeds)")
    backoff = spec.take("backoffLimit", int)
    failure_policy = spec.fields("podFailurePolicy")
    if failure_policy is not None:
        pod_failure_policy(failure_policy, draft)
    spec.take("ttlSecondsAfterFinished", int)  # finished jobs follow the retention
    unsuspended(spec)
    template = spec.fields("template")
    if template is None:
        raise spec.refuse("template", "is missing", "give the pods' template")
    return JobShape(parallelism, spec.at("parallelism"), mode == "Indexed",
                    pod_template(template), template.path, backoff, spec.at("backoffLimit"))


def pod_failure_policy(policy: Fields, draft: Draft) -> None:
    """Rules that say "a disrupted pod is no failure of the job's" map to Phalanx's system
    failures (node loss, preemption), charged to their own budget; others are refused."""
    for rule in policy.items("rules"):
        action = rule.take("action", str)
        conditions = rule.items("onPodConditions")
        if rule.has("onExitCodes"):
            raise rule.refuse(
                "onExitCodes", "cannot be honoured by Phalanx",
                "remove the rule: Phalanx counts every non-zero exit against backoffLimit "
                "(restart.maxRestarts)")
        for condition in conditions:
            kind = condition.take("type", str)
            condition.take("status", str)
            condition.done()
            if kind != "DisruptionTarget":
                raise SpecError(f"{kind!r} is not a condition Phalanx tells apart",
                                field=condition.at("type"),
                                fix="use DisruptionTarget, or remove the rule")
        if action != "Ignore" or not conditions:
            raise rule.refuse(
                "action", f"{action!r} on a disrupted pod cannot be honoured by Phalanx",
                "use action: Ignore with onPodConditions [{type: DisruptionTarget}] (a pod "
                "lost to its node or a preemption restarts the job under maxSystemRestarts), "
                "or remove the rule")
        rule.done()
        draft.note(rule.path, "a disrupted pod is a system failure, charged to "
                   "restart.maxSystemRestarts, not backoffLimit")
    policy.done()


def translate(manifest: Fields, draft: Draft) -> None:
    spec = manifest.fields("spec")
    if spec is None:
        raise manifest.refuse("spec", "is missing", "give the Job's spec")
    shape = job_shape(spec, draft)
    active_deadline(spec, draft)
    spec.done()
    backoff = DEFAULT_BACKOFF_LIMIT if shape.backoff_limit is None else shape.backoff_limit
    draft.set("restart", {"maxRestarts": backoff}, shape.backoff_path)
    draft.set("kind", "generic", manifest.at("kind"))
    draft.paths["podSets"] = shape.template_path
    index_env = {"JOB_COMPLETION_INDEX": "$PHALANX_POD_INDEX"} if shape.indexed else None
    add_pod_set(draft, POD_SET, shape.parallelism, shape.parallelism_path,
                shape.template_path, shape.template, index_env=index_env)
