"""klog's tasks keep PySpark's collection after each task to what the task made
(``spark_logsource/worker_gc.py``): the rule in a process of its own, the caller's process left
alone outside a worker, and the freeze seen in the real workers of a real session."""

from __future__ import annotations

import ast
import gc
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from spark_logsource.errors import in_spark_worker
from spark_logsource.worker_gc import TaskCollections, task_started

REPO = Path(__file__).resolve().parents[2]


def test_frozen_garbage_waits_at_most_every_tasks() -> None:
    """A cycle alive when a task starts and dropped during it survives the collections after the
    frozen tasks and is freed by the one after every ``every``-th task. Run in a process of its own:
    freezing is the whole process's."""
    script = textwrap.dedent("""
        import gc, weakref
        from spark_logsource.worker_gc import TaskCollections

        class Node:
            pass

        def cycle():
            a, b = Node(), Node()
            a.other, b.other = b, a
            return a

        rules = TaskCollections(every=3)
        seen = []
        alive = cycle()
        ref = weakref.ref(alive)
        for task in range(1, 7):
            rules.started()
            frozen = gc.get_freeze_count()
            if task == 1:
                del alive  # garbage in a cycle, made while frozen
            gc.collect()  # what pyspark's daemon runs after each task
            seen.append((task, frozen > 0, ref() is not None))
        print(seen)
    """)
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True)
    seen = ast.literal_eval(out.stdout.strip())
    assert seen == [(1, True, True), (2, True, True), (3, False, False), (4, True, False), (5, True, False),
                    (6, False, False)], out.stdout


def test_every_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1, got 0"):
        TaskCollections(every=0)


def test_outside_a_worker_the_process_is_left_alone() -> None:
    assert not in_spark_worker()
    before = gc.get_freeze_count()
    for _ in range(3):
        task_started()
    assert gc.get_freeze_count() == before == 0


def test_klog_tasks_freeze_in_the_real_workers(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """After klog's write and read tasks, the reused Python workers they ran in hold frozen objects
    (pyspark itself freezes nothing: the probe's own first run, before klog's, sees none), and the
    data is intact. klog runs here registered on the session, as the probe is: Spark keeps the
    workers of the data sources it discovers at start-up apart from those registered later."""
    from pyspark.sql import functions as F

    from spark_logsource.source import KlogDataSource

    class Registered(KlogDataSource):
        @classmethod
        def name(cls) -> str:
            return "klogtestgc"

    spark.dataSource.register(_probe_source())
    # the workers may have run klog's tasks of an earlier test of this process: thawed first
    spark.read.format("klogtestfreeze").option("unfreeze", "true").load().collect()
    before = [r.frozen for r in spark.read.format("klogtestfreeze").load().collect()]
    spark.dataSource.register(Registered)
    path = str(tmp_path / "logs")
    spark.range(2_000, numPartitions=8).select(F.expr("cast(id as string)").cast("binary").alias("value")) \
        .write.format("klogtestgc").option("topic", "t").option("numPartitions", "8").mode("append").save(path)
    assert spark.read.format("klogtestgc").load(path).count() == 2_000
    after = [r.frozen for r in spark.read.format("klogtestfreeze").load().collect()]
    assert max(before) == 0 and len(after) == 16 and max(after) > 0, (before, after)


def _probe_source():  # type: ignore[no-untyped-def]
    """A data source whose 16 tasks each report their worker's frozen objects (a data source's
    tasks run in the pool of workers klog's tasks ran in; a UDF's may not); with the option
    ``unfreeze=true`` each thaws its worker first."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class ProbeReader(DataSourceReader):
        def __init__(self, unfreeze: bool) -> None:
            self.unfreeze = unfreeze

        def partitions(self):  # type: ignore[no-untyped-def]
            return [InputPartition(i) for i in range(16)]

        def read(self, partition):  # type: ignore[no-untyped-def]
            import gc as worker_gc

            if self.unfreeze:
                worker_gc.unfreeze()
            yield (worker_gc.get_freeze_count(),)

    class ProbeSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "klogtestfreeze"

        def schema(self) -> str:
            return "frozen long"

        def reader(self, schema):  # type: ignore[no-untyped-def]
            return ProbeReader(self.options.get("unfreeze") == "true")

    return ProbeSource
