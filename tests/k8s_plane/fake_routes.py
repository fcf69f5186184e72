"""The HTTP side of the fake API server: routing, lists, watches, logs."""

from __future__ import annotations

import copy
import json
import re
import time
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from tests.k8s_plane import fake_provreq
from tests.k8s_plane.audit import access_of
from tests.k8s_plane.fake_apiserver import _NAME, NAMESPACED, matches, merge_patch, status_body
from tests.k8s_plane.fake_exec import serve_exec
from tests.k8s_plane.fake_pod_rules import spec_change

if TYPE_CHECKING:
    from tests.k8s_plane.fake_apiserver import FakeAPIServer

Object = dict[str, Any]
PG = "/apis/scheduling.x-k8s.io/v1alpha1"
RAY = "/apis/ray.io/v1"
PR = fake_provreq.PATH
CUSTOM = {"podgroups": "pod_groups", "rayclusters": "kuberay",
          "provisioningrequests": "provisioning_requests"}  # served when the flag is on
COORDINATION = "/apis/coordination.k8s.io/v1"
BATCH = "/apis/batch/v1"
# Workload CRDs always served (Kubernetes-native admission manages them), by group-version.
WORKLOADS = {"/apis/jobset.x-k8s.io/v1alpha2": ("jobsets", "JobSet"),
             "/apis/kubeflow.org/v1": ("pytorchjobs", "PyTorchJob"),
             "/apis/workload.codeflare.dev/v1beta2": ("appwrappers", "AppWrapper")}
_ROUTES = [
    (re.compile(r"^/api/v1/(nodes|namespaces|pods)$"), "cluster"),
    (re.compile(rf"^{BATCH}/(jobs)$"), "cluster"),
    (re.compile(rf"^{BATCH}/namespaces/([^/]+)/(jobs)$"), "ns"),
    (re.compile(rf"^{BATCH}/namespaces/([^/]+)/(jobs)/([^/]+)$"), "ns-item"),
    (re.compile(rf"^{BATCH}/namespaces/([^/]+)/(jobs)/([^/]+)/status$"), "status"),
    *[route for prefix, (plural, _) in WORKLOADS.items() for route in (
        (re.compile(rf"^{prefix}/({plural})$"), "cluster"),
        (re.compile(rf"^{prefix}/namespaces/([^/]+)/({plural})$"), "ns"),
        (re.compile(rf"^{prefix}/namespaces/([^/]+)/({plural})/([^/]+)$"), "ns-item"),
        (re.compile(rf"^{prefix}/namespaces/([^/]+)/({plural})/([^/]+)/status$"), "status"))],
    (re.compile(r"^/api/v1/(nodes|namespaces)/([^/]+)$"), "cluster-item"),
    (re.compile(
        r"^/api/v1/namespaces/([^/]+)/(pods|services|configmaps|secrets|events|podtemplates)$"),
     "ns"),
    (re.compile(
        r"^/api/v1/namespaces/([^/]+)/(pods|services|configmaps|secrets|events|podtemplates)"
        r"/([^/]+)$"),
     "ns-item"),
    (re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/log$"), "log"),
    (re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/exec$"), "exec"),
    (re.compile(r"^/api/v1/nodes/([^/]+)/status$"), "node-status"),
    (re.compile(rf"^{PG}/namespaces/([^/]+)/(podgroups)$"), "ns"),
    (re.compile(rf"^{PG}/namespaces/([^/]+)/(podgroups)/([^/]+)$"), "ns-item"),
    (re.compile(rf"^{RAY}/(rayclusters)$"), "cluster"),
    (re.compile(rf"^{RAY}/namespaces/([^/]+)/(rayclusters)/([^/]+)/status$"), "status"),
    (re.compile(rf"^{RAY}/namespaces/([^/]+)/(rayclusters)$"), "ns"),
    (re.compile(rf"^{RAY}/namespaces/([^/]+)/(rayclusters)/([^/]+)$"), "ns-item"),
    (re.compile(rf"^{PR}/namespaces/([^/]+)/(provisioningrequests)$"), "ns"),
    (re.compile(rf"^{PR}/namespaces/([^/]+)/(provisioningrequests)/([^/]+)$"), "ns-item"),
    (re.compile(rf"^{PR}/namespaces/([^/]+)/provisioningrequests/([^/]+)/status$"),
     "provreq-status"),
    (re.compile(rf"^{COORDINATION}/namespaces/([^/]+)/(leases)$"), "ns"),
    (re.compile(rf"^{COORDINATION}/namespaces/([^/]+)/(leases)/([^/]+)$"), "ns-item"),
]


class Handler(BaseHTTPRequestHandler):
    api: FakeAPIServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    # ------------------------------------------------------------------ plumbing
    def _send(self, code: int, body: Object) -> None:
        data = json.dumps(body).encode()
        # Counted before the answer leaves, so a client that got it finds it counted.
        self._log(code)
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _fail(self, code: int, reason: str, message: str = "") -> None:
        self._send(code, status_body(code, reason, message or reason))

    def _log(self, code: int) -> None:
        url = urlsplit(self.path)
        access = access_of(self.command, url.path,
                           {k: v[-1] for k, v in parse_qs(url.query).items()})
        with self.api.lock:
            self.api.requests.append((self.command, url.path, code))
            if access is not None:
                self.api.accesses.append(access)

    def _start_stream(self, content_type: str) -> None:
        self._log(200)
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length)) if length else None

    # ------------------------------------------------------------------ verbs
    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def _dispatch(self, method: str) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        body = self._body() if method in ("POST", "PATCH", "DELETE") else None
        if self.headers.get("Authorization") != "Bearer fake-token":
            return self._fail(401, "Unauthorized")
        is_watch = query.get("watch") in ("true", "1")
        fault = self.api.take_fault(method, url.path, is_watch)
        if fault is not None:
            data = json.dumps(status_body(fault.status, "Injected", "injected fault")).encode()
            self._log(fault.status)  # (before the answer leaves, as _send does)
            self.send_response(fault.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if fault.retry_after is not None:
                self.send_header("Retry-After", fault.retry_after)
            self.end_headers()
            self.wfile.write(data)
            return None
        if url.path == PG:
            if not self.api.pod_groups:
                return self._fail(404, "NotFound")
            return self._send(200, {"kind": "APIResourceList", "groupVersion": PG[6:],
                                    "resources": [{"name": "podgroups", "namespaced": True,
                                                   "kind": "PodGroup"}]})
        if url.path == RAY:
            if not self.api.kuberay:
                return self._fail(404, "NotFound")
            return self._send(200, {"kind": "APIResourceList", "groupVersion": RAY[6:],
                                    "resources": [{"name": "rayclusters", "namespaced": True,
                                                   "kind": "RayCluster"}]})
        if url.path in WORKLOADS:
            plural, kind = WORKLOADS[url.path]
            return self._send(200, {"kind": "APIResourceList", "groupVersion": url.path[6:],
                                    "resources": [{"name": plural, "namespaced": True,
                                                   "kind": kind}]})
        if url.path == PR:
            if not self.api.provisioning_requests:
                return self._fail(404, "NotFound")
            return self._send(200, fake_provreq.DISCOVERY)
        for pattern, route in _ROUTES:  # noqa: B007 - the match decides the route
            match = pattern.match(url.path)
            if match:
                break
        else:
            return self._fail(404, "NotFound", f"no route {url.path}")
        groups = match.groups()
        custom = next((g for g in groups if g in CUSTOM), None)
        if custom is not None and not getattr(self.api, CUSTOM[custom]):
            return self._fail(404, "NotFound", "the server could not find the resource")
        if route == "cluster":
            plural, ns, name = groups[0], None, None
        elif route == "cluster-item":
            plural, ns, name = groups[0], "", groups[1]
        elif route == "log":
            return self._logs(groups[0], groups[1], query)
        elif route == "exec":
            return self._exec(groups[0], groups[1], parse_qs(url.query))
        elif route == "provreq-status":
            if not self.api.provisioning_requests:
                return self._fail(404, "NotFound", "the server could not find the resource")
            if method == "GET":
                found = self.api.get("provisioningrequests", groups[1], groups[0])
                if found is None:
                    return self._fail(404, "NotFound", "not found")
                return self._send(200, found)
            if method != "PATCH":
                return self._fail(405, "MethodNotAllowed")
            return self._patch_status("provisioningrequests", groups[0], groups[1], body)
        elif route == "status":
            ns, plural, name = groups
            if method == "GET":
                found = self.api.get(plural, name, ns)
                if found is None:
                    return self._fail(404, "NotFound", f'{plural} "{name}" not found')
                return self._send(200, found)
            if method != "PATCH":
                return self._fail(405, "MethodNotAllowed")
            return self._patch_status(plural, ns, name, body)
        elif route == "node-status":
            if method != "PATCH":
                return self._fail(405, "MethodNotAllowed")
            return self._patch_node_status(groups[0], body)
        else:
            ns, plural = groups[0], groups[1]
            name = groups[2] if len(groups) > 2 else None
        scope = "" if plural in ("nodes", "namespaces") else ns
        if method == "GET" and name is None:
            if is_watch:
                return self._watch(plural, scope, query)
            return self._list(plural, scope, query)
        if method == "GET":
            assert scope is not None
            found = self.api.get(plural, name or "", scope)
            if found is None:
                return self._fail(404, "NotFound", f'{plural} "{name}" not found')
            return self._send(200, found)
        if method == "POST" and name is None:
            return self._create(plural, scope or "", body)
        if method == "PATCH" and name is not None:
            return self._patch(plural, scope or "", name, body)
        if method == "DELETE" and name is not None:
            grace = (body or {}).get("gracePeriodSeconds")
            if "gracePeriodSeconds" in query:
                grace = int(query["gracePeriodSeconds"])
            last = self.api.delete(plural, name, scope or "", grace=grace)
            if last is None:
                return self._fail(404, "NotFound", f'{plural} "{name}" not found')
            return self._send(200, last)
        return self._fail(405, "MethodNotAllowed")

    # ------------------------------------------------------------------ handlers
    def _list(self, plural: str, ns: str | None, query: dict[str, str]) -> None:
        with self.api.lock:
            items = [o for o in self.api.list(plural, ns)
                     if matches(o, query.get("labelSelector"), query.get("fieldSelector"))]
            version = str(self.api.rv)
        self._send(200, {"kind": "List", "apiVersion": "v1", "items": items,
                         "metadata": {"resourceVersion": version}})

    def _create(self, plural: str, ns: str, body: Object) -> None:
        meta = (body or {}).get("metadata") or {}
        name = meta.get("name", "")
        if not name or len(name) > 253 or not _NAME.match(name):
            return self._fail(422, "Invalid", f"metadata.name: Invalid value: {name!r}")
        if plural in NAMESPACED:
            if meta.get("namespace", ns) != ns:
                return self._fail(400, "BadRequest", "the namespace of the object does not match")
            if self.api.get("namespaces", ns) is None:
                return self._fail(404, "NotFound", f'namespaces "{ns}" not found')
        if plural == "provisioningrequests":
            why = fake_provreq.invalid(body)
            if why is not None:
                return self._fail(422, "Invalid",
                                  f'ProvisioningRequest.{fake_provreq.GROUP_VERSION} "{name}" '
                                  f"is invalid: {why}")
            body = fake_provreq.for_create(body)
        try:
            created = self.api.add(plural, body, ns if plural in NAMESPACED else "")
        except KeyError:
            return self._fail(409, "AlreadyExists", f'{plural} "{name}" already exists')
        self._send(201, created)

    def _patch(self, plural: str, ns: str, name: str, body: Object) -> None:
        with self.api.lock:
            found = self.api.get(plural, name, ns)
            if found is None:
                return self._fail(404, "NotFound", f'{plural} "{name}" not found')
            wanted = ((body or {}).get("metadata") or {}).get("resourceVersion")
            if wanted is not None and wanted != found["metadata"]["resourceVersion"]:
                return self._fail(409, "Conflict", f'Operation cannot be fulfilled on {plural} '
                                  f'"{name}": the object has been modified')
            if plural == "provisioningrequests":  # spec immutable; status via its subresource
                why = fake_provreq.spec_change(found, body or {})
                if why is not None:
                    return self._fail(422, "Invalid", f'ProvisioningRequest "{name}" is '
                                      f"invalid: {why}")
                body = {k: v for k, v in (body or {}).items() if k != "status"}
            if plural == "pods":  # a pod's spec changes only as the API server allows
                why = spec_change(found, body or {})
                if why is not None:
                    return self._fail(422, "Invalid", f'Pod "{name}" is invalid: {why}')
            if plural == "appwrappers" and _templates(found) != _templates(
                    merge_patch(found, body)):  # AppWrapper's validating webhook
                return self._fail(422, "Invalid", 'admission webhook "vappwrapper.kb.io" '
                                  "denied the request: spec.components[0].template.raw: "
                                  "Forbidden: attempt to change immutable field")
            self._send(200, self.api.update(plural, name, body, ns))
        return None

    def _patch_status(self, plural: str, ns: str, name: str, body: Object) -> None:
        """A status subresource: only ``status`` changes (a merge patch replaces lists)."""
        with self.api.lock:
            found = self.api.get(plural, name, ns)
            if found is None:
                return self._fail(404, "NotFound", f'{plural} "{name}" not found')
            wanted = ((body or {}).get("metadata") or {}).get("resourceVersion")
            if wanted is not None and wanted != found["metadata"]["resourceVersion"]:
                return self._fail(409, "Conflict", f'Operation cannot be fulfilled on {plural} '
                                  f'"{name}": the object has been modified')
            status = (body or {}).get("status") or {}
            self._send(200, self.api.update(plural, name, {"status": status}, ns))
        return None

    def _patch_node_status(self, name: str, body: Object) -> None:
        """The status subresource: only ``status`` changes. Under a strategic merge patch
        conditions merge by type, as the API server merges them; a merge patch replaces
        the list."""
        strategic = "strategic-merge-patch" in (self.headers.get("Content-Type") or "")
        with self.api.lock:
            found = self.api.get("nodes", name)
            if found is None:
                return self._fail(404, "NotFound", f'nodes "{name}" not found')
            status = dict((body or {}).get("status") or {})
            if strategic and "conditions" in status:
                merged = {c.get("type"): c for c in (found.get("status") or {})
                          .get("conditions") or []}
                for condition in status["conditions"]:
                    merged[condition.get("type")] = {**merged.get(condition.get("type"), {}),
                                                     **condition}
                status["conditions"] = list(merged.values())
            self._send(200, self.api.update("nodes", name, {"status": status}))
        return None

    def _watch(self, plural: str, ns: str | None, query: dict[str, str]) -> None:
        api = self.api
        labels, fields = query.get("labelSelector"), query.get("fieldSelector")
        deadline = time.monotonic() + float(query.get("timeoutSeconds") or 1800)
        with api.lock:
            start = int(query.get("resourceVersion") or api.rv)
            while api.hold_watches and not api.closing:  # as if the server were unreachable
                api.changed.wait(0.1)
        self._start_stream("application/json")
        if start < api.compacted:
            gone = status_body(410, "Expired", f"too old resource version: {start}")
            self._chunk(json.dumps({"type": "ERROR", "object": gone}).encode() + b"\n")
            return self._end_stream()
        position = start
        try:
            while True:
                with api.lock:
                    if api.closing or api.hold_watches or time.monotonic() >= deadline:
                        break
                    if position < api.compacted:  # compacted under a live watch
                        gone = status_body(410, "Expired", "too old resource version")
                        self._chunk(json.dumps({"type": "ERROR", "object": gone}).encode() + b"\n")
                        break
                    changes = [c for c in api.history if c.rv > position and c.plural == plural
                               and (ns is None or c.namespace == ns)]
                    if not changes:
                        api.changed.wait(min(0.5, max(0.01, deadline - time.monotonic())))
                        continue
                lines = []
                for change in changes:
                    position = change.rv
                    event = _event(change.old, change.new, labels, fields)
                    if event is not None:
                        lines.append(json.dumps(event).encode() + b"\n")
                if lines:
                    self._chunk(b"".join(lines))
            self._end_stream()
        except (BrokenPipeError, ConnectionResetError):
            pass
        return None

    def _exec(self, ns: str, name: str, query: dict[str, list[str]]) -> None:
        pod = self.api.get("pods", name, ns)
        if pod is None:
            return self._fail(404, "NotFound", f'pods "{name}" not found')
        if pod.get("status", {}).get("phase") != "Running":
            return self._fail(400, "BadRequest", "pod is not running")
        if self.headers.get("Upgrade", "").lower() != "websocket":
            return self._fail(400, "BadRequest", "exec needs a WebSocket upgrade")
        self._log(101)
        serve_exec(self, pod, query)
        return None

    def _logs(self, ns: str, name: str, query: dict[str, str]) -> None:
        api = self.api
        pod = api.get("pods", name, ns)
        if pod is None:
            return self._fail(404, "NotFound", f'pods "{name}" not found')
        if (pod.get("status") or {}).get("phase", "Pending") == "Pending":
            return self._fail(400, "BadRequest",
                              f'container "main" in pod "{name}" is waiting to start')
        if query.get("follow") not in ("true", "1"):
            data = bytes(api.logs.get((ns, name), b""))
            self._log(200)
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return None
        self._start_stream("text/plain")
        sent = 0
        try:
            while True:
                with api.lock:
                    data = bytes(api.logs.get((ns, name), b""))[sent:]
                    pod = api.objects.get(("pods", ns, name))
                    over = api.closing or pod is None or (pod.get("status") or {}).get(
                        "phase") in ("Succeeded", "Failed")
                    if not data and not over:
                        api.changed.wait(0.5)
                        continue
                if data:
                    self._chunk(data)
                    sent += len(data)
                if over and not data:
                    break
            self._end_stream()
        except (BrokenPipeError, ConnectionResetError):
            pass
        return None


def _templates(obj: Object) -> list[Any]:
    return [c.get("template") for c in (obj.get("spec") or {}).get("components") or []]


def _event(old: Object | None, new: Object | None, labels: str | None,
           fields: str | None) -> Object | None:
    """The watch event a change is for one selector: objects enter and leave it."""
    was = old is not None and new is not None and matches(old, labels, fields)
    if new is None:  # deleted; ``old`` is its last state
        return {"type": "DELETED", "object": old} if old is not None and matches(
            old, labels, fields) else None
    now = matches(new, labels, fields)
    if now and old is None:
        return {"type": "ADDED", "object": new}
    if now and was:
        return {"type": "MODIFIED", "object": new}
    if now:
        return {"type": "ADDED", "object": new}
    if was:
        return {"type": "DELETED", "object": copy.deepcopy(new)}
    return None
