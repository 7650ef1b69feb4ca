"""A real multi-broker Apache Kafka cluster in the test suite: one dedicated KRaft controller and N
brokers, each its own JVM on 127.0.0.1, the oracle of klog's whole-cluster reads and writes (issue 57).

Layout under ``root`` (what klog is pointed at)::

    root/controller/data      the controller's log.dirs (node.id 100: __cluster_metadata only)
    root/b1/data ... bN/data  broker n's log.dirs (node.id n)
    root/<node>/server.properties, server.log (log4j), stdout.log

Usage (in tests: the session fixture ``cluster`` of ``tests/conftest.py``, already started)::

    c = Cluster(tmp / "cluster")              # formats every node with one cluster id (about 10 s)
    c.start()                                 # controller first, then the brokers (15-25 s); also
                                              # starts any broker left down
    c.create_topic("orders", partitions=3)    # RF 3, min.insync.replicas 2; waits for the leaders
    c.produce(seed, [("orders", "idempotent", 2000), ("orders", "txn", 500)])
                                              # Kafka's producers, acks=all, every codec; kinds:
                                              # plain (not idempotent), idempotent, txn (a third aborted)
    job = c.produce_async(seed, specs, pause_ms=50); ...; job.wait()   # while brokers are killed
    c.describe(["orders"])      # {"orders-0": {"leader", "leaderEpoch", "replicas", "isr", "elr",
                                #               "lastKnownElr", "topicId"}}  (Admin describeTopics)
    c.list_offsets(["orders"])  # {"orders-0": {"earliest", "latest" (= high watermark), "lso", "leaderEpoch"}}
    c.consume("read_committed", ["orders"])   # every record, each a broker_fixture.consumer_row
    c.consume_both(["orders"])                # (read_committed rows, read_uncommitted rows), one JVM
    c.broker(2).kill(); c.broker(2).stop(); c.broker(2).start()   # SIGKILL, SIGTERM, restart
    c.wait_for_isr("orders", 0, 2); c.wait_replicated(["orders"]); c.wait_leader("orders", 0, not_in=[2])
    c.unclean_election("orders", 0)           # sets unclean.leader.election.enable, electLeaders UNCLEAN
    c.snapshot(tmp / "live")                  # a volume snapshot: copytree of every node's data dir
    c.stopped_snapshot(tmp / "clean")         # stop (clean shutdown), copy, start again
    c.stop()                                  # clean shutdown of every JVM (c.kill(): SIGKILL all)

    m = messy_scenario(c, seed, "m")          # a seeded random history; see there and :class:`Messy`

Settings (:data:`CLUSTER_CONFIG`, overridable with ``Cluster(**config)``, applied to every node):
RF 3 everywhere (``default.replication.factor``, ``offsets.topic.replication.factor``,
``transaction.state.log.replication.factor``), ``min.insync.replicas`` 2 and
``transaction.state.log.min.isr`` 2, three partitions for each internal topic,
``replica.lag.time.max.ms`` 4000 (a dead follower leaves the ISR in about 4 s), the controller fences a
broker whose heartbeats (every 1000 ms) stop for ``broker.session.timeout.ms`` 6000, and
``replica.high.watermark.checkpoint.interval.ms`` 1000 (Kafka's default 5000): the
``replication-offset-checkpoint`` of a live broker lags its high watermark by at most about a second.
Each JVM gets ``-Xmx384m`` with the serial collector and C1 only (4 JVMs on 2 cores). The same
settings go to the controller (Kafka 4.4 warns that ``num.partitions`` and
``default.replication.factor`` belong to the controller role and will be ignored by brokers in 5.0).

What Kafka 4.4.0 does here that a reader of older docs may not expect: a freshly formatted 4.4
cluster has ``eligible.leader.replicas.version=1`` (KIP-966 ELR on: a replica leaving an ISR below
``min.insync.replicas`` goes into the ELR and may be elected cleanly); with
``unclean.leader.election.enable=true`` on a topic the controller elects an out-of-ISR replica by
itself as soon as that broker is unfenced, so Admin ``electLeaders(UNCLEAN)`` then answers
``ElectionNotNeededException`` (:meth:`Cluster.elect` returns that name; the scenario accepts both).

Jars: the single broker's (``tests/oracles/broker/pom.xml``, :func:`broker_fixture.libs`: one fetch of a
release serves both), cached in ``~/.cache/klog-kafka/<version>/libs-<pom digest>``;
``oracle/ClusterClient.java`` and
``oracle/BrokerClient.java`` compiled together into that cache. Where the cluster cannot run
:func:`unavailable` says why (tests skip; ``KLOG_REQUIRE_BROKER=1`` fails them), as for the broker.

Kafka's rules the fixture relies on, in Kafka 4.4.0's source: ListOffsets ``latest`` answers the
high watermark at read_uncommitted and the last stable offset at read_committed, with the
partition's current leader epoch (``core/src/main/scala/kafka/cluster/Partition.scala``,
``fetchOffsetForTimestamp``); a follower restarting after an unclean election truncates to the end
offset its new leader gives for the follower's last epoch (``AbstractFetcherThread.truncate``,
``LeaderEpochFileCache.endOffsetFor``), which it logs as ``Truncating partition P with
TruncationState(offset=X, ...)``: :func:`messy_scenario` reads X from that line.
"""

from __future__ import annotations

import json
import random
import re
import select
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import broker_fixture
from broker_fixture import (
    POM,
    BrokerError,
    cache_dir,
    compiled_classpath,
    consumer_row,
    free_port,
    java_env,
    libs,
    random_kafka_uuid,
)

HERE = Path(__file__).resolve().parent
CLUSTER_SOURCE = broker_fixture.JAVA / "ClusterClient.java"
#: The release the cluster runs unless told otherwise.
CLUSTER_VERSION = "4.4.0"
#: The controller's node.id (brokers are 1..N).
CONTROLLER_ID = 100
#: About how long the messy scenario's producers write while it kills brokers.
PRODUCE_S = 15.0
#: How long a state the tests wait for (an ISR, a leader) may take to come.
WAIT_S = 60.0

#: Every node's settings beyond its role, id, listeners and dirs (see the module doc).
CLUSTER_CONFIG = {
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.state.log.num.partitions": "3",
    "replica.lag.time.max.ms": "4000",
    "replica.high.watermark.checkpoint.interval.ms": "1000",
    "broker.session.timeout.ms": "6000",
    "broker.heartbeat.interval.ms": "1000",
    "group.initial.rebalance.delay.ms": "0",
    "num.partitions": "1",
    "auto.create.topics.enable": "false",
}

#: Kafka's clients log warnings to stderr, never to the stdout their answers are read from.
CLIENT_LOG4J2 = """status = error
appender.err.type = Console
appender.err.name = ERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = ERR
"""

JVM_OPTIONS = ("-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k")

def classpath(version: str = CLUSTER_VERSION) -> str:
    """Kafka ``version``'s jars (:func:`broker_fixture.libs`) and ``ClusterClient`` with ``BrokerClient``
    (whose record generator and consumer it uses) compiled together against them into the release's cache."""
    return compiled_classpath(POM, cache_dir(version), libs(version),
                              [broker_fixture.CLIENT_SOURCE, CLUSTER_SOURCE], "Kafka cluster unavailable")


def unavailable(version: str = CLUSTER_VERSION) -> str | None:
    """None if the cluster can run here, else why not (a skip reason)."""
    return broker_fixture.skip_reason(lambda: classpath(version))


# --- one node ---------------------------------------------------------------------------------------


def init_node(node: broker_fixture.Broker, root: Path, node_id: int, version: str, props: dict[str, str],
              cp: str) -> None:
    """A node's fields and files (``root/server.properties`` from ``props``, its log4j config; its
    log dir ``root/data``), down: what a KRaft node and a ZooKeeper-era broker share."""
    node.root = root
    node.node_id = node_id
    node.version = version
    node.log_dir = root / "data"
    node.server_log = root / "server.log"
    node.cp = cp
    node.proc = None
    node.port = int(props["listeners"].rsplit(":", 1)[1])
    node.controller_port = 0
    node.bootstrap = f"127.0.0.1:{node.port}"
    root.mkdir(parents=True, exist_ok=True)
    (root / "server.properties").write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    (root / "log4j2.properties").write_text(broker_fixture.LOG4J2)


class Node(broker_fixture.Broker):
    """One node of a :class:`Cluster`, its own JVM: the controller (``process.roles=controller``) or a
    broker (``process.roles=broker``), formatted with the cluster's id. Lifecycle as a
    :class:`broker_fixture.Broker`: :meth:`start` (on the same dirs as before), :meth:`stop` (SIGTERM:
    a controlled shutdown), :meth:`kill` (SIGKILL), :meth:`restart`; ``server.log`` is its log4j output."""

    jvm_options = JVM_OPTIONS

    def __init__(self, root: Path, node_id: int, props: dict[str, str], cluster_id: str, cp: str,
                 version: str, initial: str) -> None:
        init_node(self, root, node_id, version, props, cp)
        self.cluster_id = cluster_id
        proc = subprocess.run(
            ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp", cp, "kafka.tools.StorageTool", "format",
             "-t", cluster_id, "-c", str(root / "server.properties"), initial],
            capture_output=True, text=True, env=java_env(), check=False, timeout=120)
        if proc.returncode != 0:
            raise BrokerError(f"kafka-storage format of {root} failed (exit {proc.returncode}): "
                              f"{proc.stderr.strip() or proc.stdout.strip()}")

    def __repr__(self) -> str:
        return f"Node({self.node_id}, {'running' if self.running else 'down'})"


# --- the cluster ------------------------------------------------------------------------------------


class Producing:
    """A background ``ClusterClient produce``: :meth:`wait` returns its per-spec JSON results."""

    def __init__(self, proc: subprocess.Popen[str], what: str) -> None:
        self.proc = proc
        self.what = what

    def __enter__(self) -> Producing:
        return self

    def __exit__(self, *exc: object) -> None:
        """Leaving the block (a test failed before :meth:`wait`) kills the producers."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()

    def wait(self, timeout: float = 600) -> list[dict[str, Any]]:
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            raise BrokerError(f"{self.what} did not end in {timeout:.0f} s") from None
        if self.proc.returncode != 0:
            tail = "\n".join(err.strip().splitlines()[-15:])
            raise BrokerError(f"{self.what} failed (exit {self.proc.returncode}):\n{tail}")
        return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


class Cluster:
    """One KRaft controller and ``brokers`` brokers (node ids 1..N) under ``root``, formatted with
    one cluster id (the controller ``--standalone``: a one-voter dynamic quorum; the brokers
    ``--no-initial-controllers``, as Kafka 4.4's StorageTool asks of nodes that are not voters).
    ``config`` overrides :data:`CLUSTER_CONFIG` on every node. Nothing runs until :meth:`start`."""

    def __init__(self, root: Path, brokers: int = 3, version: str = CLUSTER_VERSION, **config: str) -> None:
        self.root = root
        self.version = version
        self.cp = classpath(version)
        root.mkdir(parents=True, exist_ok=True)
        (root / "client-log4j2.properties").write_text(CLIENT_LOG4J2)
        self.cluster_id = random_kafka_uuid()
        controller_port = free_port()
        quorum = f"127.0.0.1:{controller_port}"
        base = dict(CLUSTER_CONFIG)
        base["default.replication.factor"] = str(min(brokers, 3))
        base.update(config)
        base["controller.quorum.bootstrap.servers"] = quorum
        ports = {n: free_port() for n in range(1, brokers + 1)}
        self.bootstrap = ",".join(f"127.0.0.1:{p}" for p in ports.values())
        jobs: list[tuple[Path, int, dict[str, str], str]] = [(
            root / "controller", CONTROLLER_ID,
            {**base, "process.roles": "controller", "node.id": str(CONTROLLER_ID),
             "listeners": f"CONTROLLER://{quorum}", "log.dirs": str(root / "controller" / "data")},
            "--standalone")]
        for n, port in ports.items():
            jobs.append((root / f"b{n}", n,
                         {**base, "process.roles": "broker", "node.id": str(n),
                          "listeners": f"PLAINTEXT://127.0.0.1:{port}",
                          "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
                          "log.dirs": str(root / f"b{n}" / "data")},
                         "--no-initial-controllers"))
        with ThreadPoolExecutor(len(jobs)) as pool:
            nodes = list(pool.map(lambda j: Node(j[0], j[1], j[2], self.cluster_id, self.cp, version, j[3]), jobs))
        self.controller = nodes[0]
        self.brokers: dict[int, Node] = {n.node_id: n for n in nodes[1:]}
        self._admin: subprocess.Popen[str] | None = None
        self._admin_lock = threading.Lock()

    # ------------------------------------------------------------ lifecycle

    @property
    def nodes(self) -> list[Node]:
        return [self.controller, *self.brokers.values()]

    def broker(self, n: int) -> Node:
        return self.brokers[n]

    def start(self, timeout: float = 180) -> None:
        """Start the controller, then every broker not running (in parallel), and wait until each says
        it started (a broker does once the controller has unfenced it)."""
        self.controller.start(timeout)
        self.start_brokers(list(self.brokers), timeout)

    def start_brokers(self, ids: Iterable[int], timeout: float = 180) -> None:
        with ThreadPoolExecutor(3) as pool:
            for f in [pool.submit(self.brokers[n].start, timeout) for n in ids]:
                f.result()

    def stop(self) -> None:
        """A clean shutdown: the brokers (controlled shutdown, in parallel), then the controller."""
        self.stop_brokers()
        self.controller.stop()

    def stop_brokers(self) -> None:
        """Every broker's controlled shutdown, in parallel (the admin client closed first)."""
        self.close_admin()
        with ThreadPoolExecutor(3) as pool:
            for f in [pool.submit(b.stop) for b in self.brokers.values()]:
                f.result()

    def kill(self) -> None:
        """SIGKILL every node (for cleanup after a failure)."""
        self.close_admin()
        for node in self.nodes:
            node.kill()

    @property
    def live(self) -> list[int]:
        return [n for n, b in self.brokers.items() if b.running]

    # ------------------------------------------------------------ Kafka's admin client

    def _client_cmd(self, *args: str, heap: str = "-Xmx256m") -> list[str]:
        return ["java", heap, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                f"-Dlog4j2.configurationFile={self.root / 'client-log4j2.properties'}", "-cp", self.cp, *args]

    def admin(self, *command: str, timeout: float = 60) -> Any:
        """One command of ``ClusterClient repl`` (a long-lived Admin client, started on first use):
        create, describe, offsets, elect, alter (see ClusterClient.java). Raises :class:`BrokerError`
        with the client's error."""
        with self._admin_lock:
            if self._admin is None or self._admin.poll() is not None:
                self._admin = subprocess.Popen(
                    self._client_cmd("ClusterClient", "repl", self.bootstrap), stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=java_env(),
                    start_new_session=True)
                self._read_line(self._admin.stdout, timeout)
            assert self._admin.stdin is not None
            self._admin.stdin.write(" ".join(command) + "\n")
            self._admin.stdin.flush()
            answer = json.loads(self._read_line(self._admin.stdout, timeout))
        if isinstance(answer, dict) and isinstance(answer.get("error"), str) and command[0] != "elect":
            raise BrokerError(f"ClusterClient {' '.join(command)}: {answer['error']}")
        return answer

    def _read_line(self, stream: IO[str] | None, timeout: float) -> str:
        assert stream is not None
        ready, _, _ = select.select([stream], [], [], timeout)
        line = stream.readline() if ready else ""
        if not line:
            self.close_admin_unlocked()
            raise BrokerError(f"ClusterClient repl gave no answer in {timeout:.0f} s")
        return line

    def close_admin(self) -> None:
        with self._admin_lock:
            self.close_admin_unlocked()

    def close_admin_unlocked(self) -> None:
        if self._admin is not None:
            if self._admin.poll() is None:
                self._admin.kill()
            self._admin.wait()
            self._admin = None

    def create_topic(self, topic: str, partitions: int = 1, replication: int | None = None,
                     configs: dict[str, str] | None = None) -> None:
        """Create ``topic`` (RF 3 unless told) and wait until every partition has a leader."""
        rf = replication if replication is not None else min(3, len(self.brokers))
        self.admin("create", topic, str(partitions), str(rf), *(f"{k}={v}" for k, v in (configs or {}).items()))
        self.wait_until(f"{topic} created with leaders",
                        lambda: all(d["leader"] >= 0 for d in self.describe([topic]).values()))

    def alter(self, topic: str, configs: dict[str, str]) -> None:
        self.admin("alter", topic, *(f"{k}={v}" for k, v in configs.items()))

    def describe(self, topics: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Per partition (``"topic-p"``), by Admin describeTopics: leader (-1: none), replicas, isr,
        elr, lastKnownElr, topicId; and leaderEpoch (ListOffsets latest; None without a leader)."""
        result: dict[str, dict[str, Any]] = self.admin("describe", *topics)
        return result

    def list_offsets(self, topics: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Per partition, by Admin ListOffsets: earliest, latest (the high watermark), lso (latest at
        read_committed), leaderEpoch; None where the partition has no leader to answer."""
        result: dict[str, dict[str, Any]] = self.admin("offsets", *topics)
        return result

    def elect(self, topic: str, partition: int, election: str = "PREFERRED") -> str | None:
        """Admin electLeaders: None if done, else the error's class name (``ElectionNotNeededException``
        when the leader is already the one the election would pick)."""
        error: str | None = self.admin("elect", election, topic, str(partition))["error"]
        return error

    def unclean_election(self, topic: str, partition: int) -> str | None:
        """Set ``unclean.leader.election.enable=true`` on the topic and elect UNCLEAN (see :meth:`elect`)."""
        self.alter(topic, {"unclean.leader.election.enable": "true"})
        return self.elect(topic, partition, "UNCLEAN")

    # ------------------------------------------------------------ waiting

    def wait_until(self, what: str, check: Callable[[], bool], timeout: float = WAIT_S) -> None:
        """Poll ``check`` every half second until it holds; an Admin error on the way (a topic not yet
        known to every broker, a leader moving) counts as not yet. Raises AssertionError after
        ``timeout`` seconds, naming ``what`` and the last error."""
        deadline = time.monotonic() + timeout
        last = ""
        while True:
            try:
                if check():
                    return
            except BrokerError as e:
                last = f" (last error: {e})"
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: not so after {timeout:.0f} s{last}")
            time.sleep(0.5)

    def wait_for_isr(self, topic: str, partition: int, size: int, timeout: float = WAIT_S) -> dict[str, Any]:
        """Wait until the partition has a leader and ``size`` replicas in its ISR; its description."""
        tp = f"{topic}-{partition}"
        seen: dict[str, Any] = {}

        def check() -> bool:
            seen.update(self.describe([topic])[tp])
            return bool(seen["leader"] >= 0 and len(seen["isr"]) == size)

        self.wait_until(f"{tp} with an ISR of {size} (last seen {seen})", check, timeout)
        return seen

    def wait_replicated(self, topics: Sequence[str], timeout: float = WAIT_S) -> dict[str, dict[str, Any]]:
        """Wait until no partition of ``topics`` is under-replicated: each has a leader and its ISR
        holds every replica on a live broker (all of them when every broker runs)."""
        seen: dict[str, dict[str, Any]] = {}
        live = set(self.live)

        def check() -> bool:
            seen.clear()
            seen.update(self.describe(topics))
            return all(d["leader"] >= 0 and set(d["isr"]) == set(d["replicas"]) & live for d in seen.values())

        self.wait_until(f"{topics} fully replicated on brokers {sorted(live)}", check, timeout)
        return seen

    def wait_leader(self, topic: str, partition: int, not_in: Iterable[int] = (), timeout: float = WAIT_S) -> int:
        """Wait until the partition has a leader outside ``not_in``; its id."""
        tp = f"{topic}-{partition}"
        avoid = set(not_in)
        leader = [-1]

        def check() -> bool:
            leader[0] = self.describe([topic])[tp]["leader"]
            return leader[0] >= 0 and leader[0] not in avoid

        self.wait_until(f"{tp} led by a broker not in {sorted(avoid)}", check, timeout)
        return leader[0]

    # ------------------------------------------------------------ Kafka's producers and consumer

    def produce_async(self, seed: int, specs: Sequence[tuple[str, str, int]], pause_ms: int = 0) -> Producing:
        """Start ``ClusterClient produce``: per (topic, kind, records) one producer thread (kind plain:
        acks=all not idempotent; idempotent; txn: transactions with a third aborted), every codec in
        turn, pausing ``pause_ms`` every 20 records."""
        args = [f"{t}:{k}:{n}" for t, k, n in specs]
        proc = subprocess.Popen(self._client_cmd("ClusterClient", "produce", self.bootstrap, str(seed), str(pause_ms),
                                                 *args, heap="-Xmx384m"),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=java_env(),
                                start_new_session=True)
        return Producing(proc, f"ClusterClient produce {seed} {' '.join(args)}")

    def produce(self, seed: int, specs: Sequence[tuple[str, str, int]], pause_ms: int = 0) -> list[dict[str, Any]]:
        """:meth:`produce_async` and wait: per spec, records acked and failed, transactions committed,
        aborted and failed."""
        return self.produce_async(seed, specs, pause_ms).wait()

    def commit_groups(self, seed: int, prefix: str, topics: Sequence[str]) -> dict[str, dict[str, int]]:
        """Consumer groups committing random offsets of ``topics`` (``ClusterClient groups``: two of
        the classic protocol, two of the consumer protocol, one through Admin), and every group's
        committed offsets as Admin's ``listConsumerGroupOffsets`` answers: ``{group: {"t-p": offset}}``."""
        cmd = self._client_cmd("ClusterClient", "groups", self.bootstrap, prefix, str(seed), *topics)
        proc = subprocess.run(cmd, capture_output=True, text=True, env=java_env(), check=False, timeout=300)
        if proc.returncode != 0:
            raise RuntimeError(f"ClusterClient groups failed (exit {proc.returncode}): {proc.stderr[-3000:]}")
        out: dict[str, dict[str, int]] = json.loads(proc.stdout.strip().splitlines()[-1])
        return out

    def consume(self, isolation: str, topics: Sequence[str], out: Path | None = None) -> list[dict[str, Any]]:
        """Every record of ``topics`` from the log start to the high watermark (the LSO at
        read_committed) as Kafka's consumer at ``isolation`` returns them (``BrokerClient consume``),
        each a :func:`broker_fixture.consumer_row`."""
        path = out or Path(tempfile.mkstemp(dir=self.root, prefix=f"consume-{isolation}-", suffix=".jsonl")[1])
        cmd = self._client_cmd("BrokerClient", "consume", self.bootstrap, isolation, str(path), *topics, heap="-Xmx512m")
        proc = subprocess.run(cmd, capture_output=True, text=True, env=java_env(), check=False, timeout=300)
        if proc.returncode != 0:
            tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
            raise BrokerError(f"BrokerClient consume failed (exit {proc.returncode}):\n{tail}")
        with open(path) as f:
            rows = [consumer_row(json.loads(line)) for line in f]
        if out is None:
            path.unlink()
        return rows

    def consume_both(self, topics: Sequence[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """:meth:`consume` at read_committed and at read_uncommitted, two consumers in one JVM
        (``ClusterClient consume``)."""
        paths = [Path(tempfile.mkstemp(dir=self.root, prefix=f"consume-{i}-", suffix=".jsonl")[1]) for i in range(2)]
        cmd = self._client_cmd("ClusterClient", "consume", self.bootstrap, *map(str, paths), *topics, heap="-Xmx512m")
        proc = subprocess.run(cmd, capture_output=True, text=True, env=java_env(), check=False, timeout=300)
        if proc.returncode != 0:
            tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
            raise BrokerError(f"ClusterClient consume failed (exit {proc.returncode}):\n{tail}")
        out = []
        for path in paths:
            with open(path) as f:
                out.append([consumer_row(json.loads(line)) for line in f])
            path.unlink()
        return out[0], out[1]

    # ------------------------------------------------------------ copies of the dirs

    def snapshot(self, dest: Path) -> dict[int, Path]:
        """A volume snapshot: each node's data dir copied (``shutil.copytree``) to ``dest/b<n>/data`` and
        ``dest/controller/data``, live or stopped, one node after another (so, live, not one instant):
        the brokers first, the controller last, so that the controller's ``__cluster_metadata`` (the
        quorum leader's log, which the brokers fetch) ends at or past every broker's copy of it, as it
        does at any one instant (copied first, a live copy once ended below a broker's: seed 1257189204).
        A file that vanishes during a live copy (a segment deleted, a checkpoint replaced) is left out;
        any other copy error is raised. Returns node id -> copied data dir."""
        out: dict[int, Path] = {}
        for node in sorted(self.nodes, key=lambda n: n.node_id == CONTROLLER_ID):  # the controller last
            name = "controller" if node.node_id == CONTROLLER_ID else f"b{node.node_id}"
            target = dest / name / "data"
            copy_live(node.log_dir, target)
            out[node.node_id] = target
        return out


    def stopped_snapshot(self, dest: Path, restart: bool = True) -> dict[int, Path]:
        """:meth:`stop` (a clean shutdown), :meth:`snapshot`, and with ``restart`` :meth:`start` again
        (the brokers that were down stay down)."""
        down = [n for n, b in self.brokers.items() if not b.running]
        self.stop()
        out = self.snapshot(dest)
        if restart:
            self.controller.start()
            self.start_brokers([n for n in self.brokers if n not in down])
        return out


def _copy_if_there(src: str, dst: str) -> None:
    try:
        shutil.copy2(src, dst)
    except FileNotFoundError:
        pass  # the broker deleted or replaced it while we copied


def copy_live(src: Path, dst: Path) -> None:
    """``shutil.copytree`` of a dir a broker may be writing: files that vanish meanwhile are skipped."""
    try:
        shutil.copytree(src, dst, copy_function=_copy_if_there)
    except shutil.Error as e:
        real = [err for err in e.args[0] if "No such file" not in str(err[2])]
        if real:
            raise


# --- the messy scenario -----------------------------------------------------------------------------


@dataclass
class Divergence:
    """A replica holding records its partition's leader does not: ``broker``'s copy of ``topic``-``partition``
    after an unclean election made ``leader`` the leader. Its log ran to ``log_end`` (exclusive; the
    high watermark while it alone was the ISR); Kafka truncated it to ``truncate_to`` when it came back
    as a follower (read from its own ``server.log``), so offsets ``[truncate_to, log_end)`` of its copy
    in ``snapshot`` are not the cluster's. ``old_epoch``: its last leader epoch; ``new_epoch``: the
    leader's after the election (Admin). ``describe`` and ``offsets``: the Admin truth of every topic
    just before ``snapshot`` was copied (nothing was produced meanwhile)."""

    broker: int
    topic: str
    partition: int
    leader: int
    truncate_to: int
    log_end: int
    old_epoch: int
    new_epoch: int
    snapshot: Path
    describe: dict[str, dict[str, Any]] = field(default_factory=dict)
    offsets: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class LeaderKill:
    """The leader of ``tp`` (``"topic-p"``), broker ``leader`` at leader epoch ``epoch``, SIGKILLed;
    Kafka elected ``new_leader`` at ``new_epoch`` (Admin)."""

    tp: str
    leader: int
    epoch: int
    new_leader: int
    new_epoch: int


@dataclass
class Messy:
    """What :func:`messy_scenario` did and what the cluster says afterwards: ``seed``; ``topics``
    (``<prefix>-idem``, ``-txn``, ``-plain``, ``-unclean``); ``dead``, the broker left SIGKILLed;
    ``divergence``, the replica the unclean election left divergent (:class:`Divergence`);
    ``leader_kill``, the leader SIGKILLed while the producers wrote (:class:`LeaderKill`);
    ``events``, every kill, stop, start and election in order, with seconds since the start;
    ``produced``, per producer run: records acked and failed, transactions committed, aborted and
    failed; then the truth at the end, with ``dead`` down: ``describe`` and ``offsets`` (Admin, as
    :meth:`Cluster.describe` and :meth:`Cluster.list_offsets`) and ``committed`` and
    ``uncommitted``, every record of the four topics as Kafka's consumer returns it at
    read_committed and read_uncommitted."""

    seed: int
    topics: list[str]
    unclean_topic: str
    dead: int
    divergence: Divergence
    leader_kill: LeaderKill | None = None
    events: list[str] = field(default_factory=list)
    produced: list[dict[str, Any]] = field(default_factory=list)
    describe: dict[str, dict[str, Any]] = field(default_factory=dict)
    offsets: dict[str, dict[str, Any]] = field(default_factory=dict)
    committed: list[dict[str, Any]] = field(default_factory=list)
    uncommitted: list[dict[str, Any]] = field(default_factory=list)
    #: every node's dir copied live right after the scenario, ``dead`` still down (the ``messy``
    #: fixture takes it: later tests may start that broker again), by node id
    live: dict[int, Path] = field(default_factory=dict)


#: ``AbstractFetcherThread.truncate``'s line for a truncation decided by the leader's epoch lineage.
TRUNCATION = re.compile(r"Truncating partition (\S+) with TruncationState\(offset=(\d+), completed=\w+\) "
                        r"due to leader epoch and offset")


def truncations(node: Node, tp: str, since: int) -> list[int]:
    """The offsets ``node``'s fetcher truncated ``tp`` to by the leader's epochs, in order, in its
    ``server.log`` from byte ``since``."""
    return [int(m.group(2)) for m in TRUNCATION.finditer(node.log_since(since)) if m.group(1) == tp]


def messy_scenario(cluster: Cluster, seed: int, prefix: str, records: int = 3000) -> Messy:
    """One random, seeded (``seed`` printed) run of everything a production cluster goes through, on a
    running 3-broker ``cluster`` with every broker up. It

    1. creates four RF-3 topics: ``<prefix>-idem`` (3 partitions), ``<prefix>-txn`` (2),
       ``<prefix>-plain`` (2), small segments (``internal.segment.bytes`` 64 KiB), and
       ``<prefix>-unclean`` (1 partition, ``unclean.leader.election.enable=true``,
       ``min.insync.replicas=1``);
    2. produces about ``records`` records into the first three in the background (idempotent,
       transactional with a third of the transactions aborted, and acks=all non-idempotent; every
       codec; random keys, null values, headers; ``ClusterClient produce``) and a few hundred into
       ``-unclean``, while it SIGKILLs a follower of a random partition and restarts it, and SIGKILLs
       the leader of another, waits for a new leader (leader epoch bump), and restarts it (the
       victims, their order and the pauses chosen by ``seed``); then waits until nothing is
       under-replicated;
    3. the unclean election: on ``-unclean-0`` with leader A, stops followers B and C (one SIGKILL,
       one clean, by seed), waits for ISR = {A}, produces to A alone, stops A cleanly, starts B and
       elects it UNCLEAN (B is not in the ISR; Kafka 4.4's controller usually does it first, on B's
       unfencing), produces more to B (more records than A had alone, so that B's log passes A's
       end), starts C and waits for ISR = {B, C}; takes ``divergence.snapshot``, a volume snapshot of
       every node's dir with A stopped (A's copy holds the divergent records), and the Admin truth
       of that moment (``divergence.describe``/``offsets``): the other topics' partitions may then
       have no leader (KIP-966: a follower stopped while the ISR still met ``min.insync.replicas``
       is in neither ISR nor ELR, and one SIGKILLed leaves the ELR on restart, so only A may lead
       them), though every replica of theirs holds every record (none was written to them in
       this step); then starts A, reads from A's log the offset its fetcher truncated it to
       (``divergence.truncate_to``), and waits until nothing is under-replicated;
    4. SIGKILLs one random broker (``dead``), left dead, and waits until every partition's ISR has
       dropped it;
    5. records the truth with the cluster in that state: ``describe`` and ``offsets`` (Admin) of every
       topic, and Kafka's consumer at ``read_committed`` and ``read_uncommitted`` over all four topics.
       No record is written after step 3's production, so the consumer truth is also the truth of
       ``divergence.snapshot`` (its high watermarks may lag: take them from its own files).

    ``events`` lists, in order, what was killed, stopped, started and elected.
    """
    print(f"messy_scenario seed={seed} prefix={prefix}")
    rng = random.Random(seed)
    t0 = time.monotonic()
    idem, txn, plain, unclean = (f"{prefix}-{s}" for s in ("idem", "txn", "plain", "unclean"))
    topics = [idem, txn, plain, unclean]
    small = {"internal.segment.bytes": "65536"}
    cluster.create_topic(idem, 3, configs=small)
    cluster.create_topic(txn, 2, configs=small)
    cluster.create_topic(plain, 2, configs=small)
    cluster.create_topic(unclean, 1, configs={**small, "unclean.leader.election.enable": "true",
                                              "min.insync.replicas": "1"})
    m = Messy(seed=seed, topics=topics, unclean_topic=unclean, dead=-1, divergence=None)  # type: ignore[arg-type]
    cluster.wait_replicated(topics)

    def ev(what: str) -> None:
        m.events.append(f"{time.monotonic() - t0:6.1f} s  {what}")

    ev("topics created")

    # 2. kills and restarts while Kafka's producers write (for about PRODUCE_S seconds)
    share = records // 3
    pause = int(PRODUCE_S * 1000 * 20 / max(share, 1))
    with cluster.produce_async(rng.randrange(2**31), [(idem, "idempotent", share), (txn, "txn", share),
                                                      (plain, "plain", share), (unclean, "idempotent", 200)],
                               pause_ms=pause) as job:

        def producing() -> str:
            return "while producing" if job.proc.poll() is None else "after the producers ended"

        time.sleep(rng.uniform(1.5, 3.0))
        desc = cluster.describe(topics[:3])
        tp = rng.choice(sorted(desc))
        follower = rng.choice([r for r in desc[tp]["replicas"] if r != desc[tp]["leader"]])
        cluster.broker(follower).kill()
        ev(f"SIGKILL follower {follower} of {tp} {producing()}")
        time.sleep(rng.uniform(0.5, 2.0))
        cluster.broker(follower).start()
        ev(f"start {follower}")
        cluster.wait_replicated(topics)
        desc = cluster.describe(topics[:3])
        tp = rng.choice(sorted(desc))
        leader, epoch = desc[tp]["leader"], desc[tp]["leaderEpoch"]
        cluster.broker(leader).kill()
        how = producing()
        topic_of, part_of = broker_fixture.split_tp(tp)
        new_leader = cluster.wait_leader(topic_of, part_of, not_in=[leader])
        new_epoch = cluster.describe([topic_of])[tp]["leaderEpoch"]
        m.leader_kill = LeaderKill(tp, leader, epoch, new_leader, new_epoch)
        ev(f"SIGKILL leader {leader} of {tp} (epoch {epoch}) {how}; new leader {new_leader} (epoch {new_epoch})")
        time.sleep(rng.uniform(0.5, 1.5))
        cluster.broker(leader).start()
        ev(f"start {leader} {producing()}")
        m.produced = job.wait()
    cluster.wait_replicated(topics)

    # 3. the unclean election
    utp = f"{unclean}-0"
    d = cluster.describe([unclean])[utp]
    a = d["leader"]
    b, c = rng.sample([r for r in d["replicas"] if r != a], 2)
    hows = rng.sample(["kill", "stop"], 2)
    with ThreadPoolExecutor(2) as pool:
        for f in [pool.submit(getattr(cluster.broker(victim), how)) for victim, how in zip((b, c), hows, strict=True)]:
            f.result()
    for victim, how in zip((b, c), hows, strict=True):
        ev(f"{'SIGKILL' if how == 'kill' else 'stop'} follower {victim} of {utp}")
    cluster.wait_for_isr(unclean, 0, 1)
    alone = rng.randrange(60, 200)
    m.produced += cluster.produce(rng.randrange(2**31), [(unclean, "idempotent", alone)])
    solo = cluster.list_offsets([unclean])[utp]
    old_epoch = solo["leaderEpoch"]
    cluster.broker(a).stop()
    ev(f"stop leader {a} of {utp} (alone in its ISR, log end {solo['latest']}, epoch {old_epoch})")
    cluster.start_brokers([b])
    ev(f"start {b}")
    error = cluster.unclean_election(unclean, 0)
    if error not in (None, "ElectionNotNeededException"):
        raise BrokerError(f"the unclean election of {utp} failed: {error}")
    cluster.wait_leader(unclean, 0, not_in=[a])
    after = cluster.describe([unclean])[utp]
    ev(f"elect UNCLEAN {utp}: {error or 'done'}; leader {after['leader']} epoch {after['leaderEpoch']}")
    if after["leader"] != b:
        raise BrokerError(f"the unclean election of {utp} chose {after['leader']}, not {b}: {after}")
    # more records than A had alone: B's log passes A's end, so every divergent offset has B's other batch
    # (not while C starts: a producer that meets a starting broker can stall for a request timeout)
    m.produced += cluster.produce(rng.randrange(2**31), [(unclean, "idempotent", alone + rng.randrange(50, 150))])
    ev(f"produced to {b}")
    cluster.start_brokers([c])
    ev(f"start {c}")
    cluster.wait_for_isr(unclean, 0, 2)
    snap = cluster.root / f"{prefix}-divergent"
    snap_describe, snap_offsets = cluster.describe(topics), cluster.list_offsets(topics)
    cluster.snapshot(snap)
    offline = sorted(tp for tp, d in snap_describe.items() if d["leader"] < 0)
    ev(f"snapshot {snap} with {a} stopped; partitions without a leader: {offline or 'none'}")
    mark = cluster.broker(a).log_mark()
    cluster.start_brokers([a])
    ev(f"start {a}")
    cluster.wait_replicated(topics)
    cuts = truncations(cluster.broker(a), utp, mark)
    if not cuts:
        raise BrokerError(f"broker {a} logged no truncation of {utp} after the unclean election")
    m.divergence = Divergence(broker=a, topic=unclean, partition=0, leader=b, truncate_to=cuts[0],
                              log_end=solo["latest"], old_epoch=old_epoch, new_epoch=after["leaderEpoch"],
                              snapshot=snap, describe=snap_describe, offsets=snap_offsets)

    # 4. one broker left dead
    m.dead = rng.choice(sorted(cluster.brokers))
    cluster.broker(m.dead).kill()
    ev(f"SIGKILL {m.dead}, left dead")
    cluster.wait_replicated(topics)
    ev(f"the ISR of every partition without {m.dead}")

    # 5. the truth
    ev("replicated; the truth")
    m.describe = cluster.describe(topics)
    m.offsets = cluster.list_offsets(topics)
    m.committed, m.uncommitted = cluster.consume_both(topics)
    ev("done")
    for e in m.events:
        print("  " + e)
    return m
