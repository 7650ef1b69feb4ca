"""storage_core: Apache Kafka's log storage format, read and written in Python.

No Spark in here. Layers, bottom up: :mod:`errors`, :mod:`varint`, :mod:`compression`,
:mod:`records` / :mod:`legacy_records` / :mod:`control` (batch formats), :mod:`file_records`
(walking a ``.log``), :mod:`columnar` (batches to and from Arrow, the hot path).
"""

from __future__ import annotations

from storage_core.errors import (
    CompressionError,
    CorruptIndexError,
    CorruptRecordError,
    InvalidOptionError,
    InvalidRecordError,
    KlogError,
    LogConfigError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    UnsupportedCodecError,
)
from storage_core.record.compression import CompressionType
from storage_core.record.records import Header, Record, TimestampType

__version__ = "0.1.0"

__all__ = [
    "CompressionError",
    "CompressionType",
    "CorruptIndexError",
    "CorruptRecordError",
    "Header",
    "InvalidOptionError",
    "InvalidRecordError",
    "KlogError",
    "LogConfigError",
    "OffsetOutOfRangeError",
    "Record",
    "RecordTooLargeError",
    "TimestampType",
    "UnsupportedCodecError",
]
