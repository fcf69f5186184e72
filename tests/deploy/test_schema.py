"""Every rendered object passes the Kubernetes schemas (strict: no unknown fields).

The schemas are the OpenAPI-derived JSON schemas bundled with kubernetes-validate,
checked against the oldest and the newest Kubernetes release it ships. The
rules the schemas cannot express but the API server enforces (name, label,
port-name and env-name formats, selector matching the template) are checked too.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from tests.deploy.conftest import COMBINATIONS, Manifest, rendered

kubernetes_validate = pytest.importorskip("kubernetes_validate")

VERSIONS = [kubernetes_validate.utils.all_versions()[0],
            kubernetes_validate.utils.latest_version()]

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
PORT_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _label_ok(key: str, value: str) -> bool:
    prefix, _, name = key.rpartition("/")
    return ((not prefix or bool(SUBDOMAIN.match(prefix))) and 0 < len(name) <= 63
            and bool(LABEL_NAME.match(name))
            and (value == "" or (len(value) <= 63 and bool(LABEL_NAME.match(value)))))


def api_rules(obj: Manifest) -> list[str]:
    """Problems the API server would reject that a JSON schema cannot see."""
    problems = []
    meta = obj["metadata"]
    name_rule = DNS_LABEL if obj["kind"] in ("Namespace", "Service") else SUBDOMAIN
    if not name_rule.match(meta["name"]) or len(meta["name"]) > 253:
        problems.append(f"name {meta['name']!r}")
    if "namespace" in meta and not DNS_LABEL.match(meta["namespace"]):
        problems.append(f"namespace {meta['namespace']!r}")
    problems += [f"label {k}={v}" for k, v in meta.get("labels", {}).items()
                 if not _label_ok(k, v)]
    spec = obj.get("spec", {})
    if obj["kind"] in ("Deployment", "DaemonSet"):
        template = spec["template"]
        selected = spec["selector"]["matchLabels"].items()
        if not selected <= template["metadata"]["labels"].items():
            problems.append("selector does not match the pod template")
        pod = template["spec"]
        volumes = {v["name"] for v in pod.get("volumes", [])}
        for container in pod["containers"]:
            if not DNS_LABEL.match(container["name"]):
                problems.append(f"container name {container['name']!r}")
            problems += [f"env {e['name']!r}" for e in container.get("env", [])
                         if not ENV_NAME.match(e["name"])]
            ports = container.get("ports", [])
            problems += [f"port name {p['name']!r}" for p in ports
                         if len(p["name"]) > 15 or not PORT_NAME.match(p["name"])]
            problems += [f"mount of missing volume {m['name']!r}"
                         for m in container.get("volumeMounts", []) if m["name"] not in volumes]
            for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                port = container.get(probe, {}).get("httpGet", {}).get("port")
                if isinstance(port, str) and port not in {p["name"] for p in ports}:
                    problems.append(f"{probe} names unknown port {port!r}")
            for kind in ("requests", "limits"):
                for resource in container.get("resources", {}).get(kind, {}):
                    if not _label_ok(resource, ""):
                        problems.append(f"resource name {resource!r}")
    if obj["kind"] == "Service":
        for port in spec["ports"]:
            if len(port["name"]) > 15 or not PORT_NAME.match(port["name"]):
                problems.append(f"service port name {port['name']!r}")
    return problems


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("combination", sorted(COMBINATIONS))
def test_every_object_passes_the_kubernetes_schema(combination: str, version: str) -> None:
    manifests = rendered(COMBINATIONS[combination])
    assert manifests
    for obj in manifests:
        where = f"{obj['kind']}/{obj['metadata']['name']}"
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{where} fails the {version} schema at {list(exc.path)}: {exc.message}")
        assert api_rules(obj) == [], where


def test_the_validator_rejects_what_the_api_server_would() -> None:
    """A control: the same check catches a misspelt field and a wrong type."""
    deployment = next(m for m in rendered({}) if m["kind"] == "Deployment")
    kubernetes_validate.validate(deployment, VERSIONS[-1], strict=True)
    broken: list[dict[str, Any]] = [copy.deepcopy(deployment) for _ in range(3)]
    broken[0]["spec"]["replica"] = 1
    broken[1]["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "http"
    broken[2]["spec"]["template"]["spec"]["containers"][0]["securityContext"]["runAs"] = 0
    for obj in broken:
        with pytest.raises(kubernetes_validate.ValidationError):
            kubernetes_validate.validate(obj, VERSIONS[-1], strict=True)


def test_the_api_rules_catch_a_bad_name() -> None:
    service = next(m for m in rendered({}) if m["kind"] == "Service")
    bad = copy.deepcopy(service)
    bad["metadata"]["name"] = "phalanx.api"  # Services need a DNS label, not a subdomain
    assert api_rules(bad) == ["name 'phalanx.api'"]
