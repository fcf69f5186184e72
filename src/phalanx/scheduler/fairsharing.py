"""Fair sharing: dominant resource share (DRS) with weights, as Kueue computes it.

A queue's share is what it borrows beyond its subtree quota, per resource, as
thousandths of what its parent pools for that resource; the dominant one counts,
divided by the queue's weight. Shares are floats computed the way Kueue computes
them, so weights far above one (shares far below one) and equal-looking shares
are still told apart. A queue within its quota has share 0. A zero-weight queue
that borrows comes after every queue of positive weight, and zero-weight queues
among themselves in the order of their unweighted ratios: its share is that ratio
scaled by ``ZERO_WEIGHT_SCALE``. Admission across the queues of a cohort goes to
the lowest share first, and fair-sharing preemption lets a queue take from one
whose share stays at least as high (LessThanOrEqualToFinalShare), then, if that
was not enough, from one whose share was higher to begin with
(LessThanInitialShare).
"""

from __future__ import annotations

from collections.abc import Mapping

from phalanx.scheduler.cache import QuotaNode
from phalanx.scheduler.workload import FR

# A power of two, so scaling is exact and keeps the ratios' order; far above any share
# of a positive weight (a ratio of at most a few thousand over a weight of at least 1e-9).
ZERO_WEIGHT_SCALE = 2.0 ** 1000
EMPTY: Mapping[FR, int] = {}
UNREACHABLE = 1 << 62  # a borrowed amount no queue holds


def weighted(node: QuotaNode, ratio: float) -> float:
    """The share of ``node`` whose dominant unweighted ratio is ``ratio``."""
    if ratio <= 0.0:
        return 0.0
    weight = node.weight
    if weight <= 0.0:
        return ratio * ZERO_WEIGHT_SCALE
    return ratio / weight


def dominant_share(node: QuotaNode, extra: Mapping[FR, int] = EMPTY,
                   minus: Mapping[FR, int] = EMPTY) -> float:
    """Weighted DRS; ``extra`` is added to and ``minus`` taken from usage."""
    parent = node.parent
    if parent is None:
        return 0.0
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
        return 0.0
    best = 0.0
    for resource, amount in borrowed.items():
        pooled = parent.lendable.get(resource, 0)
        if pooled > 0:
            ratio = amount * 1000.0 / pooled
            if ratio > best:
                best = ratio
    return weighted(node, best)


def less_than_or_equal_to_final_share(preemptor_new: float, target_old: float,
                                      target_new: float) -> bool:
    return preemptor_new <= target_new


def less_than_initial_share(preemptor_new: float, target_old: float,
                            target_new: float) -> bool:
    return preemptor_new < target_old


def _reaches(node: QuotaNode, ratio: float, target: float, strict: bool) -> bool:
    share = weighted(node, ratio)
    return share > target if strict else share >= target


def max_removal(node: QuotaNode, fr: FR, target: float, strict: bool = False) -> int | None:
    """The most of ``fr`` that can leave ``node`` with its share still at least ``target``
    (above it when ``strict``): the largest x with ``dominant_share(node, minus={fr: x})``
    reaching ``target``, worked out instead of searched (the share only falls as x grows).
    None: any amount; -1: not even nothing.

    The fair-sharing replay asks this once per queue instead of computing a share per
    candidate it walks.
    """
    unlimited: int | None = None
    never = -1
    if _reaches(node, 0.0, target, strict):
        return unlimited
    parent = node.parent
    if parent is None:
        return never  # the share is 0 whatever leaves
    if fr not in node.subtree:
        return unlimited if _reaches(node, _ratio_of(node), target, strict) else never
    usage = node.usage
    resource = fr[1]
    over = usage.get(fr, 0) - node.subtree[fr]  # what this flavor borrows, before removal
    rest = 0  # what the resource's other flavors borrow
    others: dict[str, int] = {}  # what every other resource borrows
    for key, quota in node.subtree.items():
        extra = usage.get(key, 0) - quota
        if extra <= 0 or key == fr:
            continue
        if key[1] == resource:
            rest += extra
        else:
            others[key[1]] = others.get(key[1], 0) + extra
    best_other = 0.0
    for name, amount in others.items():
        pooled = parent.lendable.get(name, 0)
        if pooled > 0:
            best_other = max(best_other, amount * 1000.0 / pooled)
    if _reaches(node, best_other, target, strict):
        return unlimited
    return _resource_removal(node, parent, resource, over, rest, target, strict)


def _ratio_of(node: QuotaNode) -> float:
    """The unweighted dominant ratio of ``node`` as it stands."""
    parent = node.parent
    assert parent is not None
    borrowed: dict[str, int] = {}
    for fr, quota in node.subtree.items():
        over = node.usage.get(fr, 0) - quota
        if over > 0:
            borrowed[fr[1]] = borrowed.get(fr[1], 0) + over
    best = 0.0
    for resource, amount in borrowed.items():
        pooled = parent.lendable.get(resource, 0)
        if pooled > 0:
            best = max(best, amount * 1000.0 / pooled)
    return best


def _least_borrowed(node: QuotaNode, pooled: int, target: float, strict: bool) -> int:
    """The least borrowed amount of a resource pooled ``pooled`` whose share term reaches
    ``target``: the inverse of the share estimated, then corrected against the share as
    ``dominant_share`` computes it (floating rounding may put it one or two off)."""
    weight = node.weight
    scale = weight if weight > 0.0 else 1.0 / ZERO_WEIGHT_SCALE
    estimate = target * scale * pooled / 1000.0
    if estimate >= UNREACHABLE:
        return UNREACHABLE
    amount = max(0, int(estimate))
    while amount > 0 and _reaches(node, (amount - 1) * 1000.0 / pooled, target, strict):
        amount -= 1
    while not _reaches(node, amount * 1000.0 / pooled, target, strict):
        amount += 1
    return amount


def _resource_removal(node: QuotaNode, parent: QuotaNode, resource: str, over: int, rest: int,
                      target: float, strict: bool = False) -> int | None:
    """The most of one flavor of ``resource`` (borrowing ``over`` of it; its other flavors
    borrow ``rest``) that can leave with the resource's own share term reaching ``target``
    (which a share of 0 does not reach)."""
    pooled = parent.lendable.get(resource, 0)
    if pooled <= 0:
        return -1
    amount = _least_borrowed(node, pooled, target, strict)
    if amount - rest <= 0:
        return None
    most = over - (amount - rest)
    return most if most >= 0 else -1


Limits = tuple[tuple[FR, int | None], ...]


def removal_limits(node: QuotaNode, target: float) -> Limits | None:
    """Per (flavor, resource) of ``node``, the most that can leave with that resource's term
    of the share still at least ``target`` (None: any amount; -1: not even nothing).

    The share is the largest term, so it stays at least ``target`` exactly when some
    resource's removal is within its limit (``keeps_share``): with several resources, a
    candidate is judged with a few comparisons instead of a share computed per candidate.
    None when a resource has several flavors here (their terms do not separate).
    """
    parent = node.parent
    if parent is None:
        return ((("", ""), -1),) if target > 0 else ((("", ""), None),)
    if _reaches(node, 0.0, target, False):
        return ((("", ""), None),)
    if len({resource for _, resource in node.subtree}) != len(node.subtree):
        return None
    out: list[tuple[FR, int | None]] = []
    for fr, quota in node.subtree.items():
        over = node.usage.get(fr, 0) - quota
        if over <= 0:
            out.append((fr, -1))
        else:
            out.append((fr, _resource_removal(node, parent, fr[1], over, 0, target)))
    return tuple(out)


def keeps_share(limits: Limits, gone: Mapping[FR, int], more: Mapping[FR, int] = EMPTY) -> bool:
    """Whether removing ``gone`` plus ``more`` keeps the share of ``removal_limits``'s node
    at least its target."""
    for fr, most in limits:  # noqa: SIM110 (a plain loop: asked per candidate walked)
        if most is None or gone.get(fr, 0) + more.get(fr, 0) <= most:
            return True
    return False
