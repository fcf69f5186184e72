import pytest

from phalanx.errors import SpecError
from phalanx.spec import format_quantity, parse_duration, parse_quantity


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
