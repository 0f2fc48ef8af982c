"""Hostile and odd scenario files: every one gets one `ScenarioError` (exit 2), fast and small.

Each case was found by trying it: before the limits, these ran out of memory, printed
hundreds of megabytes, hung on a pipe, or ended in a traceback (exit 1).
"""
from __future__ import annotations

import os
import resource
import threading
import time

import pytest

from testbed import scenario
from testbed.errors import ScenarioError
from testbed.scenario import limits


def error_of(text: str) -> str:
    t0 = time.monotonic()
    with pytest.raises(ScenarioError) as info:
        scenario.parse(text, "x.yaml", default_name="x")
    assert time.monotonic() - t0 < 2.0, "a bad file must fail fast"
    assert info.value.exit_code == 2
    msg = str(info.value)
    assert len(msg) < 5_000, f"the error echoes the input ({len(msg)} chars)"
    return msg


def test_alias_bomb_fails_on_expanded_size_and_never_echoes_it():
    text = "\n".join([
        "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]",
        "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]",
        "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]",
        "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]",
        "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]",
        "f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]",
        "g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]",
        "h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]",
        "name: x",
        "description: *h",
    ])
    assert len(text) < 400
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    msg = error_of(text)
    assert "nodes" in msg and str(limits.MAX_YAML_NODES) in msg.replace(",", "")
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 100_000


def test_an_alias_bomb_inside_a_known_field_is_caught_too():
    text = ("workload:\n  ranks: &r [h0, h1, h2, h3, h0, h1, h2, h3, h0, h1]\n"
            "x1: &x1 [*r, *r, *r, *r, *r, *r, *r, *r, *r, *r]\n"
            "x2: &x2 [*x1, *x1, *x1, *x1, *x1, *x1, *x1, *x1, *x1, *x1]\n"
            "x3: &x3 [*x2, *x2, *x2, *x2, *x2, *x2, *x2, *x2, *x2, *x2]\n"
            "x4: &x4 [*x3, *x3, *x3, *x3, *x3, *x3, *x3, *x3, *x3, *x3]\n"
            "x5: [*x4, *x4, *x4, *x4, *x4, *x4, *x4, *x4, *x4, *x4]\n")
    assert "nodes" in error_of(text)


def test_a_long_invalid_value_is_shortened_in_the_message():
    msg = error_of("name: x\nseed: '" + "9" * 100_000 + "'\n")
    assert "seed" in msg and "..." in msg


def test_deep_nesting_is_refused_by_depth():
    msg = error_of("name: x\ndescription: " + "[" * 3000 + "]" * 3000 + "\n")
    assert "deep" in msg


def test_a_5000_digit_integer_is_refused():
    msg = error_of("name: x\nseed: " + "9" * 5000 + "\n")
    assert "line 2" in msg and "a number of 5,000 characters" in msg


def test_a_400_digit_size_is_refused():
    msg = error_of("name: x\nworkload: {size: '" + "9" * 400 + "KB'}\n")
    assert "workload.size" in msg


def test_a_list_as_a_mapping_key_is_refused():
    msg = error_of("name: x\n? [a, b]\n: 1\n")
    assert "key" in msg


def test_yaml_merge_keys_get_a_clear_message():
    msg = error_of("base: &b {planes: 2}\nname: x\nfabric:\n  <<: *b\n")
    assert "merge" in msg and "<<" in msg


def test_tags_beyond_plain_yaml_are_refused():
    msg = error_of("name: !!python/object:os.system x\n")
    assert "not valid YAML" in msg


def test_flap_cycles_are_bounded():
    msg = error_of("name: x\nfaults:\n- {at: 0, kind: flap, target: {host: h0, plane: 0},\n"
                   "   period: 0.01, until: 86400}\n")
    assert "cycles" in msg and f"{limits.MAX_FLAP_CYCLES:,}" in msg


def test_background_flow_count_is_bounded():
    text = ("name: x\nfabric: {leaves_per_plane: 64, hosts_per_leaf: 8, spines_per_plane: 1, "
            "planes: 1}\nbackground:\n" +
            "".join("- {pattern: permutation, duration: 1}\n" for _ in range(400)))
    msg = error_of(text)
    assert "background" in msg


# ---- files ---------------------------------------------------------------------------------

def load_error(path) -> str:
    t0 = time.monotonic()
    with pytest.raises(ScenarioError) as info:
        scenario.load(path)
    assert time.monotonic() - t0 < 2.0
    return str(info.value)


def test_a_file_over_the_size_limit_is_refused_before_parsing(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text("name: x\ndescription: '" + "a" * (limits.MAX_SCENARIO_BYTES + 10) + "'\n")
    msg = load_error(path)
    assert "larger than" in msg


def test_dev_zero_is_refused():
    assert "not a regular file" in load_error("/dev/zero")


def test_a_named_pipe_does_not_hang(tmp_path):
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    result: list[str] = []
    t = threading.Thread(target=lambda: result.append(load_error(fifo)), daemon=True)
    t.start()
    t.join(3.0)
    assert result and "not a regular file" in result[0]


def test_a_symlink_loop_is_an_error_not_a_traceback(tmp_path):
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.symlink_to(b)
    b.symlink_to(a)
    assert "cannot read" in load_error(a)


def test_a_directory_and_binary_are_refused(tmp_path):
    assert "cannot read" in load_error(tmp_path) or "not a regular file" in load_error(tmp_path)
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\xff\xfe\x00name: x")
    assert "UTF-8" in load_error(binary)


# ---- values that validated, then failed or meant something else ----------------------------

LINK = "{plane: 0, leaf: 0, spine: 0}"


@pytest.mark.parametrize("text, expected", [
    ("qp: {mss: 0}", "qp.mss: 0 is not allowed: 0 B is outside 64 B..8.79 KiB"),
    ("qp: {mss: -5}", "qp.mss: -5 is not allowed"),
    ("qp: {init_cwnd: 0}", "qp.init_cwnd: 0 is not allowed"),
    ("qp: {max_cwnd: 0}", "qp.max_cwnd: 0 is not allowed"),
    ("qp: {init_cwnd: 100, mss: 1000}", "less than one packet"),
    (f"faults: [{{at: 1, kind: degrade, target: {LINK}, rate: 0}}]", "faults.0.rate"),
    (f"faults: [{{at: 1, kind: degrade, target: {LINK}, rate: 1}}]", "faults.0.rate"),
    (f"faults: [{{at: 1, kind: degrade, target: {LINK}, rate: -1000}}]", "faults.0.rate"),
    (f"faults: [{{at: 1, kind: degrade, target: {LINK}, rate: 1Gbit}}]",
     "is not below the link's rate"),
    ("background: [{pattern: elephant, src: h0, dst: h1, duration: 1, kind: udp, rate: 0}]",
     "background.0.rate"),
    (f"faults: [{{at: 1, kind: loss, target: {LINK}, probability: 0.00001}}]",
     "faults.0.probability"),
    ("fabric: {host_link: {rate: 100kbit, buffer: 256MiB}}", "qp.timeout: its default"),
    ("faults: [" + ", ".join(
        f"{{at: {i}, kind: flap, target: {{host: h0, plane: 0}}, period: 1, count: 9000}}"
        for i in range(3)) + "]", "more than 20,000"),
])
def test_values_out_of_their_range_are_refused(text, expected):
    assert expected in error_of("name: x\n" + text + "\n")


def _numbers_without_range(schema: dict) -> list[str]:
    """Every number, list and string of the JSON Schema that states no bound."""
    defs = schema.get("$defs", {})
    missing: list[str] = []

    def walk(node: dict, path: str) -> None:
        if "$ref" in node:
            walk(defs[node["$ref"].split("/")[-1]], path)
            return
        for key in ("anyOf", "oneOf", "allOf"):
            for sub in node.get(key, []):
                walk(sub, path)
        kind = node.get("type")
        if kind in ("integer", "number"):
            low = "minimum" in node or "exclusiveMinimum" in node
            high = "maximum" in node or "exclusiveMaximum" in node
            if not (low and high):
                missing.append(path)
        elif kind == "array":
            if "maxItems" not in node and "prefixItems" not in node:
                missing.append(path)
            if "items" in node:
                walk(node["items"], path + "[]")
        elif kind == "string":
            if not ({"maxLength", "pattern", "enum", "const"} & set(node)):
                missing.append(path)
        elif kind == "object":
            for name, sub in node.get("properties", {}).items():
                walk(sub, f"{path}.{name}" if path else name)
            extra = node.get("additionalProperties")
            if isinstance(extra, dict):
                walk(extra, path + ".*")

    walk(schema, "")
    return missing


def test_every_number_in_the_json_schema_states_its_range():
    assert _numbers_without_range(scenario.json_schema()) == []
