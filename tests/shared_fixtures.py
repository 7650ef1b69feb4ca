"""Where the shared Kafka fixtures are, and what they hold.

``../shared/fixtures/kafka/`` (or ``$KLOG_SHARED/fixtures/kafka``) holds real broker data with
Kafka's own decoding beside each record-set file (``*.expected.jsonl`` or ``.jsonl.gz``). They are
read in place, never copied into the repository; tests skip with a reason where they are absent.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

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
