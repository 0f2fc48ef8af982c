"""Every number MRC and NSCC run on lives in hostagent/protocol/constants.py with its unit and
its source, and the modules that use them define none of their own."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PROTOCOL = Path(__file__).resolve().parents[3] / "hostagent" / "protocol"
SOURCES = ("chosen", "RFC ", "UET ", "OCP MRC ")  # a choice of ours, or whose it is


def constants() -> dict[str, str | None]:
    """Each upper-case name assigned in constants.py -> the docstring that follows it."""
    body = ast.parse((PROTOCOL / "constants.py").read_text()).body
    out: dict[str, str | None] = {}
    for node, after in zip(body, [*body[1:], None]):
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id.isupper():
            doc = (after.value.value if isinstance(after, ast.Expr)
                   and isinstance(after.value, ast.Constant) else None)
            out[node.targets[0].id] = doc if isinstance(doc, str) else None
    return out


@pytest.mark.parametrize("name", sorted(constants()))
def test_each_constant_says_its_unit_and_source(name):
    doc = constants()[name]
    assert doc is not None, f"{name} has no docstring"
    unit, _, source = doc.partition(" | ")
    assert unit and source.startswith(SOURCES), f"{name}: {doc!r}"


def is_number(node: ast.expr | None) -> bool:
    """A literal number, or arithmetic on literal numbers only (1 / 16)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int | float) and not isinstance(node.value, bool)
    if isinstance(node, ast.BinOp):
        return is_number(node.left) and is_number(node.right)
    return isinstance(node, ast.UnaryOp) and is_number(node.operand)


@pytest.mark.parametrize("module", ["evs.py", "mrc.py", "recovery.py", "nscc.py"])
def test_the_transport_modules_define_no_numbers_of_their_own(module):
    for node in ast.parse((PROTOCOL / module).read_text()).body:
        if isinstance(node, ast.Assign) and is_number(node.value):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            raise AssertionError(f"{module}: {names} belong in constants.py")
