"""Log dirs in object storage: a real S3 server (SeaweedFS, tests/oracles/s3_server.py), no mock.

Every broker log dir of the shared fixtures, uploaded to a bucket, reads through Spark equal to
Kafka's own decoding (``*.expected.jsonl``), on ``local[2]`` with the ``fs.*`` options (and on
``local-cluster[2,1,1024]`` with credentials given only by environment variables, in
``tests/spark/test_spark_cluster.py``, which reads the disk in the same Spark application). The Python API
and the CLI read the same bytes from the bucket as from the disk. Bad input and faults are typed
errors naming the URI and never a secret: no bucket, no prefix, wrong keys, no endpoint, an object
deleted between planning and reading, the server killed in the middle of a scan (and the rerun
after a restart right). A stream follows a prefix that grows. Writes to a bucket are refused
before any work starts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import shared_fixtures as sf
from s3_server import SECRET_KEY, S3Server, server_or_skip

from storage_core.errors import KlogError, NotALogDirError, SegmentGoneError
from storage_core.fs import ObjectPath, ObjectStoreError, ObjectStoreReadOnlyError, StorageOptions, as_path
from storage_core.read.api import plan, read_arrow
from storage_core.read.piece_reader import read_piece

REPO = Path(__file__).resolve().parents[2]
LOG_DIRS = sorted({p.parent.parent for p in sf.KAFKA_FIXTURES.rglob("*.log")
                   if "captures" not in str(p) and "generated" not in str(p)}) if sf.available() else []
SORT = [("topic", "ascending"), ("partition", "ascending"), ("offset", "ascending")]


@pytest.fixture(scope="module")
def s3() -> S3Server:
    return server_or_skip()


def _no_secret(text: str) -> None:
    assert SECRET_KEY not in text


def _local_log(tmp_path: Path, *, records: int = 600, partitions: int = 2, segment_bytes: int = 1500,
               topic: str = "orders") -> Path:
    """A log dir written by klog, small segments so that it has several per partition."""
    from benchmarks.producer import produce
    from storage_core.log.topic_configs import save_topic_configs

    d = tmp_path / "logs"
    d.mkdir()
    save_topic_configs(d, {topic: {"segment.bytes": segment_bytes}})
    produce(str(d), topic, partitions=partitions, records=records, rate=0, per_append=20)
    return d


# --- paths ------------------------------------------------------------------------------------------

def test_paths_pickle_as_settings_and_hide_secrets() -> None:
    import pickle

    opts = StorageOptions.from_options({"fs.endpoint_override": "h:1", "fs.secret_key": "s3cr3t-value",
                                        "FS.region": "eu-west-1", "path": "/x"})
    p = as_path("s3://bucket/prefix/orders-0", opts) / "00000000000000000000.log"
    assert isinstance(p, ObjectPath) and str(p) == "s3://bucket/prefix/orders-0/00000000000000000000.log"
    assert p.parent.name == "orders-0" and p.with_name("x.index").name == "x.index"
    q = pickle.loads(pickle.dumps(p))
    assert q == p and q.options == opts and hash(q) == hash(p)
    assert "s3cr3t" not in repr(opts) and "s3cr3t" not in str(opts)
    assert "s3cr3t" not in opts.redact("failed with key s3cr3t-value")
    assert as_path("file:///data/kafka") == Path("/data/kafka")
    assert as_path("/data/kafka") == Path("/data/kafka")
    with pytest.raises(ObjectStoreReadOnlyError, match="object storage"):
        open(p, "rb")  # noqa: SIM115 - an os call on a URI is refused, not read as a local path
    with pytest.raises(ObjectStoreReadOnlyError, match="klog snapshot"):
        p.unlink()
    with pytest.raises(KlogError, match="no bucket"):
        as_path("s3:///prefix")


# --- Kafka's decoding, through Spark ---------------------------------------------------------------

@pytest.mark.spark
@pytest.mark.conformance
@pytest.mark.parametrize("log_dir", sf.params(LOG_DIRS, "broker log dirs"))
def test_broker_dirs_from_s3_through_spark(spark, s3: S3Server, log_dir: Path) -> None:  # type: ignore[no-untyped-def]
    from test_spark_read import _b64, _expected

    uri = s3.bucket() + "/kafka-logs"
    s3.upload(log_dir, uri)
    if sf.lost_partitions(log_dir):  # the bucket's copy holds the same evidence: the default read names the loss
        with pytest.raises(Exception) as info:  # noqa: PT011 - Spark's own exception type
            spark.read.format("klog").options(**s3.options).load(uri).count()
        assert "DataLossError" in str(info.value) and sf.names_loss(str(info.value), log_dir), str(info.value)[:2000]
    df = (spark.read.format("klog").options(**s3.options, **sf.tolerant_options(log_dir))
          .option("maxBytesPerPartition", "200000").load(uri))
    got = sorted((r.topic, r.partition, r.offset, _b64(r.key), _b64(r.value),
                  int(r.timestamp.timestamp() * 1000) if r.timestamp is not None else None) for r in df.collect())
    expected = _expected(log_dir)
    assert len(got) == len(expected)
    assert got == [(t, p, o, k, v, ts) for t, p, o, k, v, ts in expected]


# --- the Python API and the CLI read the same bytes ------------------------------------------------

@pytest.mark.parametrize("options", [
    {},
    {"isolationLevel": "read_committed", "includeHeaders": "true", "includeMetadata": "true"},
    {"startingOffsets": "earliest", "endingOffsets": '{"orders": {"0": 150, "1": -1}}'},
    {"topics": "orders", "maxBytesPerPartition": "2000"},
], ids=["all", "committed-metadata", "offsets", "small-pieces"])
def test_read_arrow_from_s3_equals_local(s3: S3Server, tmp_path: Path, options: dict[str, str]) -> None:
    local = _local_log(tmp_path)
    uri = s3.bucket() + "/logs"
    s3.upload(local, uri)
    want = read_arrow(str(local), **options).read_all().sort_by(SORT)
    got = read_arrow(uri, **s3.options, **options).read_all().sort_by(SORT)
    assert got.num_rows == want.num_rows > 0
    assert got.equals(want)
    p = plan(uri, **s3.options, **options)
    assert len({pc.log_path for pc in p.pieces}) >= 4  # several segments per partition, read from the bucket
    assert all(pc.log_path.startswith("s3://") and pc.storage is not None for pc in p.pieces)
    _no_secret(repr(p))


@pytest.mark.skipif(not sf.available(), reason=sf.MISSING_REASON)
def test_describe_and_groups_of_a_bucket_equal_the_disk(s3: S3Server) -> None:
    import storage_core
    from storage_core.read.groups import committed_offsets

    d = next(d for d in LOG_DIRS if list(d.glob("__consumer_offsets-*/*.log")))
    uri = s3.bucket() + "/broker"
    s3.upload(d, uri)
    want = storage_core.describe(str(d)).drop_columns(["path"])
    got = storage_core.describe(uri, **s3.options)
    assert all(p.startswith(uri + "/") for p in got.column("path").to_pylist())
    assert got.drop_columns(["path"]).equals(want)
    _no_secret(str(got.to_pylist()))
    assert committed_offsets(as_path(uri, StorageOptions.from_options(s3.options))).equals(committed_offsets(d))


def _klog(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "storage_core.tools.cli", *args], capture_output=True, text=True,
                          env=full, timeout=300)


def test_cli_reads_and_exports_uris(s3: S3Server, tmp_path: Path) -> None:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    local = _local_log(tmp_path, records=300)
    uri = s3.bucket() + "/logs"
    s3.upload(local, uri)
    described = _klog("describe", uri, "--json", env=s3.env)
    assert described.returncode == 0, described.stderr
    rows = json.loads(described.stdout)
    assert sorted((r["topic"], r["partition"], r["end_offset"]) for r in rows) == [("orders", 0, 150), ("orders", 1, 150)]
    verified = _klog("verify", uri, env=s3.env)
    assert verified.returncode == 0 and "no corrupt data" in verified.stdout, verified.stdout + verified.stderr
    dumped = _klog("dump", f"{uri}/orders-1", "--jsonl", env=s3.env)
    local_dump = _klog("dump", str(local / "orders-1"), "--jsonl")
    assert dumped.returncode == 0 and dumped.stdout == local_dump.stdout != ""
    # the same, with the endpoint and keys as --fs settings instead of the environment
    with_flags = _klog("describe", uri, "--json", *[a for k, v in s3.options.items() for a in ("--fs", f"{k}={v}")])
    assert with_flags.returncode == 0 and json.loads(with_flags.stdout) == rows, with_flags.stderr
    out_uri = uri.rsplit("/", 1)[0] + "/exports/orders.parquet"
    exported = _klog("export", uri, "--topic", "orders", "-o", out_uri, env=s3.env)
    assert exported.returncode == 0, exported.stderr
    import pyarrow.fs as pafs

    fs = pafs.S3FileSystem(**{k[3:]: v for k, v in s3.options.items()})
    got = pq.read_table(out_uri[5:], filesystem=fs).sort_by(SORT)
    assert got.equals(read_arrow(str(local)).read_all().sort_by(SORT))
    assert not [i for i in fs.get_file_info(pafs.FileSelector(out_uri[5:].rsplit("/", 1)[0])) if ".tmp-" in i.path]
    # a file per partition under a prefix, written at once, and again over that export
    per_uri = uri.rsplit("/", 1)[0] + "/exports/per-partition"
    for extra in ((), ("--overwrite", "--partition", "1")):
        per = _klog("export", uri, "--topic", "orders", "--per-partition", "-o", per_uri, "--threads", "2", *extra,
                    env=s3.env)
        assert per.returncode == 0, per.stderr
        _no_secret(per.stdout + per.stderr)
    listed = sorted(i.base_name for i in fs.get_file_info(pafs.FileSelector(per_uri[5:])))
    assert listed == ["orders-1.parquet"]
    whole = read_arrow(str(local)).read_all()
    assert pq.read_table(f"{per_uri[5:]}/orders-1.parquet", filesystem=fs).equals(
        whole.filter(pc.equal(whole["partition"], 1)).sort_by(SORT))
    for res in (described, verified, dumped, exported):
        _no_secret(res.stdout + res.stderr)


# --- bad input and faults ----------------------------------------------------------------------------

def test_missing_bucket_prefix_and_object_are_typed_errors(s3: S3Server, tmp_path: Path) -> None:
    local = _local_log(tmp_path, records=100)
    bucket = s3.bucket()
    s3.upload(local, bucket + "/logs")
    with pytest.raises(NotALogDirError, match=f"no such log directory: {bucket}/nothing-here"):
        read_arrow(bucket + "/nothing-here", **s3.options)
    with pytest.raises(KlogError, match="s3://no-such-bucket-klog/x") as exc:
        read_arrow("s3://no-such-bucket-klog/x", **s3.options)
    _no_secret(str(exc.value))
    # an object deleted between planning and reading: the piece names it and reads nothing else
    p = plan(bucket + "/logs", **s3.options)
    victim = p.pieces[0]
    s3.delete(victim.log_path)
    with pytest.raises(SegmentGoneError, match=victim.log_path.rsplit("/", 1)[-1]) as gone:
        list(read_piece(victim))
    assert victim.log_path in str(gone.value)


@pytest.mark.parametrize(("message", "hint"), [
    # the SDK's text as Arrow gave it in a failing run (the bucket's name holds "403")
    ("When getting information for key 'logs' in bucket 't31403-20-a42b9a': AWS Error NETWORK_CONNECTION during "
     "HeadObject operation: curlCode: 7, Could not connect to server; Details: Failed to connect to 127.0.0.1:9 after "
     "0 ms: Could not connect to server", "endpoint cannot be reached"),
    ("When getting information for key 'AccessDenied/x' in bucket 'b': AWS Error NETWORK_CONNECTION during "
     "HeadObject operation: curlCode: 7, Couldn't connect to server", "endpoint cannot be reached"),
    ("When getting information for key 'logs' in bucket 'b-could-not-connect': AWS Error ACCESS_DENIED during "
     "HeadObject operation: No response body.", "credentials were refused"),
    ("When listing objects under key 'x' in bucket 'net-403': AWS Error NO_SUCH_BUCKET during ListObjectsV2 "
     "operation: The specified bucket does not exist", "the bucket does not exist"),
    ("When reading 'b/k-403': something else failed", None),
])
def test_sdk_codes_are_read_from_the_sdk_not_from_the_names(message: str, hint: str | None) -> None:
    from storage_core.fs import _explained

    got = _explained(message)
    assert got.endswith(f"({message})") and hint in got if hint else got == message, got


def test_wrong_keys_and_unreachable_endpoint_name_the_uri_not_the_secret(s3: S3Server, tmp_path: Path) -> None:
    local = _local_log(tmp_path, records=50)
    uri = s3.bucket() + "/logs"
    s3.upload(local, uri)
    wrong = dict(s3.options, **{"fs.secret_key": "definitely-wrong-secret"})
    with pytest.raises(ObjectStoreError, match="credentials were refused") as exc:
        read_arrow(uri, **wrong)
    assert uri in str(exc.value) and "definitely-wrong" not in str(exc.value)
    away = dict(s3.options, **{"fs.endpoint_override": "127.0.0.1:9", "fs.connect_timeout": "1",
                               "fs.request_timeout": "2"})
    with pytest.raises(ObjectStoreError, match="endpoint cannot be reached") as exc2:
        read_arrow(uri, **away)
    assert uri in str(exc2.value)
    _no_secret(str(exc2.value))
    # the bucket's and the key's names are the user's: one holding "403" or an SDK code is not one
    # (a random bucket named t31403-20-... once made a refused connection read as refused credentials)
    with pytest.raises(ObjectStoreError, match="endpoint cannot be reached"):
        read_arrow(uri.replace("/logs", "/AccessDenied-403/logs"), **away)
    with pytest.raises(KlogError, match="unknown option fs.endpoint for s3:// log dirs; the filesystem takes .*"
                                        "fs.endpoint_override"):
        read_arrow(uri, **{"fs.endpoint": "x"})


@pytest.mark.spark
def test_spark_errors_from_a_bucket_say_what_is_wrong(spark, s3: S3Server) -> None:  # type: ignore[no-untyped-def]
    uri = s3.bucket() + "/empty"
    with pytest.raises(Exception, match=f"NotALogDirError: no such log directory: {uri}") as e1:
        spark.read.format("klog").options(**s3.options).load(uri).count()
    with pytest.raises(Exception, match="ObjectStoreReadOnlyError: cannot write to s3://.*klog snapshot") as e2:
        (spark.range(3).selectExpr("cast(id as string) as value").write.format("klog").mode("append")
         .option("topic", "t").options(**s3.options).save(uri))
    for e in (e1, e2):
        _no_secret(str(e.value))


def test_writers_refuse_a_bucket_before_any_work(s3: S3Server) -> None:
    from storage_core.log.log import Log
    from storage_core.log.manager import LogManager

    uri = s3.bucket()
    with pytest.raises(ObjectStoreReadOnlyError, match="klog snapshot"):
        LogManager([uri], writable=True)
    with pytest.raises(ObjectStoreReadOnlyError, match="klog snapshot"):
        Log(uri + "/orders-0", writable=True)
    res = _klog("retention", uri, "--config", "retention.ms=1", env=s3.env)
    assert res.returncode == 2 and "klog snapshot" in res.stderr, res.stderr


@pytest.mark.fault
def test_server_killed_mid_scan_fails_clearly_and_the_rerun_is_right(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A private server (the shared one serves the other tests) is SIGKILLed between two batches of
    a scan: the scan fails with an ObjectStoreError naming the object; after a restart, the same
    read returns exactly the rows of the disk."""
    from storage_core.read import piece_reader

    # small output batches: consecutive pieces share a decoder, and 4,000 records would be one batch
    monkeypatch.setattr(piece_reader, "FLUSH_ROWS", 200)
    try:
        server = S3Server(tmp_path / "s3")
        server.start()
    except (OSError, RuntimeError) as exc:
        pytest.skip(f"the S3 test server (SeaweedFS weed) could not start: {exc}")
    try:
        local = _local_log(tmp_path, records=4000, partitions=1, segment_bytes=1 << 20)
        uri = server.bucket() + "/logs"
        server.upload(local, uri)
        want = read_arrow(str(local)).read_all()
        from storage_core.fs import ObjectReader

        reader = read_arrow(uri, **server.options, maxBytesPerPartition="4096")
        first = reader.read_next_batch()
        assert first.num_rows > 0
        server.kill()
        ObjectReader._POOL = None  # prefetches already under way finish against the dead server
        with pytest.raises(ObjectStoreError, match=r"s3://.*/logs/orders-0/.*\.(log|index)") as exc:
            for _ in reader:
                pass
        _no_secret(str(exc.value))
        server.start()
        again = read_arrow(uri, **server.options, maxBytesPerPartition="4096").read_all()
        assert again.sort_by(SORT).equals(want.sort_by(SORT))
    finally:
        server.stop()


# --- a stream over a prefix that grows ------------------------------------------------------------

@pytest.mark.spark
def test_stream_follows_a_growing_prefix(spark, s3: S3Server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """New segments (and a longer active segment) uploaded under the prefix are picked up by the
    next trigger: every record exactly once."""
    from benchmarks.producer import produce

    local = _local_log(tmp_path, records=200, partitions=2)
    uri = s3.bucket() + "/logs"
    s3.upload(local, uri)
    q = (spark.readStream.format("klog").options(**s3.options).option("startingOffsets", "earliest").load(uri)
         .selectExpr("partition", "offset", "cast(value as string) as v")
         .writeStream.format("memory").queryName("s3_growing").start())
    try:
        q.processAllAvailable()
        produce(str(local), "orders", partitions=2, records=400, rate=0, per_append=20, start=200)
        s3.upload(local, uri)
        q.processAllAvailable()
        rows = spark.sql("select partition, offset, v from s3_growing").collect()
    finally:
        q.stop()
    assert len({r.v for r in rows}) == len(rows) == 600
    assert {r.v for r in rows} == {f"v{i}" for i in range(600)}
    assert len(list((local / "orders-0").glob("*.log"))) >= 3  # the prefix grew by whole new segments

