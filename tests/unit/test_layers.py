"""The package layout is the design: each layer imports only the layers below it, pure layers
import nothing that touches the kernel or spawns, and no two modules import each other."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("testbed", "hostagent", "analysis", "runcontract")
# testbed's sub-packages from the bottom up: each may import those before it
LAYERS = ("scenario", "fabric", "kernel", "lifecycle", "emulation", "cluster", "run")
# what each top-level package may import of the others
ALLOWED = {"runcontract": set(), "hostagent": set(), "analysis": {"runcontract", "hostagent"},
           "testbed": {"runcontract", "hostagent"}}
WIRING = {"testbed.cli": {"analysis"}}  # the command line wires the testbed to the reports


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """Project modules `name` imports anywhere in its file (functions included), resolved
    to the longest known module name."""
    out = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            targets = [f"{base}.{a.name}" for a in node.names] + [base]
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name:
                out.add(t)
    return out


GRAPH = {name: imports(name, path, set(modules())) for name, path in modules().items()}


def layer(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if parts[0] == "testbed" and len(parts) > 2 else None


@pytest.mark.parametrize("name", sorted(GRAPH))
def test_packages_import_only_what_they_may(name: str):
    top = name.split(".")[0]
    may = ALLOWED[top] | {top} | WIRING.get(name, set())
    bad = {m for m in GRAPH[name] if m.split(".")[0] not in may}
    assert not bad, f"{name} imports {sorted(bad)}"


@pytest.mark.parametrize("name", sorted(n for n in GRAPH if layer(n)))
def test_testbed_layers_import_only_lower_layers(name: str):
    mine = LAYERS.index(layer(name))
    above = {m for m in GRAPH[name] if m.startswith("testbed.") and
             (m == "testbed.cli" or (layer(m) and LAYERS.index(layer(m)) > mine))}
    assert not above, f"{name} (layer {layer(name)}) imports {sorted(above)} from above it"


def test_no_import_cycles():
    """Depth-first search for a back edge; the message shows the cycle."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> None:
        state[n] = 1
        stack.append(n)
        for m in sorted(GRAPH[n]):
            if m.startswith(n + "."):  # a package importing its own modules to re-export them
                continue
            if state.get(m) == 1:
                raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(m):] + [m]))
            if m not in state:
                visit(m)
        stack.pop()
        state[n] = 2

    for n in sorted(GRAPH):
        if n not in state:
            visit(n)


# hostagent's sub-packages from the bottom up: each may import those before it. The protocol is
# sans-IO: fed datagrams and the time, it opens no socket and runs no loop of its own.
AGENT_LAYERS = ("protocol", "workloads", "runtime")
IO_MODULES = {"socket", "asyncio", "selectors", "select", "threading", "subprocess", "time",
              "os", "signal", "multiprocessing"}


def stdlib_imports(path: Path) -> set[str]:
    """The top-level names of every absolute import in a file (functions included)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.add(node.module.split(".")[0])
    return out


def agent_layer(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if parts[0] == "hostagent" and len(parts) > 2 else None


@pytest.mark.parametrize("name", sorted(n for n in GRAPH if agent_layer(n)))
def test_hostagent_layers_import_only_lower_layers(name: str):
    mine = AGENT_LAYERS.index(agent_layer(name))
    above = {m for m in GRAPH[name] if agent_layer(m)
             and AGENT_LAYERS.index(agent_layer(m)) > mine}
    assert not above, f"{name} (layer {agent_layer(name)}) imports {sorted(above)} from above it"


@pytest.mark.parametrize("name", sorted(n for n in GRAPH if agent_layer(n) == "protocol"))
def test_the_protocol_does_no_io(name: str):
    io = stdlib_imports(modules()[name]) & IO_MODULES
    assert not io, f"{name} is sans-IO but imports {sorted(io)}"


def test_the_graph_is_read():
    """The checks above mean something only if imports are found at all."""
    assert "testbed.fabric.plan" in GRAPH["testbed.fabric.paths"]
    assert "testbed.scenario.schema" in GRAPH["testbed.scenario"]
    assert "hostagent.protocol.qp" in GRAPH["hostagent.protocol.mrc"]
    assert "asyncio" in stdlib_imports(modules()["hostagent.runtime.driver"])
