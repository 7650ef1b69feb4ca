"""Which Python Spark's Python workers start, so that they find klog (issue 56).

Spark starts its Python workers (the ones that look up ``spark.read.format("klog")``'s data source
and run its reader) with ``spark.pyspark.python``, else ``$PYSPARK_PYTHON``, else ``python3`` from
``PATH`` (Spark's ``PythonWorkerFactory`` / ``python/pyspark/context.py``). A driver started as
``.venv/bin/python job.py`` without the venv activated then has workers without klog: Spark fails
with ``DATA_SOURCE_NOT_FOUND ... klog.DefaultSource``.

:func:`use_this_python` (run when ``storage_core``, ``spark_logsource`` or ``pyspark_klog`` is
imported) fixes the case it can tell: no ``PYSPARK_PYTHON`` set, no SparkContext running yet, and
the ``python3`` on ``PATH`` not in this interpreter's bin dir: it sets ``PYSPARK_PYTHON`` to this
interpreter (what ``examples/quickstart.py`` does), which Spark reads when the session starts.
Where a SparkContext already runs without ``spark.pyspark.python`` it is too late to change, so it
warns (:class:`WorkerPythonWarning`) naming what to set. Nothing here imports Spark.
"""

from __future__ import annotations

import os
import shutil
import sys
import warnings

PYSPARK_PYTHON = "PYSPARK_PYTHON"
SPARK_DEFAULT_PYTHON = "python3"  # what Spark starts when nothing says otherwise


class WorkerPythonWarning(UserWarning):
    """Spark's Python workers will start an interpreter that may lack klog."""


def _same_env(found: str | None) -> bool:
    """``found`` (the PATH's ``python3``) is in this interpreter's bin dir (same venv or install)."""
    if found is None:
        return False
    return os.path.dirname(os.path.abspath(found)) == os.path.dirname(os.path.abspath(sys.executable))


def use_this_python() -> str | None:
    """Point Spark's Python workers at this interpreter where they would start another; returns
    what it set (None: nothing needed, or too late and warned)."""
    if os.environ.get(PYSPARK_PYTHON) or not sys.executable:
        return None
    if _same_env(shutil.which(SPARK_DEFAULT_PYTHON)):
        return None
    pyspark = sys.modules.get("pyspark")
    context = getattr(getattr(pyspark, "SparkContext", None), "_active_spark_context", None)
    if context is not None:
        conf = context.getConf()
        if not conf.get("spark.pyspark.python", None):
            warnings.warn(
                f"Spark's Python workers start {SPARK_DEFAULT_PYTHON!r} from PATH "
                f"({shutil.which(SPARK_DEFAULT_PYTHON) or 'none there'}), not this interpreter "
                f"({sys.executable}), and may not find klog (DATA_SOURCE_NOT_FOUND klog.DefaultSource): "
                f"set {PYSPARK_PYTHON}={sys.executable} (or spark.pyspark.python) before the session starts",
                WorkerPythonWarning, stacklevel=3)
        return None
    os.environ[PYSPARK_PYTHON] = sys.executable
    return sys.executable
