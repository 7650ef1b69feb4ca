"""Transactions during a cleaning (``CleanedTransactionMetadata``)."""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass

from storage_core.log.log import Log
from storage_core.log.txn_index import AbortedTxn
from storage_core.record.control import ControlRecordType
from storage_core.record.file_records import AnyBatch
from storage_core.record.records import DefaultRecordBatch


@dataclass(slots=True)
class _AbortedTxnState:
    txn: AbortedTxn
    last_observed_batch_offset: int | None = None


class CleanedTransactionMetadata:
    """Transaction state carried through one cleaning (``CleanedTransactionMetadata``)."""

    def __init__(self) -> None:
        self._ongoing_committed: set[int] = set()
        self._ongoing_aborted: dict[int, _AbortedTxnState] = {}
        self._heap: list[tuple[int, int, int, AbortedTxn]] = []  # by first offset
        self._seq = 0
        self.cleaned_index: list[AbortedTxn] | None = None  # aborted txns to write to the cleaned segment

    def add_aborted_transactions(self, txns: Iterable[AbortedTxn]) -> None:
        for t in txns:
            self._seq += 1
            heapq.heappush(self._heap, (t.first_offset, self._seq, t.producer_id, t))

    def _consume_aborted_up_to(self, offset: int) -> None:
        while self._heap and self._heap[0][0] <= offset:
            t = heapq.heappop(self._heap)[3]
            self._ongoing_aborted.setdefault(t.producer_id, _AbortedTxnState(t))

    def on_control_batch_read(self, batch: DefaultRecordBatch) -> bool:
        """A control batch was read; returns True if it can be discarded."""
        self._consume_aborted_up_to(batch.last_offset)
        records = batch.records()
        if not records:
            return True  # an empty control batch was cleaned already
        kind = ControlRecordType.parse(records[0].key)
        pid = batch.producer_id
        if kind == ControlRecordType.ABORT:
            state = self._ongoing_aborted.pop(pid, None)
            if state is not None and state.last_observed_batch_offset is not None:
                if self.cleaned_index is not None:
                    self.cleaned_index.append(state.txn)
                return False
            return True
        if kind == ControlRecordType.COMMIT:
            if pid in self._ongoing_committed:
                self._ongoing_committed.discard(pid)
                return False
            return True
        return False

    def on_batch_read(self, batch: AnyBatch) -> bool:
        """A data batch was read; returns True if it belongs to an aborted transaction."""
        self._consume_aborted_up_to(batch.last_offset)
        if isinstance(batch, DefaultRecordBatch) and batch.is_transactional:
            state = self._ongoing_aborted.get(batch.producer_id)
            if state is not None:
                state.last_observed_batch_offset = batch.last_offset
                return True
            self._ongoing_committed.add(batch.producer_id)
        return False


def aborted_between(entries: list[AbortedTxn], start: int, end: int) -> list[AbortedTxn]:
    """``collectAbortedTransactions(start, end)`` over entries read once (:func:`all_aborted`)."""
    return [t for t in entries if t.last_offset >= start and t.first_offset < end]


def all_aborted(log: Log) -> list[AbortedTxn]:
    """Every ``.txnindex`` entry of the log, read once per pass (a cleaned group's entries end
    before the segments still to be cleaned, so the list stays right for them)."""
    return sorted((t for seg in log.segments for t in seg.txn_index.read()), key=lambda t: t.first_offset)
