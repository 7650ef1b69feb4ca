"""``__remote_log_metadata`` (tiered storage, KIP-405) decoded as Kafka decodes it.

The oracle is Kafka itself: ``oracle/RemoteLogMetadataGen.java`` writes a random tiered-storage
history per seed with Kafka 4.1.1's own ``RemoteLogMetadataSerde`` (see
:mod:`remote_log_metadata_oracle`), and Kafka's ``DumpLogSegments --remote-log-metadata-decoder``
prints it; ``klog dump`` must print the same lines, with the decoder named or chosen by the
partition dir's name, and decode every record strictly.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import broker_fixture
import pytest
import remote_log_metadata_oracle as oracle

from storage_core.record.file_records import FileRecords
from storage_core.record.messages.decoders import Decoder, decode_record, decoder_for_path
from storage_core.record.messages.remote import java_text

SEEDS = (16, 2026, 7, 123)


@pytest.fixture(scope="module")
def histories(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[int, Path, dict[str, object]]]:
    reason = oracle.unavailable()
    if reason is not None:
        pytest.skip(reason)
    out = []
    for seed in SEEDS:
        root = tmp_path_factory.mktemp(f"rlmm{seed}")
        truth = oracle.generate(root, seed, events=120 if seed % 2 else 60)
        out.append((seed, root / "__remote_log_metadata-0" / "00000000000000000000.log", truth))
    return out


def _kafka_dump(log: Path) -> str:
    cmd = ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Dfile.encoding=UTF-8",
           "-Dsun.stdout.encoding=UTF-8", "-cp", broker_fixture.classpath(), broker_fixture.dump_log_segments_class(),
           "--files", str(log), "--remote-log-metadata-decoder"]
    proc = subprocess.run(cmd, capture_output=True, env=broker_fixture.java_env(), check=True, timeout=300)
    return proc.stdout.decode("utf-8")


def _klog_dump(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "storage_core.tools.cli", "dump", "--quiet", *args],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_dump_prints_what_kafka_dump_log_prints(histories: list[tuple[int, Path, dict[str, object]]]) -> None:
    for seed, log, _truth in histories:
        want = _kafka_dump(log).split("\n")
        got = _klog_dump("--remote-log-metadata-decoder", str(log)).split("\n")
        assert len(got) == len(want), f"seed {seed}: {len(got)} lines, kafka-dump-log printed {len(want)}"
        for i, (w, g) in enumerate(zip(want, got, strict=True)):
            assert g == w, f"seed {seed}: line {i + 1}\n  kafka: {w}\n  klog:  {g}"
        # the decoder is chosen by the partition dir's name, as for the other internal topics
        assert decoder_for_path(str(log)) is Decoder.REMOTE_LOG_METADATA
        assert _klog_dump("--print-data-log", str(log)).split("\n") == want, f"seed {seed}"


def test_every_record_decodes_strictly_to_kafkas_objects(histories: list[tuple[int, Path, dict[str, object]]]) -> None:
    """Each record, decoded strictly (no error tolerated), gives the Java object's ``toString()``
    the generator recorded when it serialized it; every apiKey occurs across the seeds."""
    kinds: set[str] = set()
    for seed, log, truth in histories:
        events = truth["events"]
        assert isinstance(events, list)
        records = [r for b in FileRecords(log).batches() for r in b.records()]
        assert len(records) == len(events), f"seed {seed}"
        for r, e in zip(records, events, strict=True):
            assert r.key is None, f"seed {seed}: offset {r.offset}"
            d = decode_record(Decoder.REMOTE_LOG_METADATA, r.key, r.value, strict=True)
            assert d.value is not None
            kinds.add(str(d.value["type"]))
            assert java_text(d.value) == e["toString"], f"seed {seed}: offset {r.offset}"
    assert kinds == {"REMOTE_LOG_SEGMENT_METADATA_RECORD", "REMOTE_LOG_SEGMENT_METADATA_UPDATE_RECORD",
                     "REMOTE_PARTITION_DELETE_METADATA_RECORD", "REMOTE_LOG_SEGMENT_METADATA_SNAPSHOT_RECORD"}


def test_jsonl_and_damaged_records(histories: list[tuple[int, Path, dict[str, object]]], tmp_path: Path) -> None:
    """``--jsonl`` carries each record's JSON; a value cut short is an error naming the offset in
    the dump (the rest still printed), and a typed error when decoded strictly."""
    from storage_core.errors import MessageDecodeError

    seed, log, _ = histories[0]
    lines = [json.loads(x) for x in _klog_dump("--jsonl", "--remote-log-metadata-decoder", str(log)).splitlines()]
    values = [r["value"] for line in lines for r in line.get("records", [])] or [x.get("value") for x in lines]
    assert any(v and v.get("type") == "REMOTE_LOG_SEGMENT_METADATA_RECORD" for v in values), f"seed {seed}"
    record = next(r for b in FileRecords(log).batches() for r in b.records())
    assert record.value is not None
    with pytest.raises(MessageDecodeError):
        decode_record(Decoder.REMOTE_LOG_METADATA, None, bytes(record.value)[:-7], strict=True)
    soft = decode_record(Decoder.REMOTE_LOG_METADATA, None, bytes(record.value)[:-7])
    assert soft.error is not None and soft.value is not None and "raw" in soft.value


# --- the replay: what the broker's metadata store makes of the events ----------------------------


def _replayed(log: Path) -> dict[tuple[str, int], object]:
    from storage_core.log.remote_metadata import replay

    events = [decode_record(Decoder.REMOTE_LOG_METADATA, r.key, r.value).value
              for b in FileRecords(log).batches() for r in b.records()]
    return replay(e for e in events if e is not None)  # type: ignore[return-value]


def test_replay_equals_kafkas_remote_partition_metadata_store(
        histories: list[tuple[int, Path, dict[str, object]]]) -> None:
    """Per partition the replay holds the segments Kafka's ``RemotePartitionMetadataStore`` lists,
    per leader epoch the same segments, the same highest offsets, and serves every probed offset
    of every epoch (around each segment's and epoch's bounds) from the same segment: the overlapping
    uploads of leader changes resolved as the broker resolves them."""
    from storage_core.log.remote_metadata import RemotePartition

    checked = 0
    for seed, log, truth in histories:
        parts = _replayed(log)
        partitions = truth["partitions"]
        assert isinstance(partitions, list)
        for t in partitions:
            key = (t["topicId"], t["partition"])
            where = f"seed {seed}: {t['topic']}-{t['partition']}"
            if t["error"] is not None or t["segments"] is None:  # the partition's delete finished
                assert key not in parts, f"{where}: Kafka's store forgot it ({t['error']})"
                continue
            part = parts.get(key)
            if part is None:
                assert t["segments"] == [], where
                continue
            assert isinstance(part, RemotePartition)
            assert set(part.segments) == {s["segmentId"] for s in t["segments"]}, where
            for s in t["segments"]:
                mine = part.segments[s["segmentId"]]
                assert (mine.start_offset, mine.end_offset, mine.state.name, mine.broker_id) == \
                       (s["startOffset"], s["endOffset"], s["state"], s["brokerId"]), f"{where}: {s['segmentId']}"
            for epoch, ids in (t["byEpoch"] or {}).items():
                got = part.epoch_segments(int(epoch))
                assert {s.segment_id for s in got} == set(ids), f"{where}: epoch {epoch}"
            for epoch, high in (t["highestOffset"] or {}).items():
                assert part.highest_offset(int(epoch)) == high, f"{where}: epoch {epoch}"
            for epoch, probes in (t["lookup"] or {}).items():
                for offset, want in probes.items():
                    seg = part.segment_for(int(epoch), int(offset))
                    assert (None if seg is None else seg.segment_id) == want, \
                        f"{where}: epoch {epoch} offset {offset}"
                    checked += 1
    assert checked > 200, f"only {checked} lookups compared"
