"""Type stubs of the native kernel (storage_core/_kernel.c); see each function's C comment.

Binary columns are passed as ``(validity or None, offsets, data, array offset)`` of Arrow buffers
(:func:`storage_core.columnar._bincol`). The pure-Python twins are in storage_core/columnar.py
(:class:`~storage_core.columnar.PyRecordsBuilder`, ``_py_encode_v2_batches``) and
storage_core/record/txn_filter.py (:class:`~storage_core.record.txn_filter.PyTxnFilter`).
"""

from collections.abc import Callable, Sequence
from typing import Any, final, type_check_only

from typing_extensions import Buffer

_BinCol = tuple[Any, Any, Any, int]

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

def encode_v2(keys: _BinCol | None, values: _BinCol, timestamps: Buffer, header_counts: Buffer | None,
              header_keys: _BinCol | None, header_values: _BinCol | None, start: int, stop: int, max_bytes: int, /
              ) -> tuple[bytes, int, int, int]: ...
def encode_v2_batches(keys: _BinCol | None, values: _BinCol, timestamps: Buffer, header_counts: Buffer | None,
                      header_keys: _BinCol | None, header_values: _BinCol | None, start: int, stop: int,
                      max_bytes: int, header: tuple[int, int, int] | None, /) -> tuple[list[bytes], OwnedBuffer]: ...
def crc32c(data: Buffer, software: bool = False, /) -> int: ...
def lz4_frame_decompress(data: Buffer, /) -> bytes | None:
    """One LZ4 frame decoded by the kernel, or None where it declines the frame (the Python codec decides)."""
def murmur2(keys: _BinCol, n: int, /) -> OwnedBuffer: ...
