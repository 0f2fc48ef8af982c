"""The architecture page's code map, made from the code's own words: every module's docstring,
every C source's leading comment and every notebook's first Markdown cell, package by package.

`docs/gen_pages.py` writes it into `design/architecture.md` where the page has the
`CODE_MAP` marker, as the site is built; `tests/unit/test_docs.py` fails when a module has no
docstring to give it, so a module added without one cannot leave the map short. Pure: it
parses the sources (ast, json) and imports none of them.
"""
from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The packages the map covers, in the order of the layering (design/architecture.md).
PACKAGES = ("runcontract", "testbed", "hostagent", "analysis", "bench")
CODE_MAP = "<!-- CODE_MAP -->"
# The first sentence: up to a full stop followed by a new sentence (a capital, a code span, a
# bracket) or by the end; "e.g." and "i.e." are not ends.
_SENTENCE = re.compile(r"(.+?(?<!e\.g)(?<!i\.e)[.?!])(?=\s+[A-Z`(\"]|$)")


@dataclass(frozen=True)
class Entry:
    package: str  # the folder, relative to the repository: "testbed/kernel"
    name: str  # the file, relative to the folder: "rtnl.py", "bpf/usid_end.c"
    summary: str  # its first sentence, "" when it has none


def first_sentence(text: str) -> str:
    """The first sentence of the first paragraph, on one line."""
    para = " ".join(text.strip().split("\n\n")[0].split())
    match = _SENTENCE.match(para)
    return match.group(1) if match else para


def _c_comment(source: str) -> str:
    """The leading block comment of a C file, without its SPDX line and its stars."""
    match = re.search(r"/\*(.*?)\*/", source, re.S)
    if not match:
        return ""
    lines = [re.sub(r"^\s*\*?\s?", "", line) for line in match.group(1).splitlines()]
    return "\n".join(lines)


def _notebook(path: Path) -> str:
    cells = json.loads(path.read_text())["cells"]
    return next(("".join(c["source"]) for c in cells if c["cell_type"] == "markdown"), "")


def docstring(path: Path) -> str:
    """What a file says of itself: a module's docstring, a C file's leading comment, a
    notebook's first Markdown cell."""
    text = path.read_text()
    if path.suffix == ".py":
        return ast.get_docstring(ast.parse(text)) or ""
    if path.suffix == ".c":
        return _c_comment(text)
    return _notebook(path)


def _folders() -> list[Path]:
    out = []
    for top in PACKAGES:
        out.append(ROOT / top)
        out += sorted(p for p in (ROOT / top).rglob("*") if p.is_dir()
                      and p.name != "__pycache__" and any(p.glob("*.py")))
    return out


def entries() -> list[Entry]:
    """Every Python module, C source and notebook of the packages, folder by folder."""
    out = []
    for folder in _folders():
        package = str(folder.relative_to(ROOT))
        files = sorted(p for suffix in ("py", "c", "ipynb") for p in folder.glob(f"*.{suffix}"))
        # a folder without Python modules of its own (bpf/) is listed with its parent
        files += sorted(p for sub in folder.iterdir() if sub.is_dir()
                        and not any(sub.glob("*.py")) for p in sub.glob("*.c"))
        for path in files:
            out.append(Entry(package, str(path.relative_to(folder)),
                             first_sentence(docstring(path))))
    return out


def missing() -> list[str]:
    """The Python modules and C sources with nothing to say of themselves."""
    return [f"{e.package}/{e.name}" for e in entries()
            if not e.summary and not e.name.endswith(".ipynb")]


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown() -> str:
    """The code map: a section per package, its `__init__`'s first sentence, then a table of its
    other files with theirs."""
    by_package: dict[str, list[Entry]] = {}
    for entry in entries():
        by_package.setdefault(entry.package, []).append(entry)
    out = ["Generated from the code as the site is built (`docs/code_map.py`): each file's "
           "first sentence, from its docstring (a C source's leading comment, a notebook's "
           "first Markdown cell).\n"]
    for package, files in by_package.items():
        init = next((e.summary for e in files if e.name == "__init__.py"), "")
        out.append(f"\n### `{package}/`\n")
        if init:
            out.append(f"\n{init}\n")
        rows = [e for e in files if e.name != "__init__.py"]
        if rows:
            out.append("\n| file | what it says of itself |\n|---|---|\n")
            out += [f"| `{e.name}` | {_cell(e.summary)} |\n" for e in rows]
    return "".join(out)
