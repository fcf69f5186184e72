"""Kubernetes-style quantities ("8", "500m", "64Gi", "1.5", "2e3") and durations.

Quantities are held as integers in thousandths of a unit ("milli-units"), so
CPU "500m" is 500, one GPU is 1000 and "1Ki" of memory is 1_024_000. Integer
arithmetic keeps quota accounting exact and fast.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import TypeVar, cast

from phalanx.errors import SpecError

MILLI = 1000

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?$")
_QUANTITY_FIX = 'write a number with an optional suffix, e.g. "8", "500m", "64Gi"'
# The most milli-units a quantity may hold: a signed 64-bit integer, as the store and
# Kubernetes' own quantities hold them (about 9.2 million terabytes of memory).
MAX_MILLIS = 2**63 - 1
# Quantities and durations already parsed, by their text (and quantities by their int):
# every submit parses the same few ("100m", "1Gi", "10s") in its spec and its record, and
# a parse costs more than a look-up. Bounded; values are immutable.
_MEMO_SIZE = 4096
_QUANTITIES: dict[str | int, int] = {}
_DURATIONS: dict[str, float] = {}
_K = TypeVar("_K")
_V = TypeVar("_V")


def parse_quantity(value: object, field: str = "quantity") -> int:
    """Parse a quantity into milli-units, rounding up like Kubernetes does."""
    # Exact types only: a bool (True equals 1) is refused below, never looked up.
    if type(value) is not str and type(value) is not int:
        return _parse_quantity(value, field)
    return _remembered(_QUANTITIES, cast("str | int", value), field, _parse_quantity)


def _remembered(memo: dict[_K, _V], value: _K, field: str,
                parse: Callable[[_K, str], _V]) -> _V:
    """``parse(value, field)``, looked up in ``memo`` first (and kept there while it has
    room). Only answers are kept: a value refused is parsed, and refused, again."""
    known = memo.get(value)
    if known is None:
        known = parse(value, field)
        if len(memo) < _MEMO_SIZE:
            memo[value] = known
    return known


def _parse_quantity(value: object, field: str) -> int:
    if isinstance(value, bool):
        raise SpecError(f"expected a quantity, got {value!r}", field=field, fix=_QUANTITY_FIX)
    if isinstance(value, int):
        number = Decimal(value)
        suffix = ""
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise SpecError(f"expected a quantity, got {value!r}", field=field, fix=_QUANTITY_FIX)
        number = Decimal(repr(value))
        suffix = ""
    elif isinstance(value, str):
        match = _QUANTITY.match(value.strip())
        if not match:
            raise SpecError(f"{value!r} is not a quantity", field=field, fix=_QUANTITY_FIX)
        try:
            number = Decimal(match.group(1))
        except InvalidOperation:
            raise SpecError(
                f"{value!r} is not a quantity", field=field, fix=_QUANTITY_FIX
            ) from None
        suffix = match.group(2) or ""
    else:
        raise SpecError(f"expected a quantity, got {value!r}", field=field, fix=_QUANTITY_FIX)
    scale = Decimal(_BINARY[suffix]) if suffix in _BINARY else _DECIMAL[suffix]
    millis = number * scale * MILLI
    if millis < 0:
        raise SpecError(
            f"{value!r} is negative", field=field, fix="quantities must be zero or more"
        )
    rounded = int(millis.to_integral_value(rounding="ROUND_CEILING"))
    if rounded > MAX_MILLIS:
        raise SpecError(
            f"{value!r} is larger than any quantity Phalanx holds", field=field,
            fix=f"write at most {format_quantity(MAX_MILLIS)} (a signed 64-bit count of "
                "thousandths)",
        )
    return rounded


def format_quantity(millis: int, resource: str = "") -> str:
    """Render milli-units back into the shortest natural Kubernetes form."""
    big = millis % MILLI == 0 and (millis // MILLI) % 2**20 == 0 and millis > 0
    if (big or resource == "memory" or resource.endswith("storage")) and millis % MILLI == 0:
        units = millis // MILLI
        for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            base = _BINARY[suffix]
            if units and units % base == 0:
                return f"{units // base}{suffix}"
        return str(units)
    if millis % MILLI == 0:
        return str(millis // MILLI)
    return f"{millis}m"


# Resources counted in bytes: shown with binary suffixes (Ki, Mi, Gi, Ti) as people size memory.
_BYTE_RESOURCES = ("memory", "storage", "ephemeral-storage")
# How many significant digits a byte figure keeps when no short exact form exists:
# the shown value is within half a unit in the last digit, 0.5 % of it at most.
DISPLAY_DIGITS = 3
_DISPLAY_BINARY = ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki")
_DISPLAY_DECIMAL = ("E", "P", "T", "G", "M", "k")


@lru_cache(maxsize=256)  # a handful of resource names, asked for in every reason text
def counts_bytes(resource: str) -> bool:
    """Whether ``resource`` is an amount of bytes (memory, storage, huge pages)."""
    name = resource.removeprefix("requests.").removeprefix("limits.")
    return name in _BYTE_RESOURCES or name.endswith("-storage") or name.startswith("hugepages-")


def _mantissa(number: Decimal) -> str | None:
    """``number`` as plain digits if it has at most DISPLAY_DIGITS significant ones."""
    if number != number.quantize(Decimal(1).scaleb(number.adjusted() - DISPLAY_DIGITS + 1)):
        return None
    return format(number.normalize(), "f")


def _scaled(number: Decimal, suffixes: tuple[str, ...], table: dict[str, Decimal]) -> tuple[
        Decimal, str]:
    """``number`` in the largest unit of ``suffixes`` it holds at least one of."""
    for suffix in suffixes:
        if number >= table[suffix]:
            return number / table[suffix], suffix
    return number, ""


# The scheduler words a reason for every job it turns down in every cycle, with the same few
# amounts again and again: a replay asks for hundreds of thousands.
@lru_cache(maxsize=1 << 12)
def format_amount(millis: int, resource: str = "") -> str:
    """A quantity as a person writes it, for tables, pages and messages.

    Bytes get binary suffixes ("4Gi", "256Mi", "1.5Gi"), or decimal ones when only those
    are exact ("1G"); a figure with no short exact form is rounded to DISPLAY_DIGITS
    significant digits ("23.5Gi"), so it is within 0.5 % of the value. CPU and countable
    resources (GPUs, pods) are whole numbers ("8"), or thousandths ("500m") when
    fractional, always exact. ``format_quantity`` is the exact form the API sends.
    """
    if not counts_bytes(resource) or millis < MILLI:
        return str(millis // MILLI) if millis % MILLI == 0 else f"{millis}m"
    number = Decimal(millis) / MILLI
    binary_table = {s: Decimal(_BINARY[s]) for s in _DISPLAY_BINARY}
    binary, binary_suffix = _scaled(number, _DISPLAY_BINARY, binary_table)
    if binary == binary.to_integral_value():
        return f"{int(binary)}{binary_suffix}"
    shown = _mantissa(binary)
    if shown is not None:
        return f"{shown}{binary_suffix}"
    decimal, decimal_suffix = _scaled(number, _DISPLAY_DECIMAL, _DECIMAL)
    shown = _mantissa(decimal)
    if shown is not None:
        return f"{shown}{decimal_suffix}"
    step = Decimal(1).scaleb(binary.adjusted() - DISPLAY_DIGITS + 1)
    rounded = binary.quantize(step, rounding="ROUND_HALF_EVEN")
    return f"{format(rounded.normalize(), 'f')}{binary_suffix}"


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(value: object, field: str = "duration") -> float:
    """Parse "90s", "30m", "2h", "1h30m", "500ms" or a number of seconds."""
    if type(value) is not str:
        return _parse_duration(value, field)
    return _remembered(_DURATIONS, value, field, _parse_duration)


def _parse_duration(value: object, field: str) -> float:
    fix = 'write a duration such as "90s", "30m", "2h" or "1h30m"'
    if isinstance(value, bool):
        raise SpecError(f"expected a duration, got {value!r}", field=field, fix=fix)
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip()
        try:
            seconds = float(text)
        except ValueError:
            pos = 0
            seconds = 0.0
            for match in _DURATION.finditer(text):
                if match.start() != pos:
                    break
                seconds += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
                pos = match.end()
            if pos != len(text) or not text:
                raise SpecError(f"{value!r} is not a duration", field=field, fix=fix) from None
    else:
        raise SpecError(f"expected a duration, got {value!r}", field=field, fix=fix)
    if seconds < 0 or not math.isfinite(seconds):
        raise SpecError(f"{value!r} is not a positive duration", field=field, fix=fix)
    return seconds


def format_duration(seconds: float) -> str:
    if seconds < 1:
        return f"{int(seconds * 1000)}ms"
    whole = int(seconds)
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if whole >= size:
            parts.append(f"{whole // size}{unit}")
            whole %= size
    if whole or not parts:
        parts.append(f"{whole}s")
    return "".join(parts)
