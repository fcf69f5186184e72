"""``max_removal`` and ``removal_limits`` agree with ``dominant_share`` computed amount by amount."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from phalanx.scheduler.cache import QuotaCache
from phalanx.scheduler.fairsharing import (
    dominant_share,
    keeps_share,
    max_removal,
    removal_limits,
)
from phalanx.spec import QueueConfig, parse_config_documents
from tests.explore import property_settings

FLAVORS = ("a", "b")
RESOURCES = ("nvidia.com/gpu", "cpu")


def cohort(nominal: list[int], weight: float, flavor_names: tuple[str, ...] = FLAVORS
           ) -> QuotaCache:
    docs: list[dict[str, object]] = [{"kind": "ResourceFlavor", "name": f} for f in FLAVORS]
    docs.append({"kind": "Cohort", "name": "co"})
    for q in ("mine", "other"):
        flavors = []
        for i, f in enumerate(flavor_names):
            resources = [{"name": r, "nominalQuota": nominal[(2 * i + j) % len(nominal)]}
                         for j, r in enumerate(RESOURCES)]
            flavors.append({"name": f, "resources": resources})
        docs.append({"kind": "ClusterQueue", "name": q, "cohort": "co",
                     "fairSharing": {"weight": weight if q == "mine" else 1},
                     "resourceGroups": [{"coveredResources": list(RESOURCES),
                                         "flavors": flavors}]})
    return QuotaCache(QueueConfig().merged(parse_config_documents(docs)))


@property_settings(max_examples=300, deadline=None)
@given(
    nominal=st.lists(st.integers(0, 8), min_size=4, max_size=4),
    weight=st.sampled_from([0, 0.5, 1, 2.5]),
    usage=st.lists(st.integers(0, 20), min_size=4, max_size=4),
    target=st.integers(-1, 3000),
    which=st.integers(0, 3),
)
def test_max_removal_is_the_largest_amount_that_keeps_the_share(
    nominal: list[int], weight: float, usage: list[int], target: int, which: int
) -> None:
    cache = cohort(nominal, weight)
    frs = [(f, r) for f in FLAVORS for r in RESOURCES]
    cache.charge("mine", {fr: u * 1000 for fr, u in zip(frs, usage, strict=True)})
    node = cache.cqs["mine"]
    fr = frs[which]
    held = node.usage.get(fr, 0)
    # Whole units and a few odd amounts: every step of the share function is crossed.
    amounts = sorted({*range(0, held + 1, 1000), *range(0, held + 1, 333), held})
    keeps = [x for x in amounts if dominant_share(node, minus={fr: x}) >= target]
    got = max_removal(node, fr, target)
    if got is None:
        assert keeps == amounts, "said any amount, but some removal drops the share"
    elif got < 0:
        assert not keeps, "said none, but some removal keeps the share"
    else:
        assert dominant_share(node, minus={fr: got}) >= target
        assert all(x <= got for x in keeps)
        assert dominant_share(node, minus={fr: got + 1}) < target


@property_settings(max_examples=400, deadline=None)
@given(
    nominal=st.lists(st.integers(0, 8), min_size=4, max_size=4),
    weight=st.sampled_from([0, 0.5, 1, 2.5]),
    usage=st.lists(st.integers(0, 20), min_size=2, max_size=2),
    other=st.lists(st.integers(0, 20), min_size=2, max_size=2),
    removed=st.lists(st.integers(0, 20_000), min_size=2, max_size=2),
    target=st.integers(-1, 3000),
)
def test_removal_limits_judge_a_removal_as_the_share_does(
    nominal: list[int], weight: float, usage: list[int], other: list[int],
    removed: list[int], target: int,
) -> None:
    cache = cohort(nominal, weight, FLAVORS[:1])
    frs = [(FLAVORS[0], r) for r in RESOURCES]
    cache.charge("mine", {fr: u * 1000 for fr, u in zip(frs, usage, strict=True)})
    cache.charge("other", {fr: u * 1000 for fr, u in zip(frs, other, strict=True)})
    node = cache.cqs["mine"]
    limits = removal_limits(node, target)
    assert limits is not None  # one flavor per resource: the terms separate
    gone = {fr: min(x, node.usage.get(fr, 0)) for fr, x in zip(frs, removed, strict=True)}
    first, rest = dict(list(gone.items())[:1]), dict(list(gone.items())[1:])
    expected = dominant_share(node, minus=gone) >= target
    assert keeps_share(limits, gone) is expected
    assert keeps_share(limits, first, rest) is expected  # split between gone and more
    for fr, most in limits:  # each limit and one past it, the other resource left whole
        for x in ([most, most + 1] if most is not None and most >= 0 else []):
            x = min(x, node.usage.get(fr, 0))
            assert keeps_share(limits, {fr: x}) is (dominant_share(node, minus={fr: x}) >= target)


def test_removal_limits_refuse_a_resource_with_two_flavors() -> None:
    cache = cohort([4, 4, 4, 4], 1)
    cache.charge("mine", {(f, r): 8000 for f in FLAVORS for r in RESOURCES})
    assert removal_limits(cache.cqs["mine"], 1) is None
