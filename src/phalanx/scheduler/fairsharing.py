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


def max_removal(node: QuotaNode, fr: FR, target: int) -> int | None:
    """The most of ``fr`` that can leave ``node`` with its share still at least ``target``:
    the largest x with ``dominant_share(node, minus={fr: x}) >= target``, worked out instead
    of searched (the share only falls as x grows). None: any amount; -1: not even nothing.

    The fair-sharing replay asks this once per queue instead of computing a share per
    candidate it walks.
    """
    unlimited: int | None = None
    never = -1
    if target <= 0:
        return unlimited
    parent = node.parent
    if parent is None:
        return never  # the share is 0 whatever leaves
    if fr not in node.subtree:
        return unlimited if dominant_share(node) >= target else never
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
    if node.weight_milli <= 0:  # any borrowing at all is the maximum share
        if others or rest > 0:
            return unlimited
        return over - 1 if over > 0 else never
    best_other = 0
    for name, amount in others.items():
        pooled = parent.lendable.get(name, 0)
        if pooled > 0:
            best_other = max(best_other, amount * 1000 // pooled)
    if best_other * 1000 // node.weight_milli >= target:
        return unlimited
    return _resource_removal(node, parent, resource, over, rest, target)


def _resource_removal(node: QuotaNode, parent: QuotaNode, resource: str, over: int, rest: int,
                      target: int) -> int | None:
    """The most of one flavor of ``resource`` (borrowing ``over`` of it; its other flavors
    borrow ``rest``) that can leave with the resource's own share term at least ``target``
    (> 0, weight > 0)."""
    pooled = parent.lendable.get(resource, 0)
    if pooled <= 0:
        return -1
    ratio = -(-target * node.weight_milli // 1000)  # the least ratio that reaches target
    amount = -(-ratio * pooled // 1000)  # the least borrowed amount that reaches that ratio
    if amount - rest <= 0:
        return None
    most = over - (amount - rest)
    return most if most >= 0 else -1


Limits = tuple[tuple[FR, int | None], ...]


def removal_limits(node: QuotaNode, target: int) -> Limits | None:
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
    if target <= 0:
        return ((("", ""), None),)
    if len({resource for _, resource in node.subtree}) != len(node.subtree):
        return None
    out: list[tuple[FR, int | None]] = []
    for fr, quota in node.subtree.items():
        over = node.usage.get(fr, 0) - quota
        if node.weight_milli <= 0:  # any borrowing at all is the maximum share
            out.append((fr, over - 1 if over > 0 else -1))
        elif over <= 0:
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
