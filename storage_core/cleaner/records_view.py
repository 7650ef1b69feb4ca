"""The records of v2 batches as the cleaner needs them: offsets, keys, tombstone flags, and whole
records only for those a rebuilt batch keeps; decoded in bulk by the native kernel."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa

from storage_core.errors import InvalidRecordError, KlogError
from storage_core.limits import INT64_MAX, INT64_MIN
from storage_core.record.columnar import _arrays_from_buffers, native_kernel, new_builder
from storage_core.record.file_records import AnyBatch
from storage_core.record.records import DefaultRecordBatch, Header, Record, TimestampType

#: Batches decoded per call of the native kernel.
DECODE_CHUNK_BATCHES = 512


class RecordsView:
    """Offsets, keys and tombstone flags of one batch's records; whole records on demand."""

    __slots__ = ("offsets", "keys", "tombstones", "_records", "_chunk", "_start")

    def __init__(self, offsets: list[int], keys: list[bytes | None], tombstones: list[bool], *,
                 records: list[Record] | None = None, chunk: _DecodedChunk | None = None, start: int = 0) -> None:
        self.offsets = offsets
        self.keys = keys
        self.tombstones = tombstones
        self._records = records
        self._chunk = chunk
        self._start = start

    @classmethod
    def of_records(cls, records: list[Record]) -> RecordsView:
        return cls([r.offset for r in records], [r.key for r in records], [r.value is None for r in records],
                   records=records)

    def __len__(self) -> int:
        return len(self.offsets)

    def record(self, i: int) -> Record:
        if self._records is not None:
            return self._records[i]
        assert self._chunk is not None
        return self._chunk.record(self._start + i)


class _DecodedChunk:
    """The records of several v2 data batches, decoded by the native kernel into Arrow arrays."""

    def __init__(self, arrays: dict[str, pa.Array], with_headers: bool) -> None:
        self.offsets: list[int] = arrays["offset"].to_pylist()
        self.keys: list[bytes | None] = arrays["key"].to_pylist()
        self.tombstones: list[bool] = arrays["value"].is_null().to_pylist()
        self._ts = arrays["ts_ms"]
        self._values = arrays["value"]
        self._headers = arrays["headers"] if with_headers else None

    def record(self, j: int) -> Record:
        hs = self._headers[j].as_py() if self._headers is not None else None
        return Record(self.offsets[j], self._ts[j].as_py(), self.keys[j], self._values[j].as_py(),
                      tuple(Header(h["key"], h["value"]) for h in hs) if hs else ())


def decode_views(batches: list[DefaultRecordBatch], *, with_headers: bool) -> list[RecordsView]:
    """A :class:`RecordsView` per data batch: one kernel call for all of them, or (no kernel, or a
    batch the kernel refuses, such as a timestamp beyond its range) the per-record decoder."""
    if not batches:
        return []
    if native_kernel() is not None:
        builder = new_builder(with_headers)
        counts: list[int] = []
        try:
            for b in batches:
                lat = b.max_timestamp if b.timestamp_type == TimestampType.LOG_APPEND_TIME else None
                try:
                    counts.append(builder.add_v2(b.records_payload(), b.records_count, b.base_offset,
                                                 b.base_timestamp, lat, INT64_MIN, INT64_MAX))
                except KlogError as exc:
                    exc.located(path=b.path, position=b.position)
                    raise
            chunk = _DecodedChunk(_arrays_from_buffers(builder.finish(), with_headers), with_headers)
        except InvalidRecordError:
            pass  # decoded again below, record by record: the error (if real) is raised there
        else:
            out = []
            start = 0
            for n in counts:
                out.append(RecordsView(chunk.offsets[start:start + n], chunk.keys[start:start + n],
                                       chunk.tombstones[start:start + n], chunk=chunk, start=start))
                start += n
            return out
    return [RecordsView.of_records(b.records()) for b in batches]


def chunks(batches: Iterable[AnyBatch], size: int = DECODE_CHUNK_BATCHES) -> Iterator[list[AnyBatch]]:
    chunk: list[AnyBatch] = []
    for b in batches:
        chunk.append(b)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
