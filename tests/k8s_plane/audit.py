"""What each request to the fake API server asks of RBAC: the verb, the API group, the
resource (``pods/log``, ``jobs/status``) and the namespace, as the API server's authorizer
sees them, so a test can hold the requests a component made against the rules rendered
for it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

Rule = dict[str, list[str]]
_VERBS = {"POST": "create", "PATCH": "patch", "PUT": "update"}


@dataclass(frozen=True, slots=True)
class Access:
    verb: str
    group: str
    resource: str  # with its subresource: pods/log, jobs/status
    namespace: str | None  # None: cluster-scoped, or across namespaces


def access_of(method: str, path: str, query: dict[str, str]) -> Access | None:
    """The resource request ``method path?query`` is; None for discovery and the like."""
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, rest = parts[1], parts[3:]
    else:
        return None
    if not rest:
        return None
    namespace = None
    if rest[0] == "namespaces" and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    resource = rest[0] + (f"/{rest[2]}" if len(rest) > 2 else "")
    named = len(rest) > 1
    if method == "GET":
        verb = "get" if named else (
            "watch" if query.get("watch") in ("true", "1") else "list")
    elif method == "DELETE":
        verb = "delete" if named else "deletecollection"
    else:
        verb = _VERBS[method]
    return Access(verb, group, resource, namespace)


def grants(rules: Iterable[Rule]) -> set[tuple[str, str, str]]:
    """Every (group, resource, verb) the rules allow (none uses resourceNames here)."""
    return {(group, resource, verb) for rule in rules for group in rule["apiGroups"]
            for resource in rule["resources"] for verb in rule["verbs"]}
