"""Fleet operations: read every instance's admin snapshot concurrently and tell whether the fleet converged.

>>> from soklet_core.fleet import AdminTarget, compare_fleet, read_snapshots   # doctest: +SKIP
>>> readings = await read_snapshots([AdminTarget("a", "http://127.0.0.1:9001", token)])   # doctest: +SKIP
>>> compare_fleet(readings).status   # doctest: +SKIP
<FleetStatus.CONVERGED: 'converged'>
"""

from soklet_core.mcp.server.admin_snapshot import (
    ADMIN_SNAPSHOT_PATH,
    MAX_PROCESS_ID_CHARS,
    MAX_SNAPSHOT_BYTES,
    MAX_SNAPSHOT_KEYS,
    MIN_PROCESS_ID_CHARS,
    AdminKey,
    AdminSnapshot,
    KeyRoleName,
    SnapshotError,
    parse_admin_snapshot,
)

from .client import (
    MAX_CA_FILE_BYTES,
    MAX_CONCURRENT_READS,
    MAX_RESOLVED_ADDRESSES,
    AdminTarget,
    ChangeOutcome,
    InstanceReading,
    apply_changes,
    read_snapshots,
    resolve_targets,
)
from .compare import (
    MAX_EXPECT_CHARS,
    Difference,
    DifferenceKind,
    Duplicate,
    FleetReport,
    FleetStatus,
    SharedName,
    compare_fleet,
    parse_expected_fingerprint,
)
from .rotation import (
    MAX_RECORD_BYTES,
    RECORD_FORMAT,
    RECORD_SUFFIX,
    WAIT_POLL_SECONDS,
    RecordError,
    RecordMismatch,
    RotationAbort,
    RotationRecord,
    RotationStep,
    default_record_path,
    read_record,
    rotate_fleet,
    rotation_refusal,
    write_record,
)
from .tokens import read_admin_token

__all__ = [
    "ADMIN_SNAPSHOT_PATH",
    "MAX_CA_FILE_BYTES",
    "MAX_CONCURRENT_READS",
    "MAX_EXPECT_CHARS",
    "MAX_PROCESS_ID_CHARS",
    "MAX_RECORD_BYTES",
    "MAX_RESOLVED_ADDRESSES",
    "MAX_SNAPSHOT_BYTES",
    "MAX_SNAPSHOT_KEYS",
    "MIN_PROCESS_ID_CHARS",
    "RECORD_FORMAT",
    "RECORD_SUFFIX",
    "WAIT_POLL_SECONDS",
    "AdminKey",
    "AdminSnapshot",
    "AdminTarget",
    "ChangeOutcome",
    "Difference",
    "DifferenceKind",
    "Duplicate",
    "FleetReport",
    "FleetStatus",
    "InstanceReading",
    "KeyRoleName",
    "RecordError",
    "RecordMismatch",
    "RotationAbort",
    "RotationRecord",
    "RotationStep",
    "SharedName",
    "SnapshotError",
    "apply_changes",
    "compare_fleet",
    "default_record_path",
    "parse_admin_snapshot",
    "parse_expected_fingerprint",
    "read_admin_token",
    "read_record",
    "read_snapshots",
    "resolve_targets",
    "rotate_fleet",
    "rotation_refusal",
    "write_record",
]
