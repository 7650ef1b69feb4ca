"""Options of klog's Spark source that only Spark has: ``readStream`` admission control.

Read options (``path``, ``topics``, ``startingOffsets``, ``isolationLevel``, ...) are parsed by
:mod:`storage_core.read.options`, the one parser every read path shares (Spark batch and
stream, ``klog export``, the Python API); they are re-exported here for the Spark side.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from storage_core.errors import InvalidOptionError
from storage_core.read.options import (
    EARLIEST,
    LATEST,
    OffsetSpec,
    ReadOptions,
    option_long,
    option_name,
    parse_read_options,
    start_spec,
)

__all__ = ["EARLIEST", "LATEST", "OffsetSpec", "ReadOptions", "StreamOptions", "parse_read_options",
           "parse_stream_options", "parse_duration_ms", "parse_admission"]

# --- streaming ------------------------------------------------------------------------------------

#: ``maxTriggerDelay`` default, as in Spark's Kafka source.
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000
_DURATION_UNITS = {"us": 0.001, "ms": 1, "s": 1000, "sec": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000,
                   "d": 86_400_000}
#: Batch-only options a stream rejects (a stream has no end), as Spark's Kafka source does.
BATCH_ONLY_OPTIONS = ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp", "endingoffsetsfromgroup")


@dataclass(frozen=True)
class StreamOptions:
    """A ``readStream`` of klog: the read options plus where to start and how much per trigger."""

    read: ReadOptions
    starting: OffsetSpec  # "earliest" | "latest" | "offsets" | "timestamp" | "timestamps"
    max_offsets_per_trigger: int | None
    min_offsets_per_trigger: int | None
    max_trigger_delay_ms: int


def parse_duration_ms(raw: str, name: str) -> int:
    """Spark's time strings (``JavaUtils.timeStringAsMs``): ``500ms``, ``30s``, ``15m``, ``1h``; a bare
    number is milliseconds."""
    m = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", raw.lower())
    if m is None or (m.group(2) and m.group(2) not in _DURATION_UNITS):
        raise InvalidOptionError(f"option {name}={raw!r} is not a duration; expected a number with a unit "
                                 f"({', '.join(_DURATION_UNITS)}), e.g. 15m or 30s")
    ms = int(int(m.group(1)) * _DURATION_UNITS[m.group(2) or "ms"])
    if ms >= 1 << 63:
        raise InvalidOptionError(f"option {name}={raw!r} does not fit a 64-bit count of milliseconds")
    return ms


def parse_stream_options(options: Mapping[str, str]) -> StreamOptions:
    """Validate the options of ``spark.readStream.format("klog")``; raises InvalidOptionError."""
    opts = {str(k).lower(): str(v) for k, v in options.items()}
    given = [k for k in BATCH_ONLY_OPTIONS if k in opts]
    if given:
        raise InvalidOptionError(f"option {option_name(given[0])} is not valid for streaming queries (a stream has no "
                                 "end); remove it, or use spark.read for a bounded range")
    read = parse_read_options(opts, streaming=True)
    starting = start_spec(opts, streaming=True)
    max_per, min_per, delay_ms = parse_admission(opts)
    return StreamOptions(read, starting, max_per, min_per, delay_ms)


def parse_admission(options: Mapping[str, str]) -> tuple[int | None, int | None, int]:
    """``maxOffsetsPerTrigger``, ``minOffsetsPerTrigger`` and ``maxTriggerDelay`` (ms), checked. The
    data source's ``schema()`` calls this at ``load()``, so that a wrong value fails there and not
    once the query runs (a batch read, which ignores these options, refuses wrong values too)."""
    opts = {str(k).lower(): str(v) for k, v in options.items()}
    max_per = option_long(opts, "maxoffsetspertrigger", minimum=1)
    min_per = option_long(opts, "minoffsetspertrigger", minimum=1)
    if max_per is not None and min_per is not None and min_per > max_per:
        raise InvalidOptionError(f"minOffsetsPerTrigger ({min_per}) is larger than maxOffsetsPerTrigger ({max_per}); "
                                 "a trigger could never be admitted")
    delay = opts.get("maxtriggerdelay")
    if delay is not None and min_per is None:
        raise InvalidOptionError("option maxTriggerDelay only applies with minOffsetsPerTrigger; set both or neither")
    delay_ms = parse_duration_ms(delay, "maxTriggerDelay") if delay is not None else DEFAULT_MAX_TRIGGER_DELAY_MS
    return max_per, min_per, delay_ms
