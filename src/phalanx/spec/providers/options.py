"""Checks of provider options that several providers share: each raises ValueError naming
``options.<key>`` and what to write instead."""

from __future__ import annotations

from typing import Any

from phalanx.errors import SpecError
from phalanx.spec.quantity import parse_duration


def check_delay(value: object) -> None:
    try:
        parse_duration(value)
    except SpecError as exc:
        raise ValueError(f"options.delay: {exc.message}; {exc.fix}") from None


def check_stockout(value: object) -> None:
    ok = isinstance(value, bool) or (
        isinstance(value, int) and value >= 0
    ) or (isinstance(value, list) and all(isinstance(v, int) and v >= 1 for v in value))
    if not ok:
        raise ValueError(
            f"options.stockout is {value!r}; write true (always out of stock), a count N "
            "(the first N pools are out of stock) or a list of attempt numbers such as [1, 3]"
        )


def check_bool(key: str) -> Any:
    def check(value: object) -> None:
        if not isinstance(value, bool):
            raise ValueError(f"options.{key} is {value!r}; write true or false")
    return check


def check_string(key: str) -> Any:
    def check(value: object) -> None:
        if not isinstance(value, str) or not value:
            raise ValueError(f"options.{key} is {value!r}; write a non-empty string")
    return check


def check_mapping(key: str) -> Any:
    def check(value: object) -> None:
        if not isinstance(value, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            raise ValueError(f"options.{key} is {value!r}; write a mapping of strings to "
                             "strings")
    return check
