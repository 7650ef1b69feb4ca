"""The ``klog`` command line. Every command: ``--help`` with examples, one-line errors
(``--debug`` for a traceback), exit codes 0 ok, 1 data problem found, 2 usage error.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence

from .errors import InvalidOptionError, KlogError, LogConfigError

EXIT_OK = 0
EXIT_DATA = 1
EXIT_USAGE = 2

DUMP_EXAMPLES = """examples:
  klog dump 00000000000000000000.log                     batch headers, like kafka-dump-log
  klog dump --print-data-log 00000000000000000000.log    every record with key and payload
  klog dump --jsonl 00000000000000000000.log > out.jsonl one JSON object per record
  klog dump 00000000000000000000.index                   offset index entries
  klog dump --verify-index-only 00000000000000000000.index   entries checked against the .log
"""


def _cmd_dump(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .dump import dump_jsonl, dump_text

    missing = [p for p in args.files if not Path(p).is_file()]
    if missing:
        print(f"klog: error: no such file: {', '.join(missing)} (expected .log or other record-set files)",
              file=sys.stderr)
        return EXIT_USAGE
    out = sys.stdout
    status = EXIT_OK
    for path in args.files:
        if path.endswith((".index", ".timeindex", ".txnindex")):
            from .dump import dump_index

            if dump_index(path, out, sys.stderr, sanity_only=args.index_sanity_check,
                          verify_only=args.verify_index_only):
                status = EXIT_DATA
            continue
        if args.jsonl:
            summary = dump_jsonl(path, out)
        else:
            summary = dump_text(path, out, deep=args.deep_iteration, print_data=args.print_data_log,
                                max_bytes=args.max_bytes)
        if summary.error is not None or summary.invalid_batches:
            status = EXIT_DATA
            if args.jsonl:  # the error is in the output already; say it on stderr too
                print(f"klog: {summary.error}", file=sys.stderr)
    return status


DESCRIBE_EXAMPLES = """examples:
  klog describe /var/lib/kafka/data                 every topic-partition of a log dir
  klog describe data --topic orders --json          one topic, as JSON
  klog describe /mnt/a,/mnt/b                        several log dirs (Kafka's log.dirs)
"""

VERIFY_EXAMPLES = """examples:
  klog verify /var/lib/kafka/data          check CRCs and indexes of every partition (read-only)
  klog verify data/orders-0 --quiet        one partition; only the exit code and problems
exit codes: 0 all good (warnings allowed), 1 data is corrupt or lost, 2 usage error
"""


def _log_dirs(arg: str) -> list[str]:
    return [p for p in arg.split(",") if p]


def _partitions(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from .manager import find_partitions

    parts = find_partitions(_log_dirs(args.dir))
    if args.topic:
        wanted = set(args.topic)
        parts = [p for p in parts if p.topic_partition.topic in wanted]
        missing = wanted - {p.topic_partition.topic for p in parts}
        if missing:
            raise KlogError(f"no such topic in {args.dir}: {', '.join(sorted(missing))}")
    return parts


def _fmt_ts(ms: int | None) -> str:
    import datetime as dt

    if ms is None:
        return "-"
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z"


def _cmd_describe(args: argparse.Namespace) -> int:
    import dataclasses
    import json

    from .report import describe_partition

    rows = [describe_partition(p) for p in _partitions(args)]
    if args.json:
        print(json.dumps([dataclasses.asdict(r) for r in rows], indent=2))
        return EXIT_OK
    header = ["TOPIC", "PART", "START", "END", "~RECORDS", "SEGS", "BYTES", "FIRST TIMESTAMP", "MAX TIMESTAMP",
              "CODECS"]
    table = [[r.topic, str(r.partition), str(r.start_offset), str(r.end_offset), str(r.estimated_records),
              str(r.segments), str(r.size_bytes), _fmt_ts(r.first_timestamp), _fmt_ts(r.max_timestamp),
              ",".join(r.codecs) or "-"] for r in rows]
    widths = [max(len(h), *(len(row[i]) for row in table)) if table else len(h) for i, h in enumerate(header)]
    for row in [header, *table]:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return EXIT_OK


def _cmd_verify(args: argparse.Namespace) -> int:
    from .report import verify_partition

    status = EXIT_OK
    for p in _partitions(args):
        rep = verify_partition(p)
        for w in rep.warnings:
            print(f"warning: {w}", file=sys.stderr)
        for e in rep.errors:
            print(f"error: {e}", file=sys.stderr)
        if rep.errors:
            status = EXIT_DATA
        if not args.quiet:
            state = "CORRUPT" if rep.errors else "ok"
            print(f"{p.topic_partition}: {state} ({rep.batches} batches, {len(rep.errors)} errors, "
                  f"{len(rep.warnings)} warnings)")
    return status


RECOVER_EXAMPLES = """examples:
  klog recover data                 revalidate every segment, cut torn tails, rebuild indexes
exit codes: 0 nothing was cut, 1 bytes were cut (listed), 2 usage error
This writes to the log dir: never run it on a dir a live broker owns (the .lock prevents it).
"""

RETENTION_EXAMPLES = """examples:
  klog retention data --config retention.ms=604800000        delete segments older than 7 days
  klog retention data --topic orders --config retention.bytes=1073741824
"""


def _configs(pairs: list[str] | None):  # type: ignore[no-untyped-def]
    from .config import LogConfig

    props = {}
    for pair in pairs or []:
        if "=" not in pair:
            raise InvalidOptionError(f"--config expects name=value, got {pair!r}")
        k, v = pair.split("=", 1)
        props[k.strip()] = v.strip()
    return LogConfig.from_properties(props)


def _cmd_recover(args: argparse.Namespace) -> int:
    from .manager import LogManager

    lm = LogManager(_log_dirs(args.dir), writable=True, full_recovery=True)
    status = EXIT_OK
    try:
        for tp, log in sorted(lm.logs.items()):
            for note in log.recovery_notes:
                print(f"{tp}: {note}")
            if log.truncated_bytes:
                status = EXIT_DATA
                print(f"{tp}: cut {log.truncated_bytes} bytes after offset {log.log_end_offset - 1}")
            elif not args.quiet:
                print(f"{tp}: ok, log end offset {log.log_end_offset}")
    finally:
        lm.close()
    return status


def _cmd_retention(args: argparse.Namespace) -> int:
    from .manager import LogManager

    cfg = _configs(args.config)
    lm = LogManager(_log_dirs(args.dir), writable=True, config=cfg)
    try:
        if args.topic:
            missing = set(args.topic) - {tp.topic for tp in lm.logs}
            if missing:
                raise InvalidOptionError(f"no such topic in {args.dir}: {', '.join(sorted(missing))}")
            for tp in [tp for tp in lm.logs if tp.topic not in set(args.topic)]:
                lm.logs.pop(tp).close()
        deleted = lm.retention(args.now)
        for tp, bases in sorted(deleted.items()):
            print(f"{tp}: deleted {len(bases)} segments, log start offset now {lm.logs[tp].log_start_offset}")
        if not deleted and not args.quiet:
            print("nothing to delete")
    finally:
        lm.close()
    return EXIT_OK


COMPACT_EXAMPLES = """examples:
  klog compact /var/lib/kafka/data                   every topic whose cleanup.policy includes compact
  klog compact data --topic users --topic orders     these topics, whatever their cleanup.policy
  klog compact data --memory 64M --json              a bigger offset map; the summary as JSON
  klog compact copy-of-broker-dir --roll             roll active segments first, so that all data is cleanable
topic configs: Kafka's internal topics are compacted; other topics take cleanup.policy and the
cleaner's configs from <log dir>/klog-topic-configs.json (see the README).
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
    """A progress bar on stderr: tqdm when installed, else a line redrawn at most once a second."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.total = 0
        self.done = 0
        self._bar = None
        self._last = 0.0
        if enabled:
            try:
                from tqdm import tqdm
            except ImportError:
                tqdm = None
            if tqdm is not None:
                self._bar = tqdm(total=0, unit="B", unit_scale=True, unit_divisor=1024, desc="compact",
                                 file=sys.stderr, leave=False)

    def __call__(self, done: int, added: int) -> None:
        if not self.enabled:
            return
        self.total += added
        self.done = min(self.done + done, self.total) if self.total else self.done + done
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
        elif self.enabled and self._last:
            print(file=sys.stderr)


def _cmd_compact(args: argparse.Namespace) -> int:
    import json

    from .cleaner import LogCleaner
    from .manager import LogManager

    cleaner_results = []
    lm = LogManager(_log_dirs(args.dir), writable=True)
    progress = _Progress(not args.quiet)
    try:
        if args.topic:
            missing = set(args.topic) - {tp.topic for tp in lm.logs}
            if missing:
                raise InvalidOptionError(f"no such topic in {args.dir}: {', '.join(sorted(missing))}; expected one "
                                         f"of {', '.join(sorted({tp.topic for tp in lm.logs})) or '(none)'}")
            chosen = [tp for tp in sorted(lm.logs) if tp.topic in set(args.topic)]
        else:
            chosen = [tp for tp in sorted(lm.logs) if lm.logs[tp].config.compact]
        cleaner = LogCleaner(args.memory, now_ms=args.now, progress=progress)
        for tp in chosen:
            if args.roll and lm.logs[tp].active_segment.size_in_bytes > 0:
                lm.logs[tp].roll()  # as a broker does after segment.ms: the data becomes cleanable
            result = cleaner.clean_log(lm.logs[tp], force=True)
            assert result is not None
            cleaner_results.append(result)
    finally:
        progress.close()
        lm.close()
    rows = [r.summary() for r in cleaner_results]
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
    table = [[str(r["topic"]), str(r["partition"]), str(r["bytes_before"]), str(r["bytes_after"]),
              str(r["records_read"]), str(r["records_removed"]), str(r["tombstones_kept"]),
              str(r["tombstones_removed"]), str(r["passes"])] for r in rows]
    widths = [max(len(h), *(len(row[i]) for row in table)) for i, h in enumerate(header)]
    for row in [header, *table]:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    before = sum(int(r["bytes_before"]) for r in rows)  # type: ignore[call-overload]
    after = sum(int(r["bytes_after"]) for r in rows)  # type: ignore[call-overload]
    print(f"total: {len(rows)} partitions, {before} -> {after} bytes")
    if not args.roll and any(r["passes"] == 0 for r in rows) and not args.quiet:
        print("partitions with 0 passes hold only their active segment, which Kafka never cleans; "
              "--roll rolls it first")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="klog", description="Kafka log directories without a broker.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("dump", help="print the batches and records of segment files",
                       description="Print the batches (and records) of .log files, like kafka-dump-log.sh.",
                       epilog=DUMP_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+", metavar="FILE", help=".log (or other record-set) files")
    p.add_argument("--deep-iteration", action="store_true", help="print every record, not only batches")
    p.add_argument("--print-data-log", action="store_true", help="print keys and payloads (implies --deep-iteration)")
    p.add_argument("--jsonl", action="store_true",
                   help="one JSON object per record, comparable with Kafka's own decoding")
    p.add_argument("--max-bytes", type=int, default=None, help="read at most this many bytes of each file")
    p.add_argument("--verify-index-only", action="store_true",
                   help="for .index files: check every entry against the .log without printing the entries")
    p.add_argument("--index-sanity-check", action="store_true",
                   help="for .index/.timeindex files: only run Kafka's index sanity check")
    p.set_defaults(func=_cmd_dump)

    p = sub.add_parser("describe", help="topics, partitions, offsets, time ranges, sizes, codecs of log dirs",
                       description="Describe the partitions of Kafka log dirs (read-only: nothing is written).",
                       epilog=DESCRIBE_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir", metavar="DIR", help="a log dir, several separated by commas, or a partition dir")
    p.add_argument("--topic", action="append", help="only this topic (repeatable)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_cmd_describe)

    p = sub.add_parser("verify", help="check every batch's CRC and every index entry (read-only)",
                       description="Verify log dirs: CRC and structure of every batch, index entries against the "
                       "log. Missing or untrimmed indexes (which Kafka rebuilds) are warnings.",
                       epilog=VERIFY_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir", metavar="DIR", help="a log dir, several separated by commas, or a partition dir")
    p.add_argument("--topic", action="append", help="only this topic (repeatable)")
    p.add_argument("--quiet", action="store_true", help="print problems only")
    p.set_defaults(func=_cmd_verify)

    p = sub.add_parser("recover", help="recover log dirs as a broker would after a crash (writes)",
                       description="Revalidate every batch, truncate torn tails, rebuild indexes, then write the "
                       "checkpoints and the clean-shutdown marker.",
                       epilog=RECOVER_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir", metavar="DIR", help="a log dir, or several separated by commas")
    p.add_argument("--quiet", action="store_true", help="print only what was cut")
    p.set_defaults(func=_cmd_recover)

    p = sub.add_parser("retention", help="apply retention.ms / retention.bytes now (writes)",
                       description="Delete old segments by Kafka's retention rules (delete by rename to .deleted, "
                       "removed after file.delete.delay.ms).",
                       epilog=RETENTION_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir", metavar="DIR", help="a log dir, or several separated by commas")
    p.add_argument("--topic", action="append", help="only this topic (repeatable)")
    p.add_argument("--config", action="append", metavar="NAME=VALUE",
                   help="topic config by its Kafka name, e.g. retention.ms=86400000 (repeatable)")
    p.add_argument("--now", type=int, default=None, help="the current time in ms (default: the clock)")
    p.add_argument("--quiet", action="store_true", help="print only what was deleted")
    p.set_defaults(func=_cmd_retention)

    p = sub.add_parser("compact", help="compact topics now, as Kafka's log cleaner does (writes)",
                       description="Run Kafka's log cleaner on the named topics (default: every topic whose "
                       "cleanup.policy includes compact) now, whatever their dirty ratio and policy: keep the "
                       "latest record of each key, drop tombstones past delete.retention.ms and aborted "
                       "transactions, with the .cleaned/.swap/.deleted protocol.",
                       epilog=COMPACT_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir", metavar="DIR", help="a log dir, or several separated by commas")
    p.add_argument("--topic", action="append", help="only this topic (repeatable)")
    p.add_argument("--memory", type=_byte_size, default=16 << 20, metavar="BYTES",
                   help="offset map memory (24 bytes per key, as Kafka counts; default 16M); a full map "
                   "means more passes")
    p.add_argument("--now", type=int, default=None, help="the current time in ms (default: the clock)")
    p.add_argument("--roll", action="store_true",
                   help="roll each partition's active segment first (Kafka never cleans the active segment)")
    p.add_argument("--json", action="store_true", help="the summary as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_compact)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except KlogError as exc:
        if args.debug:
            traceback.print_exc()
        print(f"klog: error: {exc}", file=sys.stderr)
        usage = isinstance(exc, (InvalidOptionError, LogConfigError)) or "no such" in exc.detail or "not a directory" in exc.detail
        return EXIT_USAGE if usage else EXIT_DATA
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
