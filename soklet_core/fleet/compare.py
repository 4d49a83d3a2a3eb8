"""Fleet convergence: are the readings of every instance the same keyring, and if not, exactly how they differ.

The verdict, in order of precedence: **unreachable** (an instance gave no valid snapshot), **incomparable**
(fingerprints of different versions, compared with :meth:`Fingerprint.compare`), **diverged** (a key-level
difference, different fingerprints, or not the ``expect``-ed fingerprint), **duplicated** (all agree, but
several listings report one instance), else **converged**. The differences are listed whatever the verdict,
from the instances that answered: a different active key, a key missing on some instances, and the same key id
holding other bytes (other check values) on some instances.

An instance is identified by what its snapshot says, not by how it was listed: by its ``process_id`` (the random
identity each serving process makes at start), or, from an older build that reports none, by its ``instance``
name. Listings (URLs, fleet-file names, addresses) that report one identity are one instance listed several
times: the check covers fewer instances than it lists, so they are named as :class:`Duplicate` whatever the
verdict, and a fleet that would otherwise be converged is **duplicated** ("converged" must mean that every
instance meant was seen). Distinct instances that report one name (such as the default ``soklet``) are each
seen, so the verdict stands; they are named as :class:`SharedName`, a warning, because logs, metrics and the
admin audit name instances by that name and cannot tell them apart.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from soklet_core.keys import (
    CURRENT_FINGERPRINT_VERSION,
    PROTECTION_PROFILE,
    Fingerprint,
    FingerprintComparison,
    KeyringError,
    printable_name,
)
from soklet_core.mcp.server.ops._snapshot import AdminSnapshot

from .client import InstanceReading
from .clock import ClockSkew, fleet_skew

__all__ = [
    "MAX_EXPECT_CHARS",
    "Difference",
    "DifferenceKind",
    "Duplicate",
    "FleetReport",
    "FleetStatus",
    "SharedName",
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
    #: Every instance agrees, but several listings report one instance (see :class:`Duplicate`).
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
    #: Members' clocks proven further apart than ``max_skew_ms`` (see :mod:`soklet_core.fleet.clock`).
    CLOCK_SKEW = "clock-skew"


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
        if self.kind is DifferenceKind.CLOCK_SKEW:
            return f"clocks differ by more than the largest skew allowed (offsets {groups})"
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
    """Listings whose snapshots report one instance: ``instance`` is its reported name, ``names`` the listings',
    ``process_id`` its process identity (``None``: an older build, identified by its name alone)."""

    instance: str
    names: tuple[str, ...]
    process_id: str | None = None

    def describe(self) -> str:
        """One line for people: which listings point to one instance, and what to do."""
        names = ", ".join(printable_name(name) for name in self.names)
        if self.process_id is not None:
            return (
                f"{names} report one instance, {printable_name(self.instance)} (the same process): one instance "
                f"listed {len(self.names)} times (list it once)"
            )
        return (
            f"{names} report one instance, {printable_name(self.instance)}: one instance listed "
            f"{len(self.names)} times, or instances sharing a name (give each its own --instance)"
        )

    def to_json(self) -> dict[str, Any]:
        """The duplicate as a JSON-ready document."""
        return {"instance": self.instance, "process_id": self.process_id, "names": list(self.names)}


@dataclass(frozen=True, slots=True)
class SharedName:
    """Distinct instances (other process identities) that report one name: ``instance`` is that name, ``names``
    the listings reporting it and ``instances`` how many instances they are. A warning, not a verdict."""

    instance: str
    names: tuple[str, ...]
    instances: int

    def describe(self) -> str:
        """One line for people: which instances share a name, and why it matters."""
        names = ", ".join(printable_name(name) for name in self.names)
        return (
            f"{names} are {self.instances} instances reporting one name, {printable_name(self.instance)}: logs, "
            "metrics and the admin audit cannot tell them apart (give each its own --instance)"
        )

    def to_json(self) -> dict[str, Any]:
        """The shared name as a JSON-ready document."""
        return {"instance": self.instance, "names": list(self.names), "instances": self.instances}


@dataclass(frozen=True, slots=True)
class FleetReport:
    """The readings, the verdict, the differences, the duplicated listings and the shared names of one check."""

    status: FleetStatus
    readings: tuple[InstanceReading, ...]
    differences: tuple[Difference, ...]
    expected: Fingerprint | None = None
    duplicates: tuple[Duplicate, ...] = ()
    shared_names: tuple[SharedName, ...] = ()
    skew: ClockSkew = field(default_factory=ClockSkew)
    max_skew_ms: int | None = None

    @property
    def fingerprint(self) -> Fingerprint | None:
        """The fleet's fingerprint when it converged, else ``None``."""
        first = self.readings[0].snapshot if self.readings else None
        if self.status is not FleetStatus.CONVERGED or first is None:
            return None
        return first.fingerprint

    @property
    def unreachable(self) -> tuple[InstanceReading, ...]:
        """The readings without a snapshot."""
        return tuple(reading for reading in self.readings if not reading.reachable)

    @property
    def instance_count(self) -> int:
        """How many instances the readings are: one per reported identity, plus each listing that did not answer."""
        answered = {_identity(reading.snapshot) for reading in self.readings if reading.snapshot is not None}
        return len(answered) + len(self.unreachable)


def _identity(snapshot: AdminSnapshot) -> tuple[str, str]:
    # What tells instances apart: the process identity, or the name from an older build that reports none. The
    # tag keeps a name from ever equalling an identity.
    if snapshot.process_id is not None:
        return ("process", snapshot.process_id)
    return ("name", snapshot.instance)


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


def compare_fleet(
    readings: Sequence[InstanceReading], *, expect: Fingerprint | None = None, max_skew_ms: int | None = None
) -> FleetReport:
    """The verdict and differences of ``readings`` (and against ``expect`` when given). With ``max_skew_ms``, a
    skew between members' clocks proven above it (:attr:`ClockSkew.lower_ms`) is a difference of kind
    ``clock-skew`` and makes the fleet diverged: an expiry is judged on another instance's clock."""
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
    skew = fleet_skew(
        [(reading.name, reading.clock) for reading in readings if reading.snapshot is not None and reading.clock]
    )
    if max_skew_ms is not None and skew.lower_ms > max_skew_ms:
        diverged = True
        offsets = [
            (reading.name, f"{reading.clock.offset_ms / 1000:+.1f} s")
            for reading in readings
            if reading.snapshot is not None and reading.clock and reading.name in (skew.behind, skew.ahead)
        ]
        differences.append(Difference(DifferenceKind.CLOCK_SKEW, None, _grouped(offsets)))
    duplicates, shared_names = _duplicates(readings)
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
    return FleetReport(status, tuple(readings), tuple(differences), expect, duplicates, shared_names, skew, max_skew_ms)


def _duplicates(readings: Sequence[InstanceReading]) -> tuple[tuple[Duplicate, ...], tuple[SharedName, ...]]:
    # Listings grouped by the identity their snapshots report, and by the name, in order of first appearance:
    # an identity listed twice is a duplicate; a name reported by two identities is shared.
    by_identity: dict[tuple[str, str], list[str]] = {}
    reported: dict[tuple[str, str], AdminSnapshot] = {}
    by_name: dict[str, list[str]] = {}
    identities: dict[str, set[tuple[str, str]]] = {}
    for reading in readings:
        snapshot = reading.snapshot
        if snapshot is None:
            continue
        identity = _identity(snapshot)
        by_identity.setdefault(identity, []).append(reading.name)
        reported.setdefault(identity, snapshot)
        by_name.setdefault(snapshot.instance, []).append(reading.name)
        identities.setdefault(snapshot.instance, set()).add(identity)
    duplicates = tuple(
        Duplicate(reported[identity].instance, tuple(names), reported[identity].process_id)
        for identity, names in by_identity.items()
        if len(names) > 1
    )
    shared = tuple(
        SharedName(name, tuple(names), len(identities[name]))
        for name, names in by_name.items()
        if len(identities[name]) > 1
    )
    return duplicates, shared


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
