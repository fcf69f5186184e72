"""Kubernetes workload manifests, as their projects publish them, translated into jobs.

One module per family of kinds, each a ``translate(manifest, draft)`` that reads the
manifest strictly through ``base.Fields`` and fills a ``base.Draft``: ``batch`` (Job),
``jobset`` (JobSet), ``kubeflow`` (PyTorchJob, MPIJob), ``ray`` (RayCluster, RayJob),
``appwrapper`` (AppWrapper, around any of them); what every pod template's volumes,
mounts and secrets become is ``podspec``'s. ``translate`` picks the module by
``apiVersion`` and ``kind``. Pure: the server, the SDK and the CLI all call it, the server
to submit, the clients to refuse a bad manifest before sending it. docs/manifests.md lists
every field and what it becomes.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from phalanx.errors import PhalanxError, SpecError
from phalanx.spec.base import validate
from phalanx.spec.config import load_yaml_documents
from phalanx.spec.manifests import appwrapper, batch, jobset, kubeflow, ray
from phalanx.spec.manifests.base import (
    PRIORITY_LABEL,
    QUEUE_LABEL,
    SERVER_SET,
    SERVER_SET_METADATA,
    WORKDIR_ANNOTATION,
    Draft,
    Fields,
    metadata,
)
from phalanx.spec.resources import JobSpec
from phalanx.spec.sources import WorkdirArchive

__all__ = ["KINDS", "PRIORITY_LABEL", "QUEUE_LABEL", "WORKDIR_ANNOTATION", "Translation",
           "is_manifest", "load_submissions", "translate", "wire", "with_overrides"]

Translator = Callable[[Fields, Draft], None]


def _wrapped(manifest: Fields, draft: Draft) -> None:
    appwrapper.translate(manifest, draft, _inner)


KINDS: dict[tuple[str, str], Translator] = {
    (batch.API_VERSION, batch.KIND): batch.translate,
    (jobset.API_VERSION, jobset.KIND): jobset.translate,
    kubeflow.PYTORCH: kubeflow.translate_pytorch,
    kubeflow.MPI: kubeflow.translate_mpi,
    (ray.API_VERSION, ray.RAY_CLUSTER): ray.translate_cluster,
    (ray.API_VERSION, ray.RAY_JOB): ray.translate_job,
    (appwrapper.API_VERSION, appwrapper.KIND): _wrapped,
}


def is_manifest(document: object) -> bool:
    """Whether ``document`` is a Kubernetes object (it has an apiVersion), not a Phalanx job."""
    return isinstance(document, Mapping) and "apiVersion" in document


@dataclass
class Translation:
    """A manifest, the job Phalanx made of it, and how (notes, and where each field of the
    job came from, so an error about the job names the manifest's field)."""

    spec: JobSpec
    manifest: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    draft: Draft = field(default_factory=Draft, repr=False)

    def error_at_manifest(self, exc: PhalanxError) -> PhalanxError:
        return self.draft.error_at_manifest(exc)

    def overridden(self, *, name: str | None = None, queue: str | None = None,
                   priority: str | None = None, workdir: str | None = None) -> Translation:
        """This manifest with another name, queue, priority or workdir
        (``with_overrides``)."""
        if name is None and queue is None and priority is None and workdir is None:
            return self
        return translate(with_overrides(self.manifest, name=name, queue=queue,
                                        priority=priority, workdir=workdir))

    def with_archive(self, archive: WorkdirArchive) -> Translation:
        """This manifest with its workdir annotation naming ``archive``, as it is sent once
        the directory is uploaded."""
        return self.overridden(workdir=json.dumps(archive.to_dict()))


def load_submissions(text: str, source: str = "jobs") -> list[JobSpec | Translation]:
    """Every document of a YAML text: a Phalanx job, or a manifest with the job it makes;
    an error names the document's index and field (``jobs.yaml[1].spec.parallelism``)."""
    return [translate(doc, prefix=f"{source}[{i}]") if is_manifest(doc)
            else validate(JobSpec, doc, prefix=f"{source}[{i}]")
            for i, doc in enumerate(load_yaml_documents(text, source))]


def wire(item: JobSpec | Translation) -> dict[str, Any]:
    """What a submit of ``item`` sends: the job, or the manifest as it was written."""
    return item.manifest if isinstance(item, Translation) else item.to_dict()


def _inner(manifest: Fields, draft: Draft) -> None:
    api_version = manifest.take("apiVersion", str)
    kind = manifest.take("kind", str)
    translator = KINDS.get((api_version or "", kind or ""))
    if translator is None:
        known = ", ".join(f"{v} {k}" for v, k in KINDS)
        raise SpecError(f"{api_version} {kind} is not a kind Phalanx runs",
                        field=manifest.at("kind"),
                        fix=f"submit one of {known}, or a Phalanx job (docs/manifests.md)")
    metadata(manifest, draft)
    translator(manifest, draft)
    manifest.done()


def translate(document: Mapping[str, Any], prefix: str = "") -> Translation:
    """The job ``document`` (a manifest) runs as; SpecError naming the manifest's field
    (under ``prefix``) for what cannot be honoured."""
    manifest = as_submitted(document)
    draft = Draft()
    try:
        _inner(Fields(copy.deepcopy(manifest), ""), draft)
        spec = draft.job_spec()
    except SpecError as exc:
        if prefix:
            where = f"{prefix}.{exc.field}" if exc.field else prefix
            raise SpecError(exc.message, field=where, fix=exc.fix) from None
        raise
    return Translation(spec=spec, manifest=manifest, notes=draft.notes, draft=draft)


def as_submitted(document: Mapping[str, Any]) -> dict[str, Any]:
    """The manifest without the fields Kubernetes sets (status, metadata.uid, ...), as
    ``kubectl apply`` ignores them."""
    manifest = {k: v for k, v in document.items() if k not in SERVER_SET}
    meta = manifest.get("metadata")
    if isinstance(meta, Mapping):
        manifest["metadata"] = {k: v for k, v in meta.items() if k not in SERVER_SET_METADATA}
    return manifest


def with_overrides(document: Mapping[str, Any], *, name: str | None = None,
                   queue: str | None = None, priority: str | None = None,
                   workdir: str | None = None) -> dict[str, Any]:
    """The manifest with its name, queue label, priority label or workdir annotation
    replaced (``submit --name/--queue/--priority/--workdir``), so the manifest kept with
    the job says what ran."""
    manifest = copy.deepcopy(dict(document))
    meta = manifest.setdefault("metadata", {})
    if not isinstance(meta, dict):
        return manifest  # refused by translate, naming metadata
    if name is not None:
        meta["name"] = name
    labels = {**(meta.get("labels") or {})}
    if queue is not None:
        labels[QUEUE_LABEL] = queue
    if priority is not None:
        labels[PRIORITY_LABEL] = priority
    if labels:
        meta["labels"] = labels
    if workdir is not None:
        meta["annotations"] = {**(meta.get("annotations") or {}), WORKDIR_ANNOTATION: workdir}
    return manifest
