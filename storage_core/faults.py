"""Fault injection for klog's crash tests, the one mechanism every writer calls (inactive unless a
test sets one of its environment variables; environment variables, so that they reach the
processes Spark starts).

**Named points** (:func:`maybe_crash`). A test writes a JSON object to the file named by
``KLOG_FAULT_FILE``, e.g. ``{"point": "task-staged", "partition": 1, "attempt": 0}``; when code
reaches :func:`maybe_crash` with that point and matching context, the process ends at once, as a
SIGKILL would end it (``os._exit(137)``), or with a real SIGKILL sent to itself when the spec says
``"signal": "KILL"`` (the exit status is then -9). With ``"nth": N`` it fires the N-th time the
point is reached with matching context (1-based), not the first.

Points (see ``tests/log/crash_matrix.md`` for what each kill leaves and how reopening settles it):
``log-batch-written``, ``log-roll-old-closed``, ``log-roll-new-segment``, ``log-roll-snapshot``,
``segment-flush-log-synced``, ``log-flushed``, ``checkpoint-tmp-written``, ``checkpoint-replaced``,
``retention-file-renamed``, ``retention-segment-gone``, ``retention-snapshots-removed``, and the
cleaner's ``cleaner-*`` points (``storage_core/cleaner/__init__.py``).

**Counted steps** (:func:`maybe_crash_at_step`). The commit protocol (``storage_core/log/staged.py``,
``storage_core/log/journal.py``) counts its steps instead: ``KLOG_CRASH_AT=<n>``, or the number
in the file named by ``KLOG_CRASH_FILE`` (for processes whose environment is fixed early, such as
Spark's Python workers), ends the process with ``os._exit(137)`` at the n-th step this process
reaches. ``KLOG_STEP_DELAY_MS=<ms>`` makes every step sleep that long, so that a test's random
kills land inside a commit rather than around it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

_hits: dict[str, int] = {}


def maybe_crash(point: str, **context: object) -> None:
    path = os.environ.get("KLOG_FAULT_FILE")
    if not path or not os.path.exists(path):
        return
    try:
        with open(path) as f:
            spec = json.load(f)
    except (OSError, ValueError):
        return
    if spec.get("point") != point:
        return
    if all(spec.get(k) == v for k, v in context.items() if k in spec):
        _hits[point] = _hits.get(point, 0) + 1
        if _hits[point] < int(spec.get("nth", 1)):
            return
        with open(path + ".fired", "a") as f:  # evidence for the test that the fault happened
            f.write(json.dumps({"point": point, **{k: str(v) for k, v in context.items()}}) + "\n")
        if spec.get("signal") == "KILL":
            import signal

            os.kill(os.getpid(), signal.SIGKILL)
        os._exit(137)


#: ``KLOG_CRASH_AT=<n>`` (or the number in the file named by ``KLOG_CRASH_FILE``): end the process at
#: the n-th commit step.
_CRASH_ENV = "KLOG_CRASH_AT"
_CRASH_FILE_ENV = "KLOG_CRASH_FILE"
_steps = 0


def maybe_crash_at_step() -> None:
    """One step of a commit: counted while a crash step is set, and the process ends at that step."""
    global _steps
    delay = os.environ.get("KLOG_STEP_DELAY_MS")
    if delay:
        import time

        time.sleep(int(delay) / 1000)
    target = os.environ.get(_CRASH_ENV)
    crash_file = os.environ.get(_CRASH_FILE_ENV)  # for processes whose environment is fixed early
    if target is None and crash_file and os.path.exists(crash_file):
        target = Path(crash_file).read_text().strip() or None
    if target is not None:
        _steps += 1
        if _steps >= int(target):
            os._exit(137)
