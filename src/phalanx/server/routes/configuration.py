"""The queue configuration: flavors, cohorts, queues and priority classes; applied and
deleted all or nothing (admins), read by anyone."""

from __future__ import annotations

from fastapi import APIRouter, Request

from phalanx.server.access import Access, audit_entry, needs
from phalanx.server.routes.context import ApiContext, errors
from phalanx.spec.api import (
    AppliedObject,
    ConfigApplied,
    ConfigDeleted,
    ConfigDocuments,
    ConfigRefs,
    DeletedObject,
)
from phalanx.spec.config import config_kind


def router(ctx: ApiContext) -> APIRouter:
    r = APIRouter()
    service, identity, parsers = ctx.service, ctx.identity, ctx.parsers

    @r.post("/v1/config/apply", dependencies=needs(Access.ADMIN),
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

    @r.post("/v1/config/delete", dependencies=needs(Access.ADMIN),
              responses=errors(400, 401, 403, 404, 409))
    def delete_config(body: ConfigRefs, request: Request) -> ConfigDeleted:
        """Delete flavors, cohorts, queues and priority classes, all or nothing; refused
        while another object or a live job uses one."""
        return deleted_config(request, service.delete_config(
            [(ref.kind, ref.name) for ref in body.documents]))

    @r.delete("/v1/config/{kind}/{name}", dependencies=needs(Access.ADMIN),
                responses=errors(400, 401, 403, 404, 409))
    def delete_config_object(kind: str, name: str, request: Request) -> ConfigDeleted:
        """Delete one object (kind: clusterqueue, localqueue, cohort, resourceflavor,
        priorityclass, any case); refused while in use."""
        return deleted_config(request, service.delete_config([(config_kind(kind), name)]))

    @r.get("/v1/config", dependencies=needs(Access.READ), responses=errors(401))
    def config() -> ConfigDocuments:
        return ConfigDocuments(documents=service.config().objects())

    return r
