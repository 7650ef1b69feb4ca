"""The environment of the tests' short Spark processes (an example, the docs' pages).

Such a process spends most of its CPU starting the JVM and compiling Spark's start-up code: HotSpot's
optimizing compiler (C2) recompiles the hot start-up methods on a background thread, which on the
2-core machine, busy with the other worker, competes with the run itself. With the JIT stopped at
C1 (``-XX:TieredStopAtLevel=1``; the same bytecode, the same results, only the quick compiler) a
``local[2]`` session's start, first job and first klog read took 18-26 s instead of 37-38 s under
load, and a ``local-cluster[2,1,1024]`` test whose executors get it too 67 s instead of 78 s. The flag
goes to the driver's JVM (and, asked for, the executors') through ``PYSPARK_SUBMIT_ARGS``, which pyspark
reads when it launches the JVM; a ``PYSPARK_SUBMIT_ARGS`` already set is kept as it is. Tests whose
Spark runs long in one session (the shared ``spark`` fixture, a stream killed and restarted, a
``local-cluster`` read of every fixture) keep the optimizing compiler where the data is processed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: The driver JVM's options for a short run.
SHORT_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"


def short_jvm_env(*, executors: bool = False) -> dict[str, str]:
    """What to add to a short Spark process's environment (nothing if PYSPARK_SUBMIT_ARGS is set):
    the driver's JVM options, and the executors' with ``executors`` (a ``local-cluster`` master)."""
    if "PYSPARK_SUBMIT_ARGS" in os.environ:
        return {}
    args = f"--driver-java-options {SHORT_JVM_OPTIONS}"
    if executors:
        args += f" --conf spark.executor.extraJavaOptions={SHORT_JVM_OPTIONS}"
    return {"PYSPARK_SUBMIT_ARGS": f"{args} pyspark-shell"}


@contextmanager
def own_session(spark: Any) -> Iterator[Any]:
    """A new session of the shared one (``spark.newSession()``: its own conf and registrations), and
    the shared one made the active and default session again afterwards. PySpark makes every new
    session the JVM's active and default one, and Spark looks a registered Python data source up in
    the active session: after a bare ``newSession()``, the tests that follow in the same process no
    longer find the sources they register on the shared session (``DATA_SOURCE_NOT_FOUND``)."""
    from pyspark.sql import SparkSession

    session = spark.newSession()
    try:
        yield session
    finally:
        SparkSession._activeSession = spark
        jclass = SparkSession._get_j_spark_session_class(spark._jvm)
        jclass.setDefaultSession(spark._jsparkSession)
        jclass.setActiveSession(spark._jsparkSession)
