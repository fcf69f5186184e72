"""The cluster's queues (their usage) and nodes (cordon, drain: admins)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from phalanx.control import NodeOverview
from phalanx.server.access import Access, audit_entry, needs
from phalanx.server.routes.context import ApiContext, errors
from phalanx.spec.api import (
    ClusterQueueView,
    CohortView,
    DrainRequest,
    LocalQueueView,
    NodeDrained,
    NodeList,
    NodeView,
    QueuesOverview,
    ResourceUsageView,
)

_USAGE = ("nominal", "used", "borrowed", "lendable", "withheld")


def _millis(value: int) -> str:
    """A milli-unit amount as the wire form Quantity fields parse ("1500m")."""
    return f"{value}m"


def router(ctx: ApiContext) -> APIRouter:
    r = APIRouter()
    service, identity = ctx.service, ctx.identity

    @r.get("/v1/queues", dependencies=needs(Access.READ), responses=errors(401))
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

    @r.get("/v1/nodes", dependencies=needs(Access.READ), responses=errors(401))
    def nodes() -> NodeList:
        return NodeList(items=[node_view(entry) for entry in service.nodes()])

    @r.get("/v1/nodes/{name}", dependencies=needs(Access.READ), responses=errors(401, 404))
    def node(name: str) -> NodeView:
        """One node, with the last answer of each of its health checks."""
        return node_view(service.node(name))

    @r.post("/v1/nodes/{name}:cordon", dependencies=needs(Access.ADMIN),
              responses=errors(400, 401, 403, 404))
    def cordon(name: str, request: Request) -> NodeView:
        """Place no new pods on the node; what runs there keeps running."""
        view = node_view(service.cordon(name, True))
        identity.append([audit_entry(request, "cordon", name)])
        return view

    @r.post("/v1/nodes/{name}:uncordon", dependencies=needs(Access.ADMIN),
              responses=errors(400, 401, 403, 404))
    def uncordon(name: str, request: Request) -> NodeView:
        view = node_view(service.cordon(name, False))
        identity.append([audit_entry(request, "uncordon", name)])
        return view

    @r.post("/v1/nodes/{name}:drain", dependencies=needs(Access.ADMIN),
              responses=errors(400, 401, 403, 404))
    def drain(name: str, request: Request, body: DrainRequest | None = None) -> NodeDrained:
        """Cordon the node and stop its gangs (with their grace), requeued onto other nodes
        as system failures."""
        stopped = service.drain(name, body.grace_seconds if body else None)
        identity.append([audit_entry(request, "drain", name, stopped=stopped)])
        return NodeDrained(node=node_view(service.node(name)), stopped=stopped)

    return r
