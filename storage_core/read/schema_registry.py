"""A Schema Registry's state, rebuilt from its ``_schemas`` topic in a log dir: no registry needed.

Confluent's Schema Registry keeps every schema in a compacted topic (``kafkastore.topic``, default
``_schemas``) and rebuilds its in-memory store from it at start (``KafkaStoreReaderThread`` +
``KafkaStoreMessageHandler``). :func:`load_registry` does the same over the partitions of that
topic in log dirs, read through the planner's piece rules (:func:`~storage_core.read.pieces.slices`
and :func:`~storage_core.read.piece_reader.read_piece`), from log start to log end, in offset order:

* keys and values are JSON. Key ``{"keytype": "SCHEMA", "subject", "version", "magic"}`` holds a
  schema version: value ``{"subject", "version", "id", "schema", "schemaType", "references",
  "deleted"}`` (no ``schemaType`` means AVRO). Last value per key wins (compaction semantics).
* a SCHEMA value with ``"deleted": true`` soft-deletes the version: it is no longer the subject's
  latest, but its id still decodes records written with it, as the registry's ``GET
  /schemas/ids/{id}`` still answers for it;
* a null value (tombstone) on a SCHEMA key hard-deletes the version: its id is gone unless
  another subject's version holds the same id;
* ``DELETE_SUBJECT`` (value ``{"subject", "version"}``) soft-deletes every version up to
  ``version``; ``CLEAR_SUBJECT`` hard-deletes the subject's soft-deleted versions;
* ``CONFIG``, ``MODE``, ``NOOP``, ``CONTEXT`` and any other key type carry no schema and are
  ignored; so are records whose key is not JSON (counted in a warning).

A subject's latest schema is its highest version that is not deleted. Subject names follow the
serializer's subject-name strategies (:func:`subject_name`).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from storage_core.errors import PendingCommitError, SchemaRegistryError, ValueDecodeError
from storage_core.files import has_log_files
from storage_core.log.manager import PartitionDir, find_partitions, open_log_read_only
from storage_core.read.options import SUBJECT_STRATEGIES
from storage_core.read.piece_reader import read_piece
from storage_core.read.pieces import Piece, slices

__all__ = ["SCHEMAS_TOPIC", "SUBJECT_STRATEGIES", "WIRE_HEADER", "RegisteredSchema", "SchemaReference",
           "SchemaRegistry", "load_registry", "subject_name", "wire_schema_id"]

log = logging.getLogger("klog")

SCHEMAS_TOPIC = "_schemas"
#: The serializers' subject-name strategies (``key.subject.name.strategy``/``value.subject.name.strategy``).


#: Confluent's wire format: magic byte 0, then the 4-byte big-endian schema id, then the payload.
WIRE_HEADER = 5


def wire_schema_id(data: bytes) -> int:
    """The schema id of a value in Confluent's wire format; :class:`ValueDecodeError` (without a
    location: the reader adds it) for bytes that are not in it."""
    if len(data) < WIRE_HEADER:
        raise ValueDecodeError(f"{len(data)} bytes is shorter than the Confluent wire header (magic byte 0 + "
                               "4-byte schema id)")
    if data[0] != 0:
        raise ValueDecodeError(f"magic byte {data[0]} is not Confluent's 0")
    return int.from_bytes(data[1:5], "big")

@dataclass(frozen=True)
class SchemaReference:
    """A named type of another subject's version that a schema uses (``references`` of a SchemaValue)."""

    name: str
    subject: str
    version: int


@dataclass(frozen=True)
class RegisteredSchema:
    """One version of a subject: a SCHEMA record of ``_schemas``."""

    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = "AVRO"  # AVRO | JSON | PROTOBUF
    references: tuple[SchemaReference, ...] = ()
    deleted: bool = False
    offset: int = -1  # where in _schemas


@dataclass
class SchemaRegistry:
    """Subjects' versions and schema ids, as the registry's store holds them after reading ``_schemas``."""

    versions: dict[tuple[str, int], RegisteredSchema] = field(default_factory=dict)
    where: str = ""  # the _schemas partitions read, for messages

    # --- building ------------------------------------------------------------------------------
    def apply(self, offset: int, key: bytes | None, value: bytes | None) -> bool:
        """Apply one ``_schemas`` record; False if its key is not a registry key (skipped)."""
        try:
            k = json.loads(key) if key is not None else None
        except (ValueError, UnicodeDecodeError):
            return False
        if not isinstance(k, dict) or not isinstance(k.get("keytype"), str):
            return False
        keytype = k["keytype"]
        if keytype == "SCHEMA":
            subject, version = k.get("subject"), k.get("version")
            if not isinstance(subject, str) or not isinstance(version, int):
                return False
            if value is None:
                self.versions.pop((subject, version), None)
                return True
            v = _json_object(value)
            if v is None:
                return False
            self.versions[(subject, version)] = _schema_value(v, subject, version, offset)
            return True
        if keytype == "DELETE_SUBJECT":
            v = _json_object(value) if value is not None else None
            subject, till = (v.get("subject"), v.get("version")) if v is not None else (None, None)
            if isinstance(subject, str) and isinstance(till, int):
                for (s, ver), rs in list(self.versions.items()):
                    if s == subject and ver <= till and not rs.deleted:
                        self.versions[(s, ver)] = _replace_deleted(rs)
            return True
        if keytype == "CLEAR_SUBJECT":
            v = _json_object(value) if value is not None else None
            if v is not None and isinstance(v.get("subject"), str):
                for (s, ver), rs in list(self.versions.items()):
                    if s == v["subject"] and rs.deleted:
                        del self.versions[(s, ver)]
            return True
        return True  # CONFIG, MODE, NOOP, CONTEXT, ...: no schema

    # --- lookups -------------------------------------------------------------------------------
    def by_id(self, schema_id: int) -> RegisteredSchema | None:
        """The schema with this id (a live version if one holds it, else a soft-deleted one)."""
        found = None
        for rs in self.versions.values():
            if rs.id == schema_id:
                if not rs.deleted:
                    return rs
                found = found or rs
        return found

    def version(self, subject: str, version: int) -> RegisteredSchema | None:
        return self.versions.get((subject, version))

    def referenced(self, rs: RegisteredSchema) -> list[tuple[SchemaReference, RegisteredSchema]]:
        """The schemas ``rs`` references, each with its reference; a reference to a version that is
        not here is a :class:`SchemaRegistryError` naming both."""
        out = []
        for ref in rs.references:
            target = self.version(ref.subject, ref.version)
            if target is None:
                raise SchemaRegistryError(f"schema id {rs.id} (subject {rs.subject!r} version {rs.version}) "
                                          f"references {ref.name!r} = subject {ref.subject!r} version "
                                          f"{ref.version}, which is not in {self.where}")
            out.append((ref, target))
        return out

    def latest(self, subject: str) -> RegisteredSchema | None:
        """The subject's highest version that is not deleted."""
        live = [rs for (s, _), rs in self.versions.items() if s == subject and not rs.deleted]
        return max(live, key=lambda rs: rs.version) if live else None

    def subjects(self) -> list[str]:
        """Subjects with a live version, sorted."""
        return sorted({s for (s, _), rs in self.versions.items() if not rs.deleted})

    def require_latest(self, subject: str) -> RegisteredSchema:
        rs = self.latest(subject)
        if rs is None:
            deleted = any(s == subject for s, _ in self.versions)
            listed = ", ".join(self.subjects()) or "none"
            why = "all its versions are deleted" if deleted else "no such subject"
            raise SchemaRegistryError(f"subject {subject!r} has no schema in {self.where or SCHEMAS_TOPIC} ({why}); "
                                      f"subjects found: {listed}")
        return rs

    def __iter__(self) -> Iterator[RegisteredSchema]:
        return iter(self.versions.values())


def _json_object(raw: bytes) -> dict[str, object] | None:
    try:
        v = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    return v if isinstance(v, dict) else None


def _replace_deleted(rs: RegisteredSchema) -> RegisteredSchema:
    return RegisteredSchema(rs.subject, rs.version, rs.id, rs.schema, rs.schema_type, rs.references, True, rs.offset)


def _schema_value(v: dict[str, object], subject: str, version: int, offset: int) -> RegisteredSchema:
    refs = []
    for r in v.get("references") or []:  # type: ignore[attr-defined]
        if isinstance(r, dict) and isinstance(r.get("name"), str) and isinstance(r.get("subject"), str) \
                and isinstance(r.get("version"), int):
            refs.append(SchemaReference(r["name"], r["subject"], r["version"]))
    sid = v.get("id")
    schema = v.get("schema")
    schema_type = v.get("schemaType") or "AVRO"
    return RegisteredSchema(subject=str(v.get("subject", subject)), version=int(v.get("version", version)),  # type: ignore[call-overload]
                            id=sid if isinstance(sid, int) else -1, schema=schema if isinstance(schema, str) else "",
                            schema_type=str(schema_type).upper(), references=tuple(refs),
                            deleted=v.get("deleted") is True, offset=offset)


def _records(pd: PartitionDir) -> Iterator[tuple[int, bytes | None, bytes | None]]:
    """``(offset, key, value)`` of one ``_schemas`` partition, log start to log end, as the
    registry's consumer reads it (read_uncommitted)."""
    try:
        lg = open_log_read_only(pd)
    except PendingCommitError:
        return
    try:
        pieces: list[Piece] = slices(lg, pd.topic_partition, lg.log_start_offset, lg.high_watermark)
    finally:
        lg.close()
    for piece in pieces:
        for batch in read_piece(piece):
            cols = batch.select(["offset", "key", "value"]).to_pydict()
            yield from zip(cols["offset"], cols["key"], cols["value"], strict=True)


def load_registry(paths: Iterable[str | os.PathLike[str]], topic: str = SCHEMAS_TOPIC) -> SchemaRegistry:
    """The registry held by the ``topic`` partitions (normally one, ``_schemas-0``) of the log dirs
    ``paths``; :class:`SchemaRegistryError` if there is none."""
    paths = list(paths)
    parts = [pd for pd in find_partitions(paths, required=True, only=lambda tp: tp.topic == topic)
             if pd.topic_partition.topic == topic and has_log_files(pd.path)]
    where = ", ".join(str(pd.path) for pd in parts)
    if not parts:
        raise SchemaRegistryError(f"no {topic} topic in {', '.join(map(str, paths))}: the Schema Registry's schemas "
                                  "are needed to decode valueFormat/keyFormat confluent-*; give the log dir holding "
                                  "it with option schemaRegistryPath")
    reg = SchemaRegistry(where=where)
    skipped = 0
    for pd in sorted(parts, key=lambda p: p.topic_partition.partition):
        for off, key, value in _records(pd):
            skipped += not reg.apply(off, key, value)
    if skipped:
        log.warning("klog: %d records of %s are not Schema Registry records and were skipped", skipped, where)
    return reg


def subject_name(strategy: str, topic: str, is_key: bool, record_name: str | None) -> str:
    """The subject a serializer with ``strategy`` registers under (Confluent's
    ``TopicNameStrategy``, ``RecordNameStrategy``, ``TopicRecordNameStrategy``)."""
    if strategy == "TopicNameStrategy":
        return f"{topic}-{'key' if is_key else 'value'}"
    if record_name is None:
        raise SchemaRegistryError(f"{strategy} needs the record's full name (option recordName)")
    return record_name if strategy == "RecordNameStrategy" else f"{topic}-{record_name}"
