"""The API's OpenAPI document as ``/openapi.json`` serves it: FastAPI's, with the bearer
token declared and the 422 answers it never gives left out."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

BEARER = "bearerAuth"


def openapi_document(app: FastAPI, open_paths: frozenset[str]) -> dict[str, Any]:
    """FastAPI's document, with the bearer token declared and its unused 422 answers gone.

    Validation errors answer 400 in the error envelope (declared per route), never 422.
    ``open_paths`` take no token (the key exchange).
    """
    if app.openapi_schema is not None:
        return app.openapi_schema
    doc = get_openapi(title=app.title, version=app.version, description=app.description,
                      routes=app.routes)
    for path, operations in doc.get("paths", {}).items():
        for operation in operations.values():
            responses = operation.get("responses", {})
            responses.pop("422", None)
            for code, response in responses.items():
                content = response.get("content", {})
                # A text route (logs, metrics) still answers its errors in the JSON envelope.
                if code[0] in "45" and "text/plain" in content:
                    content["application/json"] = content.pop("text/plain")
            if path.startswith("/v1/") and path not in open_paths:
                operation["security"] = [{BEARER: []}]
    schemas = doc.get("components", {}).get("schemas", {})
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    doc.setdefault("components", {})["securitySchemes"] = {
        BEARER: {"type": "http", "scheme": "bearer", "bearerFormat": "JWT",
                 "description": "A short-lived token from POST /v1/auth/token, which takes "
                 "an API key (the state directory's admin key is $PHALANX_HOME/token)"},
    }
    app.openapi_schema = doc
    return doc
