"""The benchmarks still run (tiny sizes; the figures themselves come from ``make bench``)."""

from __future__ import annotations

import pytest

from benchmarks import decode


def test_decode_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    decode.main(["--records", "2000", "--repeat", "1"])
    out = capsys.readouterr().out
    assert "ratio uncompressed klog/kafka-python:" in out
    assert "ratio lz4 klog/kafka-python:" in out


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
    assert "ratio klog/ceiling throughput:" in out and "ratio tail-range/full-scan time:" in out


@pytest.mark.spark
def test_spark_write_benchmark_runs(spark, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    from benchmarks import spark_write

    spark_write.main(["--records", "20000", "--repeat", "1"])
    out = capsys.readouterr().out
    assert "ratio klog/parquet time:" in out and "ratio klog/ceiling throughput:" in out


def test_fuzz_entry_point_runs() -> None:
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("fuzz_decode", Path(__file__).parent.parent / "fuzz" / "decode.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["3000"]) == 0


def test_compaction_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import compaction

    compaction.main(["--mb", "4"])
    out = capsys.readouterr().out
    assert "compaction:" in out and "plain copy:" in out and "ratio compaction/copy throughput:" in out
