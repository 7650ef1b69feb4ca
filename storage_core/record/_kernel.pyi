"""Type stubs of the native kernel (storage_core/record/_kernel_src/*.c); see each function's C comment.

Binary columns are passed as ``(validity or None, offsets, data, array offset)`` of Arrow buffers
(:func:`storage_core.columnar._bincol`). The pure-Python twins are in storage_core/columnar.py
(:class:`~storage_core.columnar.PyRecordsBuilder`, ``_py_encode_v2_batches``) and
storage_core/record/txn_filter.py (:class:`~storage_core.record.txn_filter.PyTxnFilter`); those of
``OffsetMap`` in storage_core/cleaner (``SkimpyOffsetMap``, ``should_retain_record``, ``map_records``).
"""

from collections.abc import Callable, Sequence
from typing import Any, final, type_check_only

from typing_extensions import Buffer

_BinCol = tuple[Any, Any, Any, int]

#: Why OffsetMap.map_run / clean_run stopped (storage_core.record.file_records RUN_*).
CLEAN_END: int
CLEAN_SHORT: int
CLEAN_BATCH: int
CLEAN_FULL: int
CLEAN_LIMIT: int

#: TxnFilter.step verdicts.
TXN_SKIP: int
TXN_ADMIT: int
TXN_MISSING_ENTRY: int

@final
@type_check_only
class OwnedBuffer:
    """Read-only bytes owned by the kernel, exported through the buffer protocol (not a module attribute)."""

    def __len__(self) -> int: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...

@final
class TxnFilter:
    """read_committed state over a run of batches (the rule of storage_core.record.txn_filter.TxnFilter)."""

    def __init__(self, aborted: Sequence[tuple[int, int, int]]) -> None:
        """``aborted``: ``(producer_id, first_offset, last_offset)`` of each aborted transaction."""
    def advance(self, last_offset: int, /) -> None: ...
    def step(self, is_control: bool, is_transactional: bool, producer_id: int, last_offset: int,
             abort_marker: bool, /) -> int:
        """TXN_SKIP, TXN_ADMIT or TXN_MISSING_ENTRY (state unchanged); advances first."""
    def snapshot(self) -> tuple[int, frozenset[int], frozenset[int]]: ...

@final
class RecordsBuilder:
    def __init__(self, with_headers: bool = False) -> None: ...
    @property
    def num_rows(self) -> int: ...
    @property
    def nbytes(self) -> int: ...
    def add_v2(self, data: Buffer, count: int, base_offset: int, base_timestamp: int, log_append_time: int | None,
               min_offset: int, end_offset: int, /) -> int: ...
    def add_v2_run(self, data: Buffer, min_offset: int, end_offset: int, verify: bool,
                   decompressors: tuple[Callable[[memoryview], Buffer] | None, ...] | None, max_bytes: int = -1,
                   txn: TxnFilter | None = None, /) -> tuple[int, int, OwnedBuffer]: ...
    def add_record(self, offset: int, timestamp: int, key: Buffer | None, value: Buffer | None,
                   headers: Sequence[tuple[str, Buffer | None]] | None, /) -> None: ...
    def finish(self) -> dict[str, Any]: ...

def encode_v2_batches(keys: _BinCol | None, values: _BinCol, timestamps: Buffer, header_counts: Buffer | None,
                      header_keys: _BinCol | None, header_values: _BinCol | None, start: int, stop: int,
                      max_bytes: int, header: tuple[int, int, int] | None, /) -> tuple[list[bytes], OwnedBuffer]: ...
def encode_v2_rows(sources: Sequence[tuple[_BinCol | None, _BinCol, Buffer, Buffer | None, _BinCol | None,
                                            _BinCol | None]],
                   which: Buffer, local: Buffer, max_bytes: int, header: tuple[int, int, int] | None,
                   out: bytearray | None, offsets: Buffer | None = None, /) -> tuple[bytearray, OwnedBuffer]:
    """encode_v2_batches over row ``local[r]`` of ``sources[which[r]]``, read in place, into ``out``
    (reused if large enough, else a new bytearray); meta is (end row, first ts, max ts, end position).
    ``offsets`` (int64, strictly increasing, one per row): the rows' offsets, gaps kept as offset deltas."""
def crc32c(data: Buffer, software: bool = False, /) -> int: ...
def lz4_frame_decompress(data: Buffer, /) -> bytes | None:
    """One LZ4 frame decoded by the kernel, or None where it declines the frame (the Python codec decides)."""
def murmur2(keys: _BinCol, n: int, /) -> OwnedBuffer: ...

@final
class OffsetMap:
    """Kafka's SkimpyOffsetMap (the Python twin: storage_core.cleaner.offset_map.SkimpyOffsetMap)."""

    def __init__(self, memory_bytes: int) -> None: ...
    @property
    def memory_bytes(self) -> int: ...
    @property
    def slots(self) -> int: ...
    @property
    def max_entries(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def latest_offset(self) -> int: ...
    @property
    def is_full(self) -> bool: ...
    @property
    def utilization(self) -> float: ...
    def clear(self) -> None: ...
    def update_latest_offset(self, offset: int, /) -> None: ...
    def put(self, key: Buffer, offset: int, /) -> None: ...
    def get(self, key: Buffer, /) -> int: ...
    def map_records(self, area: Buffer, count: int, base_offset: int, start: int, /) -> tuple[int, bool]: ...
    def select(self, area: Buffer, count: int, base_offset: int, deletes_retained: bool, /
               ) -> tuple[bytes, int, int, int, int]:
        """(keep: a byte per record, retained, tombstones_read, tombstones_kept, keyless_dropped)."""
    def map_run(self, data: Buffer, pos: int, start: int, end: int, /) -> tuple[int, int, int, int]:
        """(pos, why, records, bytes)."""
    def clean_run(self, data: Buffer, pos: int, now: int, delete_retention_ms: int, stops: Buffer, /
                  ) -> tuple[int, int, OwnedBuffer, OwnedBuffer, tuple[int, ...]]:
        """(pos, why, batches, int64 (last offset, max timestamp, size) per batch, counts)."""

def md5(data: Buffer, /) -> bytes: ...
def retained_records(area: Buffer, count: int, base_offset: int, base_timestamp: int, log_append_time: int | None,
                     keep: Buffer, delete_horizon: int | None, /) -> tuple[bytes, int, int, int] | None: ...
