"""Fleet comparison on built snapshots: the verdict and exactly which key differs on which instances."""

from __future__ import annotations

import pytest

from soklet_core.fleet import (
    DifferenceKind,
    Duplicate,
    FleetStatus,
    InstanceReading,
    SharedName,
    compare_fleet,
    parse_expected_fingerprint,
)
from soklet_core.keys import FingerprintComparison
from tests.fleet.support_snapshots import B_OTHER, A, B, keyring, process_id_of, reading, snapshot


def test_converged() -> None:
    ring = keyring(A, B)
    report = compare_fleet([reading("a", ring), reading("b", ring), reading("c", ring)])
    assert report.status is FleetStatus.CONVERGED
    assert report.differences == ()


def test_same_id_other_bytes_is_named_with_the_instance() -> None:
    report = compare_fleet(
        [reading("a", keyring(A, B)), reading("b", keyring(A, B)), reading("c", keyring(A, B_OTHER))]
    )
    assert report.status is FleetStatus.DIVERGED
    (difference,) = report.differences
    assert difference.kind is DifferenceKind.SAME_ID_OTHER_BYTES
    assert difference.key_id == "2026-09"
    assert difference.groups == ((B.check_value_text, ("a", "b")), (B_OTHER.check_value_text, ("c",)))
    text = difference.describe()
    assert "key 2026-09: the same id with other bytes" in text
    assert f"{B_OTHER.check_value_text[:8]} on c" in text
    # v1 digests ids only: equal for these keyrings, while v2 differs.
    assert keyring(A, B).fingerprint(1).compare(keyring(A, B_OTHER).fingerprint(1)) is FingerprintComparison.EQUAL
    assert keyring(A, B).fingerprint(2).compare(keyring(A, B_OTHER).fingerprint(2)) is FingerprintComparison.DIFFERENT


def test_missing_key() -> None:
    report = compare_fleet([reading("a", keyring(A, B)), reading("b", keyring(A)), reading("c", keyring(A, B))])
    assert report.status is FleetStatus.DIVERGED
    (difference,) = report.differences
    assert difference.kind is DifferenceKind.MISSING_KEY
    assert (difference.key_id, difference.missing_on) == ("2026-09", ("b",))
    assert difference.groups == (("present", ("a", "c")),)
    assert difference.describe() == "key 2026-09: missing on b (held by a, c)"


def test_different_active_key() -> None:
    report = compare_fleet([reading("a", keyring(A, B)), reading("b", keyring(B, A))])
    assert report.status is FleetStatus.DIVERGED
    (difference,) = report.differences
    assert difference.kind is DifferenceKind.ACTIVE_KEY
    assert difference.groups == (("2026-08", ("a",)), ("2026-09", ("b",)))


def test_v1_and_v2_are_incomparable() -> None:
    ring = keyring(A, B)
    report = compare_fleet([reading("a", ring), reading("b", ring), reading("old", ring, version=1)])
    assert report.status is FleetStatus.INCOMPARABLE
    (difference,) = report.differences
    assert difference.kind is DifferenceKind.FINGERPRINT_VERSION
    assert difference.groups == (("v2", ("a", "b")), ("v1", ("old",)))


def test_all_v1_with_other_bytes_is_still_diverged() -> None:
    report = compare_fleet([reading("a", keyring(A, B), version=1), reading("b", keyring(A, B_OTHER), version=1)])
    assert report.status is FleetStatus.DIVERGED
    assert [difference.kind for difference in report.differences] == [DifferenceKind.SAME_ID_OTHER_BYTES]


def test_one_unreachable_outranks_everything() -> None:
    ring = keyring(A, B)
    report = compare_fleet([reading("a", ring), reading("b", None), reading("c", keyring(A, B_OTHER))])
    assert report.status is FleetStatus.UNREACHABLE
    assert [item.name for item in report.unreachable] == ["b"]
    # The answered instances are still compared.
    assert [difference.kind for difference in report.differences] == [DifferenceKind.SAME_ID_OTHER_BYTES]
    assert compare_fleet([reading("a", None)]).status is FleetStatus.UNREACHABLE


def test_expect() -> None:
    ring = keyring(A, B)
    readings = [reading("a", ring), reading("b", ring)]
    value = ring.fingerprint().value
    for text in (value, f"v2:{value}", str(ring.fingerprint())):
        assert compare_fleet(readings, expect=parse_expected_fingerprint(text)).status is FleetStatus.CONVERGED
    other = parse_expected_fingerprint(keyring(A).fingerprint().value)
    report = compare_fleet(readings, expect=other)
    assert report.status is FleetStatus.DIVERGED
    assert report.differences[-1].kind is DifferenceKind.NOT_EXPECTED
    v1 = parse_expected_fingerprint(f"v1:{ring.fingerprint(1).value}")
    assert compare_fleet(readings, expect=v1).status is FleetStatus.INCOMPARABLE


@pytest.mark.parametrize("text", ["", "v2:", "v:abc", "x2:" + "A" * 43, "A" * 42, "v2:a:b:" + "A" * 43, "é" * 43])
def test_expect_refuses_malformed_text(text: str) -> None:
    with pytest.raises(ValueError, match="a fingerprint is VALUE"):
        parse_expected_fingerprint(text)


def test_listings_reporting_one_instance_are_duplicates() -> None:
    ring = keyring(A, B)
    again = InstanceReading("a-again", "http://a.other:9001", snapshot(ring, "a"))
    report = compare_fleet([reading("a", ring), again, reading("b", ring)])
    assert report.status is FleetStatus.DUPLICATED
    assert report.duplicates == (Duplicate("a", ("a", "a-again"), process_id_of("a")),)
    assert report.instance_count == 2
    assert report.duplicates[0].describe() == (
        "a, a-again report one instance, a (the same process): one instance listed 2 times (list it once)"
    )
    # A difference outranks a duplicate: the verdict stays diverged, the duplicate still named.
    other = compare_fleet([reading("a", ring), again, reading("c", keyring(A, B_OTHER))])
    assert other.status is FleetStatus.DIVERGED
    assert other.duplicates == (Duplicate("a", ("a", "a-again"), process_id_of("a")),)
    # Distinct names: no duplicate, whatever the URLs.
    assert compare_fleet([reading("a", ring), reading("b", ring)]).duplicates == ()


def test_distinct_processes_sharing_a_name_are_distinct_instances() -> None:
    """Two instances left on the default name are two processes: converged, counted twice, the shared name a
    warning; the same process listed twice among them is still a duplicate."""
    ring = keyring(A, B)
    one = reading("10.0.0.5", ring, instance="soklet", process_id=process_id_of("one"))
    two = reading("10.0.0.6", ring, instance="soklet", process_id=process_id_of("two"))
    report = compare_fleet([one, two])
    assert report.status is FleetStatus.CONVERGED
    assert report.duplicates == ()
    assert report.instance_count == 2
    assert report.shared_names == (SharedName("soklet", ("10.0.0.5", "10.0.0.6"), 2),)
    assert (
        report.shared_names[0]
        .describe()
        .startswith("10.0.0.5, 10.0.0.6 are 2 instances reporting one name, soklet: logs, metrics and the admin audit")
    )
    again = reading("one-again", ring, instance="soklet", process_id=process_id_of("one"))
    report = compare_fleet([one, two, again])
    assert report.status is FleetStatus.DUPLICATED
    assert report.duplicates == (Duplicate("soklet", ("10.0.0.5", "one-again"), process_id_of("one")),)
    assert report.shared_names == (SharedName("soklet", ("10.0.0.5", "10.0.0.6", "one-again"), 2),)
    assert report.instance_count == 2


def test_an_older_build_is_identified_by_its_name() -> None:
    """Snapshots without a process identity (an older build): one name is one instance, as before; an older and
    a newer build reporting one name are two instances sharing it."""
    ring = keyring(A, B)
    old = compare_fleet([reading("a", ring, legacy=True), reading("a-again", ring, instance="a", legacy=True)])
    assert old.status is FleetStatus.DUPLICATED
    assert old.duplicates == (Duplicate("a", ("a", "a-again")),)
    assert old.duplicates[0].describe().startswith("a, a-again report one instance, a: one instance listed 2 times, or")
    mixed = compare_fleet([reading("a", ring, legacy=True), reading("a-again", ring, instance="a")])
    assert mixed.status is FleetStatus.CONVERGED
    assert mixed.shared_names == (SharedName("a", ("a", "a-again"), 2),)
