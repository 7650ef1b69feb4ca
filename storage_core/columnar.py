"""Record batches to Arrow and back, in bulk: the hot path of every read and write.

Decoding fills Arrow buffers straight from the records (no per-record Python objects) through
the native kernel ``storage_core._kernel``; :class:`PyRecordsBuilder` is the same builder in
pure Python, the reference the tests compare the kernel with and the fallback where the kernel
is not built (a one-time warning says so).

The output schema is Spark's Kafka source (``KafkaRecordToRowConverter``)::

    key binary, value binary, topic string, partition int, offset bigint,
    timestamp timestamp(us, UTC), timestampType int
    [, headers array<struct<key: string, value: binary>>]   (null when a record has none)
    [, batch metadata columns, see METADATA_FIELDS]

Encoding goes the other way: Arrow columns ``key``, ``value``, ``headers``, ``timestamp`` to
v2 record batches of bounded size.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from .compression import CompressionType
from .control import ControlRecordType
from .errors import KlogError
from .file_records import AnyBatch
from .records import (
    RECORD_BATCH_OVERHEAD,
    DefaultRecordBatch,
    Header,
    Record,
    TimestampType,
    build_batch,
    decode_record,
)

__all__ = [
    "ArrowDecoder",
    "METADATA_FIELDS",
    "PyRecordsBuilder",
    "decode_batches",
    "encode_arrow",
    "kafka_schema",
    "native_kernel",
]

HEADER_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))

BASE_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestampType", pa.int32()),
]
HEADERS_FIELD = pa.field("headers", HEADER_TYPE)

#: Batch metadata columns (opt-in): name, Arrow type.
METADATA_FIELDS = [
    pa.field("batchBaseOffset", pa.int64()),
    pa.field("batchLastOffset", pa.int64()),
    pa.field("leaderEpoch", pa.int32()),
    pa.field("producerId", pa.int64()),
    pa.field("producerEpoch", pa.int32()),
    pa.field("sequence", pa.int32()),
    pa.field("isTransactional", pa.bool_()),
    pa.field("compression", pa.string()),
    pa.field("magic", pa.int32()),
]


def kafka_schema(include_headers: bool = False, include_metadata: bool = False) -> pa.Schema:
    fields = list(BASE_FIELDS)
    if include_headers:
        fields.append(HEADERS_FIELD)
    if include_metadata:
        fields += METADATA_FIELDS
    return pa.schema(fields)


# --- the builders ---------------------------------------------------------------------------


class RecordsBuilderProtocol(Protocol):
    @property
    def num_rows(self) -> int: ...

    @property
    def nbytes(self) -> int: ...

    def add_v2(self, data: Any, count: int, base_offset: int, base_timestamp: int,
               log_append_time: int | None, min_offset: int, end_offset: int) -> int: ...

    def add_record(self, offset: int, timestamp: int, key: bytes | None, value: bytes | None,
                   headers: Sequence[tuple[str, bytes | None]] | None) -> None: ...

    def finish(self) -> dict[str, Any]: ...


class PyRecordsBuilder:
    """Pure-Python twin of ``_kernel.RecordsBuilder``: same methods, same buffers."""

    def __init__(self, with_headers: bool = False) -> None:
        self.with_headers = with_headers
        self._reset()

    def _reset(self) -> None:
        self.offsets: list[int] = []
        self.timestamps: list[int] = []
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.headers: list[list[dict[str, Any]] | None] = []

    @property
    def num_rows(self) -> int:
        return len(self.offsets)

    @property
    def nbytes(self) -> int:
        return sum(len(v) for v in self.values if v) + sum(len(k) for k in self.keys if k) + 16 * len(self.offsets)

    def add_v2(self, data: Any, count: int, base_offset: int, base_timestamp: int,
               log_append_time: int | None, min_offset: int, end_offset: int) -> int:
        from .errors import InvalidRecordError

        view = memoryview(data)
        if count < 0:
            raise InvalidRecordError(f"Found invalid record count {count} in magic v2 batch")
        if count > len(view):
            raise InvalidRecordError(f"Found invalid record count {count} in magic v2 batch: only "
                                     f"{len(view)} bytes of records")
        pos = 0
        decoded = []
        for _ in range(count):
            rec, pos = decode_record(view, pos, base_offset, base_timestamp, -1, log_append_time)
            decoded.append(rec)
        if pos != len(view):
            raise InvalidRecordError("Incorrect declared batch size, records still remaining in file")
        appended = 0
        for rec in decoded:
            if min_offset <= rec.offset < end_offset:
                self.add_record(rec.offset, rec.timestamp, rec.key, rec.value,
                                [(h.key, h.value) for h in rec.headers])
                appended += 1
        return appended

    def add_record(self, offset: int, timestamp: int, key: bytes | None, value: bytes | None,
                   headers: Sequence[tuple[str, bytes | None]] | None) -> None:
        self.offsets.append(offset)
        self.timestamps.append(timestamp)
        self.keys.append(None if key is None else bytes(key))
        self.values.append(None if value is None else bytes(value))
        if self.with_headers:
            self.headers.append([{"key": k, "value": v} for k, v in headers] if headers else None)

    def finish(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "n": len(self.offsets),
            "offsets_array": pa.array(self.offsets, pa.int64()),
            "timestamps_array": pa.array(self.timestamps, pa.int64()),
            "key_array": pa.array(self.keys, pa.binary()),
            "value_array": pa.array(self.values, pa.binary()),
        }
        if self.with_headers:
            out["headers_array"] = pa.array(self.headers, HEADER_TYPE)
        self._reset()
        return out


_KERNEL_WARNED = False


def native_kernel() -> Any | None:
    """The native kernel module, or None (with a one-time warning) where it is not built.

    ``KLOG_PURE_PYTHON=1`` forces the pure-Python path.
    """
    global _KERNEL_WARNED
    if os.environ.get("KLOG_PURE_PYTHON") == "1":
        return None
    try:
        from . import _kernel  # type: ignore[attr-defined]
    except ImportError as exc:
        if not _KERNEL_WARNED:
            _KERNEL_WARNED = True
            warnings.warn(f"klog's native kernel is unavailable ({exc}); using the pure-Python decoder, "
                          "which is much slower. Reinstall with a C compiler to build it.",
                          RuntimeWarning, stacklevel=2)
        return None
    return _kernel


def new_builder(with_headers: bool, native: bool | None = None) -> RecordsBuilderProtocol:
    """A records builder: the kernel's unless ``native`` is False or the kernel is missing."""
    kernel = native_kernel() if native is not False else None
    if native and kernel is None:
        raise KlogError("the native kernel was requested but is not available")
    if kernel is not None:
        return kernel.RecordsBuilder(with_headers)  # type: ignore[no-any-return]
    return PyRecordsBuilder(with_headers)


def _arrays_from_buffers(parts: dict[str, Any], with_headers: bool) -> dict[str, pa.Array]:
    """Turn a builder's finished buffers into Arrow arrays (no copies for the kernel's)."""
    if "offsets_array" in parts:  # PyRecordsBuilder
        arrays = {
            "offset": parts["offsets_array"],
            "ts_ms": parts["timestamps_array"],
            "key": parts["key_array"],
            "value": parts["value_array"],
        }
        if with_headers:
            arrays["headers"] = parts["headers_array"]
        return arrays
    n = parts["n"]
    buf = pa.py_buffer
    arrays = {
        "offset": pa.Array.from_buffers(pa.int64(), n, [None, buf(parts["offsets"])]),
        "ts_ms": pa.Array.from_buffers(pa.int64(), n, [None, buf(parts["timestamps"])]),
        "key": pa.Array.from_buffers(pa.binary(), n,
                                     [buf(parts["key_valid"]), buf(parts["key_offsets"]), buf(parts["key_data"])]),
        "value": pa.Array.from_buffers(pa.binary(), n, [buf(parts["value_valid"]), buf(parts["value_offsets"]),
                                                        buf(parts["value_data"])]),
    }
    if with_headers:
        nh = parts["nh"]
        hk = pa.Array.from_buffers(pa.string(), nh, [None, buf(parts["hk_offsets"]), buf(parts["hk_data"])])
        hv = pa.Array.from_buffers(pa.binary(), nh, [buf(parts["hv_valid"]), buf(parts["hv_offsets"]),
                                                     buf(parts["hv_data"])])
        entries = pa.StructArray.from_arrays([hk, hv], fields=list(HEADER_TYPE.value_type))
        arrays["headers"] = pa.Array.from_buffers(HEADER_TYPE, n, [buf(parts["hdr_valid"]), buf(parts["hdr_offsets"])],
                                                  children=[entries])
    return arrays


# --- decoding ---------------------------------------------------------------------------------

_I64_MIN = -(1 << 63)
_I64_MAX = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class _BatchMeta:
    base_offset: int
    last_offset: int
    leader_epoch: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    is_transactional: bool
    compression: str
    magic: int
    timestamp_type: int


class ArrowDecoder:
    """Accumulates the records of many batches and emits ``pyarrow.RecordBatch``es.

    Control batches are skipped (consumers never see them); records outside
    ``[min_offset, end_offset)`` are dropped. Call :meth:`add` per batch (CRC checked by the
    caller or with ``verify=True``), then :meth:`finish`.
    """

    def __init__(self, topic: str, partition: int, *, include_headers: bool = False,
                 include_metadata: bool = False, native: bool | None = None) -> None:
        self.topic = topic
        self.partition = partition
        self.include_headers = include_headers
        self.include_metadata = include_metadata
        self.schema = kafka_schema(include_headers, include_metadata)
        self._builder = new_builder(include_headers, native)
        self._metas: list[_BatchMeta] = []
        self._counts: list[int] = []
        self._ts_types: list[int] = []

    @property
    def num_rows(self) -> int:
        return self._builder.num_rows

    @property
    def nbytes(self) -> int:
        return self._builder.nbytes

    def add(self, batch: AnyBatch, *, min_offset: int = _I64_MIN, end_offset: int = _I64_MAX,
            verify: bool = True) -> int:
        """Decode one batch into the buffers; returns how many records were kept."""
        if verify:
            batch.ensure_valid()
        if batch.is_control:
            return 0
        if isinstance(batch, DefaultRecordBatch):
            if batch.last_offset < min_offset or batch.base_offset >= end_offset:
                return 0
            payload = batch.records_payload()
            lat = batch.max_timestamp if batch.timestamp_type == TimestampType.LOG_APPEND_TIME else None
            try:
                n = self._builder.add_v2(payload, batch.records_count, batch.base_offset, batch.base_timestamp,
                                         lat, min_offset, end_offset)
            except KlogError as exc:
                exc.located(path=batch.path, position=batch.position)
                raise
        else:
            n = 0
            for rec in batch.records():
                if min_offset <= rec.offset < end_offset:
                    self._builder.add_record(rec.offset, rec.timestamp, rec.key, rec.value, None)
                    n += 1
        if n:
            self._counts.append(n)
            self._ts_types.append(int(batch.timestamp_type))
            if self.include_metadata:
                self._metas.append(_BatchMeta(
                    batch.base_offset, batch.last_offset, batch.partition_leader_epoch, batch.producer_id,
                    batch.producer_epoch, batch.base_sequence, batch.is_transactional, batch.compression.label,
                    batch.magic, int(batch.timestamp_type)))
        return n

    def finish(self) -> pa.RecordBatch:
        """Everything added since the last finish, as one RecordBatch in :attr:`schema`."""
        parts = self._builder.finish()
        n = int(parts["n"])
        arrays = _arrays_from_buffers(parts, self.include_headers)
        counts = np.asarray(self._counts, dtype=np.int64)
        ts_us = np.frombuffer(arrays["ts_ms"].buffers()[1], dtype=np.int64, count=n) * 1000
        columns: list[pa.Array] = [
            arrays["key"],
            arrays["value"],
            pa.repeat(pa.scalar(self.topic, pa.string()), n) if n else pa.array([], pa.string()),
            pa.repeat(pa.scalar(self.partition, pa.int32()), n) if n else pa.array([], pa.int32()),
            arrays["offset"],
            pa.Array.from_buffers(pa.timestamp("us", tz="UTC"), n, [None, pa.py_buffer(ts_us)]),
            pa.array(np.repeat(np.asarray(self._ts_types, dtype=np.int32), counts), pa.int32()),
        ]
        if self.include_headers:
            columns.append(arrays["headers"])
        if self.include_metadata:
            columns += self._metadata_columns(counts, arrays["offset"])
        self._metas.clear()
        self._counts.clear()
        self._ts_types.clear()
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)

    def _metadata_columns(self, counts: np.ndarray, offsets: pa.Array) -> list[pa.Array]:
        m = self._metas

        def rep(values: list[Any], dtype: Any) -> np.ndarray:
            return np.repeat(np.asarray(values, dtype=dtype), counts)

        base = rep([b.base_offset for b in m], np.int64)
        seq_base = rep([b.base_sequence for b in m], np.int64)
        off = offsets.to_numpy(zero_copy_only=False)
        seq = np.where(seq_base >= 0, (seq_base + (off - base)) % (1 << 31), -1).astype(np.int32)
        codecs = pa.array([b.compression for b in m], pa.string())
        return [
            pa.array(base, pa.int64()),
            pa.array(rep([b.last_offset for b in m], np.int64), pa.int64()),
            pa.array(rep([b.leader_epoch for b in m], np.int32), pa.int32()),
            pa.array(rep([b.producer_id for b in m], np.int64), pa.int64()),
            pa.array(rep([b.producer_epoch for b in m], np.int32), pa.int32()),
            pa.array(seq, pa.int32()),
            pa.array(rep([b.is_transactional for b in m], np.bool_), pa.bool_()),
            codecs.take(pa.array(np.repeat(np.arange(len(m), dtype=np.int64), counts))),
            pa.array(rep([b.magic for b in m], np.int32), pa.int32()),
        ]


def decode_batches(batches: Iterable[AnyBatch], topic: str = "", partition: int = 0, *,
                   include_headers: bool = False, include_metadata: bool = False,
                   min_offset: int = _I64_MIN, end_offset: int = _I64_MAX,
                   native: bool | None = None, verify: bool = True) -> pa.RecordBatch:
    """Decode a run of batches into one RecordBatch (control records left out)."""
    dec = ArrowDecoder(topic, partition, include_headers=include_headers, include_metadata=include_metadata,
                       native=native)
    for b in batches:
        dec.add(b, min_offset=min_offset, end_offset=end_offset, verify=verify)
    return dec.finish()


# --- encoding ---------------------------------------------------------------------------------

#: Default bound on one encoded batch (records area before compression).
DEFAULT_BATCH_BYTES = 1 << 20


def _column(table: pa.RecordBatch | pa.Table, name: str) -> pa.Array | None:
    if name not in table.column_names:
        return None
    col = table.column(name)
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    return col


def encode_arrow(
    table: pa.RecordBatch | pa.Table,
    *,
    base_offset: int = 0,
    compression: CompressionType = CompressionType.NONE,
    compression_level: int | None = None,
    max_batch_bytes: int = DEFAULT_BATCH_BYTES,
    default_timestamp_ms: int | None = None,
    partition_leader_epoch: int = -1,
) -> list[bytes]:
    """Encode Arrow rows (``key``, ``value``, optional ``headers`` and ``timestamp``) as v2 batches.

    Offsets run from ``base_offset`` up; a batch is cut when its records area would pass
    ``max_batch_bytes``. ``timestamp`` may be ``timestamp[*]`` or int64 milliseconds; missing
    or null timestamps take ``default_timestamp_ms``.
    """
    n = table.num_rows
    keys = _column(table, "key")
    values = _column(table, "value")
    if values is None:
        raise KlogError("encode_arrow needs a 'value' column")
    headers = _column(table, "headers")
    ts_col = _column(table, "timestamp")
    if ts_col is not None and pa.types.is_timestamp(ts_col.type):
        ts_col = ts_col.cast(pa.timestamp("ms", tz=ts_col.type.tz)).cast(pa.int64())
    ts_list = ts_col.to_pylist() if ts_col is not None else [None] * n
    key_list = keys.to_pylist() if keys is not None else [None] * n
    value_list = values.to_pylist()
    hdr_list = headers.to_pylist() if headers is not None else [None] * n
    out: list[bytes] = []
    pending: list[Record] = []
    pending_bytes = 0
    offset = base_offset
    for i in range(n):
        ts = ts_list[i]
        if ts is None:
            if default_timestamp_ms is None:
                raise KlogError(f"row {i} has no timestamp and no default_timestamp_ms was given")
            ts = default_timestamp_ms
        k = key_list[i]
        v = value_list[i]
        if isinstance(k, str):
            k = k.encode()
        if isinstance(v, str):
            v = v.encode()
        row_headers = hdr_list[i]
        hs = tuple(Header(h["key"], h["value"]) for h in row_headers) if row_headers else ()
        size = 24 + (len(k) if k else 0) + (len(v) if v else 0) + sum(8 + len(h.key) + len(h.value or b"") for h in hs)
        if pending and pending_bytes + size > max_batch_bytes - RECORD_BATCH_OVERHEAD:
            out.append(build_batch(pending, compression=compression, compression_level=compression_level,
                                   partition_leader_epoch=partition_leader_epoch))
            pending = []
            pending_bytes = 0
        pending.append(Record(offset, int(ts), k, v, hs))
        pending_bytes += size
        offset += 1
    if pending:
        out.append(build_batch(pending, compression=compression, compression_level=compression_level,
                               partition_leader_epoch=partition_leader_epoch))
    return out


def records_of(batch: AnyBatch) -> list[tuple[Record, ControlRecordType | None]]:
    """Per-record view with the control type (for tools): ``(record, control type or None)``."""
    recs = batch.records()
    if batch.is_control:
        return [(r, ControlRecordType.parse(r.key)) for r in recs]
    return [(r, None) for r in recs]

