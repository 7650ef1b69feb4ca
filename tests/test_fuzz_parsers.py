"""The parser fuzz targets of ``fuzz/parsers.py`` under hypothesis, bounded in time, plus
regressions for what the long runs found. Invariant: only ``KlogError`` comes out of a parser
fed bytes from outside, and nothing hangs (``check_one``'s per-input alarm)."""

from __future__ import annotations

import importlib.util
import json
import random
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage_core.errors import CorruptCheckpointError, CorruptTopicConfigsError
from storage_core.log.journal import STAGED_ORIGIN, pending_journal_offsets, read_sink_mark, recover_commits
from storage_core.log.topic_configs import load_topic_configs

_spec = importlib.util.spec_from_file_location("klog_fuzz_parsers", Path(__file__).parent.parent / "fuzz" / "parsers.py")
assert _spec is not None and _spec.loader is not None
fp = importlib.util.module_from_spec(_spec)
sys.modules["klog_fuzz_parsers"] = fp
_spec.loader.exec_module(fp)

FAST = [n for n in fp.TARGETS if n != "partition_dir"]


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


def _check(name: str, data: bytes, work: Path) -> None:
    tmp = work / name
    tmp.mkdir(exist_ok=True)
    problem = fp.check_one(fp.TARGETS[name], data, tmp, hang_s=10.0)
    assert problem is None, f"{name}: {problem} on input {data[:400].hex()}"


@pytest.mark.parametrize("name", FAST)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1))
def test_mutated_inputs_raise_only_klog_errors(name: str, seed: int, work: Path) -> None:
    _check(name, fp.TARGETS[name].generate(random.Random(seed)), work)


@pytest.mark.parametrize("name", FAST)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=300))
def test_arbitrary_bytes_raise_only_klog_errors(name: str, data: bytes, work: Path) -> None:
    _check(name, data, work)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1))
def test_damaged_partition_dir_opens_only_with_klog_errors(seed: int, work: Path) -> None:
    _check("partition_dir", fp.TARGETS["partition_dir"].generate(random.Random(seed)), work)


def test_damaged_partition_dir_found_by_ci(work: Path) -> None:
    """Seed 49333353 (CI, 2026-11-26): an offset-index entry with a negative position sent a
    timestamp lookup's read to seek there (an untyped OSError, EINVAL)."""
    _check("partition_dir", fp.TARGETS["partition_dir"].generate(random.Random(49333353)), work)


def test_mixed_run_entry_point(capsys: pytest.CaptureFixture[str]) -> None:
    assert fp.main(["300", "--seed", "5"]) == 0
    out = capsys.readouterr().out
    assert "TOTAL" in out and "untyped=0 hangs=0" in out.splitlines()[-1]


# --- regressions for what fuzzing found ---------------------------------------------------------------

def test_topic_configs_not_utf8_is_a_typed_error(tmp_path: Path) -> None:
    (tmp_path / "klog-topic-configs.json").write_bytes(b'{"users": {"cleanup.policy": "comp\xcdact"}}')
    with pytest.raises(CorruptTopicConfigsError, match="not valid JSON"):
        load_topic_configs(tmp_path)


def test_sink_mark_not_utf8_or_not_an_object_is_a_typed_error(tmp_path: Path) -> None:
    for body in (b'{"batch": 1\xff}', b"[1, 2]", b'{"batch": true}', b'{"batch": "3"}', b"[" * 100_000):
        (tmp_path / ".klog-sink-s.json").write_bytes(body)
        with pytest.raises(CorruptCheckpointError, match="sink mark"):
            read_sink_mark(tmp_path, "s")


def _journal(log_dir: Path, **override: object) -> dict[str, object]:
    pdir = str(log_dir / "t-0")
    j: dict[str, object] = {"job": "j1", "entries": [{"partition_dir": pdir, "staging_dir": ".klog-staging-j1-00000-0",
                                                      "staged_base": STAGED_ORIGIN, "final_base": 10}],
                            "ends": {pdir: 20}, "overwrite": {}, "starts": {pdir: 10}, "phase": "applying"}
    j.update(override)
    return j


@pytest.mark.parametrize("bad", ["not json", "[]", "missing keys", "outside dir", "staging escapes", "bool base",
                                 "bad phase", "ends outside"])
def test_malformed_journal_is_refused_before_anything_is_deleted(tmp_path: Path, bad: str) -> None:
    log_dir = tmp_path / "logs"
    (log_dir / "t-0").mkdir(parents=True)
    victim_dir = tmp_path / "victim-0"  # a partition dir outside the log dir
    victim_dir.mkdir()
    victim = victim_dir / "00000000000000000010.log"
    victim.write_bytes(b"precious")
    (victim_dir / ".klog-staging-x").mkdir()
    entry = {"partition_dir": str(log_dir / "t-0"), "staging_dir": ".klog-staging-j1-00000-0",
             "staged_base": STAGED_ORIGIN, "final_base": 10}
    journal: object
    if bad == "not json":
        journal = None
    elif bad == "[]":
        journal = []
    elif bad == "missing keys":
        journal = _journal(log_dir, entries=[{"partition_dir": str(log_dir / "t-0")}])
    elif bad == "outside dir":
        journal = _journal(log_dir, entries=[{**entry, "partition_dir": str(victim_dir)}])
    elif bad == "staging escapes":
        journal = _journal(log_dir, entries=[{**entry, "staging_dir": "../../victim-0/.klog-staging-x"}])
    elif bad == "bool base":
        journal = _journal(log_dir, entries=[{**entry, "final_base": True}])
    elif bad == "bad phase":
        journal = _journal(log_dir, phase="done")
    else:
        journal = _journal(log_dir, ends={str(victim_dir): 3})
    path = log_dir / ".klog-commit-j1.json"
    path.write_text("{not json" if journal is None else json.dumps(journal))
    with pytest.raises(CorruptCheckpointError, match="not a klog commit journal"):
        recover_commits(log_dir)
    with pytest.raises(CorruptCheckpointError):
        pending_journal_offsets(log_dir)
    assert victim.read_bytes() == b"precious" and (victim_dir / ".klog-staging-x").is_dir()
    assert path.exists()  # left for the user to look at


def test_valid_journal_still_loads(tmp_path: Path) -> None:
    (tmp_path / "t-0").mkdir()
    (tmp_path / ".klog-commit-j1.json").write_text(json.dumps(_journal(tmp_path)))
    assert pending_journal_offsets(tmp_path) == {"t-0": 10}
    assert recover_commits(tmp_path) == ["j1: rolled back"]


def test_rollback_of_a_journal_whose_partition_dir_is_gone(tmp_path: Path) -> None:
    """Found by fuzz/parsers.py: a raw FileNotFoundError when a journal names a partition dir
    removed since the crash; nothing of the commit is left there, so the rollback goes on."""
    (tmp_path / "t-0").mkdir()
    j = _journal(tmp_path)
    j["entries"] = [{**j["entries"][0], "partition_dir": str(tmp_path / "t-8")}]  # type: ignore[index]
    (tmp_path / ".klog-commit-j1.json").write_text(json.dumps(j))
    assert recover_commits(tmp_path) == ["j1: rolled back"]
    assert not (tmp_path / ".klog-commit-j1.json").exists()
