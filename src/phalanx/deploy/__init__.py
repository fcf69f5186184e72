"""Deploying Phalanx on Kubernetes: typed values rendered into manifests."""

from phalanx.deploy.render import (
    commented_values,
    kustomize_files,
    render,
    render_files,
    to_yaml,
    write_kustomize,
)
from phalanx.deploy.values import Values, load_values, load_values_yaml

__all__ = [
    "Values",
    "commented_values",
    "kustomize_files",
    "load_values",
    "load_values_yaml",
    "render",
    "render_files",
    "to_yaml",
    "write_kustomize",
]
