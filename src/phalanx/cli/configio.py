"""Verbs that write the configuration out: ``get KIND NAME`` and ``export``, in Phalanx's
form or Kueue's own (``--as kueue``), so a team can leave as easily as it came: ``phalanx
apply -f`` of either output changes nothing."""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from typing import Annotated, Any

import typer
import yaml

from phalanx.cli.output import reports_errors
from phalanx.cli.settings import settings_of
from phalanx.errors import NotFound
from phalanx.spec.config import config_kind
from phalanx.spec.kueue import DEFAULT_KUEUE_VERSION, to_kueue
from phalanx.spec.resources import ConfigObject


class Form(StrEnum):
    PHALANX = "phalanx"
    KUEUE = "kueue"


class Output(StrEnum):
    YAML = "yaml"
    JSON = "json"


AsOption = Annotated[Form, typer.Option(
    "--as", help="phalanx: Phalanx's own form; kueue: Kueue's objects (kueue.x-k8s.io), "
    "which Kueue and `phalanx apply` both read")]
ApiVersionOption = Annotated[str, typer.Option(
    "--api-version", help="Kueue's API version to write with --as kueue: v1beta1 or v1beta2")]
OutputOption = Annotated[Output, typer.Option("--output", "-o", help="yaml or json")]


def documents_of(objects: list[ConfigObject], form: Form, api_version: str) -> list[Any]:
    """The objects as documents of ``form``."""
    if form is Form.KUEUE:
        return [to_kueue(obj, api_version) for obj in objects]
    return [obj.to_dict() for obj in objects]


def _write(documents: list[Any], output: Output, many: bool) -> None:
    if output is Output.JSON:
        body = documents if many else documents[0]
        sys.stdout.write(json.dumps(body, indent=2) + "\n")
    else:
        sys.stdout.write(yaml.safe_dump_all(documents, sort_keys=False))


@reports_errors
def get(
    ctx: typer.Context,
    kind: Annotated[str, typer.Argument(help="clusterqueue (cq), localqueue (lq, queue), "
                                        "resourceflavor (flavor), cohort, priorityclass (pc)")],
    name: Annotated[str, typer.Argument(help="The object's name")],
    output: OutputOption = Output.YAML,
    form: AsOption = Form.PHALANX,
    api_version: ApiVersionOption = DEFAULT_KUEUE_VERSION,
) -> None:
    """One configuration object, as `phalanx apply -f` takes it back."""
    wanted = config_kind(kind)
    with settings_of(ctx).client() as client:
        objects = client.config()
    found = [obj for obj in objects if obj.kind == wanted and obj.name == name]
    if not found:
        raise NotFound(f"{wanted} {name!r} does not exist", field=f"{wanted} {name}",
                       fix="check the name with `phalanx config`")
    _write(documents_of(found, form, api_version), output, many=False)


@reports_errors
def export(
    ctx: typer.Context,
    output: OutputOption = Output.YAML,
    form: AsOption = Form.PHALANX,
    api_version: ApiVersionOption = DEFAULT_KUEUE_VERSION,
) -> None:
    """The whole configuration, as `phalanx apply -f` takes it back (with --as kueue, kinds
    Kueue lacks, such as ProvisioningPolicy, stay in Phalanx's form in the same file)."""
    with settings_of(ctx).client() as client:
        objects = client.config()
    _write(documents_of(objects, form, api_version), output, many=True)


def register(app: typer.Typer) -> None:
    for verb in (get, export):
        app.command()(verb)
