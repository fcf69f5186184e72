"""Pod addresses on the local plane: every pod shares this machine's loopback."""

from __future__ import annotations

import socket

from phalanx.kinds import PodNetwork, PodRef

LOOPBACK = "127.0.0.1"


class LocalNetwork(PodNetwork):
    """Every pod shares this machine: each port a pod listens on is chosen free, once."""

    shared_host = True

    def __init__(self, count: int, taken: set[int]) -> None:
        super().__init__([LOOPBACK] * count)
        self._taken = taken
        self.chosen: dict[tuple[str, str], int] = {}

    def port(self, pod: PodRef, purpose: str, default: int) -> int:
        key = (pod.name, purpose)
        if key not in self.chosen:
            self.chosen[key] = free_port(self._taken)
            self._taken.add(self.chosen[key])
        return self.chosen[key]


def free_port(taken: set[int]) -> int:
    """A loopback port free right now and not in ``taken``."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind((LOOPBACK, 0))
            port: int = probe.getsockname()[1]
        if port not in taken:
            return port
