"""The Python SDK: a client of the control plane's HTTP API and builders for jobs.

The names below load on first use: importing one light module of the SDK
(``phalanx.sdk.credentials``, ``phalanx.sdk.config``) runs this package first, and
should not pay for the HTTP client and every model of the spec.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from phalanx.lazy import lazy_names

if TYPE_CHECKING:
    from phalanx.defaults import phalanx_home
    from phalanx.sdk.builders import Job, PodSetBuilder
    from phalanx.sdk.client import Client
    from phalanx.sdk.config import Endpoint, resolve_endpoint
    from phalanx.sdk.responses import error_from_response

# Where each lazily loaded name lives; the TYPE_CHECKING imports above must match.
_HOMES = {
    "Client": "phalanx.sdk.client",
    "Endpoint": "phalanx.sdk.config",
    "Job": "phalanx.sdk.builders",
    "PodSetBuilder": "phalanx.sdk.builders",
    "error_from_response": "phalanx.sdk.responses",
    "phalanx_home": "phalanx.defaults",
    "resolve_endpoint": "phalanx.sdk.config",
}

__all__ = [
    "Client",
    "Endpoint",
    "Job",
    "PodSetBuilder",
    "error_from_response",
    "phalanx_home",
    "resolve_endpoint",
]


# Hidden from type checkers, as in ``phalanx/__init__.py``: they see the real names
# through the TYPE_CHECKING imports.
if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_names(__name__, _HOMES, globals(), __all__)
