"""Run every benchmark module of this package that defines ``main()``: ``python -m benchmarks``.

At the end it prints the headline rows of all of them as one table (ratios against the peer of
each, the issue's targets, peak resident memory where measured).

``python -m benchmarks decode`` runs only the named modules. Each module runs with its own
defaults; run a module directly (``python -m benchmarks.decode --help``) for its options.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import platform
import sys
import time
import traceback
from collections.abc import Callable, Sequence
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


def main(argv: Sequence[str] | None = None) -> int:
    available = benchmark_modules()
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help=f"benchmarks to run (default: all of {', '.join(available) or 'none'})")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in available]
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; available: {', '.join(available)}")
    status = 0
    for name in args.names or list(available):
        print(f"=== benchmarks.{name}", flush=True)
        try:
            rc = available[name]([])
        except Exception:  # noqa: BLE001 - one broken benchmark must not hide the others' figures
            traceback.print_exc()
            print(f"=== benchmarks.{name} FAILED (see above); going on with the others", flush=True)
            rc = 1
        status = status or (rc if isinstance(rc, int) else 0)
    if _summary.rows():
        print()
        print(f"=== summary ({platform.node()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
              f"{time.strftime('%Y-%m-%d')})")
        print(_summary.table())
    return status


if __name__ == "__main__":
    sys.exit(main())
