"""The benchmarks still run (tiny sizes; the figures themselves come from ``make bench``)."""

from __future__ import annotations

import pytest

from benchmarks import decode


def test_decode_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    decode.main(["--records", "2000", "--repeat", "1"])
    out = capsys.readouterr().out
    assert "ratio uncompressed klog/kafka-python:" in out
    assert "ratio lz4 klog/kafka-python:" in out
    assert "ratio txn uncompressed read_committed/read_uncommitted time:" in out
    assert "ratio txn lz4 read_committed/read_uncommitted time:" in out


def test_encode_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import encode

    encode.main(["--records", "2000", "--repeat", "1"])
    out = capsys.readouterr().out
    assert "ratio encode klog/kafka-python:" in out and "peak RSS:" in out


def test_engine_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import engine

    engine.main(["--records", "5000", "--repeat", "1"])
    out = capsys.readouterr().out
    assert "ratio append klog/plain-write time:" in out
    assert "ratio tail read 200-segment/1-segment:" in out


@pytest.mark.spark
def test_spark_read_benchmark_runs(spark, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    from benchmarks import spark_read

    spark_read.main(["--records", "20000", "--repeat", "1"])
    out = capsys.readouterr().out
    assert "ratio none klog/ceiling throughput:" in out and "ratio lz4 tail-range/full-scan time:" in out


@pytest.mark.spark
def test_spark_write_benchmark_runs(spark, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    from benchmarks import spark_write

    spark_write.main(["--records", "20000", "--repeat", "1"])
    out = capsys.readouterr().out
    assert "ratio klog/parquet time:" in out and "ratio klog/ceiling throughput:" in out


def test_scale_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import scale

    scale.main(["--sizes", "1,10", "--repeat", "1"])
    out = capsys.readouterr().out
    assert "ratio plan 10/1" in out and "ratio idle trigger 10/1" in out and "| 10 |" in out


def test_cluster_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import cluster

    cluster.main(["--partitions", "20", "--read-partitions", "2", "--records", "2000", "--repeat", "1"])
    out = capsys.readouterr().out
    assert "describe, 20 partitions: one broker's dir" in out and "three brokers'" in out and "(target <= 1.1x)" in out


def test_fuzz_entry_point_runs() -> None:
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("fuzz_decode", Path(__file__).parent.parent / "fuzz" / "decode.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["3000"]) == 0


def test_compaction_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import _summary, compaction

    compaction.main(["--mb", "4"])
    out = capsys.readouterr().out
    assert "compaction:" in out and "plain copy:" in out and "ratio compaction/copy throughput:" in out
    row = _summary.rows()[-1]
    assert row.what.startswith("compaction,") and row.target == compaction.TARGET_RATIO


def test_big_partition_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """The engine half (fresh processes running read_partition); the Spark half is the Spark tests'."""
    from benchmarks import big_partition

    big_partition.main(["--gb", "0.03", "--repeat", "1", "--no-spark"])
    out = capsys.readouterr().out
    assert "ratio engine tail/full-scan time:" in out and "peak RSS engine full scan" in out


def test_benchmarks_add_their_rows_to_the_summary_table() -> None:
    """``python -m benchmarks`` ends with the table of the rows every benchmark added."""
    from benchmarks import _summary

    before = len(_summary.rows())
    decode.main(["--records", "1500", "--repeat", "1", "--no-pure-python"])
    rows = _summary.rows()[before:]
    assert [r.what.split(",")[0] for r in rows] == ["columnar decode"] * 5
    assert [r.what.split(",")[1].strip() for r in rows[3:]] == ["read_committed vs read_uncommitted on the same "
                                                               "transactional data"] * 2
    assert all(r.ratio > 0 and r.peak_rss for r in rows)
    table = _summary.table(rows)
    assert table.splitlines()[0] == "| what | klog | peer in the same run | ratio | target | met | peak RSS |"
    assert "≥ 50×" in table and "≤ 1.25×" in table and "≤ 1.2×" in table and "MiB |" in table


def test_the_runner_refuses_an_unknown_benchmark(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import __main__ as runner

    with pytest.raises(SystemExit) as exc:
        runner.main(["nonesuch"])
    assert exc.value.code == 2
    assert "unknown benchmark(s) nonesuch; available: avro_decode, big_partition, cluster, compaction, decode, encode" in \
        capsys.readouterr().err


@pytest.mark.spark
def test_export_benchmark_runs(spark, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    from benchmarks import export

    export.main(["--records", "20000", "--repeat", "1", "--codecs", "lz4"])
    out = capsys.readouterr().out
    assert "klog export, Parquet none" in out and "ratio to Spark per core:" in out


def test_avro_decode_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import avro_decode

    avro_decode.main(["--records", "2000", "--repeat", "1"])
    out = capsys.readouterr().out
    assert "ratio avro klog/fastavro-loop throughput:" in out


def test_protobuf_decode_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("grpc_tools", reason="valueFormat=confluent-protobuf needs klog[protobuf] (grpcio-tools)")
    from benchmarks import protobuf_decode

    protobuf_decode.main(["--records", "2000", "--repeat", "1"])
    out = capsys.readouterr().out
    assert "ratio protobuf klog/protobuf-loop throughput:" in out


@pytest.mark.interop
def test_kafka_filerecords_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    from kafka_oracle import oracle_available

    from benchmarks import kafka_filerecords

    kafka_filerecords.main(["--mb", "0.1", "--repeat", "1"])
    out = capsys.readouterr().out
    if oracle_available(kafka_filerecords.HARNESS) is not None:
        assert "Kafka's FileRecords not measured" in out
    else:
        for codec in kafka_filerecords.CODECS:
            assert f"ratio {codec} klog/FileRecords throughput (worst of 4 shapes):" in out
            assert f"ratio {codec} klog/FileRecords throughput, 10-byte values (worst of 2 shapes):" in out
    for codec in kafka_filerecords.CODECS[1:]:  # the codec floor is measured with or without Java
        assert f"ratio {codec} klog decode/{codec} alone time (worst shape):" in out


def test_object_store_snapshot_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import object_store

    object_store.main(["--mb", "4", "--repeat", "1", "--no-s3"])
    out = capsys.readouterr().out
    assert "local plain copy:" in out and "ratio snapshot/copy local throughput:" in out


@pytest.mark.spark
@pytest.mark.broker
def test_kafka_source_benchmark_runs(spark, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    import spark_kafka
    from broker_fixture import required, unavailable

    from benchmarks import kafka_source

    for reason in (unavailable(), spark_kafka.unavailable()):
        if reason is not None:
            if required():
                pytest.fail(f"KLOG_REQUIRE_BROKER=1 but {reason}")
            pytest.skip(reason)
    # two rounds: from the second on, each side writes into a place of its own (a new topic, a new dir)
    kafka_source.main(["--records", "8000", "--repeat", "2", "--seconds", "1.5", "--rate", "300"])
    out = capsys.readouterr().out
    assert "ratio full scan klog/kafka-source throughput:" in out and "ratio tail klog/kafka-source" in out
    assert "ratio batch write lz4 klog/kafka-sink throughput:" in out and "ratio stream p99 latency" in out
    assert "ratio batch write none klog/kafka-sink throughput:" in out


def test_threads_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import _summary, threads

    threads.main(["--records", "16000", "--compact-mb", "2", "--repeat", "1"])
    out = capsys.readouterr().out
    for what in ("read 2 threads/1 thread", "read 2 processes/1 thread", "export 2 threads/1 thread",
                 "export_pp 2 threads/1 thread", "export_pp 2 processes/1 thread", "compact 2 workers/1 worker"):
        assert f"ratio {what} throughput:" in out, out
    rows = _summary.rows()[-6:]
    assert [r.target for r in rows] == [threads.TARGET_READ, None, threads.TARGET_READ, threads.TARGET_READ, None,
                                        threads.TARGET_COMPACT]
    assert "--per-partition" in rows[3].what, rows[3]
    assert all("two processes" in rows[i].what and rows[i].ratio > 0 for i in (1, 4)), rows


@pytest.mark.spark
@pytest.mark.broker
def test_tiered_benchmark_runs(spark, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    """The tiered full-scan benchmark end to end at a few MB (it checks the three reads agree)."""
    import spark_kafka
    from broker_fixture import required, unavailable

    from benchmarks import tiered

    for reason in (unavailable(), spark_kafka.unavailable()):
        if reason is not None:
            if required():
                pytest.fail(f"KLOG_REQUIRE_BROKER=1 but {reason}")
            pytest.skip(reason)
    tiered.main(["--mb", "12", "--segment-mb", "1", "--repeat", "1", "--no-s3"])
    out = capsys.readouterr().out
    assert "ratio tiered/plain-dir throughput:" in out and "MB of segments" in out


def test_sync_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """klog sync into Iceberg and Delta against klog export, end to end at a few thousand records."""
    from benchmarks import _summary
    from benchmarks import sync as sync_bench

    sync_bench.main(["--records", "16000", "--repeat", "1"])
    out = capsys.readouterr().out
    for fmt in ("iceberg", "delta"):
        assert f"ratio sync {fmt}/export throughput:" in out, out
    rows = _summary.rows()[-2:]
    assert [r.target for r in rows] == [sync_bench.TARGET] * 2 and all(r.ratio > 0 for r in rows)


def test_restore_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import restore

    restore.main(["--records", "2000", "--repeat", "1"])
    out = capsys.readouterr().out
    assert "ratio restore/export zstd throughput:" in out and "ratio restore/export none throughput:" in out
