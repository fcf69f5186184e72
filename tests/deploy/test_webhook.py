"""The admission webhook as rendered with manageNamespaces: its configuration points at the
control plane's Service and port, and its certificate, made by the render or by
cert-manager, is what the control plane serves."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from phalanx.deploy.webhook import CERT_ANNOTATION, make_certificate
from phalanx.spec.manifests.native import ADMISSION_PATH, CLUSTER_SET
from phalanx.spec.manifests.native_kinds import NATIVE_KINDS
from tests.deploy.conftest import COMBINATIONS, Manifest, find, one, rendered

NATIVE = COMBINATIONS["native-admission"]


def _flag(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


def test_the_webhook_reaches_the_control_plane_over_its_service() -> None:
    manifests = rendered(NATIVE)
    config = one(manifests, "MutatingWebhookConfiguration")
    (hook,) = config["webhooks"]
    # CREATE of each kind managed natively, in the namespaces the selector picks.
    assert hook["rules"][0] == {"operations": ["CREATE"], "apiGroups": ["batch"],
                                "apiVersions": ["v1"], "resources": ["jobs"],
                                "scope": "Namespaced"}
    named = {(r["apiGroups"][0], r["apiVersions"][0], resource)
             for r in hook["rules"] for resource in r["resources"]}
    assert named == {(a.group, a.version, a.plural) for a in NATIVE_KINDS.values()}
    assert {("kubeflow.org", "v1", "pytorchjobs"), ("ray.io", "v1", "rayclusters"),
            ("jobset.x-k8s.io", "v1alpha2", "jobsets")} <= named
    assert len(named) == len(CLUSTER_SET)
    assert hook["namespaceSelector"] == {"matchLabels": {"phalanx.dev/managed": "true",
                                                         "team": "research"}}
    assert hook["failurePolicy"] == "Ignore" and hook["sideEffects"] == "None"
    assert hook["admissionReviewVersions"] == ["v1"]
    # The Service it names forwards its port to the container's webhook port, which the
    # control plane is told to serve with the mounted certificate.
    target = hook["clientConfig"]["service"]
    assert target["path"] == ADMISSION_PATH
    service = one(manifests, "Service", target["name"])
    assert service["metadata"]["namespace"] == target["namespace"] == "ml-platform"
    (port,) = [p for p in service["spec"]["ports"] if p["port"] == target["port"]]
    pod = one(manifests, "Deployment")["spec"]["template"]["spec"]
    container = pod["containers"][0]
    (served,) = [p for p in container["ports"] if p["name"] == port["targetPort"]]
    args = container["args"]
    assert int(_flag(args, "--webhook-port")) == served["containerPort"]
    (mount,) = [m for m in container["volumeMounts"]
                if m["mountPath"] == _flag(args, "--webhook-cert-dir")]
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    assert {i["path"] for i in volume["secret"]["items"]} == {"tls.crt", "tls.key"}
    secret = one(manifests, "Secret", volume["secret"]["secretName"])
    assert secret["type"] == "kubernetes.io/tls"


def _pem(secret: Manifest, key: str) -> bytes:
    return base64.b64decode(secret["data"][key])


def test_the_generated_certificate_is_signed_by_the_ca_bundle() -> None:
    manifests = rendered(NATIVE)
    hook = one(manifests, "MutatingWebhookConfiguration")["webhooks"][0]
    secret = one(manifests, "Secret", "phalanx-webhook-tls")
    ca = x509.load_pem_x509_certificate(base64.b64decode(hook["clientConfig"]["caBundle"]))
    cert = x509.load_pem_x509_certificate(_pem(secret, "tls.crt"))
    key = serialization.load_pem_private_key(_pem(secret, "tls.key"), password=None)
    cert.verify_directly_issued_by(ca)
    assert cert.public_key() == key.public_key()
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "phalanx.ml-platform.svc" in names.get_values_for_type(x509.DNSName)
    # The pod template names the certificate: a new render rolls the control plane onto it.
    template = one(manifests, "Deployment")["spec"]["template"]["metadata"]
    again = one(rendered(NATIVE), "Deployment")["spec"]["template"]["metadata"]
    assert template["annotations"][CERT_ANNOTATION] != again["annotations"][CERT_ANNOTATION]


def test_cert_manager_makes_the_certificate_instead() -> None:
    manifests = rendered({**NATIVE, "webhookCertificate": "cert-manager"})
    config = one(manifests, "MutatingWebhookConfiguration")
    assert "caBundle" not in config["webhooks"][0]["clientConfig"]
    certificate = one(manifests, "Certificate")
    assert certificate["apiVersion"] == "cert-manager.io/v1"
    namespace, name = config["metadata"]["annotations"][
        "cert-manager.io/inject-ca-from"].split("/")
    assert (namespace, name) == (certificate["metadata"]["namespace"],
                                 certificate["metadata"]["name"])
    assert "phalanx.ml-platform.svc" in certificate["spec"]["dnsNames"]
    issuer = one(manifests, "Issuer", certificate["spec"]["issuerRef"]["name"])
    assert issuer["spec"] == {"selfSigned": {}}
    assert find(manifests, "Secret", "phalanx-webhook-tls") == []  # cert-manager writes it
    pod = one(manifests, "Deployment")["spec"]["template"]["spec"]
    assert {"name": "webhook-tls", "secret": {
        "secretName": certificate["spec"]["secretName"], "defaultMode": 0o400,
        "items": [{"key": "tls.crt", "path": "tls.crt"},
                  {"key": "tls.key", "path": "tls.key"}]}} in pod["volumes"]


def test_without_the_switch_there_is_no_webhook() -> None:
    manifests = rendered({})
    assert find(manifests, "MutatingWebhookConfiguration") == []
    assert not any(p["name"] == "webhook" for p in one(manifests, "Service")["spec"]["ports"])
    args: list[Any] = one(manifests, "Deployment")["spec"]["template"]["spec"][
        "containers"][0]["args"]
    assert "--webhook-cert-dir" not in args


@pytest.mark.parametrize("value", ["letsencrypt", ""])
def test_an_unknown_certificate_source_names_the_field(value: str) -> None:
    from phalanx.deploy import load_values
    from phalanx.errors import SpecError

    with pytest.raises(SpecError) as refused:
        load_values({**NATIVE, "webhookCertificate": value})
    assert refused.value.field == "webhookCertificate"


def test_a_certificate_is_for_the_names_asked() -> None:
    made = make_certificate(["localhost"])
    cert = x509.load_pem_x509_certificate(made.cert)
    assert isinstance(cert.public_key(), ec.EllipticCurvePublicKey)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(made.ca))
