"""``klog dump`` with each decoder prints what each release's own ``DumpLogSegments`` prints, on the
internal topics that release's broker wrote for every kind of group (issue 56).

For each release of :data:`RELEASES` a broker of its own (``Broker(root, version=...)``) runs
``oracle/GroupClient.java`` with that release's clients: a transactional and an idempotent producer,
groups of the classic and the consumer protocol (one subscribed by a regular expression), a share
group (KIP-932) acknowledging records, and a Kafka Streams app in a streams group (KIP-1071). The
broker is stopped cleanly; then kafka-dump-log (the release's ``DumpLogSegments``) and ``klog dump``
print ``__consumer_offsets``, ``__transaction_state``, ``__share_group_state`` and
``__cluster_metadata`` (with its snapshots and ``bootstrap.checkpoint``) through
``--offsets-decoder``, ``--transaction-log-decoder``, ``--share-group-state-decoder`` and
``--cluster-metadata-decoder``, with and without ``--skip-record-metadata``: the same lines, and no
record either cannot decode. 4.1.1's text is first brought to 4.4.0's
(:data:`dump_text.RELEASE_DIFFERENCES`). ``--remote-log-metadata-decoder`` is compared in
tests/log/test_remote_log_metadata.py (run it with ``KLOG_KAFKA_VERSION`` for another release).
"""

from __future__ import annotations

import io
import os
import random
import re
import shutil
import subprocess
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import broker_fixture
import pytest
from broker_fixture import JAVA
from dump_text import as_newest, keyless_payloads_as

from storage_core.tools.cli import main as klog

pytestmark = [pytest.mark.broker, pytest.mark.interop]

RELEASES = ["4.4.0", "4.1.1"]
SEED = int(os.environ.get("KLOG_BROKER_SEED") or random.SystemRandom().randrange(1, 1 << 31))
GROUP_CLIENT = JAVA / "GroupClient.java"

#: a single broker: the share coordinator's state topic with one replica (its default is three)
SHARE_STATE_CONFIG = {"share.coordinator.state.topic.replication.factor": "1",
                      "share.coordinator.state.topic.min.isr": "1",
                      "share.coordinator.state.topic.num.partitions": "1"}
#: 4.1 offers streams groups (KIP-1071, early access there) only with its unstable feature versions
EARLY_ACCESS = {"4.1.1": {"unstable.feature.versions.enable": "true", "unstable.api.versions.enable": "true"}}

DECODERS = {
    "--offsets-decoder": "__consumer_offsets-*",
    "--transaction-log-decoder": "__transaction_state-*",
    "--share-group-state-decoder": "__share_group_state-*",
    "--cluster-metadata-decoder": "__cluster_metadata-*",
}


@dataclass
class Written:
    release: str
    log_dir: Path  # the broker's log dir after its clean shutdown
    steps: list[str]  # GroupClient's report: "OK share", "SKIP streams ..."


@pytest.fixture(scope="module", params=RELEASES)
def written(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Written:
    release: str = request.param
    reason = broker_fixture.skip_reason(lambda: broker_fixture.classpath(GROUP_CLIENT, version=release))
    if reason is not None:
        if broker_fixture.required():
            pytest.fail(reason)
        pytest.skip(reason)
    root = tmp_path_factory.mktemp(f"groups-{release}")
    broker = broker_fixture.Broker(root / "broker", version=release, **SHARE_STATE_CONFIG,
                                  **EARLY_ACCESS.get(release, {}))
    broker.start()
    try:
        cp = broker_fixture.classpath(GROUP_CLIENT, version=release)
        proc = subprocess.run(["java", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", f"-Djava.io.tmpdir={root}",
                               "-cp", cp,
                               "GroupClient", broker.bootstrap, f"g{SEED}", str(SEED)],
                              capture_output=True, text=True, env=broker_fixture.java_env(), timeout=600, check=False)
        assert proc.returncode == 0, f"KLOG_BROKER_SEED={SEED} GroupClient on {release}: {proc.stderr[-3000:]}"
    finally:
        broker.stop()
    copy = root / "at-shutdown"
    shutil.copytree(broker.log_dir, copy, ignore=shutil.ignore_patterns("*.deleted"))
    return Written(release, copy, [x for x in proc.stdout.splitlines() if x.startswith(("OK ", "SKIP "))])


def _files(w: Written, decoder: str) -> list[Path]:
    dirs = sorted(d for d in w.log_dir.glob(DECODERS[decoder]) if d.is_dir())
    files = [f for d in dirs for f in sorted(d.glob("*.log"))]
    if decoder == "--cluster-metadata-decoder":
        # kafka-storage format of 4.1 writes bootstrap.checkpoint into the log dir, 4.4's does not
        files += [f for d in dirs for f in sorted(d.glob("*.checkpoint"))] + sorted(w.log_dir.glob("bootstrap.checkpoint"))
    return files


def _kafka_dump(release: str, files: list[Path], *options: str) -> str:
    cmd = ["java", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Dfile.encoding=UTF-8",
           "-Dsun.stdout.encoding=UTF-8", "-cp", broker_fixture.classpath(version=release),
           broker_fixture.dump_log_segments_class(release), "--files", ",".join(map(str, files)), *options]
    proc = subprocess.run(cmd, capture_output=True, env=broker_fixture.java_env(), check=True, timeout=300)
    return proc.stdout.decode("utf-8")


def _klog_dump(files: list[Path], *options: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = klog(["dump", "--quiet", *options, *map(str, files)])
    assert rc == 0, err.getvalue()
    return out.getvalue()


def test_the_client_made_every_group(written: Written) -> None:
    """Share and streams groups ran (a release without them would skip them, and say so)."""
    assert "OK share" in written.steps and "OK streams" in written.steps, written.steps


@pytest.mark.parametrize("decoder", list(DECODERS))
@pytest.mark.parametrize("skip", [False, True], ids=["", "skip-record-metadata"])
def test_dump_with_decoder_equals_kafka(written: Written, decoder: str, skip: bool) -> None:
    files = _files(written, decoder)
    assert files, f"{written.release}: no files for {decoder}"
    options = (decoder, "--skip-record-metadata") if skip else (decoder,)
    want = keyless_payloads_as(as_newest(_kafka_dump(written.release, files, *options), written.release),
                               written.release, options).split("\n")
    got = keyless_payloads_as(_klog_dump(files, *options), written.release, options).split("\n")
    ctx = f"KLOG_BROKER_SEED={SEED} {written.release} {' '.join(options)}"
    for i, (a, b) in enumerate(zip(want, got, strict=False)):
        assert a == b, f"{ctx}: line {i + 1} of {len(want)} differs:\n  kafka: {a!r}\n  klog:  {b!r}"
    assert len(got) == len(want), f"{ctx}: klog printed {len(got)} lines, kafka-dump-log {len(want)}"
    payloads = [x for x in want if "payload: " in x]
    assert payloads, f"{ctx}: no records"
    bad = [x for x in payloads if "Error at" in x or "Unknown record type" in x or "Could not" in x]
    assert not bad, f"{ctx}: kafka-dump-log could not decode {bad[:2]}"
    undecodable = [x for x in got if '"error":' in x or "_unknownTaggedFields" in x]
    assert not undecodable, f"{ctx}: klog could not decode {undecodable[:2]}"


def test_the_records_of_every_group_were_compared(written: Written) -> None:
    """The comparison above met each record type: offsets and classic groups (1, 2), consumer groups
    (3, 5-8), the regular expression (16), share groups (10-15) and streams groups (17-23)."""
    text = _klog_dump(_files(written, "--offsets-decoder"), "--offsets-decoder")
    types = {int(t) for t in re.findall(r'key: \{"type":"(\d+)"', text)}
    want = {1, 2, 3, 5, 6, 7, 8, 16, 10, 11, 12, 13, 14, 15}
    if "OK streams" in written.steps:
        want |= {17, 19, 20, 21, 22, 23}
    assert want <= types, f"{written.release}: record types not written: {sorted(want - types)}"
    share = _klog_dump(_files(written, "--share-group-state-decoder"), "--share-group-state-decoder")
    assert '"type":"0"' in share or '"type":"1"' in share, share[:500]
