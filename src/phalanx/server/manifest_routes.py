"""``POST /v1/manifests``: Kubernetes workload manifests as their projects publish them
(batch Job, JobSet, PyTorchJob, MPIJob, RayJob, RayCluster, AppWrapper), mixed with Phalanx
jobs, translated by ``phalanx.spec.manifests`` and submitted all or nothing.

The control plane translates (the clients translate too, only to refuse early), so the
manifest stored with the job is the one it ran as, and every refusal, from the translation
or from the checks a submit makes (queue, quota, the plane that would run it), names the
field of the manifest (``spec.pytorchReplicaSpecs.Worker.template.spec.containers[0]...``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from fastapi import APIRouter, Request, Response

from phalanx.errors import PhalanxError
from phalanx.server.access import Access, needs
from phalanx.server.principal import Principal
from phalanx.spec.api import JobList, ManifestBatch
from phalanx.spec.base import validate
from phalanx.spec.manifests import Translation, is_manifest, translate
from phalanx.spec.resources import JobSpec
from phalanx.spec.status import JobRecord
from phalanx.store import Store

# (request, jobs, batch, idempotency key, manifests by job name) -> (caller, jobs, replayed)
SubmitJobs = Callable[..., tuple[Principal, list[JobRecord], bool]]
_ITEM = re.compile(r"items\[(\d+)\]\.?(.*)")


def translated(items: list[dict[str, Any]]) -> tuple[list[JobSpec], dict[int, Translation]]:
    """Each item as a job, and the translations of the items that are manifests. One item
    is named by its own fields; several as ``items[i]...``, as a batch is."""
    batch = len(items) > 1
    specs, translations = [], {}
    for i, item in enumerate(items):
        prefix = f"items[{i}]" if batch else ""
        if is_manifest(item):
            translations[i] = translate(item, prefix=prefix)
            specs.append(translations[i].spec)
        else:
            specs.append(validate(JobSpec, item, prefix=prefix))
    return specs, translations


def at_manifest(exc: PhalanxError, translations: Mapping[int, Translation],
                batch: bool) -> PhalanxError:
    """``exc`` (about a job's field) re-aimed at the field of the manifest it came from."""
    if exc.field is None:
        return exc
    index, rest, prefix = 0, exc.field, ""
    if batch:
        match = _ITEM.fullmatch(exc.field)
        if match is None:
            return exc
        index, rest, prefix = int(match[1]), match[2], f"items[{match[1]}]"
    translation = translations.get(index)
    if translation is None or not rest:
        return exc
    where = translation.draft.manifest_path(rest)
    return type(exc)(exc.message, field=f"{prefix}.{where}" if prefix else where, fix=exc.fix)


def manifest_of(store: Store, record: JobRecord, viewer: Principal) -> dict[str, Any]:
    """The manifest job ``record`` was submitted as and what Phalanx made of it, for its
    owner (``JobDetail``'s ``manifest`` and ``manifestNotes``); nothing for another viewer,
    as the spec's secrets are not shown to them."""
    if not viewer.owns(record):
        return {}
    manifest = store.get_manifest(record.name)
    if manifest is None:
        return {}
    try:
        notes = translate(manifest).notes
    except PhalanxError:  # translated under rules since changed: the manifest still shows
        notes = []
    return {"manifest": manifest, "manifest_notes": notes}


def add_manifest_routes(
    app: APIRouter, submit_jobs: SubmitJobs,
    shown: Callable[[list[JobRecord], Principal], list[JobRecord]],
    errors: Callable[..., dict[int | str, dict[str, Any]]], idempotency_header: Any,
    replayed_description: str,
) -> None:
    @app.post("/v1/manifests", status_code=201, dependencies=needs(Access.WRITE), responses={
        200: {"model": JobList, "description": replayed_description},
        **errors(400, 401, 403, 404, 409, 413, 429)})
    def submit_manifests(body: ManifestBatch, request: Request, response: Response,
                         idempotency_key: str | None = idempotency_header) -> JobList:
        """Submit Kubernetes workload manifests and Phalanx jobs, all or nothing; each
        manifest is kept with its job (``GET /v1/jobs/{name}`` shows it)."""
        specs, translations = translated(body.items)
        batch = len(specs) > 1
        manifests = {specs[i].name: t.manifest for i, t in translations.items()}
        try:
            principal, records, replayed = submit_jobs(
                request, specs, batch=batch, idempotency_key=idempotency_key,
                manifests=manifests)
        except PhalanxError as exc:
            raise at_manifest(exc, translations, batch) from None
        if replayed:
            response.status_code = 200
        return JobList(items=shown(records, principal))
