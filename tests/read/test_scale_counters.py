"""A query over many partitions does per-partition work only per partition (issue 31).

Counted, not timed: over a log dir of :data:`N` small partitions, ``plan``, ``describe``,
``read_arrow`` and a stream trigger each parse the dir's checkpoint files once (not once per
partition: each partition only stats them, to see that they did not change) and list the log
dir itself (glob of its commit journals included) a bounded number of times. The per-dir pass is
:mod:`storage_core.log.dir_state`; its journal rule (a commit that starts during a query is
still hidden) is checked below as well.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import storage_core as klog
from storage_core.files import LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_OFFSET_CHECKPOINT, STAGING_PREFIX
from storage_core.log.checkpoint import OffsetCheckpointFile
from storage_core.log.dir_state import LogDirState
from storage_core.log.journal import STAGED_ORIGIN, journal_path, write_json
from storage_core.log.manager import LogManager
from storage_core.log.topic_partition import TopicPartition
from storage_core.record.records import Record, build_batch

N = 200
#: how often a query may list the log dir itself: finding the partitions, skipped dirs, a journal
#: glob or two; never once per partition
MAX_DIR_LISTINGS = 8


def _write(d: Path, partitions: int) -> None:
    first = TopicPartition("t", 0)
    with LogManager([d], writable=True) as lm:
        lm.create_log(first).append(build_batch([Record(i, 1_700_000_000_000 + i, b"k", b"v") for i in range(10)]))
    for p in range(1, partitions):
        shutil.copytree(d / first.dir_name, d / TopicPartition("t", p).dir_name)
    everything = {TopicPartition("t", p): 10 for p in range(partitions)}
    OffsetCheckpointFile(d / RECOVERY_POINT_OFFSET_CHECKPOINT).write(everything, sync=False)
    OffsetCheckpointFile(d / LOG_START_OFFSET_CHECKPOINT).write({TopicPartition("t", 0): 0}, sync=False)
    old = time.time_ns() - 10**10  # a dir not changed for a while, as a broker's mostly is
    os.utime(d, ns=(old, old))


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("scale") / "logs"
    d.mkdir()
    _write(d, N)
    return d


class Counts:
    def __init__(self, log_dir: Path) -> None:
        self.log_dir = os.path.realpath(log_dir)
        self.checkpoints: collections.Counter[str] = collections.Counter()
        self.listings = 0


def _idle_trigger(log_dir: Path) -> Callable[[], object]:
    pytest.importorskip("pyspark")
    from benchmarks.scale import idle_trigger

    return idle_trigger(log_dir, "earliest")


QUERIES: dict[str, Callable[[Path], Callable[[], object]]] = {
    "plan": lambda d: lambda: klog.plan(d),
    "describe": lambda d: lambda: klog.describe(d),
    "read_arrow": lambda d: lambda: klog.read_arrow(d).read_all(),
    "stream trigger": _idle_trigger,
}


@pytest.mark.parametrize("query", list(QUERIES))
def test_one_pass_over_the_log_dir_per_query(query: str, log_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = QUERIES[query](log_dir)  # set up (a stream's initial offset) before counting
    c = Counts(log_dir)
    with monkeypatch.context() as m:
        _count_into(c, m)
        result = run()
    if query == "plan":
        assert len(result.ranges) == N  # type: ignore[attr-defined]
    elif query in ("describe", "read_arrow"):
        assert result.num_rows == (N if query == "describe" else 10 * N)  # type: ignore[attr-defined]
    # a stream trigger is two passes (latestOffset, then partitions() of its range): each reads once
    passes = 2 if query == "stream trigger" else 1
    assert c.checkpoints[RECOVERY_POINT_OFFSET_CHECKPOINT] <= passes, c.checkpoints
    assert c.checkpoints[LOG_START_OFFSET_CHECKPOINT] <= passes, c.checkpoints
    assert sum(c.checkpoints.values()) <= 2 * passes + 2, c.checkpoints  # and a group's, a snapshot's: not per partition
    assert c.listings <= MAX_DIR_LISTINGS * passes, c.listings


def _count_into(c: Counts, m: pytest.MonkeyPatch) -> None:
    read = OffsetCheckpointFile.read
    listdir, scandir = os.listdir, os.scandir

    def counted_read(self: OffsetCheckpointFile, **kw: bool) -> dict[TopicPartition, int]:
        c.checkpoints[self.path.name] += 1
        return read(self, **kw)

    def is_log_dir(p: object) -> bool:
        if not isinstance(p, (str, os.PathLike)) or isinstance(p, int):
            return False
        return os.path.realpath(os.fspath(p)) == c.log_dir

    def counted_listdir(p: str | os.PathLike[str] = ".") -> list[str]:
        if is_log_dir(p):
            c.listings += 1
        return listdir(p)

    def counted_scandir(p: str | os.PathLike[str] = ".") -> object:
        if is_log_dir(p):
            c.listings += 1
        return scandir(p)

    m.setattr(OffsetCheckpointFile, "read", counted_read)
    m.setattr(os, "listdir", counted_listdir)
    m.setattr(os, "scandir", counted_scandir)


# --- the journal rule of the one pass -----------------------------------------------------------

def _journal(d: Path, partition: str, final_base: int) -> Path:
    path = journal_path(d, "job1")
    write_json(path, {"job": "job1", "phase": "applying", "ends": {}, "entries": [{
        "partition_dir": str(d / partition), "staging_dir": STAGING_PREFIX + "x", "staged_base": STAGED_ORIGIN,
        "final_base": final_base}]})
    return path


def test_a_commit_that_starts_during_the_query_is_still_hidden(tmp_path: Path) -> None:
    (tmp_path / "t-0").mkdir()
    old = time.time_ns() - 10**10
    os.utime(tmp_path, ns=(old, old))
    state = LogDirState(tmp_path)
    assert state.pending_commit_from("t-0") is None  # globbed: no journal
    j = _journal(tmp_path, "t-0", 5)  # a commit starts: the dir's mtime moves
    assert state.pending_commit_from("t-0") == 5
    j.unlink()
    assert state.pending_commit_from("t-0") is None  # and it finished


@pytest.mark.parametrize("recent", [True, False])
def test_a_change_within_a_timestamp_tick_is_not_trusted(recent: bool, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A journal created within the same timestamp tick as the last glob leaves the dir's stamps
    as they were: while the dir's last change is that recent, the state globs again."""
    (tmp_path / "t-0").mkdir()
    stamp = time.time_ns() - (0 if recent else 10**10) + 1  # not a whole second
    monkeypatch.setattr(LogDirState, "_token", lambda self: (stamp, stamp, 1))  # the stamps never move
    state = LogDirState(tmp_path)
    assert state.pending_commit_from("t-0") is None
    _journal(tmp_path, "t-0", 7)
    # a dir whose unchanged stamps are old enough is trusted: no glob, and (rightly) nothing new seen
    assert state.pending_commit_from("t-0") == (7 if recent else None)


def test_an_unchanged_dir_is_globbed_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "t-0").mkdir()
    _journal(tmp_path, "t-0", 3)
    old = time.time_ns() - 10**10
    os.utime(tmp_path, ns=(old, old))
    globs = []
    import storage_core.log.dir_state as dir_state
    import storage_core.log.journal as journal

    real = journal.pending_journal_offsets

    def counted(d: str | os.PathLike[str]) -> dict[str, int]:
        globs.append(d)
        return real(d)

    monkeypatch.setattr(dir_state, "pending_journal_offsets", counted)  # what LogDirState globs through
    state = LogDirState(tmp_path)
    assert [state.pending_commit_from(f"t-{p}") for p in range(50)] == [3] + [None] * 49
    assert len(globs) == 1
    assert json.loads(journal_path(tmp_path, "job1").read_text())["job"] == "job1"


def test_a_checkpoint_replaced_during_the_query_is_read_again(tmp_path: Path) -> None:
    """A writer moves the log start, then deletes the segments below it: a partition opened after
    that must see the new log start (evidence older than its listing would call the deleted
    segments lost)."""
    cp = OffsetCheckpointFile(tmp_path / LOG_START_OFFSET_CHECKPOINT)
    cp.write({TopicPartition("t", 0): 5})
    state = LogDirState(tmp_path)
    assert state.log_starts == {TopicPartition("t", 0): 5}
    cp.write({TopicPartition("t", 0): 9})  # same size, maybe the same mtime tick: a new inode
    assert state.log_starts == {TopicPartition("t", 0): 9}


def test_an_idle_stream_trigger_opens_no_partition(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stream reader remembers what each partition's files were at its last trigger: a trigger
    with nothing new opens no log; an append, a new partition or a commit that appears opens just
    the partitions they touch."""
    pytest.importorskip("pyspark")
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    import spark_logsource.streaming as streaming
    import storage_core.read.planner as planner
    from spark_logsource.options import parse_stream_options

    _write(tmp_path, 20)
    opened: list[str] = []
    real = planner.open_tail

    def counted(pd: object, state: object = None) -> object:
        opened.append(pd.topic_partition.dir_name)  # type: ignore[attr-defined]
        return real(pd, state)  # type: ignore[arg-type]

    monkeypatch.setattr(streaming, "open_tail", counted)
    reader = streaming.KlogStreamReader(parse_stream_options({"path": str(tmp_path), "startingOffsets": "earliest"}))
    start = reader.initialOffset()
    assert len(opened) == 20
    opened.clear()
    assert reader.latestOffset(start, ReadAllAvailable()) == {"t": {str(p): 10 for p in range(20)}}
    assert opened == []  # idle: nothing opened
    with LogManager([tmp_path], writable=True) as lm:
        log = lm.get_log(TopicPartition("t", 3))
        assert log is not None
        log.append(build_batch([Record(i, 1_700_000_000_000 + i, b"k", b"w") for i in range(5)]))
        lm.create_log(TopicPartition("u", 0)).append(build_batch([Record(0, 1_700_000_000_000, b"k", b"w")]))
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end["t"]["3"] == 15 and end["u"] == {"0": 1}
    # t-0 too: the writer's checkpoint dropped its log start entry (0, its first segment's base)
    assert sorted(opened) == ["t-0", "t-3", "u-0"]
    opened.clear()
    _journal(tmp_path, "t-5", 10)  # a commit starts adding to t-5 (its segments not renamed in yet)
    reader.latestOffset(start, ReadAllAvailable())
    assert opened == ["t-5"]  # what a commit hides is part of what is remembered


def test_many_small_segments_decode_into_few_batches(tmp_path: Path) -> None:
    """A partition of many small segments (each a piece of the plan) is decoded through one decoder:
    a few full batches, not one small batch (each with its own buffers) per segment, with the same
    rows as reading piece by piece. The read ahead of issue 31 held about 47 KB per piece."""
    import pyarrow as pa

    from benchmarks.scale import RECORDS, write_segments_dir
    from storage_core.read.piece_reader import read_piece

    segments = 600
    d = write_segments_dir(tmp_path, segments)
    the_plan = klog.plan(d)
    assert len(the_plan.pieces) == segments
    batches = list(klog.read_arrow(d))
    assert len(batches) == 1, [b.num_rows for b in batches]
    whole = pa.Table.from_batches(batches)
    one_by_one = pa.Table.from_batches([b for piece in the_plan.pieces for b in read_piece(piece)])
    assert whole.num_rows == segments * RECORDS
    assert whole.equals(one_by_one)
    assert whole.column("offset").to_pylist() == list(range(segments * RECORDS))



def test_compact_reads_and_writes_the_cleaner_checkpoint_per_dir_not_per_partition(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``klog compact`` of N partitions: Kafka's ``updateCheckpoints`` reads and rewrites the whole
    cleaner-offset-checkpoint after each partition (N² entries: 43 s of 45 at 2,000 partitions).
    Here it is parsed once and written as often as keeps the writes to about a tenth of the run
    (paced by time, so not counted here), and at the end holds every partition's offset."""
    from storage_core.files import CLEANER_OFFSET_CHECKPOINT, TOPIC_CONFIGS_FILE
    from storage_core.tools.cli import main

    d = tmp_path / "logs"
    d.mkdir()
    _write(d, N)
    (d / TOPIC_CONFIGS_FILE).write_text(json.dumps({"t": {"cleanup.policy": "compact"}}))
    OffsetCheckpointFile(d / CLEANER_OFFSET_CHECKPOINT).write({TopicPartition("t", p): 0 for p in range(N)})
    c = Counts(d)
    with monkeypatch.context() as m:
        _count_into(c, m)
        assert main(["compact", str(d), "--roll", "--quiet", "--json"]) == 0
    assert c.checkpoints[CLEANER_OFFSET_CHECKPOINT] == 1, c.checkpoints
    assert OffsetCheckpointFile(d / CLEANER_OFFSET_CHECKPOINT).read() == {TopicPartition("t", p): 10 for p in range(N)}
