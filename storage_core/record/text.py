"""Bytes to text as Java decodes them: ``new String(bytes, StandardCharsets.UTF_8)``.

Kafka turns bytes into strings this way wherever it does (header keys in ``DefaultRecord``,
``StringDecoder`` in kafka-dump-log, ``Utils.utf8``): malformed input is replaced by U+FFFD, never
refused. Valid UTF-8 decodes the same in Java and Python; malformed input does not, because the
two cut it into replaced pieces differently. Python replaces each *maximal subpart* (the Unicode
recommendation), Java's decoder (``sun.nio.cs.UTF_8``, and ``String``'s fast path with the same
rules) checks a sequence's structure first and its value after: an encoded surrogate
``ED A0..BF xx`` is one malformed sequence of 3 bytes (Python: 3 replacements), ``ED A0`` before
a non-continuation byte one of 2 (Python: 2 replacements); the truncated tail of a sequence at
the end of the input is one replacement in both.

:func:`java_utf8` decodes strictly first (the common case: valid text, at C speed) and only on
malformed input goes through the ``klog-java-utf8`` error handler, which at each malformed
position replaces as many bytes as Java does (``UTF_8.Decoder.malformedN`` and its underflow rules).
"""

from __future__ import annotations

import codecs

REPLACEMENT = "\ufffd"
ERROR_HANDLER = "klog-java-utf8"


def _continuation(b: int) -> bool:
    return (b & 0xC0) == 0x80


def java_malformed_length(data: bytes, start: int) -> int:
    """How many bytes from ``start`` (where a malformed sequence begins: Python and Java agree on
    where valid UTF-8 stops) Java replaces by one U+FFFD."""
    b1 = data[start]
    rest = len(data) - start - 1  # bytes after the lead byte
    if 0xE0 <= b1 <= 0xEF:  # a 3-byte lead
        if rest >= 2:
            b2, b3 = data[start + 1], data[start + 2]
            if (b1 == 0xE0 and (b2 & 0xE0) == 0x80) or not _continuation(b2):
                return 1
            if not _continuation(b3):
                return 2
            return 3  # a well-formed encoding of a surrogate (ED A0..BF xx)
        if rest == 1 and ((b1 == 0xE0 and (data[start + 1] & 0xE0) == 0x80) or not _continuation(data[start + 1])):
            return 1
        return rest + 1  # a truncated sequence ends the input: one replacement for all of it
    if 0xF0 <= b1 <= 0xF7:  # a 4-byte lead (F5..F7 are never valid)
        if b1 > 0xF4:
            return 1
        if rest >= 1:
            b2 = data[start + 1]
            if (b1 == 0xF0 and not 0x90 <= b2 <= 0xBF) or (b1 == 0xF4 and (b2 & 0xF0) != 0x80) or not _continuation(b2):
                return 1
        if rest >= 2 and not _continuation(data[start + 2]):
            return 2
        if rest >= 3:
            return 3  # the fourth byte is not a continuation
        return rest + 1
    # C2..DF before a non-continuation byte or at the end, a continuation byte, C0, C1, F8..FF
    return 1


def _handler(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeDecodeError):
        raise exc
    data = bytes(exc.object)
    return REPLACEMENT, exc.start + java_malformed_length(data, exc.start)


codecs.register_error(ERROR_HANDLER, _handler)


def java_utf8(data: bytes | bytearray | memoryview) -> str:
    """``new String(data, UTF_8)``: malformed input replaced as Java replaces it."""
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        return bytes(data).decode("utf-8", ERROR_HANDLER)
