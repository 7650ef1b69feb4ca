"""Java's integer limits, in one place: the bounds of Kafka's int32 and int64 fields and configs.

Kafka stores offsets, timestamps and producer ids as Java ``long`` and offset deltas, sequences,
sizes, partitions and most configs as Java ``int``; a value outside these ranges is one Kafka
could not have written (or would reject). Imports nothing.
"""

from __future__ import annotations

__all__ = ["INT32_MAX", "INT32_MIN", "INT64_MAX", "INT64_MIN"]

#: ``Integer.MIN_VALUE`` / ``Integer.MAX_VALUE``.
INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
#: ``Long.MIN_VALUE`` / ``Long.MAX_VALUE`` (``Long.MAX_VALUE`` is "never" for ``flush.*``, ...).
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
