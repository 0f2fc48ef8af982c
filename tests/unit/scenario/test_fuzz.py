"""`validate` under fuzzing: mutated shipped scenarios, random YAML and random bytes.
Whatever the input, the answer is a valid scenario or one `ScenarioError` (exit 2), within a
time bound, never a traceback (exit 1) and never a large allocation."""
from __future__ import annotations

import resource
import time
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from testbed import cli, scenario
from testbed.errors import TestbedError as Problem
from testbed.fabric import timeline

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = sorted((ROOT / "scenarios").glob("*.yaml"))
BASES = [yaml.safe_load(p.read_text()) for p in SHIPPED]
TIME_BOUND = 2.0  # s per input; a valid ref-64 takes about 50 ms
MEMORY_BOUND_KIB = 50_000  # growth of this process's peak RSS during one input

odd_values = st.one_of(
    st.none(), st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 1, 2**31, 2**32, 2**63, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["", "0", "-1bit", "1e400KB", "nan", "100Mbit", "1KiB", "a" * 300,
                     "h0", "p0s0", "<script>", "../../etc/passwd", "x; rm -rf /"]),
    st.text(max_size=20),
    st.lists(st.integers(-5, 5), max_size=5),
    st.dictionaries(st.sampled_from(["plane", "leaf", "spine", "host", "x"]),
                    st.integers(-2, 70), max_size=4),
)


def _paths(node: object, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, prefix + (i,))
    return out


def _set(doc: object, path: tuple, value: object) -> object:
    if not path:
        return value
    parent = doc
    for part in path[:-1]:
        parent = parent[part]  # type: ignore[index]
    parent[path[-1]] = value  # type: ignore[index]
    return doc


@st.composite
def mutated(draw) -> str:
    import copy
    doc = copy.deepcopy(draw(st.sampled_from(BASES)))
    for _ in range(draw(st.integers(1, 4))):
        paths = _paths(doc)
        path = draw(st.sampled_from(paths))
        doc = _set(doc, path, draw(odd_values))
    return yaml.safe_dump(doc)


def _check(text: str) -> None:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.monotonic()
    try:
        sc = scenario.parse(text, "fuzz.yaml", default_name="fuzz")
        timeline.check(sc, "fuzz.yaml")
    except Problem as exc:
        assert exc.exit_code == 2, exc
        assert len(str(exc)) < 20_000
    took = time.monotonic() - t0
    assert took < TIME_BOUND, f"{took:.2f} s for:\n{text[:500]}"
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak
    assert grown < MEMORY_BOUND_KIB, f"{grown} KiB for:\n{text[:500]}"


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_shipped_scenarios(text: str):
    _check(text)


yaml_text = st.recursive(
    st.one_of(st.text(max_size=10), st.integers(), st.floats(), st.booleans(), st.none()),
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=20).map(lambda doc: yaml.safe_dump(doc))


@settings(max_examples=200)
@given(st.one_of(yaml_text, st.text(max_size=300),
                 st.text(alphabet="&*[]{}:-?|>!%@`'\"#,\n aA0", max_size=200)))
def test_random_yaml_and_text(text: str):
    _check(text)


@st.composite
def hostile_yaml(draw) -> str:
    """YAML's sharp edges, at random sizes: alias fan-out, nesting, long numbers, odd keys."""
    levels, fanout = draw(st.integers(1, 9)), draw(st.integers(1, 12))
    bomb = [f"a0: &a0 [{', '.join(['lol'] * fanout)}]"] + [
        f"a{k}: &a{k} [{', '.join([f'*a{k - 1}'] * fanout)}]" for k in range(1, levels)]
    depth = draw(st.integers(1, 4000))
    digits = draw(st.integers(1, 6000))
    parts = draw(st.lists(st.sampled_from([
        "\n".join(bomb) + f"\ndescription: *a{levels - 1}",
        "description: " + "[" * depth + "]" * depth,
        "seed: " + "9" * digits,
        "workload: {size: '" + "9" * digits + "KB'}",
        "fabric: {host_link: {rate: " + "1" * digits + "}}",
        "? [a, b]\n: 1", "? {a: 1}\n: 1",
        "base: &b {planes: 2}\nfabric:\n  <<: *b",
        "faults: [{at: 0, kind: flap, target: {host: h0, plane: 0}, period: 0.001, "
        "until: 86400}]",
        "x: &x [*x]", "name: !!python/object/apply:os.system [true]",
    ]), min_size=1, max_size=3, unique=True))
    return "name: x\n" + "\n".join(parts) + "\n"


@settings(max_examples=150)
@given(hostile_yaml())
def test_hostile_yaml(text: str):
    _check(text)


@settings(max_examples=100)
@given(st.binary(max_size=300))
def test_random_bytes_through_the_cli(tmp_path_factory, data: bytes):
    file = tmp_path_factory.mktemp("fuzz") / "x.yaml"
    file.write_bytes(data)
    assert cli.main(["validate", str(file)]) in (0, 2)
