"""klog's message tables equal the schemas of the Kafka releases the tests run (issue 56).

Kafka ships no JSON message definitions in its jars, but the classes its message generator made of
them: each holds ``SCHEMAS``, one ``Schema`` per version (``oracle/KafkaSchemas.java`` prints them).
For every message Kafka writes into ``__consumer_offsets``, ``__transaction_state``,
``__share_group_state``, ``__cluster_metadata`` and ``__remote_log_metadata`` (and the client
messages inside them), klog's table must

- exist, under the release's apiKey (record type);
- know every version the release knows (a newer release's new version fails here first);
- have, at each version, the release's fields in the release's order, with its types, nullability
  and tags (a field klog misses would be read as the next one's bytes; a tag klog misses is left as
  ``_unknownTaggedFields``).

klog's tables follow the newest release (:data:`NEWEST`): their version ranges are that release's,
no more; an older release's are a prefix of them, field for field.
"""

from __future__ import annotations

import json
import subprocess
from functools import cache
from typing import Any

import broker_fixture
import pytest
from broker_fixture import JAVA

from storage_core.record.messages import clients, coordinator, metadata, remote
from storage_core.record.messages.codec import _default
from storage_core.record.messages.schema import FieldSpec, Kind, MessageSpec

pytestmark = pytest.mark.interop

ORACLE = JAVA / "KafkaSchemas.java"
NEWEST = "4.4.0"
RELEASES = [NEWEST, "4.1.1"]

#: Kafka classes klog reads by another message: a type-0 key's value is OffsetCommitValue v0
#: (``LegacyOffsetCommitValue`` has that version's fields); ``ProducerSnapshot`` is the producer
#: snapshot file's layout, which ``storage_core.log.producer_state`` reads (and its tests check).
ALIASES = {"LegacyOffsetCommitValue": "OffsetCommitValue"}
NOT_RECORDS = {"ProducerSnapshot"}


def klog_specs() -> dict[str, tuple[str, MessageSpec]]:
    """Every message klog's decoders read, by name, with the table it is in."""
    out: dict[str, tuple[str, MessageSpec]] = {}
    for table_name, table in (("group", coordinator.GROUP_RECORDS), ("transaction", coordinator.TRANSACTION_RECORDS),
                              ("share", coordinator.SHARE_STATE_RECORDS)):
        for k, v in table.values():
            out[k.name] = (table_name, k)
            out[v.name] = (table_name, v)
    for m in metadata.METADATA_RECORDS.values():
        out[m.name] = ("metadata", m)
    for m in remote.REMOTE_LOG_METADATA_RECORDS.values():
        out[m.name] = ("remote", m)
    for m in (clients.CONSUMER_PROTOCOL_SUBSCRIPTION, clients.CONSUMER_PROTOCOL_ASSIGNMENT,
              clients.LEADER_CHANGE_MESSAGE, clients.SNAPSHOT_HEADER_RECORD, clients.SNAPSHOT_FOOTER_RECORD,
              clients.KRAFT_VERSION_RECORD, clients.VOTERS_RECORD):
        out[m.name] = ("clients", m)
    return out


@cache
def kafka_schemas(version: str) -> dict[str, dict[str, Any]]:
    reason = broker_fixture.skip_reason(lambda: broker_fixture.classpath(ORACLE, version=version))
    if reason is not None:
        if broker_fixture.required():
            pytest.fail(reason)
        pytest.skip(reason)
    proc = subprocess.run(["java", "-XX:TieredStopAtLevel=1", "-cp", broker_fixture.classpath(ORACLE, version=version),
                           "KafkaSchemas"],
                          capture_output=True, text=True, timeout=300, check=True, env=broker_fixture.java_env())
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    return {r["class"]: r for r in rows if r["class"] not in NOT_RECORDS}


def snake(name: str) -> str:
    """Kafka's ``MessageGenerator.toSnakeCase``: the name a generated ``Schema`` gives a field."""
    out, prev_capital = [], True
    for c in name:
        if c.isupper():
            if not prev_capital:
                out.append("_")
            out.append(c.lower())
            prev_capital = True
        else:
            out.append(c)
            prev_capital = False
    return "".join(out)


_PRIMS = {"BOOLEAN": "bool", "UINT16": "uint16", "UNSIGNED_INT32": "uint32", "UINT32": "uint32"}


def kafka_type(t: dict[str, Any], flexible: bool) -> Any:
    """The oracle's type, as :func:`klog_type` writes klog's."""
    if "struct" in t:
        return ["struct", t["nullable"], kafka_fields(t["struct"], flexible)]
    if "array" in t:
        return ["array", t["nullable"], kafka_type(t["array"], flexible)]
    prim = t["prim"]
    compact = prim.startswith("COMPACT_")
    base = prim.removeprefix("COMPACT_").removeprefix("NULLABLE_")
    if base in ("STRING", "BYTES") and compact != flexible:
        return ["compact encoding", compact, "of a message flexible", flexible]
    return [_PRIMS.get(base, base.lower()), t["nullable"]]


def kafka_fields(fields: list[dict[str, Any]], flexible: bool) -> list[Any]:
    regular = [[f["name"], None, kafka_type(f["type"], flexible)] for f in fields if f["tag"] is None]
    tagged = sorted(([f["name"], f["tag"], kafka_type(f["type"], flexible)] for f in fields if f["tag"] is not None),
                    key=lambda x: x[1])
    return regular + tagged


def klog_type(f: FieldSpec, version: int) -> Any:
    nullable = f.nullable.contains(version)
    kind = f.kind
    if kind is Kind.STRUCT:
        return ["struct", nullable, klog_fields(f.fields, version)]
    if kind is Kind.STRUCT_ARRAY:
        return ["array", nullable, ["struct", False, klog_fields(f.fields, version)]]
    if kind is Kind.ARRAY:
        return ["array", nullable, [f.element, False]]
    return [f.type, nullable]


def klog_fields(fields: tuple[FieldSpec, ...], version: int) -> list[Any]:
    present = [f for f in fields if f.versions.contains(version)]
    regular = [[snake(f.name), None, klog_type(f, version)] for f in present if not f.tagged.contains(version)]
    tagged = sorted(([snake(f.name), f.tag, klog_type(f, version)] for f in present if f.tagged.contains(version)),
                    key=lambda x: x[1])
    return regular + tagged


def _as_older(ours: list[Any], theirs: list[Any]) -> list[Any]:
    """klog's fields as an older release has them: without the tagged fields a later release added
    to the same version (an older broker never writes them), and a struct as nullable as the older
    generator's ``Schema`` says (4.1.1's marks no struct nullable; its generated ``read`` takes the
    null marker all the same, as the 4.1.1 dump comparisons of tests/tools/test_broker_tools.py show)."""
    by_name = {f[0]: f for f in theirs}
    out = []
    for name, tag, typ in ours:
        if tag is not None and name not in by_name:
            continue
        if name in by_name:
            typ = _type_as_older(typ, by_name[name][2])
        out.append([name, tag, typ])
    return out


def _type_as_older(ours: Any, theirs: Any) -> Any:
    if ours[0] == "struct" and theirs[0] == "struct":
        return ["struct", theirs[1], _as_older(ours[2], theirs[2])]
    if ours[0] == "array" and theirs[0] == "array":
        return ["array", ours[1], _type_as_older(ours[2], theirs[2])]
    return ours


@pytest.mark.parametrize("release", RELEASES)
def test_klog_knows_every_message_of_the_release(release: str) -> None:
    """Every message class of the release is in klog's tables under the same apiKey."""
    kafka = kafka_schemas(release)
    ours = klog_specs()
    missing = sorted(n for n in kafka if ALIASES.get(n, n) not in ours)
    assert not missing, f"Kafka {release} writes messages klog has no table for: {missing}"
    wrong_key = {n: (k["apiKey"], ours[n][1].api_key) for n, k in kafka.items()
                 if n in ours and k["apiKey"] != -1 and k["apiKey"] != ours[n][1].api_key}
    assert not wrong_key, f"apiKey (Kafka {release}, klog): {wrong_key}"


@pytest.mark.parametrize("release", RELEASES)
def test_every_version_of_the_release_has_its_fields(release: str) -> None:
    kafka = kafka_schemas(release)
    ours = klog_specs()
    problems = []
    for name, k in sorted(kafka.items()):
        if ALIASES.get(name, name) not in ours:
            continue  # test_klog_knows_every_message_of_the_release names it
        spec = ours[ALIASES.get(name, name)][1]
        versions = [int(v) for v in k["versions"]]
        unknown = [v for v in versions if not spec.valid.contains(v)]
        if unknown:
            problems.append(f"{name}: Kafka {release} has versions {k['lowest']}-{k['highest']}, klog {spec.valid} "
                            f"({spec.source})")
            continue
        if release == NEWEST and name not in ALIASES and (spec.valid.low, spec.highest) != (k["lowest"], k["highest"]):
            problems.append(f"{name}: klog's versions {spec.valid} are not Kafka {release}'s "
                            f"{k['lowest']}-{k['highest']}")
        for v in versions:
            want = kafka_fields(k["versions"][str(v)], spec.flexible.contains(v))
            got = klog_fields(spec.fields, v)
            if release != NEWEST:
                got = _as_older(got, want)
            if want != got:
                problems.append(f"{name} v{v}: Kafka {release}'s fields\n    {want}\n  klog's\n    {got}")
    assert not problems, "\n".join(problems)


def _tagged_defaults(class_name: str, fields: tuple[FieldSpec, ...], version: int,
                     out: dict[tuple[str, str], Any]) -> None:
    for f in fields:
        if f.tagged.contains(version) and f.kind is not Kind.STRUCT:
            out[(class_name, f.json_name)] = _default(f, version)
        if f.fields:
            _tagged_defaults(f.element, f.fields, version, out)


@pytest.mark.parametrize("release", RELEASES)
def test_tagged_fields_default_as_kafka_does(release: str) -> None:
    """What a tagged field is when absent (klog's JSON leaves it out when it is that) is the value of
    the field in a new instance of Kafka's class."""
    kafka = kafka_schemas(release)
    problems = []
    for name, (_, spec) in sorted(klog_specs().items()):
        if name not in kafka:
            continue
        ours: dict[tuple[str, str], Any] = {}
        _tagged_defaults(name, spec.fields, spec.highest, ours)
        for (cls, field), value in sorted(ours.items()):
            theirs = kafka[name]["defaults"].get(cls, {})
            if field in theirs and theirs[field] != value:  # (a field newer than the release is not in theirs)
                problems.append(f"{name} {cls}.{field}: Kafka {release}'s default {theirs[field]!r}, klog's {value!r}")
    assert not problems, "\n".join(problems)
