"""``phalanx k8s``: render the manifests that deploy Phalanx on a Kubernetes cluster.

Nothing here talks to a cluster: ``render`` prints YAML for ``kubectl apply -f -``
(or writes a kustomize base), ``values`` prints every value with its meaning.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from phalanx.cli.output import note, read_input, reports_errors
from phalanx.deploy import (
    Values,
    commented_values,
    load_values,
    load_values_yaml,
    render,
    to_yaml,
    write_kustomize,
)

app = typer.Typer(
    help="Render the Kubernetes manifests of a Phalanx deployment.",
    no_args_is_help=True,
    add_completion=False,
)


def _load(file: Path | None) -> Values:
    if file is None:
        return Values()
    text, source = read_input(file)
    return load_values_yaml(text, source=source)


def _with_flags(values: Values, manage_namespaces: str | None, replicas: int | None) -> Values:
    """``values`` with what the flags of ``render`` set, checked again as a whole."""
    if manage_namespaces is None and replicas is None:
        return values
    document = values.to_dict()
    if manage_namespaces is not None:
        document["manageNamespaces"] = manage_namespaces
    if replicas is not None:
        document.setdefault("worker", {})["replicas"] = replicas
    return load_values(document)


@app.command("render")
@reports_errors
def render_command(
    file: Annotated[
        Path | None,
        typer.Option("--file", "-f", help="Values file (YAML; '-' for stdin). Default: defaults"),
    ] = None,
    kustomize: Annotated[
        Path | None,
        typer.Option("--kustomize", help="Write a kustomize base into this directory instead"),
    ] = None,
    manage_namespaces: Annotated[
        str | None,
        typer.Option("--manage-namespaces", help="Kubernetes-native admission for the "
                     "namespaces this label selector picks (values: manageNamespaces), with "
                     "the RBAC it needs"),
    ] = None,
    replicas: Annotated[
        int | None,
        typer.Option("--replicas", help="Control plane replicas (worker.replicas): 2 or more "
                     "run with a leader and need store.kind: postgresql"),
    ] = None,
) -> None:
    """Print the manifests for `kubectl apply -f -`, or write them as a kustomize base."""
    values = _with_flags(_load(file), manage_namespaces, replicas)
    if kustomize is None:
        sys.stdout.write(to_yaml(render(values)))
        return
    written = write_kustomize(kustomize, values)
    note(f"wrote {len(written)} files to {kustomize}; apply with `kubectl apply -k {kustomize}`")


@app.command("values")
@reports_errors
def values_command(
    file: Annotated[
        Path | None,
        typer.Option("--file", "-f", help="Show these values filled in (default: the defaults)"),
    ] = None,
) -> None:
    """Print every value with its meaning: a starting point for a values file."""
    sys.stdout.write(commented_values(_load(file)))
