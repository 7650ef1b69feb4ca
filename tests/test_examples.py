"""Every example runs (in its own process, as a user runs it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.spark
def test_quickstart(tmp_path: Path) -> None:
    env = dict(os.environ, KLOG_QUICKSTART_DIR=str(tmp_path / "data"), PYSPARK_PYTHON=sys.executable)
    res = subprocess.run([sys.executable, str(REPO / "examples" / "quickstart.py")], capture_output=True, text=True,
                         env=env, timeout=600, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "clicks between minute 10 and 15: 300 (expected 300)" in res.stdout
    assert "clicks  0" in res.stdout  # the klog describe table
