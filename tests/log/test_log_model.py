"""Model-based test of Log against an in-memory oracle, and Kafka's FileRecords over klog's segments.

Random appends (several codecs), rolls, reads by offset and by timestamp, truncations, retention
by log start offset, reopen after a clean close and reopen after an abandoned (killed) writer.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from storage_core.log.config import LogConfig
from storage_core.log.log import Log
from storage_core.record.compression import CompressionType
from storage_core.record.records import Record, build_batch

T0 = 1_700_000_000_000
CFG = LogConfig.from_properties({"segment.bytes": "1500", "index.interval.bytes": "200"})


class LogModel(RuleBasedStateMachine):
    """The oracle: a list of (offset, timestamp, value) in append order."""

    @initialize()
    def setup(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="klog-model-"))
        self.dir = self.tmp / "t-0"
        self.dir.mkdir()
        self.log = Log(self.dir, CFG, writable=True)
        self.model: list[tuple[int, int, bytes]] = []
        self.start = 0
        self.clock = T0

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    @property
    def leo(self) -> int:
        return self.model[-1][0] + 1 if self.model else self.start

    @rule(n=st.integers(1, 12), codec=st.sampled_from(list(CompressionType)), step=st.integers(0, 50),
          size=st.integers(0, 120))
    def append(self, n: int, codec: CompressionType, step: int, size: int) -> None:
        recs = []
        for i in range(n):
            self.clock += step
            recs.append(Record(i, self.clock, b"k%d" % i, bytes([97 + (self.leo + i) % 26]) * size))
        first, last = self.log.append(build_batch(recs, compression=codec))
        assert first == self.leo and last == first + n - 1
        for i, r in enumerate(recs):
            self.model.append((first + i, r.timestamp, r.value or b""))

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @precondition(lambda self: len(self.model) > 0)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        # truncation keeps whole batches: cut at a batch's first offset
        firsts = sorted({b.base_offset for b in self.log.batches()})
        cut = data.draw(st.sampled_from(firsts))
        self.log.truncate_to(cut)
        self.model = [m for m in self.model if m[0] < cut]

    @rule()
    def reopen_clean(self) -> None:
        self.log.close()
        self.log = Log(self.dir, CFG, writable=True, log_start_offset=self.start, had_clean_shutdown=True)

    @rule()
    def reopen_after_kill(self) -> None:
        # abandon the writer without close (what a kill leaves: appended bytes are in the OS page cache)
        self.log = Log(self.dir, CFG, writable=True, log_start_offset=self.start, recovery_point=0)

    @precondition(lambda self: len(self.log.segments) > 2)
    @rule()
    def delete_oldest_segment(self) -> None:
        self.log.log_start_offset = self.log.segments[1].base_offset
        self.log.delete_old_segments()
        self.start = self.log.log_start_offset
        self.model = [m for m in self.model if m[0] >= self.start]

    @precondition(lambda self: len(self.model) > 0)
    @rule(data=st.data())
    def read_from_offset(self, data: st.DataObject) -> None:
        off = data.draw(st.integers(self.start, self.leo - 1))
        got = [(r.offset, r.timestamp, r.value) for b in self.log.batches(off) for r in b.records() if r.offset >= off]
        assert got == [m for m in self.model if m[0] >= off]

    @precondition(lambda self: len(self.model) > 0)
    @rule(data=st.data())
    def read_by_timestamp(self, data: st.DataObject) -> None:
        ts = data.draw(st.integers(T0 - 10, self.clock + 10))
        found = self.log.offset_for_timestamp(ts)
        want = next(((o, t) for o, t, _ in self.model if t >= ts), None)
        assert (None if found is None else (found.offset, found.timestamp)) == want

    @invariant()
    def offsets(self) -> None:
        if hasattr(self, "log"):
            assert self.log.log_end_offset == self.leo
            assert self.log.log_start_offset == self.start


TestLogModel = LogModel.TestCase
TestLogModel.settings = settings(max_examples=40, stateful_step_count=30, deadline=None,
                                 suppress_health_check=[HealthCheck.too_slow])


def test_kafka_file_records_accepts_klog_segments(tmp_path: Path) -> None:
    import kafka_oracle

    reason = kafka_oracle.oracle_available()
    if reason is not None:
        pytest.skip(reason)
    d = tmp_path / "t-0"
    d.mkdir()
    with Log(d, CFG, writable=True) as log:
        for i, codec in enumerate(list(CompressionType) * 6):
            log.append(build_batch([Record(j, T0 + 10 * i + j, b"k", b"v" * 30) for j in range(4)], compression=codec))
    segs = sorted(d.glob("*.log"))
    assert len(segs) >= 3
    results = kafka_oracle.kafka_dump(segs)
    for seg in segs:
        r = results[str(seg)]
        assert r.error is None and r.valid_bytes == seg.stat().st_size
    import subprocess
    import sys
    res = subprocess.run([sys.executable, "-m", "storage_core.tools.cli", "verify", str(d)], capture_output=True, text=True)
    assert res.returncode == 0 and "warning" not in res.stderr, res.stderr
