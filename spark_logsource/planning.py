"""Spark's side of planning: the read layer's pieces packed into Spark input partitions.

Selection, range resolution, slicing and the aborted transactions of each piece are the read
planner's (:mod:`storage_core.read.planner`), shared with streams, ``klog export`` and the Python
API. Here pieces only become tasks: a large piece gets a task of its own (partitions are read in
parallel as in Spark's Kafka source), consecutive small ones share one (a task costs tens of ms).
Input partitions hold paths and offsets only; nothing is opened before ``read()``.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql.datasource import InputPartition

from storage_core.read.options import ReadOptions
from storage_core.read.planner import NO_PRUNING, PartitionRange, Piece, Pruning, plan_read

__all__ = ["PACK_BELOW_BYTES", "KlogInputPartition", "describe_plan", "pack", "plan"]


class KlogInputPartition(InputPartition):
    """What one Spark task reads: pieces of one or more topic-partitions (picklable, no open files)."""

    def __init__(self, index: int, pieces: tuple[Piece, ...]) -> None:
        super().__init__(index)
        self.index = index
        self.pieces = pieces

    def __repr__(self) -> str:
        return f"KlogInputPartition({self.index}, {len(self.pieces)} pieces)"


def plan(opts: ReadOptions, pruning: Pruning = NO_PRUNING) -> tuple[list[KlogInputPartition], list[PartitionRange]]:
    """Input partitions for a batch read, and the resolved range of every topic-partition."""
    the_plan = plan_read(opts, pruning)
    return pack(list(the_plan.pieces), opts), list(the_plan.ranges)


#: Pieces smaller than this are packed together (a task costs tens of ms); larger ones get a task
#: each, so partitions are read in parallel as in Spark's Kafka source.
PACK_BELOW_BYTES = 8 << 20


def pack(pieces: list[Piece], opts: ReadOptions) -> list[KlogInputPartition]:
    """One task per large piece; consecutive small pieces share a task (up to the byte budget)."""
    groups: list[list[Piece]] = []
    target_tasks = opts.min_partitions or 1
    budget = min(opts.max_bytes_per_partition, PACK_BELOW_BYTES)
    if len(pieces) >= target_tasks and target_tasks > 1:
        budget = min(budget, max(1, sum(p.nbytes for p in pieces) // target_tasks))
    current: list[Piece] = []
    size = 0
    records = 0
    for p in pieces:
        over_records = opts.max_records_per_partition is not None and \
            records + p.est_records > opts.max_records_per_partition
        if current and (size + p.nbytes > budget or over_records):
            groups.append(current)
            current, size, records = [], 0, 0
        current.append(p)
        size += p.nbytes
        records += p.est_records
    if current:
        groups.append(current)
    return [KlogInputPartition(i, tuple(g)) for i, g in enumerate(groups)]


def describe_plan(parts: list[KlogInputPartition]) -> str:
    return "; ".join(f"task {p.index}: " + ", ".join(f"{x.topic}-{x.partition}@{Path(x.log_path).name}"
                                                     f"[{x.start_position}:{x.end_position}]" for x in p.pieces)
                     for p in parts)
