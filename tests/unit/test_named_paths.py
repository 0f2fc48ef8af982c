"""Every repository path that the docs, README, CONTRIBUTING and the code's docstrings and
comments name exists, so a reader who follows one finds the file (a move that forgets a
reference fails here)."""
from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOP = ("testbed", "hostagent", "analysis", "runcontract", "bench", "tests", "scripts",
       "scenarios", "drills", "docs", "schemas")
# a path starts at a top-level folder (not inside a longer word or path) and ends at a word
PATH = re.compile(rf"(?<![\w./-])(?:{'|'.join(TOP)})/[\w.*/-]*[\w*]")
BUILT = {".o": ".c"}  # build products are named by their source's existence
PLACEHOLDER = re.compile(r"\b[A-Z]{3,}\b")  # scenarios/NAME.yaml: any file of that form
# Files other work is rewriting, whose stale paths are fixed there; strict, so the mark must go
# once they are.
STALE: set[str] = set()


def prose(path: Path) -> str:
    """A Markdown file whole; of a Python file, its docstrings and comments only (code may
    name files it creates)."""
    text = path.read_text()
    if path.suffix != ".py":
        return text
    parts = [tok.string for tok in tokenize.generate_tokens(io.StringIO(text).readline)
             if tok.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            parts.append(ast.get_docstring(node) or "")
    return "\n".join(parts)


def sources() -> list[Path]:
    md = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]
    py = sorted(p for top in TOP for p in (ROOT / top).rglob("*.py"))
    return [*md, *py]


def exists(name: str) -> bool:
    name = PLACEHOLDER.sub("*", name.rstrip("."))
    if "*" in name:
        return any(ROOT.glob(name))
    target = ROOT / name
    if target.suffix in BUILT:
        target = target.with_suffix(BUILT[target.suffix])
    return target.exists()


def _case(path: Path):
    name = str(path.relative_to(ROOT))
    marks = [pytest.mark.xfail(strict=True, reason="names a moved path")] if name in STALE else []
    return pytest.param(path, id=name, marks=marks)


@pytest.mark.parametrize("source", [_case(p) for p in sources()])
def test_named_paths_exist(source: Path):
    missing = sorted({m for m in PATH.findall(prose(source)) if not exists(m)})
    assert not missing, f"{source.relative_to(ROOT)} names paths that do not exist: {missing}"


def test_the_pattern_finds_paths():
    found = PATH.findall("see `testbed/cli.py`, tests/unit/test_*.py and (drills/smoke.yaml).")
    assert found == ["testbed/cli.py", "tests/unit/test_*.py", "drills/smoke.yaml"]
    assert PATH.findall("results/testbed/x.py, mytests/a.py") == []
    assert exists("scenarios/NAME.yaml") and not exists("scenarios/NAME.toml")
