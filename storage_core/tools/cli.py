"""The ``klog`` command line. Every command: ``--help`` with examples, one-line errors
(``--debug`` for a traceback), ``--quiet``, a progress bar on stderr for long runs (only on a
terminal), exit codes 0 ok, 1 data problem found, 2 usage error (3: a bug in klog).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from storage_core.errors import (
    GroupRestoreError,
    InvalidOptionError,
    InvalidTopicError,
    KlogError,
    LogConfigError,
    LogDirLockedError,
    NotALogDirError,
    OffsetOutOfRangeError,
    PendingCommitError,
    RestoreError,
    SnapshotError,
    StorageError,
    SyncError,
    UnsafePathError,
    redact_uris,
)
from storage_core.files import INDEX_SUFFIXES, LOG_SUFFIX
from storage_core.fs import OPTION_PREFIX, ObjectStoreError, StorageOptions, as_path
from storage_core.limits import INT32_MAX, INT64_MAX
from storage_core.log.open_files import ensure_open_files
from storage_core.workers import ordered_map, pool_size

if TYPE_CHECKING:
    from storage_core.record.messages.decoders import Decoder

EXIT_OK = 0
EXIT_DATA = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3

MAIN_EPILOG = """examples:
  klog describe /var/lib/kafka/data              what is in a log dir (read-only)
  klog verify /var/lib/kafka/data                check every CRC and index (read-only)
  klog export data --topic orders --start-time 2026-11-22T10:00Z -o orders.parquet
  klog dump data/orders-0/00000000000000000000.log --print-data-log
  klog groups /var/lib/kafka/data --group billing  a consumer group's committed offsets and lag
  klog snapshot /var/lib/kafka/data s3://bucket/kafka   a consistent copy of a live log dir, incremental
  klog restore backup /var/lib/kafka/data --topic orders --groups   records and groups back (broker stopped)
  klog COMMAND --help                            options and examples of a command
exit codes: 0 ok, 1 corrupt or lost data found, 2 usage error (bad path, argument or value), 3 a bug in klog
"""

#: Files (dump) or runs (verify, export) smaller than this get no progress bar.
PROGRESS_MIN_BYTES = 64 << 20

#: ``--quiet``, one meaning for every command (docs/cli.md): the command's result only (the dump's
#: lines, describe's table, verify's problems, what recover cut, the segments retention deleted,
#: compact's table) and its errors; no progress bar, no summary or totals line, no notes.
QUIET_HELP = "the result only: no progress bar, no summary or totals line, no notes (errors always print)"

def _common() -> argparse.ArgumentParser:
    """Options every subcommand accepts after its name too (``klog verify DIR --debug``)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show the traceback of an error")
    common.add_argument("--fs", action="append", metavar="KEY=VALUE", default=argparse.SUPPRESS,
                        help="a setting of the filesystem of s3://, gs://, abfs://, hdfs:// paths, as the fs.* read "
                        "options name it (e.g. --fs endpoint_override=host:9000 --fs region=eu-west-1); credentials "
                        "are better left to the SDK's environment variables (AWS_ACCESS_KEY_ID, ...) than put on a "
                        "command line (repeatable)")
    return common


def _storage(args: argparse.Namespace) -> StorageOptions:
    """The ``--fs KEY=VALUE`` settings as the fs.* options."""
    return StorageOptions.from_options(_fs_options(args))


def _fs_options(args: argparse.Namespace) -> dict[str, str]:
    """The ``--fs KEY=VALUE`` settings named as the fs.* read options name them."""
    return {k if k.startswith(OPTION_PREFIX) else OPTION_PREFIX + k: v
            for k, v in _pairs(getattr(args, "fs", None), "--fs", "--fs region=eu-west-1").items()}


def _pairs(pairs: list[str] | None, flag: str, example: str = "") -> dict[str, str]:
    """``KEY=VALUE`` arguments of ``flag`` as a dict (an error names only the key: a value may be a secret)."""
    out = {}
    for pair in pairs or []:
        if "=" not in pair:
            raise InvalidOptionError(f"{flag} expects KEY=VALUE{f' (e.g. {example})' if example else ''}, "
                                     f"got {pair.split('=')[0]!r}")
        k, v = pair.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _progress_wanted(args: argparse.Namespace, total: int | None, threshold: int = PROGRESS_MIN_BYTES) -> bool:
    """The one rule for a progress bar on stderr: never with --quiet; KLOG_PROGRESS=1 forces it and
    =0 hides it; otherwise only on a terminal, for a run of at least ``threshold`` (bytes, or the
    bar's unit; ``total`` None: not known yet)."""
    if getattr(args, "quiet", False):
        return False
    forced = os.environ.get("KLOG_PROGRESS")
    if forced in ("0", "1"):
        return forced == "1"
    return sys.stderr.isatty() and (total is None or total >= threshold)


def _tqdm(**kwargs: Any) -> Any:
    """A tqdm bar on stderr, or None where tqdm is not installed (``pip install 'klog[progress]'``)."""
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(file=sys.stderr, leave=False, unit_scale=True, **kwargs)


class _Bar:
    """A bar of a known total (bytes or files), shown by :func:`_progress_wanted`."""

    def __init__(self, args: argparse.Namespace, total: int, desc: str, unit: str = "B",
                 threshold: int = PROGRESS_MIN_BYTES) -> None:
        self._bar: Any = None
        if _progress_wanted(args, total, threshold):
            self._bar = _tqdm(total=total, desc=desc, unit=unit, unit_divisor=1024 if unit == "B" else 1000,
                              dynamic_ncols=True)

    def update(self, n: int) -> None:
        if self._bar is not None:
            self._bar.update(n)

    def echo(self, line: str, file: Any = None) -> None:
        """A line (on stderr by default) that does not tear the bar."""
        out = sys.stderr if file is None else file
        if self._bar is not None:
            self._bar.write(line, file=out)
        else:
            print(line, file=out)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()

    def __enter__(self) -> _Bar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"  # pragma: no cover

DUMP_EXAMPLES = """examples:
  klog dump 00000000000000000000.log                     batch headers, like kafka-dump-log
  klog dump --print-data-log 00000000000000000000.log    every record with key and payload
  klog dump --jsonl 00000000000000000000.log > out.jsonl one JSON object per record
  klog dump 00000000000000000000.index                   offset index entries
  klog dump --verify-index-only 00000000000000000000.index   entries checked against the .log
  klog dump data/orders-0                                every segment of a partition, in offset order
  klog dump 00000000000000000123.snapshot                producer state (a producer snapshot)
  klog dump --print-data-log __consumer_offsets-7        group offsets and metadata, decoded (by the dir's name)
  klog dump --jsonl __cluster_metadata-0                 KRaft metadata records as JSON (key/value decoded)
  klog dump 00000000000000000100-0000000001.checkpoint   a KRaft snapshot
  klog dump --jsonl --value-decoder confluent-avro orders-0   Avro values as JSON (schemas from _schemas)
exit codes: 0 ok (a torn tail after valid batches is reported, as Kafka does), 1 a corrupt batch, a bad CRC,
an index that disagrees with its log, or a file with no Kafka batch at all, 2 usage error (no such file)
"""


def _aiven_objects(files: list[Path], args: argparse.Namespace) -> list[Path]:
    """``klog dump``'s files, each object of Aiven's tiered-storage layout (``.rsm-manifest``, and a
    ``.log``/``.indexes`` beside one) replaced by the segment files it holds, decoded
    (:func:`storage_core.log.aiven.objects.object_files`, with ``--remote-storage-config``/``--rsm-config``)."""
    from storage_core.log.aiven.objects import is_aiven_object, object_files

    if not any(is_aiven_object(f) for f in files):
        return files
    remote = _remote(argparse.Namespace(**{**vars(args), "remote_storage": ".", "remote_storage_layout": "aiven"}))
    out: list[Path] = []
    for f in files:
        out += object_files(f, remote.aiven, _storage(args)) if is_aiven_object(f) else [f]
    return out


def _cmd_dump(args: argparse.Namespace) -> int:
    from storage_core.files import SNAPSHOT_SUFFIX
    from storage_core.tools.dump import dump_jsonl, dump_snapshot, dump_text, files_to_dump

    if args.max_bytes is not None and args.max_bytes < 0:
        raise InvalidOptionError(f"--max-bytes must be >= 0, got {args.max_bytes}")
    files = _aiven_objects(files_to_dump(args.files, _storage(args)), args)
    out = sys.stdout
    status = EXIT_OK
    schemas_wanted = args.value_decoder is not None or args.key_decoder is not None
    if schemas_wanted and args.decoder not in (None, "none"):
        raise InvalidOptionError("--key-decoder/--value-decoder and --" + args.decoder + " conflict; give one")
    if args.schema_registry_path is not None and not schemas_wanted:
        raise InvalidOptionError("--schema-registry-path only applies with --value-decoder or --key-decoder")
    print_data = args.print_data_log or args.decoder not in (None, "none") or schemas_wanted
    for path in files:
        decoder = None if schemas_wanted else _decoder(args.decoder, str(path))
        schemas = _schema_decoders(args, path) if schemas_wanted else None
        if path.name.endswith(INDEX_SUFFIXES):
            from storage_core.tools.dump import dump_index

            if dump_index(path, out, sys.stderr, sanity_only=args.index_sanity_check,
                          verify_only=args.verify_index_only):
                status = EXIT_DATA
            continue
        if path.name.endswith(SNAPSHOT_SUFFIX):
            dump_snapshot(path, out)
            continue
        size = path.stat().st_size
        if size > 0 and args.max_bytes is None and not _segment_named(path) and not _starts_with_a_batch(path, size):
            # not one batch: these bytes are not Kafka's (--max-bytes may end the read inside the first
            # batch, which Kafka prints nothing for); said before any dump output, on stderr only
            status = EXIT_DATA
            print(f"klog: error: {path} holds no Kafka record batch: its first bytes are not a whole batch "
                  "(header, size and magic); expected a .log segment, an index (.index, .timeindex, .txnindex), "
                  "a producer .snapshot or another record-set file", file=sys.stderr)
            continue
        # the bar shares the terminal with the dump: only when the dump itself goes to a file or pipe
        with _Bar(args, size if not sys.stdout.isatty() else 0, path.name) as bar:
            if args.jsonl:
                summary = dump_jsonl(path, out, decoder=decoder, progress=bar.update, schemas=schemas)
            else:
                summary = dump_text(path, out, deep=args.deep_iteration, print_data=print_data,
                                    max_bytes=args.max_bytes, progress=bar.update, decoder=decoder,
                                    skip_record_metadata=args.skip_record_metadata, schemas=schemas,
                                    err=sys.stderr)
        if summary.error is not None or summary.invalid_batches:
            status = EXIT_DATA
            if args.jsonl and not args.quiet:  # the error is in the output already; say it on stderr too
                print(f"klog: {summary.error}", file=sys.stderr)
    return status


def _segment_named(path: Path) -> bool:
    """A ``.log`` named as a segment is (``<20-digit base offset>.log``): dumped whatever its first
    bytes hold, its damage reported at its position as ``DumpLogSegments`` reports it (a record size
    below the minimum overhead, invalid bytes at the end); only a file that is a segment neither by
    name nor by content is "not a Kafka file"."""
    stem, _, suffix = path.name.partition(".")
    return "." + suffix == LOG_SUFFIX and len(stem) == 20 and stem.isdigit()


def _starts_with_a_batch(path: Path, size: int) -> bool:
    """Whether the record-set file ``path`` starts with a whole batch (its CRC unchecked: a bad CRC
    is a corrupt Kafka file, which the dump reports)."""
    from storage_core.record.file_records import FileRecords

    try:
        for _batch in FileRecords(path).batches(0, size):
            return True
    except KlogError:
        return False
    return False


_registries: dict[str, Any] = {}


def _schema_decoders(args: argparse.Namespace, path: Path) -> Any:
    """``--key-decoder``/``--value-decoder``: the writer schemas of the ``_schemas`` topic in
    ``--schema-registry-path``, else in the log dir holding the file's partition dir."""
    from storage_core.read.schema_registry import load_registry
    from storage_core.read.values import writer_decoder
    from storage_core.tools.dump import SchemaDecoders

    where_dir = as_path(args.schema_registry_path, _storage(args)) if args.schema_registry_path else \
        path.resolve().parent.parent
    where = str(where_dir)
    if where not in _registries:
        _registries[where] = load_registry([where_dir])
    reg = _registries[where]

    def make(fmt: str | None) -> Any:
        if fmt is None:
            return None
        return writer_decoder(fmt, reg)

    return SchemaDecoders(key=make(args.key_decoder), value=make(args.value_decoder))


def _decoder(option: str | None, path: str) -> Decoder | None:
    """The decoder of a file: the one asked for, else the one of its topic (the partition dir's
    name: ``__consumer_offsets-*``, ``__transaction_state-*``, ``__share_group_state-*``,
    ``__cluster_metadata-*``; KRaft ``.checkpoint`` snapshots are cluster metadata)."""
    from storage_core.record.messages.decoders import Decoder, decoder_for_path

    if option == "none":
        return None
    if option is not None:
        return Decoder(option)
    return decoder_for_path(path)


DESCRIBE_EXAMPLES = """examples:
  klog describe /var/lib/kafka/data                 every topic-partition of a log dir
  klog describe data --topic orders --json          one topic, as JSON
  klog describe /mnt/a,/mnt/b                        several log dirs (Kafka's log.dirs)
  klog describe data/orders-0                        one partition dir
~RECORDS is end offset - start offset, from the indexes (an upper bound where compaction left gaps).
LSO is the last stable offset: where a read_committed read stops (an open transaction holds it below END).
exit codes: 0 ok, 1 an index or segment could not be read, 2 usage error (no such dir or topic)
"""

VERIFY_EXAMPLES = """examples:
  klog verify /var/lib/kafka/data          check CRCs and indexes of every partition (read-only)
  klog verify data/orders-0 --quiet        one partition; only the exit code and problems
  klog verify data --remote-storage s3://bucket/tiered --remote-storage-layout aiven --remote-storage-config server.properties
                                           a tiered topic's remote segments too (every chunk fetched)
exit codes: 0 all good (warnings allowed), 1 data is corrupt or lost, 2 usage error
"""


def _log_dirs(arg: str) -> list[str]:
    from storage_core.read.options import split_paths

    return list(split_paths(arg))


def _remote(args: argparse.Namespace) -> Any:
    """``--remote-storage``/``--remote-storage-layout`` as the read options name them (None: not given)."""
    from storage_core.log.tiered import RemoteStorage

    rsm = {}
    for item in getattr(args, "rsm_config", None) or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InvalidOptionError(f"--rsm-config {item!r}: expected KEY=VALUE (an rsm.config.* setting)")
        key = key.strip()
        rsm[key if key.startswith("rsm.config.") else "rsm.config." + key] = value
    return RemoteStorage.of(args.remote_storage, args.remote_storage_layout, _storage(args),
                            config=getattr(args, "remote_storage_config", None), rsm=rsm)


def _remote_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--remote-storage", metavar="PATH|URI", default=None,
                   help="a tiered topic's remote storage (KIP-405): its remote segments are read before the local "
                   "ones (the read option remoteStorage)")
    p.add_argument("--remote-storage-layout", metavar="LAYOUT", default=None,
                   help="the remote storage's layout: local-tiered (Kafka's LocalTieredStorage, the default) or "
                   "aiven (Aiven's tiered-storage RemoteStorageManager: chunked, zstd, AES-GCM objects)")
    _aiven_config_args(p)


def _aiven_config_args(p: argparse.ArgumentParser) -> None:
    """The Aiven plugin's settings: ``--remote-storage-config`` and ``--rsm-config``."""
    p.add_argument("--remote-storage-config", metavar="PATH", default=None,
                   help="--remote-storage-layout aiven: a properties file with the plugin's rsm.config.* settings "
                   "(a broker's server.properties as it is; the read option remoteStorageConfig)")
    p.add_argument("--rsm-config", metavar="KEY=VALUE", action="append", default=None,
                   help="an rsm.config.* setting over --remote-storage-config's (repeatable; the prefix may be "
                   "left out), e.g. encryption.key.pairs.k1.private.key.file=/keys/k1.pem")


def _dirs(args: argparse.Namespace) -> list[Path]:
    """``args.dir``'s log dirs as paths: local, or in object storage through ``--fs``."""
    storage = _storage(args)
    return [as_path(p, storage) for p in _log_dirs(args.dir)]


def _partitions(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    """The partitions of ``args.dir`` that ``--topic`` selects (each once: the replica read, from a
    cluster's dirs); a selected partition that no dir holds though the KRaft metadata assigns it to
    other brokers is a warning naming them."""
    from storage_core.log.manager import replica_problems, scan_log_dirs
    from storage_core.read.planner import choose_partitions

    dirs = _log_dirs(args.dir)
    wanted = set(args.topic) if args.topic else None
    view = scan_log_dirs(_dirs(args), required=True, only=None if wanted is None else lambda tp: tp.topic in wanted)
    parts = view.partitions
    for text in replica_problems((), {tp: b for tp, b in view.absent.items() if not args.topic or tp.topic in args.topic}):
        print(f"warning: {text}", file=sys.stderr)
    chosen = choose_partitions(parts, dirs, topics=sorted(set(args.topic))) if args.topic else None
    return parts if chosen is None else chosen


def _dir_bytes(path: Any) -> int:
    return sum(f.stat().st_size for f in path.glob("*" + LOG_SUFFIX))


def _fmt_ts(ms: int | None) -> str:
    import datetime as dt

    if ms is None:
        return "-"
    try:
        return dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z"
    except (ValueError, OverflowError, OSError):  # outside years 1..9999 (Kafka's timestamps are any int64)
        return f"{ms}ms"


def _cmd_describe(args: argparse.Namespace) -> int:
    import dataclasses
    import json

    from storage_core.log.dir_state import LogDirStates
    from storage_core.log.tiered import load_remote_metadata
    from storage_core.read.describe import NO_KRAFT_METADATA, ConfigContext, describe_partition

    states = LogDirStates()  # each dir's checkpoints and journals read once, not once per partition
    parts = _partitions(args)
    log_dirs = [*{p.log_dir: None for p in parts}, *_dirs(args)]
    context = ConfigContext.of(log_dirs)
    tiered = load_remote_metadata(dict.fromkeys(log_dirs))
    with _Bar(args, len(parts), "describe", unit="partition", threshold=200) as bar:
        rows = []
        for p in parts:
            try:
                rows.append(describe_partition(p, context, states.of(p.log_dir), tiered))
            except PendingCommitError as exc:  # a new partition a running job is committing: not there yet
                if not args.quiet:
                    bar.echo(f"warning: {p.topic_partition}: {exc}")
            bar.update(1)
    from storage_core.log.manager import skipped_dirs

    for path, why in skipped_dirs(_dirs(args)):  # not read: say so, rather than leave them out in silence
        print(f"warning: skipped {path}: {why}", file=sys.stderr)
    for r in rows:  # loudly, even with --quiet or --json: data the dir's own evidence says should be there
        for lost in r.lost:
            print(f"error: LOST DATA: {lost}", file=sys.stderr)
    status = EXIT_DATA if any(r.lost for r in rows) else EXIT_OK
    if args.json:
        print(json.dumps([dataclasses.asdict(r) for r in rows], indent=2))
        return status
    header = ["TOPIC", "PART", "START", "END", "LSO", "~RECORDS", "SEGS", "BYTES", "FIRST TIMESTAMP",
              "MAX TIMESTAMP", "CODECS"]
    table = [[r.topic, str(r.partition), str(r.start_offset), str(r.end_offset), str(r.last_stable_offset),
              str(r.estimated_records),
              str(r.segments), str(r.size_bytes), _fmt_ts(r.first_timestamp), _fmt_ts(r.max_timestamp),
              ",".join(r.codecs) or "-"] for r in rows]
    if any(r.replicas for r in rows):  # a cluster's dirs: the replica read, and what the cluster says of it
        header += ["BROKER", "LEADER", "EPOCH", "ISR", "REPLICAS"]
        for row, r in zip(table, rows, strict=True):
            row += (["-"] * 5 if not r.replicas else
                    [_id(r.broker), _id(r.leader), _id(r.leader_epoch), _isr(r),
                     ",".join(_id(x["broker"]) + ("!" if x["diverges_at"] is not None else "") for x in r.replicas)])
    if any(r.remote_segments for r in rows):  # tiered partitions: their remote range beside the local one
        header[2:4] = ["LOCAL START", "LOCAL END"]
        header += ["REMOTE START", "REMOTE END", "REMOTE SEGS", "REMOTE BYTES", "REMOTE MAX TIMESTAMP"]
        for row, r in zip(table, rows, strict=True):
            row += (["-"] * 4 + [_fmt_ts(None)] if not r.remote_segments else
                    [str(r.remote_start_offset), str(r.remote_end_offset), str(r.remote_segments),
                     str(r.remote_size_bytes), _fmt_ts(r.remote_max_timestamp)])
    widths = [max(len(h), *(len(row[i]) for row in table)) if table else len(h) for i, h in enumerate(header)]
    for row in [header, *table]:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    if not args.quiet:
        topics = len({r.topic for r in rows})
        print(f"\n{_plural(len(rows), 'partition')} of {_plural(topics, 'topic')}, ~{sum(r.estimated_records for r in rows):,} records, "
              f"{_human(sum(r.size_bytes for r in rows))} in {args.dir}")
        tiered_rows = [r for r in rows if r.remote_segments]
        if tiered_rows:
            print(f"remote (tiered storage, from __remote_log_metadata): {_plural(len(tiered_rows), 'partition')}, "
                  f"~{sum((r.remote_end_offset or 0) - (r.remote_start_offset or 0) for r in tiered_rows):,} offsets, "
                  f"{_plural(sum(r.remote_segments for r in tiered_rows), 'segment')}, "
                  f"{_human(sum(r.remote_size_bytes for r in tiered_rows))}")
        _print_topic_configs(rows, context.kraft, NO_KRAFT_METADATA)
    for r in rows:  # loudly, even with --quiet: replicas Kafka would truncate, partitions missing their ISR
        for note in r.replica_notes[1:]:
            print(f"warning: {r.topic}-{r.partition}: {note}", file=sys.stderr)
    for r in rows:  # loudly, even with --quiet: the dir holds another incarnation of the topic
        if r.topic_id_matches is False:
            print(f"warning: {r.topic}-{r.partition}: TOPIC ID MISMATCH: partition.metadata has {r.topic_id}, "
                  f"__cluster_metadata has {r.kraft_topic_id} (a partition of a deleted incarnation of the "
                  "topic; a broker would treat the dir as stray)", file=sys.stderr)
    return status


def _id(v: int | None) -> str:
    return "-" if v is None or v < 0 else str(v)


def _isr(r: Any) -> str:
    """The ISR column of a replicated partition: ``unknown`` without a KRaft registration (a ZooKeeper-era
    cluster's dirs: the ISR lived in ZooKeeper; ``replica_notes`` says how the replica read was chosen),
    ``-`` for a registration whose ISR is empty."""
    if r.leader is None:
        return "unknown"
    return ",".join(map(str, r.isr)) or "-"


def _print_topic_configs(rows: list[Any], kraft: Any, no_kraft: str) -> None:
    """One line per topic: its id (and whether partition.metadata agrees with the KRaft metadata)
    and the configs set above Kafka's defaults, each with its source."""
    if kraft is None:
        print(f"topic configs: {no_kraft}")
    else:
        print(f"topic ids and configs from {kraft.log_dir}/__cluster_metadata-0 "
              f"({'snapshot ' + kraft.snapshot + ' + ' if kraft.snapshot else ''}log to offset {kraft.end_offset}):")
        for note in kraft.notes:
            print(f"  note: {note}")
    by_topic: dict[str, list[Any]] = {}
    for r in rows:
        by_topic.setdefault(r.topic, []).append(r)
    table = []
    for topic, rs in by_topic.items():
        ids = sorted({r.topic_id for r in rs if r.topic_id is not None})
        if any(r.topic_id_matches is False for r in rs):
            match = "MISMATCH"
        elif rs[0].kraft_topic_id is None:
            match = "-" if kraft is None else "not in metadata"
        elif any(r.topic_id is None for r in rs):
            match = "no partition.metadata" if not ids else "matches (some dirs lack partition.metadata)"
        else:
            match = "matches"
        shown = ",".join(ids) or (rs[0].kraft_topic_id or "-")
        configs = ", ".join(rs[0].configs) or "Kafka defaults"
        table.append([topic, shown, match, configs])
        for ignored in rs[0].configs_ignored:
            table.append(["", "", "", f"ignored: {ignored}"])
    header = ["TOPIC", "TOPIC ID", "ID vs KRAFT", "CONFIGS (source)"]
    widths = [max(len(h), *(len(row[i]) for row in table)) if table else len(h) for i, h in enumerate(header)]
    for row in [header, *table]:
        print("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


GROUPS_EXAMPLES = """examples:
  klog groups /var/lib/kafka/data                   every group's committed offsets and lag
  klog groups data --group billing                   one group
  klog groups /mnt/a,/mnt/b --json                   several log dirs, as JSON
COMMITTED is the group's last committed offset as of the end of __consumer_offsets (the last commit of
each partition wins, a tombstone deletes it; aborted or still-open transactional commits do not count).
LAG is LOG-END - COMMITTED, "-" when the partition is not in the dirs given.
exit codes: 0 ok, 1 a segment could not be read, 2 usage error (no such dir, unknown group)
"""


def _cmd_groups(args: argparse.Namespace) -> int:
    import json

    from storage_core.read.groups import committed_offsets

    table = committed_offsets(_dirs(args), args.group, option="--group")
    rows = table.to_pylist()
    if args.json:
        for r in rows:
            ts = r["commitTimestamp"]
            r["commitTimestamp"] = None if ts is None else int(ts.timestamp() * 1000)
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    header = ["GROUP", "TOPIC", "PARTITION", "COMMITTED", "LOG-END", "LAG", "COMMIT TIMESTAMP"]

    def text(v: object) -> str:
        return "-" if v is None else str(v)

    table_rows = [[r["group"], r["topic"], str(r["partition"]), str(r["committedOffset"]), text(r["logEndOffset"]),
                   text(r["lag"]),
                   _fmt_ts(None if r["commitTimestamp"] is None else int(r["commitTimestamp"].timestamp() * 1000))]
                  for r in rows]
    if not table_rows:
        print(f"no committed offsets in {args.dir}" if args.group is None else "")
        return EXIT_OK
    widths = [max(len(h), *(len(row[i]) for row in table_rows)) for i, h in enumerate(header)]
    for row in [header, *table_rows]:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return EXIT_OK


def _cmd_verify(args: argparse.Namespace) -> int:
    from storage_core.log.dir_state import LogDirStates
    from storage_core.log.tiered import load_remote_metadata
    from storage_core.tools.report import verify_partition

    states = LogDirStates()  # shared by the workers: a dir's files read once, not once per partition
    status = EXIT_OK
    parts = _partitions(args)
    sizes = [_dir_bytes(p.path) for p in parts]
    remote = _remote(args)
    tiered = load_remote_metadata(dict.fromkeys([*(p.log_dir for p in parts), *_dirs(args)]))

    def verify(p: Any) -> Any:
        return verify_partition(p, state=states.of(p.log_dir), tiered=tiered, remote=remote)

    with _Bar(args, sum(sizes), "verify") as bar:
        # partitions verified at once, reported in partition order as one thread reports them
        for p, size, rep in zip(parts, sizes, ordered_map(verify, parts, pool_size(args.workers, len(parts))),
                                strict=True):
            bar.update(size)
            for w in rep.warnings:
                if not args.quiet:
                    bar.echo(f"warning: {w}")
            for e in rep.errors:
                bar.echo(f"error: {e}")
            if rep.errors:
                status = EXIT_DATA
            if not args.quiet:
                state = "CORRUPT" if rep.errors else "ok"
                bar.echo(f"{p.topic_partition}: {state} ({rep.batches} batches, {len(rep.errors)} errors, "
                         f"{len(rep.warnings)} warnings)", sys.stdout)
    if not args.quiet:
        print(f"verified {_plural(len(parts), 'partition')} ({_human(sum(sizes))}): "
              f"{'corrupt or lost data found' if status else 'no corrupt data'}")
    return status


EXPORT_EXAMPLES = """examples:
  klog export data --topic orders -o orders.parquet                       the whole topic
  klog export data --topic orders --start-time 2026-11-22T10:00Z --end-time 2026-11-22T11:00Z -o hour.parquet
  klog export data --topic orders --partition 0 --start-offset 1000 --end-offset 2000 -o part0.parquet
  klog export /mnt/copy --topic payments --read-committed --headers -o payments.parquet
  klog export data --topic orders --per-partition -o orders/                a file per partition, several at once
Times are epoch milliseconds or ISO-8601 (no zone means UTC). Ranges follow the Spark source: a start
time gives each partition's first record at or after it, an end time or offset is exclusive.
The columns are spark.read.format("klog")'s: key, value, topic, partition, offset, timestamp,
timestampType (+ headers with --headers, + batch metadata with --metadata). No Spark is needed.
exit codes: 0 ok, 1 a corrupt batch or lost data in the range (nothing is written), 2 usage error (a topic,
partition, offset or time the log does not hold; a bad argument)
"""


def _cmd_export(args: argparse.Namespace) -> int:
    from storage_core.tools.export import (
        ExportRequest,
        export_parquet,
        export_parquet_per_partition,
        parse_time,
        plan_export,
    )

    req = ExportRequest(
        log_dirs=tuple(_log_dirs(args.dir)), storage=_storage(args), topic=args.topic,
        partitions=tuple(args.partition) if args.partition else None,
        start_offset=args.start_offset, end_offset=args.end_offset,
        start_time_ms=None if args.start_time is None else parse_time(args.start_time, "--start-time"),
        end_time_ms=None if args.end_time is None else parse_time(args.end_time, "--end-time"),
        if_past_end=args.if_past_end,
        read_committed=args.read_committed, include_headers=args.headers, include_metadata=args.metadata,
        threads=args.threads, remote=_remote(args))
    plan = plan_export(req)
    for r in plan.ranges:
        for note in r.notes:
            if not args.quiet:
                print(f"warning: {r.topic_partition}: {note}", file=sys.stderr)
    with _Bar(args, plan.nbytes, f"export {args.topic}") as bar:
        export = export_parquet_per_partition if args.per_partition else export_parquet
        summary = export(req, plan, args.output, compression=args.compression, overwrite=args.overwrite,
                         progress=bar.update)
    if not args.quiet:
        for r in plan.ranges:
            print(f"{r.topic_partition}: offsets {r.start}..{r.end} ({r.end - r.start} offsets)")
        print(f"exported {summary.records:,} records ({_human(summary.bytes_read)} of record batches from "
              f"{_plural(summary.partitions, 'partition')}) to {summary.output} ("
              f"{_plural(summary.files, 'file') + ', ' if args.per_partition else ''}{_human(summary.bytes_written)})")
    return EXIT_OK


RECOVER_EXAMPLES = """examples:
  klog recover data                 revalidate every segment, cut torn tails, rebuild indexes
exit codes: 0 nothing was cut, 1 bytes were cut (listed), 2 usage error
This writes to the log dir: never run it on a dir a live broker owns (the .lock prevents it).
"""

RETENTION_EXAMPLES = """examples:
  klog retention data --config retention.ms=604800000        delete segments older than 7 days
  klog retention data --topic orders --config retention.bytes=1073741824
exit codes: 0 ok (nothing or segments deleted, listed), 1 corrupt data or config file, 2 usage error
This writes to the log dir: never run it on a dir a live broker owns (the .lock prevents it).
"""


def _configs(pairs: list[str] | None) -> dict[str, str]:
    """``--config name=value`` pairs, validated: explicit overrides, above every stored config."""
    from storage_core.log.config import LogConfig

    props = _pairs(pairs, "--config", "--config retention.ms=604800000")
    LogConfig.from_properties(props)
    return props


def _cmd_recover(args: argparse.Namespace) -> int:
    from storage_core.log.manager import LogManager, broker_groups, find_partitions

    dirs = _log_dirs(args.dir)
    parts = [p for d in dirs for p in find_partitions([d], only=lambda _tp: False)]  # every replica of every dir
    total = sum(_dir_bytes(p.path) for p in parts)
    status = EXIT_OK
    count = 0
    groups = broker_groups(dirs)  # each broker's replicas, and its checkpoints, by themselves
    for group in groups:
        with _Bar(args, total, "recover") as bar:
            lm = LogManager(group, writable=True, full_recovery=True, on_loaded=lambda pd: bar.update(_dir_bytes(pd.path)),
                            close_each=True,  # one partition's files open at a time per worker, whatever the count
                            workers=pool_size(args.workers, len(parts)))
        who = _broker_prefix(group, len(groups))
        try:
            for what in lm.recovered_commits:
                print(f"{who}settled an interrupted {what}")
            for tp, log in sorted(lm.logs.items()):
                for note in log.recovery_notes:
                    print(f"{who}{tp}: {note}")
                if log.truncated_bytes:
                    status = EXIT_DATA
                    print(f"{who}{tp}: cut {log.truncated_bytes} bytes after offset {log.log_end_offset - 1}")
                elif not args.quiet:
                    print(f"{who}{tp}: ok, log end offset {log.log_end_offset}")
            count += len(lm.logs)
        finally:
            lm.close()
    if not args.quiet:
        print(f"recovered {_plural(count, 'partition')} in {args.dir}: "
              f"{'bytes were cut (listed above)' if status else 'nothing was cut'}")
    return status


def _broker_groups(args: argparse.Namespace) -> list[list[Path]]:
    """``args.dir``'s log dirs by broker (:func:`~storage_core.log.manager.broker_groups`: each broker's
    replicas and checkpoints by themselves), after checking that every ``--topic`` is in one of them."""
    from storage_core.log.manager import broker_groups, find_partitions
    from storage_core.read.planner import no_such_topics

    groups = broker_groups(_log_dirs(args.dir))
    if args.topic:
        held = {pd.topic_partition.topic for pd in find_partitions([d for g in groups for d in g], only=lambda _tp: False)}
        missing = set(args.topic) - held
        if missing:
            raise no_such_topics(sorted(missing), sorted(held), [args.dir])
    return groups


def _broker_of(group: list[Path], groups: int) -> int | None:
    """The broker of one of ``groups`` groups of log dirs, named only when there are several."""
    from storage_core.log.replicas import broker_dir

    return broker_dir(group[0]).node_id if groups > 1 else None


def _broker_prefix(group: list[Path], groups: int) -> str:
    """``"broker N: "`` before a line of a command run on several brokers' dirs (one of ``groups``)."""
    node = _broker_of(group, groups)
    return "" if node is None else f"broker {node}: "


def _cmd_retention(args: argparse.Namespace) -> int:
    from storage_core.log.manager import LogManager

    overrides = _configs(args.config)
    groups = _broker_groups(args)
    any_deleted = False
    for group in groups:
        lm = LogManager(group, writable=True, overrides=overrides,
                        close_each=True)  # one partition's files open at a time, whatever the count
        who = _broker_prefix(group, len(groups))
        try:
            for tp in [tp for tp in lm.logs if args.topic and tp.topic not in set(args.topic)]:
                lm.logs.pop(tp).close()
            deleted = lm.retention(args.now)
            for tp, bases in sorted(deleted.items()):
                print(f"{who}{tp}: deleted {len(bases)} segments, log start offset now {lm.logs[tp].log_start_offset}")
            any_deleted = any_deleted or bool(deleted)
        finally:
            lm.close()
    if not any_deleted and not args.quiet:
        print("nothing to delete")
    return EXIT_OK


COMPACT_EXAMPLES = """examples:
  klog compact /var/lib/kafka/data                   every topic whose cleanup.policy includes compact
  klog compact data --topic users --topic orders     these topics, whatever their cleanup.policy
  klog compact data --memory 64M --json              a bigger offset map; the summary as JSON
  klog compact copy-of-broker-dir --roll             roll active segments first, so that all data is cleanable
topic configs: Kafka's internal topics are compacted; other topics take cleanup.policy and the
cleaner's configs from <log dir>/klog-topic-configs.json (see docs/compaction.md).
exit codes: 0 cleaned (or nothing to clean), 1 corrupt data or config file, 2 usage error
"""

_BYTE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def _byte_size(text: str) -> int:
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    unit = t[-1:] if t[-1:] in ("K", "M", "G") else ""
    number = t[: len(t) - len(unit)]
    if not number.isdigit():
        raise argparse.ArgumentTypeError(f"expected a size in bytes such as 16777216, 64M or 1G; got {text!r}")
    return int(number) * _BYTE_UNITS[unit]


class _Progress:
    """``klog compact``'s bar, whose total grows as partitions are planned: shown by
    :func:`_progress_wanted` once the total is known to be large enough; without tqdm, a line
    redrawn at most once a second."""

    def __init__(self, args: argparse.Namespace) -> None:
        self._args = args
        self.enabled = _progress_wanted(args, None)
        self.total = 0
        self.done = 0
        self._bar: Any = None
        self._started = False
        self._last = 0.0

    def __call__(self, done: int, added: int) -> None:
        if not self.enabled:
            return
        self.total += added
        self.done = min(self.done + done, self.total) if self.total else self.done + done
        if not self._started:
            if not _progress_wanted(self._args, self.total):
                return
            self._started = True
            self._bar = _tqdm(total=self.total, unit="B", unit_divisor=1024, desc="compact")
            if self._bar is not None:
                self._bar.update(self.done)
                return
        if self._bar is not None:
            if added:
                self._bar.total = self.total
                self._bar.refresh()
            self._bar.update(done)
            return
        import time

        now = time.monotonic()
        if now - self._last >= 1.0:
            self._last = now
            pct = 100.0 * self.done / self.total if self.total else 0.0
            print(f"\rcompact: {self.done >> 20} / {self.total >> 20} MiB ({pct:.0f}%)", end="", file=sys.stderr)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        elif self._last:
            print(file=sys.stderr)


def _topic_name(text: str) -> str:
    """``--topic``: a name Kafka accepts (no ``..``, ``/``, NUL, at most 249 characters)."""
    from storage_core.log.topic_partition import validate_topic_name

    try:
        validate_topic_name(text)
    except InvalidTopicError as exc:
        raise argparse.ArgumentTypeError(exc.detail) from None
    return text


def _bounded_int(what: str, low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what} (an integer in {low}..{high}); got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected {what} in {low}..{high}; got {value}")
        return value
    parse.__name__ = what  # argparse names the type in its messages
    return parse


_epoch_ms = _bounded_int("a time in epoch milliseconds", 0, INT64_MAX)
_thread_count = _bounded_int("a number of threads", 1, 1024)


def _workers_flag(p: argparse.ArgumentParser, each: str = "") -> None:
    p.add_argument("--workers", type=_thread_count, default=None, metavar="N",
                   help=f"work on up to N partitions at once{each} (default: the CPUs, at most 8, or $KLOG_THREADS; "
                        "1: one after the other); the output is the same whatever N")
_partition_number = _bounded_int("a partition number", 0, INT32_MAX)


def _cmd_compact(args: argparse.Namespace) -> int:
    from storage_core.cleaner import CleanResult

    cleaner_results: list[tuple[CleanResult, list[str]]] = []
    groups = _broker_groups(args)
    brokers: list[int | None] = []
    for group in groups:
        done = _compact_group(args, group)
        cleaner_results.extend(done)
        brokers.extend([_broker_of(group, len(groups))] * len(done))
    return _print_compaction(args, cleaner_results, brokers)


def _compact_group(args: argparse.Namespace, group: list[Path]) -> list[tuple[Any, list[str]]]:
    """``klog compact`` of one broker's log dirs: (result, files set aside) per partition cleaned."""
    from storage_core.cleaner import CleanResult, LogCleaner
    from storage_core.files import DELETED_SUFFIX
    from storage_core.log.manager import LogManager
    from storage_core.log.topic_partition import TopicPartition

    cleaner_results: list[tuple[CleanResult, list[str]]] = []
    lm = LogManager(group, writable=True, close_each=True)  # files of one partition open at a time
    progress = _Progress(args)
    try:
        if args.topic:
            chosen = [tp for tp in sorted(lm.logs) if tp.topic in set(args.topic)]
        else:
            chosen = [tp for tp in sorted(lm.logs) if lm.logs[tp].config.compact]
        cleaner = LogCleaner(args.memory, now_ms=args.now, progress=progress)

        def clean(tp: TopicPartition) -> tuple[CleanResult, list[str]]:
            log = lm.reopen(tp)
            try:
                if args.roll and log.active_segment.size_in_bytes > 0:
                    log.roll()  # as a broker does after segment.ms: the data becomes cleanable
                result = cleaner.for_thread().clean_log(log, force=True)
                assert result is not None  # force=True: every partition is cleaned
                # Kafka keeps the files set aside for file.delete.delay.ms, for the readers of a live
                # dir; this command holds the dir's lock, so none is left behind for a later run
                set_aside = sorted(p.name for p in log.dir.glob("*" + DELETED_SUFFIX))
                log.remove_deleted_files(delay_ms=0)
                return result, set_aside
            finally:
                log.close()

        workers = pool_size(args.workers, len(chosen))
        with cleaner.deferred_checkpoints():  # not a whole checkpoint written per partition: N² at 10,000
            # partitions at once, each thread with its own offset map; results in partition order, and
            # the first error (in that order) raised once every thread stopped
            for result in ordered_map(clean, chosen, workers, window=workers):
                cleaner_results.append(result)
    finally:
        progress.close()
        lm.close()
    return cleaner_results


def _print_compaction(args: argparse.Namespace, cleaner_results: list[tuple[Any, list[str]]],
                      brokers: list[int | None]) -> int:
    """The summary of ``klog compact``: a row per replica cleaned (the broker named, of several brokers' dirs)."""
    import json

    rows = [{**r.summary(), "deleted_files": removed, **({} if node is None else {"broker": node})}
            for (r, removed), node in zip(cleaner_results, brokers, strict=True)]
    if args.json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    if not rows:
        if not args.quiet:
            print(f"no compacted topics in {args.dir}: name topics with --topic, or set cleanup.policy=compact in "
                  "klog-topic-configs.json")
        return EXIT_OK
    header = ["TOPIC", "PART", "BYTES BEFORE", "BYTES AFTER", "RECORDS READ", "REMOVED", "TOMBSTONES KEPT",
              "TOMBSTONES REMOVED", "PASSES"]
    table = [[str(r["topic"]) if "broker" not in r else f"{r['topic']} (broker {r['broker']})",
              str(r["partition"]), str(r["bytes_before"]), str(r["bytes_after"]),
              str(r["records_read"]), str(r["records_removed"]), str(r["tombstones_kept"]),
              str(r["tombstones_removed"]), str(r["passes"])] for r in rows]
    widths = [max(len(h), *(len(row[i]) for row in table)) for i, h in enumerate(header)]
    for row in [header, *table]:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    before = sum(int(r["bytes_before"]) for r in rows)
    after = sum(int(r["bytes_after"]) for r in rows)
    if not args.quiet:
        print(f"total: {len(rows)} partitions, {before} -> {after} bytes")
    if not args.roll and any(r["passes"] == 0 for r in rows) and not args.quiet:
        print("partitions with 0 passes hold only their active segment, which Kafka never cleans; "
              "--roll rolls it first")
    return EXIT_OK


SNAPSHOT_EXAMPLES = """examples:
  klog snapshot /var/lib/kafka/data /backup/kafka         copy a live broker's log dir (read-only on it)
  klog snapshot data s3://bucket/kafka/data --json         into a bucket; rerun: only what is new is copied
  klog snapshot data s3://bucket/copy --fs endpoint_override=127.0.0.1:8333 --fs scheme=http
  klog snapshot data backup --remote-storage /mnt/tiered --include-remote   a tiered topic's whole history
A tiered topic's remote history (KIP-405) is noted and left in the remote storage, or with --include-remote
copied in as ordinary segments.
The copy is consistent while a broker or klog writer appends, rolls and deletes: closed segments are
copied once, the active segment up to its last complete CRC-valid batch (indexes rebuilt for those bytes),
checkpoints last. DST gets recovery-point-offset-checkpoint = the copied end of each partition and
log-start-offset-checkpoint, and no clean-shutdown marker (a reader revalidates each last segment).
DST must be missing, empty, or an earlier snapshot of the same SRC. Credentials of a URI come from the
environment (AWS_ACCESS_KEY_ID, AWS_PROFILE, ...) or --fs access_key=... (never printed).
exit codes: 0 ok, 1 the source could not be copied consistently, or holds lost data no copy can carry (a
partition whose .log files are all gone while its checkpoints say it held offsets: named, the rest copied),
2 usage error (bad SRC/DST, DST a log dir that is not a snapshot, DST locked by another writer)
"""


def _cmd_snapshot(args: argparse.Namespace) -> int:
    import dataclasses
    import json

    from storage_core.tools.snapshot import snapshot

    storage = _storage(args)
    bar: _Bar | None = None

    def progress(n: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            bar = _Bar(args, total, "snapshot")
        bar.update(n)

    try:  # errors of the object store name the URI and operation, never a secret (storage_core.fs)
        summary = snapshot(args.src, args.dst, storage=storage, progress=progress, checksum=args.checksum,
                           workers=args.workers, remote=_remote(args), include_remote=args.include_remote)
    finally:
        if bar is not None:
            bar.close()
    status = EXIT_DATA if summary.lost else EXIT_OK
    for lost in summary.lost:  # whatever the output options: a copy cannot carry this loss
        print(f"error: LOST DATA at the source: {lost}", file=sys.stderr)
    if args.json:
        print(json.dumps(dataclasses.asdict(summary), indent=2))
        return status
    if not args.quiet:
        for note in summary.notes:
            print(f"note: {note}", file=sys.stderr)
        for pc in summary.partitions:
            for note in pc.notes:
                print(f"note: {pc.topic}-{pc.partition}: {note}", file=sys.stderr)
            remote = ("" if not pc.remote_segments else
                      f" (offsets {pc.remote_start_offset}..{pc.remote_end_offset} from the remote storage)"
                      if pc.remote_included else
                      f"; offsets {pc.remote_start_offset}..{pc.remote_end_offset} left in the remote storage")
            broker = "" if pc.broker is None else f" from broker {pc.broker}"
            print(f"{pc.topic}-{pc.partition}{broker}: offsets {pc.start_offset}..{pc.end_offset}, "
                  f"{_plural(pc.segments_copied, 'segment')} of {pc.segments} copied ({_human(pc.bytes_copied)})"
                  f"{remote}")
        s = summary
        print(f"snapshot of {s.source} in {s.destination}: {_plural(s.partitions_copied, 'partition')} copied, "
              f"{s.partitions_skipped} up to date, {s.partitions_deleted} removed; "
              f"{_plural(s.segments_copied, 'segment')} copied ({_human(s.bytes_copied)}), {s.segments_skipped} "
              f"skipped ({_human(s.bytes_skipped)}), {s.segments_deleted} removed from DST")
    return status


SYNC_EXAMPLES = """examples:
  klog sync data --topic orders --format iceberg --warehouse lake --to kafka.orders
  klog sync data --topic orders --format delta --to lake/orders
  klog sync data --topic orders --format iceberg --catalog prod --to kafka.orders   a catalog of ~/.pyiceberg.yaml
  klog sync data --topic-pattern 'orders.*' --format delta --to s3://lake/orders --option failOnDataLoss=false
  klog sync data --topic users --format delta --to lake/users --mode upsert        each key's latest record
  klog sync data --topic orders --format iceberg --warehouse lake --to kafka.orders --option valueFormat=confluent-avro
exit codes: 0 ok (the table holds every record up to each partition's end), 1 corrupt or lost data found,
2 usage error (a bad option, another topic's table, a range lost to retention, another sync committed
first: rerun)
The log dir is only read. Each commit records the offsets it reaches in the table itself; a rerun
continues from there, so a sync killed at any moment loses and repeats nothing.
"""


def _cmd_sync(args: argparse.Namespace) -> int:
    from storage_core.tables import sync

    options: dict[str, Any] = dict(_pairs(args.option, "--option"))
    options.update(_fs_options(args))
    if args.topic:
        options["topics"] = ",".join(args.topic)
    if args.topic_pattern:
        options["topicPattern"] = args.topic_pattern
    summary = sync(args.dir, args.to, format=args.format, catalog=args.catalog,
                   catalog_properties=_pairs(args.catalog_property, "--catalog-property") or None,
                   warehouse=args.warehouse, storage_options=_pairs(args.storage_option, "--storage-option") or None,
                   commit_records=args.commit_records, mode=args.mode, partition_by=args.partition_by,
                   rebase=args.rebase, **options)
    if args.json:
        print(json.dumps({"table": summary.table, "format": summary.format, "mode": summary.mode,
                          "records": summary.records, "dropped": summary.dropped,
                          "commits": summary.commits, "version": summary.version,
                          "ranges": [{"topic": r.topic_partition.topic, "partition": r.topic_partition.partition,
                                      "start": r.start, "end": r.end} for r in summary.ranges],
                          "offsets": {t: {str(p): o for p, o in sorted(ps.items())}
                                      for t, ps in sorted(summary.offsets.items())}}, indent=2))
    elif not args.quiet:
        for r in summary.ranges:
            print(f"{r.topic_partition}: offsets {r.start}..{r.end} ({r.end - r.start} offsets)")
        print(f"synced {summary.records:,} records in {_plural(summary.commits, 'commit')} to {summary.table}"
              + ("" if summary.commits else ": it was up to date")
              + (f"; {summary.dropped:,} with no key dropped, as Kafka's cleaner drops them" if summary.dropped else ""))
    return EXIT_OK


RESTORE_EXAMPLES = """examples:
  klog restore backup /var/lib/kafka/data                   every topic of a klog snapshot (or log dir)
  klog restore orders.parquet /var/lib/kafka/data           a klog export file (or a dir of them, --per-partition)
  klog restore lake/ns/orders /var/lib/kafka/data           a Delta or Iceberg table klog sync made (its dir)
  klog restore backup /var/lib/kafka/data --topic orders --compression zstd --json
  klog restore backup /var/lib/kafka/data --groups          the records and the groups of the snapshot, one commit
  klog restore orders.parquet /var/lib/kafka/data --groups groups.json --group billing   from klog groups --json
  klog restore backup /var/lib/kafka/data --offsets new --groups --unmapped end   appended, groups translated
  klog restore orders.parquet b1/data,b2/data,b3/data --topic orders   into a cluster: every replica
Each record goes back at its partition and offset, with its key, value, headers, timestamp and
timestamp type; gaps between offsets stay gaps. A log dir or snapshot is read read_committed (aborted
records and transaction markers are not restored); an export holds what it was exported with.
DIR: a stopped broker's log dir (the topics created first with Kafka's Admin, as many partitions as
the source's: kafka-topics.sh --create) or a dir of klog's own. Each partition must end at or below the
first offset restored into it; an empty one gets that offset as its log start offset. --offsets new
appends the records at each partition's end instead, with new offsets (a Parquet file without an
offset column is taken then). --groups writes the consumer groups' committed offsets into DIR's
__consumer_offsets in the same commit (from SOURCE, or FROM: a klog groups --json file or a log dir):
kept where the restored partition reaches them (past the last restored record, up to the source's
end: the partition's new end), with --offsets new translated to the first restored record at or
after them. The commit is atomic: a restore killed at any moment leaves DIR as it was.
exit codes: 0 ok, 1 corrupt or lost data in the source, 2 usage error (a source without offsets, a
partition that already holds the offsets, a topic the broker's metadata does not know, a broker holding
DIR, a group DIR already has, a group offset no restored record maps to under --unmapped fail)
"""


def _cmd_restore(args: argparse.Namespace) -> int:
    import dataclasses

    from storage_core.tools.restore import restore

    summary = restore(args.source, args.dir, topics=args.topic, compression=args.compression,
                      lock_timeout_s=args.lock_timeout, offsets=args.offsets, groups=args.groups,
                      unmapped=args.unmapped, only_groups=args.group, storage=_storage(args))
    report = summary.groups
    if args.json:
        groups = None if report is None else {
            "from": args.groups,
            "protocols": dict(report.protocols), "records": report.records,
            "restored": [{"group": r.group, "topic": r.topic_partition.topic, "partition": r.topic_partition.partition,
                          "sourceOffset": r.source_offset, "targetOffset": r.target_offset, "how": r.how,
                          "offsetsPartition": r.offsets_partition} for r in report.restored],
            "skipped": [{"group": k.group, "topic": k.topic_partition.topic, "partition": k.topic_partition.partition,
                         "sourceOffset": k.source_offset, "reason": k.reason} for k in report.skipped]}
        print(json.dumps({"target": summary.target, "offsets": summary.offsets, "records": summary.records,
                          "partitions": [dataclasses.asdict(p) for p in summary.partitions], "groups": groups},
                         indent=2))
    elif not args.quiet:
        for p in summary.partitions:
            moved = "" if p.source_first is None else f" (source offsets {p.source_first}..{p.source_last})"
            print(f"{p.topic}-{p.partition}: {_plural(p.records, 'record')} at offsets {p.first}..{p.end}{moved}")
        print(f"restored {summary.records:,} records into {_plural(len(summary.partitions), 'partition')} of "
              f"{summary.target}" + (" at new offsets" if summary.offsets == "new" else ""))
        if report is not None:
            for r in report.restored:
                print(f"group {r.group} {r.topic_partition}: offset {r.source_offset} -> {r.target_offset} ({r.how})")
            for k in report.skipped:
                print(f"group {k.group} {k.topic_partition}: offset {k.source_offset} skipped")
            print(f"restored {_plural(len(report.restored), 'committed offset')} of "
                  f"{_plural(len(report.protocols), 'group')}"
                  + (f", skipped {len(report.skipped)}" if report.skipped else ""))
    return EXIT_OK


def _version() -> str:
    """The installed distribution's version (pyproject.toml's), as ``pip show klog`` reports it."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("klog")
    except PackageNotFoundError:
        return "(not installed: running from a checkout)"


class _Parser(argparse.ArgumentParser):
    """argparse's parser, its messages redacted like every other klog prints: a mistyped flag beside
    ``s3://KEY:SECRET@bucket`` is echoed in "unrecognized arguments" (and a bad value in "invalid
    choice"), which would print the secret. The sub-commands' parsers are of the same class."""

    def _print_message(self, message: str, file: Any = None) -> None:  # typeshed: SupportsWrite[str] | None
        super()._print_message(redact_uris(message) if message else message, file)


def build_parser() -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = _Parser(prog="klog", description="Kafka log directories without a broker.",
                                     epilog=MAIN_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    parser.add_argument("--version", action="version", version=f"klog {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("dump", help="print the batches and records of segment files",
                       description="Print the batches (and records) of .log files, like kafka-dump-log.sh.",
                       epilog=DUMP_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter, parents=[_common()])
    p.add_argument("files", nargs="+", metavar="FILE",
                   help=".log (or other record-set), .index, .timeindex, .txnindex or .snapshot files, or a "
                   "partition dir")
    p.add_argument("--deep-iteration", action="store_true", help="print every record, not only batches")
    p.add_argument("--print-data-log", action="store_true", help="print keys and payloads (implies --deep-iteration)")
    p.add_argument("--jsonl", action="store_true",
                   help="one JSON object per record, comparable with Kafka's own decoding")
    _aiven_config_args(p)  # objects of Aiven's tiered-storage layout (.rsm-manifest, .log, .indexes), decoded
    p.add_argument("--max-bytes", type=int, default=None, help="read at most this many bytes of each file")
    p.add_argument("--verify-index-only", action="store_true",
                   help="for .index/.timeindex files: check every entry against the .log without printing the "
                   "entries")
    p.add_argument("--index-sanity-check", action="store_true",
                   help="for .index/.timeindex files: only run Kafka's index sanity check")
    p.add_argument("--quiet", action="store_true", help=QUIET_HELP)
    dec = p.add_mutually_exclusive_group()
    dec.add_argument("--offsets-decoder", dest="decoder", action="store_const", const="offsets-decoder",
                     help="decode records as __consumer_offsets records (implies --print-data-log)")
    dec.add_argument("--transaction-log-decoder", dest="decoder", action="store_const",
                     const="transaction-log-decoder",
                     help="decode records as __transaction_state records (implies --print-data-log)")
    dec.add_argument("--cluster-metadata-decoder", dest="decoder", action="store_const",
                     const="cluster-metadata-decoder",
                     help="decode records as KRaft metadata records (implies --print-data-log)")
    dec.add_argument("--share-group-state-decoder", dest="decoder", action="store_const",
                     const="share-group-state-decoder",
                     help="decode records as __share_group_state records (implies --print-data-log)")
    dec.add_argument("--remote-log-metadata-decoder", dest="decoder", action="store_const",
                     const="remote-log-metadata-decoder",
                     help="decode records as __remote_log_metadata (tiered storage) records (implies --print-data-log)")
    dec.add_argument("--no-decoder", dest="decoder", action="store_const", const="none",
                     help="print internal topics' keys and payloads as text, not decoded")
    p.add_argument("--value-decoder", choices=["confluent-avro", "confluent-json", "confluent-protobuf"], default=None,
                   help="decode values written by Confluent's Avro (JSON Schema, Protobuf) serializer with their writer "
                   "schemas "
                   "from the _schemas topic, printed as JSON (implies --print-data-log)")
    p.add_argument("--key-decoder", choices=["confluent-avro", "confluent-json", "confluent-protobuf"], default=None,
                   help="decode keys the same way (implies --print-data-log)")
    p.add_argument("--schema-registry-path", metavar="DIR", default=None,
                   help="the log dir holding the _schemas topic (default: the log dir of each file)")
    p.add_argument("--skip-record-metadata", action="store_true",
                   help="print records without their metadata: only keys and payloads (batch lines stay, as in "
                   "kafka-dump-log)")
    p.set_defaults(func=_cmd_dump)

    p = sub.add_parser("describe", help="topics, partitions, offsets, time ranges, sizes, codecs of log dirs",
                       description="Describe the partitions of Kafka log dirs (read-only: nothing is written).",
                       epilog=DESCRIBE_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
                       parents=[_common()])
    p.add_argument("dir", metavar="DIR", help="a log dir, several separated by commas, or a partition dir")
    p.add_argument("--topic", action="append", type=_topic_name, help="only this topic (repeatable)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--quiet", action="store_true", help=QUIET_HELP)
    p.set_defaults(func=_cmd_describe)

    p = sub.add_parser("groups", help="consumer groups' committed offsets and lag, from __consumer_offsets",
                       description="Each consumer group's committed offset per partition, as of the end of the "
                       "__consumer_offsets partitions in the log dirs (read-only), with the lag against the log "
                       "end offsets of the same dirs.",
                       epilog=GROUPS_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
                       parents=[_common()])
    p.add_argument("dir", metavar="DIR", help="a log dir, or several separated by commas")
    p.add_argument("--group", metavar="GROUP", help="only this group (an unknown group is an error listing the groups)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_cmd_groups)

    p = sub.add_parser("verify", help="check every batch's CRC and every index entry (read-only)",
                       description="Verify log dirs: CRC and structure of every batch, index entries against the "
                       "log. Missing or untrimmed indexes (which Kafka rebuilds) are warnings.",
                       epilog=VERIFY_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter, parents=[_common()])
    p.add_argument("dir", metavar="DIR", help="a log dir, several separated by commas, or a partition dir")
    p.add_argument("--topic", action="append", type=_topic_name, help="only this topic (repeatable)")
    p.add_argument("--quiet", action="store_true", help=QUIET_HELP)
    _remote_args(p)
    _workers_flag(p)
    p.set_defaults(func=_cmd_verify)

    p = sub.add_parser("export", help="a topic or a range of it to Parquet (pyarrow, no Spark)",
                       description="Export a topic, or an offset or time range of it, to one Parquet file (or a\n"
                       "file per partition) with the columns of spark.read.format('klog'). Read-only: the log dir is not written.",
                       epilog=EXPORT_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
                       parents=[_common()])
    p.add_argument("dir", metavar="DIR", help="a log dir, several separated by commas, or a partition dir")
    p.add_argument("--topic", required=True, type=_topic_name, help="the topic to export")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="the Parquet file to write (with "
                   "--per-partition: the directory)")
    p.add_argument("--per-partition", action="store_true",
                   help="write a Parquet file per partition, <topic>-<n>.parquet, into the directory FILE, several "
                        "at once (--threads): one file has one writer, which is one thread")
    p.add_argument("--partition", type=_partition_number, action="append", metavar="N", help="only this partition (repeatable)")
    p.add_argument("--start-offset", type=int, metavar="OFFSET", help="first offset (default: the log start)")
    p.add_argument("--end-offset", type=int, metavar="OFFSET", help="end offset, exclusive (default: the log end)")
    p.add_argument("--start-time", metavar="TIME", help="from the first record at or after TIME (ms or ISO-8601)")
    p.add_argument("--end-time", metavar="TIME", help="up to the first record at or after TIME, exclusive")
    p.add_argument("--if-past-end", choices=("error", "latest"), default="error",
                   help="a --start-time after a partition's last record: error (default), or latest: start at "
                        "its end (nothing of it is exported), as Spark's startingOffsetsByTimestampStrategy")
    p.add_argument("--read-committed", action="store_true",
                   help="stop at the last stable offset and leave out aborted transactions")
    p.add_argument("--headers", action="store_true", help="add the headers column")
    p.add_argument("--metadata", action="store_true", help="add the batch metadata columns")
    p.add_argument("--compression", default="zstd", metavar="CODEC",
                   help="Parquet compression: none, snappy, gzip, zstd (default), lz4, brotli")
    p.add_argument("--overwrite", action="store_true",
                   help="replace FILE if it exists (--per-partition: the Parquet files of an earlier export)")
    p.add_argument("--threads", type=_thread_count, default=None, metavar="N",
                   help="decode up to N pieces at once (default: the CPUs, at most 8, or $KLOG_THREADS; 1: no threads)")
    _remote_args(p)
    p.add_argument("--quiet", action="store_true", help=QUIET_HELP)
    p.set_defaults(func=_cmd_export)

    p = sub.add_parser("recover", help="recover log dirs as a broker would after a crash (writes)",
                       description="Revalidate every batch, truncate torn tails, rebuild indexes, then write the "
                       "checkpoints and the clean-shutdown marker.",
                       epilog=RECOVER_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter, parents=[_common()])
    p.add_argument("dir", metavar="DIR", help="a log dir, or several separated by commas")
    p.add_argument("--quiet", action="store_true", help=QUIET_HELP)
    _workers_flag(p)
    p.set_defaults(func=_cmd_recover)

    p = sub.add_parser("retention", help="apply retention.ms / retention.bytes now (writes)",
                       description="Delete old segments by Kafka's retention rules (delete by rename to .deleted, "
                       "removed after file.delete.delay.ms).",
                       epilog=RETENTION_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
                       parents=[_common()])
    p.add_argument("dir", metavar="DIR", help="a log dir, or several separated by commas")
    p.add_argument("--topic", action="append", type=_topic_name, help="only this topic (repeatable)")
    p.add_argument("--config", action="append", metavar="NAME=VALUE",
                   help="topic config by its Kafka name, e.g. retention.ms=86400000 (repeatable); overrides the "
                        "topics' stored configs (KRaft metadata, klog-topic-configs.json) for this run")
    p.add_argument("--now", type=_epoch_ms, default=None, help="the current time in ms (default: the clock)")
    p.add_argument("--quiet", action="store_true", help=QUIET_HELP)
    p.set_defaults(func=_cmd_retention)

    p = sub.add_parser("compact", help="compact topics now, as Kafka's log cleaner does (writes)",
                       description="Run Kafka's log cleaner on the named topics (default: every topic whose "
                       "cleanup.policy includes compact) now, whatever their dirty ratio and policy: keep the "
                       "latest record of each key, drop tombstones past delete.retention.ms and aborted "
                       "transactions, with the .cleaned/.swap/.deleted protocol.",
                       epilog=COMPACT_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
                       parents=[_common()])
    p.add_argument("dir", metavar="DIR", help="a log dir, or several separated by commas")
    p.add_argument("--topic", action="append", type=_topic_name, help="only this topic (repeatable)")
    p.add_argument("--memory", type=_byte_size, default=16 << 20, metavar="BYTES",
                   help="offset map memory (24 bytes per key, as Kafka counts; default 16M); a full map "
                   "means more passes")
    p.add_argument("--now", type=_epoch_ms, default=None, help="the current time in ms (default: the clock)")
    p.add_argument("--roll", action="store_true",
                   help="roll each partition's active segment first (Kafka never cleans the active segment)")
    p.add_argument("--json", action="store_true", help="the summary as JSON")
    p.add_argument("--quiet", action="store_true", help=QUIET_HELP)
    _workers_flag(p, " (each with its own --memory offset map)")
    p.set_defaults(func=_cmd_compact)

    p = sub.add_parser("snapshot", help="a consistent, incremental copy of a log dir being written (local or URI)",
                       description="Copy the log dir SRC to DST (a local dir or a URI: s3://, gs://, abfs://, "
                       "hdfs://) while a broker or klog writer may be writing SRC. Read-only on SRC: no lock, no "
                       "write. A rerun copies only what is new or changed.",
                       epilog=SNAPSHOT_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
                       parents=[_common()])
    p.add_argument("src", metavar="SRC", help="a log dir (or one partition dir), local or a URI; or the log dirs of a "
                   "cluster's brokers, 'b1/data,b2/data,b3/data' or a glob: a cluster snapshot (each partition once, "
                   "from the replica a read reads, up to its high watermark)")
    p.add_argument("dst", metavar="DST", help="the snapshot's log dir: missing, empty, or an earlier snapshot of SRC")
    p.add_argument("--checksum", action="store_true",
                   help="compare every closed segment's CRC-32C with DST's, not only its identity and size")
    p.add_argument("--json", action="store_true", help="the summary as JSON (bytes, segments, partitions copied "
                   "and skipped)")
    p.add_argument("--quiet", action="store_true", help=QUIET_HELP)
    p.add_argument("--include-remote", action="store_true",
                   help="copy a tiered topic's remote segments too (from --remote-storage), before the local ones, "
                   "so DST holds the whole history; without it they are left in the remote storage and noted")
    _remote_args(p)
    _workers_flag(p)
    p.set_defaults(func=_cmd_snapshot)

    p = sub.add_parser("sync", help="append what is new of topics to an Iceberg or Delta table, exactly once",
                       description="Keep an Iceberg or Delta table in step with topics: append the records the table "
                       "does not hold yet,\nwith Spark's Kafka-source columns, recording each partition's next "
                       "offset in the table's own\ncommits. read_committed by default. The log dir is only read.",
                       epilog=SYNC_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter, parents=[_common()])
    p.add_argument("dir", metavar="DIR", help="a log dir, several separated by commas, or a partition dir")
    p.add_argument("--to", required=True, metavar="TABLE",
                   help="Iceberg: namespace.table; Delta: the table's path or URI")
    p.add_argument("--format", required=True, choices=("iceberg", "delta"), help="the table format")
    p.add_argument("--warehouse", metavar="DIR", default=None,
                   help="Iceberg: an embedded SQLite catalog in DIR/catalog.db, the tables under DIR")
    p.add_argument("--catalog", metavar="NAME", default=None,
                   help="Iceberg: a catalog as pyiceberg configures it (~/.pyiceberg.yaml, PYICEBERG_CATALOG__*)")
    p.add_argument("--catalog-property", action="append", metavar="KEY=VALUE",
                   help="Iceberg: a property of the catalog, over its configuration (repeatable)")
    p.add_argument("--storage-option", action="append", metavar="KEY=VALUE",
                   help="Delta: a storage option of delta-rs for a URI table (repeatable)")
    p.add_argument("--topic", action="append", type=_topic_name, help="a topic to sync (repeatable)")
    p.add_argument("--topic-pattern", metavar="REGEX", default=None, help="the topics whose whole name matches")
    p.add_argument("--option", action="append", metavar="KEY=VALUE",
                   help="a read option of spark.read.format('klog') (isolationLevel, endingOffsets, "
                   "failOnDataLoss, includeHeaders, remoteStorage, ...) (repeatable)")
    p.add_argument("--mode", choices=("append", "upsert"), default="append",
                   help="append: every record a row (default); upsert: each key's latest record a row, tombstones "
                   "delete, as Kafka's cleaner leaves a compacted topic")
    p.add_argument("--partition-by", choices=("day", "hour"), default=None,
                   help="a new table partitioned by the day or hour (UTC) of the record timestamp")
    p.add_argument("--commit-records", type=_bounded_int("--commit-records", 1, 2**31 - 1), default=1_000_000,
                   metavar="N", help="records per commit (default 1000000): each commit is held in memory")
    p.add_argument("--rebase", action="store_true",
                   help="a table another writer changed on purpose (a restore, rollback, append, delete): re-base "
                   "the offsets on the records it holds (one past each partition's highest offset) and sync from "
                   "there; without it such a table is refused")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--quiet", action="store_true", help=QUIET_HELP)
    p.set_defaults(func=_cmd_sync)

    p = sub.add_parser("restore", help="records (and consumer groups) back into a log dir (writes; broker stopped)",
                       description="Write the records of SOURCE into the log dir DIR at their original offsets "
                       "(or new ones), partitions and timestamps, and consumer groups' committed offsets with them."
                       "\nSOURCE: a log dir or klog snapshot (read read_committed), a "
                       "klog export Parquet file or dir, or the dir of a Delta or Iceberg table klog sync made.",
                       epilog=RESTORE_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
                       parents=[_common()])
    p.add_argument("source", metavar="SOURCE", help="a log dir or klog snapshot, a klog export Parquet file or dir, "
                   "or a Delta or Iceberg table's dir (klog sync's)")
    p.add_argument("dir", metavar="DIR", help="the log dir to restore into (a stopped broker's, or klog's own), or "
                   "every broker's of a stopped cluster, separated by commas (each in-sync replica written)")
    p.add_argument("--topic", action="append", type=_topic_name,
                   help="a topic to restore (repeatable; default: every topic of SOURCE but Kafka's internal ones)")
    p.add_argument("--compression", default="none", choices=("none", "gzip", "snappy", "lz4", "zstd"),
                   help="the codec of the written batches (default none)")
    p.add_argument("--offsets", default="keep", choices=("keep", "new"),
                   help="keep: each record at its original offset (default); new: appended at each partition's "
                   "end with new offsets")
    p.add_argument("--groups", nargs="?", const="source", default=None, metavar="FROM",
                   help="restore consumer groups' committed offsets in the same commit: alone, SOURCE's own (a log "
                   "dir or snapshot); FROM: a klog groups --json file or a log dir")
    p.add_argument("--group", action="append", metavar="G",
                   help="only this group (repeatable; with --groups)")
    p.add_argument("--unmapped", default="fail", choices=("fail", "skip", "end", "start"),
                   help="a group's offset no restored record maps to: refuse the restore (default), skip it, or "
                   "set it to the partition's end or start")
    p.add_argument("--lock-timeout", type=float, default=0.0, metavar="SECONDS",
                   help="how long to wait for another klog writer's lock on DIR (a broker's is refused at once)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--quiet", action="store_true", help=QUIET_HELP)
    p.set_defaults(func=_cmd_restore)
    return parser


def _is_usage(exc: KlogError) -> bool:
    """A wrong path, name or value given by the user, a file system that is full or read-only, or
    object storage that cannot be reached or refuses (exit 2), as opposed to bad data found (exit 1)."""
    if isinstance(exc, (InvalidOptionError, LogConfigError, InvalidTopicError, LogDirLockedError, StorageError,
                        UnsafePathError, NotALogDirError, ObjectStoreError, SnapshotError, SyncError, RestoreError,
                        GroupRestoreError, OffsetOutOfRangeError)):  # an offset asked for that the log does not hold
        return True
    return exc.detail.startswith(("no such ", "not a directory"))


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    debug = bool(getattr(args, "debug", False))
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        ensure_open_files()
        return int(func(args))
    except KlogError as exc:
        if debug:
            traceback.print_exc()
        print(f"klog: error: {exc}", file=sys.stderr)
        return EXIT_USAGE if _is_usage(exc) else EXIT_DATA
    except BrokenPipeError:
        sys.stderr.close()  # the reader went away (klog dump ... | head): not an error
        return EXIT_OK
    except KeyboardInterrupt:
        print("klog: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:  # permission denied, disk full, a path that vanished: the system said no
        if debug:
            traceback.print_exc()
        where = f": {exc.filename}" if exc.filename else ""
        print(redact_uris(f"klog: error: {exc.strerror or exc}{where}"), file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:  # noqa: BLE001 - a bug in klog: say so in one line, traceback with --debug
        if debug:
            traceback.print_exc()
        print(redact_uris(f"klog: error: internal error {type(exc).__name__}: {exc} (this is a bug in klog; rerun "
                          "with --debug for the traceback and report it)"), file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
