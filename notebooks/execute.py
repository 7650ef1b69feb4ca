"""Run the notebooks top to bottom and store their outputs in the ``.ipynb`` files (``make notebooks``).

    .venv/bin/python notebooks/execute.py                      # every notebook here, in place
    .venv/bin/python notebooks/execute.py broker_audit.ipynb   # one

Each notebook runs in a fresh temporary working directory (its sample data and Parquet land
there and are deleted afterwards, never in the checkout) with a real kernel of this Python (nbclient),
in the environment ``tests/test_notebooks.py`` uses too (:func:`execute`): the kernel finds this
checkout and ``broker_sample.py``, Spark's workers run this Python, plots are PNGs. Cell timings
are not recorded, Spark's start-up lines on stderr (which carry the date) are dropped, and a
notebook whose outputs name the temporary directory, the checkout, the home directory, the user
or the host is not written (outputs must read the same on every machine).
"""

from __future__ import annotations

import getpass
import os
import re
import socket
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

NOTEBOOKS = Path(__file__).resolve().parent
REPO = NOTEBOOKS.parent


@contextmanager
def kernel_environment() -> Iterator[None]:
    """The kernel inherits the environment: this checkout and the notebooks' helpers on its path,
    Spark's Python workers on this interpreter, inline PNG plots, the same hash seed every run."""
    wanted = {
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), str(NOTEBOOKS), os.environ.get("PYTHONPATH")) if p),
        "PYSPARK_PYTHON": sys.executable,
        "MPLBACKEND": "module://matplotlib_inline.backend_inline",
        "PYTHONHASHSEED": "0",
        "SPARK_LOCAL_IP": "127.0.0.1",  # no "hostname resolves to a loopback address" warning naming the host
        "TZ": "UTC",
    }
    saved = {k: os.environ.get(k) for k in wanted}
    os.environ.update(wanted)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def execute(path: Path, cwd: Path, timeout: int = 600) -> Any:
    """The notebook at ``path`` executed with ``cwd`` as its working directory (a ``NotebookNode``)."""
    import nbclient
    import nbformat

    nb = nbformat.read(path, as_version=4)
    with kernel_environment():
        client = nbclient.NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                                         resources={"metadata": {"path": str(cwd)}})
        client.execute()
    return nb


#: What the JVM prints on stderr as Spark starts (with the date and time): not kept in stored outputs.
STARTUP_NOISE = re.compile(r"^(WARNING: Using incubator modules|Using Spark's default log4j profile|"
                           r"Setting default log level to|To adjust logging level use|"
                           r"\d\d/\d\d/\d\d \d\d:\d\d:\d\d WARN NativeCodeLoader)")


def drop_startup_noise(nb: Any) -> None:
    """Remove Spark's start-up lines from stderr outputs (and stderr outputs left empty by it)."""
    for cell in nb.cells:
        kept = []
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream" and out.get("name") == "stderr":
                lines = [ln for ln in out["text"].splitlines(keepends=True) if not STARTUP_NOISE.match(ln)]
                if not "".join(lines).strip():
                    continue
                out["text"] = "".join(lines)
            kept.append(out)
        if "outputs" in cell:
            cell["outputs"] = kept


def leaks(nb: Any, cwd: Path) -> list[str]:
    """Lines of the outputs that name this machine: the working dir, the checkout, home, user, host."""
    needles = {str(cwd), str(cwd.resolve()), str(REPO), str(Path.home()), tempfile.gettempdir() + os.sep}
    words = {w for w in (getpass.getuser(), socket.gethostname()) if len(w) >= 3 and w not in ("root", "user")}
    found = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            texts = [out.get("text", "")] + [v for k, v in out.get("data", {}).items() if k.startswith("text/")]
            for text in texts:
                for line in ("".join(text) if isinstance(text, list) else text).splitlines():
                    if any(n in line for n in needles) or any(re.search(rf"\b{re.escape(w)}\b", line) for w in words):
                        found.append(line.strip())
    return found


def main(argv: list[str]) -> int:
    import nbformat

    names = argv or sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))
    status = 0
    for name in names:
        path = NOTEBOOKS / Path(name).name
        with tempfile.TemporaryDirectory(prefix="klog-notebook-") as tmp:
            t0 = time.monotonic()
            nb = execute(path, Path(tmp))
            seconds = time.monotonic() - t0
            drop_startup_noise(nb)
            bad = leaks(nb, Path(tmp))
        errors = [c for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
        if bad or errors:
            status = 1
            why = f"{len(errors)} cells failed" if errors else "outputs name this machine: " + " | ".join(bad[:5])
            print(f"{name}: not written: {why}", file=sys.stderr)
            continue
        nbformat.write(nb, path)
        images = sum("image/png" in o.get("data", {}) for c in nb.cells for o in c.get("outputs", []))
        print(f"{name}: executed in {seconds:.0f} s, {images} plot{'s' if images != 1 else ''}, outputs stored")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
