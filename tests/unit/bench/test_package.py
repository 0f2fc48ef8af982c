"""Every bench imports as a module of the `bench` package (how `python -m bench.NAME` runs it)
and leaves the import path alone: what it imports comes from the checkout it runs in."""
from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench"
MODULES = sorted(p.stem for p in BENCH.glob("*.py") if p.stem != "__init__")


def touches_the_path(source: str) -> bool:
    """Whether the code names `sys.path` (to insert into it, append to it, assign it)."""
    return any(isinstance(node, ast.Attribute) and node.attr == "path"
               and isinstance(node.value, ast.Name) and node.value.id == "sys"
               for node in ast.walk(ast.parse(source)))


@pytest.mark.parametrize("name", MODULES)
def test_the_bench_imports_as_a_module_of_the_package(name: str):
    edits = touches_the_path((BENCH / f"{name}.py").read_text())
    assert not edits, f"bench/{name}.py edits sys.path: run it as `python -m bench.{name}`"
    module = importlib.import_module(f"bench.{name}")
    assert Path(module.__file__).resolve() == BENCH / f"{name}.py"


def test_a_path_edit_is_found():
    assert touches_the_path("import sys\nsys.path.insert(0, 'x')\n")
    assert not touches_the_path("import os\nos.path.join('a', 'b')\n")
