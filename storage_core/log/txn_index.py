"""``.txnindex``: aborted transactions of a segment (``TransactionIndex.java``, ``AbortedTxn.java``).

Layout: :data:`ABORTED_TXN`, 34 bytes, big-endian, appended one per ABORT marker::

    int16 version            0
    int64 producerId
    int64 firstOffset        first offset of the transaction (may lie in an earlier segment)
    int64 lastOffset         offset of the ABORT marker
    int64 lastStableOffset   the LSO when the marker was written

The file exists only once a segment has seen an aborted transaction. Unlike the offset and
time indexes it is not preallocated and has no zero-filled tail.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

from storage_core.errors import CorruptIndexError
from storage_core.fs import as_path

#: version int16, producerId int64, firstOffset int64, lastOffset int64, lastStableOffset int64
ABORTED_TXN = struct.Struct(">hqqqq")
ABORTED_TXN_VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
    version: int = ABORTED_TXN_VERSION

    def pack(self) -> bytes:
        return ABORTED_TXN.pack(self.version, self.producer_id, self.first_offset, self.last_offset,
                                self.last_stable_offset)


class TransactionIndex:
    """A ``.txnindex`` file; read into memory whole (it holds one entry per aborted transaction)."""

    def __init__(self, path: str | os.PathLike[str], base_offset: int) -> None:
        self.path = as_path(path)
        self.base_offset = base_offset

    def read(self) -> list[AbortedTxn]:
        if not self.path.exists():
            return []
        data = self.path.read_bytes()
        if len(data) % ABORTED_TXN.size:
            raise CorruptIndexError(f"Transaction index file {self.path.name} is corrupt: {len(data)} bytes is not a "
                                    f"multiple of the entry size {ABORTED_TXN.size}", path=self.path)
        out = []
        for pos in range(0, len(data), ABORTED_TXN.size):
            version, pid, first, last, lso = ABORTED_TXN.unpack_from(data, pos)
            if version != ABORTED_TXN_VERSION:
                raise CorruptIndexError(f"Unexpected aborted transaction version {version}; expected "
                                        f"{ABORTED_TXN_VERSION}", path=self.path, position=pos)
            out.append(AbortedTxn(pid, first, last, lso, version))
        return out

    def append(self, txn: AbortedTxn, *, fsync: bool = False) -> None:
        entries = self.read() if self.path.exists() else []
        if entries and txn.last_offset <= entries[-1].last_offset:
            raise CorruptIndexError(f"The last offset of appended transactions must increase sequentially, but "
                                    f"{txn.last_offset} is not greater than current last offset "
                                    f"{entries[-1].last_offset} of index {self.path}", path=self.path)
        with open(self.path, "ab") as f:
            f.write(txn.pack())
            if fsync:
                f.flush()
                os.fsync(f.fileno())

    def collect_aborted(self, fetch_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping ``[fetch_offset, upper_bound_offset)`` (``collectAbortedTxns``)."""
        return [t for t in self.read() if t.last_offset >= fetch_offset and t.first_offset < upper_bound_offset]

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose marker is at or past ``offset``."""
        keep = [t for t in self.read() if t.last_offset < offset]
        self.path.write_bytes(b"".join(t.pack() for t in keep))
