"""Fair sharing: dominant resource share (DRS) with weights, as Kueue computes it.

A queue's share is what it borrows beyond its subtree quota, per resource, as a
fraction (in thousandths) of what its parent pools for that resource; the
dominant one counts, divided by the queue's weight. A queue within its quota has
share 0; weight 0 means it never gets ahead of anyone. Admission across the
queues of a cohort goes to the lowest share first, and fair-sharing preemption
lets a queue take from one whose share stays at least as high
(LessThanOrEqualToFinalShare), then, if that was not enough, from one whose share
was higher to begin with (LessThanInitialShare).
"""

from __future__ import annotations

from collections.abc import Mapping

from phalanx.scheduler.cache import QuotaNode
from phalanx.scheduler.workload import FR

MAX_SHARE = 1 << 62
EMPTY: Mapping[FR, int] = {}


def dominant_share(node: QuotaNode, extra: Mapping[FR, int] = EMPTY,
                   minus: Mapping[FR, int] = EMPTY) -> int:
    """Weighted DRS in thousandths; ``extra`` is added to and ``minus`` taken from usage."""
    parent = node.parent
    if parent is None:
        return 0
    usage = node.usage
    borrowed: dict[str, int] = {}
    plain = not extra and not minus  # the common call: skip two look-ups per resource
    for fr, quota in node.subtree.items():
        if plain:
            over = usage.get(fr, 0) - quota
        else:
            over = usage.get(fr, 0) + extra.get(fr, 0) - minus.get(fr, 0) - quota
        if over > 0:
            borrowed[fr[1]] = borrowed.get(fr[1], 0) + over
    if not borrowed:
        return 0
    if node.weight_milli <= 0:
        return MAX_SHARE
    best = 0
    for resource, amount in borrowed.items():
        pooled = parent.lendable.get(resource, 0)
        if pooled > 0:
            ratio = amount * 1000 // pooled
            if ratio > best:
                best = ratio
    return best * 1000 // node.weight_milli


def less_than_or_equal_to_final_share(preemptor_new: int, target_old: int,
                                      target_new: int) -> bool:
    return preemptor_new <= target_new


def less_than_initial_share(preemptor_new: int, target_old: int, target_new: int) -> bool:
    return preemptor_new < target_old
