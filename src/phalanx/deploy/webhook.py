"""The admission webhook of Kubernetes-native admission, as rendered: its
``MutatingWebhookConfiguration`` and its TLS certificate.

The API server calls a webhook over HTTPS only, checking the serving certificate against
the configuration's ``caBundle``. ``webhookCertificate: generate`` (the default) makes a CA
and a serving certificate for the control plane's Service at each render, the key into the
Secret ``phalanx-webhook-tls`` the control plane mounts, the CA into ``caBundle``; the pod
template carries the certificate's digest, so applying a new render rolls the control plane
onto the new certificate. ``cert-manager`` renders an Issuer and a Certificate instead, and
cert-manager writes the same Secret and injects the ``caBundle``.

The configuration's choices:

- ``rules``: ``CREATE`` of each kind managed natively (``managed_resources``, the table the
  control plane manages from, so a kind added there joins the webhook); only creation is
  held, as Kueue does; later changes are the watch's.
- ``namespaceSelector``: the ``manageNamespaces`` selector: the API server does not even
  call the webhook for other namespaces.
- ``failurePolicy: Ignore``: a control plane that is down or restarting must not stop
  every team from creating Jobs; a Job created meanwhile is suspended by the watch as soon
  as the control plane is back (its controller may have started pods for that while, which
  are then deleted). ``Fail`` would make Phalanx's availability the cluster's.
- ``sideEffects: None``: the webhook only answers a patch; nothing is written while
  answering, so dry-run requests are safe to send it.
- ``timeoutSeconds: 5``: the answer is computed from memory; a slow one is better ignored.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import ipaddress
from dataclasses import dataclass
from typing import Any

from phalanx.defaults import DEFAULT_WEBHOOK_PORT
from phalanx.deploy.rbac import Manifest, metadata
from phalanx.deploy.values import Values
from phalanx.spec.labels import parse_label_selector
from phalanx.spec.manifests.native import ADMISSION_PATH, managed_resources

WEBHOOK_PORT = DEFAULT_WEBHOOK_PORT  # the control plane's HTTPS listener for the webhook
SERVICE_PORT = 443  # the Service's port for it (the API server's default)
TLS_SECRET = "phalanx-webhook-tls"
CERT_DIR = "/etc/phalanx/webhook"
CONFIGURATION = "phalanx"
WEBHOOK_NAME = "jobs.admission.phalanx.dev"
CERT_ANNOTATION = "phalanx.dev/webhook-certificate"  # the pod template's digest of it
VALID_DAYS = 3650


@dataclass(frozen=True, slots=True)
class ServingCertificate:
    ca: bytes  # PEM
    cert: bytes  # PEM
    key: bytes  # PEM (PKCS#8)

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.cert).hexdigest()[:16]


def service_names(service: str, namespace: str) -> list[str]:
    """The DNS names the API server may reach a Service by."""
    return [service, f"{service}.{namespace}", f"{service}.{namespace}.svc",
            f"{service}.{namespace}.svc.cluster.local"]


def make_certificate(names: list[str], days: int = VALID_DAYS) -> ServingCertificate:
    """A new CA, and a serving certificate it signs for ``names`` (DNS names or addresses;
    EC P-256)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)
    until = now + datetime.timedelta(days=days)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "phalanx-webhook-ca")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(until)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False,
                                       key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, key_cert_sign=True, crl_sign=True,
                                       encipher_only=False, decipher_only=False),
                         critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = []
    for name in names:  # an address (a test's loopback) as an IP name, else a DNS name
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            sans.append(x509.DNSName(name))
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(until)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    return ServingCertificate(
        ca=ca.public_bytes(pem), cert=cert.public_bytes(pem),
        key=key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()))


def enabled(values: Values) -> bool:
    return values.manage_namespaces is not None and values.mode == "full"


def certificate_for(values: Values, service: str) -> ServingCertificate | None:
    """A new serving certificate when the render makes it (``generate``); else None."""
    if not enabled(values) or values.webhook_certificate != "generate":
        return None
    return make_certificate(service_names(service, values.namespace))


def webhook_manifests(values: Values, service: str,
                      tls: ServingCertificate | None) -> list[Manifest]:
    """The webhook's configuration and what makes its certificate, in apply order."""
    if not enabled(values):
        return []
    assert values.manage_namespaces is not None
    client: dict[str, Any] = {"service": {"namespace": values.namespace, "name": service,
                                          "path": ADMISSION_PATH, "port": SERVICE_PORT}}
    config_meta = metadata(CONFIGURATION, "control-plane")
    out: list[Manifest] = []
    if tls is not None:
        client["caBundle"] = base64.b64encode(tls.ca).decode()
        out.append({
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": metadata(TLS_SECRET, "control-plane", values.namespace),
            "data": {"tls.crt": base64.b64encode(tls.cert).decode(),
                     "tls.key": base64.b64encode(tls.key).decode(),
                     "ca.crt": base64.b64encode(tls.ca).decode()},
        })
    else:  # cert-manager makes the Secret and injects the caBundle
        config_meta["annotations"] = {
            "cert-manager.io/inject-ca-from": f"{values.namespace}/{TLS_SECRET}"}
        out += [
            {"apiVersion": "cert-manager.io/v1", "kind": "Issuer",
             "metadata": metadata(TLS_SECRET, "control-plane", values.namespace),
             "spec": {"selfSigned": {}}},
            {"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
             "metadata": metadata(TLS_SECRET, "control-plane", values.namespace),
             "spec": {"secretName": TLS_SECRET,
                      "dnsNames": service_names(service, values.namespace)[2:],
                      "issuerRef": {"kind": "Issuer", "name": TLS_SECRET}}},
        ]
    groups: dict[tuple[str, str], list[str]] = {}
    for group, version, resource in managed_resources():
        groups.setdefault((group, version), []).append(resource)
    out.append({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": config_meta,
        "webhooks": [{
            "name": WEBHOOK_NAME,
            "admissionReviewVersions": ["v1"],
            "clientConfig": client,
            "rules": [{"operations": ["CREATE"], "apiGroups": [group],
                       "apiVersions": [version], "resources": sorted(resources),
                       "scope": "Namespaced"}
                      for (group, version), resources in sorted(groups.items())],
            "namespaceSelector": {"matchLabels": parse_label_selector(
                values.manage_namespaces, "manageNamespaces")},
            "failurePolicy": "Ignore",
            "sideEffects": "None",
            "timeoutSeconds": 5,
            "matchPolicy": "Equivalent",
            "reinvocationPolicy": "Never",
        }],
    })
    return out
