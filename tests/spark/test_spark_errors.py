"""What a Spark user sees first when klog refuses: klog's sentence on the first line of the exception
(AnalysisException, StreamingQueryException, PythonException) and of the driver log, not
``Traceback (most recent call last):`` (spark_logsource/errors.py)."""

from __future__ import annotations

import inspect
import json
import os
import re
import time
from pathlib import Path

import pytest

from storage_core.errors import InvalidOptionError, KlogError

pytestmark = pytest.mark.spark
pytest.importorskip("pyspark")

from pyspark.sql import functions as F  # noqa: E402

from benchmarks.producer import produce  # noqa: E402
from spark_logsource import errors as spark_errors  # noqa: E402
from spark_logsource import source, streaming, writer  # noqa: E402

PLAN = "[PYTHON_DATA_SOURCE_ERROR] Failed to "
STREAM = r"\[STREAM_FAILED\] Query \[id = [-0-9a-f]+, runId = [-0-9a-f]+\] terminated with exception: "
WORKER = "An exception was thrown from the Python worker:"


def first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0]


@pytest.fixture(scope="module")
def src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Topic t: partitions 0 and 1, ten records each (offsets 0..9)."""
    d = tmp_path_factory.mktemp("errors") / "in"
    d.mkdir()
    produce(str(d), "t", partitions=2, records=20, rate=0, per_append=20)
    return d


def _read(spark, path: Path, **options: str):  # type: ignore[no-untyped-def]
    r = spark.read.format("klog")
    for k, v in options.items():
        r = r.option(k, v)
    return r.load(str(path))


def _stream(spark, path: Path, name: str, **options: str):  # type: ignore[no-untyped-def]
    r = spark.readStream.format("klog")
    for k, v in options.items():
        r = r.option(k, v)
    return r.load(str(path)).writeStream.format("memory").queryName(name).trigger(availableNow=True).start()


# --- batch read -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("options", "line"), [
    ({"startingoffset": "earliest"},
     "create Python data source instance: InvalidOptionError: unknown option 'startingoffset' "
     "(did you mean 'startingOffsets'?) for format klog; known options: "),
    ({"startingOffsets": "{t: 0"},  # checked by schema() at load(): a stream's and a batch read's shared syntax
     "create Python data source instance: InvalidOptionError: option startingOffsets is not valid JSON "
     "(Expecting property name enclosed in double quotes at character 1): '{t: 0'; expected e.g. "
     '{"topic": {"0": 23, "1": -2}}'),
    ({"startingOffsets": "latest"},
     "initialize Python data source reader: InvalidOptionError: startingOffsets=latest is not allowed for batch "
     "queries (it would read nothing); use earliest, a timestamp, or JSON offsets"),
    ({"startingTimestamp": "2026-01-01T00:00:00Z"},
     "create Python data source instance: InvalidOptionError: option startingTimestamp='2026-01-01T00:00:00Z' "
     "is not a number of epoch milliseconds; 2026-01-01T00:00:00Z is 1767225600000"),
    ({"startingOffsets": json.dumps({"t": {"0": 500, "1": 0}})},
     "generate Python data source read partitions: OffsetOutOfRangeError: t-0: starting offset 500 is past the "
     "end of the log (10); expected an offset in [0, 10]"),
], ids=["unknown-option", "malformed-json", "latest", "iso-timestamp", "offset-past-end"])
def test_batch_read_option_errors_lead_with_klogs_sentence(spark, src: Path, options: dict[str, str],  # type: ignore[no-untyped-def]
                                                           line: str) -> None:
    with pytest.raises(Exception) as info:
        _read(spark, src, **options).count()
    assert type(info.value).__name__ == "AnalysisException"
    assert first_line(info.value).startswith(PLAN + line), first_line(info.value)
    assert "Traceback" not in str(info.value)


def test_batch_read_of_a_missing_path(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(Exception) as info:
        _read(spark, tmp_path / "nope").count()
    assert first_line(info.value) == (f"{PLAN}generate Python data source read partitions: NotALogDirError: no such log "
                                      f"directory: {tmp_path / 'nope'}")


def _segments_gone(spark, tmp_path: Path):  # type: ignore[no-untyped-def]
    """A loaded DataFrame whose planned segments retention deleted since: only its tasks find out."""
    from storage_core.log.log import Log

    d = tmp_path / "gone"
    spark.range(300).select(F.col("id").cast("string").alias("value")).coalesce(1).write.format("klog") \
        .mode("append").option("topic", "g").option("segment.bytes", "2000").option("maxBatchBytes", "200").save(str(d))
    df = spark.read.format("klog").load(str(d))
    assert df.count() == 300  # plans the read (kept with the DataFrame)
    with Log(d / "g-0", writable=True) as lg:
        lg.log_start_offset = lg.segments[2].base_offset
        lg.delete_old_segments()
        lg.remove_deleted_files(now_ms=2**62)
    return df, d / "g-0" / "00000000000000000000.log"


def test_executor_read_error_is_the_line_after_pysparks_own(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A task's error: PySpark's PythonException always starts with its own line; klog's is the next."""
    df, seg = _segments_gone(spark, tmp_path)
    with pytest.raises(Exception) as info:
        df.count()
    lines = str(info.value).splitlines()
    assert type(info.value).__name__ == "PythonException"
    assert lines[0] == WORKER
    assert lines[1] == (f"SegmentGoneError: segment {seg.name} was deleted or replaced (retention or compaction by a "
                        "writer) since the log was opened or the read was planned; reopen the log (rerun the query) "
                        f"to read its current segments [file {seg}]")
    assert "Traceback" not in str(info.value)


# --- readStream -----------------------------------------------------------------------------------

def test_stream_unknown_option_fails_at_load(spark, src: Path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(Exception) as info:
        spark.readStream.format("klog").option("startingoffset", "earliest").load(str(src))
    assert first_line(info.value).startswith(
        f"{PLAN}create Python data source instance: InvalidOptionError: unknown option 'startingoffset' (did you "
        "mean 'startingOffsets'?)")


@pytest.mark.parametrize(("options", "line"), [
    ({"startingOffsets": "{t: 0"}, "InvalidOptionError: option startingOffsets is not valid JSON (Expecting "
                                   "property name enclosed in double quotes at character 1)"),
    ({"startingTimestamp": "2026-01-01T00:00:00Z"},
     "InvalidOptionError: option startingTimestamp='2026-01-01T00:00:00Z' is not a number of epoch milliseconds"),
], ids=["malformed-json", "iso-timestamp"])
def test_stream_start_value_errors_fail_at_load(spark, src: Path, options: dict[str, str],  # type: ignore[no-untyped-def]
                                                line: str) -> None:
    with pytest.raises(Exception) as info:
        spark.readStream.format("klog").options(**options).load(str(src))
    assert first_line(info.value).startswith(f"{PLAN}create Python data source instance: {line}"), first_line(info.value)


@pytest.mark.parametrize(("options", "line"), [
    ({"startingOffsets": json.dumps({"t": {"7": 0}})},
     "InvalidOptionError: option startingOffsets names partitions that do not exist: t-7"),
    ({"endingOffsets": "latest"}, "InvalidOptionError: option endingOffsets is not valid for streaming queries"),
], ids=["missing-partition", "batch-only-option"])
def test_stream_start_errors_lead_with_klogs_sentence(spark, src: Path, options: dict[str, str],  # type: ignore[no-untyped-def]
                                                      line: str) -> None:
    q = _stream(spark, src, "start_" + re.sub(r"\W", "", json.dumps(options))[:40], **options)
    try:
        with pytest.raises(Exception) as info:
            q.awaitTermination(60)
    finally:
        q.stop()
    assert type(info.value).__name__ == "StreamingQueryException"
    head = first_line(info.value)
    assert re.match(STREAM + r"\[PYTHON_STREAMING_DATA_SOURCE_RUNTIME_ERROR\] Failed when Python streaming data "
                    r"source perform \w+: " + re.escape(line), head), head
    assert "Traceback" not in str(info.value)


def test_error_inside_a_running_stream(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Retention deletes offsets a running query has not read yet (failOnDataLoss=true)."""
    from storage_core.log.log import Log

    d = tmp_path / "in"
    spark.range(1000).select(F.col("id").cast("string").alias("value")).coalesce(1).write.format("klog") \
        .mode("append").option("topic", "r").option("segment.bytes", "2000").option("maxBatchBytes", "200").save(str(d))
    q = (spark.readStream.format("klog").option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "20")
         .load(str(d)).writeStream.format("memory").queryName("running_retention")
         .trigger(processingTime="3 seconds").start())
    try:
        deadline = time.monotonic() + 60
        while not (q.lastProgress and q.lastProgress["numInputRows"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        with Log(d / "r-0", writable=True) as lg:  # between two triggers
            lg.log_start_offset = lg.segments[-2].base_offset
            lg.delete_old_segments()
            lg.remove_deleted_files(now_ms=2**62)
            log_start = lg.log_start_offset
        with pytest.raises(Exception) as info:
            q.awaitTermination(60)
    finally:
        q.stop()
    head = first_line(info.value)
    assert re.match(STREAM + r"\[PYTHON_STREAMING_DATA_SOURCE_RUNTIME_ERROR\] Failed when Python streaming data "
                    rf"source perform \w+: OffsetOutOfRangeError: klog stream: offsets \d+\.\.{log_start - 1} of r-0 "
                    "were deleted", head), head


# --- write ----------------------------------------------------------------------------------------

def test_write_unknown_option_suggests_the_name(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    df = spark.range(3).select(F.col("id").cast("string").alias("value"))
    with pytest.raises(Exception) as info:
        df.write.format("klog").option("topic", "w").option("numPartition", "3").mode("append").save(str(tmp_path))
    assert first_line(info.value).startswith(
        f"{PLAN}initialize Python data source writer: InvalidOptionError: unknown write option 'numpartition' "
        "(did you mean 'numPartitions'?) for format klog; known write options: ")


def test_write_without_a_value_column(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(Exception) as info:
        spark.range(3).write.format("klog").option("topic", "w").mode("append").save(str(tmp_path))
    assert first_line(info.value) == (f"{PLAN}initialize Python data source writer: InvalidOptionError: the "
                                      "DataFrame has no 'value' column (string or binary), which a write needs; it "
                                      "has id")


def test_write_to_a_locked_log_dir(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from storage_core.log.lock import LogDirLock

    df = spark.range(3).select(F.col("id").cast("string").alias("value"))
    df.write.format("klog").option("topic", "w").mode("append").save(str(tmp_path))
    with LogDirLock(tmp_path, 0), pytest.raises(Exception) as info:
        df.write.format("klog").option("topic", "w").option("lockTimeoutMs", "1").mode("append").save(str(tmp_path))
    # refused on the driver before any task stages (a klog writer's lock is waited for lockTimeoutMs)
    assert first_line(info.value) == (
        f"{PLAN}initialize Python data source writer: LogDirLockedError: log dir {tmp_path} stayed locked by process "
        f"{os.getpid()} (a Kafka broker or another klog writer) for 0.001 s; nothing was written")
    assert not list(tmp_path.rglob(".klog-staging-*"))


def test_write_stream_without_a_value_column(spark, src: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    q = (spark.readStream.format("klog").option("startingOffsets", "earliest").load(str(src)).select("key")
         .writeStream.format("klog").option("topic", "u").option("checkpointLocation", str(tmp_path / "ck"))
         .trigger(availableNow=True).start(str(tmp_path / "out")))
    try:
        with pytest.raises(Exception) as info:
            q.awaitTermination(60)
    finally:
        q.stop()
    head = first_line(info.value)
    assert re.match(STREAM + re.escape(f"{PLAN}initialize Python data source writer: InvalidOptionError: the "
                                       "DataFrame has no 'value' column"), head), head


# --- what keeps its traceback ---------------------------------------------------------------------

def test_a_bug_keeps_its_traceback_and_the_worker_env_does_not_leak(spark, src: Path,  # type: ignore[no-untyped-def]
                                                                    tmp_path: Path) -> None:
    class Buggy(source.KlogDataSource):  # a local class: pickled by value to the worker
        @classmethod
        def name(cls) -> str:
            return "klog_buggy"

        @spark_errors.spark_entry
        def schema(self) -> str:
            raise RuntimeError("a genuine bug")

    spark.dataSource.register(Buggy)
    with pytest.raises(Exception) as info:
        spark.read.format("klog_buggy").load(str(src))
    text = str(info.value)
    assert first_line(info.value) == f"{PLAN}create Python data source instance: Traceback (most recent call last):"
    assert "RuntimeError: a genuine bug" in text and 'line' in text

    # a task that failed with klog's one-line error does not shorten a later UDF's traceback
    with pytest.raises(Exception, match="SegmentGoneError: segment"):
        _segments_gone(spark, tmp_path)[0].count()

    @F.udf("string")  # type: ignore[misc]
    def boom(v):  # type: ignore[no-untyped-def]
        raise RuntimeError("user bug")

    for _ in range(2):  # the second run lands on a reused worker if there is one
        with pytest.raises(Exception) as info:
            _read(spark, src).select(boom("value")).collect()
        assert "Traceback (most recent call last)" in str(info.value) and "RuntimeError: user bug" in str(info.value)


# --- without Spark --------------------------------------------------------------------------------

def test_outside_a_spark_worker_the_klog_error_is_unchanged() -> None:
    ds = source.KlogDataSource({"path": "/x", "startingoffset": "earliest"})
    with pytest.raises(InvalidOptionError) as info:
        ds.schema()
    assert type(info.value) is InvalidOptionError
    assert info.value.__traceback__ is not None
    with pytest.raises(InvalidOptionError):
        ds.streamReader(None)  # type: ignore[arg-type]


def test_in_a_spark_worker_the_error_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import traceback

    monkeypatch.setattr(spark_errors, "in_spark_worker", lambda: True)
    monkeypatch.delenv("SPARK_HIDE_TRACEBACK", raising=False)
    monkeypatch.delenv("KLOG_SPARK_TRACEBACK", raising=False)
    ds = source.KlogDataSource({"path": "/x", "startingoffset": "earliest"})
    with pytest.raises(InvalidOptionError) as info:
        ds.schema()
    assert os.environ["SPARK_HIDE_TRACEBACK"] == "1"
    err = info.value
    assert isinstance(err, KlogError) and err.detail.startswith("unknown option 'startingoffset'")
    assert err.__cause__ is None and err.__suppress_context__
    assert "".join(traceback.format_exception_only(type(err), err)).startswith(
        "InvalidOptionError: unknown option 'startingoffset' (did you mean 'startingOffsets'?)")
    # the stream runner's streamReader() must not raise (PySpark calls reader.stop() in a finally)
    reader = ds.streamReader(None)  # type: ignore[arg-type]
    assert isinstance(reader, spark_errors.FailingStreamReader)
    reader.stop()
    with pytest.raises(InvalidOptionError, match="unknown option 'startingoffset'"):
        reader.initialOffset()
    monkeypatch.setenv("KLOG_SPARK_TRACEBACK", "1")
    with pytest.raises(InvalidOptionError) as info:
        ds.schema()
    assert type(info.value) is InvalidOptionError  # the switch to debug klog itself


def test_iterators_are_guarded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spark_errors, "in_spark_worker", lambda: True)
    monkeypatch.delenv("KLOG_SPARK_TRACEBACK", raising=False)
    monkeypatch.setenv("SPARK_HIDE_TRACEBACK", "")

    @spark_errors.spark_entry
    def read() -> object:
        yield 1
        raise InvalidOptionError("late")

    it = iter(read())  # type: ignore[call-overload]
    assert next(it) == 1
    with pytest.raises(InvalidOptionError) as info:
        next(it)
    assert type(info.value).__module__ == "builtins" and os.environ["SPARK_HIDE_TRACEBACK"] == "1"


SPARK_METHODS = {"schema", "reader", "writer", "streamReader", "streamWriter", "simpleStreamReader", "partitions",
                 "read", "pushFilters", "write", "commit", "abort", "initialOffset", "latestOffset",
                 "getDefaultReadLimit", "prepareForTriggerAvailableNow", "reportLatestOffset", "stop"}


def test_every_method_spark_calls_is_an_entry_point() -> None:
    classes = {c for m in (source, streaming, writer, spark_errors) for _, c in inspect.getmembers(m, inspect.isclass)
               if c.__module__.startswith("spark_logsource")}
    unguarded = sorted(f"{c.__name__}.{name}" for c in classes for name in SPARK_METHODS
                       if name in vars(c) and not getattr(vars(c)[name], spark_errors.MARK, False))
    assert unguarded == []
    assert len(classes) >= 8
