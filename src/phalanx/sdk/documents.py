"""Turning what users hand the SDK (files, dicts, models) into validated specs.

Everything is checked here, before any request is made, so bad input never
reaches the control plane and the error names the file and field at fault.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from phalanx.errors import SpecError
from phalanx.spec import JobSpec, load_config_yaml, load_job_yaml, parse_config_documents, validate
from phalanx.spec.manifests import Translation, is_manifest, load_submissions, translate


def read_text(path: str | Path) -> str:
    """A file's text, or a SpecError naming the file when it cannot be read."""
    try:
        return Path(path).expanduser().read_text()
    except FileNotFoundError:
        raise SpecError("no such file", field=str(path), fix="check the path") from None
    except IsADirectoryError:
        raise SpecError("is a directory", field=str(path), fix="name a YAML file") from None
    except UnicodeDecodeError:
        raise SpecError("is not a text file", field=str(path), fix="name a YAML file") from None
    except OSError as exc:
        raise SpecError(
            f"cannot be read: {exc.strerror}", field=str(path), fix="check the path and permissions"
        ) from None


def to_job_spec(job: object) -> JobSpec:
    """A JobSpec from a JobSpec, a builder, a document dict, or a YAML file path."""
    if isinstance(job, JobSpec):
        return job
    build = getattr(job, "build", None)
    if callable(build):
        spec = build()
        if isinstance(spec, JobSpec):
            return spec
    if isinstance(job, Mapping):
        return validate(JobSpec, dict(job))
    if isinstance(job, str | Path):
        return load_job_yaml(read_text(job), source=str(job))
    raise SpecError(
        f"cannot submit a {type(job).__name__}",
        field="job",
        fix="pass a JobSpec, a phalanx.Job builder, a dict or the path of a YAML file",
    )


def to_submission(job: object) -> JobSpec | Translation:
    """What ``Client.submit`` takes, checked: a Kubernetes workload manifest (a dict, or a
    YAML file of one) with the job it makes, or a job as ``to_job_spec`` takes it."""
    if isinstance(job, Translation):
        return job
    if is_manifest(job):
        assert isinstance(job, Mapping)
        return translate(dict(job))
    if isinstance(job, str | Path):
        text = read_text(job)
        if "apiVersion" in text:  # a manifest, maybe: else the file is read as a job
            items = load_submissions(text, source=str(job))
            if len(items) == 1 and isinstance(items[0], Translation):
                return items[0]
            if any(isinstance(item, Translation) for item in items):
                raise SpecError(f"holds {len(items)} documents; submit takes one job",
                                field=str(job), fix="use submit_manifests for several")
    return to_job_spec(job)


def to_submissions(jobs: Iterable[object] | str | Path) -> list[JobSpec | Translation]:
    """Jobs and manifests, checked, as ``Client.submit_manifests`` takes them (a YAML file
    of several documents, or items ``to_submission`` takes), errors named ``items[i]``."""
    if isinstance(jobs, str | Path):
        return load_submissions(read_text(jobs), source=str(jobs))
    items = []
    for i, job in enumerate(jobs):
        try:
            items.append(to_submission(job))
        except SpecError as exc:
            where = f"items[{i}]" + (f".{exc.field}" if exc.field else "")
            raise SpecError(exc.message, field=where, fix=exc.fix) from None
    return items


def to_config_documents(
    documents: Sequence[Mapping[str, Any]] | str | Path, notes: list[str] | None = None,
) -> list[dict[str, Any]]:
    """Validated config documents (flavors, cohorts, queues, priority classes) in wire form.

    Kueue's own objects are taken too (``phalanx.spec.kueue``); ``notes`` receives what
    they said that Phalanx read but keeps nowhere."""
    if isinstance(documents, str | Path):
        objects = load_config_yaml(read_text(documents), source=str(documents), notes=notes)
    elif isinstance(documents, Sequence):
        objects = parse_config_documents(list(documents), notes=notes)
    else:
        raise SpecError(
            f"cannot apply a {type(documents).__name__}",
            field="documents",
            fix="pass a list of documents or the path of a YAML file",
        )
    return [obj.to_dict() for obj in objects]
