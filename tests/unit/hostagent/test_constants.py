"""Every number MRC and NSCC run on lives in hostagent/protocol/constants.py with its unit and
its source, and the modules that use them define none of their own."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from hostagent import compiled

PROTOCOL = Path(__file__).resolve().parents[3] / "hostagent" / "protocol"
SOURCES = ("chosen", "RFC ", "UET ", "OCP MRC ")  # a choice of ours, or whose it is


def assigned(node: ast.stmt) -> tuple[list[str], ast.expr | None]:
    """The names a module-level statement assigns and the value, plain or annotated."""
    if isinstance(node, ast.Assign):
        return [t.id for t in node.targets if isinstance(t, ast.Name)], node.value
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [node.target.id], node.value
    return [], None


def constants() -> dict[str, str | None]:
    """Each upper-case name assigned in constants.py -> the docstring that follows it."""
    body = ast.parse((PROTOCOL / "constants.py").read_text()).body
    out: dict[str, str | None] = {}
    for node, after in zip(body, [*body[1:], None]):
        names, _ = assigned(node)
        if names and names[0].isupper():
            doc = (after.value.value if isinstance(after, ast.Expr)
                   and isinstance(after.value, ast.Constant) else None)
            out[names[0]] = doc if isinstance(doc, str) else None
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
        names, value = assigned(node)
        if names and is_number(value):
            raise AssertionError(f"{module}: {names} belong in constants.py")


@pytest.mark.parametrize("module", compiled.MODULES)
def test_the_compiled_modules_constants_are_final(module):
    # mypyc inlines a Final number and keeps any other Final value in a C static: a plain
    # module global is a dictionary lookup at every use, on the per-packet path as elsewhere
    for node in ast.parse(compiled.file_of(module, ".py").read_text()).body:
        if isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name) and t.id.isupper()]
            assert not names, f"{module}: {names} are not Final"
        elif (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and node.target.id.isupper()):
            final = node.annotation
            head = final.value if isinstance(final, ast.Subscript) else final
            assert isinstance(head, ast.Name) and head.id == "Final", (
                f"{module}: {node.target.id} is not Final")
