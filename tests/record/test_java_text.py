"""Bytes to text as Java decodes them (``storage_core.record.text.java_utf8``): the malformed
sequences where Java's replacement differs from Python's, and random bytes against Java itself
(``oracle/JavaUtf8.java``, run with the machine's ``java``; skipped without one)."""

from __future__ import annotations

import random
import shutil
import subprocess

import pytest
from broker_fixture import JAVA

from storage_core.record.text import java_utf8

R = "\ufffd"

# (bytes, what new String(bytes, UTF_8) gives), checked against Java 17
VECTORS = [
    (b"", ""),
    (b"plain", "plain"),
    ("h\u00e9llo \U0001f600".encode(), "h\u00e9llo \U0001f600"),
    (b"\xed\xa0\x80", R),  # an encoded surrogate: one malformed sequence of 3 (Python: 3 replacements)
    (b"\xed\xbf\xbfx", R + "x"),
    (b"\xed\xa0A", R + "A"),  # ED A0 then a non-continuation: one of 2 (Python: 2)
    (b"\xed\xa0", R),  # truncated at the end: one for the rest (Python: 2)
    (b"\xe0\x80\x80", R + R + R),  # E0 80: overlong, one of 1, then lone continuations
    (b"\xe2\x82", R),
    (b"\xe2\x82A", R + "A"),
    (b"\xf0\x9f\x98", R),
    (b"\xf0\x9f\x98A", R + "A"),
    (b"\xf0\x9fA", R + "A"),
    (b"\xf0\x80\x80\x80", R * 4),
    (b"\xf4\x90\x80\x80", R * 4),
    (b"\xf5\x80", R + R),
    (b"\xc0\xaf", R + R),
    (b"\xc2A", R + "A"),
    (b"\x80\xbf", R + R),
    (b"\xff", R),
]


@pytest.mark.parametrize(("data", "want"), VECTORS)
def test_vectors(data: bytes, want: str) -> None:
    assert java_utf8(data) == want


def test_python_differs_where_java_does() -> None:
    """The reason the module exists: Python's own replacement is not Java's."""
    assert b"\xed\xa0\x80".decode("utf-8", "replace") == R * 3 != java_utf8(b"\xed\xa0\x80")


@pytest.mark.interop
def test_random_bytes_against_java() -> None:
    if shutil.which("java") is None:
        pytest.skip("no java on PATH")
    rnd = random.Random(20261126)
    # bytes around every boundary of UTF-8's lead and continuation ranges, some fully random
    pool = [0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xEC, 0xED,
            0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xF7, 0xF8, 0xFE, 0xFF]
    cases = [bytes(rnd.choice(pool) if rnd.random() < 0.8 else rnd.randrange(256) for _ in range(rnd.randint(0, 8)))
             for _ in range(50_000)]
    source = JAVA / "JavaUtf8.java"
    proc = subprocess.run(["java", "-Xmx256m", str(source)], input="".join(c.hex() + "\n" for c in cases),
                          capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.split("\n")
    assert len(lines) == len(cases) + 1
    wrong = []
    for data, line in zip(cases, lines[:-1], strict=True):
        units = b"".join(int(u, 16).to_bytes(2, "big") for u in line.split())
        want = units.decode("utf-16-be", "surrogatepass")
        if java_utf8(data) != want:
            wrong.append(data.hex())
    assert not wrong, f"{len(wrong)} byte strings decode unlike Java, e.g. {wrong[:5]}"
    # and the oracle is worth having: Python's own replacement differs on some of them
    assert any(c.decode("utf-8", "replace") != java_utf8(c) for c in cases)
