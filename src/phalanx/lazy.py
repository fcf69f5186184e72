"""Names a package exports but loads on first use, so importing it stays cheap.

``phalanx`` and ``phalanx.sdk`` export their everyday names this way: a CLI verb or a light
module of the SDK imports the package first, and should not pay for the HTTP client and
every model of the spec it does not use.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, MutableMapping
from importlib import import_module
from typing import Any


def lazy_names(
    package: str, homes: Mapping[str, str], namespace: MutableMapping[str, Any],
    exported: Iterable[str],
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``: a name of ``homes`` is imported
    from its module when first asked for, then kept in ``namespace`` (the package's
    globals), so later lookups never come back here."""
    listed = sorted({*exported})

    def getattr_(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(home), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted({*namespace, *listed})

    return getattr_, dir_


def imported(reference: str) -> Any:
    """What a ``module:name`` reference names (a declaration's ``build``), its module
    imported now."""
    module, _, name = reference.partition(":")
    return getattr(import_module(module), name)
