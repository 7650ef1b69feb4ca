"""Random Protobuf messages for the ``confluent-protobuf`` tests, each with the row Spark's
``from_protobuf`` gives it, known because the generator chose which fields to set and to what.

The messages go out as proto3 JSON for Confluent's serializer (``oracle/ConfluentProtobuf.java``
parses them with protobuf's JsonFormat into a DynamicMessage); the truth is the generator's, written
independently of klog's decoder. Spark's rules it encodes (its ``SchemaConverters`` and
``ProtobufDeserializer``): a field is null unless repeated or a map (then empty), has an explicit
proto2 default, or is set, where a proto3 plain scalar counts as set only when it is not the
default; unsigned integers keep their bits (uint32 2^32-1 reads -1); enums read as names
(``UNKNOWN_ENUM_VALUE_<Enum>_<n>`` for a number the enum lacks); Timestamp and Duration as
microseconds; a message with no fields (Empty) is left out; map keys and values as they are.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import random
import struct
from typing import Any

PACKAGE = "klog.test"
ROOT = "orders.proto"
COMMON = "common.proto"
KEYS = "keys.proto"

#: proto2, imported by the root file: a Confluent reference (subject "common.proto")
COMMON_PROTO = """syntax = "proto2";
package klog.common;

message Legacy {
  optional int32 p = 1 [default = 7];
  optional string q = 2;
  repeated int32 r = 3;
  required bool ok = 4;
}
"""

ORDERS_PROTO = """syntax = "proto3";
package klog.test;

import "google/protobuf/timestamp.proto";
import "google/protobuf/duration.proto";
import "google/protobuf/wrappers.proto";
import "google/protobuf/empty.proto";
import "common.proto";

message Order {
  enum Status {
    UNKNOWN = 0;
    OPEN = 1;
    CLOSED = 2;
  }
  message Line {
    message Inner {
      double price = 1;
      repeated bool flags = 2;
    }
    string sku = 1;
    int32 qty = 2;
    Inner inner = 3;
  }
  int32 i32 = 1;
  int64 i64 = 2;
  uint32 u32 = 3;
  uint64 u64 = 4;
  sint32 s32 = 5;
  sint64 s64 = 6;
  fixed32 f32 = 7;
  fixed64 f64 = 8;
  sfixed32 sf32 = 9;
  sfixed64 sf64 = 10;
  float fl = 11;
  double db = 12;
  bool b = 13;
  string s = 14;
  bytes by = 15;
  Status status = 16;
  optional int32 opt = 17;
  Line line = 18;
  repeated Line lines = 19;
  repeated int64 nums = 20;
  repeated string tags = 21;
  repeated Status statuses = 22;
  map<string, int32> counts = 23;
  map<int64, Line> by_id = 24;
  oneof choice {
    string name = 25;
    Line picked = 26;
    int32 number = 27;
  }
  google.protobuf.Timestamp ts = 28;
  google.protobuf.Duration dur = 29;
  google.protobuf.Int32Value w_i32 = 30;
  google.protobuf.StringValue w_s = 31;
  google.protobuf.BoolValue w_b = 32;
  google.protobuf.Empty nothing = 33;
  klog.common.Legacy legacy = 34;
  repeated google.protobuf.Timestamp times = 35;
  repeated double ds = 36;
}

message Other {
  string x = 1;
}
"""

KEYS_PROTO = """syntax = "proto3";
package klog.test;

message OrderKey {
  string id = 1;
  uint32 shard = 2;
}
"""

FILES = {ROOT: ORDERS_PROTO, COMMON: COMMON_PROTO}
ORDER = f"{PACKAGE}.Order"
OTHER = f"{PACKAGE}.Other"
LINE = f"{PACKAGE}.Order.Line"
ORDER_KEY = f"{PACKAGE}.OrderKey"
STATUS = ("UNKNOWN", "OPEN", "CLOSED")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def _f32(r: random.Random) -> float:
    return float(struct.unpack("<f", struct.pack("<f", r.uniform(-1e6, 1e6)))[0])


def _s32(v: int) -> int:
    return v - (1 << 32) if v >= 1 << 31 else v


def _s64(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


class Gen:
    """One seeded stream of messages; each call gives ``(proto3 JSON object, expected row)``, the row in
    the form :func:`normalise` gives klog's values (bytes base64, times as microseconds)."""

    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)

    def _maybe(self, p: float = 0.5) -> bool:
        return self.r.random() < p

    def _plain(self, kind: str) -> tuple[Any, Any]:
        """A proto3 plain scalar: (JSON value, the row's value: null when it is the default)."""
        r = self.r
        zero = self._maybe(0.2)
        if kind == "i32":
            v = 0 if zero else r.randint(-2**31, 2**31 - 1)
            return v, v or None
        if kind == "i64":
            v = 0 if zero else r.randint(-2**63, 2**63 - 1)
            return str(v), v or None
        if kind == "u32":
            v = 0 if zero else r.choice([r.randint(1, 2**32 - 1), 2**32 - 1, 2**31])
            return v, _s32(v) or None
        if kind == "u64":
            v = 0 if zero else r.choice([r.randint(1, 2**64 - 1), 2**64 - 1, 2**63])
            return str(v), _s64(v) or None
        if kind == "f32":
            v = 0.0 if zero else _f32(r)
            return v, v or None
        if kind == "f64":
            v = 0.0 if zero else r.choice([r.uniform(-1e300, 1e300), float("inf"), float("nan"), 1e-310])
            j: Any = v if v == v and abs(v) != float("inf") else ("NaN" if v != v else "Infinity")
            return j, (None if v == 0 else ("NaN" if v != v else ("Infinity" if v == float("inf") else v)))
        if kind == "bool":
            v = self._maybe()
            return v, v or None
        if kind == "str":
            v = "" if zero else "".join(r.choice("abcé€𝄞 ") for _ in range(r.randint(1, 12)))
            return v, v or None
        if kind == "bytes":
            v = b"" if zero else r.randbytes(r.randint(1, 20))
            return _b64(v), _b64(v) if v else None
        raise ValueError(kind)

    def _enum(self) -> tuple[Any, Any]:
        n = self.r.choice([0, 1, 2, 1, 2, 9])
        json_v = STATUS[n] if n < 3 else n
        return json_v, (None if n == 0 else (STATUS[n] if n < 3 else f"UNKNOWN_ENUM_VALUE_Status_{n}"))

    def _enum_raw(self) -> tuple[Any, Any]:
        n = self.r.choice([0, 1, 2, 9])
        return (STATUS[n] if n < 3 else n), (STATUS[n] if n < 3 else f"UNKNOWN_ENUM_VALUE_Status_{n}")

    def _inner(self) -> tuple[dict[str, Any], dict[str, Any]]:
        j: dict[str, Any] = {}
        row: dict[str, Any] = {"price": None, "flags": []}
        if self._maybe():
            j["price"], row["price"] = self._plain("f64")
        if self._maybe():
            flags = [self._maybe() for _ in range(self.r.randint(0, 4))]
            j["flags"], row["flags"] = flags, flags
        return j, row

    def line(self) -> tuple[dict[str, Any], dict[str, Any]]:
        j: dict[str, Any] = {}
        row: dict[str, Any] = {"sku": None, "qty": None, "inner": None}
        if self._maybe(0.8):
            j["sku"], row["sku"] = self._plain("str")
        if self._maybe(0.8):
            j["qty"], row["qty"] = self._plain("i32")
        if self._maybe(0.4):
            j["inner"], row["inner"] = self._inner()
        return j, row

    def _timestamp(self) -> tuple[str, int]:
        seconds = self.r.randint(-62135596800, 253402300799)
        nanos = self.r.choice([0, self.r.randint(0, 999_999_999), 1500, 999])
        when = dt.datetime.fromtimestamp(seconds, dt.timezone.utc) if seconds >= 0 else \
            _EPOCH + dt.timedelta(seconds=seconds)
        text = (f"{when.year:04d}-{when.month:02d}-{when.day:02d}T{when.hour:02d}:{when.minute:02d}:"
                f"{when.second:02d}" + (f".{nanos:09d}" if nanos else "") + "Z")
        return text, seconds * 1_000_000 + nanos // 1000

    def _duration(self) -> tuple[str, int]:
        seconds = self.r.randint(-315_576_000_000, 315_576_000_000) if self._maybe(0.3) else self.r.randint(-10**6, 10**6)
        nanos = self.r.randint(0, 999_999_999)
        if seconds < 0:
            nanos = -nanos
        elif seconds == 0 and self._maybe():
            nanos = -nanos
        sign = "-" if seconds < 0 or nanos < 0 else ""
        text = f"{sign}{abs(seconds)}.{abs(nanos):09d}s"
        micros = seconds * 1_000_000 + (nanos // 1000 if nanos >= 0 else -(-nanos // 1000))
        return text, micros

    def order(self) -> tuple[dict[str, Any], dict[str, Any]]:
        r = self.r
        j: dict[str, Any] = {}
        row: dict[str, Any] = {}
        for name, kind in (("i32", "i32"), ("i64", "i64"), ("u32", "u32"), ("u64", "u64"), ("s32", "i32"),
                           ("s64", "i64"), ("f32", "u32"), ("f64", "u64"), ("sf32", "i32"), ("sf64", "i64"),
                           ("fl", "f32"), ("db", "f64"), ("b", "bool"), ("s", "str"), ("by", "bytes")):
            row[name] = None
            if self._maybe(0.7):
                j[name], row[name] = self._plain(kind)
        row["status"] = None
        if self._maybe(0.7):
            j["status"], row["status"] = self._enum()
        row["opt"] = None
        if self._maybe():  # optional: present even when 0
            v = r.choice([0, r.randint(-100, 100)])
            j["opt"], row["opt"] = v, v
        row["line"] = None
        if self._maybe():
            j["line"], row["line"] = self.line()
        lines = [self.line() for _ in range(r.choice([0, 0, 1, 3]))]
        row["lines"] = [x[1] for x in lines]
        if lines:
            j["lines"] = [x[0] for x in lines]
        nums = [r.randint(-2**63, 2**63 - 1) for _ in range(r.choice([0, 2, 5]))] + ([0] if self._maybe(0.3) else [])
        row["nums"] = nums
        if nums:
            j["nums"] = [str(n) for n in nums]
        tags = [self._plain("str")[0] for _ in range(r.choice([0, 1, 3]))]
        row["tags"] = tags
        if tags:
            j["tags"] = tags
        statuses = [self._enum_raw() for _ in range(r.choice([0, 2]))]
        row["statuses"] = [s[1] for s in statuses]
        if statuses:
            j["statuses"] = [s[0] for s in statuses]
        counts = {f"k{i}": r.choice([0, r.randint(-5, 5)]) for i in range(r.choice([0, 1, 3]))}
        row["counts"] = counts
        if counts:
            j["counts"] = counts
        by_id: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}
        for _ in range(r.choice([0, 2])):
            by_id[r.choice([0, r.randint(-2**63, 2**63 - 1)])] = self.line()
        row["by_id"] = {str(k): v[1] for k, v in by_id.items()}
        if by_id:
            j["by_id"] = {str(k): v[0] for k, v in by_id.items()}
        row["name"] = row["picked"] = row["number"] = None
        pick = r.choice(["", "name", "picked", "number"])
        if pick == "name":  # a oneof member is set even at its default
            v = r.choice(["", "chosen"])
            j["name"], row["name"] = v, v
        elif pick == "picked":
            j["picked"], row["picked"] = self.line()
        elif pick == "number":
            v = r.choice([0, r.randint(1, 99)])
            j["number"], row["number"] = v, v
        row["ts"] = None
        if self._maybe():
            j["ts"], row["ts"] = self._timestamp()
        row["dur"] = None
        if self._maybe():
            j["dur"], row["dur"] = self._duration()
        for name, kind in (("w_i32", "i32"), ("w_s", "str"), ("w_b", "bool")):
            row[name] = None
            if self._maybe():
                jv, inner = self._plain(kind)  # the wrapper is set; its value field is a plain scalar
                j[name], row[name] = jv, {"value": inner}
        if self._maybe():
            j["nothing"] = {}  # Empty: no column
        row["legacy"] = None
        if self._maybe():
            leg: dict[str, Any] = {"ok": self._maybe()}
            leg_row: dict[str, Any] = {"p": 7, "q": None, "r": [], "ok": leg["ok"]}
            if self._maybe():
                leg["p"] = leg_row["p"] = r.choice([0, 7, r.randint(-9, 9)])
            if self._maybe():
                leg["q"] = leg_row["q"] = r.choice(["", "legacy"])
            if self._maybe():
                leg["r"] = leg_row["r"] = [r.randint(-9, 9) for _ in range(3)]
            j["legacy"], row["legacy"] = leg, leg_row
        times = [self._timestamp() for _ in range(r.choice([0, 2]))]
        row["times"] = [t[1] for t in times]
        if times:
            j["times"] = [t[0] for t in times]
        ds = [r.choice([0.0, -0.0, 1.5, float("nan")]) for _ in range(r.choice([0, 3]))]
        row["ds"] = ["NaN" if d != d else d for d in ds]
        if ds:
            j["ds"] = ["NaN" if d != d else d for d in ds]
        return j, row

    def key(self) -> tuple[dict[str, Any], dict[str, Any]]:
        j: dict[str, Any] = {"id": f"o-{self.r.randint(0, 10**6)}"}
        row: dict[str, Any] = {"id": j["id"], "shard": None}
        if self._maybe():
            j["shard"], row["shard"] = self._plain("u32")
        return j, row


def dumps(j: dict[str, Any]) -> str:
    return json.dumps(j, ensure_ascii=False)
