"""Shared model base: strict, camelCase on the wire, snake_case in Python."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, TypeVar, get_args

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    PlainSerializer,
    Strict,
    ValidationError,
    WithJsonSchema,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from phalanx.errors import SpecError
from phalanx.spec.quantity import (
    format_amount,
    format_duration,
    format_quantity,
    parse_duration,
    parse_quantity,
)


class Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        alias_generator=to_camel,
        validate_assignment=False,
    )

    def to_dict(self) -> dict[str, Any]:
        """The document form: camelCase keys, quantities as strings, no empty fields."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    def __repr_args__(self) -> Any:
        # Quantities stay milli-unit ints for code; printed, a record shows them as people
        # write them ("256Mi", "500m"), not as 268435456000.
        shown = _quantity_fields(type(self))
        for name, value in super().__repr_args__():
            if name in shown and value is not None:
                if isinstance(value, Mapping):
                    value = {res: format_amount(v, res) for res, v in value.items()}
                elif isinstance(value, int):
                    resource = getattr(self, "resource", None) or getattr(self, "name", "")
                    value = format_amount(value, resource if isinstance(resource, str) else "")
            yield name, value


def _quantity(value: object) -> int:
    try:
        return parse_quantity(value)
    except SpecError as exc:
        raise ValueError(exc.message + "; " + (exc.fix or "")) from None


def _duration(value: object) -> float:
    try:
        return parse_duration(value)
    except SpecError as exc:
        raise ValueError(exc.message + "; " + (exc.fix or "")) from None


# Quantities are milli-units in Python and Kubernetes-style strings/numbers on the wire.
_QUANTITY_SERIALIZER = PlainSerializer(format_quantity, return_type=str)
Quantity = Annotated[
    int,
    BeforeValidator(_quantity),
    _QUANTITY_SERIALIZER,
    WithJsonSchema({"anyOf": [{"type": "string"}, {"type": "number"}]}),
]
_QUANTITY_FIELDS: dict[type, frozenset[str]] = {}


def _is_quantity(annotation: object) -> bool:
    """Whether ``annotation`` is Quantity, optional or a mapping to it (at any depth)."""
    return annotation is Quantity or any(_is_quantity(a) for a in get_args(annotation))


def _quantity_fields(model: type[BaseModel]) -> frozenset[str]:
    """The fields of ``model`` that hold quantities (directly or as a resource mapping)."""
    known = _QUANTITY_FIELDS.get(model)
    if known is None:
        known = frozenset(name for name, field in model.model_fields.items()
                          if _QUANTITY_SERIALIZER in field.metadata
                          or _is_quantity(field.annotation))
        _QUANTITY_FIELDS[model] = known
    return known


Duration = Annotated[
    float,
    BeforeValidator(_duration),
    PlainSerializer(format_duration, return_type=str),
    WithJsonSchema({"anyOf": [{"type": "string"}, {"type": "number"}]}),
]

# A JSON number (an integer or a float, never a boolean or a string), as a float.
StrictNumber = Annotated[float, Strict()]

NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
_DNS_LABEL = re.compile(NAME_PATTERN.removesuffix("$"))


def check_name(value: str, what: str = "name") -> str:
    # fullmatch: "$" alone would let a trailing newline through.
    if not value or len(value) > 63 or not _DNS_LABEL.fullmatch(value):
        raise ValueError(
            f"{value!r} is not a valid {what}; use at most 63 lowercase letters, digits and '-', "
            "starting and ending with a letter or digit"
        )
    return value


Name = Annotated[
    str,
    BeforeValidator(lambda v: check_name(v) if isinstance(v, str) else v),
    WithJsonSchema({"type": "string", "pattern": NAME_PATTERN, "minLength": 1, "maxLength": 63}),
]

_WHITESPACE = re.compile(r"\s")
IMAGE_FIX = "write a reference such as ghcr.io/acme/train:1.4 (no spaces)"


_HTTP_URL = re.compile(r"^https?://[^\s/?#]+(/\S*)?$")


def check_api_url(value: str, field: str) -> str:
    """``value`` if it is an http(s) URL; SpecError naming ``field`` otherwise."""
    if not _HTTP_URL.match(value):
        raise SpecError(f"{value[:80]!r} is not an http(s) URL", field=field,
                        fix="write the API's URL as pods reach it, e.g. "
                            "http://phalanx.phalanx-system.svc:7780")
    return value


def is_image_reference(value: str) -> bool:
    """Whether ``value`` can be a container image reference (``registry/name:tag``)."""
    return bool(value) and not _WHITESPACE.search(value)


def _image(value: object) -> object:
    if isinstance(value, str) and not is_image_reference(value):
        raise ValueError(f"{value!r} is not a container image reference; {IMAGE_FIX}")
    return value


ImageReference = Annotated[str, BeforeValidator(_image)]

M = TypeVar("M", bound=BaseModel)


def _loc_to_field(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


# The ctx key of a whole-model check's error that holds the field it is about.
_AT = "at"


def field_error(message: str, *at: str | int) -> PydanticCustomError:
    """A whole-model check's refusal that names the field it is about, ``at`` below the
    model (wire names, such as ``"podSets", 0, "env"``).

    Pydantic gives an error a ``model_validator`` raises the model's own location (the
    document itself at top level), so a refusal by a check across fields would name no field;
    raise this instead of ValueError and the field is named as a field's own check names it.
    ``message`` is "what is wrong; the fix", as a ValueError's.
    """
    return PydanticCustomError("invalid", message, {_AT: at})


def spec_error_from(exc: ValidationError, prefix: str = "") -> SpecError:
    """Turn pydantic's report into one SpecError naming the first bad field."""
    return spec_error_from_errors(exc.errors(include_url=False), prefix)


def spec_error_from_errors(errors: Sequence[Mapping[str, Any]], prefix: str = "") -> SpecError:
    """One SpecError naming the first bad field of a pydantic error list (as FastAPI has it)."""
    if not errors:
        return SpecError("is invalid", field=prefix or None, fix="correct the document")
    err = errors[0]
    at = tuple((err.get("ctx") or {}).get(_AT, ()))
    loc = tuple(p for p in (*err["loc"], *at)
                if not (isinstance(p, str) and p.startswith("function-")))
    field = _loc_to_field(loc)
    if prefix:
        field = f"{prefix}.{field}" if field else prefix
    kind = err["type"]
    msg = err["msg"]
    if kind == "extra_forbidden":
        return SpecError(
            "unknown field", field=field, fix="remove it or check its spelling against the docs"
        )
    if kind == "missing":
        return SpecError("is required", field=field, fix="add it")
    msg = msg.removeprefix("Value error, ")
    fix = None
    if "; " in msg:
        msg, fix = msg.split("; ", 1)
    more = len(errors) - 1
    if more:
        msg += f" (and {more} more problem{'s' if more > 1 else ''})"
    if not fix:
        fix = f"correct {field}" if field else "correct the document"
        if "valid" in msg or "Input should" in msg:
            fix += f" ({msg[0].lower() + msg[1:]})"
    return SpecError(msg, field=field or None, fix=fix)


def validate(model: type[M], data: object, prefix: str = "", *, stored: bool = False) -> M:
    """Validate a document into a model, raising SpecError instead of ValidationError.

    ``stored``: the document is a record read back from the store, which bounds added after
    it was stored do not refuse (see ``phalanx.spec.resources.STORED``).
    """
    try:
        return model.model_validate(data, context={"stored": True} if stored else None)
    except ValidationError as exc:
        raise spec_error_from(exc, prefix) from None
