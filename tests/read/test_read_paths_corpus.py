"""Every read path against Kafka-generated corpora and the generator's truth.

The corpora are log dirs written by kafka-clients 4.3.0's own ``MemoryRecordsBuilder``
(``tests/oracles/java/KafkaCorpus.java``, driven by ``tests/oracles/kafka_corpus.py``): interleaved producers,
commits and aborts whose markers land in other segments and pieces than their data, open
transactions, empty batches, offset gaps, all five codecs, legacy message sets, LogAppendTime,
random segment sizes, log start offsets. What a Kafka consumer returns is the generator's own
knowledge (it decided which transactions abort), never klog's reading of the files.

Paths checked, at both isolation levels, with random ranges:

* the engine: ``storage_core.read_arrow`` (the planner and the bulk piece reader), unsplit and split
  into random pieces (``maxRecordsPerPartition``/``minPartitions``) read one by one, each piece also
  through the per-batch reference filter: any split equals the unsplit read equals Kafka's truth;
  every corpus once as written (no indexes, not shut down cleanly) and, for half of them, again
  after a writable open rebuilt indexes, ``.txnindex`` files and checkpoints;
* ``klog export`` and ``klog dump --jsonl`` (the CLI, in-process);
* Spark batch reads (random JSON offsets, splits, pushed filters) and streams
  (``maxOffsetsPerTrigger``, ``Trigger.AvailableNow``).

``KLOG_CORPORA`` (default 200) and ``KLOG_SPARK_CORPORA`` (default 24) set how many corpora run;
``KLOG_SLOW_CORPORA=2000`` runs that many more through the engine paths (a ``slow`` test, skipped
without it).
"""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from kafka_corpus import (
    Corpus,
    PartitionTruth,
    assert_same_rows,
    available_now_rows,
    corpus_available,
    corpus_root_for_workers,
    env_int,
    expected_rows,
    generate,
    rows_of,
)
from spark_env import own_session

import storage_core
from storage_core.errors import OffsetOutOfRangeError
from storage_core.read.piece_reader import batches_of, read_piece
from storage_core.record.columnar import kafka_schema
from storage_core.record.txn_filter import filter_read_committed

pytestmark = pytest.mark.interop

N_ENGINE = env_int("KLOG_CORPORA", 200)
N_SPARK = env_int("KLOG_SPARK_CORPORA", 24)
N_SLOW = env_int("KLOG_SLOW_CORPORA", 0)
ISOLATION = ["read_uncommitted", "read_committed"]


@pytest.fixture(scope="session")
def corpora_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    reason = corpus_available()
    if reason is not None:
        pytest.skip(reason)
    return corpus_root_for_workers(tmp_path_factory.getbasetemp().parent)


def _corpus(root: Path, seed: int) -> Corpus:
    return generate(root, [seed])[0]


@pytest.fixture(scope="session")
def engine_corpora(corpora_root: Path) -> dict[int, Corpus]:
    return {c.seed: c for c in generate(corpora_root, range(1, N_ENGINE + 1))}


def _latest(t: PartitionTruth, read_committed: bool) -> int:
    return t.last_stable_offset if read_committed else t.log_end_offset


def _random_ranges(c: Corpus, rnd: random.Random, read_committed: bool) -> dict[tuple[str, int], tuple[int, int]]:
    """A start and an end per partition, inside what the read may ask for (start in [log start,
    latest], end anywhere from there to past the end)."""
    out = {}
    for key, t in c.partitions.items():
        hi = _latest(t, read_committed)
        start = rnd.randint(t.log_start_offset, hi) if rnd.random() < 0.7 else t.log_start_offset
        end = rnd.randint(start, t.log_end_offset + 2) if rnd.random() < 0.7 else hi
        out[key] = (start, end)
    return out


def _json(ranges: dict[tuple[str, int], tuple[int, int]], which: int) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (topic, p), r in sorted(ranges.items()):
        out.setdefault(topic, {})[str(p)] = r[which]
    return out


def _want(c: Corpus, read_committed: bool, ranges: dict[tuple[str, int], tuple[int, int]] | None,
          include_headers: bool = True) -> list[dict[str, Any]]:
    out = []
    for key, t in sorted(c.partitions.items()):
        start, end = ranges[key] if ranges is not None else (None, None)
        out += expected_rows(t, read_committed=read_committed, start=start, end=end, include_headers=include_headers)
    return out


def _rebuilt(c: Corpus, base: Path) -> Path:
    """A copy of the corpus after a writable open (a broker's start): indexes, ``.txnindex`` files,
    producer snapshots, checkpoints and the clean-shutdown marker written by klog's recovery."""
    from storage_core.log.manager import LogManager

    dest = base / f"rebuilt-{c.seed}"
    if not dest.exists():
        tmp = base / f".rebuilt-{c.seed}"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(c.root, tmp, ignore=shutil.ignore_patterns("*.truth.jsonl"))
        with LogManager([tmp], writable=True):
            pass
        tmp.rename(dest)
    return dest


def _engine_check(c: Corpus, root: Path, iso: str, rnd: random.Random) -> None:
    rc = iso == "read_committed"
    # the whole log, unsplit
    got = rows_of(storage_core.read_arrow(root, isolationLevel=iso, includeHeaders=True).read_all())
    assert_same_rows(got, _want(c, rc, None), f"seed {c.seed} {iso} whole log ({root.name})")
    # random ranges, split at random into pieces read one by one, by the bulk and the reference path
    ranges = _random_ranges(c, rnd, rc)
    opts: dict[str, object] = {"isolationLevel": iso, "includeHeaders": True,
                               "startingOffsets": _json(ranges, 0), "endingOffsets": _json(ranges, 1)}
    if rnd.random() < 0.5:
        opts["maxRecordsPerPartition"] = rnd.randint(1, 40)
    else:
        opts["minPartitions"] = rnd.randint(1, 12)
    past = [k for k, (_s, e) in ranges.items() if e > _latest(c.partitions[k], rc)]
    if past:  # an end past the end fails, as Spark's Kafka source does; failOnDataLoss=false reads to the end
        with pytest.raises(OffsetOutOfRangeError, match="ending offset .* is past the end of the log"):
            storage_core.plan(root, **opts)
        opts["failOnDataLoss"] = False
    want = _want(c, rc, ranges)
    the_plan = storage_core.plan(root, **opts)
    schema = kafka_schema(include_headers=True)
    split = [b for p in the_plan.pieces for b in read_piece(p, include_headers=True)]
    ctx = f"seed {c.seed} {iso} {opts} ({root.name}, {len(the_plan.pieces)} pieces)"
    assert_same_rows(rows_of(pa.Table.from_batches(split, schema)), want, ctx + " bulk")
    if rc:  # the per-batch reference filter over the same pieces
        from storage_core.record.columnar import decode_batches

        ref = [decode_batches(filter_read_committed(batches_of(p, True), list(p.aborted or ()), where=p.log_path),
                              p.topic, p.partition, include_headers=True, min_offset=p.min_offset,
                              end_offset=p.end_offset) for p in the_plan.pieces]
        assert_same_rows(rows_of(pa.Table.from_batches([b for b in ref if b.num_rows], schema)), want, ctx + " ref")
    unsplit = {k: v for k, v in opts.items() if k not in ("maxRecordsPerPartition", "minPartitions")}
    assert_same_rows(rows_of(storage_core.read_arrow(root, **unsplit).read_all()), want, ctx + " unsplit")


@pytest.mark.parametrize("iso", ISOLATION)
def test_engine_paths_equal_kafka(engine_corpora: dict[int, Corpus], corpora_root: Path, iso: str) -> None:
    """At least 200 corpora through the planner and the piece reader, at both isolation levels."""
    rebuilt_base = corpora_root / "rebuilt"
    rebuilt_base.mkdir(exist_ok=True)
    for seed, c in sorted(engine_corpora.items()):
        rnd = random.Random(seed * 7 + (iso == "read_committed"))
        _engine_check(c, c.root, iso, rnd)
        if seed % 2 == 0:
            _engine_check(c, _rebuilt(c, rebuilt_base), iso, rnd)


def test_export_and_dump_equal_kafka(engine_corpora: dict[int, Corpus], tmp_path: Path) -> None:
    """``klog export`` (whole topics, both isolation levels, random offset ranges) and ``klog dump``
    (every data record of every segment file) on the first corpora."""
    import pyarrow.parquet as pq

    from storage_core.tools.cli import main as klog

    for seed, c in sorted(engine_corpora.items())[:40]:
        rnd = random.Random(seed)
        for topic in c.topics:
            mine = {k: t for k, t in c.partitions.items() if k[0] == topic}
            for iso in ISOLATION:
                rc = iso == "read_committed"
                out = tmp_path / f"{seed}-{topic}-{iso}.parquet"
                args = ["export", str(c.root), "--topic", topic, "-o", str(out), "--quiet", "--headers"]
                ranges = None
                if len(mine) == 1 and rnd.random() < 0.5:
                    (key, t), = mine.items()
                    s, e = _random_ranges(Corpus(seed, c.root, {key: t}), rnd, rc)[key]
                    ranges = {key: (s, e)}
                    args += ["--start-offset", str(s), "--end-offset", str(e)]
                assert klog(args + (["--read-committed"] if rc else [])) == 0
                want = _want(Corpus(seed, c.root, mine), rc, ranges)
                assert_same_rows(rows_of(pq.read_table(out)), want, f"seed {seed} export {topic} {iso} {args}")
        for (topic, p), t in c.partitions.items():
            lines = []
            for seg in sorted((c.root / f"{topic}-{p}").glob("*.log")):
                out = tmp_path / "dump.jsonl"
                with open(out, "w") as f:
                    from contextlib import redirect_stdout

                    with redirect_stdout(f):
                        assert klog(["dump", "--jsonl", str(seg)]) == 0
                lines += [json.loads(x) for x in out.read_text().splitlines()]
            data = [(o["offset"], o["value_b64"]) for o in lines if not o["is_control"] and o["offset"] is not None]
            import base64

            want_dump = [(r.offset, None if r.value is None else base64.b64encode(r.value).decode())
                         for r in t.records]
            assert data == want_dump, f"seed {seed} dump {topic}-{p}"


# --- Spark -------------------------------------------------------------------------------------------

def _spark_seeds() -> list[int]:
    return list(range(10_001, 10_001 + N_SPARK))


@pytest.fixture(scope="session")
def spark_corpora(corpora_root: Path) -> dict[int, Corpus]:
    return {c.seed: c for c in generate(corpora_root, _spark_seeds())}


@pytest.mark.spark
def test_spark_batch_reads_equal_kafka(spark, spark_corpora: dict[int, Corpus]) -> None:  # type: ignore[no-untyped-def]
    """Random JSON ranges, random splits and a pushed offset filter, at both isolation levels."""
    import spark_logsource

    with own_session(spark) as session:  # pushdown on in a session of its own: the shared one keeps its conf
        spark_logsource.register(session)
        for seed, c in sorted(spark_corpora.items()):
            rnd = random.Random(seed)
            iso = ISOLATION[seed % 2]
            rc = iso == "read_committed"
            ranges = _random_ranges(c, rnd, rc)
            reader = (session.read.format("klog").option("isolationLevel", iso).option("includeHeaders", "true")
                      .option("startingOffsets", json.dumps(_json(ranges, 0)))
                      .option("endingOffsets", json.dumps(_json(ranges, 1))))
            if rnd.random() < 0.5:
                reader = reader.option("maxRecordsPerPartition", str(rnd.randint(1, 50)))
            else:
                reader = reader.option("minPartitions", str(rnd.randint(1, 8)))
            if any(e > _latest(c.partitions[k], rc) for k, (_s, e) in ranges.items()):
                reader = reader.option("failOnDataLoss", "false")  # an end past the end: to the end (else an error)
            df = reader.load(str(c.root))
            want = _want(c, rc, ranges)
            if rnd.random() < 0.5 and want:
                cut = rnd.choice(want)["offset"]
                df = df.where(df["offset"] >= cut)
                want = [r for r in want if r["offset"] >= cut]
            assert_same_rows(rows_of(df.collect()), want, f"seed {seed} spark batch {iso}")


@pytest.mark.spark
def test_spark_streams_equal_kafka(spark, spark_corpora: dict[int, Corpus], tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``readStream`` from earliest with a random ``maxOffsetsPerTrigger`` drained by
    ``Trigger.AvailableNow``: every record of the log, once, at both isolation levels."""
    for seed, c in sorted(spark_corpora.items())[: max(4, N_SPARK // 3)]:
        rnd = random.Random(seed)
        iso = ISOLATION[(seed // 2) % 2]
        rc = iso == "read_committed"
        name = f"corpus_{seed}_{iso}"
        stream = (spark.readStream.format("klog").option("startingOffsets", "earliest")
                  .option("isolationLevel", iso).option("includeHeaders", "true")
                  .option("maxOffsetsPerTrigger", str(rnd.randint(3, 200))).load(str(c.root)))
        got = available_now_rows(spark, stream, name, tmp_path / name, timeout=300)
        want = _want(c, rc, None)  # under read_committed a stream stops at the last stable offset too
        assert_same_rows(got, want, f"seed {seed} stream {iso}")


# --- more, under the slow marker -------------------------------------------------------------------

def _slow_seeds() -> Iterator[int]:
    yield from range(100_001, 100_001 + N_SLOW)


@pytest.mark.slow
@pytest.mark.parametrize("iso", ISOLATION)
def test_engine_paths_equal_kafka_many(corpora_root: Path, iso: str) -> None:
    """Thousands more corpora through the engine paths: ``KLOG_SLOW_CORPORA=2000 pytest -m slow -k many``."""
    if not N_SLOW:
        pytest.skip("set KLOG_SLOW_CORPORA to the number of extra corpora (e.g. 2000) to run this long check")
    seeds = list(_slow_seeds())
    for i in range(0, len(seeds), 200):
        for c in generate(corpora_root, seeds[i:i + 200]):
            _engine_check(c, c.root, iso, random.Random(c.seed))
