"""Docs that cannot drift: the site builds with no warning, every link resolves, every example runs.

The docs site (``mkdocs.yml``, ``docs/``) is built with ``mkdocs build --strict``: a warning, a
page left out of the nav, a broken link or anchor fails it. The README's links must name files of
the repository and headings that exist. Every ``python``, ``bash`` and ``console`` block of the
README and the docs runs here (``tests/doc_blocks.py`` says how), page by page, each page on a
fresh copy of the samples ``docs/index.md`` describes: ``klog-data`` (what ``make quickstart``
writes) and ``kafka-copy`` (``notebooks/broker_sample.py``'s stand-in for a broker's
``log.dirs``). The pages run in one process with one SparkSession (a new session per page); each
page is still its own test, which fails naming the page's failed block.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import doc_blocks
import pytest
import shared_fixtures as sf
from doc_blocks import REPO
from spark_env import short_jvm_env

#: Blocks marked ``not-run`` may not grow past this: each is an example no test keeps true.
MAX_NOT_RUN = 8
PAGES = doc_blocks.pages()
#: The shared fixture the Schema Registry page reads as ``flink-copy``: a real broker's log dir
#: with Avro topics and their ``_schemas`` (read only: the work dir holds a symlink to it).
FLINK_COPY = "rjmfernandes+flink-on-prem"
RUN_PAGES = [p for p in PAGES if any(b.runnable for b in doc_blocks.blocks(p))]


def test_every_fence_names_its_language() -> None:
    for page in PAGES:
        for b in doc_blocks.blocks(page):
            assert b.lang in doc_blocks.RUNNABLE + doc_blocks.SHOWN, (
                f"{b.where}: a ```{b.lang} block: say what it is ({', '.join(doc_blocks.RUNNABLE + doc_blocks.SHOWN)})")
            assert b.not_run is None or b.lang in doc_blocks.RUNNABLE, f"{b.where}: not-run on a block never run"


def test_few_blocks_are_marked_not_runnable() -> None:
    every = [b for p in PAGES for b in doc_blocks.blocks(p) if b.lang in doc_blocks.RUNNABLE]
    marked = [b for b in every if b.not_run is not None]
    print(f"{len(every) - len(marked)} blocks run, {len(marked)} marked not runnable")
    assert len(every) - len(marked) >= 40
    assert len(marked) <= MAX_NOT_RUN, "\n".join(f"{b.where}: {b.not_run}" for b in marked)


def test_console_output_matching() -> None:
    assert doc_blocks.output_matches(["a", "...", "z"], ["a", "b", "c", "z"])
    assert doc_blocks.output_matches(["a ... z"], ["a 1 2 z"])
    assert not doc_blocks.output_matches(["a", "z"], ["a", "b", "z"])
    assert not doc_blocks.output_matches(["a"], ["a", "b"])
    assert not doc_blocks.output_matches(["a ... z"], ["a 1 2 y"])


# -- the site ---------------------------------------------------------------------------------

def test_docs_site_builds_strict(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="the docs site needs mkdocs (pip install '.[dev]')")
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                         cwd=REPO, capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, NO_MKDOCS_2_WARNING="1"))
    log = res.stdout + res.stderr
    assert res.returncode == 0, log[-4000:]
    assert "WARNING" not in log, log[-4000:]
    built = (tmp_path / "site" / "reference" / "index.html").read_text(encoding="utf-8")
    assert "storage_core.read.api.read_arrow" in built  # the API reference came from the docstrings
    assert ":func:" not in built and ":class:" not in built  # Sphinx roles rendered, not shown


def _anchors(md: Path) -> set[str]:
    found: set[str] = set()
    fenced = False
    for line in md.read_text(encoding="utf-8").split("\n"):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"^#{1,6} (.*)", line)):
            found.add(re.sub(r"\s+", "-", re.sub(r"[^\w\s-]", "", m.group(1).strip().lower())))
    return found


def test_readme_links_resolve() -> None:
    readme = REPO / "README.md"
    links = re.findall(r"\]\(([^)\s]+)\)", readme.read_text(encoding="utf-8"))
    assert links
    for link in links:
        if re.match(r"[a-z]+://", link):
            continue  # no network here: only the repository's own links are checked
        target, _, anchor = link.partition("#")
        path = (readme.parent / target) if target else readme
        assert path.exists(), f"README links to {link}: no such file"
        if anchor:
            assert anchor in _anchors(path), f"README links to {link}: no such heading in {path.name}"


# -- the examples -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def samples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``klog-data`` as ``make quickstart`` leaves it and ``kafka-copy`` as broker_sample writes it."""
    root = tmp_path_factory.mktemp("docs-samples")
    env = dict(os.environ, KLOG_QUICKSTART_DIR=str(root / "klog-data"), PYSPARK_PYTHON=sys.executable,
               **short_jvm_env())
    res = subprocess.run([sys.executable, str(REPO / "examples" / "quickstart.py")], cwd=root, env=env,
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    (root / "quickstart.out").write_text(res.stdout)
    shutil.rmtree(root / "klog-data-checkpoints", ignore_errors=True)
    sys.path.insert(0, str(REPO / "notebooks"))
    try:
        import broker_sample
    finally:
        sys.path.remove(str(REPO / "notebooks"))
    broker_sample.write_broker_copy(root / "kafka-copy")
    for d in ("examples", "notebooks"):  # the pages' commands run from a checkout's root
        (root / d).symlink_to(REPO / d)
    flink = sorted((sf.KAFKA_FIXTURES / FLINK_COPY).glob("*/data"))
    if flink:
        (root / "flink-copy").symlink_to(flink[0])
    return root


@pytest.mark.spark
def test_quickstart(samples: Path) -> None:
    """``make quickstart`` (examples/quickstart.py), whose log dir the pages read: what it prints."""
    out = (samples / "quickstart.out").read_text()
    assert "clicks between minute 10 and 15: 300 (expected 300)" in out
    assert "clicks  0" in out  # the klog describe table
    # the stream tailed the appends, each in its own micro-batch(es): 10 + 20 + 30 new clicks
    assert "appended 10 clicks -> the stream has seen 10" in out
    assert "appended 30 clicks -> the stream has seen 60" in out


def _absent_fixture(page: Path, samples: Path) -> str | None:
    """Why ``page`` cannot run here (it reads a shared fixture that is absent), or None."""
    if "flink-copy" in page.read_text(encoding="utf-8") and not (samples / "flink-copy").exists():
        return f"{page.name} reads the shared fixture {FLINK_COPY}, absent here ({sf.MISSING_REASON})"
    return None


@pytest.fixture(scope="module")
def page_runs(request: pytest.FixtureRequest, samples: Path,
              tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every selected page's blocks, run in one process with one SparkSession (``doc_blocks.py
    --samples``: each page on a fresh copy of the samples, with a session and a namespace of its
    own), instead of a process and a SparkSession per page (10 s each to start). The outcome of
    each page by its name, and the process's exit code, stdout and stderr."""
    selected = {item.callspec.params["page"] for item in request.session.items
                if getattr(item, "originalname", None) == "test_every_block_runs"}
    todo = [p for p in RUN_PAGES if p in selected and _absent_fixture(p, samples) is None]
    base = tmp_path_factory.mktemp("docs-pages")
    work, results = base / "work", base / "results.json"
    work.mkdir()
    try:
        res = subprocess.run([sys.executable, str(REPO / "tests" / "doc_blocks.py"), "--samples", str(samples),
                              "--results", str(results), "--run", *map(str, todo)], cwd=work,
                             capture_output=True, text=True, timeout=600 + 300 * len(todo),
                             env=dict(os.environ, PYSPARK_PYTHON=sys.executable, **short_jvm_env()))
        code, out, err = res.returncode, res.stdout, res.stderr
    except subprocess.TimeoutExpired as e:
        code = None
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = (e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")) + f"\ntimed out after {e.timeout} s"
    outcome = json.loads(results.read_text()) if results.exists() else {}
    return {"pages": outcome, "returncode": code, "stdout": out, "stderr": err}


@pytest.mark.spark
@pytest.mark.parametrize("page", RUN_PAGES, ids=[str(p.relative_to(REPO)) for p in RUN_PAGES])
def test_every_block_runs(page: Path, samples: Path, page_runs: dict[str, Any]) -> None:
    todo = [b for b in doc_blocks.blocks(page) if b.runnable]
    if (why := _absent_fixture(page, samples)) is not None:
        pytest.skip(why)
    name = str(page.relative_to(REPO))
    outcome = page_runs["pages"].get(name)
    assert outcome is not None, (f"{name} did not run: the pages' process exited {page_runs['returncode']}\n"
                                 + page_runs["stderr"][-6000:])
    assert outcome["error"] is None, outcome["error"][-6000:]
    assert outcome["ran"] == len(todo), outcome
    assert f"ran {len(todo)} blocks of {name}\n" in page_runs["stdout"], page_runs["stdout"][-2000:]
