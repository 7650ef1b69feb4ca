"""Where the shared Kafka fixtures are, and what they hold.

``../shared/fixtures/kafka/`` (or ``$KLOG_SHARED/fixtures/kafka``) holds real broker data with
Kafka's own decoding beside each record-set file (``*.expected.jsonl`` or ``.jsonl.gz``). They are
read in place, never copied into the repository; tests skip with a reason where they are absent.
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("KLOG_SHARED", REPO.parent / "shared"))
KAFKA_FIXTURES = SHARED / "fixtures" / "kafka"
MISSING_REASON = f"shared Kafka fixtures not found at {KAFKA_FIXTURES} (set KLOG_SHARED to the shared/ directory)"


def available() -> bool:
    return (KAFKA_FIXTURES / "SUMMARY.tsv").is_file()


def record_set_files() -> list[Path]:
    """Every record-set file that has Kafka's expected decoding beside it."""
    if not available():
        return []
    out = set()
    for exp in KAFKA_FIXTURES.rglob("*.expected.jsonl*"):
        name = exp.name
        stem = name[: name.index(".expected.jsonl")]
        out.add(exp.with_name(stem))
    return sorted(out)


def expected_lines(path: Path) -> list[str]:
    plain = path.with_name(path.name + ".expected.jsonl")
    if plain.exists():
        return plain.read_text().splitlines()
    with gzip.open(path.with_name(path.name + ".expected.jsonl.gz"), "rt") as f:
        return f.read().splitlines()


def fixture_id(path: Path) -> str:
    return str(path.relative_to(KAFKA_FIXTURES))


def params(paths: Iterable[Path], what: str) -> list[Any]:
    """pytest parameters, one per fixture path (its id: the path under the fixtures); where there is
    none, one skipped parameter whose reason says what is missing (not pytest's bare "got empty
    parameter set")."""
    import pytest

    found = sorted(paths)
    if not available():
        return [pytest.param(None, marks=pytest.mark.skip(reason=MISSING_REASON), id="no-fixtures")]
    if not found:
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"no {what} under {KAFKA_FIXTURES}"), id="none")]
    return [pytest.param(p, id=fixture_id(p)) for p in found]


def lost_partitions(log_dir: Path) -> dict[str, int]:
    """Partition dirs of a fixture log dir whose data is gone by the dir's own evidence, worked out
    here without klog's code: no ``.log`` file, while the dir's ``recovery-point-offset-checkpoint``
    (plain text: version, count, then ``topic partition offset`` lines) says the partition reached
    an offset above 0. Maps the dir's name to that offset. ``rjmfernandes+flink-on-prem``'s
    ``customers-0`` is one (offset 17,081: its ``.index``, ``.timeindex`` and snapshot are there,
    its ``.log`` is not): the case issue 30 reproduced. Every read of such a dir must fail naming
    the offsets, or with failOnDataLoss=false warn naming them."""
    checkpoint = log_dir / "recovery-point-offset-checkpoint"
    if not checkpoint.is_file():
        return {}
    reached = {}
    for line in checkpoint.read_text().splitlines()[2:]:
        topic, partition, offset = line.rsplit(" ", 2)
        reached[f"{topic}-{partition}"] = int(offset)
    return {name: end for name, end in reached.items()
            if end > 0 and (log_dir / name).is_dir() and not any((log_dir / name).glob("*.log"))}


def lost_partitions_under(root: Path) -> dict[Path, int]:
    """:func:`lost_partitions` of every log dir under ``root`` (a dir holding partition dirs), by path."""
    out = {}
    for checkpoint in root.rglob("recovery-point-offset-checkpoint"):
        for name, end in lost_partitions(checkpoint.parent).items():
            out[checkpoint.parent / name] = end
    return out


def tolerant_options(log_dir: Path) -> dict[str, str]:
    """``failOnDataLoss=false`` for a log dir with :func:`lost_partitions` (a test of such a dir
    checks with :func:`names_loss` that the default read fails naming them), else no option."""
    return {"failOnDataLoss": "false"} if lost_partitions(log_dir) else {}


def names_loss(text: str, log_dir: Path) -> bool:
    """Whether ``text`` (an error or warning) names one of ``log_dir``'s lost partitions with the
    offsets its checkpoint says it held (``offsets 0..17080 of customers-0``)."""
    return any(f"offsets 0..{end - 1} of {name}" in text for name, end in lost_partitions(log_dir).items())
