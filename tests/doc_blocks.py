"""The code blocks of the README and the docs site, as :mod:`tests.test_docs` runs them.

A block is a fenced block (```` ```lang ````). Its language says what it is:

* ``python``: run, in order with the page's other python blocks, in one namespace per page where
  ``spark`` is the test session's SparkSession;
* ``bash``: run with ``bash -euo pipefail`` (exit 0 expected);
* ``console``: ``$ command`` lines, each followed by the output it must print (stdout and stderr
  together). A line ``...`` in the output stands for any lines, ``...`` inside a line for any text;
* ``text``, ``json``, ``properties``: shown, never run (outputs, file contents).

A block that cannot run in the tests (a cloud bucket, a rebuild of the kernel) has the comment
``<!-- not-run: why -->`` on the line before its fence; the tests count those, so they stay few.
Every fence names its language: an unlabeled block fails the test.

``python tests/doc_blocks.py`` prints the counts per page; ``python tests/doc_blocks.py --run PAGE``
runs a page's blocks in the current directory. :mod:`tests.test_docs` runs every page in one
process (``--samples DIR --results FILE --run PAGE...``), so that one SparkSession serves them all
(it took about 10 s to start per page): before each page the current directory is emptied and
filled with a fresh copy of the samples ``DIR``, the page gets a namespace of its own and a
session of its own (``newSession()``: its own SQL conf, temporary views, registered data sources
and streams, on the shared SparkContext), and afterwards its streams are stopped, the cache is
cleared and the environment, ``sys.path``, ``sys.modules`` (what the page imported from the work
dir, the examples or the notebooks) and the warning filters are put back as they were. The work
dir is the same directory for every page, emptied in place, never removed or renamed: the JVM and
Spark's Python workers resolve a relative path against the directory they started in, as a user's
session does. Each page's outcome (the count run, or the failure naming its block) goes to the
results ``FILE`` (JSON) as soon as the page ends.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RUNNABLE = ("python", "bash", "console")
SHOWN = ("text", "json", "properties")
_FENCE = re.compile(r"^```(\S*)\s*$")
_NOT_RUN = re.compile(r"^<!--\s*not-run:\s*(.+?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  #: 1-based line of the opening fence
    lang: str
    code: str
    not_run: str | None  #: why the block cannot run in the tests, or None

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"

    @property
    def runnable(self) -> bool:
        return self.lang in RUNNABLE and self.not_run is None


def pages() -> list[Path]:
    """The README and every page of the docs site, in the order a reader meets them."""
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def blocks(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").split("\n")
    found: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        start = i
        j = i + 1
        while j < len(lines) and lines[j].rstrip() != "```":
            j += 1
        if j == len(lines):
            raise ValueError(f"{path}:{start + 1}: a fence that never closes")
        mark = _NOT_RUN.match(lines[start - 1]) if start > 0 else None
        found.append(Block(path, start + 1, m.group(1), "\n".join(lines[start + 1:j]) + "\n",
                           mark.group(1) if mark else None))
        i = j + 1
    return found


@dataclass(frozen=True)
class ConsoleStep:
    command: str
    expected: list[str]


def console_steps(block: Block) -> list[ConsoleStep]:
    steps: list[ConsoleStep] = []
    for line in block.code.rstrip("\n").split("\n"):
        if line.startswith("$ "):
            steps.append(ConsoleStep(line[2:], []))
        elif not steps:
            raise ValueError(f"{block.where}: a console block starts with '$ command', not {line!r}")
        else:
            steps[-1].expected.append(line)
    return steps


def _line_pattern(expected: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in expected.rstrip().split("...")) + r"\Z")


def output_matches(expected: list[str], actual: list[str]) -> bool:
    """Whether ``actual`` lines are ``expected`` (a ``...`` line: any lines; ``...`` in a line: any text)."""
    actual = [a.rstrip() for a in actual]
    if not expected:
        return not actual
    head, rest = expected[0], expected[1:]
    if head.strip() == "...":
        return any(output_matches(rest, actual[k:]) for k in range(len(actual) + 1))
    return bool(actual) and _line_pattern(head).match(actual[0]) is not None and output_matches(rest, actual[1:])


class BlockFailed(Exception):
    """A block of a page did not run as the page says (the message names the block)."""


def _env() -> dict[str, str]:
    bindir = str(Path(sys.executable).parent)
    pythonpath = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    return dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""), PYTHONPATH=pythonpath,
                PYSPARK_PYTHON=sys.executable, COLUMNS="100")


class _Sessions:
    """The process's one SparkSession (started on first use, in the current directory) and a new
    session on it for each page that needs one."""

    def __init__(self) -> None:
        self.base: Any = None

    def for_page(self) -> Any:
        from pyspark.sql import SparkSession

        if self.base is None:
            self.base = (SparkSession.builder.master("local[2]").appName("klog-docs")
                         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                         .config("spark.sql.shuffle.partitions", "4").config("spark.sql.session.timeZone", "UTC")
                         .getOrCreate())
            self.base.sparkContext.setLogLevel("ERROR")
        session = self.base.newSession()
        # what SparkSession.builder.getOrCreate() and getActiveSession() give the page's code
        jclass = SparkSession._get_j_spark_session_class(session._jvm)
        jclass.setDefaultSession(session._jsparkSession)
        jclass.setActiveSession(session._jsparkSession)
        SparkSession._instantiatedSession = SparkSession._activeSession = session
        return session

    def stop(self) -> None:
        if self.base is not None:
            self.base.stop()
            self.base = None


def _run_python(block: Block, namespace: dict[str, Any], sessions: _Sessions) -> None:
    if "spark" in block.code and "spark" not in namespace:
        namespace["spark"] = sessions.for_page()
    try:
        exec(compile(block.code, block.where, "exec"), namespace)  # noqa: S102 - the docs' own examples
    except Exception as e:
        raise BlockFailed(f"{block.where}: the python block failed:\n{block.code}\n{traceback.format_exc()}") from e


def _run_bash(block: Block) -> None:
    res = subprocess.run(["bash", "-euo", "pipefail", "-c", block.code], env=_env(), capture_output=True,
                         text=True, timeout=600)
    if res.returncode != 0:
        raise BlockFailed(f"{block.where}: the bash block exited {res.returncode}:\n{block.code}\n"
                          f"stdout:\n{res.stdout[-3000:]}\nstderr:\n{res.stderr[-3000:]}")


def _run_console(block: Block) -> None:
    for step in console_steps(block):
        res = subprocess.run(["bash", "-o", "pipefail", "-c", step.command], env=_env(),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
        actual = res.stdout.rstrip("\n").split("\n") if res.stdout.strip() else []
        if res.returncode != 0:
            raise BlockFailed(f"{block.where}: `{step.command}` exited {res.returncode}:\n{res.stdout[-3000:]}")
        if not output_matches(step.expected, actual):
            raise BlockFailed(f"{block.where}: `{step.command}` printed\n" + "\n".join(actual)
                              + "\n\nwhere the page shows\n" + "\n".join(step.expected))


def _page_modules(work: Path) -> tuple[Path, ...]:
    """Where the modules a page may import live: the work dir, the examples, the notebooks."""
    return (work.resolve(), (REPO / "examples").resolve(), (REPO / "notebooks").resolve())


def _own_module(module: Any, roots: tuple[Path, ...]) -> bool:
    file = getattr(module, "__file__", None)
    if not file:
        return False
    path = Path(file).resolve()
    return any(path.is_relative_to(r) for r in roots)


def run_page(page: Path, sessions: _Sessions | None = None) -> int:
    """Run every runnable block of ``page`` in order, in the current directory; the count run.
    With ``sessions``, the page's python blocks get a new session of its SparkSession, and what the
    page changed in this process (streams, cache, environment, imports, warning filters) is undone
    at the end; without, a SparkSession of the page's own, stopped at the end."""
    own = sessions is None
    sessions = sessions or _Sessions()
    namespace: dict[str, Any] = {"__name__": "__docs__"}
    todo = [b for b in blocks(page) if b.runnable]
    environ, path, modules = dict(os.environ), list(sys.path), set(sys.modules)
    filters = list(warnings.filters)
    try:
        for block in todo:
            if block.lang == "python":
                _run_python(block, namespace, sessions)
            elif block.lang == "bash":
                _run_bash(block)
            else:
                _run_console(block)
    finally:
        spark = namespace.get("spark")
        if spark is not None:
            for query in spark.streams.active:
                query.stop()
            spark.catalog.clearCache()
        if own:
            sessions.stop()
        else:
            os.environ.clear()
            os.environ.update(environ)
            sys.path[:] = path
            roots = _page_modules(Path.cwd())
            for name in set(sys.modules) - modules:
                if _own_module(sys.modules[name], roots):
                    del sys.modules[name]
            warnings.filters[:] = filters
    return len(todo)


def _fresh_copy(samples: Path, work: Path) -> None:
    """Empty ``work`` in place (the directory itself stays: Spark's processes started in it) and
    copy ``samples`` into it, symlinks as symlinks."""
    for entry in list(work.iterdir()):
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    shutil.copytree(samples, work, symlinks=True, dirs_exist_ok=True)


def run_pages(pages: list[Path], samples: Path, results: Path) -> bool:
    """Run each page on a fresh copy of ``samples`` in the current directory, all on one
    SparkSession; each page's outcome is written to ``results`` as soon as it is known. Whether
    every page ran."""
    work = Path.cwd()
    sessions = _Sessions()
    outcome: dict[str, dict[str, Any]] = {}
    try:
        for page in pages:
            name = str(page.relative_to(REPO))
            _fresh_copy(samples, work)
            started = time.monotonic()
            try:
                ran = run_page(page, sessions)
            except BlockFailed as e:
                outcome[name] = {"ran": None, "error": str(e)}
                print(f"FAILED {name}:\n{e}", file=sys.stderr)
            else:
                outcome[name] = {"ran": ran, "error": None}
                print(f"ran {ran} blocks of {name}")
            outcome[name]["seconds"] = round(time.monotonic() - started, 1)
            sys.stdout.flush()
            results.write_text(json.dumps(outcome, indent=1))
    finally:
        sessions.stop()
    return all(o["error"] is None for o in outcome.values())


def main() -> int:
    if sys.argv[1:2] == ["--samples"] and sys.argv[3:4] == ["--results"] and sys.argv[5:6] == ["--run"]:
        ok = run_pages([Path(p).resolve() for p in sys.argv[6:]], Path(sys.argv[2]).resolve(),
                       Path(sys.argv[4]).resolve())
        return 0 if ok else 1
    if sys.argv[1:2] == ["--run"]:
        page = Path(sys.argv[2]).resolve()
        try:
            ran = run_page(page)
        except BlockFailed as e:
            print(e, file=sys.stderr)
            return 1
        print(f"ran {ran} blocks of {page.relative_to(REPO)}")
        return 0
    total = runnable = marked = 0
    for page in pages():
        bs = blocks(page)
        run = [b for b in bs if b.runnable]
        nr = [b for b in bs if b.lang in RUNNABLE and b.not_run is not None]
        total += len(bs)
        runnable += len(run)
        marked += len(nr)
        print(f"{page.relative_to(REPO)}: {len(run)} run, {len(nr)} not run, {len(bs) - len(run) - len(nr)} shown")
        for b in nr:
            print(f"    not run: {b.where}: {b.not_run}")
    print(f"all: {runnable} blocks run, {marked} marked not runnable, {total - runnable - marked} shown (outputs, files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
