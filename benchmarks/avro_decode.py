"""Avro decode throughput: klog's ``valueFormat=confluent-avro`` against a plain fastavro loop, same records.

``--records`` Confluent-framed Avro values (magic 0, schema id, Avro binary) of a 10-field record
(ints, longs, strings, a double, a nullable string, an enum, a ``timestamp-millis``, a
``decimal(12, 2)``) are written with fastavro into a log dir (klog's log API) with the ``_schemas``
record that registers the schema. In this process, each best of ``--repeat``:

* ``klog``: :meth:`storage_core.read.avro.AvroDecoder.decode` of the value column (already read into
  Arrow): every record's header checked, its writer schema looked up, the datum decoded and the
  Arrow struct column built in spark-avro's types (timestamps and decimals included);
* ``fastavro loop``: ``fastavro.schemaless_reader(BytesIO(value[5:]), schema)`` for every value into
  a Python list of dicts: the decoding alone, nothing checked, no column built;
* ``klog read_arrow`` and ``klog read_arrow raw``: the whole read with and without decoding, for
  information (the difference is what decoding adds to a read).

Before timing, klog's column is checked against the fastavro loop's values. The line to grep:
``ratio avro klog/fastavro-loop throughput: <x>x``.
"""

from __future__ import annotations

import argparse
import io
import json
import random
import tempfile
import time
from collections.abc import Callable, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import fastavro

from benchmarks import _summary as summary
from benchmarks._memory import peak_rss_bytes, reset_peak_rss

DEFAULT_RECORDS = 200_000
DEFAULT_REPEAT = 3
SCHEMA_ID = 1
TOPIC = "avro_bench"
SCHEMA: dict[str, Any] = {"type": "record", "name": "Order", "namespace": "bench", "fields": [
    {"name": "order_id", "type": "long"},
    {"name": "customer", "type": "string"},
    {"name": "product", "type": "string"},
    {"name": "quantity", "type": "int"},
    {"name": "price", "type": "double"},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED"]}},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
    {"name": "region", "type": "int"},
]}


def make_values(n: int, seed: int = 7) -> list[bytes]:
    """``n`` Confluent-framed Avro values."""
    import datetime as dt

    rng = random.Random(seed)
    parsed = fastavro.parse_schema(SCHEMA)
    header = b"\x00" + SCHEMA_ID.to_bytes(4, "big")
    out = []
    epoch = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
    for i in range(n):
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, {
            "order_id": i, "customer": f"customer-{rng.randrange(100_000)}", "product": f"sku-{rng.randrange(5000)}",
            "quantity": rng.randrange(1, 20), "price": rng.random() * 100,
            "note": None if i % 3 else f"note {rng.getrandbits(32):x}", "status": rng.choice(["NEW", "PAID", "SHIPPED"]),
            "ts": epoch + dt.timedelta(milliseconds=i), "amount": Decimal(rng.randrange(10**8)) / 100,
            "region": rng.randrange(50)})
        out.append(header + buf.getvalue())
    return out


def write_log_dir(root: Path, values: list[bytes], *, topic: str = TOPIC, schema: str | None = None,
                  schema_type: str = "AVRO") -> None:
    """The ``_schemas`` record registering ``schema`` (default: :data:`SCHEMA`) as ``<topic>-value``
    version 1, id :data:`SCHEMA_ID`, and ``values`` as ``topic``'s records."""
    from storage_core.log.config import LogConfig
    from storage_core.log.manager import LogManager
    from storage_core.log.topic_partition import TopicPartition
    from storage_core.record.records import Record, build_batch

    key = json.dumps({"keytype": "SCHEMA", "subject": f"{topic}-value", "version": 1, "magic": 1}).encode()
    value = json.dumps({"subject": f"{topic}-value", "version": 1, "id": SCHEMA_ID,
                        "schema": json.dumps(SCHEMA) if schema is None else schema, "schemaType": schema_type,
                        "deleted": False}).encode()
    with LogManager([root], writable=True, config=LogConfig.from_properties({})) as lm:
        lm.create_log(TopicPartition("_schemas", 0)).append(build_batch([Record(0, 0, key, value)]))
        lg = lm.create_log(TopicPartition(topic, 0))
        step = 1000
        for start in range(0, len(values), step):
            lg.append(build_batch([Record(start + i, 1_700_000_000_000, None, v)
                                   for i, v in enumerate(values[start:start + step])]))
        lm.checkpoint()


def _best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    best = float("inf")
    result = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def time_each(fns: Sequence[tuple[str, Callable[[], Any]]], repeat: int, records: int,
              nbytes: int) -> tuple[dict[str, float], dict[str, int]]:
    """Each function's best time of ``repeat`` and its peak RSS, printed as throughput of ``records``
    records (``nbytes`` bytes of values)."""
    times: dict[str, float] = {}
    rss: dict[str, int] = {}
    for name, fn in fns:
        reset_peak_rss()
        times[name], _ = _best(fn, repeat)
        rss[name] = peak_rss_bytes()
    for name, secs in times.items():
        print(f"{name:22s} {records / secs / 1e3:9.1f} k records/s  {nbytes / secs / 1e6:7.1f} MB/s  "
              f"({secs * 1e3:.1f} ms, peak RSS {rss[name] / (1 << 20):.0f} MiB)")
    return times, rss


def run(records: int, repeat: int) -> dict[str, float]:
    import storage_core as klog
    from storage_core.read.avro import AvroDecoder
    from storage_core.read.schema_registry import load_registry

    values = make_values(records)
    with tempfile.TemporaryDirectory(prefix="klog-avro-bench-") as tmp:
        root = Path(tmp)
        write_log_dir(root, values)
        registry = load_registry([root])
        raw = klog.read_arrow(root, topics=TOPIC).read_all().combine_chunks()
        column, offsets = raw.column("value").chunk(0), raw.column("offset").chunk(0)
        decoder = AvroDecoder(registry, registry.require_latest(f"{TOPIC}-value"))
        parsed = fastavro.parse_schema(SCHEMA)

        def klog_decode() -> Any:
            return decoder.decode(column, offsets, topic=TOPIC, partition=0, what="value", permissive=False)

        def fastavro_loop() -> list[Any]:
            reader = fastavro.schemaless_reader
            return [reader(io.BytesIO(v[5:]), parsed, None) for v in values]

        def read_decoded() -> Any:
            return klog.read_arrow(root, topics=TOPIC, valueFormat="confluent-avro").read_all()

        def read_raw() -> Any:
            return klog.read_arrow(root, topics=TOPIC).read_all()

        got = klog_decode().to_pylist()
        want = fastavro_loop()
        for g, w in zip(got, want, strict=True):  # the same values, or nothing is timed
            if g["order_id"] != w["order_id"] or g["amount"] != w["amount"] or g["ts"] != w["ts"] \
                    or g["note"] != w["note"] or g["status"] != w["status"]:
                raise AssertionError(f"klog decoded {g}, fastavro {w}")
        times, rss = time_each((("klog", klog_decode), ("fastavro loop", fastavro_loop),
                                ("klog read_arrow", read_decoded), ("klog read_arrow raw", read_raw)),
                               repeat, records, sum(map(len, values)))
        ratio = times["fastavro loop"] / times["klog"]
        print(f"ratio avro klog/fastavro-loop throughput: {ratio:.3f}x")
        added = times["klog read_arrow"] - times["klog read_arrow raw"]
        print(f"decoding adds {added * 1e3:.1f} ms to a {times['klog read_arrow raw'] * 1e3:.1f} ms read of "
              f"{records} records")
        summary.add(summary.Row(
            what="Avro decode (confluent-avro → Arrow struct)",
            klog=f"{records / times['klog'] / 1e3:.0f} k rec/s", peer=f"fastavro schemaless_reader loop "
            f"{records / times['fastavro loop'] / 1e3:.0f} k rec/s", ratio=ratio, ratio_means="throughput",
            target=None, peak_rss=rss["klog"]))
        return times


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.avro_decode", description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=DEFAULT_RECORDS)
    parser.add_argument("--repeat", type=int, default=DEFAULT_REPEAT)
    args = parser.parse_args(argv)
    print(f"Avro decode: {args.records} records, best of {args.repeat}")
    run(args.records, args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
