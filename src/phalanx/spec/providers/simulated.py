"""The ``simulated`` provider: pools bought in virtual time, by ``phalanx sim`` alone
(``sim/provider.py``; docs/sim-autoscaling.md)."""

from __future__ import annotations

from phalanx.spec.providers.base import ProviderInfo, register_provider
from phalanx.spec.providers.options import check_delay, check_stockout


def _check_rate(value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ValueError(f"options.stockoutRate is {value!r}; write the chance that a request "
                         "finds no capacity, from 0 to 1, e.g. 0.05")


SIMULATED = register_provider(ProviderInfo(
    "simulated", what="buys pools in virtual time", serves=None, build=None,
    options={"delay": check_delay, "stockout": check_stockout, "stockoutRate": _check_rate},
))
