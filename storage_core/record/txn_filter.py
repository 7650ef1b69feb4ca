"""READ_COMMITTED over a run of batches (Kafka's consumer, ``CompletedFetch``): one rule, two twins.

:class:`PyTxnFilter` (the reference) and :class:`NativeTxnFilter` (the kernel's ``TxnFilter``,
updated in place by ``add_v2_run`` so read_committed takes the bulk path) apply the rule of
:class:`TxnFilter` to each batch of a slice; :func:`filter_read_committed` is the per-batch loop
over the reference. The aborted transactions come from the log layer's ``.txnindex``
(:class:`storage_core.log.txn_index.AbortedTxn`); here they are anything with a producer id, a
first offset and the offset of the ABORT marker (:class:`AbortedRange`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from storage_core.errors import CorruptIndexError, KlogError

if TYPE_CHECKING:
    from storage_core.record.file_records import AnyBatch

__all__ = ["AbortedRange", "NativeTxnFilter", "PyTxnFilter", "TxnFilter", "filter_read_committed", "new_txn_filter"]


class AbortedRange(Protocol):
    """An aborted transaction: its producer, its first offset, the offset of its ABORT marker."""

    @property
    def producer_id(self) -> int: ...
    @property
    def first_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...


class TxnFilter(Protocol):
    """READ_COMMITTED over the batches of a slice, one batch at a time, in file order (``CompletedFetch``).

    Built from the aborted transactions overlapping the slice (:func:`new_txn_filter`). A producer
    joins the aborted set once a batch reaches the first offset of one of its aborted transactions
    (``batch.last_offset >= first_offset``) and leaves it at its ABORT marker; its transactional
    data batches in between are left out. A transaction whose marker lies behind the batch that
    reaches it (``last_offset < batch.last_offset``) ended before the slice and adds nothing:
    Kafka's fetches never list one (their list starts at the fetch offset), but a piece of a Spark
    range is given the whole range's list, and such an entry would leave its producer in the set
    for good and hide its later committed transactions.

    Control batches are never admitted. An ABORT marker without its ``aborted`` entry, after
    transactional data of that producer was returned since its last marker, means the transaction
    index is incomplete: that is a :class:`CorruptIndexError` (with the batch's file and position),
    never a silent read of aborted data. Without such data the marker is one the cleaner kept after
    removing every batch of its transaction (Kafka drops the index entry then and keeps the marker
    until its delete horizon): nothing to skip.

    Every batch of the slice must go through :meth:`admit`, including those below the first
    offset wanted (they move the state on). The state persists: the bulk path
    (:func:`storage_core.record.scan.decode_file_range` with ``txn=``) hands the kernel's state,
    :attr:`kernel_state`, to each run of batches and calls :meth:`admit` for the batches it
    decodes in Python, so one filter serves a whole slice however it is read.
    """

    where: str | None  #: the file named in an error when a batch has no path of its own

    @property
    def kernel_state(self) -> Any | None:
        """The ``_kernel.TxnFilter`` the kernel's bulk runs update, or None (pure Python)."""

    def admit(self, batch: AnyBatch) -> bool:
        """Whether ``batch``'s records are read; moves the state on. Raises CorruptIndexError."""

    def snapshot(self) -> tuple[int, frozenset[int], frozenset[int]]:
        """(aborted transactions reached, producers aborting, producers with transactional data
        returned since their last marker): to compare implementations."""


def _sorted_aborted(aborted: Iterable[AbortedRange]) -> list[AbortedRange]:
    return sorted(aborted, key=lambda t: (t.first_offset, t.last_offset))


def _is_abort_marker(batch: AnyBatch) -> bool:
    """A transactional control batch whose first record is an ABORT marker; errors located at the batch."""
    from storage_core.record.control import ControlRecordType

    recs = batch.records()
    try:
        return bool(recs) and ControlRecordType.parse(recs[0].key) == ControlRecordType.ABORT
    except KlogError as exc:
        exc.located(path=batch.path, position=batch.position)
        raise


def _missing_entry(batch: AnyBatch, where: str | None) -> CorruptIndexError:
    return CorruptIndexError(
        f"ABORT marker at offset {batch.last_offset} (producer {batch.producer_id}) has no entry "
        "in the transaction index; run 'klog recover' to rebuild it",
        path=batch.path if batch.path is not None else where, position=batch.position)


class PyTxnFilter:
    """The reference :class:`TxnFilter`, in Python; ``_kernel.TxnFilter`` is its twin in C."""

    kernel_state = None

    def __init__(self, aborted: Iterable[AbortedRange], *, where: str | None = None) -> None:
        self.where = where
        self._pending = _sorted_aborted(aborted)
        self._markers = {t.last_offset for t in self._pending}
        self._next = 0
        self._aborting: set[int] = set()
        self._returned: set[int] = set()  # producers whose transactional data was returned since their last marker

    def admit(self, batch: AnyBatch) -> bool:
        pending = self._pending
        last = batch.last_offset
        while self._next < len(pending) and pending[self._next].first_offset <= last:
            if pending[self._next].last_offset >= last:  # not a transaction that ended before the slice
                self._aborting.add(pending[self._next].producer_id)
            self._next += 1
        if batch.is_control:
            if batch.is_transactional and batch.producer_id >= 0:
                if _is_abort_marker(batch):
                    if batch.last_offset not in self._markers and batch.producer_id in self._returned:
                        raise _missing_entry(batch, self.where)
                    self._aborting.discard(batch.producer_id)
                self._returned.discard(batch.producer_id)
            return False
        if batch.is_transactional:
            if batch.producer_id in self._aborting:
                return False
            self._returned.add(batch.producer_id)
        return True

    def snapshot(self) -> tuple[int, frozenset[int], frozenset[int]]:
        return self._next, frozenset(self._aborting), frozenset(self._returned)


class NativeTxnFilter:
    """:class:`TxnFilter` over the kernel's state (``_kernel.TxnFilter``, which holds the rule in C):
    :meth:`admit` only reads what the kernel cannot (the control record of a batch object)."""

    def __init__(self, aborted: Iterable[AbortedRange], kernel: Any, *, where: str | None = None) -> None:
        self.where = where
        self._state = kernel.TxnFilter([(t.producer_id, t.first_offset, t.last_offset)
                                        for t in _sorted_aborted(aborted)])
        self._admit = kernel.TXN_ADMIT
        self._missing = kernel.TXN_MISSING_ENTRY

    @property
    def kernel_state(self) -> Any:
        return self._state

    def admit(self, batch: AnyBatch) -> bool:
        state = self._state
        control = batch.is_control
        transactional = batch.is_transactional
        pid = batch.producer_id
        abort = False
        if control and transactional and pid >= 0:
            state.advance(batch.last_offset)  # before the records are read, as the reference does
            abort = _is_abort_marker(batch)
        verdict = state.step(control, transactional, pid, batch.last_offset, abort)
        if verdict == self._missing:
            raise _missing_entry(batch, self.where)
        return bool(verdict == self._admit)

    def snapshot(self) -> tuple[int, frozenset[int], frozenset[int]]:
        return self._state.snapshot()  # type: ignore[no-any-return]


def new_txn_filter(aborted: Iterable[AbortedRange], *, where: str | None = None,
                   native: bool | None = None) -> TxnFilter:
    """A read_committed filter over ``aborted``: the kernel's unless ``native`` is False or the
    kernel is not built (chosen as :func:`storage_core.record.columnar.new_builder` chooses)."""
    from storage_core.record.kernel import native_kernel

    kernel = native_kernel() if native is not False else None
    if native and kernel is None:
        raise KlogError("the native kernel was requested but is not available")
    if kernel is not None:
        return NativeTxnFilter(aborted, kernel, where=where)
    return PyTxnFilter(aborted, where=where)


def filter_read_committed(batches: Iterable[AnyBatch], aborted: Iterable[AbortedRange], *,
                          where: str | None = None) -> Iterator[AnyBatch]:
    """READ_COMMITTED over a run of batches below the last stable offset: the batches
    :class:`PyTxnFilter` admits (see :class:`TxnFilter` for the rule and its errors).

    ``aborted`` are the aborted transactions overlapping the run; ``where`` names the file in an
    error about a batch without a path of its own.
    """
    txn = PyTxnFilter(aborted, where=where)
    for batch in batches:
        if txn.admit(batch):
            yield batch
