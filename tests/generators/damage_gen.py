"""Partitions written by klog whose every record is known, damaged on purpose, and the checks of
issue 30: a read returns exactly the undamaged records with a warning naming the lost offsets, or
fails naming them; never fewer records in silence.

A partition's record at offset ``o`` has key ``k<o>`` and value ``v<o>`` followed by padding, so a
returned row proves itself. :func:`damage` applies one random damage and says what it did.
"""

from __future__ import annotations

import logging
import os
import random
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from storage_core.files import RECOVERY_POINT_OFFSET_CHECKPOINT
from storage_core.log.config import LogConfig
from storage_core.log.manager import LogManager
from storage_core.log.topic_configs import save_topic_configs
from storage_core.log.topic_partition import TopicPartition
from storage_core.record.compression import CompressionType
from storage_core.record.file_records import FileRecords
from storage_core.record.records import Record, build_batch

T0 = 1_700_000_000_000
TOPIC = "t"


@dataclass
class Written:
    root: Path  # the log dir
    part: Path  # the partition dir
    n: int  # offsets 0..n-1
    recovery_point: int
    clean: bool


def value_of(offset: int, pad: int = 40) -> bytes:
    return b"v%d-" % offset + b"x" * pad


#: Partitions written once per process, copied for each damage (writing fsyncs; copying does not)
POOL_SIZE = 16
_pool: dict[int, tuple[Path, int]] = {}


def _written(key: int, cache: Path) -> tuple[Path, int]:
    """Log dir number ``key`` of the pool, written through klog's LogManager (checkpoints and the
    clean-shutdown marker) with parameters drawn from ``key``; and its record count."""
    if key in _pool and _pool[key][0].exists():
        return _pool[key]
    rng = random.Random(key)
    root = cache / f"pool-{key}"
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    n = rng.randint(150, 600)
    per_batch_max = rng.choice([1, 3, 7])
    cfg = LogConfig.from_properties({"segment.bytes": str(rng.choice([3000, 5000, 8000])),
                                     "index.interval.bytes": str(rng.choice([256, 1024, 4096]))})
    with LogManager([root], writable=True, config=cfg) as m:
        lg = m.create_log(TopicPartition(TOPIC, 0))
        o = 0
        while o < n:
            k = min(n - o, rng.randint(1, per_batch_max))
            codec = rng.choice([CompressionType.NONE, CompressionType.NONE, CompressionType.GZIP, CompressionType.LZ4])
            lg.append(build_batch([Record(j, T0 + o + j, b"k%d" % (o + j), value_of(o + j, rng.randint(0, 60)))
                                   for j in range(k)], compression=codec))
            o += k
    # the topic's policy known to a reader (as a broker's KRaft metadata tells it): a gap between
    # segments is then lost data (storage_core.log.lost)
    save_topic_configs(root, {TOPIC: {"cleanup.policy": "delete"}})
    _pool[key] = (root, n)
    return root, n


def write_partition(root: Path, rng: random.Random, *, clean: bool = True, crash_point: bool = False) -> Written:
    """A partition of a few segments written by klog (one of :data:`POOL_SIZE`, copied to ``root``),
    with the clean-shutdown marker when ``clean``. ``crash_point``: the recovery point is moved
    back to a segment base, as after a crash that happened before the last flush."""
    src, n = _written(rng.randrange(POOL_SIZE), root.parent / "pool")
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(src, root)
    part = root / f"{TOPIC}-0"
    rp = n
    if crash_point:
        bases = sorted(int(p.name.split(".")[0]) for p in part.glob("*.log"))
        rp = rng.choice(bases)
        (root / RECOVERY_POINT_OFFSET_CHECKPOINT).write_text(f"0\n1\n{TOPIC} 0 {rp}\n")
        clean = False
    if not clean:
        (root / ".kafka_cleanshutdown").unlink(missing_ok=True)
    return Written(root, part, n, rp, clean)


def _batches(path: Path) -> list[tuple[int, int]]:
    return [(b.position, b.size_in_bytes) for b in FileRecords(path).batches()]


def damage(w: Written, rng: random.Random) -> str:
    """One random damage to ``w``'s partition; returns what was done."""
    logs = sorted(w.part.glob("*.log"))
    kind = rng.choice(["truncate", "truncate-batch", "zero", "zero", "length", "length", "delete-log", "delete-index",
                       "empty-log", "flip"])
    i = rng.randrange(len(logs))
    f = logs[i]
    size = f.stat().st_size
    batches = _batches(f)
    if kind == "truncate":
        at = rng.randrange(size + 1)
        os.truncate(f, at)
        return f"truncate {f.name} to {at} of {size} bytes"
    if kind == "truncate-batch" and batches:
        pos, _ = rng.choice(batches)
        os.truncate(f, pos)
        return f"truncate {f.name} at the batch boundary {pos}"
    if kind == "empty-log":
        os.truncate(f, 0)
        return f"empty {f.name}"
    if kind in ("zero", "flip") and size:
        raw = bytearray(f.read_bytes())
        start = rng.randrange(size)
        length = rng.choice([1, 8, 64, 200, 1000]) if kind == "zero" else 1
        end = min(size, start + length)
        bit = 1 << rng.randrange(8)
        for _ in range(2):
            new = bytearray(raw)
            if kind == "zero":
                new[start:end] = bytes(end - start)
            else:
                new[start] ^= bit
            changed = [i for i in range(start, end) if new[i] != raw[i]]
            # a batch's base offset is outside its CRC (Kafka's too): a change confined to it is not
            # detectable by any reader; such a damage moves to the batch's size field
            hit = next((pos for pos, _ in batches if changed and pos <= changed[0] and changed[-1] < pos + 8), None)
            if hit is None:
                break
            start, end = hit + 8, min(size, hit + 8 + (end - start))
        raw = new
        f.write_bytes(bytes(raw))
        return f"{kind} {f.name} bytes {start}..{end}"
    if kind == "length" and batches:
        pos, _ = rng.choice(batches)
        raw = bytearray(f.read_bytes())
        value = rng.choice([0, 1, 13, 0x7FFFFFF0, rng.randrange(14, 100_000), -5])
        raw[pos + 8: pos + 12] = value.to_bytes(4, "big", signed=True)
        f.write_bytes(bytes(raw))
        return f"length of the batch at {pos} of {f.name} set to {value}"
    if kind == "delete-index":
        idx = f.with_suffix(".index")
        idx.unlink(missing_ok=True)
        return f"delete {idx.name}"
    if len(logs) > 1 or rng.random() < 0.3:
        f.unlink()
        return f"delete {f.name}"
    os.truncate(f, size // 2)
    return f"truncate {f.name} to {size // 2} (fallback)"


#: the kinds of :func:`misplace`: segments that lie about their place (issue 53)
MISPLACED = ("overlap", "delete-segment", "foreign", "foreign-no-index")


def _foreign(cache: Path) -> Path:
    """A partition of other records (key ``f<o>``, value ``w<o>-...``) in small segments, written
    once per process: the segments a misplacement puts into a partition's place."""
    part = cache / "foreign" / f"{TOPIC}-1"
    if part.is_dir():
        return part
    rng = random.Random(-1)
    (cache / "foreign").mkdir(parents=True, exist_ok=True)
    cfg = LogConfig.from_properties({"segment.bytes": "2000", "index.interval.bytes": "256"})
    with LogManager([cache / "foreign"], writable=True, config=cfg) as m:
        lg = m.create_log(TopicPartition(TOPIC, 1))
        for o in range(0, 900, 3):
            lg.append(build_batch([Record(j, T0 + o + j, b"f%d" % (o + j), b"w%d-" % (o + j) + b"y" * rng.randint(0, 40))
                                   for j in range(3)]))
    return part


def _extent(log: Path) -> tuple[int, int]:
    """(first offset, offset after the last) of a ``.log``'s batches."""
    batches = list(FileRecords(log).batches())
    return batches[0].base_offset, batches[-1].last_offset + 1


def misplace(w: Written, rng: random.Random) -> str | None:
    """One random segment out of its place in ``w``'s partition (:data:`MISPLACED`): batches of the
    next segment copied onto a segment's end (the offsets held twice); a middle segment deleted
    with its indexes; another partition's segment put in a segment's place, with or without its
    indexes, whose offsets do not fit the place (a foreign segment whose offsets fit its place
    exactly is not told from the partition's own by anything in the dir). None: the partition has
    too few segments for the kind drawn."""
    logs = sorted(w.part.glob("*.log"))
    kind = rng.choice(MISPLACED)
    if len(logs) < 2:
        return None
    if kind == "overlap":
        i = rng.randrange(len(logs) - 1)
        nxt = FileRecords(logs[i + 1])
        batches = list(nxt.batches())
        k = rng.randint(1, len(batches))
        end = batches[k - 1].position + batches[k - 1].size_in_bytes
        with logs[i].open("ab") as f:
            f.write(logs[i + 1].read_bytes()[:end])
        return f"overlap: the first {k} batches of {logs[i + 1].name} copied onto the end of {logs[i].name}"
    if kind == "delete-segment":
        i = rng.randrange(1, len(logs))
        for suffix in (".log", ".index", ".timeindex"):
            logs[i].with_suffix(suffix).unlink(missing_ok=True)
        return f"delete-segment: {logs[i].name} deleted with its indexes"
    i = rng.randrange(len(logs))
    base = int(logs[i].name.split(".")[0])
    nxt = int(logs[i + 1].name.split(".")[0]) if i + 1 < len(logs) else None
    end = _extent(logs[i])[1]
    theirs = [f for f in sorted(_foreign(w.root.parent / "pool").glob("*.log"))
              if (_extent(f)[0], _extent(f)[1]) != (base, end)
              and (_extent(f)[0] != base or (nxt is not None and _extent(f)[1] > nxt))]
    f = rng.choice(theirs)
    shutil.copyfile(f, logs[i])
    for suffix in (".index", ".timeindex"):
        if kind == "foreign":
            shutil.copyfile(f.with_suffix(suffix), logs[i].with_suffix(suffix))
        else:
            logs[i].with_suffix(suffix).unlink(missing_ok=True)
    return f"{kind}: {logs[i].name} replaced by another partition's {f.name} (offsets {_extent(f)[0]}..)"


_RANGE = re.compile(r"offsets (\d+)(?:\.\.(\d+))?")


def named_offsets(text: str) -> set[int]:
    """Every offset a message names (``offsets 12..40``, ``offsets 7``)."""
    out: set[int] = set()
    for m in _RANGE.finditer(text):
        a = int(m.group(1))
        b = int(m.group(2)) if m.group(2) else a
        if b - a < 10_000_000:
            out.update(range(a, b + 1))
    return out


class Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextmanager
def warnings_of_klog() -> Iterator[Captured]:
    h = Captured()
    logger = logging.getLogger("klog")
    logger.addHandler(h)
    try:
        yield h
    finally:
        logger.removeHandler(h)


def rows_by_offset(table: object) -> dict[int, tuple[bytes, bytes]]:
    import pyarrow as pa

    assert isinstance(table, pa.Table)
    offs = table.column("offset").to_pylist()
    keys = table.column("key").to_pylist()
    vals = table.column("value").to_pylist()
    out = {}
    for o, k, v in zip(offs, keys, vals, strict=True):
        assert o not in out, f"offset {o} returned twice"
        out[o] = (k, v)
    return out


def check_rows(rows: dict[int, tuple[bytes, bytes]], n: int) -> None:
    """Every returned row is the record written at its offset."""
    for o, (k, v) in rows.items():
        assert 0 <= o < n, f"offset {o} was never written"
        assert k == b"k%d" % o and v.startswith(b"v%d-" % o), f"offset {o} returned wrong bytes"
