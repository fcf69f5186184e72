"""A compute plane as the CLI and the control plane know it before building it: its name
(``--compute NAME``, ``ComputePlane.name``), what it is, its options (the flags of ``phalanx
up`` and ``phalanx worker`` it takes) and where its builder is. Declarations import nothing
of the plane (which may need an optional extra): ``compute/factory.py`` imports the builder
only to build it, and the CLI makes its options from the declarations.

The node-pool providers a plane offers are not listed here: each provider says which plane
it serves (``ProviderInfo.serves``, ``spec/providers/``), and ``plane_providers`` reads them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from phalanx.errors import InternalError
from phalanx.spec.providers import ProviderInfo, providers

# A plane's options as given, by ``PlaneOption.param``: only those given (not None).
PlaneOptions = Mapping[str, object]


class OptionKind(StrEnum):
    """How the CLI reads an option's value (and writes it back for ``up -d``)."""

    TEXT = "text"
    FILE = "file"  # an existing file, made absolute
    DIRECTORY = "directory"
    COUNT = "count"  # an integer of at least 1
    DURATION = "duration"  # e.g. 60s, 5m: seconds (float) once read
    LIST = "list"  # repeated for several values: a tuple of texts once read


@dataclass(frozen=True, slots=True)
class PlaneOption:
    """One flag of ``phalanx up`` and/or ``phalanx worker`` that a plane takes. A plane that
    does not take it refuses it, with ``refusal`` (``{plane}``: that plane's name) and a fix
    naming the planes that do take it, then ``fix_note``."""

    param: str  # the keyword of ``make_plane`` and ``serve`` (e.g. nodes_file)
    flag: str  # e.g. --nodes
    help: str
    kind: OptionKind = OptionKind.TEXT
    verbs: tuple[str, ...] = ("up", "worker")
    refusal: str = "the {plane} compute plane takes no {flag}"
    fix_note: str = ""
    envvar: str | None = None  # read from this environment variable when the flag is absent
    cli_default: str | None = None  # what the CLI passes when the flag is absent (as typed)


@dataclass(frozen=True, slots=True)
class PlaneInfo:
    name: str
    what: str  # what it runs on, in a sentence's middle ("runs pods as processes on ...")
    # ``module:function`` taking a ``PlaneRequest`` (``compute/factory.py``) and returning
    # the ``ComputePlane``; imported only to build.
    build: str
    options: tuple[PlaneOption, ...] = ()
    # How ``phalanx worker`` fences the plane's pods: "file" (a lease file in the worker's
    # state directory that each pod's supervisor reads), "plane" (the plane's own, e.g. a
    # Kubernetes Lease), or None (its pods run no code: nothing to fence).
    worker_fence: str | None = None
    # Whether a worker's plane is built with its own and the control plane's identity (and
    # so asks the control plane for its identity first): its objects carry them.
    labelled: bool = False
    # Whether its pods run on other machines: they reach the API at --pod-api-url.
    pods_elsewhere: bool = False

    def takes(self, param: str) -> bool:
        return any(o.param == param for o in self.options)


@dataclass(frozen=True, slots=True)
class PlaneRequest:
    """What a plane's ``build`` gets: its options as given, and how it is run."""

    home: Path  # the state directory of the control plane or worker that drives it
    options: PlaneOptions = field(default_factory=dict)
    # The lease file whose lapse stops the pods (a worker's, ``compute/lease.py``).
    lease: Path | None = None
    # The name of the plane a worker drives, and the control plane's identity: a labelled
    # plane's objects carry them and it acts on no one else's; the local plane keys its
    # directories outside the state directory by the control plane's.
    plane_name: str | None = None
    control_plane: str | None = None
    fence_after: float | None = None  # a worker's --fence-after, to which fences are scaled
    # The term of the leading replica that drives it (None: a lone control plane or a
    # worker): the local plane and its pods' supervisors refuse commands of an older term.
    term: int | None = None

    def option(self, param: str) -> object:
        return self.options.get(param)


_PLANES: dict[str, PlaneInfo] = {}
_OPTIONS: dict[str, PlaneOption] = {}


def register_plane(info: PlaneInfo) -> PlaneInfo:
    """Make ``info`` known by its name (a module declares its plane once, at import). Two
    planes may take the same option: then it is the same ``PlaneOption``."""
    known = _PLANES.get(info.name)
    if known is not None and known != info:
        raise InternalError(f"two compute planes are named {info.name}",
                            fix="give the new plane a name of its own")
    for option in info.options:
        same = _OPTIONS.get(option.param)
        if same is not None and same != option:
            raise InternalError(f"two compute plane options are named {option.param}",
                                fix="declare the option once and import it where it is shared")
    _PLANES[info.name] = info
    _OPTIONS.update((o.param, o) for o in info.options)
    return info


def plane_info(name: str) -> PlaneInfo | None:
    return _PLANES.get(name)


def planes() -> list[PlaneInfo]:
    """Every compute plane declared so far, in the order declared."""
    return list(_PLANES.values())


def plane_options(verb: str | None = None) -> list[PlaneOption]:
    """Every plane's options (those of ``verb``, "up" or "worker", when given), each once,
    in the order declared."""
    return [o for o in _OPTIONS.values() if verb is None or verb in o.verbs]


def planes_taking(param: str) -> list[str]:
    return [p.name for p in _PLANES.values() if p.takes(param)]


def plane_providers(name: str) -> list[str]:
    """The node-pool providers that buy pools for plane ``name``, by their declarations."""
    return [p.name for p in providers() if p.serves == name]


def render_option(option: PlaneOption, value: object) -> str:
    """A value read by the CLI, written back as its flag takes it (``up -d`` passes the flags
    on to the process it starts)."""
    if option.kind is OptionKind.DURATION and isinstance(value, int | float):
        return f"{value:g}s"
    if option.kind is OptionKind.LIST and isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def plane_table(declared: Sequence[PlaneInfo], offered: Sequence[ProviderInfo]) -> str:
    """The planes ``declared`` and their options, with the providers of ``offered`` that
    serve each, in Markdown as docs/architecture.md shows the built-in ones (its copy is
    kept current by ``tests/compute/test_plane_registry.py``)."""
    rows = ["| plane | what it does | its options | providers |",
            "|---|---|---|---|"]
    for info in declared:
        options = ", ".join(
            f"`{o.flag}`" + ("" if o.verbs == ("up", "worker") else f" ({', '.join(o.verbs)})")
            for o in info.options) or "none"
        names = ", ".join(f"`{p.name}`" for p in offered if p.serves == info.name) or "none"
        rows.append(f"| `--compute {info.name}` | {info.what} | {options} | {names} |")
    return "\n".join(rows)
