"""A log dir that was not shut down cleanly and has a corrupt batch in the middle: the read-only
open stops at the damage (as Kafka's recovery would cut there), and the Spark read must say so —
fail by default, or read up to the damage with failOnDataLoss=false — never return fewer rows
silently. A torn tail (an unacknowledged write) is not a loss."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage_core.log.config import LogConfig
from storage_core.log.log import Log
from storage_core.record.records import Record, build_batch

pytestmark = pytest.mark.spark
T0 = 1_700_000_000_000


def log_dir(root: Path) -> Path:
    cfg = LogConfig.from_properties({"segment.bytes": "2048", "index.interval.bytes": "256"})
    for p in range(2):
        d = root / f"orders-{p}"
        d.mkdir(parents=True)
        with Log(d, cfg, writable=True) as log:
            for i in range(20):
                log.append(build_batch([Record(j, T0 + 1000 * i + j, b"k", b"v" * 40) for j in range(5)]))
    return root


def test_corrupt_middle_fails_or_is_read_up_to_it(tmp_path: Path, spark) -> None:  # type: ignore[no-untyped-def]
    d = log_dir(tmp_path)
    seg = sorted((d / "orders-0").glob("*.log"))[1]
    raw = bytearray(seg.read_bytes())
    raw[200] ^= 0x01
    seg.write_bytes(bytes(raw))
    with pytest.raises(Exception) as info:
        spark.read.format("klog").option("topics", "orders").load(str(d)).count()
    assert "data in the middle of" in str(info.value) and "orders-0" in str(info.value) and str(seg) in str(info.value)
    assert "failOnDataLoss=false" in str(info.value)
    df = spark.read.format("klog").option("topics", "orders").option("failOnDataLoss", "false").load(str(d))
    counts = {r["partition"]: r["count"] for r in df.groupBy("partition").count().collect()}
    assert counts[1] == 100 and 30 <= counts[0] < 100


def test_torn_tail_is_not_a_loss(tmp_path: Path, spark) -> None:  # type: ignore[no-untyped-def]
    d = log_dir(tmp_path)
    seg = sorted((d / "orders-0").glob("*.log"))[-1]
    seg.write_bytes(seg.read_bytes()[:-7])
    df = spark.read.format("klog").option("topics", "orders").load(str(d))
    assert df.count() == 195
