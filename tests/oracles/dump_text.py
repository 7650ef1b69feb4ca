"""``klog dump`` against kafka-dump-log: running both, comparing them, and how kafka-dump-log's text changed
between the releases the tests compare ``klog dump`` with.

``klog dump`` prints what the newest of them prints (Kafka 4.4.0's
``org.apache.kafka.tools.DumpLogSegments``); an older release's output is brought to that text by
:func:`as_newest`, one named rule per difference (:data:`RELEASE_DIFFERENCES`, also in
docs/internal-topics.md), before it is compared line for line.
"""

from __future__ import annotations

import difflib
import io
import re
import subprocess
from collections import Counter
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

from broker_fixture import classpath, dump_log_segments_class, java_env

from storage_core.record.messages.decoders import TRANSACTION_STATE_NAMES
from storage_core.tools.cli import main as klog

NEWEST = "4.4.0"

#: The differences of 4.1.1's kafka-dump-log from 4.4.0's, by name.
RELEASE_DIFFERENCES = {
    "transaction-status-name": "4.4.0's --transaction-log-decoder prints transactionStatus as the state's name "
                               '("Empty", "Ongoing", ... as TransactionState.stateName()); 4.1.1 printed its id (0).',
    "producer-snapshot-line": "a producer snapshot's entry without batch metadata ends after lastTimestamp in "
                              "4.4.0; 4.1.1 printed a space after it.",
    "skip-record-metadata-payload": "with --skip-record-metadata, 4.4.0 prints a record without a key as "
                                    "'| payload: ...'; 4.1.1 printed ' payload: ...'.",
}

_STATUS = re.compile(r'"transactionStatus":(-?\d+)')


def as_newest(text: str, release: str) -> str:
    """kafka-dump-log ``release``'s stdout with the differences that are safe to undo on Kafka's side
    (a JSON field, a producer snapshot's line) as 4.4.0 prints them; the state names are klog's
    table, which the 4.4.0 comparisons check against 4.4.0's own output."""
    if release == NEWEST:
        return text
    out = []
    for line in text.split("\n"):
        if line.startswith("producerId: "):
            line = line.rstrip(" ")
        if '"transactionStatus":' in line:
            line = _STATUS.sub(lambda m: f'"transactionStatus":"{TRANSACTION_STATE_NAMES.get(int(m.group(1)), m.group(1))}"',
                               line)
        out.append(line)
    return "\n".join(out)


def keyless_payloads_as(text: str, release: str, options: tuple[str, ...]) -> str:
    """A dump's stdout, Kafka's or klog's, with the difference that text alone cannot undo made the
    same on both sides: under ``--skip-record-metadata`` a keyless record's line begins
    ``"| payload: "`` in 4.4.0 and ``" payload: "`` in 4.1.1, but the rest of a key whose bytes end
    in a line break and ``|`` begins ``"| payload: "`` in both. So for an older release every line
    beginning ``"| payload: "`` is written ``" payload: "`` in both texts (the 4.4.0 comparisons
    check the exact form)."""
    if release == NEWEST or "--skip-record-metadata" not in options:
        return text
    return "\n".join(" payload: " + line[len(PAYLOAD_4_4):] if line.startswith(PAYLOAD_4_4) else line
                      for line in text.split("\n"))


PAYLOAD_4_4 = "| payload: "


# --- running both ----------------------------------------------------------------------------------


#: the longest ``--files`` argument passed to one JVM: Linux refuses a single argument over 128 KiB
#: (MAX_ARG_STRLEN), which a workload's snapshot files under a deep temporary dir can exceed
MAX_FILES_ARG = 100_000


def file_groups(files: list[Path]) -> list[list[str]]:
    """The files in groups whose ``--files`` list fits one argument (:data:`MAX_FILES_ARG`), in order:
    kafka-dump-log runs one JVM per group, and klog one run per group as well, so that a file that
    stops a run (4.4.0's escaping sanity check) stops the same files in both."""
    groups: list[list[str]] = [[]]
    for f in map(str, files):
        if groups[-1] and sum(len(x) + 1 for x in groups[-1]) + len(f) > MAX_FILES_ARG:
            groups.append([])
        groups[-1].append(f)
    return groups


def kafka_dump(files: list[Path], *options: str, release: str = NEWEST) -> tuple[str, str]:
    """kafka-dump-log: ``DumpLogSegments`` of ``release``'s jars, one JVM per :func:`file_groups`
    group (the files' outputs are independent of each other); its stdout as 4.4.0 prints it
    (:func:`dump_text.as_newest`, :func:`dump_text.keyless_payloads_as`)."""
    out, err = [], []
    for group in file_groups(files):
        # C1 only: a short run spends most of its time starting, which the optimizing compiler only slows
        cmd = ["java", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Dfile.encoding=UTF-8",
               "-Dsun.stdout.encoding=UTF-8", "-Dsun.stderr.encoding=UTF-8", "-cp", classpath(version=release),
               dump_log_segments_class(release), "--files", ",".join(group), *options]
        proc = subprocess.run(cmd, capture_output=True, env=java_env(), check=False, timeout=600)
        out.append(proc.stdout.decode("utf-8"))
        err.append(proc.stderr.decode("utf-8"))
    text = as_newest("".join(out), release)
    return keyless_payloads_as(text, release, options), "".join(err)


def klog_dump(files: list[Path], *options: str, release: str = NEWEST) -> tuple[int, str, str]:
    """``klog dump``, one run per :func:`file_groups` group as :func:`kafka_dump` runs the JVMs; the
    highest exit code."""
    out, err = io.StringIO(), io.StringIO()
    rc = 0
    with redirect_stdout(out), redirect_stderr(err):
        for group in file_groups(files):
            rc = max(rc, klog(["dump", "--quiet", *options, *group]))
    return rc, keyless_payloads_as(out.getvalue(), release, options), err.getvalue()


NON_CONSECUTIVE = "Non-consecutive offsets in "


#: The tool stopped by an exception: 4.4.0's ``DumpLogSegments`` lets an index's sanity check
#: escape ``main`` (``Exception in thread "main" <class>: <message>`` and its stack trace), klog
#: says ``klog: error: <message> [file <path>]`` and exits 1; the message is the report.
_JAVA_FATAL = re.compile(r'^Exception in thread "main" [\w.$]+: (.*)$')
_KLOG_FATAL = re.compile(r"^klog: error: (.*?)(?: \[file [^\]]*\])?$")


#: A time index's entries not in its log: 4.4.0 names the file (``... not found in :<path>``), 4.1.1
#: says ``... not found in the log.``; klog says 4.4.0's words, the report is compared without them.
NOT_FOUND = "The following indexed offsets are not found in "


def report_head(line: str) -> str:
    """A report's first line as both tools' are compared (the two differences above undone)."""
    if line.startswith(NOT_FOUND):
        return NOT_FOUND.rstrip()
    m = _JAVA_FATAL.match(line) or _KLOG_FATAL.match(line)
    return f"fatal: {m.group(1)}" if m else line


def reports(stderr: str) -> Counter[tuple[str, ...]]:
    """kafka-dump-log's reports on stderr, each a header line and its detail lines, as a multiset
    (:data:`DUMP_EXCEPTIONS` ``reports-after-each-file``); a non-consecutive-offsets report's details
    as a sorted set, without 4.4.0's report of each file's first offset (``non-consecutive-details``)."""
    blocks: list[list[str]] = []
    for line in stderr.split("\n"):
        if not line:
            continue
        if line.startswith(("\tat ", "\t... ", "Caused by: ")) and blocks:
            continue  # a Java stack trace: its exception line is the report
        if line.startswith(("  ", "Indexed offset: ")) and blocks:
            blocks[-1].append(line)
        else:
            blocks.append([report_head(line)])
    out: Counter[tuple[str, ...]] = Counter()
    for head, *details in blocks:
        if head.startswith(NON_CONSECUTIVE):
            details = sorted({d for d in details if not d.startswith("  -1 is followed by ")},
                             key=lambda d: int(d.split()[0]))
            if not details:
                continue
        out[(head, *details)] += 1
    return out


def assert_same_dump(ctx: str, what: str, kafka: tuple[str, str], ours: tuple[int, str, str]) -> None:
    """``klog dump``'s output (exit code, stdout, stderr) is kafka-dump-log's, line for line, and its
    reports on stderr are the same (:func:`reports`); ``ctx`` (the run's seed) starts every message."""
    rc, out, err = ours
    want, got = kafka[0].split("\n"), out.split("\n")  # "\n" only: payloads hold other line breaks
    if want != got:
        ops = [op for op in difflib.SequenceMatcher(None, want, got, autojunk=False).get_opcodes() if op[0] != "equal"]
        missing = sum(i2 - i1 for _, i1, i2, _, _ in ops)
        extra = sum(j2 - j1 for _, _, _, j1, j2 in ops)
        _, i1, _, j1, _ = ops[0]
        raise AssertionError(
            f"{ctx} klog dump {what}: {missing} of kafka-dump-log's {len(want)} lines are not klog's, klog has {extra} "
            f"others; the first at line {i1 + 1}:\n  kafka: {want[i1] if i1 < len(want) else '<end>'!r}\n"
            f"  klog:  {got[j1] if j1 < len(got) else '<end>'!r}")
    assert reports(err) == reports(kafka[1]), f"{ctx} klog dump {what}: stderr\n{err}\nkafka-dump-log's:\n{kafka[1]}"
    assert rc in (0, 1), f"{ctx} klog dump {what}: exit {rc}: {err}"
