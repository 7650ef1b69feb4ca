"""Differential tests of klog's read paths against random partitions written by Kafka's own code.

``kafka_corpus`` has kafka-clients 4.3.0 write a few hundred random log dirs (producers of every kind,
transactions that commit, abort or hang, legacy message sets, every codec, gaps, empty batches,
segments of random sizes, log start offsets) and knows, because it made them, what a Kafka consumer
reads from each. Each read path of klog must return exactly that, under read_uncommitted and
read_committed, over the whole log and over random offset ranges.

``KLOG_CORPUS_SEEDS`` (default 200) and ``KLOG_CORPUS_SEED_BASE`` (default 1) choose the seeds; a
failure names its seed, partition and first differing offset, and
``KLOG_CORPUS_SEEDS=1 KLOG_CORPUS_SEED_BASE=<seed>`` runs that corpus alone.
"""

from __future__ import annotations

import base64
import json
import os
import random
import shutil
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import kafka_corpus as kc
import kafka_oracle
import pyarrow.parquet as pq
import pytest

from storage_core.errors import OffsetOutOfRangeError
from storage_core.log.checkpoint import OffsetCheckpointFile
from storage_core.log.log import Log
from storage_core.log.manager import PartitionDir, open_log_read_only
from storage_core.log.topic_partition import TopicPartition
from storage_core.record.columnar import decode_batches
from storage_core.tools.export import ExportRequest, export_parquet, plan_export

pytestmark = pytest.mark.interop

SEED_BASE = kc.env_int("KLOG_CORPUS_SEED_BASE", 1)
SEEDS = list(range(SEED_BASE, SEED_BASE + kc.env_int("KLOG_CORPUS_SEEDS", 200)))
CHUNKS = 4  # the differential tests run per chunk of seeds (pytest-xdist spreads them)
SANITY_SEEDS = SEEDS[:40]  # decoded by Kafka's own reader too (a JVM run over every segment)
SPARK_SEEDS = SEEDS[:8]
I64_MAX = (1 << 63) - 1


def _chunk(i: int) -> list[int]:
    return SEEDS[i::CHUNKS]


@pytest.fixture(scope="session")
def corpora(tmp_path_factory: pytest.TempPathFactory) -> dict[int, kc.Corpus]:
    """Every seed's corpus, generated once per test run (shared by pytest-xdist workers)."""
    reason = kc.corpus_available()
    if reason is not None:
        pytest.skip(reason)
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the run's directory, shared by its workers
    root = kc.corpus_root_for_workers(base)
    return {c.seed: c for c in kc.generate(root, SEEDS)}


def _partition_dir(c: kc.Corpus, truth: kc.PartitionTruth) -> PartitionDir:
    return PartitionDir(TopicPartition(truth.topic, truth.partition), truth.dir, c.root)


def _ranges(truth: kc.PartitionTruth, read_committed: bool, n: int = 2) -> Iterator[tuple[int | None, int | None]]:
    """The whole log, then ``n`` random ``[start, end)`` ranges of it (as a consumer could ask for)."""
    yield None, None
    rng = random.Random(f"{truth.seed}/{truth.topic}/{truth.partition}/{read_committed}")
    limit = truth.last_stable_offset if read_committed else truth.log_end_offset
    for _ in range(n):
        start = rng.randint(truth.log_start_offset, max(truth.log_start_offset, limit))
        end = None if rng.random() < 0.2 else rng.randint(start, limit + 2)
        yield start, end


def _fail_if(failures: list[str], what: str) -> None:
    if failures:
        shown = "\n".join(failures[:8])
        more = f"\n... and {len(failures) - 8} more" if len(failures) > 8 else ""
        pytest.fail(f"{len(failures)} {what} differ from Kafka:\n{shown}{more}", pytrace=False)


# --- (a) the generator writes what it claims --------------------------------------------------------

_TS_TYPES = {"CreateTime": 0, "LogAppendTime": 1, "NoTimestampType": -1}


def _b64(b: bytes | None) -> str | None:
    return None if b is None else base64.b64encode(b).decode()


def _check_against_kafka(c: kc.Corpus, truth: kc.PartitionTruth, dumps: dict[str, kafka_oracle.DumpResult]) -> list[str]:
    """What Kafka's FileRecords decodes from the partition's segments, against the truth."""
    errs: list[str] = []
    segs = sorted(truth.dir.glob("*.log"))
    if [int(p.name.split(".")[0]) for p in segs] != [s.base for s in truth.segments]:
        errs.append(f"segment files {[p.name for p in segs]} are not {truth.segments}")
        return errs
    data, controls, empties, batches = [], [], [], []
    for i, (path, seg) in enumerate(zip(segs, truth.segments, strict=True)):
        res = dumps[str(path)]
        if res.error or res.valid_bytes != res.size_in_bytes or res.size_in_bytes != seg.bytes:
            errs.append(f"{path.name}: Kafka read {res.valid_bytes} of {res.size_in_bytes} bytes ({res.error})")
        seg_batches = []
        seg_max_ts = -1
        for line in res.lines:
            o = json.loads(line)
            b = (o["batch_base_offset"], o["batch_last_offset"])
            if not seg_batches or seg_batches[-1] != b:
                seg_batches.append(b)
            if o["offset"] is None:
                empties.append(b)
                continue
            seg_max_ts = max(seg_max_ts, o["timestamp"])
            if o["is_control"]:
                controls.append((o["offset"], o["producer_id"], o["control_type"], o["timestamp"]))
            else:
                data.append(o)
        has_empty = any(seg.base <= a and (i + 1 == len(truth.segments) or a < truth.segments[i + 1].base)
                        for a, _ in truth.empty_batches)
        if seg_max_ts > seg.max_timestamp or (not has_empty and seg_max_ts != seg.max_timestamp):
            errs.append(f"{path.name}: largest record timestamp {seg_max_ts}, the truth says {seg.max_timestamp}")
        if len(seg_batches) != seg.batches:
            errs.append(f"{path.name}: {len(seg_batches)} batches, the truth says {seg.batches}")
        if seg_batches and seg_batches[0][0] < seg.base:
            errs.append(f"{path.name}: first batch at {seg_batches[0][0]}, below the segment's base offset")
        batches += seg_batches
    if any(b[0] <= a[1] for a, b in zip(batches, batches[1:], strict=False)):
        errs.append("batches do not move forward in offsets")
    leo = batches[-1][1] + 1 if batches else truth.segments[0].base
    leo = max(leo, truth.segments[-1].base)  # an empty active segment rolled at the end
    if leo != truth.log_end_offset:
        errs.append(f"log end offset {leo} per Kafka's decoding, the truth says {truth.log_end_offset}")
    if controls != [(m.offset, m.producer_id, m.type, m.timestamp) for m in truth.markers]:
        errs.append(f"control records {controls[:5]}... are not the truth's markers {truth.markers[:5]}...")
    if empties != list(truth.empty_batches):
        errs.append(f"empty batches {empties} are not {truth.empty_batches}")
    want = [(r.offset, _b64(r.key), _b64(r.value), r.timestamp, r.timestamp_type,
             [[k, _b64(v)] for k, v in r.headers], r.producer_id, r.transactional, r.magic, r.codec)
            for r in truth.records]
    got = [(o["offset"], o["key_b64"], o["value_b64"], o["timestamp"], _TS_TYPES[o["timestamp_type"]], o["headers"],
            o["producer_id"], o["is_transactional"], o["magic"], o["compression"]) for o in data]
    if got != want:
        i = next((i for i, (g, w) in enumerate(zip(got, want, strict=False)) if g != w), min(len(got), len(want)))
        errs.append(f"data records differ at #{i} of {len(got)}/{len(want)}: Kafka "
                    f"{got[i] if i < len(got) else None}, truth {want[i] if i < len(want) else None}")
    # the truth's own bookkeeping: transaction states, markers and the last stable offset
    open_firsts = [t.first_offset for t in truth.txns if t.status == "open"]
    lso = max(min(open_firsts), truth.log_start_offset) if open_firsts else truth.log_end_offset
    if lso != truth.last_stable_offset:
        errs.append(f"last stable offset {truth.last_stable_offset}, the open transactions say {lso}")
    markers = {m.offset: m for m in truth.markers}
    for t in truth.txns:
        m = markers.get(t.marker_offset) if t.marker_offset is not None else None
        if (t.status == "open") != (m is None) or (m is not None and (m.stray or m.producer_id != t.producer_id
                                                                      or m.type != {"committed": "COMMIT",
                                                                                    "aborted": "ABORT"}[t.status])):
            errs.append(f"transaction {t} does not match its marker {m}")
    for r in truth.records:
        if r.transactional:
            owner = [t for t in truth.txns if t.producer_id == r.producer_id and t.first_offset <= r.offset
                     and (t.marker_offset is None or r.offset < t.marker_offset)]
            if len(owner) != 1 or owner[0].status != r.txn:
                errs.append(f"record {r.offset} says its transaction is {r.txn}, the transactions say {owner}")
                break
    starts = OffsetCheckpointFile(c.root / "log-start-offset-checkpoint").read()
    tp = TopicPartition(truth.topic, truth.partition)
    first_base = truth.segments[0].base
    if max(starts.get(tp, first_base), first_base) != truth.log_start_offset:
        errs.append(f"log start offset {truth.log_start_offset}, the checkpoint says {starts.get(tp)}")
    return [f"{truth.label}: {e}" for e in errs]


def test_truth_is_what_kafka_decodes(corpora: dict[int, kc.Corpus]) -> None:
    """Every segment of the first corpora decoded by Kafka's own FileRecords: the data records,
    markers, empty batches, batch and segment layout, log end offset and log start checkpoint are
    the truth's, and the truth's transactions agree with its records and last stable offset."""
    parts = [(corpora[s], t) for s in SANITY_SEEDS for t in corpora[s].partitions.values()]
    paths = [p for _, t in parts for p in sorted(t.dir.glob("*.log"))]
    dumps = kafka_oracle.kafka_dump(paths, timeout=600)
    failures = [e for c, t in parts for e in _check_against_kafka(c, t, dumps)]
    _fail_if(failures, "partitions' truths")


def test_corpora_cover_the_features(corpora: dict[int, kc.Corpus]) -> None:
    """The seeds together hold every kind of data the generator is meant to make."""
    seen: Counter[str] = Counter()
    for c in corpora.values():
        if (c.root / "log-start-offset-checkpoint").exists():
            seen["log start checkpoint"] += 1
        for t in c.partitions.values():
            seen[f"{len(t.segments)} segments" if len(t.segments) < 3 else "3+ segments"] += 1
            if not t.records:
                seen["partition without records"] += 1
            if t.log_start_offset > t.segments[0].base:
                seen["log start above the first segment"] += 1
            if t.last_stable_offset < t.log_end_offset:
                seen["open transaction"] += 1
            if t.empty_batches:
                seen["empty batch"] += 1
            if any(m.stray for m in t.markers):
                seen["marker ending nothing"] += 1
            if _abort_then_commit_in_a_later_segment(t):
                seen["abort, then a commit in a later segment"] += 1
            if any(t.segment_index(x.marker_offset) > t.segment_index(x.first_offset)
                   for x in t.txns if x.marker_offset is not None):
                seen["marker in a later segment than its data"] += 1
            offsets = [r.offset for r in t.records]
            if any(b - a > 1 for a, b in zip(offsets, offsets[1:], strict=False)):
                seen["offset gap"] += 1
            for r in t.records:
                seen[f"magic {r.magic}"] += 1
                seen[f"codec {r.codec}"] += 1
                seen[f"timestamp type {r.timestamp_type}"] += 1
                seen[f"txn {r.txn}"] += 1
                if r.key is None:
                    seen["null key"] += 1
                if r.value is None:
                    seen["tombstone"] += 1
                if r.value == b"":
                    seen["empty value"] += 1
                if any(v is None for _, v in r.headers):
                    seen["header with a null value"] += 1
                if r.magic == 2 and r.timestamp == -1:
                    seen["v2 record without timestamp"] += 1
            for i, s in enumerate(t.segments):
                first = next((r.offset for r in t.records if t.segment_index(r.offset) == i), None)
                if first is not None and first > s.base:
                    seen["segment named below its first record"] += 1
    wanted = ["log start checkpoint", "1 segments", "2 segments", "3+ segments", "partition without records",
              "log start above the first segment", "open transaction", "empty batch", "marker ending nothing",
              "abort, then a commit in a later segment", "marker in a later segment than its data", "offset gap",
              "magic 0", "magic 1", "magic 2", "codec none", "codec gzip", "codec snappy", "codec lz4", "codec zstd",
              "timestamp type -1", "timestamp type 0", "timestamp type 1", "txn committed", "txn aborted",
              "txn open", "txn None", "null key", "tombstone", "empty value", "header with a null value",
              "v2 record without timestamp", "segment named below its first record"]
    if len(SEEDS) >= 100:
        assert [w for w in wanted if not seen[w]] == [], dict(seen)


def _abort_then_commit_in_a_later_segment(t: kc.PartitionTruth) -> tuple[int, int] | None:
    """(ABORT marker offset, committed record offset) when a producer's aborted transaction ends in a
    segment before one holding a readable record of a later committed transaction of the same
    producer: the case of the read_committed piece bug. None if the partition has no such case."""
    for a in t.txns:
        if a.status != "aborted" or a.marker_offset is None or not t.log_start_offset <= a.marker_offset:
            continue
        if a.first_offset >= t.last_stable_offset:
            continue
        seg = t.segment_index(a.marker_offset)
        for r in t.records:
            if (r.producer_id == a.producer_id and r.txn == "committed" and a.marker_offset < r.offset
                    < t.last_stable_offset and t.segment_index(r.offset) > seg):
                return a.marker_offset, r.offset
    return None


# --- (c) differential: the engine paths --------------------------------------------------------------


def test_offsets_are_kafkas(corpora: dict[int, kc.Corpus]) -> None:
    """A read-only open gives the log start, log end and last stable offsets Kafka would."""
    failures = []
    for c in corpora.values():
        for t in c.partitions.values():
            with open_log_read_only(_partition_dir(c, t)) as lg:
                got = (lg.log_start_offset, lg.log_end_offset, lg.last_stable_offset)
            want = (t.log_start_offset, t.log_end_offset, t.last_stable_offset)
            if got != want:
                failures.append(f"{t.label}: (log start, log end, last stable) offsets are {got}, Kafka's {want}")
    _fail_if(failures, "partitions' offsets")


def _timestamps(t: kc.PartitionTruth) -> list[int]:
    """Timestamps to look up: records' own, one more and one less, and beyond every one."""
    stamps = sorted({r.timestamp for r in t.records if r.timestamp >= 0} | {m.timestamp for m in t.markers})
    if not stamps:
        return [0, kc.TRUTH_T0]
    rng = random.Random(f"{t.seed}/{t.topic}/{t.partition}/timestamps")
    picked = rng.sample(stamps, min(3, len(stamps)))
    return sorted({0, stamps[0] - 1, stamps[-1], stamps[-1] + 1, *picked, *(x + 1 for x in picked),
                   *(x - 1 for x in picked if x > 0)})


def test_offset_for_timestamp_is_kafkas(corpora: dict[int, kc.Corpus]) -> None:
    """``Log.offset_for_timestamp`` (ListOffsets; what startingTimestamp, endingTimestamp and export's
    time bounds resolve with) gives Kafka's (timestamp, offset), or nothing where Kafka finds nothing."""
    failures = []
    for c in corpora.values():
        for t in c.partitions.values():
            with open_log_read_only(_partition_dir(c, t)) as lg:
                for ts in _timestamps(t):
                    found = lg.offset_for_timestamp(ts)
                    got = None if found is None else (found.timestamp, found.offset)
                    want = kc.expected_offset_for_timestamp(t, ts)
                    if got != want:
                        failures.append(f"{t.label}: timestamp {ts}: klog (timestamp, offset) {got}, Kafka {want}")
                        break
    _fail_if(failures, "ListOffsets lookups")


def _log_batches_rows(lg: Log, t: kc.PartitionTruth, read_committed: bool, start: int | None, end: int | None,
                      native: bool | None) -> list[kc.Row]:
    lo = lg.log_start_offset if start is None else start
    batches = lg.batches(start, end, read_committed=read_committed)
    # Log.batches gives whole batches: the one holding the end (the LSO) may run past it
    hi = lg.last_stable_offset if read_committed else I64_MAX
    table = decode_batches(batches, t.topic, t.partition, include_headers=True, min_offset=lo,
                           end_offset=min(hi, I64_MAX if end is None else end), native=native)
    return kc.rows_of(table)


@pytest.mark.parametrize("read_committed", [False, True], ids=["read_uncommitted", "read_committed"])
@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_log_batches_decode_as_kafka_reads(corpora: dict[int, kc.Corpus], chunk: int, read_committed: bool) -> None:
    """``Log.batches(start, end, read_committed=...)`` decoded by ``decode_batches`` (the native
    kernel; for a third of the seeds also the pure-Python twin over the whole log) is what Kafka's
    consumer returns for the range."""
    failures = []
    for seed in _chunk(chunk):
        c = corpora[seed]
        for t in c.partitions.values():
            with open_log_read_only(_partition_dir(c, t)) as lg:
                for i, (start, end) in enumerate(_ranges(t, read_committed)):
                    want = kc.expected_rows(t, read_committed=read_committed, start=start, end=end)
                    for native in (None, False) if i == 0 and seed % 3 == 0 else (None,):
                        try:
                            got = _log_batches_rows(lg, t, read_committed, start, end, native)
                        except Exception as e:  # noqa: BLE001 - any failure of the read is a finding
                            failures.append(f"{t.label} [{start}, {end}): {type(e).__name__}: {e}")
                            continue
                        how = "python" if native is False else "kernel"
                        msg = kc.diff_rows(got, want, f"{t.label} [{start}, {end}) {how}")
                        if msg:
                            failures.append(msg)
    _fail_if(failures, "Log.batches reads")


def _export_plan(c: kc.Corpus, read_committed: bool) -> Iterator[tuple[str, int | None, int | None]]:
    """(topic, start, end) to export: each topic of the corpus once, in one isolation level or the
    other (alternating; an export costs tens of ms), whole or over a random range valid for all its
    partitions."""
    for i, topic in enumerate(c.topics):
        if (c.seed + i) % 2 != read_committed:
            continue
        parts = [t for (tp, _), t in c.partitions.items() if tp == topic]
        rng = random.Random(f"{c.seed}/{topic}/{read_committed}/export")
        if rng.random() < 0.3:
            yield topic, None, None
            continue
        lo = max(t.log_start_offset for t in parts)
        hi = max(t.log_end_offset for t in parts)
        start = None if rng.random() < 0.2 else rng.randint(lo, max(lo, hi))
        end = None if rng.random() < 0.2 else rng.randint(start or 0, hi + 2)
        yield topic, start, end


@pytest.mark.parametrize("read_committed", [False, True], ids=["read_uncommitted", "read_committed"])
@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_export_parquet_is_what_kafka_reads(corpora: dict[int, kc.Corpus], chunk: int, read_committed: bool,
                                           tmp_path: Path) -> None:
    """``plan_export`` + ``export_parquet`` of topics, whole or over a random offset range."""
    failures = []
    out = tmp_path / "export.parquet"
    for seed in _chunk(chunk):
        c = corpora[seed]
        for topic, start, end in _export_plan(c, read_committed):
            req = ExportRequest(log_dirs=(str(c.root),), topic=topic, start_offset=start, end_offset=end,
                                read_committed=read_committed, include_headers=True)
            want = [r for (tp, _), t in sorted(c.partitions.items()) if tp == topic
                    for r in kc.expected_rows(t, read_committed=read_committed, start=start, end=end)]
            label = f"seed {seed} topic {topic} [{start}, {end})"
            parts = [t for (tp, _), t in c.partitions.items() if tp == topic]
            latest = [t.last_stable_offset if read_committed else t.log_end_offset for t in parts]
            if start is not None and (start > min(latest) or start < max(t.log_start_offset for t in parts)):
                # as Spark's startingOffsets: an offset that does not exist in some partition fails
                # the export before anything is written (failOnDataLoss)
                with pytest.raises(OffsetOutOfRangeError):
                    plan_export(req)
                continue
            try:
                export_parquet(req, plan_export(req), out, overwrite=True, compression="none")
                got = kc.rows_of(pq.read_table(out))
            except Exception as e:  # noqa: BLE001 - any failure of the export is a finding
                failures.append(f"{label}: {type(e).__name__}: {e}")
                continue
            msg = kc.diff_rows(got, want, label)
            if msg:
                failures.append(msg)
    _fail_if(failures, "exports")


@pytest.mark.parametrize("broker_state", ["clean-shutdown", "recovery-point"])
def test_read_committed_of_a_log_dir_copied_without_its_index_files(
        corpora: dict[int, kc.Corpus], broker_state: str, tmp_path: Path) -> None:
    """A broker's log dir copied without its index files keeps ``.kafka_cleanshutdown`` or a
    ``recovery-point-offset-checkpoint`` at the log end. Kafka recovers every segment whose ``.index``
    is missing wherever it sits (``LogLoader.loadSegmentFiles``: ``sanityCheck`` fails, then
    ``recoverSegment``), rebuilding its aborted transactions; a read_committed read must still
    leave out aborted transactions."""
    failures = []
    with_aborts = [c for c in map(corpora.__getitem__, SEEDS)
                   if any(x.status == "aborted" for t in c.partitions.values() for x in t.txns)][:20]
    for c in with_aborts:
        root = tmp_path / str(c.seed)
        shutil.copytree(c.root, root)
        if broker_state == "clean-shutdown":
            (root / ".kafka_cleanshutdown").write_text('{"version":0,"brokerEpoch":1}')
        else:
            entries = [f"{t.topic} {t.partition} {t.log_end_offset}" for t in c.partitions.values()]
            (root / "recovery-point-offset-checkpoint").write_text("\n".join(["0", str(len(entries)), *entries, ""]))
        for t in c.partitions.values():
            pd = PartitionDir(TopicPartition(t.topic, t.partition), root / t.dir.name, root)
            try:
                with open_log_read_only(pd) as lg:
                    got = kc.rows_of(decode_batches(lg.batches(read_committed=True), t.topic, t.partition,
                                                    include_headers=True, min_offset=lg.log_start_offset,
                                                    end_offset=lg.last_stable_offset))
            except Exception as e:  # noqa: BLE001 - any failure of the read is a finding
                failures.append(f"{t.label} ({broker_state}): {type(e).__name__}: {e}")
                continue
            msg = kc.diff_rows(got, kc.expected_rows(t, read_committed=True), f"{t.label} ({broker_state})")
            if msg:
                failures.append(msg)
    _fail_if(failures, "read_committed reads")


# --- (b) and Spark ------------------------------------------------------------------------------------


def _require_case(found: list[kc.Corpus], what: str) -> None:
    """The full seed set must hold the case a regression test needs; a few seeds may not."""
    if not found:
        if len(SEEDS) < 100:
            pytest.skip(f"none of the {len(SEEDS)} seeds has {what}")
        pytest.fail(f"none of the {len(SEEDS)} corpora has {what}: the generator no longer makes it")


def _spark_rows(spark: object, root: Path, read_committed: bool, options: dict[str, str] | None = None) -> list[kc.Row]:
    reader = spark.read.format("klog").option("includeHeaders", "true")  # type: ignore[attr-defined]
    if read_committed:
        reader = reader.option("isolationLevel", "read_committed")
    for k, v in (options or {}).items():
        reader = reader.option(k, v)
    return kc.rows_of(reader.load(str(root)).toArrow())


def _spark_failures(spark: object, corpora: list[kc.Corpus], read_committed: bool,
                    note: Callable[[kc.PartitionTruth], str] = lambda t: "") -> list[str]:
    failures = []
    for c in corpora:
        want = [r for _, t in sorted(c.partitions.items())
                for r in kc.expected_rows(t, read_committed=read_committed)]
        try:
            got = _spark_rows(spark, c.root, read_committed)
        except Exception as e:  # noqa: BLE001 - any failure of the read is a finding
            failures.append(f"seed {c.seed}: {type(e).__name__}: {str(e).strip().splitlines()[-2:]}")
            continue
        msg = kc.diff_rows(got, want, f"seed {c.seed}")
        if msg:
            notes = [f"  {t.label}: {note(t)}" for t in c.partitions.values() if note(t)]
            failures.append("\n".join([msg, *notes]))
    return failures


@pytest.mark.spark
def test_spark_read_committed_keeps_commits_after_an_abort_in_an_earlier_segment(
        spark: object, corpora: dict[int, kc.Corpus]) -> None:
    """Regression: under read_committed each piece (a segment's byte slice) must get the aborted
    transactions of its own offsets (Kafka: ABORT marker >= the piece's first offset, first offset <
    its end). Handed the list of the whole range, a piece after the one holding a producer's ABORT
    marker takes that producer for aborting and drops its later *committed* transactions."""
    with_case = [c for c in map(corpora.__getitem__, SEEDS)
                 if any(map(_abort_then_commit_in_a_later_segment, c.partitions.values()))
                 and not any(map(_open_below_log_start, c.partitions.values()))][:4]
    _require_case(with_case, "an aborted transaction followed by a committed one in a later segment")

    def note(t: kc.PartitionTruth) -> str:
        case = _abort_then_commit_in_a_later_segment(t)
        return "" if case is None else (f"ABORT marker at {case[0]}, then committed record {case[1]} of the same "
                                        "producer in a later segment")

    _fail_if(_spark_failures(spark, with_case, True, note), "Spark read_committed reads")


def _open_below_log_start(t: kc.PartitionTruth) -> bool:
    """An open transaction began below the log start offset (Kafka's LSO is then the log start)."""
    return any(x.status == "open" and x.first_offset < t.log_start_offset for x in t.txns)


@pytest.mark.spark
def test_spark_read_committed_when_an_open_transaction_began_below_the_log_start(
        spark: object, corpora: dict[int, kc.Corpus]) -> None:
    """Kafka's last stable offset is at least the log start offset (``UnifiedLog.updateFirstUnstableOffset``):
    a read_committed read of a partition whose oldest open transaction began below the log start (the
    log start moved up by DeleteRecords or retention) is empty there, not an error."""
    with_case = [c for c in map(corpora.__getitem__, SEEDS)
                 if any(map(_open_below_log_start, c.partitions.values()))
                 and not any(map(_abort_then_commit_in_a_later_segment, c.partitions.values()))][:2]
    _require_case(with_case, "an open transaction that began below the log start offset")
    _fail_if(_spark_failures(spark, with_case, True), "Spark read_committed reads")


@pytest.mark.spark
def test_spark_read_uncommitted_is_what_kafka_reads(spark: object, corpora: dict[int, kc.Corpus]) -> None:
    """Corpora through ``spark.read.format("klog")`` (planning, pieces, the bulk kernel path): whole
    (for some with pieces cut small at index entries), and over random per-partition offset ranges."""
    failures = []
    for c in map(corpora.__getitem__, SPARK_SEEDS):
        whole: dict[str, str] = {"maxBytesPerPartition": "3000"} if c.seed % 2 else {}
        rng = random.Random(f"{c.seed}/spark")
        starting: dict[str, dict[str, int]] = {}
        ending: dict[str, dict[str, int]] = {}
        want = []
        for (topic, p), t in sorted(c.partitions.items()):
            start = rng.randint(t.log_start_offset, t.log_end_offset)
            end = -1 if rng.random() < 0.3 else rng.randint(start, t.log_end_offset + 2)
            starting.setdefault(topic, {})[str(p)] = start
            ending.setdefault(topic, {})[str(p)] = end
            want += kc.expected_rows(t, read_committed=False, start=start, end=None if end == -1 else end)
        ranged = {"startingOffsets": json.dumps(starting), "endingOffsets": json.dumps(ending)}
        if any(int(e) > c.partitions[tp, int(p)].log_end_offset for tp, ends in ending.items() for p, e in ends.items()):
            ranged["failOnDataLoss"] = "false"  # an end past the end: read to the end (else an error, as Spark's)
        for options, expected in ((whole, None), (ranged, want)):
            if expected is None:
                expected = [r for _, t in sorted(c.partitions.items()) for r in kc.expected_rows(t, read_committed=False)]
            label = f"seed {c.seed} {options}"
            try:
                got = _spark_rows(spark, c.root, False, options)
            except Exception as e:  # noqa: BLE001 - any failure of the read is a finding
                failures.append(f"{label}: {type(e).__name__}: {str(e).strip().splitlines()[-2:]}")
                continue
            msg = kc.diff_rows(got, expected, label)
            if msg:
                failures.append(msg)
    _fail_if(failures, "Spark reads")


# --- the oracle's own functions ---------------------------------------------------------------------


def _toy_truth() -> kc.PartitionTruth:
    def rec(offset: int, txn: str | None, headers: tuple[tuple[str, bytes | None], ...] = ()) -> kc.TruthRecord:
        return kc.TruthRecord(offset, b"k", None, 1000 + offset, 0, headers, 7 if txn else -1, txn is not None,
                              txn, 2, "none")

    records = (rec(3, None), rec(4, "committed", (("h", None),)), rec(6, "aborted"), rec(8, None), rec(9, "open"),
               rec(11, None))
    return kc.PartitionTruth(seed=0, topic="t", partition=1, dir=Path("/nonexistent"), log_start_offset=4,
                             log_end_offset=12, last_stable_offset=9, segments=(kc.SegmentInfo(0, 1, 1, 1011),),
                             txns=(), markers=(), empty_batches=(), batches=0, records=records)


def test_expected_rows_follow_kafkas_consumer() -> None:
    t = _toy_truth()

    def offsets(**kw: object) -> list[int]:
        return [r["offset"] for r in kc.expected_rows(t, **kw)]  # type: ignore[arg-type]

    assert offsets(read_committed=False) == [4, 6, 8, 9, 11]  # from the log start offset
    assert offsets(read_committed=True) == [4, 8]  # below the LSO, aborted and open left out
    assert offsets(read_committed=False, start=5, end=9) == [6, 8]
    assert offsets(read_committed=True, start=0, end=100) == [4, 8]
    assert offsets(read_committed=False, start=20) == []
    row = kc.expected_rows(t, read_committed=False)[0]
    assert row == {"key": b"k", "value": None, "topic": "t", "partition": 1, "offset": 4, "timestamp": 1004,
                   "timestampType": 0, "headers": [("h", None)]}
    assert kc.expected_rows(t, read_committed=False)[1]["headers"] is None  # none: null, as Spark's source


def test_rows_of_arrow_and_spark_rows() -> None:
    import datetime as dt

    import pyarrow as pa

    from storage_core.record.columnar import kafka_schema

    schema = kafka_schema(include_headers=True)
    table = pa.table({"key": [b"k", None], "value": [None, b""], "topic": ["t", "t"], "partition": [1, 1],
                      "offset": [4, 5], "timestamp": pa.array([-1000, 1_700_000_000_123_000], pa.int64()),
                      "timestampType": [-1, 0], "headers": [[{"key": "h", "value": None}], None]},
                     ).cast(schema)
    want = [{"key": b"k", "value": None, "topic": "t", "partition": 1, "offset": 4, "timestamp": -1,
             "timestampType": -1, "headers": [("h", None)]},
            {"key": None, "value": b"", "topic": "t", "partition": 1, "offset": 5, "timestamp": 1_700_000_000_123,
             "timestampType": 0, "headers": None}]
    assert kc.rows_of(table) == want
    pyspark_sql = pytest.importorskip("pyspark.sql")
    spark_rows = [pyspark_sql.Row(key=bytearray(b"k"), value=None, topic="t", partition=1, offset=4,
                                  timestamp=dt.datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=dt.timezone.utc),
                                  timestampType=-1, headers=[pyspark_sql.Row(key="h", value=None)]),
                  pyspark_sql.Row(key=None, value=bytearray(), topic="t", partition=1, offset=5,
                                  timestamp=dt.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=dt.timezone.utc),
                                  timestampType=0, headers=None)]
    assert kc.rows_of(spark_rows) == want
    # a sub-millisecond timestamp is not rounded away; a difference is described briefly
    odd = table.set_column(5, "timestamp", pa.array([-999, 0], pa.timestamp("us", tz="UTC")))
    assert kc.rows_of(odd)[0]["timestamp"] == -0.999
    msg = kc.diff_rows(kc.rows_of(odd), want, "toy")
    assert msg is not None and "t-1: first differing offset 4" in msg and "timestamp: klog -0.999, Kafka -1" in msg
