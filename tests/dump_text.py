"""How kafka-dump-log's text changed between the releases the tests compare ``klog dump`` with.

``klog dump`` prints what the newest of them prints (Kafka 4.4.0's
``org.apache.kafka.tools.DumpLogSegments``); an older release's output is brought to that text by
:func:`as_newest`, one named rule per difference (:data:`RELEASE_DIFFERENCES`, also in
docs/internal-topics.md), before it is compared line for line.
"""

from __future__ import annotations

import re

from storage_core.record.messages.decoders import TRANSACTION_STATE_NAMES

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
