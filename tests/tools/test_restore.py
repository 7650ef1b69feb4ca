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


def test_restore_from_a_clusters_dirs(tmp_path: Path) -> None:
    """A cluster's dirs, "b1/data,b2/data", are one source (each partition read once, as every reader
    reads them)."""
    seed = seeded("cluster")
    one = RestoreSource(tmp_path / "b1", seed, topics=("left",), partitions=2, batches=5)
    two = RestoreSource(tmp_path / "b2", seed + 1, topics=("right",), partitions=1, batches=5)
    summary = klog.restore(f"{tmp_path / 'b1'},{tmp_path / 'b2'}", tmp_path / "dst")
    assert read(tmp_path / "dst") == {**one.expected, **two.expected}
    assert summary.records == sum(len(r) for g in (one, two) for r in g.expected.values())


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


# --- consumer groups restored with the records (one job, one commit) -------------------------------


def with_offsets_topic(root: Path, partitions: int = 3) -> Path:
    """``root`` given the ``__consumer_offsets`` partitions a broker makes (empty)."""
    for p in range(partitions):
        (root / f"__consumer_offsets-{p}").mkdir(parents=True)
    return root


def tree_digest(root: Path) -> str:
    """One hash of everything under ``root``: each dir and file by its path, and each file's bytes."""
    import hashlib

    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        h.update(str(p.relative_to(root)).encode() + (b"/" if p.is_dir() else b"\0"))
        if p.is_file():
            h.update(p.read_bytes())
    return h.hexdigest()


def committed(log_dir: Path) -> dict[str, dict[tuple[str, int], int]]:
    from storage_core.read.groups import group_offsets

    return {g: {(tp.topic, tp.partition): c.offset for tp, c in parts.items()}
            for g, parts in group_offsets([log_dir]).items()}


def abort_at_the_end(log_dir: Path, rng: random.Random) -> dict[tuple[str, int], int]:
    """Each partition of ``log_dir`` ends with an aborted transaction and its marker (what a
    read_committed restore leaves out); returns each partition's log end."""
    from storage_core.log.manager import LogManager
    from storage_core.record.control import ControlRecordType, EndTransactionMarker
    from storage_core.record.records import Record, build_batch, build_end_txn_marker

    ends = {}
    for d in sorted(p for p in log_dir.iterdir() if p.is_dir() and not p.name.startswith("__")):
        tp = TopicPartition.parse_dir_name(d.name)
        with Log(d, writable=True) as lg:
            at = lg.log_end_offset
            recs = [Record(at + i, 1_600_000_000_000, b"k", b"aborted") for i in range(rng.randint(1, 6))]
            lg.append(build_batch(recs, is_transactional=True, producer_id=9000 + tp.partition, producer_epoch=0,
                                  base_sequence=-1), assign_offsets=False, now_ms=1_600_000_000_000)
            lg.append(build_end_txn_marker(lg.log_end_offset, 1_600_000_000_000, 0, 9000 + tp.partition, 0,
                                           EndTransactionMarker(ControlRecordType.ABORT, 0)),
                      assign_offsets=False, now_ms=1_600_000_000_000)
            ends[(tp.topic, tp.partition)] = lg.log_end_offset
    LogManager([log_dir], writable=True).close()
    return ends


def test_restore_groups_of_a_read_committed_source_kept(tmp_path: Path) -> None:
    """A log dir whose partitions end with an aborted transaction, restored with its groups (groups="source")
    at the original offsets: a group at the source's end (it had consumed the aborted records and the
    marker) lands on the target partition's end, one past the last restored record; a group within the
    restored records keeps its offset; one past the source's end follows the unmapped policy."""
    from storage_core.tools.restore_groups import restore_groups

    rng = random.Random(seeded("groups kept"))
    src = tmp_path / "src"
    gen = RestoreSource(src, rng.randrange(1 << 30), topics=("orders",), partitions=2, batches=12)
    source_ends = abort_at_the_end(src, rng)
    with_offsets_topic(src)
    last = {tp: rows[-1][0] for tp, rows in gen.expected.items()}
    firsts = {tp: rows[0][0] for tp, rows in gen.expected.items()}
    picks: dict[str, dict[TopicPartition, int]] = {}
    want: dict[str, dict[tuple[str, int], int]] = {}
    for tp, rows in gen.expected.items():
        k = TopicPartition(*tp)
        choices = {"at-end": source_ends[tp], "after-last": last[tp] + 1, "first": firsts[tp],
                   "inside": rng.choice(rows)[0], "in-the-aborted-tail": rng.randint(last[tp] + 1, source_ends[tp])}
        for name, c in choices.items():
            picks.setdefault(name, {})[k] = c
            want.setdefault(name, {})[tp] = c if c <= last[tp] + 1 else last[tp] + 1
    restore_groups(picks, src)  # the source's own groups
    target = with_offsets_topic(tmp_path / "dst")
    summary = klog.restore(src, target, groups="source")
    assert read(target, topics="orders") == gen.expected
    assert committed(target) == want
    assert summary.groups is not None and summary.translation is None
    hows = {(r.group, r.topic_partition.partition): r.how for r in summary.groups.restored}
    for name, parts in picks.items():
        for k, c in parts.items():
            assert hows[(name, k.partition)] == ("kept" if c == want[name][(k.topic, k.partition)] else "translated")
    assert {(p.topic, p.partition): p.end for p in summary.partitions} == {tp: v + 1 for tp, v in last.items()}

    # past the source's end: refused by default (nothing written), or by the policy
    past = {tp: end + rng.randint(1, 5) for tp, end in source_ends.items()}
    other = tmp_path / "groups.json"  # klog groups --json's rows
    other.write_text(json.dumps([{"group": "past", "topic": t, "partition": p, "committedOffset": c, "metadata": None}
                                 for (t, p), c in past.items()]))
    fresh = with_offsets_topic(tmp_path / "dst-past")
    before = tree_digest(fresh)
    with pytest.raises(klog.GroupRestoreError, match=r"group 'past' orders-0: no restored record maps committed "
                       rf"offset {past[('orders', 0)]} \(past the source partition's end {source_ends[('orders', 0)]}\)"
                       ) as e:
        klog.restore(src, fresh, groups=other)
    assert "\n" not in str(e.value) and "unmapped=skip" in str(e.value)
    assert tree_digest(fresh) == before
    for policy, expect in (("skip", None), ("end", {tp: v + 1 for tp, v in last.items()}), ("start", firsts)):
        dst = with_offsets_topic(tmp_path / f"dst-{policy}")
        s = klog.restore(src, dst, groups=other, unmapped=policy)  # type: ignore[arg-type]
        assert committed(dst) == ({} if expect is None else {"past": expect}), policy
        assert s.groups is not None
        assert len(s.groups.skipped if policy == "skip" else s.groups.restored) == 2, policy


def test_restore_at_new_offsets_translates_groups(tmp_path: Path) -> None:
    """Records appended after what the target holds, at new offsets, and groups translated with them: each
    committed offset becomes the target offset of the first restored record at or after it (the next
    record the group had to consume), past the last restored record up to the source's end the target
    partition's end; the record a group resumes at is the one it would have read next in the source."""
    from storage_core.record.records import Record, build_batch

    rng = random.Random(seeded("new offsets"))
    src = tmp_path / "src"
    gen = RestoreSource(src, rng.randrange(1 << 30), topics=("orders",), partitions=2, batches=12)
    source_ends = abort_at_the_end(src, rng) if rng.random() < 0.5 else \
        {(r.topic_partition.topic, r.topic_partition.partition): r.end for r in klog.plan(str(src)).ranges}
    target = with_offsets_topic(tmp_path / "dst")
    held = {("orders", 0): rng.randint(1, 300), ("orders", 1): 0}  # what the target holds already
    for (t, p), n in held.items():
        (target / f"{t}-{p}").mkdir()
        if n:
            with Log(target / f"{t}-{p}", writable=True) as lg:
                lg.append(build_batch([Record(i, 1_700_000_000_000, None, b"there%d" % i) for i in range(n)]))
    before = read(target, topics="orders")
    groups: dict[str, dict[TopicPartition, int]] = {}
    for tp, rows in gen.expected.items():
        offsets = [r[0] for r in rows]
        candidates = [gen.starts[tp], offsets[0], rng.choice(offsets), rng.choice(offsets) + 1, offsets[-1],
                      offsets[-1] + 1, source_ends[tp], rng.randint(gen.starts[tp], source_ends[tp])]
        for i, c in enumerate(candidates):
            groups.setdefault(f"g{i}", {})[TopicPartition(*tp)] = c
    summary = klog.restore(src, target, offsets="new", groups=groups)

    # the records: after what was there, in order, each with its content, at offsets from the old end
    got = read(target, topics="orders")
    for tp, rows in gen.expected.items():
        base = held[tp]
        assert got[tp][:base] == before.get(tp, [])
        assert got[tp][base:] == [(base + i, *row[1:]) for i, row in enumerate(rows)], tp
    parts = {(rp.topic, rp.partition): rp for rp in summary.partitions}
    for tp, rows in gen.expected.items():
        rp = parts[tp]
        assert (rp.first, rp.end, rp.records, rp.source_first, rp.source_last) == \
            (held[tp], held[tp] + len(rows), len(rows), rows[0][0], rows[-1][0])

    # the groups, by the rule's definition, and the record each resumes at
    translation = summary.translation
    assert translation is not None and summary.groups is not None
    want: dict[str, dict[tuple[str, int], int]] = {}
    for g, tps in groups.items():
        for k, c in tps.items():
            tp = (k.topic, k.partition)
            offsets = [r[0] for r in gen.expected[tp]]
            after = [i for i, o in enumerate(offsets) if o >= c]
            target_offset = held[tp] + (after[0] if after else len(offsets))
            want.setdefault(g, {})[tp] = target_offset
            assert translation(k, c) == target_offset, (g, tp, c)
            if after:  # the record the group resumes at is the source's next one
                assert got[tp][target_offset][1:] == gen.expected[tp][after[0]][1:], (g, tp, c)
            else:
                assert target_offset == held[tp] + len(offsets) == len(got[tp])
    assert committed(target) == want
    assert all(r.how in ("translated", "kept") for r in summary.groups.restored)
    k = TopicPartition("orders", 0)
    assert translation(k, source_ends[("orders", 0)] + 1) is None  # past the source's end

    # another restore at new offsets continues from the new end; the translation says where
    again = klog.restore(src, target, offsets="new", topics=["orders"])
    assert again.groups is None and again.translation is not None
    assert [(p.first, p.end) for p in again.partitions] == \
        [(held[tp] + len(rows), held[tp] + 2 * len(rows)) for tp, rows in sorted(gen.expected.items())]
    assert again.translation(k, gen.expected[("orders", 0)][0][0]) == held[("orders", 0)] + \
        len(gen.expected[("orders", 0)])


def test_restore_a_parquet_file_without_offsets_at_new_offsets(tmp_path: Path) -> None:
    """A Parquet file without an ``offset`` column: refused at the original offsets (the error says how to
    restore it), taken with new offsets (each partition's rows in file order, after what the target holds);
    it maps no group's offsets (refused, the target as it was)."""
    rng = random.Random(seeded("plain parquet"))
    rows = [(p, b"v%d" % i) for i in range(rng.randint(5, 50)) for p in (rng.randrange(2),)]
    plain = tmp_path / "plain.parquet"
    pq.write_table(pa.table({"topic": ["t"] * len(rows), "partition": pa.array([p for p, _ in rows], pa.int32()),
                             "value": [v for _, v in rows]}), plain)
    target = with_offsets_topic(tmp_path / "dst")
    before = tree_digest(target)
    with pytest.raises(klog.RestoreError, match=r"has no 'offset' column.*offsets='new', klog restore --offsets new"):
        klog.restore(plain, target)
    with pytest.raises(klog.GroupRestoreError, match=r"has no 'offset' column: the groups' committed offsets cannot"):
        klog.restore(plain, target, offsets="new", groups={"g": {TopicPartition("t", 0): 1}})
    assert tree_digest(target) == before
    for round_ in range(2):
        summary = klog.restore(plain, target, offsets="new")
        assert summary.translation is None
        got = read(target, topics="t")
        for p in (0, 1):
            values = [v for q, v in rows if q == p]
            assert [r[2] for r in got.get(("t", p), [])] == values * (round_ + 1)
            assert [r[0] for r in got.get(("t", p), [])] == list(range(len(values) * (round_ + 1)))


def test_restore_with_groups_refusals_leave_the_target_as_it_was(tmp_path: Path) -> None:
    """Every refusal of a restore with groups, of the records or of the groups, before anything is written:
    the target's bytes are the same after it."""
    from storage_core.tools.restore_groups import restore_groups

    gen = RestoreSource(tmp_path / "src", seeded("groups refusals"), topics=("orders",), partitions=2, batches=6)
    src = with_offsets_topic(tmp_path / "src")
    k0 = TopicPartition("orders", 0)
    first = gen.expected[("orders", 0)][0][0]
    restore_groups({"billing": {k0: first}}, src)
    target = with_offsets_topic(tmp_path / "dst")
    for p in (0, 1):
        (target / f"orders-{p}").mkdir()  # as a broker creates a topic's partitions
    restore_groups({"there": {k0: 0}}, target)  # a group the target has already

    def refused(error: type[klog.KlogError], *words: str, into: Path = target, source: Path = src,
                **kwargs: object) -> None:
        before = tree_digest(into)
        with pytest.raises(error) as info:
            klog.restore(source, into, **kwargs)  # type: ignore[arg-type]
        text = str(info.value)
        assert "\n" not in text and all(w in text for w in words), text
        assert tree_digest(into) == before, kwargs

    refused(klog.GroupRestoreError, "already has group 'there'", groups={"there": {k0: first}})
    refused(klog.GroupRestoreError, "no restored record maps committed offset", "unmapped=skip",
            groups={"late": {k0: 10**9}})
    refused(klog.GroupRestoreError, "has no partition elsewhere-0", "create the topic",
            groups={"g": {TopicPartition("elsewhere", 0): 0}})
    refused(klog.GroupRestoreError, "no group 'nobody' in the source", groups="source", only_groups=["nobody"])
    refused(klog.GroupRestoreError, "without groups", only_groups=["billing"])
    refused(klog.GroupRestoreError, "unmapped='later'", groups="source", unmapped="later")
    refused(klog.RestoreError, "offsets='sideways'", offsets="sideways")
    bare = tmp_path / "bare"
    bare.mkdir()
    refused(klog.GroupRestoreError, "has no __consumer_offsets", "kafka-consumer-groups", into=bare, groups="source")
    # a Parquet source has no groups of its own
    export = tmp_path / "orders.parquet"
    assert main(["export", str(src), "--topic", "orders", "-o", str(export), "--read-committed", "--quiet"]) == 0
    refused(klog.GroupRestoreError, "holds no consumer groups", "--groups FROM", source=export, groups="source")
    # the records refused: nor are the groups written
    klog.restore(src, target, topics=["orders"])
    refused(klog.OffsetOverlapError, "orders-0", "overlaps", groups="source")
    refused(klog.InvalidTopicError, "__consumer_offsets", topics=["__consumer_offsets"], groups="source")
    broker = hold_like_a_broker(target)
    try:
        refused(klog.LogDirLockedError, str(target), groups="source", offsets="new")
    finally:
        broker.kill()
        broker.wait()
    assert committed(target) == {"there": {("orders", 0): 0}}


def test_cli_restore_with_groups(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from storage_core.tools.restore_groups import restore_groups

    gen = RestoreSource(tmp_path / "src", seeded("cli groups"), partitions=1, batches=5)
    src = with_offsets_topic(tmp_path / "src")
    k0 = TopicPartition("orders", 0)
    offsets = [r[0] for r in gen.expected[("orders", 0)]]
    restore_groups({"billing": {k0: offsets[1]}, "audit": {k0: offsets[0]}}, src)
    target = with_offsets_topic(tmp_path / "dst")
    capsys.readouterr()
    assert main(["restore", str(src), str(target), "--groups", "--group", "billing"]) == 0
    out = capsys.readouterr().out
    assert f"group billing orders-0: offset {offsets[1]} -> {offsets[1]} (kept)" in out, out
    assert "restored 1 committed offset of 1 group" in out and "audit" not in out, out
    assert committed(target) == {"billing": {("orders", 0): offsets[1]}}
    # at new offsets, from a klog groups --json file, after the records restored above
    assert main(["groups", str(src), "--json"]) == 0
    groups_json = tmp_path / "groups.json"
    groups_json.write_text(capsys.readouterr().out)
    assert main(["restore", str(src), str(target), "--offsets", "new", "--groups", str(groups_json),
                 "--group", "audit", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    n = len(offsets)
    assert out["offsets"] == "new" and out["partitions"][0]["first"] == offsets[-1] + 1
    assert out["groups"]["restored"] == [{"group": "audit", "topic": "orders", "partition": 0,
                                          "sourceOffset": offsets[0], "targetOffset": offsets[-1] + 1,
                                          "how": "translated", "offsetsPartition": out["groups"]["restored"][0][
                                              "offsetsPartition"]}]
    assert out["partitions"][0]["end"] == offsets[-1] + 1 + n
    # refusals: exit 2, one line
    assert main(["restore", str(src), str(target), "--offsets", "new", "--groups", "--group", "billing"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("klog: error: target ") and "already has group 'billing'" in err and "\n" not in err, err
    assert main(["restore", str(src), str(target), "--offsets", "new", "--group", "billing"]) == 2
    assert "without groups" in capsys.readouterr().err


def test_segments_rolled_at_a_gap_stay_contiguous(tmp_path: Path) -> None:
    """Restored records with gaps, into a topic known not to be compacted and with small segments: a
    segment that rolls where the offsets skip starts where the previous one ends (its first batch
    above its base offset, as a cleaned segment's may be), so klog's readers, which take a gap between
    segments of such a log for a deleted one, read every record back and no offset is reported lost."""
    import pyarrow.parquet as pq
    from restore_gen import export_table

    from storage_core.files import base_offset_of
    from storage_core.log.topic_configs import save_topic_configs
    from storage_core.record.file_records import FileRecords

    rng = random.Random(seeded("rolls"))
    export = export_table(rng, "g", 2, rng.randint(600, 900), rng.randint(0, 10**5), 1_700_000_000_000)
    pq.write_table(export, tmp_path / "export.parquet")
    target = tmp_path / "dst"
    target.mkdir()
    save_topic_configs(target, {"g": {"cleanup.policy": "delete", "segment.bytes": "8000"}})
    klog.restore(tmp_path / "export.parquet", target)
    got = {tp: [r[0] for r in rows] for tp, rows in read(target).items()}
    want: dict[tuple[str, int], list[int]] = {}
    for p, o in zip(export.column("partition").to_pylist(), export.column("offset").to_pylist(), strict=True):
        want.setdefault(("g", p), []).append(o)
    assert got == want
    for p in range(2):
        segments = sorted((target / f"g-{p}").glob("*.log"))
        assert len(segments) >= 3, segments
        ends = []
        for seg in segments:
            batches = list(FileRecords(seg).batches())
            ends.append((base_offset_of(seg.name), batches[0].base_offset, batches[-1].last_offset + 1))
        for (_, _, end), (base, _, _) in zip(ends, ends[1:], strict=False):
            assert base == end, f"g-{p}: a segment starts at {base}, the one before it ends at {end}: {ends}"


def test_restore_from_a_snapshot_in_object_storage(tmp_path: Path) -> None:
    """A ``klog snapshot`` taken into a bucket (SeaweedFS's S3 on 127.0.0.1) is restored from its URI, read
    through the ``fs.*`` settings as the read path reads it: the records are those of the source read
    read_committed. A Parquet URI, and groups from a source in a bucket, are refused by name."""
    from s3_server import server_or_skip

    from storage_core.fs import StorageOptions

    server = server_or_skip()
    storage = StorageOptions.from_options(server.options)
    RestoreSource(tmp_path / "src", seeded("s3"), partitions=2, batches=10)
    uri = server.bucket() + "/snap"
    klog.snapshot(tmp_path / "src", uri, storage=storage)
    summary = klog.restore(uri, tmp_path / "dst", storage=storage)
    assert summary.records > 0
    assert read(tmp_path / "dst") == read(tmp_path / "src", isolationLevel="read_committed")
    with pytest.raises(klog.RestoreError, match="is a Parquet file in object storage"):
        klog.restore(server.bucket() + "/orders.parquet", tmp_path / "dst2", storage=storage)
    with pytest.raises(klog.GroupRestoreError, match="is in object storage"):
        klog.restore(uri, tmp_path / "dst3", storage=storage, groups="source")
    assert not (tmp_path / "dst2").exists() and not (tmp_path / "dst3").exists()
