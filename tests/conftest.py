from __future__ import annotations

import os
import sys
from pathlib import Path

# Spark's Python workers must start with this interpreter (and so with klog installed).
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks/
