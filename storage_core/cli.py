"""The ``klog`` command line. Every command: ``--help`` with examples, one-line errors
(``--debug`` for a traceback), exit codes 0 ok, 1 data problem found, 2 usage error.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence

from .errors import KlogError

EXIT_OK = 0
EXIT_DATA = 1
EXIT_USAGE = 2

DUMP_EXAMPLES = """examples:
  klog dump 00000000000000000000.log                     batch headers, like kafka-dump-log
  klog dump --print-data-log 00000000000000000000.log    every record with key and payload
  klog dump --jsonl 00000000000000000000.log > out.jsonl one JSON object per record
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
    p.set_defaults(func=_cmd_dump)
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
        return EXIT_DATA
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
