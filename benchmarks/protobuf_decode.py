"""Protobuf decode throughput: klog's ``valueFormat=confluent-protobuf`` against a loop of protobuf's own parser.

``--records`` Confluent-framed Protobuf values (magic 0, schema id, message indexes ``[0]``, the
message) of a 10-field message (ints, strings, a double, a proto3 ``optional``, an enum, a
Timestamp, a repeated int64, a nested message) are made with protobuf's runtime from the schema
klog compiles, and written into a log dir with the ``_schemas`` record that registers the schema.
In this process, each best of ``--repeat``:

* ``klog``: :meth:`storage_core.read.protobuf.ProtobufDecoder.decode` of the value column (already
  read into Arrow): every record's header and message indexes checked, the message parsed and the
  Arrow struct column built in Spark's types (presence rules, enum names, timestamps);
* ``protobuf loop``: ``Order.FromString(value[6:])`` for every value (protobuf's C parser, upb): the
  parsing alone, nothing checked, no column built;
* ``klog read_arrow`` and ``klog read_arrow raw``: the whole read with and without decoding.

Before timing, klog's column is checked against the parsed messages. The line to grep:
``ratio protobuf klog/protobuf-loop throughput: <x>x``.
"""

from __future__ import annotations

import argparse
import random
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks import _summary as summary
from benchmarks.avro_decode import time_each, write_log_dir

DEFAULT_RECORDS = 200_000
DEFAULT_REPEAT = 3
SCHEMA_ID = 1
TOPIC = "protobuf_bench"
SCHEMA = """syntax = "proto3";
package bench;
import "google/protobuf/timestamp.proto";

message Order {
  enum Status { NEW = 0; PAID = 1; SHIPPED = 2; }
  message Line { string sku = 1; int32 qty = 2; }
  int64 order_id = 1;
  string customer = 2;
  string product = 3;
  int32 quantity = 4;
  double price = 5;
  optional string note = 6;
  Status status = 7;
  google.protobuf.Timestamp ts = 8;
  repeated int64 tags = 9;
  Line line = 10;
}
"""


def make_values(order_class: Any, n: int, seed: int = 7) -> list[bytes]:
    rng = random.Random(seed)
    header = b"\x00" + SCHEMA_ID.to_bytes(4, "big") + b"\x00"
    out = []
    for i in range(n):
        m = order_class(order_id=i, customer=f"customer-{rng.randrange(100_000)}", product=f"sku-{rng.randrange(5000)}",
                        quantity=rng.randrange(1, 20), price=rng.random() * 100, status=rng.randrange(3),
                        tags=[rng.getrandbits(40) for _ in range(rng.randrange(4))])
        if i % 3 == 0:
            m.note = f"note {rng.getrandbits(32):x}"
        m.ts.seconds, m.ts.nanos = 1_700_000_000 + i, rng.randrange(10**9)
        m.line.sku, m.line.qty = f"sku-{i % 97}", rng.randrange(5)
        out.append(header + m.SerializeToString())
    return out


def run(records: int, repeat: int) -> dict[str, float]:
    import storage_core as klog
    from storage_core.read.protobuf import ProtobufDecoder
    from storage_core.read.schema_registry import RegisteredSchema, SchemaRegistry, load_registry

    with tempfile.TemporaryDirectory(prefix="klog-protobuf-bench-") as tmp:
        root = Path(tmp)
        # the message class from the schema as klog compiles it, before the log dir holds anything
        order = ProtobufDecoder(SchemaRegistry(), RegisteredSchema(f"{TOPIC}-value", 1, SCHEMA_ID, SCHEMA,
                                                                   "PROTOBUF"))._reader_class()
        values = make_values(order, records)
        write_log_dir(root, values, topic=TOPIC, schema=SCHEMA, schema_type="PROTOBUF")
        registry = load_registry([root])
        decoder = ProtobufDecoder(registry, registry.require_latest(f"{TOPIC}-value"))
        raw = klog.read_arrow(root, topics=TOPIC).read_all().combine_chunks()
        column, offsets = raw.column("value").chunk(0), raw.column("offset").chunk(0)

        def klog_decode() -> Any:
            return decoder.decode(column, offsets, topic=TOPIC, partition=0, what="value", permissive=False)

        def protobuf_loop() -> list[Any]:
            parse = order.FromString
            return [parse(v[6:]) for v in values]

        def read_decoded() -> Any:
            return klog.read_arrow(root, topics=TOPIC, valueFormat="confluent-protobuf").read_all()

        def read_raw() -> Any:
            return klog.read_arrow(root, topics=TOPIC).read_all()

        for g, w in zip(klog_decode().to_pylist(), protobuf_loop(), strict=True):  # the same, or nothing is timed
            if g["order_id"] != (w.order_id or None) or g["customer"] != w.customer or g["tags"] != list(w.tags) \
                    or g["note"] != (w.note if w.HasField("note") else None) or g["line"]["sku"] != w.line.sku:
                raise AssertionError(f"klog decoded {g}, protobuf {w}")
        times, rss = time_each((("klog", klog_decode), ("protobuf loop", protobuf_loop),
                                ("klog read_arrow", read_decoded), ("klog read_arrow raw", read_raw)),
                               repeat, records, sum(map(len, values)))
        ratio = times["protobuf loop"] / times["klog"]
        print(f"ratio protobuf klog/protobuf-loop throughput: {ratio:.3f}x")
        summary.add(summary.Row(
            what="Protobuf decode (confluent-protobuf → Arrow struct)",
            klog=f"{records / times['klog'] / 1e3:.0f} k rec/s", peer=f"protobuf (upb) FromString loop "
            f"{records / times['protobuf loop'] / 1e3:.0f} k rec/s", ratio=ratio, ratio_means="throughput",
            target=None, peak_rss=rss["klog"]))
        return times


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.protobuf_decode",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=DEFAULT_RECORDS)
    parser.add_argument("--repeat", type=int, default=DEFAULT_REPEAT)
    args = parser.parse_args(argv)
    print(f"Protobuf decode: {args.records} records, best of {args.repeat}")
    run(args.records, args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
