"""The command reference (docs/gen_pages.py) as a reader of the site sees it: every subcommand
in the overview and with a section of its own, every help text there with its words, and no
Markdown syntax shown as text."""
from __future__ import annotations

import argparse
import html
import importlib.util
import re
import sys
import types
from pathlib import Path

import pytest

from testbed import cli

markdown = pytest.importorskip("markdown")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def gen_pages() -> types.ModuleType:
    """docs/gen_pages.py, which writes its pages when imported, through mkdocs-gen-files:
    here into nothing."""
    stub = types.ModuleType("mkdocs_gen_files")
    stub.open = lambda *_a, **_k: open(__import__("os").devnull, "w")  # type: ignore[attr-defined]
    saved = sys.modules.get("mkdocs_gen_files")
    sys.modules["mkdocs_gen_files"] = stub
    try:
        spec = importlib.util.spec_from_file_location("gen_pages", ROOT / "docs/gen_pages.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        if saved is None:
            sys.modules.pop("mkdocs_gen_files", None)
        else:
            sys.modules["mkdocs_gen_files"] = saved
    return module


def render(text: str) -> str:
    """Markdown as the site renders it (its table and fence extensions)."""
    return markdown.markdown(text, extensions=["tables", "fenced_code"])


@pytest.fixture(scope="module")
def page(gen_pages) -> str:
    return render(gen_pages.commands_page())


def text_of(page_html: str) -> str:
    """What a reader reads: tags gone (inline ones run into their text, the others part
    words), entities decoded, whitespace collapsed."""
    inline = re.sub(r"</?(?:code|a|em|strong)\b[^>]*>", "", page_html)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", inline)).split())


def parsers() -> dict[str, argparse.ArgumentParser]:
    parser = cli._parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {"": parser, **subs.choices}


def test_every_subcommand_is_in_the_overview_and_has_its_section(page: str):
    names = [n for n in parsers() if n]
    assert {"report", "compare", "calibrate"} <= set(names)
    for name in names:
        assert f'href="#mrc-testbed-{name}"' in page, f"{name}: no row in the overview"
        assert re.search(rf"<h2[^>]*>mrc-testbed {name}</h2>", page), f"{name}: no section"


def test_help_text_renders_with_its_words_and_no_markdown_shows(page: str):
    assert "`" not in page, "a backtick shown as text"
    shown = text_of(page)
    for name, parser in parsers().items():
        helps = [parser.description or ""] + [
            (a.help or "").replace("%(default)s", str(a.default)) for a in parser._actions
            if not isinstance(a, argparse._HelpAction)]
        for text in filter(None, helps):
            words = " ".join(text.replace("`", "").split())
            assert words in shown, f"{name or 'mrc-testbed'}: {words!r} not on the page"


def test_text_in_a_table_cell_stays_text(gen_pages):
    cell = gen_pages._md("one|two, *not* _emphasis_ <utc> and `a|b <c>`")
    table = render(f"| x | y |\n|---|---|\n| {cell} | end |\n")
    assert table.count("<td>") == 2
    assert text_of(table) == "x y one|two, *not* _emphasis_ <utc> and a|b <c> end"
    assert "<code>a|b &lt;c&gt;</code>" in table
