"""Spark's Python workers find klog however the driver's Python was started (issue 56).

A script run as ``.venv/bin/python job.py`` with a ``PATH`` that holds no venv (the venv not
activated) and no ``PYSPARK_PYTHON``: Spark would start ``python3`` from ``PATH`` for its workers,
which has no klog, and fail with ``DATA_SOURCE_NOT_FOUND``. Importing ``storage_core`` points them at
the driver's interpreter (:mod:`storage_core.python_env`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from spark_env import short_jvm_env

from storage_core.record.records import Record, build_batch

BIN = os.path.dirname(os.path.abspath(sys.executable))
#: a PATH without this interpreter's bin dir (the venv not activated), with java
PLAIN_PATH = os.pathsep.join(p for p in ("/usr/local/bin", "/usr/bin", "/bin") if os.path.abspath(p) != BIN)


def _run(code: str, path: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV")}
    env["PATH"] = path
    env.update(short_jvm_env())
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env,
                          timeout=timeout, check=False)


SHOW = "import os, storage_core; print(os.environ.get('PYSPARK_PYTHON'))"


def test_import_points_workers_at_this_python_when_path_has_another() -> None:
    res = _run(SHOW, PLAIN_PATH)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == sys.executable


def test_nothing_set_when_path_has_this_python() -> None:
    assert _run(SHOW, BIN + os.pathsep + PLAIN_PATH).stdout.strip() == "None"


def test_a_set_pyspark_python_is_kept() -> None:
    code = "import os; os.environ['PYSPARK_PYTHON'] = '/opt/py/bin/python3'; " + SHOW.replace("import os, ", "import ")
    assert _run(code, PLAIN_PATH).stdout.strip() == "/opt/py/bin/python3"


@pytest.mark.spark
def test_spark_reads_klog_without_the_venv_on_path(tmp_path: Path) -> None:
    """The README's first example as a script: ``import storage_core``, a plain SparkSession,
    ``spark.read.format("klog")`` — run by the venv's Python with the venv not on ``PATH``."""
    log = tmp_path / "d" / "t-0" / "00000000000000000000.log"
    log.parent.mkdir(parents=True)
    log.write_bytes(build_batch([Record(offset=i, timestamp=1, key=b"k", value=b"v%d" % i) for i in range(3)]))
    job = ("import sys\nimport storage_core\nfrom pyspark.sql import SparkSession\n"
           "spark = SparkSession.builder.master('local[1]').config('spark.ui.enabled', 'false').getOrCreate()\n"
           "print('COUNT', spark.read.format('klog').load(sys.argv[1]).count())\nspark.stop()\n")
    res = _run(job, PLAIN_PATH, str(tmp_path / "d"), timeout=600)
    assert res.returncode == 0 and "COUNT 3" in res.stdout, res.stderr[-3000:]
