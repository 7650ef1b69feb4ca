"""Apache Kafka's own broker in the test suite: a single-node KRaft broker (combined broker and
controller roles) on 127.0.0.1, started from the jars of the release ``tests/oracles/broker/pom.xml`` pins.

The jars are copied by Maven (``mvn dependency:copy-dependencies``) into a cache outside the
repository, ``$KLOG_KAFKA_CACHE/<version>/libs-<pom digest>`` (default ``~/.cache/klog-kafka``); the cache is
guarded by a file lock, so parallel pytest workers share it. ``oracle/BrokerClient.java`` (Kafka's
own producer, consumer and admin client, driving workloads and reading the truth back) is compiled
against those jars into the same cache.

A :class:`Broker` formats its dirs (``kafka.tools.StorageTool format --standalone``), starts
``kafka.Kafka`` with free ports and a temporary ``log.dirs``, waits until its log says it started,
and stops it cleanly (SIGTERM and wait), kills it (SIGKILL) or restarts it on the same dirs.

Where the broker cannot run (no Java, no Maven, no network), :func:`unavailable` gives the reason
the tests skip with; with ``KLOG_REQUIRE_BROKER=1`` (CI) the tests fail instead.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kafka_oracle import JAVA, OracleError, _classes, _locked

HERE = Path(__file__).resolve().parent
POM = HERE / "broker" / "pom.xml"
CLIENT_SOURCE = JAVA / "BrokerClient.java"
STARTED = "Kafka Server started"
REQUIRE_ENV = "KLOG_REQUIRE_BROKER"

#: The broker's settings beyond listeners and dirs: one node, small internal topics, and the
#: cleaner and retention checks frequent enough to run while a test's workload does.
BROKER_CONFIG = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
    "log.retention.check.interval.ms": "500",
    "log.cleaner.backoff.ms": "200",
    # retention and the cleaner start soon after the broker does, not 30 s later (at 0 the first
    # retention round races the loading of the logs: "cannot be resumed since it is not paused")
    "log.initial.task.delay.ms": "3000",
    "num.partitions": "1",
    "auto.create.topics.enable": "false",
}

def tiered_storage_config(remote_dir: Path) -> dict[str, str]:
    """A broker's settings for tiered storage (KIP-405) into Kafka's own ``LocalTieredStorage`` (the
    kafka-storage test jar: plain copies of the segment files under ``remote_dir``), with the
    metadata in a small ``__remote_log_metadata`` and the copy task run every half second."""
    return {
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.class.name": "org.apache.kafka.server.log.remote.storage.LocalTieredStorage",
        "remote.log.storage.manager.impl.prefix": "rsm.config.",
        "rsm.config.dir": str(remote_dir),
        "remote.log.metadata.manager.impl.prefix": "rlmm.config.",
        "remote.log.metadata.manager.listener.name": "PLAINTEXT",
        "rlmm.config.remote.log.metadata.topic.replication.factor": "1",
        "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
        "remote.log.manager.task.interval.ms": "500",
    }


LOG4J2 = """status = error
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = ${sys:kafka.logs.dir}/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
"""


class BrokerError(RuntimeError):
    """The broker (or Kafka's client harness) could not be set up or did not do what was asked."""


def pom_property(pom: Path, name: str) -> str:
    """The value of ``<name>`` in ``pom``'s properties (the release it pins)."""
    m = re.search(rf"<{re.escape(name)}>([^<]+)</{re.escape(name)}>", pom.read_text())
    assert m, f"{pom} names no {name}"
    return m.group(1)


def maven_cache(env: str, name: str, version: str) -> Path:
    """Where Maven's copies of one pinned release live: ``$env`` or ``~/.cache/<name>``, then the version."""
    root = os.environ.get(env)
    return (Path(root) if root else Path.home() / ".cache" / name) / version


#: Overrides the release ``tests/oracles/broker/pom.xml`` pins, for every broker test of the run.
VERSION_ENV = "KLOG_KAFKA_VERSION"
#: Releases whose ``kafka-storage`` test jar (``LocalTieredStorage``) Maven Central does not serve,
#: and the newest release whose test jar it does. That jar is fetched with the release's own (so the
#: pom resolves), but it does not run on them: 4.3.1's ``LocalTieredStorage`` needs
#: ``org.apache.kafka.common.utils.LogContext``, which 4.4.0 no longer has. The tiered-storage tests
#: run a broker of that release instead (:func:`tiered_release`).
STORAGE_TEST_JAR = {"4.4.0": "4.3.1"}


def kafka_version(version: str | None = None) -> str:
    """The Kafka release to run: ``version`` if given, else ``$KLOG_KAFKA_VERSION``, else the pom's pin."""
    return version or os.environ.get(VERSION_ENV) or pom_property(POM, "kafka.version")


def cache_dir(version: str | None = None) -> Path:
    return maven_cache("KLOG_KAFKA_CACHE", "klog-kafka", kafka_version(version))


_libs: dict[str, list[Path]] = {}
_failure: dict[str, str] = {}


def libs_dir(pom: Path, cache: Path) -> Path:
    """Where Maven's copies of ``pom``'s runtime jars are: ``cache/libs-<digest of the pom>``."""
    return cache / f"libs-{hashlib.sha256(pom.read_bytes()).hexdigest()[:16]}"


def maven_jars(pom: Path, cache: Path, wanted: str, what: str, properties: dict[str, str] | None = None) -> list[Path]:
    """The runtime jars of ``pom``, copied by Maven into ``cache/libs-<pom digest>`` on first use (under the
    cache's file lock, so parallel pytest workers share one copy); ``wanted`` is a jar that must be
    among them; ``properties`` override the pom's (``-Dname=value``). Raises :class:`BrokerError` naming
    ``what`` could not be had, and why."""
    try:
        for tool in ("java", "javac", "mvn"):
            if shutil.which(tool) is None:
                raise BrokerError(f"{what} unavailable: no {tool} on PATH")
        cache.mkdir(parents=True, exist_ok=True)
        with _locked(cache / ".lock"):
            # one dir per pom: a pom that changed (a dependency added) fetches again, into a dir of
            # its own, never under a JVM another process started on the previous pom's jars
            target = libs_dir(pom, cache)
            if not target.is_dir():
                tmp = Path(tempfile.mkdtemp(dir=cache, prefix=".libs-"))
                try:
                    cmd = ["mvn", "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
                           f"-DoutputDirectory={tmp}", "-DincludeScope=runtime",
                           *(f"-D{k}={v}" for k, v in (properties or {}).items())]
                    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=900)
                    if proc.returncode != 0:
                        tail = " ".join((proc.stdout + proc.stderr).strip().splitlines()[-5:])
                        raise BrokerError(f"{what} unavailable: mvn could not fetch {wanted}: {tail}")
                    tmp.rename(target)
                finally:
                    shutil.rmtree(tmp, ignore_errors=True)
            jars = sorted(target.glob("*.jar"))
    except (OSError, subprocess.TimeoutExpired) as e:
        raise BrokerError(f"{what} unavailable: {e}") from e
    if not any(j.name == wanted for j in jars):
        raise BrokerError(f"{what} unavailable: {target} lacks {wanted}")
    return jars


def libs(version: str | None = None) -> list[Path]:
    """The jars of Kafka ``version`` (default :func:`kafka_version`), fetched with Maven on first use
    into that release's cache (raises :class:`BrokerError`)."""
    v = kafka_version(version)
    if v in _libs:
        return _libs[v]
    if v in _failure:
        raise BrokerError(_failure[v])
    try:
        _libs[v] = maven_jars(POM, cache_dir(v), f"kafka_2.13-{v}.jar", f"Kafka broker {v}",
                              {"kafka.version": v, "kafka.storage.test.version": STORAGE_TEST_JAR.get(v, v)})
    except BrokerError as e:
        _failure[v] = str(e)
        raise
    return _libs[v]


def compiled_classpath(pom: Path, cache: Path, jars: list[Path], source: Path | Sequence[Path],
                       what: str | None = None) -> str:
    """``pom``'s jars (fetched into ``cache``) and ``source`` (one Java file or several) compiled against them there, under the
    cache's file lock; a failure is a :class:`BrokerError` (``what`` names the oracle in it)."""
    try:
        with _locked(cache / ".lock"):
            classes = _classes(cache, jars, source)
    except (OracleError, OSError) as e:
        raise BrokerError(f"{what}: {e}" if what else str(e)) from e
    return os.pathsep.join([str(libs_dir(pom, cache) / "*"), str(classes)])


def classpath(source: Path = CLIENT_SOURCE, version: str | None = None) -> str:
    """Kafka ``version``'s jars and the compiled ``source`` (a Java program of ``oracle/``; default
    ``BrokerClient``) compiled against them."""
    return compiled_classpath(POM, cache_dir(version), libs(version), source)


def _jars_hold(version: str | None, class_name: str) -> bool:
    """Whether Kafka ``version``'s jars hold ``class_name`` (dotted)."""
    entry = class_name.replace(".", "/") + ".class"
    for jar in libs(version):
        with zipfile.ZipFile(jar) as z:
            if entry in z.namelist():
                return True
    return False


def dump_log_segments_class(version: str | None = None) -> str:
    """The main class of kafka-dump-log in Kafka ``version``'s jars: ``kafka.tools.DumpLogSegments``
    (Scala, core) up to 4.1, ``org.apache.kafka.tools.DumpLogSegments`` (Java, kafka-tools) once it
    moved there; looked up in the jars themselves."""
    moved = "org.apache.kafka.tools.DumpLogSegments"
    return moved if _jars_hold(version, moved) else "kafka.tools.DumpLogSegments"


LOCAL_TIERED_STORAGE = "org.apache.kafka.server.log.remote.storage.LocalTieredStorage"


def tiered_release(version: str | None = None) -> str:
    """The release whose broker the tiered-storage tests run for Kafka ``version`` (default the pin):
    that release where Maven Central serves its kafka-storage test jar (``LocalTieredStorage``), else
    the newest release whose test jar it serves (:data:`STORAGE_TEST_JAR`)."""
    v = kafka_version(version)
    return STORAGE_TEST_JAR.get(v, v)


def tiered_storage_unavailable(version: str | None = None) -> str | None:
    """None if Kafka ``version``'s jars hold ``LocalTieredStorage`` (kafka-storage's test jar), else
    why not."""
    if _jars_hold(version, LOCAL_TIERED_STORAGE):
        return None
    return f"Kafka {kafka_version(version)}'s jars have no {LOCAL_TIERED_STORAGE} (no kafka-storage test jar)"


def skip_reason(fetch: Callable[[], object]) -> str | None:
    """None if ``fetch`` (what gets an oracle's jars or classes) succeeds here, else why not (a skip reason)."""
    try:
        fetch()
    except BrokerError as e:
        return str(e)
    return None


def unavailable() -> str | None:
    """None if the broker can run here, else why not (a skip reason)."""
    return skip_reason(classpath)


def required() -> bool:
    """CI sets ``KLOG_REQUIRE_BROKER=1``: a broker that cannot start fails the run."""
    return os.environ.get(REQUIRE_ENV, "") not in ("", "0")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def java_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("CLASSPATH", None)
    return env


def random_kafka_uuid() -> str:
    """A cluster id as Kafka's ``Uuid.randomUuid()`` makes one: never the zero or metadata-topic id and
    never a string starting with '-', which ``kafka-storage format -t`` would parse as an option (1 in
    64 uuids did, and failed a CI run's broker fixture)."""
    reserved = {bytes(16), bytes(15) + b"\x01"}
    while True:
        raw = uuid.uuid4().bytes
        text = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
        if raw not in reserved and not text.startswith("-"):
            return text


class Broker:
    """One single-node KRaft broker, its dirs under ``root``: ``data/`` (``log.dirs``),
    ``server.properties``, ``server.log`` (the broker's log4j output) and ``stdout.log``."""

    #: The JVM's options (a subclass running several JVMs at once gives them less heap).
    #: C1 only (``TieredStopAtLevel=1``): a test broker serves small workloads for minutes, and C2's
    #: compiler threads cost a 2-core machine more CPU than the faster code gives back.
    jvm_options: tuple[str, ...] = ("-Xmx768m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
    #: The line of ``server.log`` that says the broker started (a ZooKeeper-mode broker says it otherwise).
    started_line: str = STARTED

    def __init__(self, root: Path, version: str | None = None, **config: str) -> None:
        self.root = root
        self.version = kafka_version(version)
        self.log_dir = root / "data"
        self.server_log = root / "server.log"
        self.port = free_port()
        self.controller_port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.cp = classpath(version=self.version)
        props = dict(BROKER_CONFIG)
        props.update({
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{self.controller_port}",
            "log.dirs": str(self.log_dir),
        })
        props.update(config)
        root.mkdir(parents=True, exist_ok=True)
        (root / "server.properties").write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (root / "log4j2.properties").write_text(LOG4J2)
        cluster_id = random_kafka_uuid()
        proc = subprocess.run(
            ["java", "-XX:TieredStopAtLevel=1", "-cp", self.cp, "kafka.tools.StorageTool", "format", "-t", cluster_id,
             "-c", str(root / "server.properties"), "--standalone"],
            capture_output=True, text=True, env=java_env(), check=False, timeout=120)
        if proc.returncode != 0:
            raise BrokerError(f"kafka-storage format failed (exit {proc.returncode}): {proc.stderr.strip()}")
        self.cluster_id = cluster_id

    # ------------------------------------------------------------ lifecycle

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = 120) -> None:
        """Start the broker (on the same dirs as before) and wait until it has started."""
        if self.running:
            return
        before = self._started_count()
        stdout = open(self.root / "stdout.log", "ab")  # noqa: SIM115 - the child owns it
        try:
            self.proc = subprocess.Popen(
                ["java", *self.jvm_options, f"-Dkafka.logs.dir={self.root}",
                 f"-Dlog4j2.configurationFile={self.root / 'log4j2.properties'}",
                 "-cp", self.cp, "kafka.Kafka", str(self.root / "server.properties")],
                stdout=stdout, stderr=subprocess.STDOUT, env=java_env(), start_new_session=True)
        finally:
            stdout.close()
        deadline = time.monotonic() + timeout
        while self._started_count() <= before:
            if self.proc.poll() is not None:
                raise BrokerError(f"the broker exited with {self.proc.returncode} while starting: {self.log_tail()}")
            if time.monotonic() > deadline:
                self.kill()
                raise BrokerError(f"the broker did not start in {timeout:.0f} s: {self.log_tail()}")
            time.sleep(0.1)

    def stop(self, timeout: float = 120) -> None:
        """A clean shutdown: SIGTERM, and wait for the process to end."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise BrokerError(f"the broker did not stop within {timeout:.0f} s of SIGTERM") from None
        self.proc = None

    def kill(self) -> None:
        """SIGKILL: the broker dies at once, as in a crash of the process (the page cache keeps
        what it wrote)."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    # ------------------------------------------------------------ the broker's log

    def _started_count(self) -> int:
        try:
            return self.server_log.read_text(errors="replace").count(self.started_line)
        except FileNotFoundError:
            return 0

    def log_tail(self, lines: int = 20) -> str:
        text = ""
        for name in ("server.log", "stdout.log"):
            try:
                text += (self.root / name).read_text(errors="replace")
            except FileNotFoundError:
                pass
        return "\n".join(text.splitlines()[-lines:])

    def log_mark(self) -> int:
        """Where the broker's log ends now: :meth:`problems` reads from here."""
        try:
            return self.server_log.stat().st_size
        except FileNotFoundError:
            return 0

    def log_since(self, mark: int) -> str:
        with open(self.server_log, "rb") as f:
            f.seek(mark)
            return f.read().decode("utf-8", "replace")

    # ------------------------------------------------------------ Kafka's clients

    def client(self, *args: str, timeout: float = 600) -> str:
        """Run ``BrokerClient`` (Kafka's own producer, consumer and admin client) and return its
        standard output."""
        cmd = ["java", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Dlog4j2.level=WARN",
               "-Dlog4j2.configurationFile=",
               "-cp", self.cp, "BrokerClient", args[0], self.bootstrap, *args[1:]]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=java_env(), check=False, timeout=timeout)
        if proc.returncode != 0:
            tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
            raise BrokerError(f"BrokerClient {args[0]} failed (exit {proc.returncode}):\n{tail}")
        return proc.stdout

    def workload(self, seed: int, prefix: str, records: int) -> list[dict[str, Any]]:
        out = self.client("workload", str(seed), prefix, str(records))
        return [json.loads(line) for line in out.splitlines() if line.startswith("{")]

    def create_topic(self, topic: str, partitions: int, configs: dict[str, str] | None = None) -> None:
        self.client("create", topic, str(partitions), *(f"{k}={v}" for k, v in (configs or {}).items()))

    def produce(self, topic: str, records: int, seed: int, kind: str = "idempotent", codec: str = "none") -> None:
        """``records`` random records from Kafka's own producer (``kind``: plain, idempotent, txn)."""
        self.client("produce", topic, str(records), str(seed), kind, codec)

    def consume(self, isolation: str, topics: list[str], out: Path) -> list[dict[str, Any]]:
        self.client("consume", isolation, str(out), *topics)
        with open(out) as f:
            return [json.loads(line) for line in f]

    def admin(self, topics: list[str]) -> dict[str, Any]:
        result: dict[str, Any] = json.loads(self.client("admin", *topics).strip().splitlines()[-1])
        return result


#: ERRORs a Kafka 4.1.1 broker logs with no klog in the loop (seen in the workloads of
#: test_broker_reads, which klog never writes), by the exception on the line after them.
KAFKA_TRANSIENTS = {
    # KRaft: the controller's own registration racing its activation at start-up
    "NotControllerException": "ControllerApis",
    # a transactions-v2 producer's first batches racing the verification of its partitions; the
    # client retries them
    "OutOfOrderSequenceException": "Error processing append operation",
}
#: The logger of the ERRORs a broker logs about its own speed, whatever the dir holds: the KRaft
#: controller logs every event slower than controller.performance.always.log.threshold.ms (2 s) at
#: ERROR, as replaying the metadata log on a busy 2-core machine can be ("Exceptionally slow
#: controller event handleCommit[baseOffset=0] took 2275 ms")
KAFKA_SPEED_LOGGER = "(org.apache.kafka.controller.EventPerformanceMonitor)"


def problems(log: str, prefix: str) -> list[str]:
    """The broker's complaints: errors (but Kafka's own transients and its reports of its own speed,
    above), and warnings about stray, offline, truncated, corrupt or recovered partitions, or about
    this test's topics."""
    bad = re.compile(r"stray|offline|truncat|corrupt|recover|invalid|inconsistent", re.IGNORECASE)
    lines = log.splitlines()
    out = []
    for i, line in enumerate(lines):
        m = re.match(r"\[[^\]]*\] (\w+) ", line)
        level = m.group(1) if m else ""
        cause = lines[i + 1] if i + 1 < len(lines) else ""
        if level == "ERROR" and any(exc in cause and where in line for exc, where in KAFKA_TRANSIENTS.items()):
            continue
        if level == "ERROR" and line.rstrip().endswith(KAFKA_SPEED_LOGGER):
            continue
        if level == "ERROR" or (level == "WARN" and (bad.search(line) or prefix in line)):
            out.append(line + (" -- " + cause.strip() if cause.startswith(("org.", "java.", "kafka.")) else ""))
    return out


# --- what the broker served, and waiting for it to settle ------------------------------------------


def b64(v: str | None) -> bytes | None:
    return None if v is None else base64.b64decode(v)


def consumer_row(d: dict[str, Any]) -> dict[str, Any]:
    return {"key": b64(d["k"]), "value": b64(d["v"]), "topic": d["t"], "partition": d["p"], "offset": d["o"],
            "timestamp": d["ts"], "timestampType": d["tt"],
            "headers": [(k, b64(v)) for k, v in d["h"]] or None}


def cleaned(log_dir: Path, topic: str, partition: int) -> bool:
    """The broker's cleaner has cleaned the partition up to its active segment."""
    logs = sorted((log_dir / f"{topic}-{partition}").glob("*.log"))
    if len(logs) < 2:
        return True
    active = int(logs[-1].name.split(".")[0])
    try:
        lines = (log_dir / "cleaner-offset-checkpoint").read_text().splitlines()[2:]
    except FileNotFoundError:
        return False
    for line in lines:
        t, p, o = line.rsplit(" ", 2)
        if t == topic and int(p) == partition:
            return int(o) >= active
    return False


def settle(broker: Broker, topics: list[str], timeout: float = 180) -> None:
    """Wait until the broker has nothing left to do on ``topics``: every transaction's markers
    written (LSO = high watermark), retention done (log start offsets unchanged over two checks a
    few retention intervals apart) and the compacted topics cleaned up to their active segments, or
    their cleaner checkpoint unchanged over three checks (the cleaner, polling every 200 ms, leaves a
    log whose dirty part stays under ``min.cleanable.dirty.ratio``: with no more writes it never
    cleans it)."""
    deadline = time.monotonic() + timeout
    last = None
    still = 0
    while True:
        offsets = broker.admin(topics)["offsets"]
        starts = {tp: v["earliest"][0] for tp, v in offsets.items()}
        open_txns = [tp for tp, v in offsets.items() if v["lso"][0] != v["latest"][0]]
        checkpoint = _cleaner_checkpoint(broker.log_dir)
        dirty = [tp for tp in offsets if "-compacted-" in tp
                 and not cleaned(broker.log_dir, *split_tp(tp))]
        state = (starts, checkpoint)
        still = still + 1 if state == last else 0
        if not open_txns and still >= 1 and (not dirty or still >= 3):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"the broker did not settle in {timeout:.0f} s: open transactions {open_txns}, "
                                 f"uncleaned {dirty}")
        last = state
        time.sleep(1.5)


def _cleaner_checkpoint(log_dir: Path) -> str:
    try:
        return (log_dir / "cleaner-offset-checkpoint").read_text()
    except FileNotFoundError:
        return ""


def split_tp(tp: str) -> tuple[str, int]:
    topic, _, p = tp.rpartition("-")
    return topic, int(p)
