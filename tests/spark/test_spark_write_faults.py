"""Writer fault trials on real processes.

* the Python worker running the driver-side ``commit`` dies at a random step of the commit
  (``KLOG_CRASH_AT``), ``KLOG_COMMIT_CRASH_TRIALS`` trials (default 5) in one Spark application;
* the driver's process group is SIGKILLed at a random moment of a write, half of the time while
  its commit runs, and the jobs it did not report done are rerun: ``KLOG_DRIVER_KILL_TRIALS``
  trials (default 2), every job exactly once;

After each trial the log dir is reopened (an unfinished commit is rolled back) and every record
must be there exactly once, or the job's records must be absent entirely.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from spark_env import short_jvm_env

from storage_core.log.log import Log
from storage_core.log.manager import LogManager
from storage_core.log.staged import collect_staging

pytestmark = [pytest.mark.spark, pytest.mark.fault]


def committed_values(root: Path) -> list[str]:
    if not root.exists():  # every driver was killed before its first write (a slow, loaded machine)
        return []
    with LogManager([root], writable=True):  # settles an interrupted commit
        pass
    out = []
    for pdir in sorted(p for p in root.iterdir() if p.is_dir()):
        collect_staging([pdir], older_than_s=0)
        with Log(pdir, had_clean_shutdown=True) as lg:
            out += [r.value.decode() for b in lg.batches() for r in b.records()]
    return out


def check(values: list[str], jobs: dict[str, int]) -> dict[str, str]:
    """Each job's records exactly once, or none of them."""
    verdict = {}
    for job, n in jobs.items():
        mine = [v for v in values if v.startswith(job + ":")]
        assert len(mine) in (0, n), (job, len(mine), n)
        assert len(set(mine)) == len(mine), job
        verdict[job] = "present" if mine else "absent"
    return verdict


COMMIT_CRASH = textwrap.dedent("""
    import os, random, sys
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.python.worker.reuse", "false").getOrCreate())
    spark.sparkContext.setLogLevel("OFF")
    root, trials, crash_file = sys.argv[1], int(sys.argv[2]), os.environ["KLOG_CRASH_FILE"]
    rng = random.Random(7)
    for t in range(trials):
        with open(crash_file, "w") as f:  # read by the Python worker that runs the commit
            f.write(str(rng.randint(1, 30)))
        df = spark.range(3000, numPartitions=3).selectExpr(f"CONCAT('job{t}:', CAST(id AS STRING)) AS value",
                                                           "CAST(id % 17 AS STRING) AS key")
        try:
            df.write.format("klog").option("topic", "t").option("numPartitions", "3").mode("append").save(root)
            print(f"TRIAL {t} committed", flush=True)
        except Exception:
            print(f"TRIAL {t} failed", flush=True)
        os.remove(crash_file)
    spark.stop()
""")


def test_commit_worker_crashes(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, KLOG_CRASH_FILE=str(tmp_path / "crash-at"), **short_jvm_env())
    count = int(os.environ.get("KLOG_COMMIT_CRASH_TRIALS", "5"))
    res = subprocess.run([sys.executable, "-c", COMMIT_CRASH, str(root), str(count)], capture_output=True, text=True,
                         env=env, timeout=900)
    trials = [line for line in res.stdout.splitlines() if line.startswith("TRIAL")]
    assert len(trials) == count, res.stderr[-3000:]
    failed = [t for t in trials if t.endswith("failed")]
    assert len(failed) >= count * 3 // 4, trials  # the crash points hit (a few fall past the last step)
    verdict = check(committed_values(root), {f"job{t}": 3000 for t in range(count)})
    # a job Spark reported failed is absent (rolled back by its abort); a committed one is there once
    for line in trials:
        _, t, outcome = line.split()
        assert verdict[f"job{t}"] == ("present" if outcome == "committed" else "absent"), (line, verdict)
    if root.exists():  # a failed write leaves no new dir: when every trial failed there is none
        res = subprocess.run([sys.executable, "-m", "storage_core.tools.cli", "verify", str(root), "--quiet"],
                             capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
    else:
        assert not any(line.endswith("committed") for line in trials), trials


DRIVER = textwrap.dedent("""
    import sys
    from pyspark.sql import SparkSession
    spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
    spark.sparkContext.setLogLevel("OFF")
    root, jobs = sys.argv[1], sys.argv[2].split(",")
    print("READY", flush=True)
    for job in jobs:
        df = spark.range(20000, numPartitions=4).selectExpr(f"CONCAT('{job}:', CAST(id AS STRING)) AS value",
                                                           "CAST(id % 101 AS STRING) AS key")
        df.write.format("klog").option("topic", "t").option("numPartitions", "3").option("compression", "gzip") \\
            .option("txnAppId", job).option("txnVersion", "0").mode("append").save(root)
        print(f"DONE {job}", flush=True)
""")


def _wait_for_journal(root: Path, proc: subprocess.Popen[str], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if root.exists() and any(root.glob(".klog-commit-*.json")):
            return
        time.sleep(0.005)


def test_driver_killed_exactly_once_with_reruns(tmp_path: Path) -> None:
    """Issue 30: the driver's process group SIGKILLed at random moments, half of them while its
    commit runs (the commit's steps slowed by ``KLOG_STEP_DELAY_MS`` so that the kills land inside
    it). PySpark runs the commit in a ``pyspark.daemon`` worker in a process group of its own, which
    outlives the kill by up to a second (until the daemon notices and sends SIGHUP): it must not
    decide a commit for a dead driver. And a commit can finish just before the kill, unreported:
    each job carries ``txnAppId``/``txnVersion``, so the rerun of a job that did commit adds
    nothing. Every job the dead driver did not report done is rerun, as a user would: every job's
    records are there exactly once."""
    trials = int(os.environ.get("KLOG_DRIVER_KILL_TRIALS", "2"))
    rng = random.Random(11)
    root = tmp_path / "logs"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, KLOG_STEP_DELAY_MS="5", **short_jvm_env())
    done: set[str] = set()
    jobs = [f"d{t}" for t in range(trials)]
    in_commit = 0
    for t, job in enumerate(jobs):
        proc = subprocess.Popen([sys.executable, "-c", DRIVER, str(root), job], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True, env=env, start_new_session=True)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "READY"
        if t % 2:
            _wait_for_journal(root, proc)
            in_commit += proc.poll() is None
            time.sleep(rng.uniform(0, 0.4))
        else:
            time.sleep(rng.uniform(0.3, 5.0))
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and its JVM (its daemon's workers live on)
        out, _ = proc.communicate()
        done |= {line.split()[1] for line in out.splitlines() if line.startswith("DONE")}
    assert in_commit >= trials // 4, in_commit
    rerun = [j for j in jobs if j not in done]
    res = subprocess.run([sys.executable, "-c", DRIVER, str(root), ",".join(rerun)], capture_output=True, text=True,
                         env=dict(env, KLOG_STEP_DELAY_MS="0"), timeout=900)
    assert res.returncode == 0 and res.stdout.count("DONE") == len(rerun), res.stderr[-3000:]
    values = committed_values(root)
    for job in jobs:
        mine = [v for v in values if v.startswith(job + ":")]
        assert len(mine) == len(set(mine)) == 20000, (job, len(mine), len(set(mine)), job in done)
    res = subprocess.run([sys.executable, "-m", "storage_core.tools.cli", "verify", str(root), "--quiet"],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


EXECUTOR_KILL = textwrap.dedent("""
    import os, random, signal, subprocess, sys, threading, time
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local-cluster[2,1,1024]").config("spark.ui.enabled", "false")
             .config("spark.task.maxFailures", "8").getOrCreate())
    spark.sparkContext.setLogLevel("OFF")
    root, trials = sys.argv[1], int(sys.argv[2])
    rng = random.Random(3)
    app = spark.sparkContext.applicationId

    def kill_one(delay):
        time.sleep(delay)
        out = subprocess.run(["pgrep", "-f", f"CoarseGrainedExecutorBackend.*{app}"], capture_output=True, text=True)
        pids = [int(p) for p in out.stdout.split()]
        if pids:
            os.kill(rng.choice(pids), signal.SIGKILL)
            print("KILLED", flush=True)

    for t in range(trials):
        killer = threading.Thread(target=kill_one, args=(rng.uniform(0.2, 2.5),))
        killer.start()
        df = spark.range(40000, numPartitions=8).selectExpr(f"CONCAT('x{t}:', CAST(id AS STRING)) AS value",
                                                           "CAST(id % 13 AS STRING) AS key")
        try:
            df.write.format("klog").option("topic", "t").option("numPartitions", "3").mode("append").save(root)
            print(f"TRIAL {t} committed", flush=True)
        except Exception:
            print(f"TRIAL {t} failed", flush=True)
        killer.join()
    spark.stop()
""")


def test_executor_killed_during_writes(tmp_path: Path) -> None:
    import pyspark

    trials = int(os.environ.get("KLOG_EXECUTOR_KILL_TRIALS", "2"))
    root = tmp_path / "logs"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_HOME=str(Path(pyspark.__file__).parent),
               **short_jvm_env(executors=True))
    res = subprocess.run([sys.executable, "-c", EXECUTOR_KILL, str(root), str(trials)], capture_output=True,
                         text=True, env=env, timeout=1800)
    lines = res.stdout.splitlines()
    outcomes = [line for line in lines if line.startswith("TRIAL")]
    assert len(outcomes) == trials, res.stderr[-3000:]
    assert sum(1 for line in lines if line == "KILLED") >= max(1, trials // 2)
    verdict = check(committed_values(root), {f"x{t}": 40000 for t in range(trials)})
    for line in outcomes:
        _, t, outcome = line.split()
        assert verdict[f"x{t}"] == ("present" if outcome == "committed" else "absent"), (line, verdict)


def test_abort_outlasts_a_task_still_staging(tmp_path: Path) -> None:
    """Spark aborts a job without waiting for the tasks it is killing: the abort keeps removing
    what the job made until a task still staging (which keeps a new partition dir) has removed its
    staging and gone, and such a task cannot make a partition dir the abort removed again."""
    import shutil
    import threading

    from spark_logsource.writer import ABORT_STRAGGLERS_S, KlogWriter, parse_write_options
    from storage_core.errors import KlogError
    from storage_core.log.config import LogConfig
    from storage_core.log.staged import StagingWriter
    from storage_core.record.compression import CompressionType

    root = tmp_path / "logs"
    w = KlogWriter(parse_write_options({"path": str(root), "topic": "t", "numPartitions": "2"}), False)
    staging = root / "t-1" / f".klog-staging-{w.job_id}-00001-0"
    started = threading.Event()

    def task() -> None:  # stages for 0.4 s, then fails and removes its own staging, as a killed task does
        deadline = time.monotonic() + 0.4
        while time.monotonic() < deadline:
            try:
                staging.mkdir(exist_ok=True)
                (staging / "00000000000000000000.log").write_bytes(b"x" * 100)
            except FileNotFoundError:
                break
            started.set()
        shutil.rmtree(staging, ignore_errors=True)

    straggler = threading.Thread(target=task)
    straggler.start()
    started.wait()
    t = time.monotonic()
    w.abort([None, None])
    took = time.monotonic() - t
    straggler.join()
    assert not root.exists(), sorted(str(p.relative_to(root)) for p in root.rglob("*"))
    assert took < ABORT_STRAGGLERS_S  # it stopped once nothing was left, not at its deadline
    with pytest.raises(KlogError, match="staging"):
        StagingWriter(root / "t-0", f".klog-staging-{w.job_id}-00000-0", LogConfig(), CompressionType.NONE, 1024)
    assert not root.exists()
