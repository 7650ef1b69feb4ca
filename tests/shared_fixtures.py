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
