"""Job labels, checked as Kubernetes checks labels, and equality label selectors.

A job's labels pick it out of lists and bulk cancels (``label=team=nlp``), and
planes may copy them to pods, so they follow Kubernetes' rules: a key is an
optional DNS-subdomain prefix and ``/``, then a name of at most 63 characters
(letters, digits, ``-``, ``_``, ``.``, starting and ending with a letter or
digit); a value is empty or such a name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from phalanx.errors import SpecError

_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_PREFIX = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
KEY_FIX = ("write an optional DNS-subdomain prefix and '/', then at most 63 letters, digits, "
           "'-', '_' or '.', starting and ending with a letter or digit (e.g. team, "
           "example.com/run)")
VALUE_FIX = ("write at most 63 letters, digits, '-', '_' or '.', starting and ending with a "
             "letter or digit, or nothing")
SELECTOR_FIX = "write key=value pairs separated by commas, e.g. team=nlp,run=7"


def label_key_problem(key: str) -> str | None:
    """Why ``key`` is not a label key, or None if it is one."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _PREFIX.fullmatch(prefix)):
        return f"{key!r} is not a valid label key: its prefix is not a DNS subdomain"
    if not _NAME.fullmatch(name):
        return f"{key!r} is not a valid label key"
    return None


def label_value_problem(value: str) -> str | None:
    """Why ``value`` is not a label value, or None if it is one."""
    if value and not _NAME.fullmatch(value):
        return f"{value!r} is not a valid label value"
    return None


def check_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """The labels, or a ValueError saying which key or value is wrong and how to write it
    (for pydantic validators, which name the field)."""
    for key, value in labels.items():
        if problem := label_key_problem(key):
            raise ValueError(f"{problem}; {KEY_FIX}")
        if problem := label_value_problem(value):
            raise ValueError(f"{problem} (key {key!r}); {VALUE_FIX}")
    return dict(labels)


def parse_label_selector(text: str, field: str = "label") -> dict[str, str]:
    """``key=value[,key=value...]`` as a mapping; a SpecError naming ``field`` otherwise.

    Only equality is supported: a selector that a job's labels must all match.
    """
    selector: dict[str, str] = {}
    for part in text.split(","):
        key, equals, value = (s.strip() for s in part.partition("="))
        if not equals or part.strip().startswith("!") or key.endswith("!"):
            raise SpecError(f"{part.strip()!r} is not key=value", field=field, fix=SELECTOR_FIX)
        if problem := label_key_problem(key):
            raise SpecError(problem, field=field, fix=KEY_FIX)
        if problem := label_value_problem(value):
            raise SpecError(problem, field=field, fix=VALUE_FIX)
        selector[key] = value
    return selector


def selector_text(text: str, field: str) -> str:
    """An equality selector as the API server takes it (``key=value,...``); a SpecError
    naming ``field`` for anything else (namespaces to manage, as ``--manage-namespaces``)."""
    return ",".join(f"{k}={v}" for k, v in parse_label_selector(text, field).items())


def merge_selectors(texts: list[str] | None, field: str = "label") -> dict[str, str]:
    """Several selectors (a repeated option or query parameter) as one mapping."""
    selector: dict[str, str] = {}
    for text in texts or ():
        selector.update(parse_label_selector(text, field))
    return selector
