"""Fuzzing every parser klog runs on bytes from outside, beyond the record decoders of
``fuzz/decode.py``: index files, checkpoint files, ``klog-topic-configs.json``, sink marks and
commit journals, control records, producer ``.snapshot`` files, ``.log`` walking over mixed
magics (v0, v1, v2) and every codec, and a whole partition dir opened by :class:`Log` with one of
its files damaged.

Invariant, per input: only :class:`KlogError` comes out (anything else is counted *untyped* and
printed with the input), nothing hangs (a per-input alarm of ``HANG_S`` seconds; a hang is
counted), memory stays bounded (the address space is capped with ``RLIMIT_AS``; a
``MemoryError`` is untyped; the peak RSS is printed).

    python fuzz/parsers.py 100000                 # 100,000 inputs spread over every target
    python fuzz/parsers.py 50000 --target snapshot --seed 7
    python fuzz/parsers.py --list

The same targets run in the test suite (``tests/test_fuzz_parsers.py``) with hypothesis.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import signal
import struct
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a script: the repository root is one level up
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from storage_core.errors import KlogError  # noqa: E402
from storage_core.log.checkpoint import (  # noqa: E402
    CleanShutdownFile,
    EpochEntry,
    LeaderEpochCheckpointFile,
    MetaProperties,
    OffsetCheckpointFile,
    PartitionMetadataFile,
)
from storage_core.log.config import LogConfig  # noqa: E402
from storage_core.log.journal import pending_journal_offsets, read_sink_mark, recover_commits  # noqa: E402
from storage_core.log.log import Log  # noqa: E402
from storage_core.log.offset_index import OffsetIndex  # noqa: E402
from storage_core.log.producer_state import ProducerStateManager  # noqa: E402
from storage_core.log.time_index import TimeIndex  # noqa: E402
from storage_core.log.topic_configs import load_topic_configs  # noqa: E402
from storage_core.log.txn_index import AbortedTxn, TransactionIndex  # noqa: E402
from storage_core.record.columnar import ArrowDecoder  # noqa: E402
from storage_core.record.compression import CompressionType, compress  # noqa: E402
from storage_core.record.control import ControlRecordType, EndTransactionMarker  # noqa: E402
from storage_core.record.file_records import iter_batches  # noqa: E402
from storage_core.record.records import Header, Record, build_batch, build_end_txn_marker, crc32c  # noqa: E402

HANG_S = 5.0
MEMORY_CAP = 6 << 30
T0 = 1_700_000_000_000


class Hang(BaseException):
    """Raised by the per-input alarm: not an Exception, so no handler in klog swallows it."""


# --- seeds -------------------------------------------------------------------------------------------

def _legacy(offset: int, magic: int, attributes: int, key: bytes | None, value: bytes | None) -> bytes:
    msg = struct.pack(">bb", magic, attributes)
    if magic == 1:
        msg += struct.pack(">q", T0 + offset)
    for field in (key, value):
        msg += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    entry = bytearray(struct.pack(">qiI", offset, 4 + len(msg), 0) + msg)
    struct.pack_into(">I", entry, 12, zlib.crc32(bytes(entry[16:])) & 0xFFFFFFFF)
    return bytes(entry)


def log_seeds() -> list[bytes]:
    """``.log`` contents: v2 batches of every codec (plain, transactional, control), v0/v1 messages
    plain and compressed (gzip, snappy, lz4), and mixes of magics in one file."""
    out = []
    recs = [Record(i, T0 + i, None if i % 3 == 0 else b"k%d" % i, b"v" * (i * 7 % 40),
                   (Header("h", b"v"),) if i % 2 else ()) for i in range(6)]
    v2 = {c: build_batch(recs, compression=c) for c in CompressionType}
    out += v2.values()
    out.append(build_batch([Record(6 + i, T0, b"k", b"v", ()) for i in range(2)], producer_id=9,
                           producer_epoch=0, base_sequence=0, is_transactional=True))
    out.append(build_end_txn_marker(8, T0, 0, 9, 0, EndTransactionMarker(ControlRecordType.ABORT, 0)))
    for magic in (0, 1):
        plain = b"".join(_legacy(i, magic, 0, b"k", b"v%d" % i) for i in range(3))
        out.append(plain)
        for codec in (CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4):
            inner = b"".join(_legacy(i if magic == 0 else i, magic, 0, b"k", b"v%d" % i) for i in range(3))
            out.append(_legacy(2, magic, int(codec), None, compress(codec, inner)))
    out.append(out[-1] + v2[CompressionType.ZSTD])  # magic 1 then magic 2
    out.append(_legacy(0, 0, 0, b"a", b"b") + _legacy(1, 1, 0, b"a", b"b") + v2[CompressionType.NONE])
    return out


def offset_index_seed() -> bytes:
    return b"".join(struct.pack(">ii", 10 * i + 3, 4096 * i) for i in range(8))


def time_index_seed() -> bytes:
    return b"".join(struct.pack(">qi", T0 + 1000 * i, 10 * i + 3) for i in range(8))


def txn_index_seed() -> bytes:
    return b"".join(AbortedTxn(7 + i, 100 + 5 * i, 103 + 5 * i, 99 + 5 * i).pack() for i in range(3))


def snapshot_seed(tmp: Path) -> bytes:
    seg = build_batch([Record(0, T0, b"k", b"v", ())], producer_id=5, producer_epoch=1, base_sequence=0)
    txn = build_batch([Record(1, T0, b"k", b"v", ())], producer_id=6, producer_epoch=0,
                      base_sequence=0, is_transactional=True)
    from storage_core.record.file_records import batch_from_bytes

    state = ProducerStateManager()
    for b in (seg, txn):
        state.update(batch_from_bytes(b))
    return state.write_snapshot(tmp, 2).read_bytes()


OFFSET_CHECKPOINT_SEED = b"0\n3\ntopic-a 0 100\ntopic-a 1 7\n__consumer_offsets 42 9000000000\n"
EPOCH_CHECKPOINT_SEED = b"0\n2\n0 0\n5 1200\n"
PARTITION_METADATA_SEED = b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA"
CLEAN_SHUTDOWN_SEED = b'{"version":0,"brokerEpoch":42}'
META_PROPERTIES_SEED = (b"#\n#Sat Nov 22 10:00:00 UTC 2026\nnode.id=1\ndirectory.id=J8aAPcfLQt2bqs1JT_rMgQ\n"
                        b"version=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qg\\=\\=\n")
TOPIC_CONFIGS_SEED = (b'{"users": {"cleanup.policy": "compact", "delete.retention.ms": "3600000", '
                      b'"segment.bytes": "104857600"}, "t": {"retention.ms": 1000, "min.insync.replicas": "2"}}')
SINK_MARK_SEED = b'{"batch": 12, "job": "sink-abc-12"}'


def journal_seed() -> bytes:
    """A journal as commit_job writes it; ``@DIR@`` stands for the log dir (filled in per input)."""
    pdir = "@DIR@/t-0"
    return json.dumps({"job": "j1", "entries": [{"partition_dir": pdir, "staging_dir": ".klog-staging-j1-00000-0",
                                                 "staged_base": 1 << 62, "final_base": 10}],
                       "ends": {pdir: 20}, "overwrite": {}, "starts": {pdir: 10}, "phase": "applying",
                       "sink": {"id": "s", "batch": 3, "previous": {"batch": 2, "job": "j0"}}}).encode()


CONTROL_SEEDS = [ControlRecordType.ABORT.key_bytes(), ControlRecordType.COMMIT.key_bytes(),
                 EndTransactionMarker(ControlRecordType.COMMIT, 7).value_bytes()]


# --- mutation ----------------------------------------------------------------------------------------

INTERESTING = [b"\x00\x00\x00\x00", b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff", b"\x80\x00\x00\x00",
               b"\x00\x00\x01\x00", b"\xff\xff\xff\xff\xff\xff\xff\xff", b"\x7f\xff\xff\xff\xff\xff\xff\xff",
               b"\xff\xff\xff\xff\x0f", b"\x01", b"\xfe"]
TEXT_TOKENS = [b"\n", b"\r", b"\r\n", b" ", b"\t", b"-1", b"0", b"9223372036854775808", b"99999999999999999999",
               b"=", b"\\", b"\\u12", b"#", b"..", b"/", b"\x00", b"\xc3\x28", b"\xff", b"null", b'"', b"{", b"}",
               b"[", b"]", b":", b",", b"1e999", b"NaN", b"true", b"-"]


def mutate(rng: random.Random, seed: bytes, *, text: bool = False) -> bytes:
    b = bytearray(seed)
    for _ in range(rng.randrange(1, 5)):
        op = rng.randrange(8)
        pos = rng.randrange(len(b) + 1)
        if op == 0 and b:
            b[min(pos, len(b) - 1)] = rng.randrange(256)
        elif op == 1 and b:
            b[min(pos, len(b) - 1)] ^= 1 << rng.randrange(8)
        elif op == 2:
            tok = rng.choice(TEXT_TOKENS if text else INTERESTING)
            b[pos:pos + len(tok)] = tok
        elif op == 3:
            b[pos:pos] = rng.choice(TEXT_TOKENS if text else INTERESTING)
        elif op == 4 and b:
            del b[pos:pos + rng.randrange(1, 9)]
        elif op == 5:
            b = b[:pos]
        elif op == 6 and b:  # duplicate a slice (extra entries, repeated batches)
            a = rng.randrange(len(b))
            b[pos:pos] = b[a:a + rng.randrange(1, 64)]
        else:
            b[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 8)))
    return bytes(b)


def fix_v2_crcs(data: bytes) -> bytes:
    """Recompute the CRC of each v2 batch whose frame is intact, so the record parser is reached."""
    b = bytearray(data)
    pos = 0
    while pos + 61 <= len(b):
        size = struct.unpack_from(">i", b, pos + 8)[0]
        end = pos + 12 + size
        if size < 49 or end > len(b):
            break
        if b[pos + 16] == 2:
            b[pos + 17:pos + 21] = crc32c(bytes(b[pos + 21:end])).to_bytes(4, "big")
        elif b[pos + 16] in (0, 1):
            struct.pack_into(">I", b, pos + 12, zlib.crc32(bytes(b[pos + 16:end])) & 0xFFFFFFFF)
        pos = end
    return bytes(b)


# --- targets -----------------------------------------------------------------------------------------

@dataclass
class Target:
    name: str
    weight: int  # share of a mixed run
    generate: Callable[[random.Random], bytes]
    run: Callable[[bytes, Path], None]


def _write(tmp: Path, name: str, data: bytes) -> Path:
    p = tmp / name
    p.write_bytes(data)
    return p


def run_offset_index(data: bytes, tmp: Path) -> None:
    p = _write(tmp, "00000000000000000003.index", data)
    with OffsetIndex(p, 3) as idx:
        idx.sanity_check()
        idx.all_entries()
        for target in (0, 3, 50, 1 << 40):
            idx.lookup(target)
    mem = OffsetIndex.in_memory(p, 3, data)
    mem.all_entries()
    mem.lookup(40)


def run_time_index(data: bytes, tmp: Path) -> None:
    p = _write(tmp, "00000000000000000003.timeindex", data)
    with TimeIndex(p, 3) as idx:
        idx.sanity_check()
        idx.all_entries()
        _ = idx.last_entry
        for ts in (-1, T0, T0 + 3500, 1 << 62):
            idx.lookup(ts)


def run_txn_index(data: bytes, tmp: Path) -> None:
    p = _write(tmp, "00000000000000000003.txnindex", data)
    idx = TransactionIndex(p, 3)
    idx.read()
    idx.collect_aborted(0, 1 << 40)


def run_snapshot(data: bytes, tmp: Path) -> None:
    p = _write(tmp, "00000000000000000002.snapshot", data)
    state = ProducerStateManager.read_snapshot(p)
    state.first_unstable_offset()
    state.ongoing_first_offsets()


def run_offset_checkpoint(data: bytes, tmp: Path) -> None:
    OffsetCheckpointFile(_write(tmp, "recovery-point-offset-checkpoint", data)).read()


def run_epoch_checkpoint(data: bytes, tmp: Path) -> None:
    LeaderEpochCheckpointFile(_write(tmp, "leader-epoch-checkpoint", data)).read()


def run_partition_metadata(data: bytes, tmp: Path) -> None:
    PartitionMetadataFile(_write(tmp, "partition.metadata", data)).read()


def run_clean_shutdown(data: bytes, tmp: Path) -> None:
    CleanShutdownFile(_write(tmp, ".kafka_cleanshutdown", data)).read()


def run_meta_properties(data: bytes, tmp: Path) -> None:
    MetaProperties(_write(tmp, "meta.properties", data)).read()


def run_topic_configs(data: bytes, tmp: Path) -> None:
    _write(tmp, "klog-topic-configs.json", data)
    load_topic_configs(tmp)


def run_sink_mark(data: bytes, tmp: Path) -> None:
    _write(tmp, ".klog-sink-s.json", data)
    read_sink_mark(tmp, "s")


def run_journal(data: bytes, tmp: Path) -> None:
    """A damaged journal in a log dir with one partition and its staging: readers and recovery."""
    pdir = tmp / "t-0"
    staging = pdir / ".klog-staging-j1-00000-0"
    staging.mkdir(parents=True, exist_ok=True)
    _write(tmp, ".klog-commit-j1.json", data.replace(b"@DIR@", str(tmp).encode()))
    try:
        pending_journal_offsets(tmp)
        recover_commits(tmp)
    finally:
        for p in tmp.iterdir():
            if p.name != "t-0" or not p.is_dir():
                p.unlink() if not p.is_dir() else shutil.rmtree(p)
        shutil.rmtree(pdir)


def run_control(data: bytes, tmp: Path) -> None:
    half = len(data) // 2
    ControlRecordType.parse(data)
    ControlRecordType.parse(data[:half])
    EndTransactionMarker.deserialize(data[:4], data[4:])


def run_log_walk(data: bytes, tmp: Path) -> None:
    """Walk, CRC-check, decode every record and build Arrow with both builders."""
    for native in (True, False):
        dec = ArrowDecoder("t", 0, include_headers=True, native=native)
        for batch in iter_batches(data, path="fuzz.log"):
            if native:
                batch.ensure_valid()
                for r in batch.records():
                    _ = (r.offset, r.timestamp, r.key, r.value, r.headers)
            dec.add(batch)
        dec.finish().validate(full=True)


_PART_FILES = ("00000000000000000000.index", "00000000000000000000.timeindex", "00000000000000000000.txnindex",
               "00000000000000000007.snapshot", "leader-epoch-checkpoint", "partition.metadata",
               "00000000000000000000.log")


def _partition_seed(tmp: Path) -> Path:
    """A real partition dir written by klog (two segments, a transaction, an abort)."""
    seed = tmp / "seed-topic" / "t-0"
    if seed.exists():
        return seed
    seed.mkdir(parents=True)
    cfg = LogConfig.from_properties({"segment.bytes": "1200", "index.interval.bytes": "100"})
    with Log(seed, cfg, writable=True) as lg:
        for i in range(5):
            lg.append(build_batch([Record(j, T0 + 100 * i + j, b"k%d" % j, b"v" * 30, ()) for j in range(4)]))
        lg.append(build_batch([Record(0, T0 + 900, b"k", b"x", ())], producer_id=3, producer_epoch=0,
                              base_sequence=0, is_transactional=True))
        lg.append(build_end_txn_marker(0, T0 + 901, 0, 3, 0, EndTransactionMarker(ControlRecordType.ABORT, 0)))
        lg.roll()
    LeaderEpochCheckpointFile.in_dir(seed).write([EpochEntry(0, 0)])
    PartitionMetadataFile.in_dir(seed).write(__import__("uuid").UUID(int=7))
    return seed


def run_partition_dir(data: bytes, tmp: Path) -> None:
    """First byte picks the damaged file of a klog-written partition; then a read-only open reads it all."""
    if not data:
        return
    seed = _partition_seed(tmp.parent)
    part = tmp / "t-0"
    if part.exists():
        shutil.rmtree(part)
    shutil.copytree(seed, part)
    names = [n for n in _PART_FILES if (part / n).exists()]
    name = names[data[0] % len(names)]
    (part / name).write_bytes(data[1:])
    if data[0] & 0x80:  # a writable open: recovery on disk, then an append and a roll
        with Log(part, LogConfig(), writable=True) as lg:
            lg.append(build_batch([Record(0, T0 + 5000, b"k", b"after", ())]))
            lg.roll()
    with Log(part, LogConfig()) as lg:
        for b in lg.batches():
            b.ensure_valid()
        list(lg.batches(read_committed=True))
        lg.offset_for_timestamp(T0 + 250)
        lg.read(lg.log_start_offset)


OPTION_SEED = json.dumps({
    "read": {"path": "/nowhere", "topics": "a,b", "startingOffsets": '{"a": {"0": 5, "1": -2}}',
             "endingOffsets": "latest", "startingTimestamp": "1700000000000", "minPartitions": "4",
             "maxRecordsPerPartition": "1000", "includeHeaders": "true", "isolationLevel": "read_committed",
             "failOnDataLoss": "false", "assign": "", "startingOffsetsByTimestamp": '{"a": {"0": 1700000000000}}'},
    "stream": {"path": "/nowhere", "topics": "a", "maxOffsetsPerTrigger": "100", "minOffsetsPerTrigger": "10",
               "maxTriggerDelay": "5 min", "startingOffsets": "earliest"},
    "write": {"path": "/nowhere", "topic": "a", "numPartitions": "3", "compression": "lz4", "segment.bytes": "1048576",
              "maxBatchBytes": "65536", "lockTimeoutMs": "1000", "retention.ms": "-1"},
    "config": {"segment.bytes": "1048576", "cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": "0.5",
               "message.timestamp.type": "LogAppendTime", "flush.messages": "1", "segment.index.bytes": "4096"},
}).encode()


HOSTILE_VALUES = ["-1", "0", "", " ", "abc", "NaN", "inf", "1e3", "1.5", "0x10", "99999999999999999999999",
                  "-9223372036854775809", "9223372036854775808", "2147483648", "..", "a/b", "\x00", "x" * 300,
                  "{", '{"a": {"x": 1}}', '{"a": [1]}', '{"..": {"0": 1}}', '{"a": {"-1": 0}}', "[1]", "null",
                  "true", "earliest", "latest", "-2", "5 min", "5 lightyears", "é"]


def _option_gen(rng: random.Random) -> bytes:
    """The option seed with one to three values replaced by hostile or mutated ones (or keys added)."""
    doc = json.loads(OPTION_SEED)
    for _ in range(rng.randrange(1, 4)):
        section = rng.choice(list(doc))
        opts = doc[section]
        if rng.random() < 0.1:
            opts[rng.choice(["bogus", "", "Topics", "startingoffsets", "SEGMENT.BYTES"])] = rng.choice(HOSTILE_VALUES)
            continue
        key = rng.choice(list(opts))
        if rng.random() < 0.6:
            opts[key] = rng.choice(HOSTILE_VALUES)
        elif rng.random() < 0.5:
            opts[key] = mutate(rng, opts[key].encode(), text=True).decode("utf-8", "replace")
        else:
            del opts[key]
    return json.dumps(doc).encode()


def run_options(data: bytes, tmp: Path) -> None:
    """Option maps (JSON of the Spark reader, stream, writer options and topic configs), damaged:
    every parser refuses a bad value with a KlogError. Bytes that are not such JSON are skipped."""
    from spark_logsource.options import parse_read_options, parse_stream_options
    from spark_logsource.writer import parse_write_options

    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return  # not an option map: the JSON layer is this harness's, not klog's
    if not isinstance(doc, dict):
        return
    parsers: list[tuple[str, Callable[[dict[str, str]], object]]] = [
        ("read", parse_read_options), ("stream", parse_stream_options), ("write", parse_write_options),
        ("config", LogConfig.from_properties)]
    for key, parse in parsers:
        opts = doc.get(key)
        if not isinstance(opts, dict):
            continue
        try:
            parse({str(k): v if isinstance(v, str) else json.dumps(v) for k, v in opts.items()})
        except KlogError:
            pass


def _mutating(seeds: Callable[[], list[bytes]], *, text: bool = False,
              post: Callable[[random.Random, bytes], bytes] | None = None) -> Callable[[random.Random], bytes]:
    cache: list[bytes] = []

    def gen(rng: random.Random) -> bytes:
        if not cache:
            cache.extend(seeds())
        if rng.random() < 0.03:
            return bytes(rng.randrange(256) for _ in range(rng.randrange(64)))
        out = mutate(rng, rng.choice(cache), text=text)
        return post(rng, out) if post is not None else out
    return gen


def _seed_dir() -> Path:
    d = Path(tempfile.mkdtemp(prefix="klog-seed-"))
    return d


def _snapshot_seeds() -> list[bytes]:
    d = _seed_dir()
    try:
        return [snapshot_seed(d)]
    finally:
        shutil.rmtree(d)


def _fix_snapshot_crc(rng: random.Random, data: bytes) -> bytes:
    if len(data) >= 10 and rng.random() < 0.6:
        return data[:2] + crc32c(data[6:]).to_bytes(4, "big") + data[6:]
    return data


def _fix_log(rng: random.Random, data: bytes) -> bytes:
    return fix_v2_crcs(data) if rng.random() < 0.7 else data


class _PartitionGen:
    """Mutations of the files of one cached partition seed (built once per process)."""

    def __init__(self) -> None:
        self.files: list[tuple[int, str, bytes]] | None = None

    def __call__(self, rng: random.Random) -> bytes:
        if self.files is None:
            d = _seed_dir()
            try:
                seed = _partition_seed(d)
                names = [n for n in _PART_FILES if (seed / n).exists()]
                self.files = [(i, n, (seed / n).read_bytes()) for i, n in enumerate(names)]
            finally:
                shutil.rmtree(d)
        i, name, orig = rng.choice(self.files)
        body = mutate(rng, orig, text=not name[0].isdigit())
        if name.endswith(".log"):
            body = _fix_log(rng, body)
        return bytes([i | (0x80 if rng.random() < 0.4 else 0)]) + body


TARGETS: dict[str, Target] = {t.name: t for t in [
    Target("offset_index", 10, _mutating(lambda: [offset_index_seed(), b""]), run_offset_index),
    Target("time_index", 10, _mutating(lambda: [time_index_seed(), b""]), run_time_index),
    Target("txn_index", 8, _mutating(lambda: [txn_index_seed()]), run_txn_index),
    Target("snapshot", 10, _mutating(_snapshot_seeds, post=_fix_snapshot_crc), run_snapshot),
    Target("offset_checkpoint", 10, _mutating(lambda: [OFFSET_CHECKPOINT_SEED, b"0\n0\n"], text=True),
           run_offset_checkpoint),
    Target("epoch_checkpoint", 6, _mutating(lambda: [EPOCH_CHECKPOINT_SEED], text=True), run_epoch_checkpoint),
    Target("partition_metadata", 6, _mutating(lambda: [PARTITION_METADATA_SEED], text=True), run_partition_metadata),
    Target("clean_shutdown", 5, _mutating(lambda: [CLEAN_SHUTDOWN_SEED, b""], text=True), run_clean_shutdown),
    Target("meta_properties", 8, _mutating(lambda: [META_PROPERTIES_SEED], text=True), run_meta_properties),
    Target("topic_configs", 8, _mutating(lambda: [TOPIC_CONFIGS_SEED], text=True), run_topic_configs),
    Target("sink_mark", 5, _mutating(lambda: [SINK_MARK_SEED], text=True), run_sink_mark),
    Target("journal", 6, _mutating(lambda: [journal_seed()], text=True), run_journal),
    Target("control", 5, _mutating(lambda: CONTROL_SEEDS), run_control),
    Target("log_walk", 12, _mutating(log_seeds, post=_fix_log), run_log_walk),
    Target("partition_dir", 3, _PartitionGen(), run_partition_dir),
    Target("options", 6, lambda rng: _option_gen(rng), run_options),
]}


# --- the runner ---------------------------------------------------------------------------------------

@dataclass
class Outcome:
    inputs: int = 0
    typed: int = 0
    untyped: int = 0
    hangs: int = 0


def check_one(target: Target, data: bytes, tmp: Path, *, hang_s: float = HANG_S) -> str | None:
    """Run one input; returns None if only a KlogError (or nothing) came out, else what went wrong."""
    def on_alarm(signum: int, frame: object) -> None:
        raise Hang()

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, hang_s)
    try:
        target.run(data, tmp)
    except KlogError:
        return None
    except Hang:
        return f"HANG over {hang_s} s"
    except Exception as exc:  # noqa: BLE001 - this is what the run looks for
        return f"UNTYPED {type(exc).__name__}: {exc}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    return None


def run(names: list[str], n: int, seed: int, *, out_dir: Path | None = None, quiet: bool = False) -> dict[str, Outcome]:
    rng = random.Random(seed)
    targets = [TARGETS[x] for x in names]
    weights = [t.weight for t in targets]
    results = {t.name: Outcome() for t in targets}
    base = Path(tempfile.mkdtemp(prefix="klog-fuzz-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
    try:
        for i in range(n):
            t = rng.choices(targets, weights)[0]
            data = t.generate(rng)
            tmp = base / t.name
            tmp.mkdir(exist_ok=True)
            problem = check_one(t, data, tmp)
            o = results[t.name]
            o.inputs += 1
            if not quiet and (i + 1) % 100_000 == 0:
                print(f"... {i + 1:,} inputs, {sum(r.untyped + r.hangs for r in results.values())} problems",
                      flush=True)
            if problem is None:
                continue
            if problem.startswith("HANG"):
                o.hangs += 1
            else:
                o.untyped += 1
            print(f"{t.name}: {problem[:300]} input={data[:400].hex()}", flush=True)
            if out_dir is not None:
                out_dir.mkdir(parents=True, exist_ok=True)
                (out_dir / f"{t.name}-{i}.bin").write_bytes(data)
            shutil.rmtree(tmp, ignore_errors=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return results


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("n", nargs="?", type=int, default=100_000, help="inputs in all (default 100,000)")
    ap.add_argument("--target", action="append", choices=sorted(TARGETS), help="only these targets (repeatable)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--save", type=Path, help="write failing inputs to this directory")
    ap.add_argument("--list", action="store_true", help="list the targets and exit")
    args = ap.parse_args(argv)
    if args.list:
        for t in TARGETS.values():
            print(f"{t.name:20} {(t.run.__doc__ or '').strip().splitlines()[0] if t.run.__doc__ else ''}")
        return 0
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard == resource.RLIM_INFINITY or hard > MEMORY_CAP:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, hard))
    t0 = time.time()
    results = run(args.target or list(TARGETS), args.n, args.seed, out_dir=args.save)
    total = Outcome()
    for name, o in sorted(results.items()):
        print(f"{name:20} inputs={o.inputs:>9,} untyped={o.untyped} hangs={o.hangs}")
        total.inputs += o.inputs
        total.untyped += o.untyped
        total.hangs += o.hangs
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(f"{'TOTAL':20} inputs={total.inputs:>9,} untyped={total.untyped} hangs={total.hangs} "
          f"seconds={time.time() - t0:.0f} peak_rss_mib={peak} seed={args.seed}")
    return 1 if total.untyped or total.hangs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
