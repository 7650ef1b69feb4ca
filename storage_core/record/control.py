"""Control records (``ControlRecordType.java``, ``EndTransactionMarker.java``).

A control batch has attribute bit 5 set and carries exactly one record whose

* key   = ``int16 version (0)``, ``int16 type``  (:data:`CONTROL_KEY`)
* value = for ABORT/COMMIT: ``int16 version (0)``, ``int32 coordinatorEpoch`` (:data:`END_TXN_VALUE`);
  for the KRaft types an opaque message that klog does not interpret.

Consumers never see control records.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from storage_core.errors import InvalidRecordError

#: Control record key: int16 version, int16 type.
CONTROL_KEY = struct.Struct(">hh")
#: ABORT/COMMIT value: int16 version, int32 coordinator epoch.
END_TXN_VALUE = struct.Struct(">hi")
CONTROL_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0


class ControlRecordType(enum.IntEnum):
    """The type in a control record's key; anything unknown parses as :attr:`UNKNOWN`."""

    UNKNOWN = -1
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6

    @classmethod
    def parse(cls, key: bytes | None) -> ControlRecordType:
        """``ControlRecordType.parse``: read the type from a control record's key."""
        if key is None or len(key) < CONTROL_KEY.size:
            raise InvalidRecordError(
                f"Invalid control record key: expected at least {CONTROL_KEY.size} bytes, "
                f"found {'null' if key is None else len(key)}")
        version, type_id = CONTROL_KEY.unpack_from(key)
        if version < 0:
            raise InvalidRecordError(f"Invalid version found for control record: {version}")
        try:
            return cls(type_id)
        except ValueError:
            return cls.UNKNOWN

    def key_bytes(self) -> bytes:
        return CONTROL_KEY.pack(CONTROL_KEY_VERSION, int(self))


@dataclass(frozen=True, slots=True)
class EndTransactionMarker:
    """The value of an ABORT or COMMIT control record."""

    type: ControlRecordType
    coordinator_epoch: int

    def __post_init__(self) -> None:
        if self.type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            raise ValueError(f"Invalid control record type for end transaction marker: {self.type.name}; "
                             "expected ABORT or COMMIT")

    def value_bytes(self) -> bytes:
        return END_TXN_VALUE.pack(END_TXN_MARKER_VERSION, self.coordinator_epoch)

    @classmethod
    def deserialize(cls, key: bytes | None, value: bytes | None) -> EndTransactionMarker:
        kind = ControlRecordType.parse(key)
        if kind not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            raise InvalidRecordError(f"Invalid control record type for end transaction marker: {kind.name}")
        if value is None or len(value) < END_TXN_VALUE.size:
            raise InvalidRecordError("Invalid end transaction marker value: expected "
                                     f"{END_TXN_VALUE.size} bytes, found {'null' if value is None else len(value)}")
        _version, epoch = END_TXN_VALUE.unpack_from(value)
        return cls(kind, epoch)
