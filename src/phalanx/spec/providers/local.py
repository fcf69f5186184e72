"""The ``local`` provider: virtual nodes added to the local compute plane
(``provisioning/local.py``). Its options: delay (until the nodes are Ready), stockout
(injected: true, a count of pools, or attempt numbers), error (transient | configuration,
injected at the attempts errorAttempts lists, every attempt without it), failDeletion
(every deletion fails: a cleanup that keeps failing)."""

from __future__ import annotations

from phalanx.spec.providers.base import ProviderInfo, register_provider
from phalanx.spec.providers.options import check_bool, check_delay, check_stockout


def _check_error(value: object) -> None:
    if value not in ("transient", "configuration"):
        raise ValueError(f"options.error is {value!r}; write transient (retried with backoff) "
                         "or configuration (fails the job at once)")


def _check_attempts(value: object) -> None:
    if not (isinstance(value, list) and all(isinstance(v, int) and v >= 1 for v in value)):
        raise ValueError(f"options.errorAttempts is {value!r}; write a list of attempt "
                         "numbers such as [1, 2]")


LOCAL = register_provider(ProviderInfo(
    "local", what="adds virtual nodes to the local compute plane", serves="local",
    build="phalanx.provisioning.local:build",
    options={"delay": check_delay, "stockout": check_stockout, "error": _check_error,
             "errorAttempts": _check_attempts, "failDeletion": check_bool("failDeletion")},
))
