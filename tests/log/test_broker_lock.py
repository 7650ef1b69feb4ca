"""The log dir lock against the real broker: while Kafka runs on a dir, every klog writer is
refused, naming the broker's PID, and changes nothing; while a klog writer holds the dir, the
broker cannot start on it. Readers read the live dir and take no lock (``test_broker_reads``).
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import threading
import time
from pathlib import Path

import pytest
from broker_fixture import Broker, BrokerError

from storage_core.errors import LogDirLockedError
from storage_core.log.lock import LogDirLock
from storage_core.log.manager import LogManager
from storage_core.tools.cli import main as klog

pytestmark = [pytest.mark.broker, pytest.mark.interop]
EXIT_USAGE = 2


def _hashes(d: Path) -> dict[str, str]:
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(d.iterdir()) if f.is_file()}


@pytest.fixture(scope="module")
def topic(broker: Broker) -> str:
    broker.start()
    name = f"lock{random.SystemRandom().randrange(1 << 30)}"
    broker.create_topic(name, 1, {"cleanup.policy": "compact", "internal.segment.bytes": "32768"})
    broker.produce(name, 500, 1, "idempotent", "none")
    return name


@pytest.mark.parametrize("command", [["recover"], ["retention", "--config", "retention.bytes=1"],
                                     ["compact", "--roll"]])
def test_writing_commands_refuse_a_live_brokers_dir(broker: Broker, topic: str, command: list[str],
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    broker.start()
    assert broker.proc is not None
    pdir = broker.log_dir / f"{topic}-0"
    before = _hashes(pdir)
    capsys.readouterr()
    rc = klog([command[0], str(broker.log_dir), *command[1:]])
    err = capsys.readouterr().err
    assert rc == EXIT_USAGE, err
    assert f"locked by process {broker.proc.pid}" in err, err
    assert _hashes(pdir) == before


def test_writable_open_and_spark_append_refuse_a_live_brokers_dir(broker: Broker, topic: str, spark) -> None:  # type: ignore[no-untyped-def]
    broker.start()
    assert broker.proc is not None
    pdir = broker.log_dir / f"{topic}-0"
    before = _hashes(pdir)
    with pytest.raises(LogDirLockedError, match=f"locked by process {broker.proc.pid}"):
        LogManager([broker.log_dir], writable=True)
    df = spark.createDataFrame([("k", "v")], "key string, value string")
    with pytest.raises(Exception, match=f"locked by process {broker.proc.pid}"):
        df.write.format("klog").option("topic", topic).option("lockTimeoutMs", "500").mode("append") \
            .save(str(broker.log_dir))
    assert _hashes(pdir) == before
    assert not list(pdir.glob(".klog-staging-*"))


@pytest.mark.parametrize("new_topic", [False, True], ids=["existing-topic", "new-topic"])
def test_a_refused_spark_append_makes_no_file_in_a_live_brokers_dir(broker: Broker, topic: str, spark,  # type: ignore[no-untyped-def]
                                                                    new_topic: bool) -> None:
    """The writer asks on the driver before any task runs (and the tasks again before they create
    anything): with the default lockTimeoutMs (10 minutes, what a commit would wait) the append is
    refused at once, and a watcher polling the broker's dirs all along sees no file or dir appear
    (no ``.klog-staging-*``, no partition dir of a new topic)."""
    broker.start()
    assert broker.proc is not None
    root = broker.log_dir
    name = f"{topic}new" if new_topic else topic

    def ours() -> set[str]:
        """The topic's partition dirs and what they hold, and anything klog names ``.klog-*``."""
        return ({str(p.relative_to(root)) for d in root.glob(f"{name}-*") for p in [d, *d.rglob("*")]}
                | {str(p.relative_to(root)) for p in root.rglob(".klog-*")})

    before = ours()
    seen: set[str] = set()
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            seen.update(ours() - before)
            time.sleep(0.002)

    watcher = threading.Thread(target=watch)
    watcher.start()
    df = spark.range(0, 20_000, 1, 4).selectExpr("CAST(id AS STRING) AS value")  # 4 write tasks, no stage before
    t0 = time.monotonic()
    try:
        with pytest.raises(Exception, match=re.escape(f"LogDirLockedError: log dir {root} is locked by process "
                                                      f"{broker.proc.pid} (a Kafka broker or another klog writer); "
                                                      "nothing was written")):
            df.write.format("klog").option("topic", name).mode("append").save(str(root))
        took = time.monotonic() - t0
    finally:
        stop.set()
        watcher.join()
    seen.update(ours() - before)
    print(f"refused in {took:.2f} s")
    assert took < 10, took  # not the 600 s of lockTimeoutMs; about a second, what Spark takes to plan the write
    assert seen == set()


def test_broker_cannot_start_on_a_dir_klog_writes(broker: Broker, topic: str) -> None:
    broker.stop()
    try:
        with LogDirLock(broker.log_dir):
            mark = broker.log_mark()  # this start's lines only (stdout.log holds every start's output)
            with pytest.raises(BrokerError, match="exited"):
                broker.start(timeout=60)
            log = broker.log_since(mark)
            assert "Failed to acquire lock on file .lock" in log, log[-5000:]
    finally:
        broker.start()
    assert broker.running and os.path.exists(broker.log_dir / ".lock")


def test_broker_cluster_ids_never_read_as_options() -> None:
    """``kafka-storage format -t ID`` parses an id starting with '-' as an option; Kafka's own
    ``Uuid.randomUuid`` never makes one, and the fixture's ids must not either (1 in 64 did)."""
    from broker_fixture import random_kafka_uuid

    from storage_core.log.checkpoint import uuid_from_base64

    ids = [random_kafka_uuid() for _ in range(2000)]
    assert not [i for i in ids if i.startswith("-")]
    assert all(uuid_from_base64(i).bytes != bytes(16) for i in ids)
