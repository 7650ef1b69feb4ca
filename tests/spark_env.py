"""The environment of the tests' short Spark processes (an example, the docs' pages).

Such a process spends most of its CPU starting the JVM and compiling Spark's start-up code: HotSpot's
optimizing compiler (C2) recompiles the hot start-up methods on a background thread, which on the
2-core machine, busy with the other worker, competes with the run itself. With the JIT stopped at
C1 (``-XX:TieredStopAtLevel=1``; the same bytecode, the same results, only the quick compiler) a
``local[2]`` session's start, first job and first klog read took 18-26 s instead of 37-38 s under
load. The flag goes to the driver's JVM through ``PYSPARK_SUBMIT_ARGS``, which pyspark reads when it
launches the JVM; a ``PYSPARK_SUBMIT_ARGS`` already set is kept as it is.
"""

from __future__ import annotations

import os

#: The driver JVM's options for a short run.
SHORT_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"


def short_jvm_env() -> dict[str, str]:
    """What to add to a short Spark process's environment (nothing if PYSPARK_SUBMIT_ARGS is set)."""
    if "PYSPARK_SUBMIT_ARGS" in os.environ:
        return {}
    return {"PYSPARK_SUBMIT_ARGS": f"--driver-java-options {SHORT_JVM_OPTIONS} pyspark-shell"}
