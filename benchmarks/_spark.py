"""A benchmark's SparkSession and scratch directory: ``local[2]``, no UI or progress bars, UTC.

Python workers get this interpreter and the repository on their path; ``jars`` go on
``spark.jars``. A session someone else made (a test's) is used and left running; one made here is
stopped at the end.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["bench_session"]


@contextmanager
def bench_session(app: str, *, cores: int = 2, jars: list[str] | None = None) -> Iterator[tuple[Any, Path]]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    repo = str(Path(__file__).resolve().parent.parent)
    os.environ["PYTHONPATH"] = repo + os.pathsep + os.environ.get("PYTHONPATH", "")
    from pyspark.sql import SparkSession

    work = Path(tempfile.mkdtemp(prefix=f"{app}-"))
    owned = SparkSession.getActiveSession() is None
    spark = (SparkSession.builder.master(f"local[{cores}]").appName(app)
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.session.timeZone", "UTC").config("spark.driver.memory", "4g")
             .config("spark.jars", ",".join(jars or [])).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        yield spark, work
    finally:
        if owned:
            spark.stop()
        shutil.rmtree(work, ignore_errors=True)
