"""Node pools bought for pending gangs (``docs/provisioning.md``)."""

from __future__ import annotations

from fastapi import APIRouter

from phalanx.server.access import Access, needs
from phalanx.server.routes.context import ApiContext, errors
from phalanx.spec.api import PoolList, PoolView
from phalanx.store.pools import PoolStore


def router(ctx: ApiContext) -> APIRouter:
    r = APIRouter()
    service = ctx.service

    @r.get("/v1/pools", dependencies=needs(Access.READ), responses=errors(401))
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

    return r
