"""Record batches to Arrow and back, in bulk: the hot path of every read and write.

Decoding fills Arrow buffers straight from the records (no per-record Python objects) through
the native kernel ``storage_core.record._kernel``; :class:`PyRecordsBuilder` is the same builder in
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

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pyarrow as pa

from storage_core.errors import KlogError
from storage_core.limits import INT32_MAX
from storage_core.limits import INT64_MAX as _I64_MAX
from storage_core.limits import INT64_MIN as _I64_MIN
from storage_core.record.compression import CompressionType, compress, v2_decompressors
from storage_core.record.control import ControlRecordType
from storage_core.record.file_records import AnyBatch
from storage_core.record.kernel import native_kernel
from storage_core.record.records import (
    COMPRESSION_CODEC_MASK,
    RECORD_BATCH_OVERHEAD,
    TRANSACTIONAL_FLAG_MASK,
    DefaultRecordBatch,
    Header,
    Record,
    TimestampType,
    batch_attributes,
    decode_record,
    encode_record,
    wrap_int64,
    write_batch_header,
)
from storage_core.record.text import java_utf8

if TYPE_CHECKING:
    from storage_core.record.txn_filter import TxnFilter

__all__ = [
    "ArrowDecoder",
    "EncodeBuffer",
    "METADATA_FIELDS",
    "PyRecordsBuilder",
    "RowSelection",
    "RowsEncoder",
    "decode_batches",
    "encode_arrow",
    "kafka_schema",
    "native_kernel",
]

HEADER_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))

#: The timestamp column's type (Spark's TimestampType); the builders write their timestamp buffers in it.
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")

BASE_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", TIMESTAMP_TYPE),
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


def _check_timestamp(offset: int, timestamp: int) -> None:
    if not -_MAX_MS <= timestamp <= _MAX_MS:
        from storage_core.errors import InvalidRecordError

        raise InvalidRecordError(f"Record at offset {offset} has timestamp {timestamp} ms, outside what a microsecond "
                                 "timestamp can hold (Spark's Kafka source fails here too)")


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
        from storage_core.errors import InvalidRecordError

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
        for rec in decoded:
            if min_offset <= rec.offset < end_offset:
                _check_timestamp(rec.offset, rec.timestamp)
        appended = 0
        for rec in decoded:
            if min_offset <= rec.offset < end_offset:
                self.add_record(rec.offset, rec.timestamp, rec.key, rec.value,
                                [(h.key, h.value) for h in rec.headers])
                appended += 1
        return appended

    def add_record(self, offset: int, timestamp: int, key: bytes | None, value: bytes | None,
                   headers: Sequence[tuple[str, bytes | None]] | None) -> None:
        _check_timestamp(offset, timestamp)
        self.offsets.append(offset)
        self.timestamps.append(timestamp * 1000)  # microseconds, as the kernel's buffer
        self.keys.append(None if key is None else bytes(key))
        self.values.append(None if value is None else bytes(value))
        if self.with_headers:
            self.headers.append([{"key": k, "value": v} for k, v in headers] if headers else None)

    def finish(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "n": len(self.offsets),
            "offsets_array": pa.array(self.offsets, pa.int64()),
            "timestamps_array": pa.array(self.timestamps, TIMESTAMP_TYPE),
            "key_array": pa.array(self.keys, pa.binary()),
            "value_array": pa.array(self.values, pa.binary()),
        }
        if self.with_headers:
            out["headers_array"] = pa.array(self.headers, HEADER_TYPE)
        self._reset()
        return out


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
            "ts_us": parts["timestamps_array"],
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
        "ts_us": pa.Array.from_buffers(TIMESTAMP_TYPE, n, [None, buf(parts["timestamps"])]),
        "key": pa.Array.from_buffers(pa.binary(), n,
                                     [buf(parts["key_valid"]), buf(parts["key_offsets"]), buf(parts["key_data"])]),
        "value": pa.Array.from_buffers(pa.binary(), n, [buf(parts["value_valid"]), buf(parts["value_offsets"]),
                                                        buf(parts["value_data"])]),
    }
    if with_headers:
        nh = parts["nh"]
        hk = pa.Array.from_buffers(pa.string(), nh, [None, buf(parts["hk_offsets"]), buf(parts["hk_data"])])
        try:
            hk.validate(full=True)
        except pa.ArrowInvalid:
            # Kafka decodes header keys as Java decodes UTF-8, malformed bytes replaced; so does the Python twin
            raw = pa.Array.from_buffers(pa.binary(), nh, [None, buf(parts["hk_offsets"]), buf(parts["hk_data"])])
            hk = pa.array([java_utf8(b) for b in raw.to_pylist()], pa.string())
        hv = pa.Array.from_buffers(pa.binary(), nh, [buf(parts["hv_valid"]), buf(parts["hv_offsets"]),
                                                     buf(parts["hv_data"])])
        entries = pa.StructArray.from_arrays([hk, hv], fields=list(HEADER_TYPE.value_type))
        arrays["headers"] = pa.Array.from_buffers(HEADER_TYPE, n, [buf(parts["hdr_valid"]), buf(parts["hdr_offsets"])],
                                                  children=[entries])
    return arrays


# --- decoding ---------------------------------------------------------------------------------

#: The largest |timestamp| in ms whose microseconds fit an int64.
_MAX_MS = _I64_MAX // 1000


#: One row per batch that added records (the kernel's ``BatchInfo``, storage_core/record/_kernel_src/decode.c).
BATCH_INFO_DTYPE = np.dtype([
    ("base_offset", "<i8"),
    ("last_offset", "<i8"),
    ("producer_id", "<i8"),
    ("count", "<i4"),           # records added from the batch
    ("leader_epoch", "<i4"),
    ("base_sequence", "<i4"),
    ("producer_epoch", "<i2"),
    ("attributes", "<i2"),      # v2 attributes (codec, transactional); the codec for legacy batches
    ("magic", "i1"),
    ("timestamp_type", "i1"),
    ("pad", "V6"),
])
assert BATCH_INFO_DTYPE.itemsize == 48

#: Why :meth:`ArrowDecoder.add_run` stopped (the kernel's RUN_* codes).
RUN_END = 0
RUN_SHORT = 1
RUN_SLOW_PATH = 2
RUN_FULL = 3

_CODEC_LABELS = np.array([c.label for c in sorted(CompressionType, key=int)], dtype=object)
#: The codecs, for the kernel's bulk decoder: codec id → function of a records area.
_KERNEL_DECOMPRESSORS = v2_decompressors()


def _info_row(batch: AnyBatch, count: int) -> np.ndarray:
    row = np.zeros(1, BATCH_INFO_DTYPE)
    row[0]["base_offset"] = batch.base_offset
    row[0]["last_offset"] = batch.last_offset
    row[0]["producer_id"] = batch.producer_id
    row[0]["count"] = count
    row[0]["leader_epoch"] = batch.partition_leader_epoch
    row[0]["base_sequence"] = batch.base_sequence
    row[0]["producer_epoch"] = batch.producer_epoch
    row[0]["attributes"] = batch.attributes if batch.magic >= 2 else int(batch.compression)
    row[0]["magic"] = batch.magic
    row[0]["timestamp_type"] = int(batch.timestamp_type)
    return row


def _repeated_string(text: str, n: int) -> pa.Array:
    """``n`` times ``text`` as a string array, built from its buffers (``pa.repeat`` of a string
    scalar costs about 30 ns a row, ten times this)."""
    data = text.encode()
    if n * len(data) > INT32_MAX:
        return pa.repeat(pa.scalar(text, pa.string()), n)
    offsets = np.arange(n + 1, dtype=np.int32) * np.int32(len(data))
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data * n)])


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
        self._run = getattr(self._builder, "add_v2_run", None)  # the kernel's bulk path, if any
        self._infos: list[np.ndarray] = []

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
            kept = [r for r in batch.records() if min_offset <= r.offset < end_offset]
            try:
                for rec in kept:
                    _check_timestamp(rec.offset, rec.timestamp)
            except KlogError as exc:
                exc.located(path=batch.path, position=batch.position)
                raise
            for rec in kept:
                self._builder.add_record(rec.offset, rec.timestamp, rec.key, rec.value, None)
            n = len(kept)
        if n:
            self._infos.append(_info_row(batch, n))
        return n

    def add_run(self, data: bytes | bytearray | memoryview, *, min_offset: int = _I64_MIN,
                end_offset: int = _I64_MAX, verify: bool = True, max_bytes: int | None = None,
                txn: TxnFilter | None = None) -> tuple[int, int]:
        """Decode the whole v2 batches at the start of ``data`` in one kernel call.

        The same as :meth:`add` on each batch in turn, for as many batches as the kernel can
        take: it stops before a batch that is cut off (``RUN_SHORT``) or that needs the object
        path (``RUN_SLOW_PATH``: a legacy batch, a bad header or CRC, a record the kernel
        refuses, a codec error), leaving it untouched so that :meth:`add` can decode it or raise
        its error with file and position; with ``max_bytes`` also before a batch once the decoder
        holds that many bytes (``RUN_FULL``: :meth:`finish`, then go on). Returns (bytes consumed,
        why it stopped). Without the kernel nothing is consumed and the answer is ``RUN_SLOW_PATH``.

        With ``txn`` (read_committed) every batch walked goes through the filter first, its state
        updated in place, and only the batches it admits are decoded; a batch the kernel cannot
        decide (a compressed or malformed transactional control batch, an ABORT marker without its
        index entry) stops the run with ``RUN_SLOW_PATH`` for :meth:`TxnFilter.admit
        <storage_core.record.txn_filter.TxnFilter.admit>` to decide or raise. A filter without kernel state
        (:class:`~storage_core.record.txn_filter.PyTxnFilter`) leaves every batch to the object path.
        """
        if self._run is None:
            return 0, RUN_SLOW_PATH
        state = None
        if txn is not None:
            state = txn.kernel_state
            if state is None:
                return 0, RUN_SLOW_PATH
        consumed, why, info = self._run(data, min_offset, end_offset, verify, _KERNEL_DECOMPRESSORS,
                                        -1 if max_bytes is None else max_bytes, state)
        if len(info):
            self._infos.append(np.frombuffer(info, dtype=BATCH_INFO_DTYPE))
        return consumed, why

    def finish(self) -> pa.RecordBatch:
        """Everything added since the last finish, as one RecordBatch in :attr:`schema`."""
        parts = self._builder.finish()
        n = int(parts["n"])
        arrays = _arrays_from_buffers(parts, self.include_headers)
        info = np.concatenate(self._infos) if self._infos else np.zeros(0, BATCH_INFO_DTYPE)
        self._infos.clear()
        counts = info["count"].astype(np.int64)
        columns: list[pa.Array] = [
            arrays["key"],
            arrays["value"],
            _repeated_string(self.topic, n),
            pa.array(np.full(n, self.partition, np.int32), pa.int32()),
            arrays["offset"],
            arrays["ts_us"],
            pa.array(np.repeat(info["timestamp_type"].astype(np.int32), counts), pa.int32()),
        ]
        if self.include_headers:
            columns.append(arrays["headers"])
        if self.include_metadata:
            columns += self._metadata_columns(info, counts, arrays["offset"])
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)

    @staticmethod
    def _metadata_columns(info: np.ndarray, counts: np.ndarray, offsets: pa.Array) -> list[pa.Array]:
        def rep(field: str, dtype: Any) -> np.ndarray:
            return np.repeat(info[field].astype(dtype), counts)

        base = rep("base_offset", np.int64)
        seq_base = rep("base_sequence", np.int64)
        off = offsets.to_numpy(zero_copy_only=False)
        seq = np.where(seq_base >= 0, (seq_base + (off - base)) % (1 << 31), -1).astype(np.int32)
        attributes = info["attributes"].astype(np.int64)
        codecs = pa.array(_CODEC_LABELS[attributes & COMPRESSION_CODEC_MASK].tolist(), pa.string())
        return [
            pa.array(base, pa.int64()),
            pa.array(rep("last_offset", np.int64), pa.int64()),
            pa.array(rep("leader_epoch", np.int32), pa.int32()),
            pa.array(rep("producer_id", np.int64), pa.int64()),
            pa.array(rep("producer_epoch", np.int32), pa.int32()),
            pa.array(seq, pa.int32()),
            pa.array(np.repeat((attributes & TRANSACTIONAL_FLAG_MASK) != 0, counts), pa.bool_()),
            codecs.take(pa.array(np.repeat(np.arange(len(info), dtype=np.int64), counts))),
            pa.array(rep("magic", np.int32), pa.int32()),
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


@dataclass(frozen=True)
class EncodeColumns:
    """Arrow rows normalised for encoding: binary columns, int64 ms timestamps, flat headers."""

    num_rows: int
    keys: pa.Array | None
    values: pa.Array
    timestamps: np.ndarray
    header_counts: np.ndarray | None
    header_keys: pa.Array | None
    header_values: pa.Array | None


def _one_chunk(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    """A column as one array; a single chunk is taken as it is (combine_chunks would copy it)."""
    if isinstance(arr, pa.ChunkedArray):
        return arr.chunk(0) if arr.num_chunks == 1 else arr.combine_chunks()
    return arr


def _as_binary(arr: pa.Array | pa.ChunkedArray, name: str) -> pa.Array:
    arr = _one_chunk(arr)
    t = arr.type
    if pa.types.is_binary(t) or pa.types.is_string(t):
        return arr.cast(pa.binary()) if pa.types.is_string(t) else arr
    if pa.types.is_large_binary(t) or pa.types.is_large_string(t) or pa.types.is_binary_view(t) \
            or pa.types.is_string_view(t) or pa.types.is_null(t):
        return arr.cast(pa.binary())
    raise KlogError(f"column {name!r} has type {t}; expected string or binary")


def prepare_columns(table: pa.RecordBatch | pa.Table, default_timestamp_ms: int | None = None) -> EncodeColumns:
    """Check and normalise ``key``, ``value``, ``headers``, ``timestamp`` for :func:`encode_arrow`."""
    import pyarrow.compute as pc

    names = table.column_names
    n = table.num_rows
    if "value" not in names:
        raise KlogError(f"no 'value' column; expected a string or binary 'value' column among {names}")
    values = _as_binary(table.column("value"), "value")
    keys = _as_binary(table.column("key"), "key") if "key" in names else None
    if "timestamp" in names:
        ts = _one_chunk(table.column("timestamp"))
        if pa.types.is_timestamp(ts.type):
            # to milliseconds, rounding down (floorDiv, as Spark's microsToMillis) rather than toward zero
            raw = ts.cast(pa.int64())
            unit = ts.type.unit
            if unit == "s":
                ts = pc.multiply_checked(raw, 1000)
            elif unit != "ms":
                factor = 1000 if unit == "us" else 1_000_000
                vals = np.floor_divide(raw.to_numpy(zero_copy_only=False), factor) if raw.null_count == 0 else None
                ts = pa.array(vals, pa.int64()) if vals is not None else pa.array(
                    [None if v is None else v // factor for v in raw.to_pylist()], pa.int64())
            else:
                ts = raw
        elif pa.types.is_integer(ts.type):
            ts = ts.cast(pa.int64())
        else:
            raise KlogError(f"column 'timestamp' has type {ts.type}; expected timestamp or int64 milliseconds")
        if ts.null_count:
            if default_timestamp_ms is None:
                raise KlogError("column 'timestamp' has nulls and no default timestamp was given")
            ts = pc.fill_null(ts, default_timestamp_ms)
        timestamps = np.ascontiguousarray(ts.to_numpy(zero_copy_only=False), dtype=np.int64)
    else:
        if default_timestamp_ms is None:
            raise KlogError("no 'timestamp' column and no default timestamp was given")
        timestamps = np.full(n, default_timestamp_ms, dtype=np.int64)
    header_counts = header_keys = header_values = None
    if "headers" in names:
        h = _one_chunk(table.column("headers"))
        if not (pa.types.is_list(h.type) or pa.types.is_large_list(h.type)) \
                or not pa.types.is_struct(h.type.value_type) \
                or [f.name for f in h.type.value_type] != ["key", "value"]:
            raise KlogError(f"column 'headers' has type {h.type}; expected array<struct<key: string, value: binary>>")
        counts = pc.fill_null(pc.list_value_length(h), 0)
        header_counts = np.ascontiguousarray(counts.to_numpy(zero_copy_only=False), dtype=np.int32)
        flat = h.flatten()
        hk, hv = flat.flatten()
        header_keys = _as_binary(hk, "headers.key")
        header_values = _as_binary(hv, "headers.value")
        if header_keys.null_count:
            raise KlogError("column 'headers' has a null header key; Kafka header keys cannot be null")
    return EncodeColumns(n, keys, values, timestamps, header_counts, header_keys, header_values)


def _bincol(arr: pa.Array) -> tuple[Any, Any, Any, int]:
    validity, offsets, data = arr.buffers()
    return (validity if arr.null_count else None, offsets, data, arr.offset)


def _py_encode_v2(cols: EncodeColumns, start: int, stop: int, max_bytes: int,
                  offsets: np.ndarray | None = None) -> tuple[bytes, int, int, int]:
    """One records area of rows from ``start`` (the reference the kernel's ``encode_v2_batches`` is
    compared with, batch by batch): one Python object per row. ``offsets``: each row's offset (the
    deltas are taken from them; a batch is cut before a delta past int32), else consecutive."""
    base_ts = int(cols.timestamps[start]) if start < stop else -1
    max_ts = base_ts
    out = bytearray()
    h = int(cols.header_counts[:start].sum()) if cols.header_counts is not None else 0
    row = start
    while row < stop:
        key = cols.keys[row].as_py() if cols.keys is not None else None
        value = cols.values[row].as_py()
        nh = int(cols.header_counts[row]) if cols.header_counts is not None else 0
        headers = []
        for k in range(h, h + nh):
            assert cols.header_keys is not None and cols.header_values is not None
            hk = cols.header_keys[k].as_py()
            headers.append(Header(java_utf8(hk), cols.header_values[k].as_py()))
        t = int(cols.timestamps[row])
        delta = row - start if offsets is None else int(offsets[row]) - int(offsets[start])
        if row > start and delta > INT32_MAX:
            break
        rec = encode_record(delta, wrap_int64(t - base_ts), key, value, headers)
        if row > start and len(out) + len(rec) > max_bytes:
            break
        out += rec
        h += nh
        max_ts = max(max_ts, t)
        row += 1
    return bytes(out), row, base_ts, max_ts


#: The largest records area of one batch: its size must fit batchLength (int32, from byte 12).
MAX_RECORDS_AREA = INT32_MAX - RECORD_BATCH_OVERHEAD


def _py_encode_v2_batches(cols: EncodeColumns, start: int, stop: int, max_bytes: int,
                          header: tuple[int, int, int] | None, offsets: np.ndarray | None = None
                          ) -> tuple[list[bytes], np.ndarray]:
    """Reference twin of ``_kernel.encode_v2_batches``: rows ``[start, stop)`` as consecutive
    batches, each a records area (``header`` None) or a whole batch with its header and CRC
    (``header`` = ``(base_offset, partition_leader_epoch, attributes)``, base offset of row
    ``start``); plus an int64 array of ``(end row, first timestamp, max timestamp)`` per batch.
    ``offsets`` (one per row, increasing): the rows' offsets, gaps kept as offset deltas within a
    batch (the kernel's ``encode_v2_rows`` twin); None: consecutive."""
    max_bytes = min(max(1, max_bytes), MAX_RECORDS_AREA)
    out: list[bytes] = []
    meta: list[tuple[int, int, int]] = []
    row = start
    while row < stop:
        area, end, first_ts, max_ts = _py_encode_v2(cols, row, stop, max_bytes, offsets)
        if header is None:
            out.append(area)
        else:
            base_offset, leader_epoch, attributes = header
            buf = bytearray(RECORD_BATCH_OVERHEAD + len(area))
            buf[RECORD_BATCH_OVERHEAD:] = area
            first, last = (row - start, end - 1 - start) if offsets is None else \
                (int(offsets[row]) - int(offsets[start]), int(offsets[end - 1]) - int(offsets[start]))
            write_batch_header(buf, base_offset=base_offset + first, partition_leader_epoch=leader_epoch,
                               attributes=attributes, last_offset_delta=last - first, base_timestamp=first_ts,
                               max_timestamp=max_ts, producer_id=-1, producer_epoch=-1, base_sequence=-1,
                               records_count=end - row)
            out.append(bytes(buf))
        meta.append((end, first_ts, max_ts))
        row = end
    return out, np.array(meta, dtype=np.int64).reshape(-1, 3)


def encode_v2_batches(cols: EncodeColumns, start: int, stop: int, max_bytes: int,
                      header: tuple[int, int, int] | None, native: bool | None = None
                      ) -> tuple[list[bytes], np.ndarray]:
    """Rows ``[start, stop)`` of prepared columns as v2 batches (see :func:`_py_encode_v2_batches`),
    with the kernel unless ``native`` is False or it is not built."""
    kernel = native_kernel() if native is not False else None
    if native and kernel is None:
        raise KlogError("the native kernel was requested but is not available")
    if kernel is None:
        return _py_encode_v2_batches(cols, start, stop, max_bytes, header)
    batches, meta = kernel.encode_v2_batches(
        _bincol(cols.keys) if cols.keys is not None else None, _bincol(cols.values), cols.timestamps,
        cols.header_counts,
        _bincol(cols.header_keys) if cols.header_keys is not None else None,
        _bincol(cols.header_values) if cols.header_values is not None else None,
        start, stop, max_bytes, header)
    return batches, np.frombuffer(meta, dtype=np.int64).reshape(-1, 3)


@dataclass(frozen=True)
class RowSelection:
    """Rows picked from several prepared sources, in order, without copying them: row ``k`` is row
    ``local[k]`` of ``sources[which[k]]``. A writer collects each partition's rows from many input
    batches this way, and :func:`encode_v2_rows` encodes them where they lie."""

    sources: tuple[EncodeColumns, ...]
    which: np.ndarray  # int32: each row's source
    local: np.ndarray  # int64: each row's index in its source

    @classmethod
    def of(cls, picks: Sequence[tuple[EncodeColumns, np.ndarray | None]]) -> RowSelection:
        """Rows ``rows`` (all of them when None) of each source in turn."""
        sources: list[EncodeColumns] = []
        ids: dict[int, int] = {}
        which: list[np.ndarray] = []
        local: list[np.ndarray] = []
        for cols, rows in picks:
            idx = np.arange(cols.num_rows, dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64)
            s = ids.setdefault(id(cols), len(sources))
            if s == len(sources):
                sources.append(cols)
            which.append(np.full(len(idx), s, dtype=np.int32))
            local.append(idx)
        return cls(tuple(sources), np.concatenate(which) if which else np.zeros(0, np.int32),
                   np.concatenate(local) if local else np.zeros(0, np.int64))

    @property
    def num_rows(self) -> int:
        return len(self.which)

    def _positions(self) -> np.ndarray:
        """Each picked row's position in the sources laid end to end; a pick outside them is refused."""
        n, sources = self.num_rows, self.sources
        if not n:
            return np.zeros(0, np.int64)
        if int(self.which.min()) < 0 or int(self.which.max()) >= len(sources):
            raise KlogError(f"a picked row names a source outside the {len(sources)} given")
        sizes = np.array([c.num_rows for c in sources], dtype=np.int64)
        if ((self.local < 0) | (self.local >= sizes[self.which])).any():
            raise KlogError("a picked row lies outside its source")
        at: np.ndarray = (np.cumsum(sizes) - sizes)[self.which] + self.local
        return at

    @property
    def timestamps(self) -> np.ndarray:
        """Each picked row's timestamp (int64 ms)."""
        if not self.sources:
            return np.zeros(0, np.int64)
        ts: np.ndarray = np.concatenate([c.timestamps for c in self.sources])[self._positions()]
        return ts

    def gather(self) -> EncodeColumns:
        """The picked rows copied into one set of columns (what the kernel does not need to do; the
        input of the pure-Python twin)."""
        n, sources = self.num_rows, self.sources
        at = pa.array(self._positions(), pa.int64())

        def column(arrays: list[pa.Array | None]) -> pa.Array:
            full = [a if a is not None else pa.nulls(c.num_rows, pa.binary()) for a, c in zip(arrays, sources, strict=True)]
            return pa.concat_arrays(full).take(at) if full else pa.array([], pa.binary())

        keys = column([c.keys for c in sources]) if any(c.keys is not None for c in sources) else None
        values = column([c.values for c in sources])
        counts = hkeys = hvalues = None
        if any(c.header_counts is not None for c in sources):
            starts = [None if c.header_counts is None else np.concatenate([[0], np.cumsum(c.header_counts)])
                      for c in sources]
            counts = np.zeros(n, dtype=np.int32)
            ks: list[pa.Array] = []
            vs: list[pa.Array] = []
            for r, (s, i) in enumerate(zip(self.which.tolist(), self.local.tolist(), strict=True)):
                c, st = sources[s], starts[s]
                if st is None or st[i + 1] == st[i]:
                    continue
                assert c.header_keys is not None and c.header_values is not None
                a, b = int(st[i]), int(st[i + 1])
                counts[r] = b - a
                ks.append(c.header_keys.slice(a, b - a))
                vs.append(c.header_values.slice(a, b - a))
            hkeys = pa.concat_arrays(ks) if ks else pa.array([], pa.binary())
            hvalues = pa.concat_arrays(vs) if vs else pa.array([], pa.binary())
        return EncodeColumns(n, keys, values, self.timestamps, counts, hkeys, hvalues)


def encode_v2_rows(rows: RowSelection, max_bytes: int, header: tuple[int, int, int] | None,
                   out: bytearray | None = None, native: bool | None = None,
                   offsets: np.ndarray | None = None) -> tuple[bytearray, np.ndarray]:
    """The picked rows as consecutive v2 batches (as :func:`encode_v2_batches` cuts them), written one
    after another into ``out`` if it is large enough (else into a new bytearray); returns that
    buffer and an int64 array of ``(end row, first timestamp, max timestamp, end position)`` per
    batch. The kernel encodes the rows where they lie; the pure-Python twin gathers them first.
    ``offsets``: each row's offset (int64, strictly increasing; a restore's, with gaps), the header's
    base offset being that of row 0; None: consecutive from it."""
    kernel = native_kernel() if native is not False else None
    if native and kernel is None:
        raise KlogError("the native kernel was requested but is not available")
    if kernel is None:
        if offsets is not None and len(offsets) > 1 and not bool((np.diff(offsets) > 0).all()):
            raise ValueError("encode_v2_rows: offsets are not strictly increasing")
        batches, meta = _py_encode_v2_batches(rows.gather(), 0, rows.num_rows, max_bytes, header, offsets)
        ends = np.cumsum([len(b) for b in batches], dtype=np.int64).reshape(-1, 1)
        return bytearray(b"".join(batches)), np.hstack([meta, ends])
    sources = [(_bincol(c.keys) if c.keys is not None else None, _bincol(c.values), c.timestamps, c.header_counts,
                _bincol(c.header_keys) if c.header_keys is not None else None,
                _bincol(c.header_values) if c.header_values is not None else None) for c in rows.sources]
    buf, meta = kernel.encode_v2_rows(sources, np.ascontiguousarray(rows.which, dtype=np.int32),
                                      np.ascontiguousarray(rows.local, dtype=np.int64), max_bytes, header, out,
                                      None if offsets is None else np.ascontiguousarray(offsets, dtype=np.int64))
    return buf, np.frombuffer(meta, dtype=np.int64).reshape(-1, 4)


def _check_offsets(base_offset: int, records: int) -> None:
    """``records`` offsets from ``base_offset`` up must stay within Kafka's int64 offsets."""
    if records and not _I64_MIN <= base_offset <= _I64_MAX - (records - 1):
        raise KlogError(f"base offset {base_offset} with {records} records runs outside Kafka's int64 offsets")


def _compressed_batch(area: Any, compression: CompressionType, compression_level: int | None, base_offset: int,
                      partition_leader_epoch: int, attributes: int, count: int, first_ts: int, max_ts: int,
                      last_offset_delta: int | None = None) -> bytearray:
    """A whole batch of ``count`` records from an encoded records area: compressed, header and CRC;
    ``last_offset_delta`` that of the area's last record (``count - 1`` unless offsets have gaps)."""
    payload = compress(compression, area, compression_level)
    buf = bytearray(RECORD_BATCH_OVERHEAD + len(payload))
    buf[RECORD_BATCH_OVERHEAD:] = payload
    write_batch_header(buf, base_offset=base_offset, partition_leader_epoch=partition_leader_epoch,
                       attributes=attributes, last_offset_delta=count - 1 if last_offset_delta is None
                       else last_offset_delta, base_timestamp=first_ts,
                       max_timestamp=max_ts, producer_id=-1, producer_epoch=-1, base_sequence=-1,
                       records_count=count)
    return buf


@dataclass(frozen=True)
class EncodedBatch:
    """One batch a :class:`RowsEncoder` wrote; ``data`` is valid until the encoder's next call."""

    data: memoryview | bytearray
    last_offset: int
    max_timestamp: int


class EncodeBuffer:
    """The memory :class:`RowsEncoder` writes batches into, kept from call to call (and grown when a
    run needs more), so that a writer staging run after run does not fault in fresh memory for every
    batch. Encoders may share one (a Spark task's writers for all its partitions do: one buffer, not
    one per partition) if they never encode at the same time."""

    __slots__ = ("data",)

    def __init__(self) -> None:
        self.data: bytearray | None = None


class RowsEncoder:
    """Encodes picked rows (:class:`RowSelection`) as whole v2 batches into an :class:`EncodeBuffer`
    (its own, or one it shares). What :meth:`encode` returns is valid until the buffer's next use."""

    def __init__(self, compression: CompressionType = CompressionType.NONE, compression_level: int | None = None,
                 max_batch_bytes: int = DEFAULT_BATCH_BYTES, partition_leader_epoch: int = -1,
                 native: bool | None = None, buffer: EncodeBuffer | None = None) -> None:
        self.compression = compression
        self.compression_level = compression_level
        self.budget = max(1, max_batch_bytes - RECORD_BATCH_OVERHEAD)
        self.partition_leader_epoch = partition_leader_epoch
        self.native = native
        self.buffer = buffer if buffer is not None else EncodeBuffer()

    def encode(self, rows: RowSelection, base_offset: int, *, offsets: np.ndarray | None = None,
               log_append_time: int | None = None) -> list[EncodedBatch]:
        """The rows as batches, offsets from ``base_offset`` up: consecutive, or, with ``offsets``
        (int64, strictly increasing, one per row), ``base_offset + offsets[i] - offsets[0]`` (a
        restore keeps a log's gaps as offset deltas within its batches).

        ``log_append_time``: the batches are LogAppendTime's, every record's timestamp that time,
        and so their maxTimestamp, as a broker stamps a batch (``LogValidator``,
        ``MemoryRecordsBuilder``: a reader takes a LogAppendTime record's timestamp from its
        batch's maxTimestamp); the rows' timestamps must all be that time."""
        span = rows.num_rows if offsets is None or not len(offsets) else int(offsets[-1]) - int(offsets[0]) + 1
        _check_offsets(base_offset, span)
        if offsets is not None and len(offsets) != rows.num_rows:
            raise KlogError(f"{len(offsets)} offsets for {rows.num_rows} rows; expected one per row")
        ts_type = TimestampType.CREATE_TIME
        if log_append_time is not None:
            ts = rows.timestamps
            if len(ts) and not bool((ts == log_append_time).all()):
                raise KlogError(f"LogAppendTime batch of time {log_append_time} given rows of other timestamps "
                                f"({int(ts.min())}..{int(ts.max())}); expected all {log_append_time}")
            ts_type = TimestampType.LOG_APPEND_TIME
        attributes = batch_attributes(self.compression, ts_type, False, False)
        whole = self.compression == CompressionType.NONE
        header = (base_offset, self.partition_leader_epoch, attributes) if whole else None
        buf, meta = encode_v2_rows(rows, self.budget, header, self.buffer.data, self.native, offsets)
        self.buffer.data = buf
        view = memoryview(buf)
        out: list[EncodedBatch] = []
        row = pos = 0
        first_offset = 0 if offsets is None or not len(offsets) else int(offsets[0])
        for end, first_ts, max_ts, stop in meta.tolist():
            first, last = (row, end - 1) if offsets is None else \
                (int(offsets[row]) - first_offset, int(offsets[end - 1]) - first_offset)
            data = view[pos:stop] if whole else _compressed_batch(
                view[pos:stop], self.compression, self.compression_level, base_offset + first,
                self.partition_leader_epoch, attributes, end - row, first_ts, max_ts, last - first)
            out.append(EncodedBatch(data, base_offset + last, max_ts))
            row, pos = end, stop
        return out


def encode_arrow(
    table: pa.RecordBatch | pa.Table,
    *,
    base_offset: int = 0,
    compression: CompressionType = CompressionType.NONE,
    compression_level: int | None = None,
    max_batch_bytes: int = DEFAULT_BATCH_BYTES,
    default_timestamp_ms: int | None = None,
    partition_leader_epoch: int = -1,
    native: bool | None = None,
) -> list[bytes]:
    """Encode Arrow rows (``key``, ``value``, optional ``headers`` and ``timestamp``) as v2 batches.

    Offsets run from ``base_offset`` up; a batch is cut before the record that would take its
    uncompressed records area past ``max_batch_bytes`` - 61. ``timestamp`` may be ``timestamp[*]``
    or int64 milliseconds; missing or null timestamps take ``default_timestamp_ms``.
    """
    cols = prepare_columns(table, default_timestamp_ms)
    _check_offsets(base_offset, cols.num_rows)
    budget = max(1, max_batch_bytes - RECORD_BATCH_OVERHEAD)
    attributes = batch_attributes(compression, TimestampType.CREATE_TIME, False, False)
    if compression == CompressionType.NONE:  # whole batches, header and CRC included, in one call
        batches, _ = encode_v2_batches(cols, 0, cols.num_rows, budget,
                                       (base_offset, partition_leader_epoch, attributes), native)
        return batches
    areas, meta = encode_v2_batches(cols, 0, cols.num_rows, budget, None, native)
    out: list[bytes] = []
    row = 0
    for area, (end, first_ts, max_ts) in zip(areas, meta.tolist(), strict=True):
        out.append(bytes(_compressed_batch(area, compression, compression_level, base_offset + row,
                                           partition_leader_epoch, attributes, end - row, first_ts, max_ts)))
        row = end
    return out


def murmur2_partitions(keys: pa.Array, num_partitions: int) -> np.ndarray:
    """Kafka's default partitioner for keyed records: ``toPositive(murmur2(key)) % n``.

    Null keys get -1 (the caller spreads them). Uses the kernel; the pure-Python twin is
    :func:`storage_core.record.columnar.murmur2`.
    """
    keys = _as_binary(keys, "key")
    kernel = native_kernel()
    if kernel is not None:
        hashes = np.frombuffer(kernel.murmur2(_bincol(keys), len(keys)), dtype=np.int32, count=len(keys))
    else:
        hashes = np.array([murmur2(k) if k is not None else 0 for k in keys.to_pylist()], dtype=np.int32)
    parts = (hashes.astype(np.int64) & 0x7FFFFFFF) % num_partitions
    if keys.null_count:
        valid = np.asarray(keys.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        parts = np.where(valid, parts, -1)
    return parts.astype(np.int32)


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` (signed 32-bit result)."""
    m = 0x5BD1E995
    mask = 0xFFFFFFFF
    length = len(data)
    h = (0x9747B28C ^ length) & mask
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = (h * m) & mask
        h ^= k
    rest = length % 4
    tail = length & ~3
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def records_of(batch: AnyBatch) -> list[tuple[Record, ControlRecordType | None]]:
    """Per-record view with the control type (for tools): ``(record, control type or None)``."""
    recs = batch.records()
    if batch.is_control:
        return [(r, ControlRecordType.parse(r.key)) for r in recs]
    return [(r, None) for r in recs]

