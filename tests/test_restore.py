"""``klog restore`` / :func:`storage_core.restore`: records back at their original offsets.

The truth is the generator's (:mod:`restore_gen`: it decides every record, offset, gap, timestamp
type and transaction outcome) and the read path's ``read_committed`` view of the source; the
restored dir is read back through the same read path. Every refusal is checked to leave the target
exactly as it was."""

from __future__ import annotations

import fcntl
import json
import os
import random
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from restore_gen import RestoreSource, Row
from shared_fixtures import KAFKA_FIXTURES
from shared_fixtures import available as fixtures_available

import storage_core as klog
from storage_core.files import LOG_SUFFIX, filename_prefix
from storage_core.log.checkpoint import OffsetCheckpointFile
from storage_core.log.cluster_metadata import CLUSTER_METADATA_DIR
from storage_core.log.log import Log
from storage_core.log.topic_partition import TopicPartition
from storage_core.tools.cli import main


def seeded(name: str) -> int:
    seed = int(os.environ.get("KLOG_SEED", random.randrange(1 << 30)))
    print(f"{name}: seed {seed} (KLOG_SEED={seed} to repeat)")
    return seed


def rows_of(table: pa.Table) -> dict[tuple[str, int], list[Row]]:
    """read_arrow's rows per partition, as the generator writes them down."""
    out: dict[tuple[str, int], list[Row]] = {}
    cols = table.to_pydict()
    ts = table.column("timestamp").cast(pa.int64()).to_pylist()  # microseconds
    for i in range(table.num_rows):
        headers = tuple((h["key"], h["value"]) for h in (cols["headers"][i] or ()))
        out.setdefault((cols["topic"][i], cols["partition"][i]), []).append(
            (cols["offset"][i], cols["key"][i], cols["value"][i], headers, ts[i] // 1000, cols["timestampType"][i]))
    return out


def read(path: Path, **options: object) -> dict[tuple[str, int], list[Row]]:
    return rows_of(klog.read_arrow(str(path), includeHeaders=True, **options).read_all())


def files_of(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` and its bytes: what a refusal must leave as it was."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def log_starts(log_dir: Path) -> dict[tuple[str, int], int]:
    return {(r.topic_partition.topic, r.topic_partition.partition): r.start
            for r in klog.plan(str(log_dir)).ranges}


def test_restore_log_dir_at_original_offsets(tmp_path: Path) -> None:
    """Every committed record of a log dir (gaps, null keys and values, headers, both timestamp types,
    aborted transactions left out) at its offset, each partition's log start at its first record and
    its first segment named by it."""
    gen = RestoreSource(tmp_path / "src", seeded("log dir"), topics=("orders", "audit"), partitions=2)
    source_rows = read(tmp_path / "src", isolationLevel="read_committed")
    assert source_rows == {tp: rows for tp, rows in gen.expected.items() if rows}
    for codec in ("none", "zstd"):
        target = tmp_path / f"dst-{codec}"
        summary = klog.restore(tmp_path / "src", target, compression=codec)
        assert summary.records == sum(len(r) for r in gen.expected.values())
        assert read(target) == source_rows
        firsts = {tp: rows[0][0] for tp, rows in gen.expected.items() if rows}  # the first committed record's
        assert log_starts(target) == firsts
        for (topic, p), first in firsts.items():
            assert sorted(x.name for x in (target / f"{topic}-{p}").glob("*" + LOG_SUFFIX))[0] == \
                filename_prefix(first) + LOG_SUFFIX


def test_restore_export_after_records_with_a_gap(tmp_path: Path) -> None:
    """A klog export (one file, and a dir of files per partition) restored into partitions that hold
    records ending below the first offset: a segment of its own starts at that offset; what was there
    stays, and the log start offset does not move."""
    gen = RestoreSource(tmp_path / "src", seeded("export"), partitions=2, start=5000)
    for per_partition in (False, True):
        out = tmp_path / ("parts" if per_partition else "orders.parquet")
        assert main(["export", str(tmp_path / "src"), "--topic", "orders", "-o", str(out), "--read-committed",
                     "--headers", "--quiet", *(["--per-partition"] if per_partition else [])]) == 0
        target = tmp_path / f"dst-{per_partition}"
        before: dict[tuple[str, int], list[Row]] = {}
        for p in range(2):
            d = target / f"orders-{p}"
            d.mkdir(parents=True)
            with Log(d, writable=True) as lg:
                from storage_core.record.records import Record, build_batch

                lg.append(build_batch([Record(i, 1_700_000_000_000 + i, None, b"old%d" % i) for i in range(3 + p)]))
            before[("orders", p)] = [(i, None, b"old%d" % i, (), 1_700_000_000_000 + i, 0) for i in range(3 + p)]
        klog.restore(out, target)
        got = read(target)
        assert got == {tp: before[tp] + gen.expected[tp] for tp in before}
        assert log_starts(target) == {tp: 0 for tp in before}
        for p in range(2):
            assert (target / f"orders-{p}" / (filename_prefix(gen.expected[("orders", p)][0][0]) + LOG_SUFFIX)).exists()


def hold_like_a_broker(log_dir: Path) -> subprocess.Popen[str]:
    """Another process holding the classic POSIX lock on ``<log dir>/.lock``, as a broker does."""
    code = textwrap.dedent(f"""
        import fcntl, sys, time
        f = open({str(log_dir / '.lock')!r}, 'a')
        fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        print('held', flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_restore_refusals_leave_the_target_as_it_was(tmp_path: Path) -> None:
    gen = RestoreSource(tmp_path / "src", seeded("refusals"), topics=("zz-restore-probe",), partitions=1, batches=8,
                        start=100)
    target = tmp_path / "dst"
    klog.restore(tmp_path / "src", target)
    untouched = files_of(target)

    def refused(error: type[klog.KlogError], source: Path, *words: str, topics: list[str] | None = None,
                into: Path = target) -> None:
        before = files_of(into)
        with pytest.raises(error) as info:
            klog.restore(source, into, topics=topics)
        text = str(info.value)
        assert "\n" not in text and all(w in text for w in words), text
        assert files_of(into) == before

    # a source overlapping what the target holds (the same records again)
    first = gen.starts[("zz-restore-probe", 0)]  # the source's first offset (its log start)
    end = Log(target / "zz-restore-probe-0").log_end_offset
    refused(klog.OffsetOverlapError, tmp_path / "src", "zz-restore-probe-0", f"ends at offset {end}", f"at or below {first}")
    # a Parquet file without offsets
    plain = tmp_path / "plain.parquet"
    pq.write_table(pa.table({"topic": ["orders"], "partition": [0], "value": [b"v"]}), plain)
    refused(klog.RestoreError, plain, str(plain), "'offset'")
    # offsets that do not increase
    backwards = tmp_path / "backwards.parquet"
    pq.write_table(pa.table({"topic": ["t", "t"], "partition": [0, 0], "offset": [7, 7], "value": [b"a", b"b"]}),
                   backwards)
    refused(klog.RestoreError, backwards, "offset 7", "follows offset 7")
    # a topic the export does not hold
    good = tmp_path / "good.parquet"
    pq.write_table(pa.table({"topic": ["t"], "partition": [0], "offset": [7], "value": [b"a"]}), good)
    refused(klog.RestoreError, good, "holds no record of topic 'nope'", "['t']", topics=["nope"])
    # an internal topic
    refused(klog.InvalidTopicError, tmp_path / "src", "__consumer_offsets", topics=["__consumer_offsets"])
    # a broker holding the dir
    broker = hold_like_a_broker(target)
    try:
        refused(klog.LogDirLockedError, tmp_path / "src", str(target))
    finally:
        broker.kill()
        broker.wait()
    assert files_of(target) == untouched
    # a topic the dir's KRaft metadata does not know (a broker's dir: a copy of a real one's metadata)
    if fixtures_available():
        meta = sorted(KAFKA_FIXTURES.rglob(f"{CLUSTER_METADATA_DIR}/*.log"))
        if meta:
            broker_dir = tmp_path / "broker"
            broker_dir.mkdir()
            shutil.copytree(meta[0].parent, broker_dir / CLUSTER_METADATA_DIR)
            refused(klog.InvalidTopicError, tmp_path / "src", "'zz-restore-probe'", "KRaft metadata", into=broker_dir)
            # a topic it knows, in the dir of a broker that is not among the partition's replicas
            from storage_core.log.cluster_metadata import replay_cluster_metadata

            kraft = replay_cluster_metadata(meta[0].parent.parent)
            props = meta[0].parent.parent / "meta.properties"
            if kraft is not None and props.exists():
                known = sorted(t for t in kraft.topics if not t.startswith("_") and 0 in kraft.topics[t].partitions)[0]
                other = tmp_path / "broker-77"
                other.mkdir()
                shutil.copytree(meta[0].parent, other / CLUSTER_METADATA_DIR)
                (other / "meta.properties").write_text(re.sub(r"node\.id=\d+", "node.id=77", props.read_text()))
                RestoreSource(tmp_path / "known", 1, topics=(known,), partitions=1, batches=2)
                refused(klog.InvalidTopicError, tmp_path / "known", f"{known}-0 is not hosted by broker 77",
                        into=other)


def test_cli_restore(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gen = RestoreSource(tmp_path / "src", seeded("cli"), partitions=1, batches=5, start=42)
    first = gen.expected[("orders", 0)][0][0]  # the first committed record's offset, 42 or above
    assert main(["restore", str(tmp_path / "src"), str(tmp_path / "dst"), "--topic", "orders", "--json"]) == 0
    text = capsys.readouterr().out
    out = json.loads(text[text.index("{"):])  # after the seed's line
    assert out["partitions"][0]["first"] == first and out["records"] == len(gen.expected[("orders", 0)])
    assert OffsetCheckpointFile(tmp_path / "dst" / "log-start-offset-checkpoint").read() == \
        {TopicPartition("orders", 0): first}
    assert main(["restore", str(tmp_path / "src"), str(tmp_path / "dst")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("klog: error: orders-0 in ") and "\n" not in err and "overlaps" in err, err


def test_restore_lock_file_is_the_one_a_broker_takes(tmp_path: Path) -> None:
    """The restore takes (and releases) the log dir's lock: a broker's lockf after it succeeds."""
    RestoreSource(tmp_path / "src", seeded("lock"), partitions=1, batches=3)
    klog.restore(tmp_path / "src", tmp_path / "dst")
    with open(tmp_path / "dst" / ".lock", "a") as f:
        fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)


@pytest.mark.parametrize("policy", ["delete", "compact"])
def test_gap_after_records_where_readers_would_take_it_for_lost_data(tmp_path: Path, policy: str) -> None:
    """A partition holding records, in a dir that says its topic is not compacted (and so rolls at its
    end, by the lost-data rule every reader applies), refuses a restore that would leave a gap below
    the first restored offset; a compacted topic's takes it."""
    from storage_core.log.manager import LogManager
    from storage_core.log.topic_configs import save_topic_configs
    from storage_core.record.records import Record, build_batch

    gen = RestoreSource(tmp_path / "src", seeded("gap"), topics=("g",), partitions=1, batches=4, start=1000)
    target = tmp_path / "dst"
    (target / "g-0").mkdir(parents=True)
    save_topic_configs(target, {"g": {"cleanup.policy": policy}})
    with Log(target / "g-0", writable=True) as lg:
        lg.append(build_batch([Record(i, 1_700_000_000_000, b"k", b"old") for i in range(3)]))
    LogManager([target], writable=True).close()  # the recovery point checkpoint knows the partition
    if policy == "delete":
        before = files_of(target)
        with pytest.raises(klog.RestoreError, match="g-0 in .* ends at offset 3 and the source starts at 1000") as e:
            klog.restore(tmp_path / "src", target)
        assert "lost data (offsets 3..999)" in str(e.value) and files_of(target) == before
    else:
        klog.restore(tmp_path / "src", target)
        got = read(target)[("g", 0)]
        assert got[3:] == gen.expected[("g", 0)] and len(got) == 3 + len(gen.expected[("g", 0)])


def test_restore_from_the_tables_klog_sync_made(tmp_path: Path) -> None:
    """A Delta table and an Iceberg table (read from its newest metadata file, no catalog) that `klog
    sync` made of a log dir: restored, they read as the log dir read read_committed."""
    RestoreSource(tmp_path / "src", seeded("tables"), partitions=2, batches=15)
    want = read(tmp_path / "src", isolationLevel="read_committed")
    klog.sync(str(tmp_path / "src"), str(tmp_path / "delta"), format="delta", includeHeaders="true")
    klog.sync(str(tmp_path / "src"), "ns.orders", format="iceberg", warehouse=str(tmp_path / "wh"),
              includeHeaders="true")
    for name, table in (("delta", tmp_path / "delta"), ("iceberg", tmp_path / "wh" / "ns" / "orders")):
        klog.restore(table, tmp_path / f"dst-{name}")
        assert read(tmp_path / f"dst-{name}") == want, name
