"""Reading a verb's options without building a pydantic validator for each.

Typer turns every option's value into its annotated type through a pydantic
``TypeAdapter`` it builds for the option the first time a command runs, even for an
option left at its default: importing pydantic and building the adapters of a verb's
options costs about 100 ms, a third of a `phalanx version`. The values a command line
gives are strings already; ``install`` gives each option a reader that returns a string,
a list of strings, or an int already in range as they are (what the adapter returns for
them), and hands any other value to typer's own adapter, built then. So every value is
what typer would make of it, and a bad one gets typer's own message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, get_args, get_origin

from typer._click import Context
from typer._coercion import RuntimeParam, build_runtime_param
from typer.core import _TyperParameter


@dataclass(frozen=True)
class PlainValues(RuntimeParam):
    """Typer's coercion of one option, with the values that need no conversion passed
    through; typer's own (``build_runtime_param``) serves the rest."""

    descriptor: Any = None
    _typer: list[RuntimeParam] = field(default_factory=list)  # built on first need

    def _coerce_value(self, value: Any, param: _TyperParameter, ctx: Context) -> Any:
        if self._plain(value):
            return list(value) if isinstance(value, tuple | list) else value
        if not self._typer:
            self._typer.append(build_runtime_param(self.descriptor))
        return self._typer[0]._coerce_value(value, param=param, ctx=ctx)

    def _plain(self, value: Any) -> bool:
        annotation, info = self.annotation, self.parameter_info
        if info.parser is not None:
            return False
        if annotation is str:
            return isinstance(value, str)
        if get_origin(annotation) is list and get_args(annotation) == (str,):
            return isinstance(value, tuple | list) and all(isinstance(v, str) for v in value)
        if annotation is int and type(value) is int:
            return (info.min is None or value >= info.min) and \
                (info.max is None or value <= info.max)
        return False


def _plain_first(self: _TyperParameter) -> RuntimeParam:
    """``_TyperParameter.get_runtime_param``, with ``PlainValues`` first."""
    if self._runtime_param is None:
        descriptor = self.type_descriptor
        self._runtime_param = PlainValues(parameter_info=descriptor.parameter_info,
                                          annotation=descriptor.annotation,
                                          descriptor=descriptor)
    return self._runtime_param


def install() -> None:
    """Every typer option of this process reads its value with ``PlainValues``. The
    values are those typer's own coercion gives, so another typer app in the process
    sees no difference but its speed."""
    _TyperParameter.get_runtime_param = _plain_first  # type: ignore[method-assign]
