"""Run every benchmark module of this package that defines ``main()``: ``python -m benchmarks``.

At the end it prints the headline rows of all of them as one table (ratios against the peer of
each, the issue's targets, peak resident memory where measured).

``python -m benchmarks decode`` runs only the named modules. Each module runs with its own
defaults; run a module directly (``python -m benchmarks.decode --help``) for its options.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import os
import pkgutil
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import benchmarks
from benchmarks import _summary


def benchmark_modules() -> dict[str, Callable[..., Any]]:
    """Name → ``main`` of every module of the package that has one, in name order."""
    found: dict[str, Callable[..., Any]] = {}
    for info in sorted(pkgutil.iter_modules(benchmarks.__path__), key=lambda m: m.name):
        if info.name.startswith("_") or info.ispkg:
            continue
        module = importlib.import_module(f"{benchmarks.__name__}.{info.name}")
        entry = getattr(module, "main", None)
        if callable(entry):
            found[info.name] = entry
    return found


def run_one(name: str, summary_out: Path) -> int:
    """Run one benchmark in this process; write the summary rows it added to ``summary_out``."""
    rc = benchmark_modules()[name]([])
    summary_out.write_text(json.dumps([dataclasses.asdict(r) for r in _summary.rows()]))
    return rc if isinstance(rc, int) else 0


def main(argv: Sequence[str] | None = None) -> int:
    available = benchmark_modules()
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help=f"benchmarks to run (default: all of {', '.join(available) or 'none'})")
    parser.add_argument("--one", metavar="NAME", help=argparse.SUPPRESS)  # the child side of a run
    parser.add_argument("--summary-out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        return run_one(args.one, args.summary_out)
    unknown = [n for n in args.names if n not in available]
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; available: {', '.join(available)}")
    status = 0
    rows: list[_summary.Row] = []
    with tempfile.TemporaryDirectory(prefix="klog-bench-run-") as tmp:
        for name in args.names or list(available):
            # each benchmark in a process of its own: no heap, page cache pressure or JVM left
            # behind by one changes the next one's figures (or its peak RSS)
            print(f"=== benchmarks.{name}", flush=True)
            out = Path(tmp) / f"{name}.json"
            rc = subprocess.run([sys.executable, "-m", "benchmarks", "--one", name, "--summary-out", str(out)],
                                check=False).returncode
            if rc:
                print(f"=== benchmarks.{name} FAILED (exit {rc}); going on with the others", flush=True)
                status = 1
            if out.exists():
                rows += [_summary.Row(**r) for r in json.loads(out.read_text())]
    if rows:
        print()
        print(f"=== summary ({platform.node()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
              f"{time.strftime('%Y-%m-%d')})")
        print(_summary.table(rows))
    return status


if __name__ == "__main__":
    sys.exit(main())
