"""Every notebook runs top to bottom (nbclient, a real kernel and a real SparkSession), with
assertions on what its cells print and on the Parquet it writes."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "notebooks"


def execute(path: Path, cwd: Path) -> object:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(path, as_version=4)
    # the kernel inherits the environment: it must find this checkout and start Spark's workers with this Python
    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "PYSPARK_PYTHON", "MPLBACKEND")}
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), saved["PYTHONPATH"]) if p)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    try:
        client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(cwd)}})
        client.execute()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return nb


def text_of(cell: dict) -> str:  # type: ignore[type-arg]
    out = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream":
            out.append(o["text"])
        elif "data" in o and "text/plain" in o["data"]:
            out.append(o["data"]["text/plain"])
    return "".join(out)


def test_every_notebook_is_tested() -> None:
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == ["backfill.ipynb"]


@pytest.mark.spark
def test_backfill_notebook(tmp_path: Path) -> None:
    nb = execute(NOTEBOOKS / "backfill.ipynb", tmp_path)
    cells = [c for c in nb.cells if c.cell_type == "code"]  # type: ignore[attr-defined]
    printed = "\n".join(text_of(c) for c in cells)
    assert "wrote 6000 readings to topic 'sensors'" in printed
    # describe: one row per partition, 6000 records in all
    assert "TOPIC" in printed and "3 partitions of 1 topic, ~6,000 records" in printed
    assert "window: 2026-11-22T09:20:00+00:00 to 2026-11-22T09:40:00+00:00" in printed
    assert "rows in window: 2000" in printed  # one reading every 0.6 s for 20 minutes
    assert "minutes: 20, partitions: [0, 1, 2], messages: 2000" in printed
    images = [o for c in cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(images) == 1, "the per-minute plot"
    assert f"wrote 2000 rows to {tmp_path / 'backfill-out' / 'readings'}" in printed
    assert f"wrote 60 rows to {tmp_path / 'backfill-out' / 'per_minute'}" in printed
    import pyarrow.dataset as ds

    readings = ds.dataset(tmp_path / "backfill-out" / "readings", format="parquet", partitioning="hive").to_table()
    assert readings.num_rows == 2000
    assert {"offset", "timestamp", "sensor", "temperature", "humidity", "partition"} <= set(readings.column_names)
    assert (tmp_path / "backfill-data" / "sensors-0").is_dir()
    errors = [o for c in cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert errors == []
