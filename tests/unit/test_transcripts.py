"""Every line of every transcript in the docs is one the code can still print.

Transcripts are written by scripts/transcripts.py between markers in the pages. A line's fixed
text is what is left once its values are taken out: any word with a digit or a slash (numbers,
times, hashes, paths, node names like h0 or p0l1) with the unit after a number, and the names
the scenario language defines (transports, collectives, fault kinds: the JSON Schemas' enums
with a digit, `_` or `-`, and the transports). That text, cut at punctuation and at column
gaps, must appear piece by piece in the string literals of the packages that print (f-strings
included) or in the shipped scenario and drill files (names printed back). A message reworded
or removed in the code leaves its old line in the docs without a source, and this fails,
naming the page and the line: run `sudo make transcripts`.
"""
from __future__ import annotations

import ast
import importlib.util
import json
import re
import sys
import typing
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from testbed.scenario.drill import DrillTransport

ROOT = Path(__file__).resolve().parents[2]
PRINTING = ("testbed", "analysis", "hostagent", "runcontract")
NAMED = ("scenarios", "drills")
# a value: a word with a digit or a slash in it, with the unit a size or time formatter puts
# after a number
VALUE = re.compile(r"\S*[\d/]\S*(?: (?:[KMGT]i?B|B|[mun]?s)(?![\w/]))?")
# where fixed text is cut into pieces: punctuation, the summary's markers, column gaps
CUT = re.compile(r"[,;:()=#*|+\[\]]|\s{2,}")
WORD = re.compile(r"[A-Za-z][\w'.-]*[A-Za-z]|[A-Za-z]")


def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("transcripts",
                                                  ROOT / "scripts/transcripts.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["transcripts"] = module
    spec.loader.exec_module(module)
    return module


transcripts = _load_script()


def _enums(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = {v for v in node.get("enum", []) if isinstance(v, str)}
        return found.union(*(_enums(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(_enums(v) for v in node))
    return set()


@cache
def names() -> re.Pattern[str]:
    """The scenario language's names, matched as whole words (a word here may hold `-`)."""
    words = {w for f in (ROOT / "schemas").glob("*.schema.json")
             for w in _enums(json.loads(f.read_text())) if re.search(r"[\d_-]", w)}
    words |= set(typing.get_args(DrillTransport))
    alternatives = "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))
    return re.compile(rf"(?<![\w-])(?:{alternatives})(?![\w-])")


def _normal(text: str) -> str:
    return " ".join(text.split())


@cache
def corpus() -> str:
    """Every string literal of the printing packages (one per line, whitespace collapsed), and
    the shipped scenario and drill files."""
    parts = []
    for top in PRINTING:
        for path in sorted((ROOT / top).rglob("*.py")):
            tree = ast.parse(path.read_text())
            # docstrings (and other bare strings), fields' descriptions and options' help are
            # not printed by a run: they would explain any prose
            bare = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}
            bare |= {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.keyword)
                     and n.arg in ("description", "help")}
            for node in ast.walk(tree):
                if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                        and id(node) not in bare):
                    parts.append(_normal(node.value))
    for top in NAMED:
        parts += [_normal(p.read_text()) for p in sorted((ROOT / top).rglob("*.yaml"))]
    return "\n".join(parts)


def pieces(line: str) -> list[str]:
    """A transcript line's fixed text, in the pieces that must each come from the code."""
    fixed = names().sub("\0", VALUE.sub("\0", line))
    out = []
    for run in fixed.split("\0"):
        for piece in CUT.split(run):
            piece = _normal(piece)
            if WORD.search(piece):
                out.append(piece)
    return out


def unexplained(line: str) -> list[str]:
    text = corpus()
    return [p for p in pieces(line)
            if not re.search(rf"(?<![\w]){re.escape(p)}(?![\w])", text)]


def blocks() -> list[tuple[str, str, str]]:
    """(page, transcript name, body) for every transcript in README.md and the docs."""
    out = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for m in transcripts.BLOCK.finditer(page.read_text()):
            out.append((str(page.relative_to(ROOT)), m.group("name"), m.group("body")))
    return out


def output_lines(body: str) -> list[str]:
    """The lines inside a transcript's fence (none without one: the stamp test says so)."""
    fence = re.search(r"^``` \{\.text \.transcript\}\n(.*?)^```$", body, re.S | re.M)
    return fence.group(1).splitlines() if fence else []


def test_every_transcript_is_on_its_pages() -> None:
    found = {(page, name) for page, name, _ in blocks()}
    wanted = {(page, t.name) for t in transcripts.TRANSCRIPTS for page in t.pages}
    assert found == wanted, "transcript markers and scripts/transcripts.py disagree"


def test_every_transcript_is_stamped() -> None:
    for page, name, body in blocks():
        assert output_lines(body), f"{page}: transcript {name} is empty (make transcripts)"
        assert re.search(r"Printed by `.+` at commit [0-9a-f]{7,}(-dirty)?, "
                         r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", body), f"{page}: {name} unstamped"


@pytest.mark.parametrize("page,name,line", [
    pytest.param(page, name, line, id=f"{page}:{name}:{i}")
    for page, name, body in blocks() for i, line in enumerate(output_lines(body))])
def test_every_transcript_line_is_printed_by_the_code(page: str, name: str, line: str) -> None:
    missing = unexplained(line)
    assert not missing, (f"{page}, transcript {name}: the code prints no {missing} of "
                         f"{line!r}; run `sudo make transcripts`")


def test_a_line_the_code_does_not_print_is_caught() -> None:
    """The check itself: a real summary line passes, the same line reworded does not."""
    real = ("#     rocev2   back after 1.10 s (0.90 s before it ended), 4.73 MB lost; an "
            "iteration during it took 5.6x the others' median; on 1 of the 1 links it used")
    assert unexplained(real) == []
    assert unexplained(real.replace("back after", "recovered after")) == ["recovered after"]
    assert unexplained("  teardown    0.03 s  12 processes stopped") == ["processes stopped"]
