"""Kafka's own tools and cleaner as oracles, on what Kafka's own broker wrote (issue 25, item 4).

One random workload (``oracle/BrokerClient.java workload``: plain, idempotent and transactional
producers committing and aborting, every codec, headers, null keys and values, LogAppendTime,
retention by size, a compacted topic the broker cleans, consumer groups of both protocols) and one
keyed topic the broker is kept from cleaning (``BrokerClient keyed``, ``min.compaction.lag.ms`` of
a day) go through the session's broker; once it has settled it is stopped cleanly and its log dir
copied. Then:

1. **Dump output, line for line**: ``klog dump`` and Kafka's ``kafka.tools.DumpLogSegments``
   (one JVM per option set, over every file at once) print the same lines for every ``.log`` and
   KRaft ``.checkpoint`` of the copy (batch headers, ``--deep-iteration``, ``--print-data-log``,
   ``--skip-record-metadata``, ``--max-bytes``), the internal topics through their decoders
   (``--offsets-decoder``, ``--transaction-log-decoder``, ``--cluster-metadata-decoder``), and every
   ``.index``, ``.timeindex``, ``.txnindex`` and producer ``.snapshot`` (plain, ``--verify-index-only``,
   ``--index-sanity-check``); what both report on stderr (non-consecutive offsets, index entries
   that disagree with their log) is the same too, and so it is for indexes made wrong on purpose
   (:func:`test_dump_of_damaged_indexes_equals_kafka`). The differences that remain are the
   :data:`DUMP_EXCEPTIONS`, each named with its reason (and listed in docs/internal-topics.md).
2. **Compaction**: the broker's LogCleaner and ``klog compact`` clean copies of the same
   partitions with the same configs and clock (the time the broker cleaned at, read back from the
   delete horizon it stamped on the batches holding tombstones): every file both keep is byte for
   byte the same (segments, offset and time indexes, ``.txnindex``, producer snapshots), the files
   kept and set aside as ``*.deleted`` are the same, and the records klog reads from its copy are
   those Kafka's consumer reads from the broker.
3. **Indexes and producer snapshots**: indexes klog rebuilds for segments the broker wrote are byte
   for byte the broker's (the broker trims the active segment's on a clean shutdown, so theirs are
   compared too), and the producer state klog rebuilds by replaying the log equals every producer
   snapshot the broker wrote (at each roll and at shutdown), entry for entry; the snapshot klog
   writes when it closes the log holds the entries of the broker's at the same offset.

``KLOG_BROKER_SEED`` fixes the seed (default: a new one each run, printed in every failure);
``KLOG_BROKER_TOOLS_RECORDS`` the records of the workload (default: random, 3,000 to 5,000).
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import random
import shutil
import struct
import time
from contextlib import redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from broker_fixture import (
    Broker,
    classpath,
    cleaned,
    consumer_row,
    kafka_version,
    required,
    settle,
    skip_reason,
)
from dump_text import NOT_FOUND, assert_same_dump, kafka_dump, klog_dump
from kafka_corpus import assert_same_rows, env_int, rows_of

import storage_core
from storage_core.log.loader import producer_state_at
from storage_core.log.log import Log
from storage_core.log.manager import LogManager
from storage_core.log.producer_state import ProducerStateManager, snapshot_files
from storage_core.record.compression import CompressionType
from storage_core.record.file_records import FileRecords
from storage_core.record.records import DefaultRecordBatch
from storage_core.tools.cli import main as klog

pytestmark = [pytest.mark.broker, pytest.mark.interop]

SEED = int(os.environ.get("KLOG_BROKER_SEED") or random.SystemRandom().randrange(1, 1 << 31))
CTX = f"KLOG_BROKER_SEED={SEED}"

#: The configs of the keyed topic, as the broker and klog clean it. Created with a compaction lag of
#: a day (nothing cleanable), the lag then set to 0 on the broker, and given to klog as 0. The files
#: a cleaning sets aside stay an hour as ``*.deleted`` (both sides), so that they can be compared.
COMPACT_CONFIGS = {"cleanup.policy": "compact", "internal.segment.bytes": "32768", "min.cleanable.dirty.ratio": "0.01",
                   "segment.ms": "100", "delete.retention.ms": "86400000", "min.compaction.lag.ms": "0",
                   "file.delete.delay.ms": "3600000"}
HELD_LAG_MS = "86400000"

#: The differences between ``klog dump`` and kafka-dump-log (4.1.1 and 4.4.0) that stay, by name; each is
#: applied below where it is needed (docs/internal-topics.md lists them too). Those between the two
#: releases' texts are :data:`dump_text.RELEASE_DIFFERENCES`: klog prints 4.4.0's.
DUMP_EXCEPTIONS = {
    "decoder-by-dir-name": "klog decodes the records of __consumer_offsets, __transaction_state and "
                           "__cluster_metadata (and KRaft .checkpoint files) by their dir's name without being "
                           "asked; kafka-dump-log prints their raw bytes unless given a decoder option. The raw "
                           "dumps are compared with klog's --no-decoder.",
    "reports-after-each-file": "kafka-dump-log prints what it found wrong (non-consecutive offsets, index mismatches) "
                               "on stderr after all the files, in hash-map order; klog after each file. stderr is "
                               "compared as a multiset of reports.",
    "non-consecutive-details": "kafka-dump-log 4.4.0 lists a file's non-consecutive offsets in file order, 4.1.1 "
                               "in reverse, and 4.4.0 also reports every segment not starting at offset 0 as "
                               "'-1 is followed by <its first offset>' (its tracker starts at -1 for each file); "
                               "klog lists them as 4.1.1 does without that report. Compared as sorted sets, "
                               "without it.",
    "errors-are-one-line": "where kafka-dump-log dies with a Java stack trace (an index failing --index-sanity-check), "
                           "klog prints one 'klog: error:' line with the same message (paths as given, not "
                           "absolute) and exits 1.",
}

Lines = list[str]


@dataclass
class Written:
    """What the broker wrote, and copies of it."""

    dump_dir: Path  # a copy of the broker's log dir at its clean shutdown (before the second cleaning)
    workload: list[str]  # the workload's topics
    keyed: str  # the topic both cleaners clean
    keyed_partitions: int
    before_cleaning: dict[int, Path]  # one klog log dir per partition of ``keyed``, copied before the broker cleaned
    cleaned_dir: Path  # the broker's log dir after it cleaned ``keyed`` (the broker stopped)
    consumer_rows: list[dict[str, Any]]  # ``keyed`` as Kafka's consumer read it after the cleaning


def _copy_log_dir(src: Path, dst: Path) -> None:
    """A log dir as it is (the broker stopped), without the files the broker was deleting."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.deleted"))


@pytest.fixture(scope="module")
def written(broker: Broker, tmp_path_factory: pytest.TempPathFactory) -> Any:
    broker.start()  # another module may have left it stopped
    try:
        yield _write(broker, tmp_path_factory.mktemp("broker-tools"))
    finally:
        broker.start()  # the session's broker serves the modules that follow


def _write_until_shutdown(broker: Broker, root: Path, rnd: random.Random) -> tuple[list[str], str, int, Path]:
    """The workload and the keyed topic written, settled, the broker stopped cleanly and its log dir
    copied: the topics, the keyed topic, its partition count and the copy."""
    prefix = f"tools{SEED}"
    records = env_int("KLOG_BROKER_TOOLS_RECORDS", 0) or rnd.randint(3_000, 5_000)
    workload = sorted(t["topic"] for t in broker.workload(rnd.randrange(1 << 62), prefix, records))
    keyed, parts = f"{prefix}-keyed", 2
    held = {**COMPACT_CONFIGS, "min.compaction.lag.ms": HELD_LAG_MS}
    broker.client("keyed", str(rnd.randrange(1 << 62)), keyed, str(parts), "3000", *(f"{k}={v}" for k, v in held.items()))
    settle(broker, [*workload, keyed])  # every marker written, of the keyed topic too
    broker.stop()
    dump_dir = root / "at-shutdown"
    _copy_log_dir(broker.log_dir, dump_dir)
    return workload, keyed, parts, dump_dir


def _write(broker: Broker, root: Path) -> Written:
    rnd = random.Random(SEED)
    workload, keyed, parts, dump_dir = _write_until_shutdown(broker, root, rnd)
    before = {}
    for p in range(parts):
        assert not _cleaner_offset(dump_dir, keyed, p), f"{CTX}: the broker cleaned {keyed}-{p} before it was copied"
        before[p] = root / f"klog-{p}"  # one log dir per partition: each is cleaned at its own time
        before[p].mkdir()
        shutil.copytree(dump_dir / f"{keyed}-{p}", before[p] / f"{keyed}-{p}")
        shutil.copy(dump_dir / "meta.properties", before[p])
        (before[p] / "klog-topic-configs.json").write_text(json.dumps({keyed: COMPACT_CONFIGS}))
    broker.start()
    broker.client("alter", keyed, "min.compaction.lag.ms=0")
    deadline = time.monotonic() + 120
    while not all(cleaned(broker.log_dir, keyed, p) for p in range(parts)):
        assert time.monotonic() < deadline, f"{CTX}: the broker did not clean {keyed} in 120 s"
        time.sleep(0.5)
    rows = broker.consume("read_uncommitted", [keyed], root / "keyed.jsonl")
    broker.stop()
    return Written(dump_dir, workload, keyed, parts, before, broker.log_dir, [consumer_row(d) for d in rows])


#: The releases whose kafka-dump-log the dump comparisons run against: the one the broker tests run
#: (the session's broker writes the data every test of the module reads) and the other of 4.4.0 and
#: 4.1.1, which writes its own data with a broker of its own, for the dump comparisons only.
RELEASE = kafka_version()
OTHER_RELEASE = "4.1.1" if RELEASE != "4.1.1" else "4.4.0"
DUMP_RELEASES = [RELEASE, OTHER_RELEASE]


@pytest.fixture(scope="module")
def other_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What a broker of :data:`OTHER_RELEASE` wrote (the same workload and keyed topic, the same
    seed), copied at its clean shutdown; its JVM is gone afterwards."""
    reason = skip_reason(lambda: classpath(version=OTHER_RELEASE))
    if reason is not None:
        if required():
            pytest.fail(f"KLOG_REQUIRE_BROKER=1 but {reason}")
        pytest.skip(reason)
    root = tmp_path_factory.mktemp(f"broker-tools-{OTHER_RELEASE}")
    b = Broker(root / "broker", version=OTHER_RELEASE)
    try:
        b.start()
        return _write_until_shutdown(b, root, random.Random(SEED))[3]
    finally:
        b.kill()


def _dump_dir(request: pytest.FixtureRequest, release: str) -> Path:
    """The copy of the log dir ``release``'s broker wrote."""
    if release == RELEASE:
        return Path(request.getfixturevalue("written").dump_dir)
    return Path(request.getfixturevalue("other_release"))


def _cleaner_offset(log_dir: Path, topic: str, partition: int) -> int | None:
    try:
        lines = (log_dir / "cleaner-offset-checkpoint").read_text().splitlines()[2:]
    except FileNotFoundError:
        return None
    for line in lines:
        t, p, o = line.rsplit(" ", 2)
        if t == topic and int(p) == partition:
            return int(o)
    return None


# --- running both ----------------------------------------------------------------------------------


def _files(log_dir: Path, pattern: str, dirs: str = "*") -> list[Path]:
    return sorted(f for d in sorted(log_dir.glob(dirs)) if d.is_dir() for f in sorted(d.glob(pattern)))


def _bootstrap(log_dir: Path) -> list[Path]:
    """The log dir's ``bootstrap.checkpoint``: 4.1's ``kafka-storage format`` writes one, 4.4's does not."""
    return sorted(log_dir.glob("bootstrap.checkpoint"))


# --- 1. dump output --------------------------------------------------------------------------------

LOG_OPTIONS = [
    (),
    ("--deep-iteration",),
    ("--print-data-log",),
    ("--print-data-log", "--skip-record-metadata"),
    ("--deep-iteration", "--skip-record-metadata"),
    ("--print-data-log", "--max-bytes", "20000"),
]


@pytest.mark.parametrize("release", DUMP_RELEASES)
@pytest.mark.parametrize("options", LOG_OPTIONS, ids=lambda o: " ".join(o) or "batches")
def test_dump_of_logs_equals_kafka(request: pytest.FixtureRequest, release: str, options: tuple[str, ...]) -> None:
    """Every ``.log`` and KRaft ``.checkpoint`` of the broker's dir, the internal topics' raw bytes
    included (klog with ``--no-decoder``: :data:`DUMP_EXCEPTIONS` ``decoder-by-dir-name``)."""
    d = _dump_dir(request, release)
    files = _files(d, "*.log") + _files(d, "*.checkpoint", "__cluster_metadata-*") + _bootstrap(d)
    kafka = kafka_dump(files, *options, release=release)
    assert_same_dump(CTX, f"{release} " + (" ".join(options) or "(batches)"), kafka,
                        klog_dump(files, *options, "--no-decoder", release=release))
    if options == ("--print-data-log",):
        # the workload reached the cases that once differed: tombstones (no payload printed), bytes
        # that are not UTF-8, offsets a cleaner removed
        lines = kafka[0].split("\n")
        assert any("valueSize: -1 " in x and " payload: " not in x for x in lines if x.startswith("| offset: "))
        assert any("\ufffd" in x for x in lines)
        assert "Non-consecutive offsets in " in kafka[1]


@pytest.mark.parametrize("decoder, dirs", [
    ("--offsets-decoder", "__consumer_offsets-*"),
    ("--transaction-log-decoder", "__transaction_state-*"),
    ("--cluster-metadata-decoder", "__cluster_metadata-*"),
])
@pytest.mark.parametrize("skip", [False, True], ids=["", "skip-record-metadata"])
@pytest.mark.parametrize("release", DUMP_RELEASES)
def test_dump_of_internal_topics_equals_kafka(request: pytest.FixtureRequest, release: str, decoder: str, dirs: str,
                                              skip: bool) -> None:
    d = _dump_dir(request, release)
    files = _files(d, "*.log", dirs)
    if decoder == "--cluster-metadata-decoder":
        files += _files(d, "*.checkpoint", dirs) + _bootstrap(d)
    options = (decoder, "--skip-record-metadata") if skip else (decoder,)
    kafka = kafka_dump(files, *options, release=release)
    assert_same_dump(CTX, f"{release} " + " ".join(options), kafka, klog_dump(files, *options, release=release))
    lines = [x for x in kafka[0].split("\n") if "payload: " in x]
    assert lines and not any("Error at" in x or "Unknown record type" in x for x in lines), lines[:3]
    if decoder == "--offsets-decoder":  # offset commits, a classic group, a consumer (KIP-848) group's member
        text = "\n".join(lines)
        assert all(f'key: {{"type":"{t}"' in text for t in (1, 2, 5)), text[:2000]


INDEX_OPTIONS = [(), ("--verify-index-only",), ("--index-sanity-check",)]


@pytest.mark.parametrize("release", DUMP_RELEASES)
@pytest.mark.parametrize("options", INDEX_OPTIONS, ids=lambda o: " ".join(o) or "entries")
def test_dump_of_indexes_and_snapshots_equals_kafka(request: pytest.FixtureRequest, release: str,
                                                    options: tuple[str, ...]) -> None:
    """Every ``.index``, ``.timeindex``, ``.txnindex`` and producer ``.snapshot``."""
    d = _dump_dir(request, release)
    files = [f for pattern in ("*.index", "*.timeindex", "*.txnindex", "*.snapshot") for f in _files(d, pattern)]
    kafka = kafka_dump(files, *options, release=release)
    assert_same_dump(CTX, f"{release} " + (" ".join(options) or "(entries)"), kafka,
                        klog_dump(files, *options, release=release))
    if not options:
        assert "lastStableOffset: " in kafka[0] and "producerId: " in kafka[0], "no .txnindex or .snapshot entries"


def _craft(src: Path, dst: Path) -> dict[str, list[Path]]:
    """Indexes made wrong the ways a dump meets them, from one segment the broker wrote (with at
    least two offset and two time index entries), by kind: ``shifted`` (the segment's files under
    another base offset: every entry names offsets the log does not have there), ``retimed`` (time
    index timestamps that are not the batches' and go backwards), ``untrimmed`` (a crashed
    broker's active segment: entries, then a zero-filled tail), ``preallocated`` (all zeros, no
    entry yet), ``empty``."""
    seg = next(f for f in _files(src, "*.log") if not f.parent.name.startswith("__")
               and f.with_suffix(".index").stat().st_size >= 16 and f.with_suffix(".timeindex").stat().st_size >= 24)
    index, timeindex = seg.with_suffix(".index").read_bytes(), seg.with_suffix(".timeindex").read_bytes()
    (t0, r0), (_, r1) = struct.unpack_from(">qi", timeindex), struct.unpack_from(">qi", timeindex, 12)
    retimed = struct.pack(">qiqi", t0 - 1, r0, t0 - 5, r1) + timeindex[24:]
    base = int(seg.stem)
    kinds = {"retimed": (base, index, retimed), "shifted": (base + 100, index, timeindex),
             "untrimmed": (base + 200, index + bytes(80), timeindex + bytes(120)),
             "preallocated": (base + 300, bytes(80), bytes(120)), "empty": (base + 400, b"", b"")}
    dst.mkdir()
    out = {}
    for kind, (offset, idx, tidx) in kinds.items():
        name = f"{offset:020d}"
        shutil.copy(seg, dst / f"{name}.log")
        (dst / f"{name}.index").write_bytes(idx)
        (dst / f"{name}.timeindex").write_bytes(tidx)
        out[kind] = [dst / f"{name}.index", dst / f"{name}.timeindex"]
    return out


@pytest.mark.parametrize("release", DUMP_RELEASES)
@pytest.mark.parametrize("options", [(), ("--verify-index-only",)], ids=["entries", "verify-index-only"])
def test_dump_of_damaged_indexes_equals_kafka(request: pytest.FixtureRequest, release: str, tmp_path: Path,
                                              options: tuple[str, ...]) -> None:
    """What both print and report on indexes that disagree with their log."""
    files = [f for fs in _craft(_dump_dir(request, release), tmp_path / "damaged").values() for f in fs]
    kafka = kafka_dump(files, *options, release=release)
    for report in ("Mismatches in :", "Found timestamp mismatch in :", "Found out of order timestamp in :",
                   NOT_FOUND):
        assert report in kafka[1], f"kafka-dump-log did not report {report!r}: {kafka[1]}"
    ours = klog_dump(files, *options, release=release)
    assert_same_dump(CTX, f"{release} " + (" ".join(options) or "(entries)"), kafka, ours)
    assert ours[0] == 1, f"{CTX}: klog dump found nothing wrong in damaged indexes"


@pytest.mark.parametrize("release", DUMP_RELEASES)
def test_dump_of_a_segment_whose_first_batch_header_is_damaged_equals_kafka(request: pytest.FixtureRequest, release: str,
                                                                           tmp_path: Path) -> None:
    """A broker's segment whose first batch's length field is damaged (below the minimum record
    overhead, or past the end of the file, drawn at random): klog dump reports it at position 0 as
    kafka-dump-log does (its "Found record size N smaller than minimum record overhead (14)"
    exception, klog's one "Error:" line of the same message; or both "Found N invalid bytes at the
    end"), not that the file is no Kafka file; the same bytes under a name that is no segment's are."""
    rnd = random.Random(SEED)
    src = next(f for f in _files(_dump_dir(request, release), "*.log") if f.stat().st_size > 100)
    data = src.read_bytes()
    for kind in ("below-overhead", "past-the-end"):
        size = rnd.randrange(0, 14) if kind == "below-overhead" else rnd.randrange(len(data), 1 << 31)
        d = tmp_path / kind / src.parent.name
        d.mkdir(parents=True)
        f = d / src.name
        f.write_bytes(data[:8] + struct.pack(">i", size) + data[12:])
        kafka_out, kafka_err = kafka_dump([f], release=release)
        rc, out, err = klog_dump([f], release=release)
        if kind == "below-overhead":
            want = f"Found record size {size} smaller than minimum record overhead (14)"
            assert f"CorruptRecordException: {want}" in kafka_err, kafka_err
            assert out.split("\n")[:-1] == kafka_out.split("\n")[:-1] + [f"Error: {want} [file {f}, position 0]"], \
                f"{CTX}: {out}"
            assert rc == 1, err
        else:
            assert f"Found {len(data)} invalid bytes at the end of {f.name}" in kafka_out, kafka_out
            assert out == kafka_out and rc == 0, f"{CTX}: {out}{err}"
        other = tmp_path / kind / "notes.log"
        other.write_bytes(f.read_bytes())
        rc, out, err = klog_dump([other], release=release)
        assert rc == 1 and "holds no Kafka record batch" in err, err


@pytest.mark.parametrize("release", DUMP_RELEASES)
def test_sanity_check_of_damaged_indexes_equals_kafka(request: pytest.FixtureRequest, release: str, tmp_path: Path) -> None:
    """``--index-sanity-check`` sees an untrimmed index's zero-filled tail, as a broker does: the
    time index fails (its last timestamp, 0, is below its first). Kafka dies with a stack trace
    there, klog exits 1 with the message (:data:`DUMP_EXCEPTIONS` ``errors-are-one-line``)."""
    crafted = _craft(_dump_dir(request, release), tmp_path / "damaged")
    failing = crafted["untrimmed"][1]
    files = [*crafted["shifted"], *crafted["preallocated"], *crafted["empty"], crafted["untrimmed"][0], failing]
    kafka = kafka_dump(files, "--index-sanity-check", release=release)  # it stops at the first failure: the last file
    rc, out, err = klog_dump(files, "--index-sanity-check", release=release)
    assert out.split("\n")[:-1] == kafka[0].split("\n")[:-1], f"{CTX}\nklog:\n{out}\nkafka:\n{kafka[0]}"
    message = kafka[1].split("\n")[0].split("CorruptIndexException: ", 1)[1]
    assert rc == 1 and err.startswith("klog: error: "), err
    assert message.replace(str(failing), failing.name) in err.replace(str(failing), failing.name), (message, err)


# --- 2. compaction ---------------------------------------------------------------------------------


def _horizon(partition_dir: Path) -> int | None:
    """The delete horizon a cleaning stamped on the batches of tombstones and markers it kept."""
    for seg in sorted(partition_dir.glob("*.log")):
        for batch in FileRecords(seg).batches():
            if batch.delete_horizon_ms is not None:
                return int(batch.delete_horizon_ms)
    return None


#: Files of a partition dir the cleaner does not write: the broker's restart before it cleaned
#: began a new leader epoch at the log end (``leader-epoch-checkpoint``), which the copy predates.
NOT_THE_CLEANERS = ("leader-epoch-checkpoint",)


def _kept_files(partition_dir: Path) -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in sorted(partition_dir.iterdir())
            if not f.name.endswith(".deleted") and f.name not in NOT_THE_CLEANERS}


def _batches(path: Path) -> list[tuple[int, bytes]]:
    """``(position, bytes)`` of each batch of a segment."""
    return [(b.position, bytes(b.buffer)) for b in FileRecords(path).batches()]


def _described(batch: bytes | None) -> str:
    if batch is None:
        return "none"
    b = DefaultRecordBatch(batch)
    return (f"offsets {b.base_offset}..{b.last_offset}, {b.records_count} records, producer {b.producer_id} "
            f"epoch {b.producer_epoch}, transactional {b.is_transactional}, control {b.is_control}, "
            f"{b.compression.label}")


def _first_difference(a: list[tuple[int, bytes]], b: list[tuple[int, bytes]]) -> str:
    """The first batch (by position in the list) whose base offset differs, klog's and the broker's."""
    for i in range(max(len(a), len(b))):
        x = a[i][1] if i < len(a) else None
        y = b[i][1] if i < len(b) else None
        if x is None or y is None or x[:8] != y[:8]:
            return f"batch {i}: klog's {_described(x)}, the broker's {_described(y)}"
    return "none"


def _same_but_recompressed(ours: Path, theirs: Path) -> int:
    """Check that two cleaned segments hold the same batches, byte for byte but for batches
    recompressed with snappy (see :func:`test_compaction_equals_broker`), which must hold the same
    header and the same records; returns how many were so recompressed."""
    a, b = _batches(ours), _batches(theirs)
    assert len(a) == len(b), f"{CTX} {ours.name}: klog kept {len(a)} batches, the broker {len(b)}; " \
                             f"the first that differs: {_first_difference(a, b)}"
    recompressed = 0
    for (_, x), (_, y) in zip(a, b, strict=True):
        if x == y:
            continue
        bx, by = DefaultRecordBatch(x), DefaultRecordBatch(y)
        where = f"{CTX} {ours.name} batch at offset {by.base_offset}"
        assert by.compression == CompressionType.SNAPPY, f"{where} ({by.compression.label}) differs from the broker's"
        # base offset | length | leader epoch, magic | crc | attributes .. records count: all but length and crc
        assert (x[:8], x[12:17], x[21:61]) == (y[:8], y[12:17], y[21:61]), f"{where}: headers differ"
        assert bytes(bx.records_payload()) == bytes(by.records_payload()), f"{where}: records differ"
        recompressed += 1
    return recompressed


def _verified(index: Path) -> bool:
    """The index's entries hold against its segment (``klog dump --verify-index-only``, which checks
    them as kafka-dump-log does)."""
    from storage_core.tools.dump import dump_index

    err = io.StringIO()
    return dump_index(index, io.StringIO(), err, verify_only=True) == 0 and not err.getvalue()


def test_compaction_equals_broker(written: Written) -> None:
    """``klog compact`` of a copy taken before the broker cleaned, with the same configs and the
    broker's clock, leaves the files the broker's LogCleaner left, byte for byte: the cleaned
    segments (records kept, batches copied or rebuilt with their codec, empty batches kept as
    headers, tombstones and markers stamped with the same delete horizon), their time indexes and
    ``.txnindex``, the producer snapshots (those of the segments merged away set aside as
    ``*.deleted``, as Kafka does) and the cleaner offset; the same files are kept and set aside.

    Where bytes differ, and why: a batch the cleaner rebuilds (some of its records removed) is
    recompressed with its codec, and snappy's encoders differ, klog's (cramjam's, the Rust ``snap``
    crate) from the broker's (snappy-java: Google's C++ snappy), which choose different matches on
    some inputs. Such a batch holds the same header (but its length and CRC) and the same records,
    and the batches after it in the segment move by the difference in size; the sparse indexes of
    such a segment (an entry every ``index.interval.bytes`` of log) may then name other batches, and
    are checked against klog's segment instead, as kafka-dump-log checks an index. Nothing else
    may differ."""
    recompressed = 0
    for p, log_dir in written.before_cleaning.items():
        tp = f"{written.keyed}-{p}"
        broker_dir = written.cleaned_dir / tp
        horizon = _horizon(broker_dir)
        assert horizon is not None, f"{CTX} {tp}: the broker kept no tombstone, so its clock is unknown"
        now = horizon - int(COMPACT_CONFIGS["delete.retention.ms"])
        out = io.StringIO()
        with redirect_stdout(out):
            assert klog(["compact", str(log_dir), "--now", str(now), "--json", "--quiet"]) == 0
        summary = json.loads(out.getvalue())
        assert summary[0]["records_removed"] > 0 and summary[0]["tombstones_kept"] > 0, summary
        ours, theirs = _kept_files(log_dir / tp), _kept_files(broker_dir)
        assert sorted(ours) == sorted(theirs), f"{CTX} {tp}: files klog kept {sorted(ours)}, the broker {sorted(theirs)}"
        for name in sorted(theirs):
            if ours[name] == theirs[name]:
                continue
            stem, _, suffix = name.partition(".")
            if suffix == "log":
                recompressed += _same_but_recompressed(log_dir / tp / name, broker_dir / name)
            elif suffix in ("index", "timeindex") and ours[f"{stem}.log"] != theirs[f"{stem}.log"]:
                assert _verified(log_dir / tp / name), f"{CTX} {tp}/{name} does not hold against klog's segment"
            elif suffix == "snapshot":  # the bar: the same entries (a broker's later snapshot at the
                # same offset may differ in bytes, e.g. after its restart)
                mine = ProducerStateManager.read_snapshot(log_dir / tp / name).producers
                broker_s = ProducerStateManager.read_snapshot(broker_dir / name).producers
                assert mine == broker_s, f"{CTX} {tp}/{name}: klog's producer entries differ from the broker's"
            else:
                raise AssertionError(f"{CTX} {tp}/{name}: klog's bytes differ from the broker's")
        assert not list((log_dir / tp).glob("*.deleted")), f"{CTX} {tp}: klog compact left *.deleted files"
        set_aside = summary[0]["deleted_files"]  # what it set aside, then removed at its end (it holds the lock)
        assert set_aside == sorted(f.name for f in broker_dir.glob("*.deleted")), f"{CTX} {tp}: *.deleted differ"
        assert _cleaner_offset(log_dir, written.keyed, p) == _cleaner_offset(written.cleaned_dir, written.keyed, p)
    got = storage_core.read_arrow(list(written.before_cleaning.values()), subscribe=written.keyed,
                                  includeHeaders=True).read_all()
    assert_same_rows(rows_of(got), written.consumer_rows, f"{CTX} klog compact vs the broker's consumer")
    print(f"{CTX}: {recompressed} snappy batches recompressed to other bytes")


# --- 3. indexes and producer snapshots ---------------------------------------------------------------


def test_rebuilt_indexes_equal_broker(written: Written, tmp_path: Path) -> None:
    """Indexes deleted from a copy and rebuilt by a writable open are the broker's, byte for byte,
    for every segment of the workload's topics that the broker's cleaner has not rewritten (the
    broker trimmed its active segment's indexes when it shut down). The broker writes index entries
    as it appends, recovery (Kafka's and klog's) as it walks batches: the two agree where each
    append is a producer's batch, not where an append carries several batches. A cleaned
    segment's index is the cleaner's (it appends a read buffer of retained batches at a time), and
    the internal topics' segments are the coordinators' (their runtime appends several batches at a
    time): those two are left out, and seeds were seen where they differ."""
    copy = tmp_path / "rebuilt"
    shutil.copytree(written.dump_dir, copy, ignore=shutil.ignore_patterns("*.index", "*.timeindex", "*.deleted",
                                                                          "__cluster_metadata-*"))
    with LogManager([copy], writable=True):
        pass
    compared = 0
    for seg in _files(written.dump_dir, "*.log"):
        if seg.parent.name.startswith("__"):
            continue  # the coordinators' and the Raft layer's appends (see above)
        topic, _, partition = seg.parent.name.rpartition("-")
        cleaned_to = _cleaner_offset(written.dump_dir, topic, int(partition))
        if cleaned_to is not None and int(seg.stem) < cleaned_to:
            continue  # rewritten by the broker's cleaner (see above)
        for suffix in (".index", ".timeindex"):
            theirs = seg.with_suffix(suffix).read_bytes()
            ours = (copy / seg.parent.name / seg.with_suffix(suffix).name).read_bytes()
            assert ours == theirs, f"{CTX} {seg.parent.name}/{seg.stem}{suffix}: klog rebuilt {len(ours)} bytes, " \
                                   f"the broker wrote {len(theirs)}"
            compared += 1
    assert compared >= 20


def _rewritten_batches(log: Log) -> dict[int, int]:
    """The batches the cleaner rewrote, by last offset: max timestamp now. A batch holding fewer
    records than its offsets span lost records to compaction; Kafka's cleaner (``MemoryRecords.filterTo``)
    rewrites it with the last offset kept (the producer's last sequence must survive) and the max
    timestamp of the records it kept, while the broker's producer state (and so its snapshots) keeps
    the timestamp of the batch as it was appended."""
    out = {}
    for b in log.batches():
        if isinstance(b, DefaultRecordBatch) and b.records_count < b.last_offset - b.base_offset + 1:
            out[b.last_offset] = b.max_timestamp
    return out


def _assert_same_producers(got: dict[int, Any], want: dict[int, Any], rewritten: dict[int, int], ctx: str) -> None:
    """klog's producer entries equal the broker's, except the timestamp of an entry whose last batch
    the cleaner rewrote: there klog, replaying the log as Kafka does on a rebuild, has the rewritten
    batch's max timestamp, which cannot be above the one the broker saw on append."""
    assert got.keys() == want.keys(), f"{ctx}: klog {got}, the broker {want}"
    for pid, entry in want.items():
        mine = got[pid]
        if mine != entry and entry.last_offset in rewritten:
            assert mine.timestamp == rewritten[entry.last_offset] <= entry.timestamp, (ctx, mine, entry)
            mine = dataclasses.replace(mine, timestamp=entry.timestamp)
        assert mine == entry, f"{ctx}: producer {pid}: klog {mine}, the broker {entry}"


def _own_partitions(written: Written) -> list[Path]:
    """The partition dirs of this module's topics and of the broker's internal ones but the metadata
    log. The session's broker also holds other modules' topics, and those are not this module's
    workload: ``test_kafka_source_parity``'s ``lost`` topic, whose first segments retention deleted,
    keeps in the broker's snapshots a producer whose only batches were deleted (Kafka keeps producer
    state when the log start offset moves), which no replay of the remaining log can know."""
    own = {*written.workload, written.keyed}
    return sorted(p for p in written.dump_dir.iterdir() if p.is_dir() and not p.name.startswith("__cluster")
                  and (p.name.startswith("__") or p.name.rpartition("-")[0] in own))


def test_producer_state_equals_broker_snapshots(written: Written, tmp_path: Path) -> None:
    """The producer state klog replays from the log (from no snapshot, or from the broker's at the
    first segment when retention deleted the segments before it, as Kafka starts from it) holds, at
    the offset of each snapshot the broker wrote (at every roll, and at shutdown), that snapshot's
    entries. In a partition the broker's cleaner cleaned only the last snapshot is compared: those
    it wrote at rolls before the cleaning describe batches the cleaner has since removed (Kafka
    keeps each producer's last batch, so the state at the end survives, not the states before it).
    And the snapshot klog writes when it closes a log whose snapshots were deleted holds the
    entries of the broker's at the same offset."""
    checked = 0
    replays = tmp_path / "replayed"
    for pd in _own_partitions(written):
        snaps = snapshot_files(pd)
        if not snaps:
            continue
        first = Log(pd).segments[0].base_offset
        start = f"{first:020d}.snapshot" if first > 0 else None
        shutil.copytree(pd, replays / pd.name, ignore=lambda _d, names, start=start: [  # type: ignore[misc]
            n for n in names if n.endswith(".deleted") or (n.endswith(".snapshot") and n != start)])
        segments = Log(replays / pd.name).segments
        topic, _, partition = pd.name.rpartition("-")
        if _cleaner_offset(written.dump_dir, topic, int(partition)) is not None:
            snaps = snaps[-1:]
        rewritten = _rewritten_batches(Log(replays / pd.name))
        for offset, path in snaps:
            want = ProducerStateManager.read_snapshot(path).producers
            got = producer_state_at(segments, offset, notes=[]).producers
            _assert_same_producers(got, want, rewritten, f"{CTX} {pd.name} producer state at {offset}")
            checked += bool(want)
    assert checked >= 10
    copy = tmp_path / "closed"
    shutil.copytree(written.dump_dir, copy, ignore=shutil.ignore_patterns("*.snapshot", "*.deleted",
                                                                          "__cluster_metadata-*"))
    with LogManager([copy], writable=True) as m:
        for log in m.logs.values():
            log.producer_state  # noqa: B018 - loaded, so that closing writes its snapshot
    written_by_klog = 0
    for pd in (copy / p.name for p in _own_partitions(written)):
        for _offset, path in snapshot_files(pd):
            theirs = written.dump_dir / pd.name / path.name
            assert theirs.exists(), f"{CTX}: klog wrote {pd.name}/{path.name}, the broker has no snapshot there"
            _assert_same_producers(ProducerStateManager.read_snapshot(path).producers,
                                   ProducerStateManager.read_snapshot(theirs).producers,
                                   _rewritten_batches(Log(written.dump_dir / pd.name)), f"{CTX} {pd.name}/{path.name}")
            written_by_klog += 1
    assert written_by_klog >= 4
