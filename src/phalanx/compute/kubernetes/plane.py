"""The Kubernetes compute plane: cluster nodes in, Pods, Services and PodGroups out.

State lives in the cluster, not in the control plane: each launched attempt has
an anchor ConfigMap holding its plan (job spec, admission, pod names), which
owns the attempt's other objects. A new plane relists the anchors and the pods,
adopts every attempt it finds (completing a launch a crash interrupted; object
names are deterministic and creation adopts what exists, so nothing is ever
created twice), and reports them all from ``observe``; the control plane
terminates and forgets those of jobs it no longer knows.

Failures the job did not cause are "system" failures: OOM kills, evictions,
node loss, pods deleted by someone else, containers stuck unable to start (an
image that cannot be pulled) for ``image_pull_timeout``, and gangs whose pods
are not all running within ``start_timeout`` (reported as ``PodsNotReady``, so
the control plane releases the gang and requeues it with backoff, like Kueue's
waitForPodsReady).
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import quote

from phalanx.compute.base import ComputePlane, ExecSession, PodCredential, PodPhase, PodState
from phalanx.compute.kubernetes import (
    checkpoints,
    credentials,
    fencing,
    kuberay,
    objects,
    secretdata,
    sources,
    volumes,
)
from phalanx.compute.kubernetes.attempts import (
    Attempt,
    TrackedPod,
    attempt_from_anchor,
    check_owner,
    failed,
    key_of,
    newer,
    with_spec,
)
from phalanx.compute.kubernetes.client import KubeClient, KubeError, Object, configure
from phalanx.compute.kubernetes.events import pod_events
from phalanx.compute.kubernetes.logs import LogCopier
from phalanx.compute.kubernetes.native import NativeJobs
from phalanx.compute.kubernetes.nodes import NodeInventory
from phalanx.compute.kubernetes.podexec import open_pod_exec
from phalanx.compute.kubernetes.provreq import consumes
from phalanx.compute.kubernetes.settings import (
    NAMESPACE_ENV,
    Settings,
    settings_from_env,
)
from phalanx.compute.kubernetes.status import (
    DELETED,
    NODE_LOST,
    NOT_READY,
    STUCK,
    TERMINATED,
    observe_pod,
)
from phalanx.compute.kubernetes.taint import HealthTainter
from phalanx.compute.kubernetes.watch import Informer
from phalanx.errors import NotFound, SpecError
from phalanx.kinds import framework_of
from phalanx.scheduler.types import Admission
from phalanx.spec.base import IMAGE_FIX, is_image_reference
from phalanx.spec.labels import selector_text
from phalanx.spec.resources import JobSpec, Node
from phalanx.spec.status import JobEvent
from phalanx.store.logs import LogStore

log = logging.getLogger("phalanx.compute.kubernetes")


class KubernetesPlane(ComputePlane):
    """Runs admitted jobs as pods in one namespace of a cluster."""

    name = "kubernetes"

    def __init__(self, client: KubeClient, home: Path, settings: Settings | None = None) -> None:
        super().__init__()
        self.client = client
        self.home = Path(home)
        self.settings = settings or Settings()
        image = self.settings.default_image
        if image is not None and not is_image_reference(image):
            raise SpecError(f"{image!r} is not a container image reference",
                            field="--default-image", fix=IMAGE_FIX)
        self.namespace = self.settings.namespace
        self._base = f"/api/v1/namespaces/{self.namespace}"
        self._lock = threading.RLock()
        self._launching = threading.Lock()
        self._attempts: dict[tuple[str, int], Attempt] = {}
        self._by_pod: dict[str, tuple[Attempt, TrackedPod]] = {}
        self.identity = objects.identity_labels(self.settings.plane, self.settings.control_plane)
        self.checkpoints = checkpoints.CheckpointCleaner(
            client, self.namespace, self.settings.checkpoint_volume,
            self.settings.checkpoint_cleanup_image,
            tag=objects.checkpoint_tag(self.identity),
            owner=objects.control_plane_of(self.identity))
        self.logs = LogCopier(client, self.namespace, LogStore.for_home(self.home),
                              self.home / "kubernetes" / "log-offsets")
        # Kubernetes-native admission: workloads created with kubectl in the namespaces the
        # selector picks (native.py); None: only what is submitted to Phalanx runs.
        self.native = NativeJobs(client, self.settings.manage_namespaces, on_change=self._notify,
                                 read_timeout=self.settings.read_timeout) \
            if self.settings.manage_namespaces else None
        self.inventory_source = NodeInventory(client, namespace=self.namespace,
                                              on_change=self._notify,
                                              read_timeout=self.settings.read_timeout,
                                              lost_grace=self.settings.node_lost_grace,
                                              stale_after=self.settings.doctor_stale_after,
                                              admitted=self.native.admitted_pod
                                              if self.native is not None else None)
        self.tainter = HealthTainter(client, allowed=self.settings.node_writes)
        self.fence, self.plane_lease = fencing.from_settings(client, self.settings)
        self.pod_informer = Informer(
            client, f"{self._base}/pods", label_selector=objects.selector(self.identity),
            on_list=self._list_pods, on_event=self._pod_event, name="pods",
            read_timeout=self.settings.read_timeout,
        )
        self.ray_clusters = kuberay.RayClusters(client, self.namespace, on_change=self._notify,
                                                read_timeout=self.settings.read_timeout)
        self.pod_groups = False
        self.kuberay = False  # Ray jobs run as KubeRay RayClusters (settings.use_kuberay)
        self._started = False

    # ------------------------------------------------------------------ connecting
    @classmethod
    def connect(
        cls,
        *,
        home: Path,
        kubeconfig: Path | None = None,
        namespace: str | None = None,
        context: str | None = None,
        server: str | None = None,
        token: str | None = None,
        ca_file: Path | None = None,
        insecure: bool | None = None,
        settings: Settings | None = None,
        default_image: str | None = None,
        node_lost_grace: float | None = None,
        plane: str | None = None,
        control_plane: str | None = None,
        fence_after: float | None = None,
        fence_image: str | None = None,
        manage_namespaces: str | None = None,
        allowed_service_accounts: Sequence[str] = (),
    ) -> KubernetesPlane:
        """Connect (kubeconfig, in-cluster, or explicit server + token), adopt, start watching."""
        configuration, _ = configure(kubeconfig=kubeconfig, context=context, server=server,
                                     token=token, ca_file=ca_file, insecure=insecure)
        settings = settings or settings_from_env()
        settings.namespace = namespace or os.environ.get(NAMESPACE_ENV) or settings.namespace
        if default_image is not None:
            settings.default_image = default_image
        if node_lost_grace is not None:
            settings.node_lost_grace = node_lost_grace
        settings.plane = plane or settings.plane  # driven by the worker of this plane
        settings.control_plane = control_plane or settings.control_plane
        settings.fence_after = fence_after or settings.fence_after
        settings.fence_image = fence_image or settings.fence_image
        if manage_namespaces is not None:
            settings.manage_namespaces = selector_text(manage_namespaces, "--manage-namespaces")
        settings.allowed_service_accounts |= frozenset(allowed_service_accounts)
        made = cls(KubeClient(configuration), home, settings)
        try:
            made.start()
        except BaseException:
            made.close()
            raise
        return made

    def start(self) -> None:
        """Check the namespace, detect PodGroups, adopt attempts, start the watches."""
        try:
            self.client.get(f"/api/v1/namespaces/{self.namespace}")
        except KubeError as exc:
            if exc.status == 404:
                raise SpecError(f"namespace {self.namespace!r} does not exist",
                                field="--namespace",
                                fix=f"create it (kubectl create namespace {self.namespace})"
                                " or name another") from None
            if exc.status != 403:  # not allowed to read namespaces: fine, carry on
                raise
        self.pod_groups = self._pod_groups_served()
        self.kuberay = kuberay.decide(self.settings.use_kuberay, self.client)
        self._adopt()
        if self.kuberay or any(a.ray_cluster for a in self._attempts.values()):
            self.ray_clusters.start()  # adopted RayClusters are followed whatever the setting
        self.inventory_source.start()
        self.pod_informer.start()
        if self.native is not None:
            self.native.start(self.settings.sync_timeout)
        deadline = time.monotonic() + self.settings.sync_timeout
        if not self.pod_informer.synced.wait(max(0.0, deadline - time.monotonic())):
            raise SpecError(f"could not list pods in {self.namespace!r}: "
                            f"{self.pod_informer.error or 'timed out'}", field="--namespace",
                            fix="check the API server and the control plane's RBAC")
        if not self.inventory_source.wait_synced(max(0.0, deadline - time.monotonic())):
            log.warning("node inventory not synced yet: %s", self.inventory_source.nodes.error)
        self._started = True
        for current in list(self._attempts.values()):
            if not current.launched and current.stop_at is None:
                if current.api_url is not None and not self._secret_exists(current):
                    # Interrupted before its Secret, so before any pod: the control loop
                    # launches it again, with the key this plane does not have.
                    continue
                self._complete_launch(current)
            elif current.stop_at is not None:
                self._send_deletes(current)

    def _pod_groups_served(self) -> bool:
        group, version = objects.POD_GROUP_API.split("/")
        try:
            found = self.client.get(f"/apis/{group}/{version}")
        except KubeError as exc:
            if exc.status not in (403, 404):
                log.warning("cannot tell whether PodGroups are served: %s", exc)
            return False
        return any(r.get("name") == "podgroups" for r in found.get("resources") or [])

    def _adopt(self) -> None:
        answer = self.client.get(f"{self._base}/configmaps",
                                 labelSelector=f"{objects.selector(self.identity)},"
                                 f"{objects.COMPONENT}=anchor")
        for item in answer.get("items") or []:
            try:
                current = attempt_from_anchor(item)
            except (KeyError, ValueError, TypeError) as exc:
                log.error("ignoring unreadable anchor %s: %s", item["metadata"]["name"], exc)
                continue
            self._register(current)
        if self._attempts:
            log.info("adopted %d attempt(s) in %s", len(self._attempts), self.namespace)

    def _register(self, current: Attempt) -> None:
        with self._lock:
            self._attempts[(current.job, current.attempt)] = current
            for pod in current.pods:
                self._by_pod[pod.name] = (current, pod)

    # ------------------------------------------------------------------ ComputePlane
    @property
    def inventory_generation(self) -> int:
        # The node informer counts its own changes under its lock, with the cache they change.
        return self.inventory_source.generation

    def inventory(self) -> list[Node]:
        return self.inventory_source.snapshot()

    def check_job(self, job: JobSpec) -> None:
        """Refuse a pod set without an image when there is no default image.

        Called at submit: launched, such a job would fail as a system failure at every try.
        """
        for index in range(len(job.pod_sets)):
            objects.image_of(job, index, self.settings.default_image)
        objects.check_cpu_pinning(job)
        sources.check_working_dirs(job)
        volumes.check(job)
        objects.check_service_accounts(job, self.settings.allowed_service_accounts)

    def cordon(self, name: str, unschedulable: bool) -> None:
        """Patch the Node's ``spec.unschedulable``, as ``kubectl cordon`` does.

        The node informer then sees the change like any other; the kube-scheduler honours
        it too, for pods Phalanx did not create.
        """
        try:
            self.client.patch(f"/api/v1/nodes/{quote(name, safe='')}",
                              {"spec": {"unschedulable": unschedulable or None}})
        except KubeError as exc:
            if exc.status == 404:
                raise NotFound(f"no node {name!r}", field="node",
                               fix="name a node `phalanx nodes` lists") from None
            raise

    def launch(self, job: JobSpec, attempt: int, admission: Admission, *,
               credential: PodCredential | None = None) -> None:
        """Create the attempt's objects; a second call (or a restart) adopts what exists.

        A managed object's job is not made of Phalanx's pods: its object is unsuspended."""
        if self.native is not None and self.native.owns(job.name):
            nodes = sorted({n for ps in admission.pod_sets for n in ps.nodes})
            taints = [t for n in nodes for t in self.inventory_source.node_taints(n)]
            own = [t for p in job.pod_sets for t in p.tolerations]
            self.native.launch(job, attempt, admission, objects.tolerations(own, taints))
            return
        with self._lock:
            known = self._attempts.get((job.name, attempt))
        if known is not None:
            if credential is not None and known.credential is None:
                # Adopted after a restart and left unfinished for want of the key (``start``):
                # the same key, so an existing Secret is adopted, never replaced.
                known.credential = credential
                if not known.launched and known.stop_at is None:
                    self._complete_launch(known)
            return
        key = secrets.token_bytes(32)
        plan = objects.plan_attempt(job, attempt, admission, self.namespace, key,
                                    self.identity)
        placeholder = {"metadata": {"name": plan.name, "uid": "-"}}
        # (a worker's plane is asked here first: the control plane cannot know its list)
        objects.check_service_accounts(job, self.settings.allowed_service_accounts)
        for planned in plan.pods:  # everything is checked before anything is created
            self._pod_object(plan, planned, job, objects.owner_reference(placeholder),
                             credential.api_url if credential is not None else None)
        now = time.time()
        current = Attempt(
            job=job.name, attempt=attempt, name=plan.name, launched_at=now, spec=job,
            admission=admission,
            pods=[TrackedPod(ref=p.ref, name=p.name, node=p.node) for p in plan.pods],
            endpoints=plan.endpoints, key=key,
            ray_cluster=self.kuberay and framework_of(job).operator_resource == kuberay.RESOURCE,
            credential=credential,
            api_url=credential.api_url if credential is not None else None,
        )
        anchor, _ = self.client.create_or_get(f"{self._base}/configmaps", with_spec(
            objects.anchor(plan, admission, now, key, current.ray_cluster), job, current.api_url))
        check_owner(anchor, job.name, attempt, self.identity)
        current.uid = anchor["metadata"]["uid"]
        # An anchor that was there already keeps its key and its way of making pods.
        current.key = key_of(anchor)
        current.ray_cluster = anchor["data"].get(objects.RAY_CLUSTER) == "true"
        current.launched_at = float(anchor.get("data", {}).get("launchedAt") or now)
        current.api_url = anchor.get("data", {}).get(credentials.ANCHOR_URL)
        self._register(current)
        self._complete_launch(current)

    def observe(self) -> list[PodState]:
        self.inventory_source.expire()  # a silent node whose grace ran out is now lost
        now = time.time()
        nodes = self.inventory_source.node_names() if self.inventory_source.nodes.synced.is_set() \
            else None
        if nodes is not None:
            self.tainter.reconcile(self.inventory_source.node_objects())
        retry = []
        with self._lock:
            states = self.native.observe() if self.native is not None else []
            for current in self._attempts.values():
                states.extend(self._observe_attempt(current, now, nodes))
                if current.stop_at is not None and not current.deletes_sent:
                    retry.append(current)
        for current in retry:
            self._send_deletes(current)
        return states

    def endpoints(self, job: str, attempt: int) -> dict[str, str]:
        with self._lock:
            current = self._attempts.get((job, attempt))
            if current is None:
                return {}
            found = dict(current.endpoints)
        cluster = self.ray_clusters.get(current.name) if current.ray_cluster else None
        dashboard = kuberay.dashboard(cluster, self.namespace) if cluster else None
        if dashboard:  # KubeRay's head Service, as its status names it
            found["dashboard"] = dashboard
        return found

    def pod_events(self, job: str) -> list[JobEvent]:
        """The cluster's Events about the pods of ``job``'s attempts still known here."""
        with self._lock:
            names = {p.name for a in self._attempts.values() if a.job == job for p in a.pods}
        return pod_events(self.client, self._base, job, names)

    def exec(self, job: str, pod: str | None, argv: list[str], *, tty: bool = False,
             cols: int = 80, rows: int = 24) -> ExecSession:
        """Run ``argv`` in the job's running pod through ``pods/exec`` (``podexec.py``)."""
        running = [
            s for s in self.observe()
            if s.ref.job == job and s.phase is PodPhase.RUNNING
            and ((pod is None and s.ref.rank == 0)
                 or pod in (str(s.ref.rank), s.ref.name, objects.pod_name(s.ref, self.identity)))
        ]
        if not running:
            raise NotFound(
                f"job {job!r} has no running pod {pod if pod is not None else 'of rank 0'}",
                field="pod", fix="name a running pod by rank or name (phalanx describe lists "
                "them), or wait until the job runs")
        found = max(running, key=lambda s: s.ref.attempt)
        with self._lock:  # the name it has (KubeRay names its pods itself)
            name = next((p.name for a in self._attempts.values() for p in a.pods
                         if p.ref == found.ref), objects.pod_name(found.ref, self.identity))
        return open_pod_exec(self.client.api, self.namespace, name, argv,
                             tty=tty, cols=cols, rows=rows)

    def terminate(self, job: str, attempt: int, grace_seconds: float = 10.0) -> None:
        """Delete the attempt's pods with a grace period; observe reports them until gone."""
        if self.native is not None and self.native.owns(job):
            self.native.terminate(job, attempt)
            return
        with self._lock:
            current = self._attempts.get((job, attempt))
            if current is None:
                return
            first = current.stop_at is None
            if first:
                current.stop_at = time.time()
                current.grace = grace_seconds
            elif grace_seconds >= current.grace:
                return
            else:  # a shorter grace brings the end forward: delete again with it
                current.grace = grace_seconds
                current.deletes_sent = False
        if first:
            try:  # recorded on the anchor, so a restarted plane knows the pods were stopped
                self.client.patch(f"{self._base}/configmaps/{current.name}", {
                    "metadata": {"annotations": {objects.TERMINATE: repr(current.stop_at)}},
                })
            except KubeError as exc:
                log.warning("could not record the stop of %s: %s", current.name, exc)
        self._send_deletes(current)

    def forget(self, job: str, attempt: int) -> None:
        """Drop the attempt: deleting its anchor deletes whatever is left of it."""
        if self.native is not None and self.native.owns(job):
            self.native.forget(job, attempt)
            return
        with self._lock:
            current = self._attempts.pop((job, attempt), None)
            if current is None:
                return
            for pod in current.pods:
                self._by_pod.pop(pod.name, None)
        for pod in current.pods:
            self.logs.forget(pod.name)
        try:
            self.client.delete(f"{self._base}/configmaps/{current.name}", grace_seconds=0)
        except KubeError as exc:
            log.warning("could not delete %s: %s", current.name, exc)

    def close(self) -> None:
        """Stop watching and copying logs; the pods keep running and a new plane adopts them."""
        if self.native is not None:
            self.native.stop()
        self.pod_informer.stop()
        self.ray_clusters.stop()
        self.inventory_source.stop()
        self.logs.close()
        self.client.close()

    # ------------------------------------------------------------------ creating
    def _pod_object(
        self, plan: objects.AttemptPlan, planned: objects.PlannedPod, job: JobSpec,
        owner: Object, api_url: str | None = None,
    ) -> Object:
        priority = self.settings.priority_classes.get(str(job.priority))
        body = objects.pod(
            plan, planned, job, owner, service_account=self.settings.service_account,
            priority_class=priority, node_taints=self.inventory_source.node_taints(planned.node),
            with_pod_group=self.pod_groups, default_image=self.settings.default_image,
            checkpoint_volume=self.settings.checkpoint_volume,
            consume=consumes(self.inventory_source.node_object(planned.node)),
        )
        pod_set = next(p for p in job.pod_sets if p.name == planned.ref.pod_set)
        secretdata.attach(body["spec"], body["spec"]["containers"][0], plan.name, pod_set)
        if api_url is not None:
            credentials.mount(body["spec"], body["spec"]["containers"][0], plan.name, api_url)
        sources.add_source(body["spec"], body["spec"]["containers"][0], job,
                           pod_set.working_dir, api_url=api_url, attempt_name=plan.name,
                           fetch_image=self.settings.fetch_image,
                           git_image=self.settings.git_image)
        if self.fence is not None:
            index = [p.name for p in job.pod_sets].index(planned.ref.pod_set)
            fencing.wrap(body, self.fence, f"podSets[{index}]")
        return body

    def _secret_exists(self, current: Attempt) -> bool:
        try:
            self.client.get(f"{self._base}/secrets/{credentials.secret_name(current.name)}")
        except KubeError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def _create_secret(self, current: Attempt) -> None:
        """The attempt's credential Secret, owned by its anchor (adopted if it exists)."""
        if current.credential is None or current.uid is None:
            return
        owner = objects.owner_reference({"metadata": {"name": current.name, "uid": current.uid}})
        # The values first: finding the credential's Secret after a restart means these exist.
        for body in secretdata.secrets(current.name, self.namespace, current.job,
                                       current.attempt, owner, current.credential.secrets,
                                       self.identity):
            made, _ = self.client.create_or_get(f"{self._base}/secrets", body)
            check_owner(made, current.job, current.attempt, self.identity)
        created, _ = self.client.create_or_get(
            f"{self._base}/secrets", credentials.secret(
                current.name, self.namespace, current.job, current.attempt, owner,
                current.credential, self.identity))
        check_owner(created, current.job, current.attempt, self.identity)

    def release_checkpoints(self, job: str) -> None:
        self.checkpoints.release(job)

    def _complete_launch(self, current: Attempt) -> None:
        """Create whatever of the attempt does not exist yet, adopting what does."""
        if current.spec is None or current.admission is None or current.uid is None:
            log.error("cannot complete the launch of %s: its anchor lacks the plan", current.name)
            return
        with self._launching:
            # (an anchor made before names were tagged keeps its names)
            tagged = current.name == objects.attempt_name(current.job, current.attempt,
                                                          self.identity)
            plan = objects.plan_attempt(current.spec, current.attempt, current.admission,
                                        self.namespace, current.key, self.identity,
                                        tagged=tagged)
            owner = objects.owner_reference({"metadata": {"name": plan.name, "uid": current.uid}})
            if self.pod_groups:
                group, version = objects.POD_GROUP_API.split("/")
                group_obj, _ = self.client.create_or_get(
                    f"/apis/{group}/{version}/namespaces/{self.namespace}/podgroups",
                    objects.pod_group(plan, owner))
                check_owner(group_obj, current.job, current.attempt, self.identity)
            svc, _ = self.client.create_or_get(f"{self._base}/services",
                                               objects.service(plan, owner))
            check_owner(svc, current.job, current.attempt, self.identity)
            self._create_secret(current)  # before any pod that mounts it
            bodies = [self._pod_object(plan, p, current.spec, owner, current.api_url)
                      for p in plan.pods]
            if current.ray_cluster:  # KubeRay makes the pods, from these as templates
                cluster = self.ray_clusters.create(kuberay.ray_cluster(plan, bodies, owner))
                check_owner(cluster, current.job, current.attempt, self.identity)
            for body in [] if current.ray_cluster else bodies:
                created, _ = self.client.create_or_get(f"{self._base}/pods", body)
                check_owner(created, current.job, current.attempt, self.identity)
                self._pod_seen(created, deleted=False, from_create=True)
            self.client.patch(f"{self._base}/configmaps/{current.name}",
                              {"metadata": {"annotations": {objects.LAUNCHED: "true"}}})
            current.launched = True
        self._notify()

    def _send_deletes(self, current: Attempt) -> None:
        try:
            if current.ray_cluster:  # first: KubeRay would make the deleted pods again
                self.ray_clusters.delete(current.name)
            for pod in current.pods:
                if not pod.gone:
                    self.client.delete(f"{self._base}/pods/{pod.name}",
                                       grace_seconds=current.grace)
            self.client.delete(f"{self._base}/services/{current.name}")
            if self.pod_groups:
                group, version = objects.POD_GROUP_API.split("/")
                self.client.delete(
                    f"/apis/{group}/{version}/namespaces/{self.namespace}/podgroups/"
                    f"{current.name}")
            current.deletes_sent = True
        except KubeError as exc:  # tried again at the next observe
            log.warning("could not delete the pods of %s: %s", current.name, exc)

    # ------------------------------------------------------------------ watching
    def _list_pods(self, items: list[Object], version: str) -> None:
        present = {str(o["metadata"]["name"]): o for o in items}
        with self._lock:
            for name, obj in present.items():
                if name not in self._by_pod:
                    self._bind(obj)
            for name, (_, pod) in self._by_pod.items():
                if name in present:
                    self._pod_seen(present[name], deleted=False)
                elif pod.seen and not pod.gone and not newer(pod.obj, version):
                    pod.gone = True  # deleted while the watch was down
        self._notify()

    def _pod_event(self, kind: str, obj: Object) -> None:
        self._pod_seen(obj, deleted=kind == "DELETED")
        self._notify()

    def _pod_seen(self, obj: Object, *, deleted: bool, from_create: bool = False) -> None:
        name = str(obj["metadata"]["name"])
        with self._lock:
            found = self._by_pod.get(name) or self._bind(obj)
            if found is None:
                return
            current, pod = found
            if from_create and pod.seen:  # the watch was first: it is as new or newer
                return
            pod.obj, pod.seen = obj, True
            if deleted:
                pod.gone = True
            started = observe_pod(obj).container_started
        if started and not deleted:
            self.logs.follow(name, current.job, pod.ref.name,
                             lambda: self._pod_finished(name))

    def _bind(self, obj: Object) -> tuple[Attempt, TrackedPod] | None:
        """An operator's pod (KubeRay names them): the attempt's pod of its rank, if that
        one has not been seen yet (a pod KubeRay makes again is none of the gang's)."""
        labels = obj["metadata"].get("labels") or {}
        attempt, rank = labels.get(objects.ATTEMPT, ""), labels.get(objects.RANK, "")
        current = self._attempts.get((labels.get(objects.JOB, ""),
                                      int(attempt) if attempt.isdigit() else -1))
        if current is None or not current.ray_cluster:
            return None
        pod = next((p for p in current.pods if str(p.ref.rank) == rank and not p.seen), None)
        if pod is None:
            return None
        self._by_pod.pop(pod.name, None)
        pod.name = str(obj["metadata"]["name"])
        self._by_pod[pod.name] = (current, pod)
        return current, pod

    def _pod_finished(self, name: str) -> bool:
        with self._lock:
            found = self._by_pod.get(name)
            if found is None:
                return True
            _, pod = found
            if pod.gone or pod.obj is None:
                return True
            phase = (pod.obj.get("status") or {}).get("phase")
            return phase in ("Succeeded", "Failed")

    # ------------------------------------------------------------------ observing
    def _observe_attempt(
        self, current: Attempt, now: float, nodes: set[str] | None
    ) -> list[PodState]:
        states = [self._observe_pod(current, pod, now, nodes) for pod in current.pods]
        if not current.started and states and all(
            s.phase in (PodPhase.RUNNING, PodPhase.SUCCEEDED) for s in states
        ):
            current.started = True
        timeout = self.settings.start_timeout
        if (not current.started and current.stop_at is None
                and now - current.launched_at > timeout):
            for i, (pod, state) in enumerate(zip(current.pods, states, strict=True)):
                if pod.final is None and state.phase is PodPhase.PENDING:
                    pod.final = failed(state, NOT_READY, "system", now)
                    states[i] = pod.final
        return states

    def _observe_pod(
        self, current: Attempt, pod: TrackedPod, now: float, nodes: set[str] | None
    ) -> PodState:
        if pod.final is not None:
            return pod.final
        stopping = current.stop_at is not None
        base = PodState(ref=pod.ref, node=pod.node, phase=PodPhase.PENDING, reason="Pending")
        if pod.obj is None:
            if stopping:  # never created, or gone before it was ever seen
                pod.final = failed(base, TERMINATED, None, now)
            elif current.ray_cluster:  # not made yet, unless its RayCluster went away
                if self.ray_clusters.gone(current.name):
                    pod.final = failed(base, DELETED, "system", now)
            elif current.launched and self.pod_informer.synced.is_set():
                pod.final = failed(base, DELETED, "system", now)
            return pod.final or base
        seen = observe_pod(pod.obj, stop_requested=stopping)
        state = PodState(
            ref=pod.ref, node=seen.node or pod.node, phase=seen.phase,
            exit_code=seen.exit_code, signal=seen.signal, reason=seen.reason,
            failure=seen.failure, started_at=seen.started_at, finished_at=seen.finished_at,
        )
        if seen.phase.done:
            pod.final = state
        elif pod.gone:
            pod.final = failed(state, TERMINATED if stopping else DELETED,
                                None if stopping else "system", now)
        elif stopping:
            pass  # still going away: report it as it is until it is gone
        elif seen.deleting:
            pod.final = failed(state, DELETED, "system", now)
        elif nodes is not None and seen.node and seen.node not in nodes:
            pod.final = failed(state, NODE_LOST, "system", now)
        elif seen.waiting in STUCK:
            pod.stuck_since = pod.stuck_since or now
            if now - pod.stuck_since > self.settings.image_pull_timeout:
                pod.final = failed(state, seen.waiting, "system", now)
        else:
            pod.stuck_since = None
        return pod.final or state
