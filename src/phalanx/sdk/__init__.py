"""The Python SDK: a client of the control plane's HTTP API and builders for jobs."""

from phalanx.defaults import phalanx_home
from phalanx.sdk.builders import Job, PodSetBuilder
from phalanx.sdk.client import Client, error_from_response
from phalanx.sdk.config import Endpoint, resolve_endpoint

__all__ = [
    "Client",
    "Endpoint",
    "Job",
    "PodSetBuilder",
    "error_from_response",
    "phalanx_home",
    "resolve_endpoint",
]
