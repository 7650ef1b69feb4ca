"""A fresh session's first ``load()`` and first query: how much of it is klog's.

Each run is a fresh Python process (a notebook's first cell): start a SparkSession, then time
``spark.read.format(...).load()`` (Spark asks the source for its schema: a Python worker starts
and imports the source) and the first query (``count()`` and a grouped aggregate: planning in a
worker, tasks on two more). The peer is the same in another fresh process with a Python data
source that holds its rows in memory (no files, no imports beyond pyspark): the difference is
klog's share. The log dir is small (20,000 records, 2 partitions) so that reading is not what is
measured. Also: the import time of klog's source module in a bare interpreter.

``python -m benchmarks.first_query [--rounds 3]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks import _summary

RECORDS = 20_000
#: Issue 19's target: klog's share of a fresh session's first load() and first query, in seconds.
MAX_SHARE_S = 1.0


def _child(kind: str, log_dir: str) -> None:
    """One fresh session: the times of session start, first load, first query, second query."""
    t0 = time.perf_counter()
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName(f"first-{kind}")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    t1 = time.perf_counter()
    if kind == "klog":
        df = spark.read.format("klog").load(log_dir)
    else:
        from benchmarks.spark_read import _memory_source

        spark.dataSource.register(_memory_source())
        df = spark.read.format("klogbenchmem").option("per", str(RECORDS // 2)).load()
    t2 = time.perf_counter()
    n = df.count()
    t3 = time.perf_counter()
    df.groupBy("partition").count().collect()
    t4 = time.perf_counter()
    assert n == RECORDS, n
    spark.stop()
    print(json.dumps({"session": t1 - t0, "load": t2 - t1, "first_query": t3 - t2, "second_query": t4 - t3}))


def _run(kind: str, log_dir: Path) -> dict[str, float]:
    repo = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable,
           "PYTHONPATH": repo + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-m", "benchmarks.first_query", "--child", kind, str(log_dir)],
                         capture_output=True, text=True, env=env, cwd=repo, check=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def import_seconds(module: str, rounds: int = 5) -> float:
    """Best wall time of ``import module`` in a fresh interpreter (pyspark's own imports included)."""
    best = float("inf")
    for _ in range(rounds):
        out = subprocess.run([sys.executable, "-c", f"import time; t=time.perf_counter(); import {module}; "
                              "print(time.perf_counter()-t)"], capture_output=True, text=True, check=True)
        best = min(best, float(out.stdout))
    return best


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="fresh processes per source (median reported)")
    ap.add_argument("--child", nargs=2, metavar=("KIND", "DIR"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _child(*args.child)
        return 0
    from benchmarks.spark_read import build

    with tempfile.TemporaryDirectory(prefix="first-query-") as tmp:
        log_dir = build(Path(tmp), RECORDS)
        runs: dict[str, list[dict[str, float]]] = {"klog": [], "memory": []}
        for _ in range(args.rounds):
            for kind in runs:  # interleaved, so that load on the machine hits both alike
                runs[kind].append(_run(kind, log_dir))
    med = {k: {f: statistics.median(r[f] for r in rs) for f in rs[0]} for k, rs in runs.items()}
    print(f"fresh session, {RECORDS:,} records, median of {args.rounds} processes each (seconds):")
    print(f"{'':28}{'session':>9}{'load()':>9}{'1st query':>11}{'2nd query':>11}")
    for kind, m in med.items():
        label = "klog" if kind == "klog" else "in-memory Python source"
        print(f"{label:28}{m['session']:9.2f}{m['load']:9.2f}{m['first_query']:11.2f}{m['second_query']:11.2f}")
    share_load = med["klog"]["load"] - med["memory"]["load"]
    share_query = med["klog"]["first_query"] - med["memory"]["first_query"]
    imports = {m: import_seconds(m) for m in ("pyspark.sql.datasource", "pyspark_klog", "storage_core.read.planner")}
    print(f"klog's share of the first load(): {share_load:+.2f} s; of the first query: {share_query:+.2f} s")
    print("import in a fresh interpreter (best of 5): " + ", ".join(f"{m} {s:.2f} s" for m, s in imports.items()))
    total = med["klog"]["load"] + med["klog"]["first_query"]
    peer_total = med["memory"]["load"] + med["memory"]["first_query"]
    share = share_load + share_query
    _summary.add(_summary.Row(
        what="klog's share of a fresh session's first load() + first query",
        klog=f"{total:.2f} s (load() {med['klog']['load']:.2f} s, query {med['klog']['first_query']:.2f} s)",
        peer=f"an in-memory Python source in a fresh session: {peer_total:.2f} s", ratio=share,
        ratio_means="time", target=MAX_SHARE_S, ratio_label=f"{share:+.2f} s", target_label=f"≤ {MAX_SHARE_S:g} s"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
