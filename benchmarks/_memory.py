"""Peak resident memory of this process, resettable per measurement (Linux).

Writing ``5`` to ``/proc/self/clear_refs`` resets the kernel's high-water mark of the resident
set (``VmHWM``), so each measurement reports its own peak rather than the run's. Elsewhere the
peak falls back to ``ru_maxrss`` (the whole run's).
"""

from __future__ import annotations

import re
import resource
import sys
from pathlib import Path

__all__ = ["peak_rss_bytes", "reset_peak_rss"]

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def reset_peak_rss() -> bool:
    """Start a new peak; False where the platform cannot."""
    try:
        _CLEAR_REFS.write_text("5")
        return True
    except OSError:
        return False


def peak_rss_bytes() -> int:
    """The peak resident set since the last :func:`reset_peak_rss` (or since the process started)."""
    try:
        m = re.search(r"^VmHWM:\s+(\d+) kB", _STATUS.read_text(), re.MULTILINE)
        if m:
            return int(m.group(1)) * 1024
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak) if sys.platform == "darwin" else int(peak) * 1024  # macOS: bytes, Linux: KiB
