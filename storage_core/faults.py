"""Fault injection points for klog's crash tests (inactive unless a test sets ``KLOG_FAULT_FILE``).

A test writes a JSON object to the file named by ``KLOG_FAULT_FILE`` (an environment variable,
so that it reaches processes Spark starts), e.g. ``{"point": "task-staged", "partition": 1,
"attempt": 0}``; when code reaches :func:`maybe_crash` with that point and matching context, the
process ends at once, as a SIGKILL would end it (``os._exit(137)``), or with a real SIGKILL sent to
itself when the spec says ``"signal": "KILL"`` (the exit status is then -9).
"""

from __future__ import annotations

import json
import os


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
        with open(path + ".fired", "a") as f:  # evidence for the test that the fault happened
            f.write(json.dumps({"point": point, **{k: str(v) for k, v in context.items()}}) + "\n")
        if spec.get("signal") == "KILL":
            import signal

            os.kill(os.getpid(), signal.SIGKILL)
        os._exit(137)
