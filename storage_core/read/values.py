"""Keys and values decoded by their format (``valueFormat``/``keyFormat``): one step after the piece reader.

:func:`prepare` runs on the driver once per read: it loads the Schema Registry from the
``_schemas`` topic (:func:`~storage_core.read.schema_registry.load_registry`: the read's log dirs,
or ``schemaRegistryPath``), finds each selected topic's subject by the subject-name strategy (or
``keySubject``/``valueSubject``), takes the subject's latest schema as the reader schema and checks
that every topic's gives the column the same type. The :class:`Decoding` it returns is picklable
(Spark ships it to executors with the plan); :func:`~storage_core.read.piece_reader.read_piece`
applies it to every batch it yields, so Spark batch reads, streams and the Python API decode
through the same call.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa

from storage_core.errors import InvalidOptionError, SchemaRegistryError
from storage_core.fs import as_path
from storage_core.read.avro import AvroDecoder, WriterSchemaJson
from storage_core.read.json_schema import JsonSchemaDecoder, WriterJson
from storage_core.read.options import ReadOptions, ValueFormats
from storage_core.read.protobuf import ProtobufDecoder, WriterProtobufJson, require_protoc
from storage_core.read.schema_registry import RegisteredSchema, SchemaRegistry, load_registry, subject_name

__all__ = ["ColumnDecoder", "ColumnDecoding", "Decoding", "WriterDecoder", "column_decoder", "decoded_schema",
           "prepare", "subject", "writer_decoder"]

ColumnDecoder = AvroDecoder | JsonSchemaDecoder | ProtobufDecoder
WriterDecoder = WriterSchemaJson | WriterJson | WriterProtobufJson


def column_decoder(fmt: str, registry: SchemaRegistry, reader: RegisteredSchema,
                   record_name: str | None = None) -> ColumnDecoder:
    """The decoder of a ``fmt`` column read as ``reader`` (a Protobuf column reads the message
    ``record_name`` when given, else the schema's first)."""
    if fmt == "confluent-avro":
        return AvroDecoder(registry, reader)
    if fmt == "confluent-json":
        return JsonSchemaDecoder(registry, reader)
    if fmt == "confluent-protobuf":
        return ProtobufDecoder(registry, reader, record_name)
    raise InvalidOptionError(f"format {fmt!r} has no decoder")


def writer_decoder(fmt: str, registry: SchemaRegistry) -> WriterDecoder:
    """``klog dump``'s decoder of ``fmt`` values: each by its own writer schema, as JSON."""
    if fmt == "confluent-avro":
        return WriterSchemaJson(registry)
    if fmt == "confluent-json":
        return WriterJson(registry)
    if fmt == "confluent-protobuf":
        require_protoc("--value-decoder")
        return WriterProtobufJson(registry)
    raise InvalidOptionError(f"format {fmt!r} has no decoder")


@dataclass(frozen=True)
class ColumnDecoding:
    """How one column (``key`` or ``value``) of each topic is decoded."""

    column: str
    decoders: dict[str, ColumnDecoder]  # by topic
    arrow_type: pa.DataType


@dataclass(frozen=True)
class Decoding:
    columns: tuple[ColumnDecoding, ...]
    permissive: bool

    def schema(self, base: pa.Schema) -> pa.Schema:
        """``base`` (the Kafka schema) with the decoded columns' types."""
        for c in self.columns:
            i = base.get_field_index(c.column)
            base = base.set(i, pa.field(c.column, c.arrow_type, True))
        return base

    def apply(self, batch: pa.RecordBatch, topic: str, partition: int) -> pa.RecordBatch:
        """``batch`` (records of one topic-partition) with its key/value columns decoded."""
        cols = list(batch.columns)
        offsets = batch.column(batch.schema.get_field_index("offset"))
        for c in self.columns:
            i = batch.schema.get_field_index(c.column)
            dec = c.decoders.get(topic)
            if dec is None:
                raise SchemaRegistryError(f"topic {topic!r} was not planned for {c.column} decoding")
            cols[i] = dec.decode(batch.column(i), offsets, topic=topic, partition=partition, what=c.column,
                                 permissive=self.permissive)
        return pa.RecordBatch.from_arrays(cols, schema=self.schema(batch.schema))


def subject(f: ValueFormats, topic: str, is_key: bool) -> str:
    explicit = f.key_subject if is_key else f.value_subject
    if explicit is not None:
        return explicit
    return subject_name(f.subject_strategy, topic, is_key, f.record_name)


def prepare(opts: ReadOptions, topics: Iterable[str], registry: SchemaRegistry | None = None) -> Decoding | None:
    """The decoding of a read of ``topics`` (None when keys and values stay raw)."""
    f = opts.formats
    if not f.decoded:
        return None
    topics = sorted(set(topics) - {f.schemas_topic})
    if registry is None:
        registry = load_registry([as_path(p, opts.storage) for p in f.registry_paths] if f.registry_paths else opts.log_dirs,
                                 f.schemas_topic)
    columns = []
    for column, fmt in (("key", f.key_format), ("value", f.value_format)):
        if fmt == "raw":
            continue
        if fmt == "confluent-protobuf":
            require_protoc(f"{column}Format")
        decoders: dict[str, ColumnDecoder] = {}
        types: dict[str, pa.DataType] = {}
        for topic in topics:
            name = subject(f, topic, column == "key")
            dec = column_decoder(fmt, registry, registry.require_latest(name), f.record_name)
            decoders[topic] = dec
            types[topic] = dec.arrow_type
        distinct = {str(t): topic for topic, t in types.items()}
        if len(distinct) > 1:
            a, b = list(distinct.values())[:2]
            raise InvalidOptionError(f"{column}Format={fmt}: topics {a!r} and {b!r} have {column} schemas of "
                                     f"different types ({types[a]} vs {types[b]}); read them separately, or give "
                                     f"{column}Subject")
        any_type = next(iter(types.values()), pa.null())
        columns.append(ColumnDecoding(column, decoders, any_type))
    return Decoding(tuple(columns), f.permissive)


def decoded_schema(base: pa.Schema, decoding: Decoding | None) -> pa.Schema:
    return base if decoding is None else decoding.schema(base)
