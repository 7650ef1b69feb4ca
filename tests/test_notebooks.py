"""Every notebook runs top to bottom (nbclient, a real kernel and a real SparkSession) in a temporary
working directory, with assertions on what its cells print and on what it writes; and the notebooks
as committed carry their outputs (``make notebooks``), plots included, so that they show them when
opened as files (on a code host, in any viewer), outputs that match a fresh run's and name nothing
of the machine that made them."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from spark_env import short_jvm_env

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "notebooks"
NAMES = ["backfill.ipynb", "broker_audit.ipynb", "sync_iceberg.ipynb"]


def runner() -> ModuleType:
    """notebooks/execute.py: the environment and executor ``make notebooks`` uses too."""
    pytest.importorskip("nbformat")
    pytest.importorskip("nbclient")
    spec = importlib.util.spec_from_file_location("klog_notebook_runner", NOTEBOOKS / "execute.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def execute(path: Path, cwd: Path) -> Any:
    """The notebook run by ``make notebooks``'s executor, its Spark driver with the quick JIT only
    (:mod:`spark_env`: the kernel inherits this process's environment)."""
    extra = short_jvm_env()
    os.environ.update(extra)
    try:
        return runner().execute(path, cwd)
    finally:
        for k in extra:
            os.environ.pop(k, None)


def outputs(cell: Any) -> list[dict[str, Any]]:
    return list(cell.get("outputs", []))


def stdout_of(cell: Any) -> str:
    """What a code cell printed and displayed as text (stdout and text/plain, no stderr)."""
    out = []
    for o in outputs(cell):
        if o.get("output_type") == "stream" and o.get("name") == "stdout":
            out.append("".join(o["text"]))
        elif "data" in o and "text/plain" in o["data"] and "image/png" not in o["data"]:
            out.append("".join(o["data"]["text/plain"]))
    return "".join(out)


def code_cells(nb: Any) -> list[Any]:
    return [c for c in nb["cells"] if c["cell_type"] == "code"]


def images(nb: Any) -> list[dict[str, Any]]:
    return [o for c in code_cells(nb) for o in outputs(c) if "image/png" in o.get("data", {})]


def errors(nb: Any) -> list[dict[str, Any]]:
    return [o for c in code_cells(nb) for o in outputs(c) if o.get("output_type") == "error"]


def printed(nb: Any) -> str:
    return "\n".join(stdout_of(c) for c in code_cells(nb))


def stored(name: str) -> Any:
    return json.loads((NOTEBOOKS / name).read_text())


def test_every_notebook_is_tested() -> None:
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_committed_notebooks_show_their_outputs(name: str) -> None:
    """Opened as a file, each notebook shows what it did: every code cell was run (in order) and
    the ones that print or plot have their outputs, a plot is stored as a PNG, nothing failed, and no
    output names a machine path (outputs are made from a temporary working dir, paths printed relative)."""
    nb = stored(name)
    cells = code_cells(nb)
    assert [c["execution_count"] for c in cells] == list(range(1, len(cells) + 1)), "run make notebooks"
    assert sum(1 for c in cells if outputs(c)) >= len(cells) - 2, "cells without outputs: run make notebooks"
    assert images(nb), "no image/png output: the plot is not stored"
    assert all(len(o["data"]["image/png"]) > 1000 for o in images(nb))
    assert errors(nb) == []
    text = json.dumps([outputs(c) for c in cells])
    for machine in ("/tmp/", "/home/", "/work/", "/root/", str(REPO)):
        assert machine not in text, f"{name}: an output names {machine}"
    assert all("execution" not in c.get("metadata", {}) for c in cells), "cell timings are recorded"


def _same_as_stored(name: str, nb: Any) -> None:
    """A fresh run prints what the stored outputs show (else they are stale: run make notebooks)."""
    fresh = [stdout_of(c) for c in code_cells(nb)]
    kept = [stdout_of(c) for c in code_cells(stored(name))]
    assert len(fresh) == len(kept)
    for i, (a, b) in enumerate(zip(fresh, kept, strict=True)):
        assert a == b, f"{name}: code cell {i + 1} prints other than its stored outputs: run make notebooks"


@pytest.mark.spark
def test_backfill_notebook(tmp_path: Path) -> None:
    nb = execute(NOTEBOOKS / "backfill.ipynb", tmp_path)
    assert errors(nb) == []
    out = printed(nb)
    assert "wrote 6000 readings to topic 'sensors' in backfill-data/" in out
    # describe: one row per partition, 6000 records in all
    assert "3 partitions of topic 'sensors', ~6,000 records" in out
    assert "last_stable_offset" in out and "first_timestamp" in out
    assert "window: 2026-11-22T09:20:00+00:00 to 2026-11-22T09:40:00+00:00" in out
    assert "rows in window: 2000" in out  # one reading every 0.6 s for 20 minutes
    assert "minutes: 20, partitions: [0, 1, 2], messages: 2000" in out
    assert len(images(nb)) == 1, "the per-minute plot"
    assert "wrote 2000 rows to backfill-out/readings" in out
    assert "wrote 60 rows to backfill-out/per_minute" in out
    import pyarrow.dataset as ds

    readings = ds.dataset(tmp_path / "backfill-out" / "readings", format="parquet", partitioning="hive").to_table()
    assert readings.num_rows == 2000
    assert {"offset", "timestamp", "sensor", "temperature", "humidity", "partition"} <= set(readings.column_names)
    assert (tmp_path / "backfill-data" / "sensors-0").is_dir()
    assert (tmp_path / "backfill-data" / ".klog-notebook-sample").is_file()
    _same_as_stored("backfill.ipynb", nb)


def test_notebook_code_uses_the_public_api_only() -> None:
    """Notebooks import klog as ``storage_core`` (its top-level names) and Spark's ``klog`` format, no
    module under it; the broker copy's sample comes from the helper beside the notebook."""
    for name in NAMES:
        source = "\n".join("".join(c["source"]) for c in code_cells(stored(name)))
        assert "import storage_core as klog" in source
        assert "storage_core." not in source and "spark_logsource" not in source, name
        assert "rmtree(LOG_DIR" not in source and "rmtree(LOG_DIRS" not in source, name


def _run_on_users_dir(tmp_path: Path, name: str, variable: str, mine: Path, *, cells: int | None = None,
                      then: str | None = None) -> Any:
    """Run notebook ``name`` (its first ``cells`` code cells, then the code ``then``) with its
    set-up's ``variable`` set to the user's dir ``mine``: it runs without an error, and leaves
    ``mine`` exactly as it was and its working dir empty. The executed notebook."""
    import nbformat

    before = {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in mine.rglob("*")}
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    setup = code[0]
    assert f"{variable} = None " in setup.source
    setup.source = setup.source.replace(f"{variable} = None ", f"{variable} = {str(mine)!r} ")
    if cells is not None:
        nb.cells = code[:cells] + ([nbformat.v4.new_code_cell(then)] if then else [])
    path = tmp_path / "mine.ipynb"
    nbformat.write(nb, path)
    run = tmp_path / "run"
    run.mkdir()
    done = execute(path, run)
    assert errors(done) == []
    assert before == {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in mine.rglob("*")}
    assert list(run.iterdir()) == []
    return done


@pytest.mark.spark
def test_backfill_never_writes_a_users_log_dir(tmp_path: Path) -> None:
    """With LOG_DIR set, the set-up and step 1 ("Run All" on your own dir) write nothing: the
    user's dir, whatever is in it, is left exactly as it was, and no sample is made."""

    from storage_core.log.log import Log
    from storage_core.record.records import Record, build_batch

    mine = tmp_path / "my-log-dir"
    (mine / "sensors-0").mkdir(parents=True)
    with Log(mine / "sensors-0", writable=True) as log:
        log.append(build_batch([Record(i, 1_795_338_000_000 + i, b"k", b"{}") for i in range(10)]))
    (mine / "notes.txt").write_text("not a sample\n")
    done = _run_on_users_dir(tmp_path, "backfill.ipynb", "LOG_DIR", mine, cells=2, then="spark.stop()")
    assert f"LOG_DIR is set: no sample written, {mine} is only read" in printed(done)


@pytest.mark.spark
def test_broker_audit_notebook(tmp_path: Path) -> None:
    nb = execute(NOTEBOOKS / "broker_audit.ipynb", tmp_path)
    assert errors(nb) == []
    out = printed(nb)
    assert "wrote a sample broker copy: broker-copy/data-1, broker-copy/data-2" in out
    assert (tmp_path / "broker-copy" / "data-1" / ".kafka_cleanshutdown").is_file()
    # describe: 9 partitions of 3 topics over the two log dirs
    assert "9 partitions of 3 topics, ~38,833 records" in out
    assert "clicks-0: log starts at offset 351 (earlier records deleted)" in out
    assert "payments-1: open transaction: LSO 1439 < end 1455 (16 offsets not yet stable)" in out
    assert "window: 2026-11-22T08:20:00Z to 2026-11-22T09:00:00Z (end exclusive)" in out
    assert "clicks: busiest minute 08:3" in out  # the burst, 08:30 to 08:36
    assert "40 minutes, 9 partitions" in out
    assert "read_uncommitted: 38,246 records, read_committed: 37,980 records" in out
    assert "read_arrow, read_committed, payments: 2,091 records" in out
    # consumer groups: the sample's __consumer_offsets-12, decoded by klog.committed_offsets
    assert "2 groups, 9 committed partitions, total lag 214 records" in out
    assert "read-only: all 226 files of the copy are unchanged" in out
    assert len(images(nb)) == 2, "the sizes and the throughput plots"
    assert "not yet" not in "\n".join("".join(c["source"]) for c in nb.cells if c.cell_type == "markdown")
    _same_as_stored("broker_audit.ipynb", nb)


def test_sync_iceberg_notebook(tmp_path: Path) -> None:
    """No Spark: klog.sync into an Iceberg table in a temporary warehouse, read back by pyiceberg,
    more orders appended to the sample, a second sync of only those, a third of nothing."""
    pytest.importorskip("pyiceberg")
    nb = execute(NOTEBOOKS / "sync_iceberg.ipynb", tmp_path)
    assert errors(nb) == []
    out = printed(nb)
    assert "wrote a sample broker copy: broker-copy/data-1, broker-copy/data-2" in out
    assert ("Iceberg table kafka.orders (catalog klog): 14,344 records in 1 commit(s); "
            'next offsets now {"orders": {"0": 3592, "1": 3606, "2": 7146}}') in out
    assert 'klog.offsets of the current snapshot: {"orders":{"0":3592,"1":3606,"2":7146}}' in out
    assert "table: 14,344 rows; read_arrow up to its offsets: 14,344 rows; identical: True" in out
    assert "appended 2,419 orders" in out
    assert "  orders-2: offsets 7146..8349 (1203 offsets)" in out  # the second sync starts at the table's offsets
    assert "snapshot 2: append, +2,419 records, 16,763 in all" in out
    assert "16,763 rows = 14,344 + 2,419; 16,763 distinct (partition, offset): no duplicates" in out
    assert "identical to read_arrow up to the new offsets: True" in out
    assert "0 records in 0 commit(s)" in out and "2 snapshots, 16,763 rows: unchanged" in out
    assert len(images(nb)) == 1, "the per-minute plot of the two syncs"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broker-copy"]  # the temporary warehouse is gone
    _same_as_stored("sync_iceberg.ipynb", nb)


def test_sync_iceberg_never_writes_a_users_log_dir(tmp_path: Path) -> None:
    """With LOG_DIRS set the whole notebook runs on that dir (non-JSON values, nothing new for the
    second sync) and writes nothing into it: no sample made, no record appended."""
    pytest.importorskip("pyiceberg")

    from storage_core.log.log import Log
    from storage_core.record.records import Record, build_batch

    mine = tmp_path / "my-log-dir"
    for p in range(2):
        (mine / f"orders-{p}").mkdir(parents=True)
        with Log(mine / f"orders-{p}", writable=True) as log:
            log.append(build_batch([Record(i, 1_795_338_000_000 + i * 1000, b"k", b"not json %d" % i)
                                    for i in range(10 + p)]))
    out = printed(_run_on_users_dir(tmp_path, "sync_iceberg.ipynb", "LOG_DIRS", mine))
    assert "21 records in 1 commit(s)" in out and "identical: True" in out and "appended" not in out
    assert "21 rows = 21 + 0" in out and "1 snapshots, 21 rows: unchanged" in out
