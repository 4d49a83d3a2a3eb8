"""Fleet convergence: are the readings of every instance the same keyring, and if not, exactly how they differ.

The verdict, in order of precedence: **unreachable** (an instance gave no valid snapshot), **incomparable**
(fingerprints of different versions, compared with :meth:`Fingerprint.compare`), **diverged** (a key-level
difference, different fingerprints, or not the ``expect``-ed fingerprint), **duplicated** (all agree, but
several listings report one instance name), else **converged**. The differences are listed whatever the
verdict, from the instances that answered: a different active key, a key missing on some instances, and the
same key id holding other bytes (other check values) on some instances.

An instance is identified by what its snapshot says (``instance``, the name ``soklet serve --instance`` gives
it), not by how it was listed: two listings (URLs, fleet-file names, addresses) that report one name are one
instance listed twice, or instances sharing a name, and either way the check covers fewer instances than it
lists. They are named as :class:`Duplicate` whatever the verdict, and a fleet that would otherwise be converged
is **duplicated**: "converged" must mean that every instance meant was seen.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from soklet_core.keys import (
    CURRENT_FINGERPRINT_VERSION,
    PROTECTION_PROFILE,
    Fingerprint,
    FingerprintComparison,
    KeyringError,
    printable_name,
)
from soklet_core.mcp.server.admin_snapshot import AdminSnapshot

from .client import InstanceReading

__all__ = [
    "MAX_EXPECT_CHARS",
    "Difference",
    "DifferenceKind",
    "Duplicate",
    "FleetReport",
    "FleetStatus",
    "compare_fleet",
    "parse_expected_fingerprint",
]

#: Longest ``--expect`` text looked at (``v2:soklet-mcp-protection-v1:`` and 43 characters fit easily).
MAX_EXPECT_CHARS: Final = 128


class FleetStatus(enum.StrEnum):
    """The fleet's verdict."""

    CONVERGED = "converged"
    DIVERGED = "diverged"
    UNREACHABLE = "unreachable"
    INCOMPARABLE = "incomparable"
    #: Every instance agrees, but several listings report one instance name (see :class:`Duplicate`).
    DUPLICATED = "duplicated"


class DifferenceKind(enum.StrEnum):
    """What differs between instances."""

    #: Fingerprints of different versions: nothing can be concluded from them.
    FINGERPRINT_VERSION = "fingerprint-version"
    #: The instances seal with different active keys.
    ACTIVE_KEY = "active-key"
    #: A key id that some instances hold and others do not.
    MISSING_KEY = "missing-key"
    #: The same key id holding other bytes (other check values): states sealed under it do not open everywhere.
    SAME_ID_OTHER_BYTES = "same-id-other-bytes"
    #: Different fingerprints of the same version with no key-level difference (such as another profile).
    FINGERPRINT = "fingerprint"
    #: Not the fingerprint ``--expect`` named.
    NOT_EXPECTED = "not-expected"


_KEY_LEVEL: Final = frozenset(
    {DifferenceKind.ACTIVE_KEY, DifferenceKind.MISSING_KEY, DifferenceKind.SAME_ID_OTHER_BYTES}
)


@dataclass(frozen=True, slots=True)
class Difference:
    """One difference: its kind, the key concerned, and the instances grouped by what they hold.

    ``groups`` pairs a value (an active id, a check value, a fingerprint version or value, ``"present"``) with
    the names of the instances that hold it; ``missing_on`` names the instances without the key.
    """

    kind: DifferenceKind
    key_id: str | None
    groups: tuple[tuple[str, tuple[str, ...]], ...]
    missing_on: tuple[str, ...] = ()

    def describe(self) -> str:
        """One line for people: which key differs on which instances."""
        groups = "; ".join(
            f"{value[:8] if len(value) == 43 else value} on {', '.join(names)}" for value, names in self.groups
        )
        if self.kind is DifferenceKind.SAME_ID_OTHER_BYTES:
            return (
                f"key {self.key_id}: the same id with other bytes (check values {groups}); "
                "a v1 fingerprint, which digests ids only, would call these equal"
            )
        if self.kind is DifferenceKind.MISSING_KEY:
            present = ", ".join(self.groups[0][1]) if self.groups else ""
            return f"key {self.key_id}: missing on {', '.join(self.missing_on)} (held by {present})"
        if self.kind is DifferenceKind.ACTIVE_KEY:
            return f"active key differs: {groups}"
        if self.kind is DifferenceKind.FINGERPRINT_VERSION:
            return f"fingerprint versions differ (incomparable): {groups}"
        if self.kind is DifferenceKind.NOT_EXPECTED:
            return f"not the expected fingerprint: {groups}"
        return f"fingerprints differ: {groups}"

    def to_json(self) -> dict[str, Any]:
        """The difference as a JSON-ready document."""
        return {
            "kind": self.kind.value,
            "key": self.key_id,
            "groups": [{"value": value, "instances": list(names)} for value, names in self.groups],
            "missing_on": list(self.missing_on),
        }


@dataclass(frozen=True, slots=True)
class Duplicate:
    """Listings whose snapshots report one instance name: ``instance`` is that name, ``names`` the listings'."""

    instance: str
    names: tuple[str, ...]

    def describe(self) -> str:
        """One line for people: which listings point to one instance, and what to do."""
        names = ", ".join(printable_name(name) for name in self.names)
        return (
            f"{names} report one instance, {printable_name(self.instance)}: one instance listed "
            f"{len(self.names)} times, or instances sharing a name (give each its own --instance)"
        )

    def to_json(self) -> dict[str, Any]:
        """The duplicate as a JSON-ready document."""
        return {"instance": self.instance, "names": list(self.names)}


@dataclass(frozen=True, slots=True)
class FleetReport:
    """The readings, the verdict, the differences and the duplicated listings of one check."""

    status: FleetStatus
    readings: tuple[InstanceReading, ...]
    differences: tuple[Difference, ...]
    expected: Fingerprint | None = None
    duplicates: tuple[Duplicate, ...] = ()

    @property
    def unreachable(self) -> tuple[InstanceReading, ...]:
        """The readings without a snapshot."""
        return tuple(reading for reading in self.readings if not reading.reachable)

    @property
    def instance_count(self) -> int:
        """How many instances the readings are: one per reported name, plus each listing that did not answer."""
        answered = {reading.snapshot.instance for reading in self.readings if reading.snapshot is not None}
        return len(answered) + len(self.unreachable)


def parse_expected_fingerprint(text: str) -> Fingerprint:
    """``--expect``: ``VALUE``, ``vN:VALUE`` or ``vN:PROFILE:VALUE`` (as a fingerprint prints). Without a version
    the current one (2) is meant. Raises ``ValueError`` with fixed text."""
    message = "a fingerprint is VALUE, vN:VALUE or vN:PROFILE:VALUE (VALUE: 43 base64url characters)"
    if not text or len(text) > MAX_EXPECT_CHARS or not text.isascii() or not text.isprintable():
        raise ValueError(message)
    parts = text.split(":")
    version: object = CURRENT_FINGERPRINT_VERSION
    profile = PROTECTION_PROFILE
    if len(parts) > 3:
        raise ValueError(message)
    if len(parts) > 1:
        head = parts[0]
        if len(head) < 2 or head[0] != "v" or not head[1:].isdigit() or len(head) > 6:
            raise ValueError(message)
        version = int(head[1:])
    if len(parts) == 3:
        profile = parts[1]
    try:
        return Fingerprint.from_json({"version": version, "profile": profile, "value": parts[-1]})
    except KeyringError:
        raise ValueError(message) from None


def compare_fleet(readings: Sequence[InstanceReading], *, expect: Fingerprint | None = None) -> FleetReport:
    """The verdict and differences of ``readings`` (and against ``expect`` when given)."""
    answered = [(reading.name, reading.snapshot) for reading in readings if reading.snapshot is not None]
    differences: list[Difference] = []
    incomparable = False

    versions = _grouped((name, str(snapshot.fingerprint.version)) for name, snapshot in answered)
    if len(versions) > 1:
        incomparable = True
        differences.append(Difference(DifferenceKind.FINGERPRINT_VERSION, None, _labelled(versions, "v")))
    actives = _grouped((name, snapshot.active) for name, snapshot in answered)
    if len(actives) > 1:
        differences.append(Difference(DifferenceKind.ACTIVE_KEY, None, actives))
    differences += _key_differences(answered)
    diverged = any(difference.kind in _KEY_LEVEL for difference in differences)
    if not incomparable and answered:
        # The fingerprints themselves, through the keys layer's one comparison rule.
        first = answered[0][1].fingerprint
        if any(first.compare(snapshot.fingerprint) is not FingerprintComparison.EQUAL for _, snapshot in answered):
            diverged = True
            if not differences:
                values = _grouped((name, snapshot.fingerprint.value) for name, snapshot in answered)
                differences.append(Difference(DifferenceKind.FINGERPRINT, None, values))
    if expect is not None and answered:
        comparisons = [(name, expect.compare(snapshot.fingerprint)) for name, snapshot in answered]
        if any(outcome is FingerprintComparison.INCOMPARABLE for _, outcome in comparisons):
            incomparable = True
        others = {name for name, outcome in comparisons if outcome is not FingerprintComparison.EQUAL}
        if others:
            diverged = True
            differences.append(
                Difference(
                    DifferenceKind.NOT_EXPECTED,
                    None,
                    _grouped((name, str(snapshot.fingerprint)) for name, snapshot in answered if name in others),
                )
            )
    duplicates = _duplicates(readings)
    if len(answered) < len(readings):
        status = FleetStatus.UNREACHABLE
    elif incomparable:
        status = FleetStatus.INCOMPARABLE
    elif diverged:
        status = FleetStatus.DIVERGED
    elif duplicates:
        status = FleetStatus.DUPLICATED
    else:
        status = FleetStatus.CONVERGED
    return FleetReport(status, tuple(readings), tuple(differences), expect, duplicates)


def _duplicates(readings: Sequence[InstanceReading]) -> tuple[Duplicate, ...]:
    # Grouped by the name each snapshot reports, in order of first appearance; only groups of two or more.
    groups: dict[str, list[str]] = {}
    for reading in readings:
        if reading.snapshot is not None:
            groups.setdefault(reading.snapshot.instance, []).append(reading.name)
    return tuple(Duplicate(instance, tuple(names)) for instance, names in groups.items() if len(names) > 1)


def _key_differences(answered: Sequence[tuple[str, AdminSnapshot]]) -> list[Difference]:
    differences: list[Difference] = []
    names = [name for name, _ in answered]
    key_ids = sorted({key.id for _, snapshot in answered for key in snapshot.keys})
    for key_id in key_ids:
        holders = [(name, snapshot.key(key_id)) for name, snapshot in answered]
        present = tuple(name for name, key in holders if key is not None)
        if len(present) < len(names):
            missing = tuple(name for name in names if name not in set(present))
            differences.append(Difference(DifferenceKind.MISSING_KEY, key_id, (("present", present),), missing))
        check_values = _grouped((name, key.check_value) for name, key in holders if key is not None)
        if len(check_values) > 1:
            differences.append(Difference(DifferenceKind.SAME_ID_OTHER_BYTES, key_id, check_values))
    return differences


def _short(value: str) -> str:
    # A check value or fingerprint value (43 base64url characters) shortened as the table shows it.
    return value[:8] if len(value) == _DIGEST_CHARS else value


#: Characters of a base64url SHA-256 value.
_DIGEST_CHARS: Final = 43


def _grouped(pairs: Iterable[tuple[str, str]]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    # Values in order of first appearance, each with the instances that hold it; the largest group first, so
    # the odd ones out come last.
    groups: dict[str, list[str]] = {}
    for name, value in pairs:
        groups.setdefault(value, []).append(name)
    ordered = sorted(groups.items(), key=lambda item: -len(item[1]))
    return tuple((value, tuple(names)) for value, names in ordered)


def _labelled(groups: tuple[tuple[str, tuple[str, ...]], ...], prefix: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    return tuple((prefix + value, names) for value, names in groups)
