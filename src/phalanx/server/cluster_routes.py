"""The routes about the cluster: queues, nodes (cordon, drain: admins) and the queue
configuration (apply, delete: admins)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request

from phalanx.control import NodeOverview
from phalanx.control.service import JobService
from phalanx.server.access import Access, audit_entry, needs
from phalanx.spec.api import (
    AppliedObject,
    ClusterQueueView,
    CohortView,
    ConfigApplied,
    ConfigDeleted,
    ConfigDocuments,
    ConfigRefs,
    DeletedObject,
    DrainRequest,
    LocalQueueView,
    NodeDrained,
    NodeList,
    NodeView,
    PoolList,
    PoolView,
    QueuesOverview,
    ResourceUsageView,
)
from phalanx.spec.config import config_kind
from phalanx.store import IdentityStore
from phalanx.store.pools import PoolStore

_USAGE = ("nominal", "used", "borrowed", "lendable", "withheld")


def _millis(value: int) -> str:
    """A milli-unit amount as the wire form Quantity fields parse ("1500m")."""
    return f"{value}m"


def add_cluster_routes(
    app: FastAPI, service: JobService, identity: IdentityStore,
    parsers: dict[str, Callable[[object], object]],
    errors: Callable[..., dict[int | str, dict[str, Any]]],
) -> None:
    # ------------------------------------------------------------------ queues & nodes
    @app.get("/v1/queues", dependencies=needs(Access.READ), responses=errors(401))
    def queues() -> QueuesOverview:
        overview = service.queues()
        return QueuesOverview(
            cluster_queues=[
                ClusterQueueView(
                    name=cq.name, cohort=cq.cohort, pending=cq.pending, admitted=cq.admitted,
                    stopped=cq.stopped, weighted_share=cq.weighted_share,
                    usage=[
                        ResourceUsageView.model_validate(
                            {"flavor": u.flavor, "resource": u.resource}
                            | {k: _millis(getattr(u, k)) for k in _USAGE}
                        )
                        for u in cq.usage
                    ],
                )
                for cq in overview.cluster_queues
            ],
            local_queues=[
                LocalQueueView(name=lq.name, cluster_queue=lq.cluster_queue,
                               pending=lq.pending, admitted=lq.admitted)
                for lq in overview.local_queues
            ],
            cohorts=[CohortView(name=c.name, parent=c.parent)
                     for c in overview.config.cohorts.values()],
        )

    def node_view(entry: NodeOverview) -> NodeView:
        return NodeView(**entry.node.model_dump(), used={
            res: _millis(v) for res, v in entry.used.items()
        })

    @app.get("/v1/nodes", dependencies=needs(Access.READ), responses=errors(401))
    def nodes() -> NodeList:
        return NodeList(items=[node_view(entry) for entry in service.nodes()])

    @app.get("/v1/nodes/{name}", dependencies=needs(Access.READ), responses=errors(401, 404))
    def node(name: str) -> NodeView:
        """One node, with the last answer of each of its health checks."""
        return node_view(service.node(name))

    @app.get("/v1/pools", dependencies=needs(Access.READ), responses=errors(401))
    def pools(job: str | None = None) -> PoolList:
        """Node pools bought for pending gangs: those not yet deleted, or every attempt of
        ``job`` (with why each failed)."""
        store = PoolStore(service.store)
        rows = store.of_job(job) if job is not None else store.live()
        return PoolList(items=[PoolView(
            name=r.name, job=r.job, attempt=r.attempt, flavor=r.flavor, provider=r.provider,
            state=r.state.value, node_count=r.node_count,
            price_per_node_hour=r.price_per_node_hour, created_at=r.created_at,
            updated_at=r.updated_at, error=r.error_kind, message=r.message,
        ) for r in rows])

    @app.post("/v1/nodes/{name}:cordon", dependencies=needs(Access.ADMIN),
              responses=errors(400, 401, 403, 404))
    def cordon(name: str, request: Request) -> NodeView:
        """Place no new pods on the node; what runs there keeps running."""
        view = node_view(service.cordon(name, True))
        identity.append([audit_entry(request, "cordon", name)])
        return view

    @app.post("/v1/nodes/{name}:uncordon", dependencies=needs(Access.ADMIN),
              responses=errors(400, 401, 403, 404))
    def uncordon(name: str, request: Request) -> NodeView:
        view = node_view(service.cordon(name, False))
        identity.append([audit_entry(request, "uncordon", name)])
        return view

    @app.post("/v1/nodes/{name}:drain", dependencies=needs(Access.ADMIN),
              responses=errors(400, 401, 403, 404))
    def drain(name: str, request: Request, body: DrainRequest | None = None) -> NodeDrained:
        """Cordon the node and stop its gangs (with their grace), requeued onto other nodes
        as system failures."""
        stopped = service.drain(name, body.grace_seconds if body else None)
        identity.append([audit_entry(request, "drain", name, stopped=stopped)])
        return NodeDrained(node=node_view(service.node(name)), stopped=stopped)

    # ------------------------------------------------------------------ config
    @app.post("/v1/config/apply", dependencies=needs(Access.ADMIN),
              responses=errors(400, 401, 403, 413))
    def apply(body: ConfigDocuments, request: Request) -> ConfigApplied:
        """Create or update flavors, cohorts, queues and priority classes, all or nothing."""
        applied = service.apply_config(list(body.documents))
        identity.append([audit_entry(request, "apply", f"{len(applied)} objects",
                                     objects=applied)])
        return ConfigApplied(applied=[AppliedObject.model_validate(a) for a in applied])

    parsers["/v1/config/apply"] = ConfigDocuments.parse

    def deleted_config(request: Request, deleted: list[tuple[str, str]]) -> ConfigDeleted:
        identity.append([audit_entry(request, "delete-config", f"{len(deleted)} objects",
                                     objects=[f"{k}/{n}" for k, n in deleted])])
        return ConfigDeleted(deleted=[DeletedObject(kind=k, name=n) for k, n in deleted])

    @app.post("/v1/config/delete", dependencies=needs(Access.ADMIN),
              responses=errors(400, 401, 403, 404, 409))
    def delete_config(body: ConfigRefs, request: Request) -> ConfigDeleted:
        """Delete flavors, cohorts, queues and priority classes, all or nothing; refused
        while another object or a live job uses one."""
        return deleted_config(request, service.delete_config(
            [(ref.kind, ref.name) for ref in body.documents]))

    @app.delete("/v1/config/{kind}/{name}", dependencies=needs(Access.ADMIN),
                responses=errors(400, 401, 403, 404, 409))
    def delete_config_object(kind: str, name: str, request: Request) -> ConfigDeleted:
        """Delete one object (kind: clusterqueue, localqueue, cohort, resourceflavor,
        priorityclass, any case); refused while in use."""
        return deleted_config(request, service.delete_config([(config_kind(kind), name)]))

    @app.get("/v1/config", dependencies=needs(Access.READ), responses=errors(401))
    def config() -> ConfigDocuments:
        return ConfigDocuments(documents=service.config().objects())
