import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from phalanx.errors import SpecError
from phalanx.spec import format_amount, format_quantity, parse_duration, parse_quantity
from phalanx.spec.quantity import MAX_MILLIS, MILLI, counts_bytes


@pytest.mark.parametrize(
    ("text", "millis"),
    [
        ("8", 8000),
        (8, 8000),
        ("500m", 500),
        ("1.5", 1500),
        ("64Gi", 64 * 2**30 * 1000),
        ("1k", 1_000_000),
        ("2e3", 2_000_000),
        ("0", 0),
        ("100n", 1),  # rounds up like Kubernetes
    ],
)
def test_parse_quantity(text: object, millis: int) -> None:
    assert parse_quantity(text) == millis


@pytest.mark.parametrize("bad", ["abc", "-1", "8Gb", "", True, None, [1]])
def test_bad_quantity_names_field(bad: object) -> None:
    with pytest.raises(SpecError) as info:
        parse_quantity(bad, field="podSets[0].resources.cpu")
    assert info.value.field == "podSets[0].resources.cpu"
    assert info.value.fix


@pytest.mark.parametrize(("millis", "resource"), [(500, "cpu"), (8000, "cpu"), (64 * 2**30 * 1000, "memory")])
def test_format_round_trips(millis: int, resource: str) -> None:
    assert parse_quantity(format_quantity(millis, resource)) == millis


@pytest.mark.parametrize(("text", "seconds"), [("90s", 90), ("2h", 7200), ("1h30m", 5400), (5, 5), ("500ms", 0.5)])
def test_parse_duration(text: object, seconds: float) -> None:
    assert parse_duration(text) == seconds


def test_bad_duration() -> None:
    with pytest.raises(SpecError):
        parse_duration("2 hours", field="maxRuntime")


# ---------------------------------------------------------------- shown as people write them
@pytest.mark.parametrize(
    ("text", "resource", "shown"),
    [
        ("24684084Ki", "memory", "23.5Gi"),  # a node's /proc/meminfo, rounded to 3 digits
        ("4294967296", "memory", "4Gi"),
        ("256Mi", "memory", "256Mi"),
        ("250Gi", "memory", "250Gi"),
        ("1.5Gi", "memory", "1.5Gi"),
        ("1536Mi", "memory", "1.5Gi"),
        ("1000000000", "memory", "1G"),  # CodeFlare's gigabytes stay decimal when exact
        ("1G", "memory", "1G"),
        ("1000Mi", "memory", "1000Mi"),
        ("1025Ki", "memory", "1Mi"),
        ("512", "memory", "512"),
        ("0", "memory", "0"),
        ("100Gi", "ephemeral-storage", "100Gi"),
        ("2Gi", "hugepages-2Mi", "2Gi"),
        ("500m", "cpu", "500m"),
        ("2500m", "cpu", "2500m"),
        ("64", "cpu", "64"),
        ("8", "nvidia.com/gpu", "8"),
        ("110", "pods", "110"),
    ],
)
def test_format_amount_as_people_write_it(text: str, resource: str, shown: str) -> None:
    assert format_amount(parse_quantity(text), resource) == shown


@given(millis=st.integers(min_value=0, max_value=MAX_MILLIS),
       resource=st.sampled_from(["memory", "ephemeral-storage", "cpu", "nvidia.com/gpu", "pods"]))
@example(millis=24684084 * 2**10 * MILLI, resource="memory")
@example(millis=(2**30 - 1) * MILLI, resource="memory")  # a byte short of 1Gi: 1020Mi
@example(millis=99995 * 2**10 * 10, resource="memory")  # 999.95Ki: rounds to 1000Ki
@example(millis=1500, resource="memory")  # a byte and a half
@example(millis=MAX_MILLIS, resource="memory")
@example(millis=MAX_MILLIS, resource="cpu")
def test_format_amount_parses_back_within_its_rounding(millis: int, resource: str) -> None:
    shown = format_amount(millis, resource)
    back = parse_quantity(shown)
    if counts_bytes(resource):
        # DISPLAY_DIGITS significant digits: within half a unit of the last one (0.5 %).
        assert abs(back - millis) * 200 <= millis, (millis, shown, back)
        assert len(shown) <= 7, shown  # "1023Ki", "23.5Gi": never a long run of digits
    else:
        assert back == millis, (millis, shown)  # CPU and counts are shown exactly
        assert shown == str(millis // MILLI) if millis % MILLI == 0 else shown == f"{millis}m"
