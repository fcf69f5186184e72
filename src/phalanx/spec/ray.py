"""What a ``kind: ray`` job says beyond its pod sets: the RayJob shape's entrypoint.

A Ray job with no ``ray.entrypoint`` is a long-lived cluster (KubeRay's RayCluster):
it runs until it is taken down. With one, it is KubeRay's RayJob: the entrypoint
is submitted to the cluster once every Ray node has joined, and the job ends when
the entrypoint ends. Everything Ray-specific a job spec holds is here, in one place.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from pydantic import Field, field_validator

from phalanx.spec.base import Model, StrictNumber

HEAD = "head"
"""The name of a Ray job's head pod set (its one replica runs the GCS and the dashboard)."""


class RaySpec(Model):
    entrypoint: str | None = Field(
        default=None,
        description="Shell command submitted to the cluster once it is ready (Ray's job "
        "entrypoint, e.g. 'python train.py'); the job ends when it ends and its logs are the "
        "job's. Absent: a long-lived cluster that runs until it is taken down",
    )
    runtime_env: dict[str, Any] = Field(
        default_factory=dict,
        description="Ray's runtime_env for the entrypoint (working_dir, pip, env_vars, ...)",
    )
    entrypoint_num_cpus: StrictNumber | None = Field(
        default=None, ge=0, allow_inf_nan=False,
        description="CPUs the entrypoint's driver reserves (Ray's entrypoint_num_cpus)",
    )
    entrypoint_num_gpus: StrictNumber | None = Field(
        default=None, ge=0, allow_inf_nan=False,
        description="GPUs the entrypoint's driver reserves (Ray's entrypoint_num_gpus)",
    )

    @field_validator("entrypoint")
    @classmethod
    def _entrypoint_not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError(
                "is empty; give the command to run (e.g. 'python train.py'), or leave "
                "entrypoint out for a long-lived cluster"
            )
        return value

    @field_validator("runtime_env")
    @classmethod
    def _runtime_env_is_json(cls, value: dict[str, Any]) -> dict[str, Any]:
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            raise ValueError(
                "holds values JSON cannot carry; give strings, numbers, lists and maps only"
            ) from None
        return value


DASHBOARD_PROXY = "/v1/jobs/{name}/ray"
"""Where the control plane proxies a Ray job's dashboard and job-submission API (its
``/api/...`` routes follow), behind the caller's own sign-in."""


def dashboard_proxy(name: str) -> str:
    """The path of job ``name``'s proxied Ray dashboard (no trailing slash)."""
    return DASHBOARD_PROXY.format(name=quote(name, safe=""))
