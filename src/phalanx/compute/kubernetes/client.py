"""Connecting to a cluster, and plain-JSON requests with the retries a controller needs.

The official client does the connecting: kubeconfig files (contexts, client
certificates, exec and token-refresh plugins), the in-cluster service account,
or an explicit server and bearer token. Requests go through its ApiClient, but
bodies stay plain JSON dicts: the plane builds and reads raw objects (so what it
sends is exactly what the API server validates) and never pays for the client's
model deserialisation on large lists.

Retries: 429 and 5xx answers and dropped connections are retried with
exponential backoff, honouring ``Retry-After``; every other error is raised as
``KubeError`` for the caller to judge (409 means "exists already": adopt it;
410 means "too old": relist).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import urllib3

from phalanx.errors import SpecError

try:
    from kubernetes import client as k8s
    from kubernetes import config as k8s_config
    from kubernetes.config.config_exception import ConfigException
except ImportError:  # an optional dependency: say how to get it
    raise SpecError(
        "the Kubernetes compute plane needs the kubernetes client library",
        field="--compute", fix="pip install 'phalanx[kubernetes]'",
    ) from None

log = logging.getLogger("phalanx.compute.kubernetes")

SERVER_ENV = "PHALANX_K8S_SERVER"
TOKEN_ENV = "PHALANX_K8S_TOKEN"
CA_ENV = "PHALANX_K8S_CA"
INSECURE_ENV = "PHALANX_K8S_INSECURE"
IN_CLUSTER_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")

Object = dict[str, Any]


class KubeError(Exception):
    """An API answer the caller has to handle (not retried here)."""

    def __init__(self, status: int, reason: str, message: str = "") -> None:
        super().__init__(f"{status} {reason}: {message}" if message else f"{status} {reason}")
        self.status = status
        self.reason = reason
        self.message = message


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    attempts: int = 8
    base_delay: float = 0.1
    max_delay: float = 5.0
    max_retry_after: float = 30.0

    def delay(self, attempt: int, retry_after: str | None) -> float:
        if retry_after:
            try:
                return min(self.max_retry_after, max(0.0, float(retry_after)))
            except ValueError:  # an HTTP date: rare from the API server; fall back to backoff
                pass
        return float(min(self.max_delay, self.base_delay * 2**attempt))


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def configure(
    *,
    kubeconfig: Path | None = None,
    context: str | None = None,
    server: str | None = None,
    token: str | None = None,
    ca_file: Path | None = None,
    insecure: bool | None = None,
) -> tuple[k8s.Configuration, str | None]:
    """The client configuration, and the namespace the credentials name (if any).

    Order: an explicit server (argument or ``PHALANX_K8S_SERVER``, with
    ``PHALANX_K8S_TOKEN`` and ``PHALANX_K8S_CA`` or ``PHALANX_K8S_INSECURE``);
    else the given kubeconfig; else the in-cluster service account; else
    ``$KUBECONFIG`` or ``~/.kube/config``.
    """
    server = server or os.environ.get(SERVER_ENV) or None
    if server:
        token = token or os.environ.get(TOKEN_ENV) or None
        ca = ca_file or (Path(os.environ[CA_ENV]) if os.environ.get(CA_ENV) else None)
        skip = _truthy(os.environ.get(INSECURE_ENV)) if insecure is None else insecure
        configuration = k8s.Configuration(host=server.rstrip("/"))
        if token:
            configuration.api_key = {"authorization": token}
            configuration.api_key_prefix = {"authorization": "Bearer"}
        if ca is not None:
            if not ca.is_file():
                raise SpecError(f"CA file {str(ca)!r} does not exist", field=CA_ENV,
                                fix="give the PEM file of the cluster's certificate authority")
            configuration.ssl_ca_cert = str(ca)
        if skip:
            configuration.verify_ssl = False
        elif server.startswith("https://") and ca is None:
            log.info("no CA given for %s: verifying it against the system's trust store", server)
        return configuration, None
    if kubeconfig is not None:
        return _from_kubeconfig(Path(kubeconfig).expanduser(), context, "--kubeconfig")
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        configuration = k8s.Configuration()
        try:
            k8s_config.load_incluster_config(client_configuration=configuration)
        except ConfigException as exc:
            raise SpecError(f"cannot use the in-cluster configuration: {exc}",
                            field="--kubeconfig", fix="pass --kubeconfig FILE") from None
        namespace = None
        if IN_CLUSTER_NAMESPACE.is_file():
            namespace = IN_CLUSTER_NAMESPACE.read_text().strip() or None
        return configuration, namespace
    default = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or "~/.kube/config"
    path = Path(default).expanduser()
    if not path.is_file():
        raise SpecError(
            "no Kubernetes credentials found (no kubeconfig, not running in a cluster)",
            field="--kubeconfig",
            fix=f"pass --kubeconfig FILE, or set {SERVER_ENV} and {TOKEN_ENV}",
        )
    return _from_kubeconfig(path, context, "KUBECONFIG")


def _from_kubeconfig(
    path: Path, context: str | None, field: str
) -> tuple[k8s.Configuration, str | None]:
    if not path.is_file():
        raise SpecError(f"kubeconfig {str(path)!r} does not exist", field=field,
                        fix="give the path of an existing kubeconfig file")
    configuration = k8s.Configuration()
    try:
        k8s_config.load_kube_config(config_file=str(path), context=context,
                                    client_configuration=configuration)
        _, active = k8s_config.list_kube_config_contexts(config_file=str(path))
    except (ConfigException, OSError, ValueError, KeyError, TypeError) as exc:
        raise SpecError(f"cannot use kubeconfig {str(path)!r}: {exc}", field=field,
                        fix="check the file with `kubectl --kubeconfig FILE get nodes`") from None
    if context is not None:
        contexts, _ = k8s_config.list_kube_config_contexts(config_file=str(path))
        active = next((c for c in contexts if c.get("name") == context), active)
    namespace = (active or {}).get("context", {}).get("namespace")
    return configuration, namespace


class KubeClient:
    """Plain-JSON requests against one API server."""

    def __init__(self, configuration: k8s.Configuration, retry: RetryPolicy | None = None) -> None:
        self.configuration = configuration
        self.api = k8s.ApiClient(configuration)
        self.retry = retry or RetryPolicy()
        self._closed = threading.Event()

    @property
    def host(self) -> str:
        return str(self.configuration.host)

    def close(self) -> None:
        self._closed.set()
        self.api.close()

    # ------------------------------------------------------------------ requests
    def request(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Object | list[Any] | None = None,
        content_type: str | None = None,
        timeout: float = 30.0,
    ) -> Object:
        """The JSON answer of a request; 429/5xx and dropped connections are retried."""
        response = self._send(method, path, query, body, content_type, timeout)
        try:
            data = response.read()
        finally:
            response.release_conn()
        return json.loads(data) if data else {}

    def open_stream(
        self, path: str, query: dict[str, Any] | None = None, *, read_timeout: float = 60.0
    ) -> urllib3.BaseHTTPResponse:
        """A streaming GET (watch, log follow); the caller reads and closes it."""
        return self._send("GET", path, query, None, None, (10.0, read_timeout))

    def _send(
        self,
        method: str,
        path: str,
        query: dict[str, Any] | None,
        body: Object | list[Any] | None,
        content_type: str | None,
        timeout: float | tuple[float, float],
    ) -> urllib3.BaseHTTPResponse:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
        params = [(k, _query_value(v)) for k, v in (query or {}).items() if v is not None]
        attempt = 0
        while True:
            request = self.api.param_serialize(
                method=method, resource_path=path, query_params=params or None,
                header_params=dict(headers), body=body, auth_settings=["BearerToken"],
            )
            try:
                answer = self.api.call_api(*request, _request_timeout=timeout)
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                if attempt + 1 >= self.retry.attempts or self._closed.is_set():
                    raise KubeError(0, "Unreachable", f"{method} {path}: {exc}") from exc
                self._sleep(self.retry.delay(attempt, None))
                attempt += 1
                continue
            response = answer.response
            status = int(response.status)
            if 200 <= status < 300:
                return response
            data = response.read()
            response.release_conn()
            retryable = status == 429 or status >= 500
            if retryable and attempt + 1 < self.retry.attempts and not self._closed.is_set():
                delay = self.retry.delay(attempt, response.headers.get("Retry-After"))
                log.info("%s %s answered %d; retrying in %.2fs", method, path, status, delay)
                self._sleep(delay)
                attempt += 1
                continue
            raise _error(status, data)

    def _sleep(self, seconds: float) -> None:
        self._closed.wait(seconds)

    # ------------------------------------------------------------------ shorthands
    def get(self, path: str, **query: Any) -> Object:
        return self.request("GET", path, query=query)

    def create(self, path: str, body: Object) -> Object:
        return self.request("POST", path, body=body)

    def patch(self, path: str, body: Object) -> Object:
        return self.request("PATCH", path, body=body, content_type="application/merge-patch+json")

    def delete(
        self, path: str, *, grace_seconds: float | None = None, propagation: str = "Background"
    ) -> Object | None:
        """Delete; None when it was gone already."""
        options: Object = {"kind": "DeleteOptions", "apiVersion": "v1",
                           "propagationPolicy": propagation}
        if grace_seconds is not None:
            options["gracePeriodSeconds"] = max(0, round(grace_seconds))
        try:
            return self.request("DELETE", path, body=options)
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise

    def create_or_get(self, collection: str, body: Object) -> tuple[Object, bool]:
        """Create ``body`` in ``collection``; on 409 the existing object. (object, created)."""
        try:
            return self.create(collection, body), True
        except KubeError as exc:
            if exc.status != 409:
                raise
        name = quote(body["metadata"]["name"], safe="")
        return self.get(f"{collection}/{name}"), False

    def iter_lines(self, response: urllib3.BaseHTTPResponse) -> Iterator[bytes]:
        """Complete lines of a streaming answer, as they arrive."""
        pending = b""
        for chunk in iter_chunks(response):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if line.strip():
                    yield line
        if pending.strip():
            yield pending


def iter_chunks(response: urllib3.BaseHTTPResponse) -> Iterator[bytes]:
    """Bytes of a streaming answer as soon as they arrive (not in fixed-size blocks)."""
    while True:
        chunk = response.read1(65536)
        if not chunk:
            return
        yield chunk


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _error(status: int, data: bytes) -> KubeError:
    reason, message = "", ""
    try:
        body = json.loads(data)
        reason = str(body.get("reason") or "")
        message = str(body.get("message") or "")
    except (ValueError, AttributeError):
        message = data[:200].decode(errors="replace")
    return KubeError(status, reason or _REASONS.get(status, "Error"), message)


_REASONS = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
            409: "AlreadyExists", 410: "Gone", 422: "Invalid", 429: "TooManyRequests"}
