"""The package tree's layers (ARCHITECTURE.md): every import in storage_core goes down, never up or around.

Read from the source with ``ast`` (module-level and function-level imports alike), nothing is
imported: base modules import nothing but the base, ``record`` only the base, ``log`` the base and
``record``, the cleaner and the read path the log and below, the tools anything; no module of
storage_core imports the package's face (``storage_core/__init__.py``), and Spark never imports the
tools. And no two modules import each other, directly or around a loop.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "storage_core"

BASE = {"storage_core.errors", "storage_core.limits", "storage_core.fs", "storage_core.files", "storage_core.faults",
        "storage_core.workers", "storage_core.python_env"}
#: inside the base: errors below everything, then fs (the paths every file is named by), then the rest
BASE_BELOW = {"storage_core.errors": set(), "storage_core.fs": {"storage_core.errors"}}
#: layer -> the layers it may import (a layer may always import its own modules).
ALLOWED = {
    "base": set(),
    "record": {"base"},
    "log": {"base", "record"},
    "cleaner": {"base", "record", "log"},
    "read": {"base", "record", "log"},
    "tables": {"base", "record", "log", "read"},
    "tools": {"base", "record", "log", "cleaner", "read", "tables"},
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _layer(module: str) -> str:
    if module in BASE:
        return "base"
    parts = module.split(".")
    if len(parts) >= 2 and parts[1] in ALLOWED:
        return parts[1]
    raise AssertionError(f"{module} is in no layer; ARCHITECTURE.md and this test list them")


def _imports(path: Path, known: dict[str, Path]) -> set[str]:
    """The storage_core modules (or the package face, ``storage_core``) that ``path`` imports."""
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "storage_core"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module.split(".")[0] != "storage_core":
                continue
            subs = {f"{module}.{a.name}" for a in node.names if f"{module}.{a.name}" in known}
            out |= subs
            if len(subs) < len(node.names):  # names of the module itself
                out.add(module)
    return out


GRAPH = {name: _imports(path, _modules()) for name, path in _modules().items()}


@pytest.mark.parametrize("module", sorted(m for m in GRAPH if m != "storage_core"))
def test_imports_go_down(module: str) -> None:
    layer = _layer(module)
    wrong = []
    for target in sorted(GRAPH[module] - {module}):
        if target == "storage_core":
            wrong.append(f"{target} (the package's face: import the module that defines the name)")
        elif layer == "base" and target not in BASE_BELOW.get(module, {"storage_core.errors", "storage_core.fs"}):
            wrong.append(target)  # the base modules stand side by side above errors and fs
        elif _layer(target) not in ALLOWED[layer] | {layer}:
            wrong.append(target)
    assert not wrong, f"{module} ({layer}) imports {', '.join(wrong)}: not below it"


def test_no_import_cycles() -> None:
    seen: dict[str, int] = {}  # 1 = on the current path, 2 = done

    def visit(module: str, path: list[str]) -> None:
        seen[module] = 1
        for target in sorted(GRAPH.get(module, ())):
            if target == module or target not in GRAPH or (target == "storage_core" and module != "storage_core"):
                continue
            if seen.get(target) == 1:
                cycle = path[path.index(target):] + [target]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if target not in seen:
                visit(target, [*path, target])
        seen[module] = 2

    for module in sorted(GRAPH):
        if module not in seen:
            visit(module, [module])


def test_spark_does_not_import_the_tools() -> None:
    known = _modules()
    for path in sorted((ROOT / "spark_logsource").glob("*.py")):
        tools = sorted(t for t in _imports(path, known) if t.startswith("storage_core.tools"))
        assert not tools, f"{path.name} imports {', '.join(tools)}: the CLI's modules are the top of the tree"
