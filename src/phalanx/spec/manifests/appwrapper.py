"""CodeFlare's ``workload.codeflare.dev/v1beta2`` AppWrapper: one wrapped workload.

The AppWrapper's metadata names the job and carries its queue and priority, as Kueue reads
them from the AppWrapper; its one component's template is translated as a manifest of its
own, with paths under ``spec.components[0].template``. The component's ``podSets`` tell
Kueue where the pods are; Phalanx finds them from the wrapped kind itself.
"""

from __future__ import annotations

from collections.abc import Callable

from phalanx.errors import SpecError
from phalanx.spec.manifests.base import Draft, Fields, unsuspended

API_VERSION = "workload.codeflare.dev/v1beta2"
KIND = "AppWrapper"

# Translates a wrapped document into the draft (the registry's, passed in to avoid a cycle).
Inner = Callable[[Fields, Draft], None]


def translate(manifest: Fields, draft: Draft, inner: Inner) -> None:
    spec = manifest.fields("spec")
    if spec is None:
        raise manifest.refuse("spec", "is missing", "give the AppWrapper's components")
    components = spec.items("components")
    if not components:
        raise spec.refuse("components", "is empty", "wrap one workload")
    if len(components) > 1:
        raise SpecError("is a second component; Phalanx runs one workload per AppWrapper",
                        field=components[1].path,
                        fix="submit each workload in an AppWrapper (or on its own)")
    component = components[0]
    template = component.fields("template")
    if template is None:
        raise component.refuse("template", "is missing", "give the wrapped workload")
    component.take("podSets", list)  # where Kueue finds the pods; Phalanx reads the kind
    component.ignore("annotations", "podSetInfos")
    component.done()
    unsuspended(spec)
    spec.take("managedBy", str)
    spec.done()
    keys: tuple[str, ...] = ("name", "labels", "queue", "priority", "workdir")
    outer: dict[str, object] = {key: draft.doc[key] for key in keys if key in draft.doc}
    outer_paths: dict[str, str] = {key: draft.paths[key] for key in outer}
    meta = template.data.setdefault("metadata", {})
    if isinstance(meta, dict):  # the wrapped object may leave its name to the AppWrapper
        meta.setdefault("name", outer["name"])
    inner(template, draft)
    # Kueue queues the AppWrapper, not what it wraps: its metadata is the job's.
    draft.doc.update(outer)
    draft.paths.update(outer_paths)
