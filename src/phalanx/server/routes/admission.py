"""``POST /admission/workloads``: the mutating admission webhook of Kubernetes-native
admission (AdmissionReview ``admission.k8s.io/v1`` in and out).

The API server calls it as each object of a managed kind (Job, JobSet, PyTorchJob, MPIJob,
RayJob, RayCluster, AppWrapper; the review's ``request.kind`` says which) is created; an
object the control plane manages (``--manage-namespaces``) is answered with a JSONPatch
that creates it suspended (where its kind keeps ``suspend``) and records
who created it (``phalanx.dev/owner``, from the review's ``userInfo``), so its controller
never makes a pod before Phalanx admits it. Every object is allowed: the webhook only holds,
never refuses (a refusal is the queue's, with its reason on the object). Outside ``/v1`` and
open, as ``/healthz`` is: the API server authenticates the control plane by the webhook's
TLS certificate, not the other way round, and the answer says only what the creator's own
object becomes. Not in ``/openapi.json``: no client calls it.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from phalanx.errors import SpecError
from phalanx.server.routes.context import ApiContext, error_response
from phalanx.spec.manifests.native import ADMISSION_PATH

REVIEW_API = "admission.k8s.io/v1"


def router(ctx: ApiContext) -> APIRouter:
    r = APIRouter()

    @r.post(ADMISSION_PATH, include_in_schema=False)
    async def mutate(request: Request) -> JSONResponse:
        try:
            review = await request.json()
        except ValueError:
            review = None
        try:
            uid, obj, user, creating = _read(review)
        except SpecError as exc:
            return error_response(exc)
        answer: dict[str, Any] = {"uid": uid, "allowed": True}
        intake = ctx.controller.native
        patch = intake.source.admission_patch(obj, user) if intake and creating else []
        if patch:
            answer["patchType"] = "JSONPatch"
            answer["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
        return JSONResponse({"apiVersion": REVIEW_API, "kind": "AdmissionReview",
                             "response": answer})

    return r


def _read(review: object) -> tuple[str, dict[str, Any], str | None, bool]:
    """(uid, object, creating user, whether it is a create) of an AdmissionReview."""
    fix = "send an admission.k8s.io/v1 AdmissionReview (the API server's webhook call)"
    if not isinstance(review, dict) or review.get("apiVersion") != REVIEW_API \
            or review.get("kind") != "AdmissionReview":
        raise SpecError("is not an admission.k8s.io/v1 AdmissionReview", field="body", fix=fix)
    request = review.get("request")
    if not isinstance(request, dict) or not isinstance(request.get("uid"), str):
        raise SpecError("has no request.uid", field="request.uid", fix=fix)
    obj = request.get("object")
    if not isinstance(obj, dict):
        obj = {}
    kind = request.get("kind")
    if isinstance(kind, dict) and kind.get("version") and kind.get("kind"):
        group = f"{kind['group']}/" if kind.get("group") else ""
        obj.setdefault("apiVersion", f"{group}{kind['version']}")
        obj.setdefault("kind", kind["kind"])
    namespace = request.get("namespace")
    if isinstance(namespace, str) and isinstance(obj.get("metadata"), dict):
        obj["metadata"].setdefault("namespace", namespace)  # an object created by name only
    user = (request.get("userInfo") or {}).get("username")
    return (request["uid"], obj, user if isinstance(user, str) and user else None,
            request.get("operation") == "CREATE")
