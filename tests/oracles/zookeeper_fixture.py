"""A ZooKeeper-era Kafka cluster in the test suite: Apache ZooKeeper and three Kafka 3.9 brokers in
ZooKeeper mode (``zookeeper.connect``, ``broker.id``; no ``process.roles``, no ``__cluster_metadata``),
each its own JVM on 127.0.0.1: the oracle of klog's reads of a ZooKeeper-era cluster's dirs (issue 57),
whose partition state (leader, ISR) lives in ZooKeeper, not in the dirs.

Layout under ``root``::

    root/zookeeper/data, zoo.cfg, server.log   ZooKeeper's own (never given to klog)
    root/b1/data ... bN/data                   broker n's log.dirs (meta.properties: version=0, broker.id=n)
    root/<node>/server.properties, server.log, stdout.log

Usage::

    c = ZkCluster(tmp / "zk")       # writes the configs; nothing runs
    c.start()                        # ZooKeeper, then the brokers in parallel (15-30 s)
    c.create_topic(...); c.produce(...); c.consume_both(...); c.list_offsets(...); c.describe(...)
    c.snapshot(tmp / "live")         # as cluster_fixture.Cluster (brokers' dirs only)
    c.stop()                         # the brokers (controlled shutdown), then ZooKeeper

Everything but the lifecycle is :class:`cluster_fixture.Cluster`'s: Kafka's Admin client, producers
and consumers of ``oracle/ClusterClient.java`` and ``oracle/BrokerClient.java``, compiled against
3.9's jars (``kafka_oracle.RENAMED_CALLS`` and ``MOVED_PACKAGES`` spell the calls and packages the
3.9 way). The jars are those of ``tests/oracles/broker/pom.xml`` at :data:`ZK_KAFKA_VERSION`
(``broker_fixture.libs``): Kafka 3.9's ``kafka_2.13`` depends on ``org.apache.zookeeper:zookeeper``
3.8.4, whose ``QuorumPeerMain`` (standalone: ``ZooKeeperServerMain``) runs ZooKeeper here, as
Kafka's ``zookeeper-server-start.sh`` does. Kafka 4.0 removed ZooKeeper mode, so this cluster runs
3.9 whatever ``KLOG_KAFKA_VERSION`` says. Where it cannot run :func:`unavailable` says why.

In ZooKeeper mode the controller is one of the brokers (elected through ZooKeeper): a broker that
dies leaves the ISR of its partitions by the controller's hand (``removeReplicasFromIsr``, which bumps
the leader epoch), and a clean shutdown moves leadership away first (controlled shutdown).
"""

from __future__ import annotations

import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import broker_fixture
from broker_fixture import BrokerError, free_port, java_env, libs
from cluster_fixture import CLIENT_LOG4J2, CLUSTER_CONFIG, JVM_OPTIONS, Cluster, classpath, init_node

#: The last Kafka release with ZooKeeper mode (4.0 removed it).
ZK_KAFKA_VERSION = "3.9.1"
#: ZooKeeper's server, from the zookeeper jar Kafka 3.9 depends on.
ZOOKEEPER_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"

#: Every broker's settings beyond broker.id, listeners, dirs and zookeeper.connect: the KRaft
#: cluster's (RF 3, min.insync.replicas 2, high-watermark checkpoints every second) without its
#: KRaft-only keys.
ZK_BROKER_CONFIG = {k: v for k, v in CLUSTER_CONFIG.items()
                    if k not in ("controller.listener.names", "broker.session.timeout.ms",
                                 "broker.heartbeat.interval.ms")}
ZK_BROKER_CONFIG.update({
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT",
    "zookeeper.session.timeout.ms": "4000",
    "zookeeper.connection.timeout.ms": "30000",
    "controlled.shutdown.retry.backoff.ms": "500",
})


def unavailable(version: str = ZK_KAFKA_VERSION) -> str | None:
    """None if the ZooKeeper cluster can run here, else why not (a skip reason)."""
    reason = broker_fixture.skip_reason(lambda: classpath(version))
    if reason is None and not any(j.name.startswith("zookeeper-3.") for j in libs(version)):
        reason = f"Kafka {version}'s jars hold no zookeeper jar"
    return None if reason is None else f"ZooKeeper-era cluster (Kafka {version} in ZooKeeper mode): {reason}"


class ZooKeeper:
    """A standalone ZooKeeper on 127.0.0.1 (its admin server off), data under ``root/data``."""

    def __init__(self, root: Path, cp: str) -> None:
        self.root = root
        self.cp = cp
        self.port = free_port()
        self.connect = f"127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        root.mkdir(parents=True, exist_ok=True)
        (root / "zoo.cfg").write_text(
            f"dataDir={root / 'data'}\nclientPort={self.port}\nclientPortAddress=127.0.0.1\n"
            "tickTime=500\nmaxClientCnxns=0\nadmin.enableServer=false\n")
        (root / "log4j2.properties").write_text(broker_fixture.LOG4J2)

    def start(self, timeout: float = 60) -> None:
        stdout = open(self.root / "stdout.log", "ab")  # noqa: SIM115 - the child owns it
        try:
            self.proc = subprocess.Popen(
                ["java", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", f"-Dkafka.logs.dir={self.root}",
                 f"-Dlog4j2.configurationFile={self.root / 'log4j2.properties'}", "-cp", self.cp, ZOOKEEPER_MAIN,
                 str(self.root / "zoo.cfg")],
                stdout=stdout, stderr=subprocess.STDOUT, env=java_env(), start_new_session=True)
        finally:
            stdout.close()
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise BrokerError(f"ZooKeeper exited with {self.proc.returncode} while starting: "
                                  f"{(self.root / 'stdout.log').read_text(errors='replace')[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    s.sendall(b"srvr")
                    if s.recv(64):
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.kill()
                raise BrokerError(f"ZooKeeper did not start in {timeout:.0f} s")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    kill = stop


class ZkBroker(broker_fixture.Broker):
    """One ZooKeeper-mode broker (``broker.id`` ``node_id``): nothing to format (Kafka writes
    ``meta.properties`` on first start). Lifecycle as :class:`broker_fixture.Broker`."""

    jvm_options = JVM_OPTIONS
    #: ``KafkaServer.startup``'s last line.
    started_line = "] started (kafka.server.KafkaServer)"

    def __init__(self, root: Path, node_id: int, props: dict[str, str], cp: str) -> None:
        init_node(self, root, node_id, ZK_KAFKA_VERSION, props, cp)

    def pause(self) -> None:
        """SIGSTOP: the JVM stops at once, its sockets open (a follower that stops fetching; resume
        within ``zookeeper.session.timeout.ms`` and ``replica.lag.time.max.ms`` and it is still live and
        in sync)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)

    def __repr__(self) -> str:
        return f"ZkBroker({self.node_id}, {'running' if self.running else 'down'})"


class ZkCluster(Cluster):
    """ZooKeeper and ``brokers`` ZooKeeper-mode brokers (broker ids 1..N) under ``root``; ``config``
    overrides :data:`ZK_BROKER_CONFIG`. Nothing runs until :meth:`start`."""

    def __init__(self, root: Path, brokers: int = 3, version: str = ZK_KAFKA_VERSION, **config: str) -> None:
        self.root = root
        self.version = version
        self.cp = classpath(version)
        root.mkdir(parents=True, exist_ok=True)
        (root / "client-log4j2.properties").write_text(CLIENT_LOG4J2)
        self.zookeeper = ZooKeeper(root / "zookeeper", self.cp)
        base = dict(ZK_BROKER_CONFIG)
        base["default.replication.factor"] = str(min(brokers, 3))
        base.update(config)
        base["zookeeper.connect"] = self.zookeeper.connect
        ports = {n: free_port() for n in range(1, brokers + 1)}
        self.bootstrap = ",".join(f"127.0.0.1:{p}" for p in ports.values())
        self.brokers = {  # type: ignore[assignment]
            n: ZkBroker(root / f"b{n}", n, {**base, "broker.id": str(n), "listeners": f"PLAINTEXT://127.0.0.1:{port}",
                                            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
                                            "log.dirs": str(root / f"b{n}" / "data")}, self.cp)
            for n, port in ports.items()}
        self._admin = None
        self._admin_lock = threading.Lock()

    @property
    def nodes(self) -> list[ZkBroker]:  # type: ignore[override]
        return list(self.brokers.values())  # type: ignore[arg-type]

    def start(self, timeout: float = 180) -> None:
        """ZooKeeper (if not running), then every broker not running, in parallel."""
        if self.zookeeper.proc is None:
            self.zookeeper.start()
        self.start_brokers(list(self.brokers), timeout)

    def stop(self) -> None:
        """A clean shutdown: every broker (controlled shutdown, in parallel), then ZooKeeper."""
        self.stop_brokers()
        self.zookeeper.stop()

    def kill(self) -> None:
        self.close_admin()
        for b in self.brokers.values():
            b.kill()
        self.zookeeper.kill()
