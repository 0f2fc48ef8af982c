"""No Python file of the project joins lines with a backslash: a statement that goes on to the
next line does so inside parentheses. A backslash join is fragile (a space after it is a syntax
error, a comment cannot follow it) and ruff has no stable rule against it (E502, in preview,
flags only the redundant ones inside brackets), so this test is the check."""
from __future__ import annotations

import io
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOT_OURS = {"build", "site", "results", "node_modules"}  # build products, run output


def sources() -> list[Path]:
    return sorted(p for p in ROOT.rglob("*.py")
                  if not any(part.startswith(".") or part in NOT_OURS or part.endswith(".egg-info")
                             for part in p.relative_to(ROOT).parts[:-1]))


def joins(source: str) -> list[int]:
    """The lines that end in a backslash join. Tokenizing emits a token for every line break
    except a joined one (NEWLINE ends a statement, NL any other line), so a token that starts on
    a later line than the one before it ended, with no break token between, follows a join; a
    backslash inside a string is part of the string's token."""
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    return [a.end[0] for a, b in zip(tokens, tokens[1:])
            if b.start[0] > a.end[0] and a.type not in (tokenize.NEWLINE, tokenize.NL)]


def test_no_file_joins_lines_with_a_backslash():
    found = [f"{path.relative_to(ROOT)}:{row}" for path in sources()
             for row in joins(path.read_text())]
    assert not found, ("backslash line joins (put the statement in parentheses instead): "
                       + ", ".join(found))


def test_a_backslash_join_is_found_and_only_that():
    assert joins("x = 1 + \\\n    2\ny = 3\n") == [1]
    assert joins("if a \\\n        and b:\n    pass\n") == [1]
    assert joins("f(1, \\\n  2)\n") == [1]  # redundant inside brackets, still a join
    assert joins("x = (1 +\n     2)  # a comment\n\n\ny = [\n    3,\n]\n") == []
    assert joins('s = """a \\\nb"""\nt = "c \\\\"\n') == []  # in strings: not joins
    assert len(sources()) > 100 and ROOT / "testbed" / "cli.py" in sources()
