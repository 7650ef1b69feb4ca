"""Tiered topics as Aiven's ``RemoteStorageManager`` (tiered-storage-for-apache-kafka v1.1.1) stores
them: ``remoteStorageLayout=aiven`` against real data the plugin wrote inside a broker.

The fixture (``../shared/fixtures/kafka-tiered-aiven/``, read in place) has three variants: A plain,
B zstd chunks with custom metadata, C zstd + AES-256-GCM with a two-key ring and a key prefix. The
expected rows are what the broker's own fetch served (``truth.*.jsonl.gz``, read through the plugin's
``fetchLogSegment``), not anything klog computed. Mutations are made on copies in tmp dirs.
"""

from __future__ import annotations

import base64
import gzip
import json
import logging
import os
import re
import shutil
import struct
from pathlib import Path
from typing import Any

import pytest
import zstandard
from kafka_corpus import assert_same_rows, available_now_rows, rows_of
from shared_fixtures import SHARED

import storage_core
from storage_core.errors import RemoteChunkError, RemoteKeyError, RemoteManifestError, RemoteSegmentMissingError
from storage_core.log.aiven.config import AivenConfig
from storage_core.log.aiven.custom_metadata import SegmentCustomMetadata
from storage_core.log.aiven.manifest import SegmentManifest
from storage_core.log.aiven.objects import CHUNKS, FETCHED, object_keys
from storage_core.log.tiered import load_remote_metadata, remote_history
from storage_core.log.topic_partition import TopicPartition
from storage_core.tools.cli import main as klog

FIXTURE = SHARED / "fixtures" / "kafka-tiered-aiven"
VARIANTS = {"A": "tiered-a", "B": "tiered-b", "C": "tiered-c"}
ISOLATION = ("read_uncommitted", "read_committed")

pytestmark = pytest.mark.skipif(not (FIXTURE / "README.md").is_file(),
                                reason=f"the Aiven tiered-storage fixture is not at {FIXTURE} (set KLOG_SHARED)")


def _truth(variant: str, isolation: str) -> list[dict[str, Any]]:
    name = "truth.all.jsonl.gz" if isolation == "read_uncommitted" else "truth.committed.jsonl.gz"
    out = []
    with gzip.open(FIXTURE / variant / name, "rt", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            out.append({"key": _b64(d["key_b64"]), "value": _b64(d["value_b64"]), "topic": d["topic"],
                        "partition": d["partition"], "offset": d["offset"], "timestamp": d["timestamp"],
                        "timestampType": {"CreateTime": 0, "LogAppendTime": 1}[d["timestamp_type"]],
                        "headers": [(k, _b64(v)) for k, v in d["headers"]] or None})
    return out


_TRUTHS: dict[tuple[str, str], list[dict[str, Any]]] = {}


def truth(variant: str, isolation: str) -> list[dict[str, Any]]:
    if (variant, isolation) not in _TRUTHS:
        _TRUTHS[(variant, isolation)] = _truth(variant, isolation)
    return _TRUTHS[(variant, isolation)]


def _b64(v: str | None) -> bytes | None:
    return None if v is None else base64.b64decode(v)


def key_options(keys: Path, *, k1: Path | None = None, k2: Path | None = None) -> dict[str, str]:
    """The key files of C's ring where they are now (the fixture's rsm.properties names the paths
    they had when written)."""
    out = {}
    for pair, private in (("k1", k1), ("k2", k2)):
        out[f"rsm.config.encryption.key.pairs.{pair}.public.key.file"] = str(keys / f"{pair}-public.pem")
        out[f"rsm.config.encryption.key.pairs.{pair}.private.key.file"] = str(private or keys / f"{pair}-private.pem")
    return out


def options(variant: str, *, remote: Path | str | None = None, root: Path = FIXTURE, **extra: Any) -> dict[str, Any]:
    base = root / variant
    opts: dict[str, Any] = {"topics": VARIANTS[variant], "includeHeaders": True, "remoteStorageLayout": "aiven",
                            "remoteStorage": str(remote if remote is not None else base / "remote"),
                            "remoteStorageConfig": str(FIXTURE / variant / "rsm.properties")}
    if variant == "C":
        opts.update(key_options(FIXTURE / "C" / "keys"))
    opts.update(extra)
    if "assign" in opts:
        del opts["topics"]
    return opts


def read(variant: str, log_dir: Path | None = None, **kw: Any) -> list[dict[str, Any]]:
    log_dir = log_dir if log_dir is not None else FIXTURE / variant / "logdir"
    return rows_of(storage_core.read_arrow(log_dir, **options(variant, **kw)).read_all())


# --- the layout's parts ----------------------------------------------------------------------------


def test_custom_metadata_names_the_objects_the_plugin_wrote() -> None:
    """B and C carry REMOTE_SIZE, OBJECT_PREFIX and OBJECT_KEY: the sizes are the three objects'
    on disk, the keys the files the plugin wrote; A carries none and its keys are computed."""
    for variant in VARIANTS:
        config = AivenConfig.load(FIXTURE / variant / "rsm.properties")
        meta = load_remote_metadata([FIXTURE / variant / "logdir"])
        segs = [s for p in meta.partitions.values() for s in p.segments.values()]
        assert segs, variant
        for seg in segs:
            custom = SegmentCustomMetadata.parse(seg.custom_metadata, seg.segment_id)
            keys = object_keys(config, seg)
            root = FIXTURE / variant / "remote"
            files = [root / keys.log, root / keys.indexes, root / keys.manifest]
            assert all(f.is_file() for f in files), (variant, keys)
            if variant == "A":
                assert custom == SegmentCustomMetadata()
            else:
                assert custom.remote_size == sum(f.stat().st_size for f in files), (variant, seg.segment_id)
                assert custom.object_prefix == config.key_prefix and custom.object_key is not None
            manifest = SegmentManifest.parse((root / keys.manifest).read_bytes())
            assert manifest.chunk_index.kind == ("fixed" if variant == "A" else "variable")
            assert manifest.chunk_index.transformed_file_size == (root / keys.log).stat().st_size
            assert manifest.chunk_index.original_file_size == seg.size_bytes
            assert (manifest.encryption is not None) == (variant == "C")


# --- reads equal to the broker's --------------------------------------------------------------------


@pytest.mark.parametrize("isolation", ISOLATION)
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_read_arrow_equals_the_broker(variant: str, isolation: str) -> None:
    got = read(variant, isolationLevel=isolation)
    assert_same_rows(got, truth(variant, isolation), f"aiven {variant} {isolation}")


def test_the_broker_config_works_as_it_is(tmp_path: Path) -> None:
    """A server.properties (broker keys beside rsm.config.*) names the storage root itself when no
    remoteStorage is given; rsm.config.* options override the file's settings."""
    props = (FIXTURE / "C" / "server.properties").read_text().replace("<fixture>", str(FIXTURE))
    conf = tmp_path / "server.properties"
    conf.write_text(props)
    got = rows_of(storage_core.read_arrow(FIXTURE / "C" / "logdir", topics="tiered-c", includeHeaders=True,
                                          isolationLevel="read_committed", remoteStorageLayout="aiven",
                                          remoteStorageConfig=str(conf)).read_all())
    assert_same_rows(got, truth("C", "read_committed"), "aiven C from server.properties")


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_spark_batch_equals_the_broker(variant: str, spark) -> None:  # type: ignore[no-untyped-def]
    for isolation in ISOLATION:
        reader = spark.read.format("klog").option("kafka.isolation.level", isolation)
        for k, v in options(variant).items():
            reader = reader.option(k, str(v).lower() if isinstance(v, bool) else str(v))
        got = rows_of(reader.load(str(FIXTURE / variant / "logdir")).collect())
        assert_same_rows(got, truth(variant, isolation), f"aiven {variant} spark {isolation}")


def test_spark_finds_key_pairs_whose_ids_are_not_lowercase(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A ring whose pair ids have capitals (``K1``, ``K2``: C's objects with their manifests naming the
    pairs so), its key files given as Spark options: Spark hands the source those keys lowercased
    (``...pairs.k2.private.key.file``), and the pair ``K2`` the manifests name is still found."""
    remote = tmp_path / "remote"
    shutil.copytree(FIXTURE / "C" / "remote", remote)
    renamed = 0
    for manifest in remote.rglob("*.rsm-manifest"):
        text = manifest.read_text()
        for pair in ("k1", "k2"):
            text = text.replace(f'"dataKey":"{pair}:', f'"dataKey":"{pair.upper()}:')
        renamed += text.count('"dataKey":"K')
        manifest.write_text(text)
    assert renamed, "no manifest names a key pair"
    props = tmp_path / "rsm.properties"
    props.write_text("".join(line + "\n" for line in (FIXTURE / "C" / "rsm.properties").read_text().splitlines()
                             if ".key.file=" not in line).replace("key.pairs=k1,k2", "key.pairs=K1,K2"))
    reader = spark.read.format("klog").option("kafka.isolation.level", "read_committed")
    opts = {**options("C", remote=remote, remoteStorageConfig=str(props)),
            **{k.replace(".k1.", ".K1.").replace(".k2.", ".K2."): v for k, v in key_options(FIXTURE / "C" / "keys").items()}}
    opts = {k: v for k, v in opts.items() if ".k1." not in k and ".k2." not in k}
    assert any(".K2.private.key.file" in k for k in opts), opts
    for k, v in opts.items():
        reader = reader.option(k, str(v).lower() if isinstance(v, bool) else str(v))
    got = rows_of(reader.load(str(FIXTURE / "C" / "logdir")).collect())
    assert_same_rows(got, truth("C", "read_committed"), "aiven C, key pairs K1 and K2, through Spark")


def test_a_stream_reads_the_encrypted_history(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    reader = (spark.readStream.format("klog").option("startingOffsets", "earliest")
              .option("kafka.isolation.level", "read_committed").option("maxOffsetsPerTrigger", "3000"))
    for k, v in options("C").items():
        reader = reader.option(k, str(v).lower() if isinstance(v, bool) else str(v))
    got = available_now_rows(spark, reader.load(str(FIXTURE / "C" / "logdir")), "aiven_stream_c", tmp_path / "ck")
    assert_same_rows(got, truth("C", "read_committed"), "aiven C stream")


def test_export_reads_the_remote_history(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    out = tmp_path / "c.parquet"
    flags = [f"--rsm-config={k}={v}" for k, v in key_options(FIXTURE / "C" / "keys").items()]
    assert klog(["export", str(FIXTURE / "C" / "logdir"), "--topic", "tiered-c", "-o", str(out), "--headers",
                 "--read-committed", "--remote-storage", str(FIXTURE / "C" / "remote"), "--remote-storage-layout",
                 "aiven", "--remote-storage-config", str(FIXTURE / "C" / "rsm.properties"), *flags, "--quiet"]) == 0
    assert_same_rows(rows_of(pq.read_table(out)), truth("C", "read_committed"), "aiven C export")


# --- ranged reads ----------------------------------------------------------------------------------


def test_a_narrow_read_fetches_only_the_chunks_it_needs() -> None:
    """100 records inside one remote segment of C: the ``.log`` bytes fetched are at most two
    chunks' (the manifest's sizes), and the rows are the broker's."""
    config = AivenConfig.load(FIXTURE / "C" / "rsm.properties")
    part = load_remote_metadata([FIXTURE / "C" / "logdir"]).get(TopicPartition("tiered-c", 0))
    assert part is not None
    seg = max(remote_history(part, FIXTURE / "C" / "logdir" / "tiered-c-0"), key=lambda s: s.end_offset)
    manifest = SegmentManifest.parse((FIXTURE / "C" / "remote" / object_keys(config, seg).manifest).read_bytes())
    two_chunks = sum(sorted(manifest.chunk_index.transformed_sizes)[-2:])
    start = seg.end_offset - 100
    CHUNKS.clear()
    FETCHED.reset()
    got = read("C", assign=json.dumps({"tiered-c": [0]}), startingOffsets=json.dumps({"tiered-c": {"0": start}}),
               endingOffsets=json.dumps({"tiered-c": {"0": seg.end_offset}}))
    want = [r for r in truth("C", "read_uncommitted") if r["partition"] == 0 and start <= r["offset"] < seg.end_offset]
    assert_same_rows(got, want, "aiven C narrow read")
    print(f"narrow read of {len(got)} records: {FETCHED.log_bytes} .log bytes fetched (two chunks: {two_chunks}), "
          f"{FETCHED.index_bytes} index bytes, {FETCHED.manifest_bytes} manifest bytes, {FETCHED.requests} requests")
    assert 0 < FETCHED.log_bytes <= two_chunks, (FETCHED, two_chunks)


#: Aiven's README: "4 MiB is the current recommended chunk size" (``rsm.config.chunk.size=4194304``);
#: the fixture's C was written with 200,000
RECOMMENDED_CHUNK_SIZE = 4 << 20


def _chunk_sizes(sizes: list[int]) -> bytes:
    """``ChunkSizesBinaryCodec.encode`` (manifest/index/serde/ChunkSizesBinaryCodec.java; layout in
    :mod:`storage_core.log.aiven.manifest`), the narrowest width that holds every value."""
    out = struct.pack(">i", len(sizes))
    if len(sizes) == 1:
        return out + struct.pack(">i", sizes[0])
    base = min(sizes[:-1])
    width = max(1, (max(v - base for v in sizes[:-1]).bit_length() + 7) // 8)
    return (out + struct.pack(">ib", base, width) + b"".join((v - base).to_bytes(width, "big") for v in sizes[:-1])
            + struct.pack(">i", sizes[-1]))


def _rechunk(root: Path, seg: Any, keys: Any, chunk_size: int) -> list[int]:
    """Rewrite one remote segment of a copy of C as the plugin writes it with ``chunk.size`` =
    ``chunk_size``: the segment's bytes cut into chunks, each one zstd frame with its content size,
    then AES-256-GCM with a fresh IV under the segment's own data key and AAD (``IV | ciphertext |
    tag``), and a variable chunk index in the manifest. The truth stays the broker's rows: the
    segment's bytes are the same. Returns the new transformed chunk sizes."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    from storage_core.log.aiven.transform import _private_key, oaep_decrypt

    remote = root / "C" / "remote"
    manifest_path = remote / keys.manifest
    doc = json.loads(manifest_path.read_text())
    manifest = SegmentManifest.parse(manifest_path.read_bytes())
    enc = manifest.encryption
    assert enc is not None and manifest.compression
    data_key = oaep_decrypt(_private_key(str(root / "C" / "keys" / f"{enc.key_pair_id}-private.pem")), enc.wrapped_key)
    assert data_key is not None
    gcm = AESGCM(data_key)
    raw = (remote / keys.log).read_bytes()
    index = manifest.chunk_index
    original = b"".join(
        zstandard.ZstdDecompressor().decompress(gcm.decrypt(raw[c.transformed_position:c.transformed_position + 12],
                                                            raw[c.transformed_position + 12:c.transformed_end],
                                                            enc.aad), max_output_size=c.original_size)
        for c in index.chunks_for(0, index.original_file_size))
    assert len(original) == index.original_file_size == seg.size_bytes
    chunks = []
    for at in range(0, len(original), chunk_size):
        iv = os.urandom(12)
        frame = zstandard.ZstdCompressor(write_content_size=True).compress(original[at:at + chunk_size])
        chunks.append(iv + gcm.encrypt(iv, frame, enc.aad))
    (remote / keys.log).write_bytes(b"".join(chunks))
    sizes = [len(c) for c in chunks]
    packed = zstandard.ZstdCompressor(write_content_size=True).compress(_chunk_sizes(sizes))
    doc["chunkIndex"] = {"type": "variable", "originalChunkSize": chunk_size, "originalFileSize": len(original),
                         "transformedChunks": base64.b64encode(packed).decode()}
    manifest_path.write_text(json.dumps(doc))
    return sizes


def test_the_last_thousand_records_fetch_at_most_two_chunks(tmp_path: Path) -> None:
    """The last 1,000 records of partition 0's remote history, read from C as written (200,000-byte
    chunks) and from a copy whose segments are cut at the plugin's recommended 4 MiB: the rows are
    the broker's, and the ``.log`` bytes fetched are those of the chunks the records' bytes lie in
    and no more. At 4 MiB that is at most two chunks; at 200,000 bytes the same records span more
    chunks (in C, all six of the last segment's, which holds 1,064 records), none of another segment."""
    root = tmp_path / "fixture"
    for part in ("logdir", "remote", "keys"):
        shutil.copytree(FIXTURE / "C" / part, root / "C" / part)
    segments = _segments(root)
    end = max(s.end_offset for s, _ in segments) + 1
    start = end - 1000
    touched = [(s, k) for s, k in segments if s.end_offset >= start]
    want = [r for r in truth("C", "read_uncommitted") if r["partition"] == 0 and start <= r["offset"] < end]
    for chunk_size in (None, RECOMMENDED_CHUNK_SIZE):
        if chunk_size is not None:
            for s, k in touched:
                _rechunk(root, s, k, chunk_size)
        manifests = [SegmentManifest.parse((root / "C" / "remote" / k.manifest).read_bytes()) for _, k in touched]
        CHUNKS.clear()
        FETCHED.reset()
        got = read("C", root / "C" / "logdir", remote=root / "C" / "remote", assign=json.dumps({"tiered-c": [0]}),
                   startingOffsets=json.dumps({"tiered-c": {"0": start}}),
                   endingOffsets=json.dumps({"tiered-c": {"0": end}}))
        what = f"aiven C last 1,000 records, chunk size {chunk_size or 'as written'}"
        assert_same_rows(got, want, what)
        sizes = sorted(size for m in manifests for size in m.chunk_index.transformed_sizes)
        print(f"{what}: {len(touched)} segment(s), {sum(m.chunk_index.count for m in manifests)} chunks in them, "
              f"{FETCHED.log_bytes} .log bytes fetched in {FETCHED.requests} requests; the two largest chunks: "
              f"{sum(sizes[-2:])} bytes; all chunks: {sum(sizes)}")
        assert FETCHED.log_bytes > 0
        if chunk_size == RECOMMENDED_CHUNK_SIZE:
            assert FETCHED.log_bytes <= sum(sizes[-2:]), (what, FETCHED)
        else:  # nothing of another segment (test_a_narrow_read_fetches_only_the_chunks_it_needs: within one)
            assert FETCHED.log_bytes <= sum(sizes), (what, FETCHED)


# --- errors ----------------------------------------------------------------------------------------


@pytest.fixture
def copy_c(tmp_path: Path) -> Path:
    """C's log dir, objects and keys, copied: mutations never touch the shared fixture."""
    root = tmp_path / "fixture"
    for part in ("logdir", "remote", "keys"):
        shutil.copytree(FIXTURE / "C" / part, root / "C" / part)
    return root


def _segments(root: Path) -> list[tuple[Any, Any]]:
    config = AivenConfig.load(FIXTURE / "C" / "rsm.properties")
    part = load_remote_metadata([root / "C" / "logdir"]).get(TopicPartition("tiered-c", 0))
    assert part is not None
    return [(s, object_keys(config, s)) for s in remote_history(part, root / "C" / "logdir" / "tiered-c-0")]


def _no_secret(text: str, root: Path) -> None:
    for pem in (root / "C" / "keys").glob("*-private.pem"):
        body = "".join(pem.read_text().splitlines()[1:-1])
        assert body[:40] not in text
    for _, keys in _segments(root):
        manifest = json.loads((root / "C" / "remote" / keys.manifest).read_text())
        wrapped = manifest["encryption"]["dataKey"].split(":", 1)[1]
        assert wrapped[:24] not in text and manifest["encryption"]["aad"][:24] not in text


def _without(rows: list[dict[str, Any]], seg: Any) -> list[dict[str, Any]]:
    return [r for r in rows if not (r["partition"] == 0 and seg.start_offset <= r["offset"] <= seg.end_offset)]


def test_a_flipped_byte_in_a_chunk_fails_its_tag(copy_c: Path, caplog: pytest.LogCaptureFixture) -> None:
    seg, keys = _segments(copy_c)[-1]
    obj = copy_c / "C" / "remote" / keys.log
    data = bytearray(obj.read_bytes())
    data[len(data) // 2] ^= 0x40
    obj.write_bytes(bytes(data))
    CHUNKS.clear()
    with pytest.raises(RemoteChunkError, match=f"{seg.segment_id}.*chunk .*authentication tag") as info:
        read("C", copy_c / "C" / "logdir", remote=copy_c / "C" / "remote")
    assert keys.log in str(info.value)
    _no_secret(str(info.value), copy_c)
    CHUNKS.clear()
    with caplog.at_level(logging.WARNING, logger="klog"):
        got = read("C", copy_c / "C" / "logdir", remote=copy_c / "C" / "remote", failOnDataLoss="false")
    assert any(seg.segment_id in m and "skipped" in m for m in caplog.messages)
    # the segment's chunks are all checked before its first row (it is smaller than a read's window):
    # nothing of it is returned, everything else is
    assert_same_rows(got, _without(truth("C", "read_uncommitted"), seg), "flipped byte skipped")


def test_a_truncated_object_does_not_match_its_manifest(copy_c: Path, caplog: pytest.LogCaptureFixture) -> None:
    seg, keys = _segments(copy_c)[1]
    obj = copy_c / "C" / "remote" / keys.log
    obj.write_bytes(obj.read_bytes()[:-100])
    with pytest.raises(RemoteManifestError, match=f"{seg.segment_id}.* has \\d+ bytes; its manifest's \\d+ chunks"):
        read("C", copy_c / "C" / "logdir", remote=copy_c / "C" / "remote")
    with caplog.at_level(logging.WARNING, logger="klog"):
        got = read("C", copy_c / "C" / "logdir", remote=copy_c / "C" / "remote", failOnDataLoss="false")
    assert_same_rows(got, _without(truth("C", "read_uncommitted"), seg), "truncated object skipped")
    assert any(f"offsets {seg.start_offset}-{seg.end_offset} skipped" in m for m in caplog.messages)


def test_a_manifest_from_another_segment_is_refused(copy_c: Path) -> None:
    (seg_a, keys_a), (seg_b, keys_b) = _segments(copy_c)[1:3]
    remote = copy_c / "C" / "remote"
    shutil.copy(remote / keys_a.manifest, remote / keys_b.manifest)
    with pytest.raises(RemoteManifestError, match=f"written for segment {seg_a.segment_id}.*expected "
                                                  f"{seg_b.segment_id}"):
        read("C", copy_c / "C" / "logdir", remote=remote)


def test_a_missing_or_wrong_private_key_is_named(copy_c: Path) -> None:
    keys = copy_c / "C" / "keys"
    remote = copy_c / "C" / "remote"
    logdir = copy_c / "C" / "logdir"
    opts = options("C", remote=remote)
    opts.update(key_options(keys, k2=keys / "k1-private.pem"))  # k2's segments, k1's key
    with pytest.raises(RemoteKeyError, match="key pair 'k2' .* does not unwrap") as wrong:
        storage_core.read_arrow(logdir, **opts).read_all()
    (keys / "k2-private.pem").unlink()
    opts.update(key_options(keys))
    with pytest.raises(RemoteKeyError, match="k2-private.pem cannot be read") as missing:
        storage_core.read_arrow(logdir, **opts).read_all()
    del opts["rsm.config.encryption.key.pairs.k2.private.key.file"]
    conf = copy_c / "rsm.properties"
    conf.write_text("".join(line for line in (FIXTURE / "C" / "rsm.properties").read_text().splitlines(True)
                            if "k2.private" not in line))
    opts["remoteStorageConfig"] = str(conf)
    with pytest.raises(RemoteKeyError, match="key pair 'k2' has no private key"):
        storage_core.read_arrow(logdir, **opts).read_all()
    for exc in (wrong.value, missing.value):
        _no_secret(str(exc), copy_c)


def test_a_missing_manifest_is_a_missing_segment(copy_c: Path) -> None:
    seg, keys = _segments(copy_c)[0]
    (copy_c / "C" / "remote" / keys.manifest).unlink()
    with pytest.raises(RemoteSegmentMissingError, match=f"{seg.segment_id}.*manifest .* is not in the remote"):
        read("C", copy_c / "C" / "logdir", remote=copy_c / "C" / "remote")


# --- verify ----------------------------------------------------------------------------------------


def _verify(variant: str, log_dir: Path, remote: Path | None, keys: Path | None = None) -> tuple[int, str]:
    import io
    from contextlib import redirect_stderr, redirect_stdout

    args = ["verify", str(log_dir)]
    if remote is not None:
        args += ["--remote-storage", str(remote), "--remote-storage-layout", "aiven", "--remote-storage-config",
                 str(FIXTURE / variant / "rsm.properties")]
        if variant == "C":
            args += [f"--rsm-config={k}={v}" for k, v in key_options(keys or FIXTURE / "C" / "keys").items()]
    out = io.StringIO()
    with redirect_stdout(out), redirect_stderr(out):
        rc = klog(args)
    return rc, out.getvalue()


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_verify_reads_every_remote_segment(variant: str) -> None:
    """``klog verify --remote-storage``: every remote segment's batches are checked (more batches than
    the local segments alone), and all is well; without the storage a warning says the remote
    history was not verified."""
    rc, local = _verify(variant, FIXTURE / variant / "logdir", None)
    assert rc == 0 and "remote segments (offsets" in local and "not verified" in local, local
    rc, both = _verify(variant, FIXTURE / variant / "logdir", FIXTURE / variant / "remote")
    assert rc == 0 and "not verified" not in both and "warning:" not in both, both
    count = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\S+): ok \((\d+) batches", local, re.M)}
    remote = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\S+): ok \((\d+) batches", both, re.M)}
    tiered = [tp for tp in count if tp.startswith(VARIANTS[variant] + "-")]
    assert tiered and all(remote[tp] > count[tp] for tp in tiered), (local, both)
    assert all(remote[tp] == count[tp] for tp in count if tp not in tiered), (local, both)


@pytest.mark.parametrize("damage", ["flip", "truncate", "manifest", "key"])
def test_verify_names_a_damaged_remote_segment(copy_c: Path, damage: str) -> None:
    """Each of the mutations a read refuses is a verify error naming the segment, exit 1."""
    segs = _segments(copy_c)
    remote = copy_c / "C" / "remote"
    keys = copy_c / "C" / "keys"
    seg, k = segs[-1]
    if damage == "flip":
        data = bytearray((remote / k.log).read_bytes())
        data[len(data) // 2] ^= 0x40
        (remote / k.log).write_bytes(bytes(data))
        why = "authentication tag"
    elif damage == "truncate":
        (remote / k.log).write_bytes((remote / k.log).read_bytes()[:-100])
        why = "bytes; its manifest"
    elif damage == "manifest":
        (other, ko), (seg, k) = segs[1:3]
        shutil.copy(remote / ko.manifest, remote / k.manifest)
        why = f"written for segment {other.segment_id}"
    else:
        shutil.copy(keys / "k1-private.pem", keys / "k2-private.pem")  # k2's segments, k1's key
        why = "does not unwrap"
    CHUNKS.clear()
    rc, out = _verify("C", copy_c / "C" / "logdir", remote, keys)
    assert rc == 1, out
    errors = [line for line in out.splitlines() if line.startswith("error: remote segment")]
    assert any(seg.segment_id in e and f"offsets {seg.start_offset}-{seg.end_offset}" in e and why in e
               for e in errors), out
    _no_secret(out, copy_c)


# --- S3 --------------------------------------------------------------------------------------------


def test_the_objects_read_from_s3() -> None:
    """The plugin's S3Storage uses the same keys: C's objects uploaded to a real S3 server read the
    same history through s3://, at both isolation levels."""
    from s3_server import SECRET_KEY, server_or_skip

    s3 = server_or_skip()
    uri = s3.bucket() + "/aiven-c"
    s3.upload(FIXTURE / "C" / "remote", uri)
    for isolation in ISOLATION:
        CHUNKS.clear()
        got = read("C", remote=uri, isolationLevel=isolation, **s3.options)
        assert_same_rows(got, truth("C", isolation), f"aiven C in S3 {isolation}")
    with pytest.raises(RemoteSegmentMissingError) as info:
        read("C", remote=uri + "-elsewhere", **s3.options)
    assert SECRET_KEY not in str(info.value)


# --- describe, snapshot ----------------------------------------------------------------------------


def test_describe_and_snapshot_include_remote(tmp_path: Path) -> None:
    """describe gives the remote range from __remote_log_metadata alone (no object is fetched);
    snapshot --include-remote copies the decrypted, decompressed segments in as ordinary ones, and
    the snapshot alone reads the broker's history."""
    from storage_core.log.tiered import RemoteStorage

    offsets = json.loads((FIXTURE / "C" / "offsets.json").read_text())
    FETCHED.reset()
    described = storage_core.describe(FIXTURE / "C" / "logdir", topics="tiered-c").to_pylist()
    assert FETCHED.requests == 0
    assert {r["partition"]: (r["remote_start_offset"], r["remote_end_offset"]) for r in described} == {
        int(p): (v["earliest"], v["earliest_local"]) for p, v in offsets["list_offsets_read_uncommitted"].items()}
    remote = RemoteStorage.of(str(FIXTURE / "C" / "remote"), "aiven", config=str(FIXTURE / "C" / "rsm.properties"),
                              rsm=key_options(FIXTURE / "C" / "keys"))
    summary = storage_core.snapshot(FIXTURE / "C" / "logdir", tmp_path / "snap", remote=remote, include_remote=True)
    assert all(pc.remote_included for pc in summary.partitions if pc.remote_segments)
    for isolation in ISOLATION:
        got = rows_of(storage_core.read_arrow(tmp_path / "snap", topics="tiered-c", includeHeaders=True,
                                              isolationLevel=isolation).read_all())
        assert_same_rows(got, truth("C", isolation), f"aiven C snapshot {isolation}")



def test_dump_decodes_the_objects(capsys: pytest.CaptureFixture[str]) -> None:
    """``klog dump`` of an encrypted segment's ``.log`` object prints its batches decoded: every
    data record the broker served from it, plus its transaction markers; of ``.indexes``, the
    indexes inside (offsets within the segment)."""
    config = AivenConfig.load(FIXTURE / "C" / "rsm.properties")
    part = load_remote_metadata([FIXTURE / "C" / "logdir"]).get(TopicPartition("tiered-c", 0))
    assert part is not None
    seg = max(remote_history(part, FIXTURE / "C" / "logdir" / "tiered-c-0"), key=lambda s: s.end_offset)
    keys = object_keys(config, seg)
    flags = ["--remote-storage-config", str(FIXTURE / "C" / "rsm.properties"),
             *(f"--rsm-config={k}={v}" for k, v in key_options(FIXTURE / "C" / "keys").items())]
    capsys.readouterr()
    assert klog(["dump", "--deep-iteration", "--quiet", str(FIXTURE / "C" / "remote" / keys.log), *flags]) == 0
    lines = capsys.readouterr().out.splitlines()
    data = {int(line.split()[2]) for line in lines if line.startswith("| offset:") and "endTxnMarker" not in line}
    markers = [line for line in lines if "endTxnMarker" in line]
    want = {r["offset"] for r in truth("C", "read_uncommitted")
            if r["partition"] == 0 and seg.start_offset <= r["offset"] <= seg.end_offset}
    assert data == want and len(markers) == 5, (len(data), len(want), len(markers))
    assert klog(["dump", "--quiet", str(FIXTURE / "C" / "remote" / keys.indexes), *flags]) == 0
    out = capsys.readouterr().out
    offsets = [int(line.split()[1]) for line in out.splitlines() if line.startswith("offset:")]
    assert offsets and all(seg.start_offset <= o <= seg.end_offset for o in offsets)


def test_sync_appends_the_whole_history(tmp_path: Path) -> None:
    """``klog sync`` into a Delta table reads the remote history through the same options; a rerun
    appends nothing."""
    from deltalake import DeltaTable

    opts = options("C", isolationLevel="read_committed")
    del opts["includeHeaders"]
    summary = storage_core.sync(FIXTURE / "C" / "logdir", str(tmp_path / "t"), format="delta", **opts)
    table = DeltaTable(str(tmp_path / "t")).to_pyarrow_table()
    want = truth("C", "read_committed")
    assert table.num_rows == len(want), summary
    got = sorted(zip(table.column("partition").to_pylist(), table.column("offset").to_pylist(),
                     table.column("value").to_pylist(), strict=True))
    assert got == sorted((r["partition"], r["offset"], r["value"]) for r in want)
    again = storage_core.sync(FIXTURE / "C" / "logdir", str(tmp_path / "t"), format="delta", **opts)
    assert DeltaTable(str(tmp_path / "t")).to_pyarrow_table().num_rows == len(want), again


def test_the_data_key_is_unwrapped_by_the_pair_it_names(copy_c: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Every segment of C names pair k2; a manifest made to name k1 (whose key does not unwrap k2's
    wrapping) or a pair the ring lacks fails with RemoteKeyError naming that pair; with
    failOnDataLoss=false that segment alone is skipped."""
    remote = copy_c / "C" / "remote"
    seg, keys = _segments(copy_c)[1]
    manifest = remote / keys.manifest
    original = manifest.read_text()
    assert '"dataKey":"k2:' in original
    manifest.write_text(original.replace('"dataKey":"k2:', '"dataKey":"k1:'))
    with pytest.raises(RemoteKeyError, match=f"{seg.segment_id}.*key pair 'k1' .* does not unwrap"):
        read("C", copy_c / "C" / "logdir", remote=remote)
    manifest.write_text(original.replace('"dataKey":"k2:', '"dataKey":"k9:'))
    with pytest.raises(RemoteKeyError, match="key pair 'k9', which the key ring does not name"):
        read("C", copy_c / "C" / "logdir", remote=remote)
    with caplog.at_level(logging.WARNING, logger="klog"):
        got = read("C", copy_c / "C" / "logdir", remote=remote, failOnDataLoss="false")
    assert_same_rows(got, _without(truth("C", "read_uncommitted"), seg), "a segment whose key is not in the ring")
    assert any(f"offsets {seg.start_offset}-{seg.end_offset} skipped" in m for m in caplog.messages)


def test_key_prefix_mask_hides_the_prefix_in_messages(copy_c: Path) -> None:
    """``key.prefix.mask=true``: the plugin keeps ``key.prefix`` out of its logs; klog's messages
    name the objects with ``<prefix>/`` in its place."""
    seg, keys = _segments(copy_c)[0]
    (copy_c / "C" / "remote" / keys.manifest).unlink()
    with pytest.raises(RemoteSegmentMissingError) as info:
        read("C", copy_c / "C" / "logdir", remote=copy_c / "C" / "remote", **{"rsm.config.key.prefix.mask": "true"})
    text = str(info.value)
    assert "fixture-prefix" not in text and "<prefix>/" in text and seg.segment_id in text, text
