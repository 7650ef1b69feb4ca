"""storage_core: Apache Kafka's log storage format, read and written in Python.

No Spark in here. Layers, bottom up: :mod:`errors`, :mod:`varint`, :mod:`compression`,
:mod:`records` / :mod:`legacy_records` / :mod:`control` (batch formats), :mod:`file_records`
(walking a ``.log``), :mod:`columnar` (batches to and from Arrow, the hot path).
"""

from __future__ import annotations

from .compression import CompressionType
from .errors import (
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
from .records import Header, Record, TimestampType

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    """The read API (``read_arrow``, ``plan``), imported on first use: it pulls in the log layer."""
    if name in ("read_arrow", "plan"):
        from . import read

        return getattr(read, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
    "plan",
    "read_arrow",
]
