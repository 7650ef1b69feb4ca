"""Random Kafka partitions written by Kafka's own code, and what a Kafka consumer reads from them.

``oracle/KafkaCorpus.java`` writes, per seed, a Kafka log dir with kafka-clients 4.3.0's
``MemoryRecordsBuilder`` (see its header for what varies: producers, transactions, codecs, legacy
message sets, gaps, empty batches, segment rolls, log start offsets) and beside the partition dirs
a ``<topic>-<partition>.truth.jsonl`` per partition: every data record and the partition's log
start, log end and last stable offsets. The truth is the generator's own knowledge (it decided
which transactions abort); it is never computed by reading the files back, nor by klog.

Usage in tests::

    reason = corpus_available()
    if reason is not None:
        pytest.skip(reason)
    corpora = generate(tmp_path, range(1, 201))          # one JVM for all the seeds not yet there
    truth = corpora[0].partitions[("orders", 0)]
    want = expected_rows(truth, read_committed=True, start=None, end=None)
    assert_same_rows(rows_of(table), want, f"seed {truth.seed} {truth.topic}-{truth.partition}")

Rows are in klog's/Spark's Kafka-source schema, as Python values: ``key``/``value`` bytes or None,
``topic``, ``partition``, ``offset``, ``timestamp`` (epoch ms, int), ``timestampType`` (0 CreateTime,
1 LogAppendTime, -1 none: magic 0), and ``headers`` (a list of ``(key, value)``, None when a record
has none, as Spark's Kafka source gives them).
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import kafka_oracle
import pyarrow as pa

SOURCE = kafka_oracle.JAVA / "KafkaCorpus.java"
MAIN_CLASS = "KafkaCorpus"
#: C1 only and the serial collector: the generator runs a few seconds, too short for C2 to pay off
JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xss4m", "-Dslf4j.internal.verbosity=ERROR")
TRUTH_T0 = 1_700_000_000_000  # the generator's clock starts here (its T0)
STAMP = ".generator"  # in a corpus root: the sha256 of the generator that wrote the corpora there

Row = dict[str, Any]


class TruthRecord(NamedTuple):
    """One data record as the generator wrote it and as a consumer sees it (a tuple: tens of
    thousands are loaded per run)."""

    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int  # what ConsumerRecord.timestamp() gives: LogAppendTime's batch time, -1 for magic 0
    timestamp_type: int  # 0 CreateTime, 1 LogAppendTime, -1 NoTimestampType (magic 0)
    headers: tuple[tuple[str, bytes | None], ...]
    producer_id: int
    transactional: bool
    txn: str | None  # "committed", "aborted", "open"; None when not transactional
    magic: int
    codec: str


@dataclass(frozen=True)
class Txn:
    producer_id: int
    first_offset: int  # base offset of its first data batch
    marker_offset: int | None  # None: still open (no marker)
    status: str  # "committed", "aborted", "open"


@dataclass(frozen=True)
class Marker:
    offset: int
    producer_id: int
    type: str  # "COMMIT" or "ABORT"
    stray: bool  # no transaction of its producer was open (it ends nothing)
    timestamp: int  # of its control record (CreateTime)


@dataclass(frozen=True)
class SegmentInfo:
    base: int  # the file name's offset (at or below its first batch's base offset)
    bytes: int
    batches: int
    max_timestamp: int  # the largest batch max timestamp in it (LogSegment.largestTimestamp), -1 if none


@dataclass(frozen=True)
class PartitionTruth:
    seed: int
    topic: str
    partition: int
    dir: Path
    log_start_offset: int
    log_end_offset: int  # next offset after the last batch (markers and empty batches included)
    last_stable_offset: int  # first offset of the oldest open transaction (at least the log start), else LEO
    segments: tuple[SegmentInfo, ...]
    txns: tuple[Txn, ...]
    markers: tuple[Marker, ...]
    empty_batches: tuple[tuple[int, int], ...]
    batches: int
    records: tuple[TruthRecord, ...] = field(repr=False)

    def segment_index(self, offset: int) -> int:
        """Index in :attr:`segments` of the segment holding ``offset``."""
        idx = 0
        for i, s in enumerate(self.segments):
            if s.base <= offset:
                idx = i
        return idx

    @property
    def label(self) -> str:
        return f"seed {self.seed} {self.topic}-{self.partition}"


@dataclass(frozen=True)
class Corpus:
    seed: int
    root: Path  # the log dir
    partitions: dict[tuple[str, int], PartitionTruth]

    @property
    def topics(self) -> list[str]:
        return sorted({t for t, _ in self.partitions})


def corpus_available() -> str | None:
    """None if the generator can run, else why not (for ``pytest.skip``)."""
    return kafka_oracle.oracle_available(SOURCE)


def generator_digest() -> str:
    return hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]


def generate(root: Path, seeds: Iterable[int], *, timeout: float | None = 600) -> list[Corpus]:
    """The corpora of ``seeds`` under ``root`` (``root/<seed>/``), in the order given.

    Corpora already in ``root`` from the same generator source are reused; the missing ones are
    written by one JVM. Raises :class:`kafka_oracle.OracleError` when Java or the jars are missing or
    the generator fails.
    """
    seeds = list(seeds)
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    digest = generator_digest()
    with kafka_oracle._locked(root / ".lock"):
        stamp = root / STAMP
        if not stamp.exists() or stamp.read_text().strip() != digest:
            for d in root.iterdir():  # corpora of another generator version
                if d.is_dir() and d.name.lstrip("-").isdigit():
                    shutil.rmtree(d)
            stamp.write_text(digest + "\n")
        missing = [s for s in dict.fromkeys(seeds) if not (root / str(s)).is_dir()]
        if missing:
            _run(root, missing, timeout)
    return [load(root / str(s), s) for s in seeds]


def _run(root: Path, seeds: Sequence[int], timeout: float | None) -> None:
    classpath = kafka_oracle.java_classpath(SOURCE)
    cmd = ["java", *JVM_OPTIONS, "-cp", classpath, MAIN_CLASS, str(root), *map(str, seeds)]
    try:
        proc = subprocess.run(cmd, capture_output=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise kafka_oracle.OracleError(f"KafkaCorpus could not run: {e}") from e
    if proc.returncode != 0:
        tail = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-15:]
        raise kafka_oracle.OracleError(f"KafkaCorpus failed (exit {proc.returncode}): " + "\n".join(tail))
    done = {int(line.split()[1]) for line in proc.stdout.decode().splitlines() if line.startswith("#CORPUS ")}
    if done != set(seeds):
        raise kafka_oracle.OracleError(f"KafkaCorpus wrote {len(done)} of {len(seeds)} corpora")


def _b64(v: str | None) -> bytes | None:
    return None if v is None else base64.b64decode(v)


def load(root: Path, seed: int) -> Corpus:
    """A corpus written by the generator (its truth files parsed)."""
    parts: dict[tuple[str, int], PartitionTruth] = {}
    for path in sorted(root.glob("*.truth.jsonl")):
        first, _, rest = path.read_text(encoding="ascii").partition("\n")
        head = json.loads(first)
        records = tuple(
            TruthRecord(o["offset"], _b64(o["key"]), _b64(o["value"]), o["timestamp"], o["timestamp_type"],
                        tuple((k, _b64(v)) for k, v in o["headers"]), o["producer_id"], o["transactional"],
                        o["txn"], o["magic"], o["codec"])
            for o in json.loads("[" + rest.rstrip("\n").replace("\n", ",") + "]"))
        topic, partition = head["topic"], head["partition"]
        parts[(topic, partition)] = PartitionTruth(
            seed=seed, topic=topic, partition=partition, dir=root / f"{topic}-{partition}",
            log_start_offset=head["log_start_offset"], log_end_offset=head["log_end_offset"],
            last_stable_offset=head["last_stable_offset"],
            segments=tuple(SegmentInfo(s["base"], s["bytes"], s["batches"], s["max_timestamp"])
                           for s in head["segments"]),
            txns=tuple(Txn(t["producer_id"], t["first_offset"], t["marker_offset"], t["status"]) for t in head["txns"]),
            markers=tuple(Marker(m["offset"], m["producer_id"], m["type"], m["stray"], m["timestamp"])
                          for m in head["markers"]),
            empty_batches=tuple((a, b) for a, b in head["empty_batches"]),
            batches=head["batches"], records=records)
        if len(records) != head["records"]:
            raise ValueError(f"{path}: {len(records)} records, the header says {head['records']}")
    if not parts:
        raise ValueError(f"no truth files in {root}")
    return Corpus(seed, root, parts)


# --- what Kafka's consumer returns -------------------------------------------------------------------


def clamp(truth: PartitionTruth, *, read_committed: bool, start: int | None, end: int | None) -> tuple[int, int]:
    """``[start, end)`` clamped to ``[log start, LSO or LEO]`` (None: that bound)."""
    limit = truth.last_stable_offset if read_committed else truth.log_end_offset
    lo = truth.log_start_offset if start is None else max(start, truth.log_start_offset)
    hi = limit if end is None else min(end, limit)
    return lo, max(lo, hi)


def expected_rows(truth: PartitionTruth, *, read_committed: bool, start: int | None = None,
                  end: int | None = None, include_headers: bool = True) -> list[Row]:
    """The records a Kafka consumer returns for ``[start, end)`` of the partition, as rows.

    read_uncommitted: every data record in range; read_committed: those below the last stable offset
    that are not transactional or whose transaction committed. Control records never.
    """
    lo, hi = clamp(truth, read_committed=read_committed, start=start, end=end)
    out = []
    for r in truth.records:
        if not lo <= r.offset < hi:
            continue
        if read_committed and r.transactional and r.txn != "committed":
            continue
        row: Row = {"key": r.key, "value": r.value, "topic": truth.topic, "partition": truth.partition,
                    "offset": r.offset, "timestamp": r.timestamp, "timestampType": r.timestamp_type}
        if include_headers:
            row["headers"] = list(r.headers) or None
        out.append(row)
    return out


def expected_offset_for_timestamp(truth: PartitionTruth, timestamp: int) -> tuple[int, int] | None:
    """ListOffsets for ``timestamp`` (>= 0): ``(timestamp, offset)`` of the first record, data or
    control, at or after the log start offset whose timestamp is at or after it, or None.

    As ``UnifiedLog.fetchOffsetByTimestamp``: only the first segment whose largest timestamp reaches
    ``timestamp`` is searched (``LogSegment.findOffsetByTimestamp`` from the log start offset on), so a
    match found only in a later segment is no match (that segment's largest timestamp may come from
    an empty batch, records below the log start offset, or its mtime when it has no timestamps).
    """
    # LogSegment.largestTimestamp: the file's mtime when no batch has a timestamp (only magic 0, or
    # empty): later than any timestamp the generator writes
    seg = next((i for i, s in enumerate(truth.segments) if s.max_timestamp < 0 or s.max_timestamp >= timestamp),
               None)
    if seg is None:
        return None
    lo = max(truth.segments[seg].base, truth.log_start_offset)
    hi = truth.segments[seg + 1].base if seg + 1 < len(truth.segments) else truth.log_end_offset
    found = [(r.offset, r.timestamp) for r in truth.records if lo <= r.offset < hi and r.timestamp >= timestamp]
    found += [(m.offset, m.timestamp) for m in truth.markers if lo <= m.offset < hi and m.timestamp >= timestamp]
    if not found:
        return None
    offset, ts = min(found)
    return ts, offset


# --- what klog returned ----------------------------------------------------------------------------

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def _ms_of_datetime(t: dt.datetime) -> int | float:
    """Epoch milliseconds of a datetime (naive: local time, as PySpark's collect gives them); a
    fraction of a millisecond stays visible as a float."""
    aware = t if t.tzinfo is not None else t.astimezone()
    us = (aware - _EPOCH) // dt.timedelta(microseconds=1)
    return us // 1000 if us % 1000 == 0 else us / 1000


def _ms_column(col: pa.ChunkedArray | pa.Array) -> list[int | float | None]:
    if pa.types.is_timestamp(col.type):
        per_ms = {"s": 1 / 1000, "ms": 1, "us": 1000, "ns": 1_000_000}[col.type.unit]
        raw = col.cast(pa.int64()).to_pylist()
        if per_ms == 1:
            return raw
        out: list[int | float | None] = []
        for v in raw:
            if v is None:
                out.append(None)
            elif per_ms < 1:
                out.append(int(v * 1000))
            else:
                q, rem = divmod(v, int(per_ms))
                out.append(q if rem == 0 else v / per_ms)
        return out
    return col.to_pylist()  # an integer column: already ms


def _bytes(v: Any) -> bytes | None:
    return None if v is None else bytes(v)


def _headers(v: Any) -> list[tuple[str, bytes | None]] | None:
    if v is None:
        return None
    return [(h["key"], _bytes(h["value"])) for h in v]  # dicts from Arrow, Row(key, value)s from Spark


_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType")


def rows_of(data: pa.Table | pa.RecordBatch | Sequence[Any]) -> list[Row]:
    """klog's output (an Arrow table or batch in :func:`storage_core.record.columnar.kafka_schema`, or the
    ``Row`` objects of a Spark ``collect()``) as rows comparable with :func:`expected_rows`."""
    if isinstance(data, (pa.Table, pa.RecordBatch)):
        names = [n for n in _COLUMNS if n in data.schema.names]
        if "headers" in data.schema.names:
            names.append("headers")
        columns = []
        for name in names:
            values = _ms_column(data.column(name)) if name == "timestamp" else data.column(name).to_pylist()
            if name == "headers":
                values = [None if v is None else _headers(v) for v in values]
            columns.append(values)
        return [dict(zip(names, row, strict=True)) for row in zip(*columns, strict=True)]
    out = []
    for r in data:
        d = r.asDict(recursive=False) if hasattr(r, "asDict") else dict(r)
        ts = d["timestamp"]
        row = {"key": _bytes(d["key"]), "value": _bytes(d["value"]), "topic": d["topic"],
               "partition": d["partition"], "offset": d["offset"],
               "timestamp": _ms_of_datetime(ts) if isinstance(ts, dt.datetime) else ts,
               "timestampType": d["timestampType"]}
        if "headers" in d:
            row["headers"] = _headers(d["headers"])
        out.append(row)
    return out


# --- comparing --------------------------------------------------------------------------------------


def _short(v: Any) -> str:
    if isinstance(v, bytes):
        return repr(v[:24]) + (f"...({len(v)} bytes)" if len(v) > 24 else "")
    if isinstance(v, list):
        return "[" + ", ".join(f"({k!r}, {_short(x)})" for k, x in v) + "]"
    return repr(v)


def _row_key(r: Row) -> tuple[str, int, int]:
    return (r["topic"], r["partition"], r["offset"])


def diff_rows(got: Sequence[Row], want: Sequence[Row], context: str = "", *, limit: int = 6) -> str | None:
    """None if ``got`` and ``want`` hold the same rows (in any order), else a short description:
    counts, the first differing offset of each partition, and which fields differ there."""
    g = sorted(got, key=_row_key)
    w = sorted(want, key=_row_key)
    if g == w:
        return None
    lines = [f"{context}: klog returned {len(g)} rows, Kafka's consumer {len(w)}"]
    gk = {_row_key(r): r for r in g}
    wk = {_row_key(r): r for r in w}
    if len(gk) != len(g):
        dups = len(g) - len(gk)
        lines.append(f"  {dups} duplicate (topic, partition, offset) rows in klog's output")
    parts = sorted({k[:2] for k in gk} | {k[:2] for k in wk})
    shown = 0
    for tp in parts:
        keys = sorted(k for k in set(gk) | set(wk) if k[:2] == tp)
        missing = [k[2] for k in keys if k not in gk]
        extra = [k[2] for k in keys if k not in wk]
        changed = [k for k in keys if k in gk and k in wk and gk[k] != wk[k]]
        if not (missing or extra or changed):
            continue
        first = min([*missing, *extra, *(k[2] for k in changed)])
        desc = [f"  {tp[0]}-{tp[1]}: first differing offset {first}"]
        if missing:
            desc.append(f"{len(missing)} missing (e.g. {missing[:8]})")
        if extra:
            desc.append(f"{len(extra)} unexpected (e.g. {extra[:8]})")
        if changed:
            desc.append(f"{len(changed)} with other contents")
        lines.append("; ".join(desc))
        k = (tp[0], tp[1], first)
        if k in gk and k in wk:
            for name in wk[k]:
                if gk[k].get(name) != wk[k][name]:
                    lines.append(f"    {name}: klog {_short(gk[k].get(name))}, Kafka {_short(wk[k][name])}")
            for name in set(gk[k]) - set(wk[k]):
                lines.append(f"    {name}: klog {_short(gk[k][name])}, Kafka has no such column")
        else:
            whose, row = ("Kafka", wk[k]) if k in wk else ("klog", gk[k])
            lines.append(f"    {whose}'s row: " + ", ".join(f"{n}={_short(v)}" for n, v in row.items()))
        shown += 1
        if shown >= limit:
            lines.append("  ...")
            break
    if shown == 0:  # same keys and contents: only the duplicates differ
        lines.append("  (same rows apart from duplicates)")
    return "\n".join(lines)


def available_now_rows(spark: Any, stream: Any, name: str, checkpoint: Path, timeout: float = 600) -> list[Row]:
    """Run ``stream`` (a ``readStream`` DataFrame) once with ``Trigger.AvailableNow`` into a memory
    table ``name``, failing with the query's exception if it has one, and return the rows it
    wrote as :func:`rows_of` gives them."""
    q = (stream.writeStream.format("memory").queryName(name).trigger(availableNow=True)
         .option("checkpointLocation", str(checkpoint)).start())
    try:
        q.awaitTermination(timeout)
        assert q.exception() is None, q.exception()
    finally:
        q.stop()
    return rows_of(spark.sql(f"select * from {name}").collect())


def assert_same_rows(got: Sequence[Row], want: Sequence[Row], context: str = "") -> None:
    """Fail with :func:`diff_rows`' description unless ``got`` and ``want`` hold the same rows."""
    msg = diff_rows(got, want, context)
    if msg is not None:
        raise AssertionError(msg)


def corpus_root_for_workers(base: Path) -> Path:
    """A corpus root shared by the pytest-xdist workers of one run (``base`` is the run's basetemp
    parent when under xdist): the generator's digest names it."""
    return base / f"klog-corpora-{generator_digest()}"


def env_int(name: str, default: int) -> int:
    v = os.environ.get(name)
    return default if not v else int(v)
