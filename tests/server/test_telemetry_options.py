"""FastAPI's own OpenTelemetry stays off (it cost every request a look at the environment
for providers) unless the environment configures OpenTelemetry."""

from __future__ import annotations

import inspect

from fastapi import FastAPI

from phalanx.server.app import telemetry_options


def test_fastapi_telemetry_is_off_unless_the_environment_asks_for_it() -> None:
    if "telemetry" not in inspect.signature(FastAPI).parameters:
        assert telemetry_options({}) == {}  # a FastAPI without telemetry of its own
        return
    off = telemetry_options({"PATH": "/usr/bin"})
    assert off == {"telemetry": {"tracing": False, "metrics": False, "logs": False,
                                 "operation_spans": False}}
    FastAPI(**off)  # FastAPI takes them as they are
    for configured in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_PYTHON_TRACER_PROVIDER",
                       "FASTAPI_OTEL_AUTO_CONFIGURE"):
        assert telemetry_options({configured: "x"}) == {}
