"""The Spark data source ``klog``: ``spark.read.format("klog").load(path)``.

Two variants under the same name:

* :class:`KlogDataSource` — what Spark finds by itself after ``pip install`` (through the
  top-level ``pyspark_klog`` module): no filter pushdown, so it works whatever
  ``spark.sql.python.filterPushdown.enabled`` says;
* :class:`KlogPushdownDataSource` — registered by :func:`spark_logsource.register`, which also
  turns that conf on: filters on ``topic``, ``partition``, ``offset`` and ``timestamp`` become
  directory pruning and index seeks.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    IsNotNull,
    LessThan,
    LessThanOrEqual,
)
from pyspark.sql.types import StructType

from storage_core.read.kafka_compat import warn_ignored
from storage_core.read.options import start_spec

from .errors import spark_entry, stream_reader
from .options import ReadOptions, parse_admission, parse_read_options

if TYPE_CHECKING:  # the read path's modules (pyarrow, numpy, the log) load when a read starts, not for schema()
    import pyarrow as pa

    from storage_core.read.planner import Pruning

SCHEMA_DDL = ("key binary, value binary, topic string, partition int, offset bigint, timestamp timestamp, "
              "timestampType int")
HEADERS_DDL = "headers array<struct<key: string, value: binary>>"
METADATA_DDL = ("batchBaseOffset bigint, batchLastOffset bigint, leaderEpoch int, producerId bigint, "
                "producerEpoch int, sequence int, isTransactional boolean, compression string, magic int")


def schema_ddl(include_headers: bool, include_metadata: bool) -> str:
    parts = [SCHEMA_DDL]
    if include_headers:
        parts.append(HEADERS_DDL)
    if include_metadata:
        parts.append(METADATA_DDL)
    return ", ".join(parts)


def decoded_spark_schema(o: ReadOptions) -> StructType:
    """The schema of a read with decoded keys/values: the Kafka schema with the decoded columns'
    types (spark-avro's, through Arrow)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from storage_core.read.values import decoded_schema
    from storage_core.record.columnar import kafka_schema

    from .reader import decoding_for

    return from_arrow_schema(decoded_schema(kafka_schema(o.include_headers, o.include_metadata),
                                            decoding_for(o, streaming=True)))


class KlogReader(DataSourceReader):
    """Plans on the driver (a Python worker) and reads on executors; holds only parsed options."""

    def __init__(self, opts: ReadOptions) -> None:
        from storage_core.read.planner import NO_PRUNING

        from .reader import decoding_for

        self.opts = opts
        self.pruning: Pruning = NO_PRUNING
        self.decoding = decoding_for(opts)  # made on the driver, shipped to executors with the reader

    @spark_entry
    def partitions(self) -> Sequence[InputPartition]:
        from .planning import plan

        warn_ignored(self.opts.ignored, "read")  # once per query: Spark plans a scan once
        parts, _ranges = plan(self.opts, self.pruning)
        return list(parts)

    @spark_entry
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from storage_core.record.columnar import kafka_schema

        from .planning import KlogInputPartition
        from .reader import read_partition
        from .worker_gc import task_started

        task_started()
        schema = kafka_schema(self.opts.include_headers, self.opts.include_metadata)
        return read_partition(partition if isinstance(partition, KlogInputPartition) else None, schema,
                              include_headers=self.opts.include_headers, include_metadata=self.opts.include_metadata,
                              fail_on_data_loss=self.opts.fail_on_data_loss, decoding=self.decoding)


class KlogDataSource(DataSource):
    """Kafka log directories as a DataFrame, in Spark's Kafka-source schema."""

    @classmethod
    def name(cls) -> str:
        return "klog"

    def _opts(self) -> ReadOptions:
        return parse_read_options(self.options)

    @spark_entry
    def schema(self) -> str | StructType:
        o = parse_read_options(self.options, streaming=True)  # offsets are checked by the reader
        parse_admission(self.options)  # a stream's admission options fail at load(), not once the query runs
        # where the read starts, as a stream parses it: whatever that refuses, a batch read refuses too
        # (a batch read refuses more: latest), so a bad startingOffsets fails at load() for both
        start_spec({str(k).lower(): str(v) for k, v in self.options.items()}, streaming=True)
        if o.formats.decoded:
            return decoded_spark_schema(o)
        return schema_ddl(o.include_headers, o.include_metadata)

    @spark_entry
    def reader(self, schema: StructType) -> DataSourceReader:
        return KlogReader(self._opts())

    @spark_entry
    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from .writer import KlogWriter, parse_write_options, validate_schema

        opts = parse_write_options(self.options)
        validate_schema(schema, opts)
        warn_ignored(opts.ignored, "write")
        return KlogWriter(opts, overwrite)

    @spark_entry
    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from .options import parse_stream_options
        from .streaming import KlogStreamReader

        return stream_reader(lambda: KlogStreamReader(parse_stream_options(self.options)))

    @spark_entry
    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from .streaming import stream_writer

        return stream_writer(self.options, schema, overwrite)


_NEVER_NULL = {"topic", "partition", "offset", "timestamp", "timestampType"}


def _ms(value: object) -> int | None:
    import datetime as dt

    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
        return int(value.timestamp() * 1000)
    return None


class KlogPushdownReader(KlogReader):
    """KlogReader plus ``pushFilters``: exact filters on topic, partition and offset are applied
    by planning (directory pruning and index seeks) and not re-applied by Spark; a lower bound on
    timestamp prunes through the time index but is handed back, since timestamps need not rise."""

    @spark_entry
    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        topics: frozenset[str] | None = None
        parts: frozenset[int] | None = None
        pmin = pmax = omin = oend = tmin = None
        for f in filters:
            col = f.attribute[0] if hasattr(f, "attribute") and len(f.attribute) == 1 else None
            value: Any = getattr(f, "value", None)
            if isinstance(f, IsNotNull) and col in _NEVER_NULL:
                continue
            if col == "topic" and isinstance(f, EqualTo) and isinstance(value, str):
                topics = frozenset({value}) if topics is None else topics & {value}
                continue
            if col == "topic" and isinstance(f, In) and all(isinstance(v, str) for v in value):
                topics = frozenset(value) if topics is None else topics & set(value)
                continue
            if col in ("partition", "offset") and isinstance(value, int) and not isinstance(value, bool):
                lo, hi = _bounds(f, value)
                if lo is not None or hi is not None:
                    if col == "partition":
                        pmin = lo if pmin is None or (lo is not None and lo > pmin) else pmin
                        hi_incl = None if hi is None else hi - 1
                        pmax = hi_incl if pmax is None or (hi_incl is not None and hi_incl < pmax) else pmax
                    else:
                        omin = lo if omin is None or (lo is not None and lo > omin) else omin
                        oend = hi if oend is None or (hi is not None and hi < oend) else oend
                    continue
            if col == "partition" and isinstance(f, In) and all(isinstance(v, int) for v in value):
                parts = frozenset(value) if parts is None else parts & set(value)
                continue
            if col == "timestamp" and isinstance(f, (GreaterThan, GreaterThanOrEqual)):
                ms = _ms(value)
                if ms is not None:
                    tmin = ms if tmin is None else max(tmin, ms)
            yield f  # Spark applies it after the scan
        from storage_core.read.planner import Pruning

        self.pruning = Pruning(topics, parts, pmin, pmax, omin, oend, tmin)


def _bounds(f: Filter, v: int) -> tuple[int | None, int | None]:
    """[lo, hi) for a comparison filter on an integer column, or (None, None)."""
    if isinstance(f, EqualTo):
        return v, v + 1
    if isinstance(f, GreaterThan):
        return v + 1, None
    if isinstance(f, GreaterThanOrEqual):
        return v, None
    if isinstance(f, LessThan):
        return None, v
    if isinstance(f, LessThanOrEqual):
        return None, v + 1
    return None, None


class KlogPushdownDataSource(KlogDataSource):
    """``klog`` with filter pushdown; needs ``spark.sql.python.filterPushdown.enabled=true``
    (:func:`spark_logsource.register` sets it)."""

    @spark_entry
    def reader(self, schema: StructType) -> DataSourceReader:
        return KlogPushdownReader(self._opts())
