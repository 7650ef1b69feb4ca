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
runs a page's blocks in the current directory, as :mod:`tests.test_docs` does in a directory of
samples. A page runs in a process of its own, whose SparkSession starts in that directory: Spark
resolves a relative path against the JVM's working directory, as a user's session does.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import traceback
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


def _spark() -> Any:
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]").appName("klog-docs")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "4").config("spark.sql.session.timeZone", "UTC")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    return session


def _run_python(block: Block, namespace: dict[str, Any]) -> None:
    if "spark" in block.code and "spark" not in namespace:
        namespace["spark"] = _spark()
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


def run_page(page: Path) -> int:
    """Run every runnable block of ``page`` in order, in the current directory; the count run."""
    namespace: dict[str, Any] = {"__name__": "__docs__"}
    todo = [b for b in blocks(page) if b.runnable]
    try:
        for block in todo:
            if block.lang == "python":
                _run_python(block, namespace)
            elif block.lang == "bash":
                _run_bash(block)
            else:
                _run_console(block)
    finally:
        spark = namespace.get("spark")
        if spark is not None:
            for query in spark.streams.active:
                query.stop()
            spark.stop()
    return len(todo)


def main() -> int:
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
