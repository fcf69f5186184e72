"""Compute planes, one declaration each (``PlaneInfo``, ``base.py``): the built-in ones are
declared here, one module each; a plane elsewhere declares itself in its own module with
``register_plane``. The CLI's ``--compute`` choices and plane options, ``make_plane`` and the
docs' table of planes are all made from the declarations."""

# Declared in this order, the order `--help` lists them.
# isort: off
from phalanx.spec.computeplanes import local
from phalanx.spec.computeplanes import simulated
from phalanx.spec.computeplanes import kubernetes
# isort: on
from phalanx.spec.computeplanes.base import (
    OptionKind,
    PlaneInfo,
    PlaneOption,
    PlaneOptions,
    PlaneRequest,
    plane_info,
    plane_options,
    plane_providers,
    plane_table,
    planes,
    planes_taking,
    register_plane,
    render_option,
)

BUILTIN = (local.LOCAL, simulated.SIMULATED, kubernetes.KUBERNETES)

__all__ = ["BUILTIN", "OptionKind", "PlaneInfo", "PlaneOption", "PlaneOptions", "PlaneRequest",
           "plane_info", "plane_options", "plane_providers", "plane_table", "planes",
           "planes_taking", "register_plane", "render_option"]
