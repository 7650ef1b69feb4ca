"""Wrong inputs through all five faces: the CLI, Spark batch, Spark stream, ``read_arrow`` and the
Spark writer (issue 30, items 5-7).

Each row of the table is one wrong input. It must give a typed error (a ``KlogError`` subclass,
by name in Spark's message), a one-line message that names what was wrong and what was expected,
the right exit code in the CLI, and nothing written: the log dir (or where it would be) is the
same, file for file, before and after. ``tests/test_wrong_input.py`` holds the "not a log dir"
cases and ``tests/test_bad_input.py`` the bad bytes; this table is about what a user types.

The tests after the table pin each fix of items 5-7 on its own (behaviour beyond the error).
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import storage_core
from storage_core.errors import KlogError, redact_uris
from storage_core.log.manager import LogManager
from storage_core.log.topic_partition import TopicPartition
from storage_core.record.records import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    RECORDS_COUNT_OFFSET,
    Record,
    build_batch,
    crc32c,
)
from storage_core.tools.cli import main as klog_main
from tests.porting.data import append

SECRET_URI = "s3://AKIAEXAMPLEKEY:SeCrEtVaLuE123@bucket/kafka-logs"
DEEP = "[" * 100_000 + "]" * 100_000
CREDS = r"credentials in a URI are refused .*AWS_ACCESS_KEY_ID"


@dataclass(frozen=True)
class Case:
    face: str  # cli | read_arrow | spark_batch | spark_stream | writer
    name: str
    args: Any  # CLI argv (with {d} for the log dir, {t} for tmp) or the options
    error: str  # the KlogError subclass
    message: str  # a regex the one-line message must match
    exit_code: int = 2  # CLI only
    extra: dict[str, Any] = field(default_factory=dict)


def _cli(name: str, args: list[str], error: str, message: str, exit_code: int = 2) -> Case:
    return Case("cli", name, args, error, message, exit_code)


CLI_CASES = [
    *[_cli(f"{cmd} with credentials in the URI", [cmd, SECRET_URI], "InvalidOptionError", CREDS)
      for cmd in ("describe", "verify", "recover", "groups", "retention", "compact")],
    _cli("dump with credentials in the URI", ["dump", SECRET_URI + "/t-0/00000000000000000000.log"],
         "InvalidOptionError", CREDS),
    _cli("snapshot from a URI with credentials", ["snapshot", SECRET_URI, "{t}/snap"], "InvalidOptionError", CREDS),
    _cli("snapshot into a URI with credentials", ["snapshot", "{d}", SECRET_URI], "InvalidOptionError", CREDS),
    _cli("export -o a URI with credentials", ["export", "{d}", "--topic", "orders", "-o", SECRET_URI + "/x.parquet"],
         "InvalidOptionError", CREDS),
    _cli("export from a URI with credentials", ["export", SECRET_URI, "--topic", "orders", "-o", "{t}/x.parquet"],
         "InvalidOptionError", CREDS),
    _cli("hdfs URI with a password", ["describe", "hdfs://alice:pw-SeCrEtVaLuE123@namenode:8020/kafka"],
         "InvalidOptionError", r"hdfs://\*\*\*@namenode:8020/kafka: credentials in a URI are refused"),
    _cli("describe of a missing dir", ["describe", "{t}/missing"], "NotALogDirError", r"no such log directory: .*missing"),
    _cli("verify of a file", ["verify", "{d}/recovery-point-offset-checkpoint"], "NotALogDirError",
         r"not a directory: .*; expected a Kafka log dir"),
    _cli("export of a topic that is not there", ["export", "{d}", "--topic", "nosuch", "-o", "{t}/x.parquet"],
         "InvalidOptionError", r"nosuch"),
    _cli("export with start offset above end offset",
         ["export", "{d}", "--topic", "orders", "--start-offset", "5", "--end-offset", "2", "-o", "{t}/x.parquet"],
         "InvalidOptionError", r"end offset 2 is before start offset 5"),
    _cli("export with a time that is not one",
         ["export", "{d}", "--topic", "orders", "--start-time", "yesterday-ish", "-o", "{t}/x.parquet"],
         "argparse", r"yesterday-ish"),
    _cli("export with an unknown codec",
         ["export", "{d}", "--topic", "orders", "--compression", "zip", "-o", "{t}/x.parquet"],
         "InvalidOptionError", r"zip"),
    _cli("describe of an illegal topic name", ["describe", "{d}", "--topic", "bad name"], "argparse",
         r"Topic name 'bad name' is illegal"),
    _cli("export of a negative partition", ["export", "{d}", "--topic", "orders", "--partition", "-1", "-o",
                                            "{t}/x.parquet"], "argparse", r"-1"),
    _cli("retention with a config that is not a number", ["retention", "{d}", "--config", "retention.ms=abc"],
         "LogConfigError", r"Invalid value abc for configuration retention.ms"),
    _cli("compact with a memory size that is not one", ["compact", "{d}", "--memory", "lots"], "argparse", r"lots"),
    _cli("dump of a missing file", ["dump", "{t}/nothing.log"], "any", r"nothing\.log"),
    _cli("describe of an empty dir", ["describe", "{t}/empty"], "NotALogDirError", r"is empty: no topic-partition"),
]

READ_CASES = [
    ("deep JSON startingOffsets", {"startingOffsets": DEEP}, "InvalidOptionError",
     r"option startingOffsets is JSON nested too deeply"),
    ("deep JSON endingOffsets", {"endingOffsets": DEEP}, "InvalidOptionError", r"option endingOffsets is JSON nested too deeply"),
    ("deep JSON assign", {"assign": DEEP}, "InvalidOptionError", r"option assign is JSON nested too deeply"),
    ("deep JSON startingOffsetsByTimestamp", {"startingOffsetsByTimestamp": DEEP}, "InvalidOptionError",
     r"nested too deeply"),
    ("startingOffsets above endingOffsets", {"startingOffsets": '{"orders": {"0": 5}}',
                                             "endingOffsets": '{"orders": {"0": 2}}'},
     "InvalidOptionError", r"startingOffsets for orders-0 is 5, above endingOffsets 2"),
    ("a URI with credentials", {"path": SECRET_URI}, "InvalidOptionError", CREDS),
    ("startingOffsets=latest in a batch", {"startingOffsets": "latest"}, "InvalidOptionError",
     r"startingOffsets=latest is not allowed for batch queries"),
    ("an unknown option", {"startingOffset": "earliest"}, "InvalidOptionError", r"did you mean 'startingOffsets'"),
    ("an illegal topic name", {"topics": "bad name"}, "InvalidOptionError", r"Topic name 'bad name' is illegal"),
    ("a wrong isolation level", {"isolationLevel": "serializable"}, "InvalidOptionError",
     r"isolationLevel='serializable'; expected read_committed or read_uncommitted"),
    ("a starting offset below -2", {"startingOffsets": '{"orders": {"0": -3}}'}, "InvalidOptionError",
     r"startingOffsets for orders-0 is -3; expected an offset >= 0"),
    ("endingOffsets=earliest", {"endingOffsets": "earliest"}, "InvalidOptionError",
     r"endingOffsets=earliest is not allowed"),
    ("minPartitions=0", {"minPartitions": "0"}, "InvalidOptionError", r"minPartitions"),
    ("failOnDataLoss not a boolean", {"failOnDataLoss": "maybe"}, "InvalidOptionError", r"failOnDataLoss"),
    ("startingTimestamp not a number", {"startingTimestamp": "yesterday"}, "InvalidOptionError",
     r"startingTimestamp='yesterday' is not a number of epoch milliseconds"),
    ("a topicPattern that does not compile", {"topicPattern": "("}, "InvalidOptionError",
     r"topicPattern='\(' is not a valid regular expression"),
    ("a negative partition in assign", {"assign": '{"orders": [-1]}'}, "InvalidOptionError", r"assign"),
    ("startingOffsets that is not JSON", {"startingOffsets": "{orders: 1}"}, "InvalidOptionError",
     r"option startingOffsets is not valid JSON"),
    ("a missing path", {"path": "{t}/missing"}, "NotALogDirError", r"no such log directory"),
    ("a topic that is not there", {"topics": "nosuch"}, "KlogError", r"nosuch"),
]

BATCH_CASES = [c for c in READ_CASES if c[0] in {
    "deep JSON startingOffsets", "startingOffsets above endingOffsets", "a URI with credentials",
    "startingOffsets=latest in a batch", "an illegal topic name", "a wrong isolation level",
    "a starting offset below -2", "a topicPattern that does not compile"}]

STREAM_CASES = [
    ("maxOffsetsPerTrigger=-1", {"maxOffsetsPerTrigger": "-1"}, "InvalidOptionError", r"maxOffsetsPerTrigger"),
    ("minOffsetsPerTrigger=0", {"minOffsetsPerTrigger": "0"}, "InvalidOptionError", r"minOffsetsPerTrigger"),
    ("maxTriggerDelay without minOffsetsPerTrigger", {"maxTriggerDelay": "5m"}, "InvalidOptionError",
     r"maxTriggerDelay only applies with minOffsetsPerTrigger"),
    ("maxTriggerDelay not a duration", {"minOffsetsPerTrigger": "5", "maxTriggerDelay": "soon"}, "InvalidOptionError",
     r"maxTriggerDelay='soon' is not a duration"),
    ("min above max per trigger", {"minOffsetsPerTrigger": "50", "maxOffsetsPerTrigger": "5"}, "InvalidOptionError",
     r"minOffsetsPerTrigger \(50\) is larger than maxOffsetsPerTrigger \(5\)"),
    ("a URI with credentials", {"path": SECRET_URI}, "InvalidOptionError", CREDS),
    ("an illegal topic name", {"topics": "bad name"}, "InvalidOptionError", r"Topic name 'bad name' is illegal"),
    ("startingOffsets not JSON", {"startingOffsets": "garbage"}, "InvalidOptionError", r"startingOffsets"),
    ("startingOffsets JSON nested too deeply", {"startingOffsets": DEEP}, "InvalidOptionError",
     r"option startingOffsets is JSON nested too deeply"),
    ("startingOffsets below -2", {"startingOffsets": '{"orders": {"0": -7}}'}, "InvalidOptionError",
     r"startingOffsets for orders-0 is -7"),
]

NOW_MS = int(time.time() * 1000)
WRITE_CASES: list[tuple[str, dict[str, str], str, str, str]] = [
    # (name, options, rows kind, error, message)
    *[(f"append to internal topic {t}", {"topic": t}, "plain", "InvalidTopicError",
       rf"Cannot append to internal topic '{t}': only Kafka's own coordinators and controller write it")
      for t in ("__consumer_offsets", "__transaction_state", "__cluster_metadata", "__share_group_state",
                "__remote_log_metadata")],
    ("internal topic in the topic column", {}, "internal-column", "InvalidTopicError",
     r"Cannot append to internal topic '__consumer_offsets'"),
    ("numPartitions=2147483647", {"topic": "t", "numPartitions": "2147483647"}, "plain", "InvalidOptionError",
     r"numPartitions='2147483647' must be in 1..10000 \(Kafka's controller creates at most 10000"),
    ("numPartitions=10001", {"topic": "t", "numPartitions": "10001"}, "plain", "InvalidOptionError",
     r"numPartitions='10001' must be in 1..10000"),
    ("numPartitions=0", {"topic": "t", "numPartitions": "0"}, "plain", "InvalidOptionError", r"must be in 1..10000"),
    ("a URI with credentials", {"topic": "t", "path": SECRET_URI}, "plain", "InvalidOptionError", CREDS),
    ("a record larger than max.message.bytes", {"topic": "t", "max.message.bytes": "1000"}, "large",
     "RecordTooLargeError", r"larger than max.message.bytes \(1000\)"),
    ("a timestamp two hours ahead", {"topic": "t"}, "future", "InvalidTimestampError",
     r"Timestamp \d+ of a record for t-0 is out of range: it should be within \[-?\d+, \d+\] .*"
     r"message.timestamp.after.max.ms=3600000"),
    ("a timestamp older than message.timestamp.before.max.ms", {"topic": "t", "message.timestamp.before.max.ms": "60000"},
     "past", "InvalidTimestampError", r"message.timestamp.before.max.ms=60000, plus"),
    ("keyed rows into a partial copy", {"topic": "connect-offsets"}, "partial-keyed", "InvalidOptionError",
     r"topic 'connect-offsets' holds only partitions 8, 14, 19 here \(a partial copy\).*numPartitions"),
    ("a partition the partial copy does not hold", {"topic": "connect-offsets"}, "partial-9", "InvalidOptionError",
     r"a row goes to partition 9 of topic 'connect-offsets', which is not in this log dir \(it holds partitions 8, 14, 19"),
    ("numPartitions below a partial copy's partitions", {"topic": "connect-offsets", "numPartitions": "10"},
     "partial-keyed", "InvalidOptionError", r"numPartitions=10, but topic 'connect-offsets' has partition 19"),
    ("no value column", {"topic": "t"}, "no-value", "InvalidOptionError", r"has no 'value' column"),
    ("an unknown write option", {"topic": "t", "numPartition": "3"}, "plain", "InvalidOptionError",
     r"did you mean 'numPartitions'"),
    ("an unknown codec", {"topic": "t", "compression": "zip"}, "plain", "KlogError", r"zip"),
    ("an illegal topic name", {"topic": "a/b"}, "plain", "InvalidTopicError", r"Topic name 'a/b' is illegal"),
]


def test_the_table_holds_at_least_60_inputs() -> None:
    n = len(CLI_CASES) + len(READ_CASES) + len(BATCH_CASES) + len(STREAM_CASES) + len(WRITE_CASES)
    assert n >= 60, n


# --- helpers ------------------------------------------------------------------------------------------

def tree(root: Path) -> dict[str, int]:
    """Every file and dir under ``root`` (dirs as -1, files by size): what "nothing written" compares."""
    if not root.exists():
        return {}
    out = {".": -1}
    for p in sorted(root.rglob("*")):
        out[str(p.relative_to(root))] = -1 if p.is_dir() else p.stat().st_size
    return out


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    d = tmp_path / "logs"
    append(d, "orders", 0, 3)
    append(d, "orders", 1, 3)
    (tmp_path / "empty").mkdir()
    return d


def _fill(s: str, d: Path, t: Path) -> str:
    return s.replace("{d}", str(d)).replace("{t}", str(t))


def one_klog_line(text: str, error: str, message: str) -> None:
    """``text`` (an error as Spark or Python shows it) holds ``error: <one line matching message>``."""
    assert "SeCrEtVaLuE123" not in text and "AKIAEXAMPLEKEY" not in text, text
    if error != "KlogError":
        assert f"{error}: " in text, text[:2000]
    line = next((ln for ln in text.splitlines() if re.search(message, ln)), None)
    assert line is not None, (message, text[:3000])


# --- the CLI ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", CLI_CASES, ids=lambda c: c.name)
def test_cli(case: Case, logs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = tree(tmp_path)
    argv = [_fill(a, logs, tmp_path) for a in case.args]
    try:
        rc = klog_main(argv)
    except SystemExit as exc:  # argparse: a usage error, exit 2
        assert case.error == "argparse", case
        rc = int(exc.code or 0)
    out, err = capsys.readouterr()
    assert rc == case.exit_code, (case.name, rc, err)
    assert "SeCrEtVaLuE123" not in out + err and "AKIAEXAMPLEKEY" not in out + err
    assert "Traceback" not in err and "internal error" not in err, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    last = lines[-1]
    assert last.startswith(("klog: error: ", "klog ")) or "error:" in last, err
    assert re.search(case.message, last), (case.message, err)
    if case.error != "argparse":
        assert len(lines) == 1, err
    assert tree(tmp_path) == before, case.name


def test_cli_internal_errors_are_redacted(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Even a bug's message (exit 3) shows no credentials of a URI in it."""
    import storage_core.tools.cli as cli

    def boom(_args: object) -> int:
        raise RuntimeError(f"could not open {SECRET_URI}/x")

    parser = cli.build_parser()
    args = parser.parse_args(["describe", "/x"])
    monkeypatch.setattr(cli, "build_parser", lambda: _Fixed(args, boom))
    assert cli.main(["describe", "/x"]) == 3
    err = capsys.readouterr().err
    assert "s3://***@bucket/kafka-logs/x" in err and "SeCrEtVaLuE123" not in err


class _Fixed:
    def __init__(self, args: Any, func: Any) -> None:
        args.func = func
        self.args = args

    def parse_args(self, argv: Any) -> Any:
        return self.args


def test_redact_uris() -> None:
    assert redact_uris(f"at {SECRET_URI} and gs://tok@b/x, s3://bucket/x") == \
        "at s3://***@bucket/kafka-logs and gs://***@b/x, s3://bucket/x"
    assert "SeCrEtVaLuE123" not in str(KlogError(f"bad {SECRET_URI}", path=SECRET_URI + "/y"))
    kept = "abfs://container@account.dfs.core.windows.net/kafka and hdfs://alice@nn:8020/x"
    assert redact_uris(kept) == kept  # a container and a user name are no secrets
    assert redact_uris("abfs://c:key@a.dfs.core.windows.net/") == "abfs://***@a.dfs.core.windows.net/"


def test_a_container_or_user_name_in_a_uri_is_not_refused() -> None:
    from storage_core.fs import refuse_credentials

    refuse_credentials("abfs://container@account.dfs.core.windows.net/kafka")
    refuse_credentials("hdfs://alice@namenode:8020/kafka")
    with pytest.raises(KlogError, match="credentials in a URI are refused"):
        refuse_credentials("s3://AKIAEXAMPLEKEY@bucket/kafka")


# --- read_arrow ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", READ_CASES, ids=lambda c: c[0])
def test_read_arrow(case: tuple[str, dict[str, str], str, str], logs: Path, tmp_path: Path) -> None:
    name, options, error, message = case
    opts = {k: _fill(v, logs, tmp_path) for k, v in options.items()}
    path = opts.pop("path", str(logs))
    before = tree(tmp_path)
    with pytest.raises(KlogError) as info:
        storage_core.read_arrow(path, **opts).read_all()
    assert type(info.value).__name__ == error or error == "KlogError", (name, info.value)
    text = str(info.value)
    assert "\n" not in text
    one_klog_line(f"{type(info.value).__name__}: {text}", error, message)
    assert tree(tmp_path) == before


# --- Spark batch and stream -----------------------------------------------------------------------

@pytest.mark.spark
def test_spark_batch_and_stream(spark, logs: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    before = tree(tmp_path)
    for name, options, error, message in BATCH_CASES:
        opts = {k: _fill(v, logs, tmp_path) for k, v in options.items()}
        path = opts.pop("path", str(logs))
        with pytest.raises(Exception) as info:  # noqa: PT011 - Spark's own exception types
            spark.read.format("klog").options(**opts).load(path).count()
        one_klog_line(str(info.value), error, message)
        assert tree(tmp_path) == before, name
    for name, options, error, message in STREAM_CASES:
        opts = {k: _fill(v, logs, tmp_path) for k, v in options.items()}
        path = opts.pop("path", str(logs))
        with pytest.raises(Exception) as info:  # noqa: PT011
            spark.readStream.format("klog").options(**opts).load(path)  # at load(), not once the query runs
        one_klog_line(str(info.value), error, message)
        assert tree(tmp_path) == before, name


@pytest.mark.spark
def test_batch_only_options_fail_a_stream_when_the_query_starts(spark, logs: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    for options, message in (({"endingOffsets": "latest"}, r"option endingOffsets is not valid for streaming"),):
        with pytest.raises(Exception) as info:  # noqa: PT011
            q = (spark.readStream.format("klog").options(**options).load(str(logs))
                 .writeStream.format("noop").start())
            try:
                q.processAllAvailable()
            finally:
                q.stop()
        one_klog_line(str(info.value), "InvalidOptionError", message)


# --- the writer ---------------------------------------------------------------------------------------

def _partial_copy(root: Path) -> None:
    """A log dir from one broker of a cluster: partitions 8, 14 and 19 of connect-offsets, no KRaft metadata."""
    for p in (8, 14, 19):
        append(root, "connect-offsets", p, 2)


def _frame(spark, kind: str):  # type: ignore[no-untyped-def]
    if kind == "plain":
        return spark.createDataFrame([("k", "v")], "key string, value string")
    if kind == "internal-column":
        return spark.createDataFrame([("__consumer_offsets", "v")], "topic string, value string")
    if kind == "large":
        return spark.createDataFrame([("k", "x" * 5000)], "key string, value string")
    if kind in ("future", "past"):
        ms = NOW_MS + 2 * 3600_000 if kind == "future" else NOW_MS - 3600_000
        return spark.sql(f"SELECT 'k' AS key, 'v' AS value, timestamp_millis({ms}) AS timestamp")
    if kind == "partial-keyed":
        return spark.createDataFrame([(f"k{i}", "v") for i in range(20)], "key string, value string")
    if kind == "partial-9":
        return spark.createDataFrame([(9, "v")], "partition int, value string")
    if kind == "no-value":
        return spark.createDataFrame([("k",)], "key string")
    raise AssertionError(kind)


@pytest.mark.spark
def test_writer(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    failures = []
    for i, (name, options, kind, error, message) in enumerate(WRITE_CASES):
        case_dir = tmp_path / f"case{i}"
        case_dir.mkdir()
        target = case_dir / "logs"  # a new log dir: a failed write must not even create it
        if kind.startswith("partial"):
            _partial_copy(target)
        before = tree(case_dir)
        opts = {"path": str(target), **options}
        try:
            _frame(spark, kind).write.format("klog").options(**opts).mode("append").save()
        except Exception as exc:  # noqa: BLE001 - Spark's own exception types
            try:
                one_klog_line(str(exc), error, message)
                assert tree(case_dir) == before, tree(case_dir)
            except AssertionError as failed:
                failures.append((name, str(failed)[:1500]))
        else:
            failures.append((name, "no error"))
    assert not failures, failures


# --- each fix on its own --------------------------------------------------------------------------

def _klog(*args: str, env_limit: int | None = None, hard_limit: bool = False) -> subprocess.CompletedProcess[str]:
    """The CLI in a child process whose soft limit on open files is ``env_limit`` (and the hard one
    too with ``hard_limit``)."""
    code = "import sys\n"
    if env_limit is not None:
        code += ("import resource\nsoft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
                 f"resource.setrlimit(resource.RLIMIT_NOFILE, ({env_limit}, {env_limit} if {hard_limit} else hard))\n")
    code += "from storage_core.tools.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=600)


def _many_partitions(root: Path, n: int) -> None:
    append(root, "t", 0, 5)
    for p in range(1, n):
        shutil.copytree(root / "t-0", root / f"t-{p}")
    (root / "klog-topic-configs.json").write_text(json.dumps({"t": {"cleanup.policy": "compact"}}))


def test_recover_compact_and_retention_hold_the_files_of_one_partition_at_a_time(tmp_path: Path) -> None:
    """2,000 partitions under a limit of 256 open files: a writable log holds about 4, so holding
    them all at once failed with EMFILE half-way. The reading commands hold few files too."""
    root = tmp_path / "logs"
    n = 2000
    _many_partitions(root, n)
    for cmd in (["recover", str(root), "--quiet"], ["compact", str(root), "--roll", "--quiet", "--json"],
                ["retention", str(root), "--config", "retention.bytes=1000000000", "--quiet"],
                ["verify", str(root), "--quiet"], ["describe", str(root), "--json"],
                ["export", str(root), "--topic", "t", "-o", str(tmp_path / "t.parquet"), "--quiet"]):
        res = _klog(*cmd, env_limit=256)
        assert res.returncode == 0, (cmd, res.stderr[-2000:])
    assert storage_core.read_arrow(root).read_all().num_rows == n * 5
    assert pq.read_metadata(tmp_path / "t.parquet").num_rows == n * 5


def test_a_limit_of_open_files_below_klogs_minimum_is_raised_or_named(tmp_path: Path) -> None:
    """Below MIN_OPEN_FILES, the soft limit is raised to it where the hard limit allows (as the JVM
    does for a broker); where it does not, every command stops before any work with exit 2, naming
    both limits."""
    from storage_core.log.open_files import MIN_OPEN_FILES

    root = tmp_path / "logs"
    _many_partitions(root, 3)
    assert _klog("recover", str(root), "--quiet", env_limit=MIN_OPEN_FILES // 4).returncode == 0
    before = tree(root)
    for cmd in (["recover", str(root)], ["describe", str(root)]):
        res = _klog(*cmd, env_limit=MIN_OPEN_FILES // 4, hard_limit=True)
        assert res.returncode == 2, res
        assert res.stderr.startswith(f"klog: error: the OS allows this process {MIN_OPEN_FILES // 4} open files "
                                     f"(ulimit -n; hard limit {MIN_OPEN_FILES // 4}), and klog needs at least "
                                     f"{MIN_OPEN_FILES}"), res.stderr
        assert tree(root) == before


def test_a_failed_writable_open_leaves_the_dir_as_it_found_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    import storage_core.log.manager as manager

    root = tmp_path / "logs"
    _many_partitions(root, 8)
    before = tree(root)
    real = manager.Log
    opened = []

    def failing(*args: Any, **kwargs: Any) -> Any:
        if len(opened) == 5:
            raise OSError(errno.EMFILE, "Too many open files")
        opened.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(manager, "Log", failing)
    with pytest.raises(KlogError, match="opening the log dirs for writing failed"):
        LogManager([root], writable=True)
    assert tree(root) == before  # no preallocated index, the clean-shutdown marker still there
    monkeypatch.undo()
    assert _klog("verify", str(root), "--quiet").returncode == 0


def test_verify_warns_of_a_preallocated_index_and_reports_an_impossible_record_count(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    append(root, "orders", 0, 3)
    pd = root / "orders-0"
    (pd / "00000000000000000003.log").write_bytes(b"")  # the empty active segment a crash leaves
    (pd / "00000000000000000003.index").write_bytes(bytes(10 << 20))
    (pd / "00000000000000000003.timeindex").write_bytes(bytes(10 << 20))
    res = _klog("verify", str(root))
    assert res.returncode == 0, res.stdout
    assert "00000000000000000003.index: preallocated (10485760 bytes) for an empty active segment" in res.stderr

    bad = tmp_path / "bad"
    with LogManager([_mkdir(bad)], writable=True) as m:
        m.create_log(TopicPartition("c", 0)).append(build_batch([Record(o, 1_000 + o, b"k", b"v", ()) for o in range(3)]),
                                                     now_ms=2_000)
    f = bad / "c-0" / "00000000000000000000.log"
    b = bytearray(f.read_bytes())
    struct.pack_into(">i", b, RECORDS_COUNT_OFFSET, 2**31 - 1)
    size = struct.unpack_from(">i", b, 8)[0] + 12
    struct.pack_into(">I", b, CRC_OFFSET, crc32c(bytes(b[ATTRIBUTES_OFFSET:size])))  # a valid CRC
    f.write_bytes(bytes(b))
    with pytest.raises(KlogError):
        storage_core.read_arrow(bad).read_all()  # every read refuses it ...
    res = _klog("verify", str(bad))
    assert res.returncode == 1, res.stdout  # ... and verify says so
    assert "declares 2147483647 records; expected 0..3" in res.stderr


def _mkdir(p: Path) -> Path:
    p.mkdir(parents=True, exist_ok=True)
    return p


def test_describe_shows_far_future_timestamps(tmp_path: Path) -> None:
    root = _mkdir(tmp_path / "logs")
    with LogManager([root], writable=True) as m:  # year 10000: a timestamp the writer of a broker accepts
        m.create_log(TopicPartition("f", 0)).append(build_batch([Record(0, 253_402_300_800_005, b"k", b"v", ())]),
                                                    now_ms=0)
    res = _klog("describe", str(root))
    assert res.returncode == 0, res.stderr
    assert "253402300800005ms" in res.stdout
    assert storage_core.describe(root).num_rows == 1


def test_describe_lists_the_dirs_it_skipped_and_why(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "logs"
    append(root, "t", 0, 3)
    for name in ("t-99999999999", "bad name-0", "t-01", b"caf\xe9-0".decode("utf-8", "surrogateescape")):
        (root / name).mkdir()
    res = _klog("describe", str(root))
    assert res.returncode == 0, res.stderr
    assert "warning: skipped " + str(root / "t-99999999999") + ": the partition 99999999999 is larger than " \
           "2147483647" in res.stderr
    assert "bad name-0: Topic name 'bad name' is illegal" in res.stderr
    assert "t-01: the partition '01' has a leading zero, which no broker writes (Kafka names partition 1 t-1)" \
           in res.stderr
    assert "caf\\xe9-0: the name is not UTF-8" in res.stderr
    res = _klog("describe", str(root), "--json")
    assert res.returncode == 0 and len(json.loads(res.stdout)) == 1
    assert res.stderr.count("warning: skipped ") == 4
    with caplog.at_level(logging.WARNING, logger="klog"):
        table = storage_core.describe(root)
    assert table.num_rows == 1 and table["partition"].to_pylist() == [0]  # t-01 is not read as partition 1
    skipped = json.loads(table.schema.metadata[b"klog.skipped"])
    assert [Path(p).name for p, _ in skipped] == ["bad name-0", "caf\\xe9-0", "t-01", "t-99999999999"]
    assert sum("describe: skipped" in r.getMessage() for r in caplog.records) == 4


def test_a_stream_says_where_latest_starts(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("pyspark")
    from spark_logsource.options import parse_stream_options
    from spark_logsource.streaming import KlogStreamReader

    root = tmp_path / "logs"
    append(root, "orders", 0, 3)
    append(root, "orders", 1, 4)
    with caplog.at_level(logging.INFO, logger="klog"):
        start = KlogStreamReader(parse_stream_options({"path": str(root)})).initialOffset()
    assert start == {"orders": {"0": 3, "1": 4}}
    lines = [r.getMessage() for r in caplog.records if "startingOffsets=latest" in r.getMessage()]
    assert lines == ["klog stream: startingOffsets=latest (the default): starting at the end of 2 partition(s), after "
                     "the 7 records already there, which this query will not read; set startingOffsets=earliest to "
                     "read them"]


def test_start_above_end_is_refused_in_the_one_parser() -> None:
    from storage_core.errors import InvalidOptionError
    from storage_core.read.options import parse_read_options

    ok = parse_read_options({"path": "/x", "startingOffsets": '{"t": {"0": 2, "1": 5}}',
                             "endingOffsets": '{"t": {"0": 2, "1": -1}}'})  # equal, or to latest: fine
    assert ok.starting.offsets == {"t": {0: 2, 1: 5}}
    with pytest.raises(InvalidOptionError, match=r"startingOffsets for t-1 is 5, above endingOffsets 4"):
        parse_read_options({"path": "/x", "startingOffsets": '{"t": {"0": 2, "1": 5}}',
                            "endingOffsets": '{"t": {"0": 2, "1": 4}}'})


def test_a_stream_offset_that_is_not_json_is_typed() -> None:
    pytest.importorskip("pyspark")
    from spark_logsource.streaming import offsets_from_json
    from storage_core.errors import InvalidOptionError

    for bad in (DEEP, "{orders", '"x"'):
        with pytest.raises(InvalidOptionError, match="not a klog/Kafka stream offset"):
            offsets_from_json(bad)


def test_internal_topics_are_refused_before_any_task() -> None:
    pytest.importorskip("pyspark")
    from spark_logsource.writer import parse_write_options
    from storage_core.errors import InvalidTopicError

    for t in ("__consumer_offsets", "__transaction_state", "__cluster_metadata", "__share_group_state",
              "__remote_log_metadata"):
        with pytest.raises(InvalidTopicError, match=f"Cannot append to internal topic '{t}'"):
            parse_write_options({"path": "/x", "topic": t})
    assert parse_write_options({"path": "/x", "topic": "_consumer_offsets"}).topic == "_consumer_offsets"


@pytest.mark.spark
def test_partial_copy_writes_by_partition_or_by_the_stated_count(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from storage_core.record.columnar import murmur2_partitions

    root = tmp_path / "logs"
    _partial_copy(root)
    spark.createDataFrame([(8, "to-8"), (19, "to-19")], "partition int, value string") \
        .write.format("klog").option("topic", "connect-offsets").mode("append").save(str(root))
    keys = [f"k{i}" for i in range(400)]
    where = murmur2_partitions(pa.array([k.encode() for k in keys], pa.binary()), 20).tolist()
    held = [k for k, p in zip(keys, where, strict=True) if p in (8, 14, 19)][:6]
    spark.createDataFrame([(k, "keyed") for k in held], "key string, value string") \
        .write.format("klog").option("topic", "connect-offsets").option("numPartitions", "20") \
        .mode("append").save(str(root))
    rows = storage_core.read_arrow(root).read_all().to_pylist()
    got = sorted((r["partition"], r["value"]) for r in rows if r["value"] in (b"to-8", b"to-19", b"keyed"))
    want = sorted([(8, b"to-8"), (19, b"to-19")] + [(where[keys.index(k)], b"keyed") for k in held])
    assert got == want
    assert sorted(p.name for p in root.iterdir() if p.is_dir()) == ["connect-offsets-14", "connect-offsets-19",
                                                                     "connect-offsets-8"]


BROKER_COPY = "rjmfernandes+flink-on-prem/43d3daa/data"  # one broker's dir: connect-offsets 8, 14, 19 of 25


@pytest.mark.spark
def test_partial_copy_with_kraft_metadata_routes_by_the_topics_real_count(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A real broker's dir holds partitions 8, 14 and 19 of connect-offsets, whose KRaft metadata
    says 25: keys route by murmur2 % 25 (not % 3, the dirs), partition=8 is written, and a key whose
    partition is elsewhere in the cluster is refused, naming it."""
    import shared_fixtures as sf

    from storage_core.record.columnar import murmur2_partitions

    src = sf.KAFKA_FIXTURES / BROKER_COPY
    if not src.is_dir():
        pytest.skip(sf.MISSING_REASON)
    root = tmp_path / "data"
    root.mkdir()
    for name in ("__cluster_metadata-0", "connect-offsets-8", "connect-offsets-14", "connect-offsets-19"):
        shutil.copytree(src / name, root / name)
    for name in ("meta.properties", "recovery-point-offset-checkpoint", "log-start-offset-checkpoint"):
        if (src / name).exists():
            shutil.copy(src / name, root / name)
    before = {p: r.num_rows for p, r in ((p, storage_core.read_arrow(root, assign=json.dumps({"connect-offsets": [p]}))
                                          .read_all()) for p in (8, 14, 19))}
    keys = [f"key-{i}" for i in range(500)]
    where = murmur2_partitions(pa.array([k.encode() for k in keys], pa.binary()), 25).tolist()
    held = [k for k, p in zip(keys, where, strict=True) if p in (8, 14, 19)][:5]
    elsewhere = next(k for k, p in zip(keys, where, strict=True) if p not in (8, 14, 19))
    w = spark.createDataFrame([(k, "keyed") for k in held], "key string, value string")
    w.write.format("klog").option("topic", "connect-offsets").mode("append").save(str(root))
    spark.createDataFrame([(8, "to-8")], "partition int, value string") \
        .write.format("klog").option("topic", "connect-offsets").mode("append").save(str(root))
    snapshot = tree(root)
    with pytest.raises(Exception) as info:  # noqa: PT011
        spark.createDataFrame([(elsewhere, "x")], "key string, value string") \
            .write.format("klog").option("topic", "connect-offsets").mode("append").save(str(root))
    p = where[keys.index(elsewhere)]
    one_klog_line(str(info.value), "InvalidOptionError",
                  rf"a row goes to partition {p} of topic 'connect-offsets', which is not in this log dir")
    assert tree(root) == snapshot
    rows = storage_core.read_arrow(root, topics="connect-offsets").read_all().to_pylist()
    new = sorted((r["partition"], r["value"]) for r in rows if r["value"] in (b"keyed", b"to-8"))
    assert new == sorted([(where[keys.index(k)], b"keyed") for k in held] + [(8, b"to-8")])
    assert sum(1 for r in rows) == sum(before.values()) + len(held) + 1


@pytest.mark.spark
@pytest.mark.fault
def test_a_write_that_fills_the_disk_leaves_no_new_dir(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A new topic's write into a 1 MiB file system: the job fails with StorageError and leaves
    neither the topic's partition dirs nor the log dir it created."""
    mnt = tmp_path / "fs"
    mnt.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a size-limited tmpfs here ({res.stderr.strip() or res.returncode})")
    try:
        df = spark.range(3000).selectExpr("CAST(id AS STRING) AS key", "repeat('x', 1000) AS value")
        with pytest.raises(Exception) as info:  # noqa: PT011
            df.write.format("klog").option("topic", "t").option("numPartitions", "3").mode("append") \
                .save(str(mnt / "logs"))
        one_klog_line(str(info.value), "StorageError", r"the file system is full")
        assert tree(mnt) == {".": -1}, tree(mnt)
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)
