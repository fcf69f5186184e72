"""What a node check is: a name, and a ``run`` that answers PASS, WARN, ERR or N/A.

A check answers with one ``NodeCheck``: its status, one sentence, and the numbers
behind it, so an operator reads why without rerunning anything. A check that
does not apply to the node (no GPU, no NVML) answers N/A rather than failing.
"""

from __future__ import annotations

from typing import Protocol

from phalanx.spec.resources import CheckStatus, NodeCheck

PASS, WARN, ERR, NOT_APPLICABLE = (
    CheckStatus.PASS, CheckStatus.WARN, CheckStatus.ERR, CheckStatus.NOT_APPLICABLE,
)
# Worst first when results are combined; N/A never outranks an answer.
SEVERITY = {NOT_APPLICABLE: -1, PASS: 0, WARN: 1, ERR: 2}


class Check(Protocol):
    """One health check of this node."""

    @property
    def name(self) -> str: ...

    def run(self) -> NodeCheck:
        """The check's answer now; may raise, which the doctor reports as ERR."""
        ...


def result(
    name: str, status: CheckStatus, message: str, **values: float
) -> NodeCheck:
    return NodeCheck(name=name, status=status, message=message,
                     values={k: float(v) for k, v in values.items()})


def worst(statuses: list[CheckStatus]) -> CheckStatus:
    """The most severe of ``statuses`` (PASS when there are none)."""
    return max(statuses, key=SEVERITY.__getitem__, default=PASS)
