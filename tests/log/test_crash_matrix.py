"""The crash matrix: every storage operation that writes, killed at each of its steps.

A real child process (``os.fork`` of the test process, so no import cost per kill) performs one
operation and is killed by a real ``SIGKILL`` at a fault point (``storage_core/faults.py``,
``"signal": "KILL"``), at a commit step (``KLOG_CRASH_AT``, ``storage_core/faults.py``: ends the
process with ``os._exit(137)``, which loses nothing more than a SIGKILL would), or by the parent
at a random moment. The child reports what was acknowledged (an append that returned, a commit
that returned) by writing to a file as soon as it is. Then the log dir is reopened as a restart
would (``LogManager(writable=True)``: recovery, journal settling) and checked:

- **no loss**: every acknowledged record is there, with its offset;
- **no duplicate**: offsets strictly increase and no record value appears twice;
- **no corrupted read**: every batch passes its CRC check and decodes, checkpoints parse;
- plus what each operation promises (a commit all or nothing, retention keeps what it must keep,
  compaction keeps each key's latest value at its offset).

The test writes the table to ``tests/log/crash_matrix.md`` and fails if any row fails. Kills of Spark
processes (driver and executors) are in ``test_spark_write_faults.py`` and
``test_streaming_kill.py``; 50 randomized cleaner kills in ``test_cleaner_crash.py``.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest

from storage_core.cleaner import LogCleaner
from storage_core.files import LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_OFFSET_CHECKPOINT
from storage_core.log.checkpoint import CleanShutdownFile, OffsetCheckpointFile
from storage_core.log.config import LogConfig
from storage_core.log.journal import SinkBatch, read_sink_mark
from storage_core.log.log import Log
from storage_core.log.manager import LogManager
from storage_core.log.staged import StagingWriter, commit_job
from storage_core.log.topic_configs import update_topic_configs
from storage_core.log.topic_partition import TopicPartition
from storage_core.record.compression import CompressionType
from storage_core.record.records import DefaultRecordBatch, Record, build_batch

pytestmark = pytest.mark.fault

T0 = 1_700_000_000_000
TP = TopicPartition("t", 0)
PROPS = {"segment.bytes": "700", "index.interval.bytes": "100"}
COMPACT_PROPS = {**PROPS, "cleanup.policy": "compact", "segment.bytes": "600", "delete.retention.ms": "100"}
MATRIX = Path(__file__).parent / "crash_matrix.md"


# --- the child ---------------------------------------------------------------------------------------

def fork_child(body: Callable[[Path], None], ack: Path, env: dict[str, str],
               kill_after_acks: int | None = None) -> int:
    """Run ``body(ack)`` in a forked child with ``env`` set; returns its wait status code
    (0 done, 137 ended at a commit step, -9 SIGKILLed)."""
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 0
        try:
            for k in ("KLOG_FAULT_FILE", "KLOG_CRASH_AT", "KLOG_CRASH_FILE"):
                os.environ.pop(k, None)
            os.environ.update(env)
            body(ack)
        except BaseException as exc:  # noqa: BLE001 - reported to the parent through the ack file
            with open(ack, "a") as f:
                f.write(f"ERROR {type(exc).__name__}: {exc}\n")
            code = 3
        os._exit(code)
    if kill_after_acks is not None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if ack.exists() and ack.read_text().count("ACK") >= kill_after_acks:
                os.kill(pid, signal.SIGKILL)
                break
            time.sleep(0.001)
    deadline = time.monotonic() + 60
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise AssertionError("child hung")
        time.sleep(0.002)
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def _ack(ack: Path, line: str) -> None:
    fd = os.open(ack, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def acks(ack: Path) -> list[str]:
    return ack.read_text().split() if ack.exists() else []


def fault_env(root: Path, spec: dict[str, object] | None) -> dict[str, str]:
    if spec is None:
        return {}
    path = root.parent / (root.name + ".fault.json")
    path.write_text(json.dumps({"signal": "KILL", **spec}))
    return {"KLOG_FAULT_FILE": str(path)}


def fired(root: Path) -> bool:
    return (root.parent / (root.name + ".fault.json.fired")).exists()


# --- operations (run in the child) --------------------------------------------------------------------

def record_batch(seq: int, key_space: int = 0) -> bytes:
    key = b"k%d" % (seq % key_space) if key_space else b"k%d" % seq
    return build_batch([Record(0, T0 + seq, key, b"v%d" % seq, ())])


def op_append(root: Path, start: int, n: int, extra: dict[str, str] | None = None,
              pause_s: float = 0.0) -> Callable[[Path], None]:
    def body(ack: Path) -> None:
        cfg = LogConfig.from_properties({**PROPS, **(extra or {})})
        with LogManager([root], writable=True, topic_configs={"t": cfg}) as m:
            log = m.create_log(TP)
            assert log.config == cfg
            for seq in range(start, start + n):
                log.append(record_batch(seq), now_ms=T0 + seq)
                _ack(ack, f"ACK{seq}")
                if pause_s:
                    time.sleep(pause_s)  # lets the parent's SIGKILL land mid-stream
        _ack(ack, "CLOSED")
    return body


def op_retention(root: Path) -> Callable[[Path], None]:
    def body(ack: Path) -> None:
        cfg = LogConfig.from_properties({**PROPS, "retention.bytes": "700"})
        with LogManager([root], writable=True, topic_configs={"t": cfg}) as m:
            m.retention(now_ms=T0 + 10_000)
        _ack(ack, "RETAINED")
    return body


def op_compact(root: Path) -> Callable[[Path], None]:
    def body(ack: Path) -> None:
        with LogManager([root], writable=True) as m:
            LogCleaner(1 << 20, now_ms=T0 + 10_000).clean_log(m.logs[TP])
        _ack(ack, "CLEANED")
    return body


def op_commit(root: Path, tag: str, sink: SinkBatch | None = None) -> Callable[[Path], None]:
    def body(ack: Path) -> None:
        cfg = LogConfig.from_properties({"segment.bytes": "2000"})
        staged = []
        for task in range(2):
            for p in range(2):
                w = StagingWriter(root / f"w-{p}", f".klog-staging-{tag}-{task:05d}-0", cfg, CompressionType.LZ4, 512)
                w.append(pa.table({"value": [f"{tag}-{task}-{p}-{i}".encode() for i in range(60)]}), T0)
                staged.append(w.finish())
        commit_job(tag, staged, config=cfg, sink=sink)
        _ack(ack, "COMMITTED")
    return body


# --- reopening and checking ---------------------------------------------------------------------------

def reopen(root: Path) -> dict[TopicPartition, list[tuple[int, bytes | None, bytes | None]]]:
    """Restart: writable open (recovery, journals settled), then every record, CRC-checked."""
    out: dict[TopicPartition, list[tuple[int, bytes | None, bytes | None]]] = {}
    for name in (RECOVERY_POINT_OFFSET_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT):
        OffsetCheckpointFile(root / name).read()  # parses (old or new contents)
    CleanShutdownFile.in_dir(root).read()
    with LogManager([root], writable=True) as m:
        for tp, log in sorted(m.logs.items()):
            recs = []
            for b in log.batches():
                b.ensure_valid()
                if isinstance(b, DefaultRecordBatch) and b.is_control:
                    continue
                recs += [(r.offset, r.key, r.value) for r in b.records()]
            offs = [o for o, _, _ in recs]
            assert offs == sorted(set(offs)), f"{tp}: offsets repeat or go back"
            vals = [v for _, _, v in recs if v is not None]
            assert len(vals) == len(set(vals)), f"{tp}: a record value appears twice"
            out[tp] = recs
    return out


@dataclass
class Row:
    operation: str
    kill: str
    result: str
    ok: bool


def _copy(seed: Path, root: Path) -> None:
    import shutil

    shutil.copytree(seed, root, symlinks=True)


def check_append(root: Path, ack: Path, start: int, status: int) -> str:
    acked = [int(a[3:]) for a in acks(ack) if a.startswith("ACK")]
    assert not any(a.startswith("ERROR") for a in acks(ack)), acks(ack)
    recs = reopen(root)[TP]
    values = [v for _, _, v in recs]
    expect_old = [b"v%d" % s for s in range(start)]
    assert values[:start] == expect_old, "data from before the operation changed"
    new = values[start:]
    need = [b"v%d" % s for s in acked]
    assert new[:len(need)] == need, f"acknowledged records lost: {len(need)} acked, {len(new)} found"
    extra = new[len(need):]
    assert len(extra) <= 1 and all(v == b"v%d" % (start + len(need) + i) for i, v in enumerate(extra))
    assert [o for o, _, _ in recs] == list(range(len(recs))), "offsets are not contiguous"
    how = {0: "finished", -9: "SIGKILL", 137: "exit 137"}.get(status, str(status))
    return (f"{how}; {len(need)}/{len(need)} acked kept" + (f", +{len(extra)} written unacked" if extra else "")
            + f"; {sum(1 for _ in (root / 't-0').glob('*.log'))} segments")


def build_seed(seed: Path, n: int, props: dict[str, str], key_space: int = 0) -> None:
    seed.mkdir()
    update_topic_configs(seed, "t", props)
    with LogManager([seed], writable=True) as m:
        log = m.create_log(TP)
        for seq in range(n):
            log.append(record_batch(seq, key_space), now_ms=T0 + seq)


def test_crash_matrix(tmp_path: Path) -> None:
    rows: list[Row] = []
    failures: list[str] = []

    def trial(operation: str, kill: str, run: Callable[[Path, Path], str]) -> None:
        root = tmp_path / f"r{len(rows)}"
        ack = tmp_path / f"r{len(rows)}.ack"
        try:
            result = run(root, ack)
            ok = True
        except AssertionError as exc:
            result, ok = f"FAIL: {str(exc).splitlines()[0][:150]}", False
            failures.append(f"{operation} / {kill}: {exc}")
        rows.append(Row(operation, kill, result, ok))

    seed = tmp_path / "seed"
    build_seed(seed, 30, PROPS)

    # 1. append and roll (plain), 2. flush (flush.messages=3: every third append fsyncs)
    for op_name, extra, points in [
        ("append + roll", None, [("log-batch-written", 1), ("log-batch-written", 7), ("log-roll-old-closed", 1),
                                 ("log-roll-new-segment", 1), ("log-roll-snapshot", 1),
                                 ("segment-flush-log-synced", 1), ("checkpoint-tmp-written", 1),
                                 ("checkpoint-replaced", 2)]),
        ("flush (flush.messages=3)", {"flush.messages": "3"},
         [("segment-flush-log-synced", 2), ("log-flushed", 1), ("log-flushed", 3)]),
    ]:
        for point, nth in points:
            def run(root: Path, ack: Path, point: str = point, nth: int = nth,
                    extra: dict[str, str] | None = extra) -> str:
                _copy(seed, root)
                status = fork_child(op_append(root, 30, 25, extra), ack, fault_env(root, {"point": point, "nth": nth}))
                assert status == -9 and fired(root), f"the fault did not fire (status {status}, {acks(ack)[-1:]})"
                return check_append(root, ack, 30, status)
            trial(op_name, f"`{point}` #{nth}", run)
    rng = random.Random(10)
    for k in rng.sample(range(1, 25), 3):
        def run_random(root: Path, ack: Path, k: int = k) -> str:
            _copy(seed, root)
            status = fork_child(op_append(root, 30, 25, pause_s=0.02), ack, {}, kill_after_acks=k)
            assert status == -9, f"the child was not killed (status {status})"
            check_append(root, ack, 30, status)
            return f"SIGKILL; every acked record kept (at least {k}), at most one more written"  # stable text
        trial("append + roll", f"SIGKILL from the parent after {k} acks", run_random)

    # 3. checkpoint writes at close (recovery point, log start, clean-shutdown marker)
    for point, file in [("checkpoint-tmp-written", RECOVERY_POINT_OFFSET_CHECKPOINT),
                        ("checkpoint-replaced", RECOVERY_POINT_OFFSET_CHECKPOINT),
                        ("checkpoint-tmp-written", LOG_START_OFFSET_CHECKPOINT),
                        ("checkpoint-tmp-written", ".kafka_cleanshutdown"),
                        ("checkpoint-replaced", ".kafka_cleanshutdown")]:
        def run_cp(root: Path, ack: Path, point: str = point, file: str = file) -> str:
            _copy(seed, root)
            status = fork_child(op_append(root, 30, 3), ack, fault_env(root, {"point": point, "file": file}))
            assert status == -9 and fired(root), f"the fault did not fire (status {status})"
            assert "CLOSED" not in acks(ack)
            tmp_left = sorted(p.name for p in root.glob("*.tmp"))
            return check_append(root, ack, 30, status) + (f"; {tmp_left[0]} left, ignored" if tmp_left else "")
        trial("checkpoint write (at close)", f"`{point}` {file}", run_cp)

    # 4. retention delete (retention.bytes=700 removes the oldest segments)
    cfg = LogConfig.from_properties({**PROPS, "retention.bytes": "700"})
    with Log(seed / "t-0", cfg) as lg:
        doomed = lg.deletable_segments(T0 + 10_000)
        keep_from = lg.segments[len(doomed)].base_offset
        seg_count = len(lg.segments)
    assert 2 <= len(doomed) < seg_count
    for point, ctx in [("retention-file-renamed", {"suffix": ".log", "nth": 1}),
                       ("retention-file-renamed", {"suffix": ".index", "nth": 1}),
                       ("retention-file-renamed", {"suffix": ".timeindex", "nth": 2}),
                       ("retention-segment-gone", {"nth": 1}), ("retention-segment-gone", {"nth": 2}),
                       ("retention-snapshots-removed", {}),
                       ("checkpoint-tmp-written", {"file": LOG_START_OFFSET_CHECKPOINT})]:
        def run_ret(root: Path, ack: Path, point: str = point, ctx: dict[str, object] = ctx) -> str:
            _copy(seed, root)
            status = fork_child(op_retention(root), ack, fault_env(root, {"point": point, **ctx}))
            assert status == -9 and fired(root), f"the fault did not fire (status {status}, {acks(ack)})"
            recs = reopen(root)[TP]
            values = [v for _, _, v in recs]
            first = recs[0][0]
            assert first <= keep_from, f"retention removed offset {first - 1}, it had to keep from {keep_from}"
            assert values == [b"v%d" % s for s in range(first, 30)], "records changed or lost"
            left = sorted({p.suffix for p in (root / "t-0").glob("*.deleted")})
            return (f"SIGKILL; log starts at {first} (retention target {keep_from}); records {first}..29 intact"
                    + ("; `.deleted` files removed on reopen" if not left else ""))
        trial("retention delete", f"`{point}` {ctx}".replace("'", ""), run_ret)

    # 5. compaction swap (the cleaner's points; each key's latest value must survive at its offset)
    cseed = tmp_path / "cseed"
    build_seed(cseed, 60, COMPACT_PROPS, key_space=7)
    with LogManager([cseed], writable=True) as m:
        m.logs[TP].roll()
    before = {o: (k, v) for o, k, v in reopen(cseed)[TP]}
    latest = {k: (o, v) for o, (k, v) in sorted(before.items())}
    for point in ["cleaner-map-built", "cleaner-cleaned-writing", "cleaner-cleaned-written", "cleaner-swap-partial",
                  "cleaner-swapped", "cleaner-old-deleted", "cleaner-replaced-partial", "cleaner-replaced",
                  "cleaner-checkpoint"]:
        def run_cl(root: Path, ack: Path, point: str = point) -> str:
            _copy(cseed, root)
            status = fork_child(op_compact(root), ack, fault_env(root, {"point": point}))
            assert status == -9 and fired(root), f"the fault did not fire (status {status}, {acks(ack)})"
            after = reopen(root)[TP]
            for o, k, v in after:
                assert before.get(o) == (k, v), f"offset {o} holds {(k, v)}, was {before.get(o)}"
            got = {k: (o, v) for o, k, v in after}
            for k, ov in latest.items():
                assert got.get(k) == ov, f"key {k!r}: latest {ov} lost"
            state = "old" if len(after) == len(before) else "compacted" if len(after) == len(latest) else "partly"
            return f"SIGKILL; {len(after)} of {len(before)} records ({state}); every key's latest value kept"
        trial("compaction swap", f"`{point}`", run_cl)

    # 6. Spark batch commit and 7. streaming sink commit: commit_job killed at each step
    wseed = tmp_path / "wseed"
    wseed.mkdir()
    for p in range(2):
        (wseed / f"w-{p}").mkdir()
    assert fork_child(op_commit(wseed, "old"), tmp_path / "wseed.ack", {}) == 0
    for kind in ("commit_job", "commit_job + SinkBatch"):
        step = 1
        while True:
            holder: dict[str, object] = {}

            def run_c(root: Path, ack: Path, step: int = step, kind: str = kind,
                      holder: dict[str, object] = holder) -> str:
                _copy(wseed, root)
                sink = SinkBatch("q", 5) if "Sink" in kind else None
                status = fork_child(op_commit(root, "new", sink), ack, {"KLOG_CRASH_AT": str(step)})
                holder["status"] = status
                data = reopen(root)
                vals = {p: [v.decode() for _, _, v in data[TopicPartition("w", p)] if v is not None] for p in range(2)}
                olds = {p: [v for v in vals[p] if v.startswith("old-")] for p in range(2)}
                news = {p: [v for v in vals[p] if v.startswith("new-")] for p in range(2)}
                assert all(len(olds[p]) == 120 for p in range(2)), "committed data of an earlier job lost"
                n_new = sum(len(v) for v in news.values())
                committed = status == 0
                assert n_new in (0, 240), f"job seen in part: {n_new} of 240 records"
                if committed:
                    assert n_new == 240, "an acknowledged commit lost"
                how = "returned" if committed else f"killed (exit {status})"
                outcome = "job present once" if n_new else "job absent (rolled back)"
                if sink is not None:
                    mark = read_sink_mark(root, "q")
                    assert (mark is not None and mark["batch"] == 5) == bool(n_new), f"sink mark {mark} vs data"
                    # Spark replays the batch after a failure: exactly once afterwards
                    assert fork_child(op_commit(root, "new", sink), root.parent / f"{root.name}.replay", {}) == 0
                    again = reopen(root)
                    n2 = sum(1 for p in range(2) for _, _, v in again[TopicPartition("w", p)]
                             if v is not None and v.startswith(b"new-"))
                    assert n2 == 240, f"after the replay the batch holds {n2} of 240 records"
                    outcome += "; replay of batch 5 leaves it exactly once"
                return f"{how}; old job intact; {outcome}"
            trial("Spark batch commit" if "Sink" not in kind else "streaming sink commit",
                  f"`KLOG_CRASH_AT={step}`", run_c)
            if holder.get("status") == 0 or step > 40:
                break
            step += 1

    lines = ["# Crash matrix", "",
             "Generated by `tests/log/test_crash_matrix.py` (do not edit): each row kills a real child process at",
             "one step of a writing operation, reopens the log dir as a restart would (`LogManager(writable=True)`:",
             "recovery, interrupted commits settled) and checks no loss of anything acknowledged, no duplicate,",
             "no corrupted read (every batch CRC-checked, checkpoints parse). Kill points are",
             "`storage_core/faults.py` hooks (a real SIGKILL), commit steps (`KLOG_CRASH_AT`, `os._exit(137)`), or a",
             "SIGKILL sent by the parent. Spark-level kills (driver, executors, streaming queries) are in",
             "`test_spark_write_faults.py` and `test_streaming_kill.py`; 50 randomized cleaner kills in",
             "`test_cleaner_crash.py`.", "",
             "| operation | kill point | result | pass |", "|---|---|---|---|"]
    lines += [f"| {r.operation} | {r.kill} | {r.result} | {'yes' if r.ok else '**NO**'} |" for r in rows]
    lines += ["", f"{sum(r.ok for r in rows)} of {len(rows)} rows pass.", ""]
    MATRIX.write_text("\n".join(lines))
    assert not failures, "\n".join(failures)
    assert len(rows) >= 40
