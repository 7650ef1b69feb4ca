"""A ``__remote_log_metadata`` partition written by Apache Kafka's own serializer, and what Kafka's own
metadata store makes of it: the test oracle for klog's tiered-storage metadata decoding.

``oracle/RemoteLogMetadataGen.java`` (compiled against the test broker's 4.1.1 jars, see
:mod:`broker_fixture`) makes a random but plausible tiered-storage history of a few topic partitions
per seed (segment uploads, finished or left in progress, retention deletes, leader changes with
overlapping and diverged re-uploads, retried updates, a partition delete, snapshots), serializes the
events with ``RemoteLogMetadataSerde`` into ``<out>/__remote_log_metadata-0/00000000000000000000.log``
and feeds them to ``RemotePartitionMetadataStore``, the consumer-side store of
``TopicBasedRemoteLogMetadataManager``. :func:`generate` returns its ``truth.json`` (the format is
in the Java file's header): per record its apiKey and Java ``toString()``, and per topic partition
what the store lists, per leader epoch, and which segment it serves each offset from.

Usage in tests::

    reason = remote_log_metadata_oracle.unavailable()
    if reason is not None:
        pytest.skip(reason)
    truth = remote_log_metadata_oracle.generate(tmp_path, seed)
    log = tmp_path / "__remote_log_metadata-0" / "00000000000000000000.log"
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import broker_fixture

SOURCE = broker_fixture.JAVA / "RemoteLogMetadataGen.java"
MAIN_CLASS = "RemoteLogMetadataGen"
#: C1 only and the serial collector: the generator runs under a second
JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Dslf4j.internal.verbosity=ERROR",
               "-Dlog4j2.level=OFF")


def unavailable() -> str | None:
    """None if the generator can run here, else why not (a skip reason: no broker jars, or javac failed)."""
    return broker_fixture.unavailable() or broker_fixture.skip_reason(lambda: broker_fixture.classpath(SOURCE))


def generate(out_dir: Path, seed: int, events: int = 60, *, timeout: float = 300) -> dict[str, Any]:
    """Write seed ``seed``'s partition (about ``events`` records) under ``out_dir`` and return its truth.

    Raises :class:`broker_fixture.BrokerError` when the generator cannot be built or fails."""
    out_dir.mkdir(parents=True, exist_ok=True)
    cmd = ["java", *JVM_OPTIONS, "-cp", broker_fixture.classpath(SOURCE), MAIN_CLASS, str(out_dir), str(seed),
           str(events)]
    try:
        proc = subprocess.run(cmd, capture_output=True, env=broker_fixture.java_env(), timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise broker_fixture.BrokerError(f"{MAIN_CLASS} could not run: {e}") from e
    if proc.returncode != 0 or not any(x.startswith(f"#GEN {seed} ") for x in proc.stdout.decode().splitlines()):
        tail = "\n".join(proc.stderr.decode("utf-8", "replace").strip().splitlines()[-15:])
        raise broker_fixture.BrokerError(f"{MAIN_CLASS} {seed} failed (exit {proc.returncode}): {tail}")
    truth: dict[str, Any] = json.loads((out_dir / "truth.json").read_text(encoding="utf-8"))
    return truth
