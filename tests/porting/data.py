"""Records a porting test writes and therefore knows: each value names its own topic, partition
and offset (``topic1/0/23``), so the rows a ported job returns can be checked against the truth."""

from __future__ import annotations

import random
from pathlib import Path

from storage_core.log.manager import LogManager
from storage_core.log.topic_partition import TopicPartition
from storage_core.record.records import Header, Record, build_batch

T0 = 1_790_000_000_000


def value(topic: str, partition: int, offset: int) -> str:
    return f"{topic}/{partition}/{offset}"


def append(log_dir: Path, topic: str, partition: int, count: int, *, seed: int = 0) -> range:
    """Append ``count`` records in random-sized batches; returns their offsets."""
    rng = random.Random(f"{seed}/{topic}/{partition}")
    log_dir.mkdir(parents=True, exist_ok=True)
    with LogManager([log_dir], writable=True) as m:
        log = m.create_log(TopicPartition(topic, partition))
        first = log.log_end_offset
        offset = first
        while offset < first + count:
            n = min(rng.randint(1, 9), first + count - offset)
            records = [Record(o, T0 + o, f"k{o % 7}".encode(), value(topic, partition, o).encode(),
                              (Header("src", b"porting"),)) for o in range(offset, offset + n)]
            log.append(build_batch(records), now_ms=T0 + offset)
            offset += n
    return range(first, first + count)
