"""A ZooKeeper-era cluster's dirs read as the cluster served them (issue 57): three Kafka 3.9 brokers in
ZooKeeper mode (``tests/oracles/zookeeper_fixture.py``; RF 3, ``min.insync.replicas`` 2). Their dirs hold no
``__cluster_metadata`` (the leader and ISR lived in ZooKeeper), so klog chooses each partition's
replica by what the dirs hold (the leader-epoch lineage, then the longest log), ends it at the
checkpointed high watermarks, identifies each dir's broker by ``meta.properties``' ``broker.id``
(``version=0``), and ``describe`` says the ISR is not known.

One run per test process (module fixture, about a minute): a seeded workload from Kafka's own
producers (idempotent, and transactional with a third aborted; every codec) while one broker is
SIGKILLed (the leader of some partitions, a follower of the others: the controller drops it from
every ISR, bumping leader epochs, and elects new leaders for the partitions it led); the truth from
Kafka's consumer at both isolation levels and Admin ListOffsets/describeTopics with it down, and a
copy of every dir then (``degraded``: its dir stale); then it is restarted (Kafka truncates its
replicas where they diverge, which the test compares with klog's ``diverges_at``) and catches up,
and the dirs are copied live, then after a clean shutdown (no record written since the truth). Seeds are printed;
``KLOG_CLUSTER_SEED`` replays one.
"""

from __future__ import annotations

import itertools
import os
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from conftest import skip_unless_runs
from kafka_corpus import assert_same_rows, rows_of

import storage_core
from storage_core.log.checkpoint import LeaderEpochCheckpointFile, MetaProperties
from storage_core.log.replicas import broker_dir
from storage_core.tools.cli import main as klog

pytestmark = [pytest.mark.broker]

ISOLATION = ("read_uncommitted", "read_committed")


def _joined(dirs: Sequence[Path]) -> str:
    return ",".join(map(str, dirs))


@dataclass
class ZkRun:
    """What the run did, the cluster's truth, and the copies of the brokers' dirs (broker id -> data dir):
    ``degraded``, copied live with broker ``killed`` still down (its dir stale: out of every ISR, lower
    leader epochs, maybe records its successors never had); ``live``, copied live once it had caught up;
    ``stopped``, after a clean shutdown. Nothing was written after ``killed`` died, so the consumer's
    ``truth`` is every copy's; ``offsets`` (ListOffsets) was taken for ``degraded`` and again, equal, for the
    others. ``truncated``: per partition, the offsets ``killed``'s fetcher truncated its replica to by the
    leader's epochs once restarted (its ``server.log``)."""

    seed: int
    topics: list[str]
    killed: int
    truth: dict[str, list[dict[str, Any]]]  # by isolation level
    offsets: dict[str, dict[str, Any]]
    describe: dict[str, dict[str, Any]]
    degraded: dict[int, Path]
    live: dict[int, Path]
    stopped: dict[int, Path]
    truncated: dict[str, list[int]]
    events: list[str] = field(default_factory=list)

    def copy(self, which: str) -> dict[int, Path]:
        return {"degraded": self.degraded, "live": self.live, "stopped": self.stopped}[which]


COPIES = ("degraded", "live", "stopped")


@pytest.fixture(scope="module")
def zk(tmp_path_factory: pytest.TempPathFactory) -> ZkRun:
    import zookeeper_fixture
    from cluster_fixture import truncations

    skip_unless_runs(zookeeper_fixture.unavailable())
    t0 = time.monotonic()
    seed = int(os.environ.get("KLOG_CLUSTER_SEED") or random.randrange(2**31))
    print(f"zookeeper cluster seed={seed} (KLOG_CLUSTER_SEED={seed} replays it), Kafka {zookeeper_fixture.ZK_KAFKA_VERSION}")
    rng = random.Random(seed)
    root = tmp_path_factory.mktemp("zk-cluster")
    c = zookeeper_fixture.ZkCluster(root / "cluster")
    events: list[str] = []

    def ev(what: str) -> None:
        events.append(f"{time.monotonic() - t0:6.1f} s  {what}")

    try:
        c.start()
        ev("ZooKeeper and 3 brokers started")
        p = f"z{seed % 100000}"
        topics = [f"{p}-idem", f"{p}-txn"]
        small = {"segment.bytes": "32768"}
        c.create_topic(topics[0], rng.randint(2, 3), configs=small)
        c.create_topic(topics[1], 2, configs=small)
        c.wait_replicated(topics)
        n_idem, n_txn = rng.randint(500, 900), rng.randint(500, 900)
        pause = int(12000 * 20 / max(n_idem, n_txn))  # about 12 s of writes
        with c.produce_async(rng.randrange(2**31), [(topics[0], "idempotent", n_idem), (topics[1], "txn", n_txn)],
                             pause_ms=pause) as job:
            # the producers' JVM takes a few seconds to start: the kill waits for their records
            c.wait_until("the producers writing", lambda: sum(o["latest"] or 0 for o in c.list_offsets(topics).values())
                         >= (n_idem + n_txn) // 5, timeout=90)
            time.sleep(rng.uniform(0.0, 2.0))
            desc = c.describe(topics)
            tp = rng.choice(sorted(desc))
            killed = desc[tp]["leader"]  # the leader of tp, a follower of others: both kinds of replica go stale
            others = [b for b in sorted(c.brokers) if b != killed]
            # its followers stopped for a moment: the leader appends records none of them fetches, then dies
            # with them (they diverge from its successor's log, and Kafka truncates them when it returns)
            for b in others:
                c.broker(b).pause()  # type: ignore[attr-defined]
            try:
                time.sleep(rng.uniform(0.6, 1.2))
                c.broker(killed).kill()
            finally:
                for b in others:
                    c.broker(b).resume()  # type: ignore[attr-defined]
            ev(f"SIGKILL broker {killed} (the leader of {tp}), its followers {others} paused, while producing")
            produced = job.wait()
        ev(f"produced {produced}")
        c.wait_replicated(topics, timeout=90)  # ZooKeeper's session expired: out of every ISR, new leaders
        ev(f"every ISR without {killed}")
        time.sleep(2.5)  # replica.high.watermark.checkpoint.interval.ms is 1 s
        committed, uncommitted = c.consume_both(topics)
        offsets, describe = c.list_offsets(topics), c.describe(topics)
        degraded = c.snapshot(root / "degraded")
        ev("the truth taken; degraded copy")
        mark = c.broker(killed).log_mark()
        c.start_brokers([killed])
        c.wait_replicated(topics, timeout=90)
        truncated = {t: truncations(c.broker(killed), t, mark) for t in sorted(offsets)}  # type: ignore[arg-type]
        ev(f"started {killed}, caught up; truncated {truncated}")
        time.sleep(2.5)
        again = c.list_offsets(topics)
        assert {t: (o["earliest"], o["latest"], o["lso"]) for t, o in again.items()} == \
            {t: (o["earliest"], o["latest"], o["lso"]) for t, o in offsets.items()}, (offsets, again)
        live = c.snapshot(root / "live")
        c.stop()
        ev("live copy; clean shutdown")
        stopped = c.snapshot(root / "stopped")
    finally:
        c.kill()
    ev("stopped copy")
    for e in events:
        print("  " + e)
    print(f"zookeeper cluster: {time.monotonic() - t0:.1f} s from start to the copies")
    return ZkRun(seed, topics, killed, {"read_committed": committed, "read_uncommitted": uncommitted}, offsets,
                 describe, degraded, live, stopped, truncated, events)


def test_dirs_are_zookeeper_eras_and_name_their_broker_by_broker_id(zk: ZkRun) -> None:
    """``meta.properties`` of a ZooKeeper-mode broker: ``version=0``, ``broker.id`` (no ``node.id``), the
    cluster id; no ``__cluster_metadata``. klog's broker of each dir is its ``broker.id``. The kill bumped
    leader epochs: some replica's lineage has more than one epoch."""
    ids = set()
    for which in COPIES:
        for n, d in zk.copy(which).items():
            props = MetaProperties.in_dir(d).read()
            assert props.get("version") == "0" and props.get("broker.id") == str(n) and "node.id" not in props, props
            assert not (d / "__cluster_metadata-0").exists()
            assert broker_dir(d).node_id == n
            ids.add(props["cluster.id"])
    assert len(ids) == 1
    epochs = {len(LeaderEpochCheckpointFile.in_dir(p).read()) for d in zk.stopped.values()
              for t in zk.topics for p in d.glob(f"{t}-*")}
    assert max(epochs) > 1, f"seed={zk.seed}: no leader epoch bumped ({zk.events})"


@pytest.mark.parametrize("which", COPIES)
@pytest.mark.parametrize("iso", ISOLATION)
def test_every_dir_reads_as_the_consumer(zk: ZkRun, which: str, iso: str) -> None:
    got = rows_of(storage_core.read_arrow(_joined(list(zk.copy(which).values())), topics=zk.topics,
                                          isolationLevel=iso, includeHeaders=True).read_all())
    assert_same_rows(got, zk.truth[iso], f"seed={zk.seed} {which} {iso} every dir events={zk.events}")
    # the comparison tells the isolation levels apart (a third of the transactions aborted)
    other = ISOLATION[1 - ISOLATION.index(iso)]
    with pytest.raises(AssertionError):
        assert_same_rows(got, zk.truth[other])


@pytest.mark.parametrize("which", COPIES)
def test_two_brokers_dirs_read_as_the_consumer(zk: ZkRun, which: str) -> None:
    """Any two of the three brokers' dirs: each pair holds an in-sync replica of every partition (one
    broker at most was ever out of the ISR); with the killed broker's stale dir in the pair, the other's
    replica must be read, by its later leader epoch alone (no ISR is known)."""
    copy = zk.copy(which)
    for pair in itertools.combinations(sorted(copy), 2):
        for iso in ISOLATION:
            got = storage_core.read_arrow(_joined([copy[b] for b in pair]), topics=zk.topics, isolationLevel=iso,
                                          includeHeaders=True)
            assert_same_rows(rows_of(got.read_all()), zk.truth[iso], f"seed={zk.seed} {which} brokers {pair} {iso}")


@pytest.mark.parametrize("which", COPIES)
def test_describe_equals_admin_and_says_the_isr_is_not_known(zk: ZkRun, which: str,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Start, end (the high watermark) and last stable offset are ListOffsets'; the replicas found are
    describeTopics' brokers, none divergent; without KRaft metadata no leader, epoch or ISR is claimed,
    and the notes (and the CLI's ISR column) say the ISR is not known."""
    dirs = _joined(list(zk.copy(which).values()))
    table = storage_core.describe(dirs, topics=zk.topics).to_pylist()
    assert sorted(f"{r['topic']}-{r['partition']}" for r in table) == sorted(zk.offsets)
    for row in table:
        tp = f"{row['topic']}-{row['partition']}"
        want, d = zk.offsets[tp], zk.describe[tp]
        ctx = f"seed={zk.seed} {which} {tp}: {row}"
        assert (row["start_offset"], row["end_offset"], row["last_stable_offset"]) == \
            (want["earliest"], want["latest"], want["lso"]), ctx
        assert sorted(r["broker"] for r in row["replicas"]) == sorted(d["replicas"]), ctx
        assert all(r["diverges_at"] is None for r in row["replicas"]
                   if which != "degraded" or r["broker"] != zk.killed), ctx
        assert row["broker"] in d["replicas"] and row["kraft_metadata"] is None, ctx
        assert row["leader"] is None and row["leader_epoch"] is None and row["isr"] == [] and row["elr"] == [], ctx
        assert "no KRaft metadata: the ISR is not known" in row["replica_notes"][0], ctx
    capsys.readouterr()
    assert klog(["describe", dirs, "--topic", zk.topics[0]]) == 0
    out = capsys.readouterr().out
    lines = [line.split() for line in out.splitlines() if line.startswith(zk.topics[0] + " ")]
    assert lines and all("unknown" in cols for cols in lines), out


def test_killed_brokers_stale_replicas_diverge_where_kafka_truncated_them(zk: ZkRun) -> None:
    """In the copy taken while the killed broker was down, each of its replicas diverges (``diverges_at``)
    exactly where Kafka's fetcher truncated it once restarted (a leader's records its followers never
    fetched), and nowhere where Kafka truncated nothing below its log end; never is it the replica read
    then."""
    table = storage_core.describe(_joined(list(zk.degraded.values())), topics=zk.topics).to_pylist()
    for row in table:
        tp = f"{row['topic']}-{row['partition']}"
        (mine,) = [r for r in row["replicas"] if r["broker"] == zk.killed]
        cuts = [x for x in zk.truncated[tp] if x < mine["log_end_offset"]]
        ctx = f"seed={zk.seed} {tp}: Kafka truncated broker {zk.killed}'s replica to {zk.truncated[tp]}; klog: {mine}"
        assert mine["diverges_at"] == (cuts[-1] if cuts else None), ctx
        assert row["broker"] != zk.killed or mine["log_end_offset"] <= zk.offsets[tp]["latest"], ctx
    diverged = {f"{r['topic']}-{r['partition']}": x["diverges_at"] for r in table for x in r["replicas"]
                if x["broker"] == zk.killed}
    print(f"seed={zk.seed}: broker {zk.killed}'s replicas diverged at {diverged}")


@pytest.mark.parametrize("which", COPIES)
def test_verify_finds_nothing_wrong_but_the_stale_replicas(zk: ZkRun, which: str,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """``klog verify`` over every dir: no error; after a clean shutdown no warning at all (an empty
    partition's indexes, trimmed to no bytes, are no preallocated index); in the copy taken with the
    killed broker down, a warning for each of its replicas that diverges, and for nothing else but the
    preallocated active indexes a live copy holds (Kafka's recovery rebuilds them)."""
    capsys.readouterr()
    assert klog(["verify", _joined(list(zk.copy(which).values()))]) == 0
    said = capsys.readouterr()
    warnings = [line for line in (said.out + said.err).splitlines() if line.startswith("warning:")]
    # a live copy's active segments: their preallocated indexes, zero-filled past what the broker wrote
    # (no entry yet, or slot 0 read as an entry as DumpLogSegments reads it), which Kafka's recovery rebuilds
    other = [w for w in warnings if "diverges from broker" not in w
             and not ("Kafka's recovery rebuilds it" in w and which != "stopped")]
    assert not other, f"seed={zk.seed} {which}: {other}"
    assert all(f"broker {zk.killed}'s replica" in w for w in warnings if "diverges from broker" in w), warnings
    assert which == "degraded" or not [w for w in warnings if "diverges from broker" in w], warnings
