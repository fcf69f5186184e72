"""The Python SDK: a client of the control plane's HTTP API and builders for jobs."""

from phalanx.defaults import phalanx_home
from phalanx.sdk.builders import Job, PodSetBuilder
from phalanx.sdk.client import Client
from phalanx.sdk.config import Endpoint, resolve_endpoint
from phalanx.sdk.responses import error_from_response

__all__ = [
    "Client",
    "Endpoint",
    "Job",
    "PodSetBuilder",
    "error_from_response",
    "phalanx_home",
    "resolve_endpoint",
]
