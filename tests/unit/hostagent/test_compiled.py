"""The protocol compiled by mypyc (`make fast`) behaves exactly as its sources.

The same seeded scenarios on the simulated network (loss, reordering, duplicates, trimming,
ECN marks, a dead path, a plane gone; MRC and RoCEv2) run here on the modules this process
imported, and in a subprocess on the sources (MRC_TESTBED_PURE=1). Each QP's datagrams, in the
order and at the time it sent them, are hashed; with its counters, its congestion control's
state, its EV transitions, its completions and the bytes it received, they must be equal. The
comparison needs a build that is in use here, and skips without one.
`python -m tests.unit.hostagent.test_compiled` prints the fingerprints as JSON.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from hostagent import compiled
from hostagent.protocol.evs import EVPolicy, EVSet
from hostagent.protocol.mrc import MrcQP
from hostagent.protocol.qp import ImmArrived, QPConfig, QPFailed, QueuePair, WriteDone
from hostagent.protocol.rocev2 import RoceQP

from .simnet import Link, PathModel, SimNet

ROOT = Path(__file__).resolve().parents[3]
TABLE = [(i, i // 4) for i in range(8)]  # 2 planes x 4 spines
CFG = QPConfig(mss=512, init_cwnd=16 * 1024, max_cwnd=64 * 1024, timeout=0.004,
               linear_cnt=3, exp_cnt=3, line_rate=1e8, base_rtt=200e-6)
SIZE = 96 * 1024  # bytes each way, in writes of a quarter, every other one with imm
FAULT_AT = 0.0005  # s: when a scenario's later paths take over (a write takes 1-5 ms)


@dataclasses.dataclass
class Scenario:
    transport: str
    paths: Callable[[str, int, Link], PathModel]  # (side, EV, side's port) -> its path
    later: Callable[[str, int], PathModel | None] = lambda side, ev: None  # from FAULT_AT
    policy: EVPolicy = dataclasses.field(default_factory=lambda: EVPolicy(probe_interval=0.002))
    until: float = 5.0


SCENARIOS = {
    "mrc, loss, reordering and duplicates": Scenario(
        "mrc", lambda side, ev, port: PathModel(latency=100e-6, jitter=300e-6, loss=0.02,
                                                dup=0.01)),
    "mrc, trimming and ECN marks": Scenario(
        "mrc", lambda side, ev, port: PathModel(jitter=100e-6, trim=0.05, ecn=0.05)),
    "mrc, a congested port": Scenario(
        "mrc", lambda side, ev, port: PathModel(link=port, jitter=50e-6)),
    "mrc, a dead path each way": Scenario(
        "mrc", lambda side, ev, port: PathModel(dead=(side, ev) in {("a", 3), ("b", 5)},
                                                loss=0.005)),
    "mrc, a plane gone under spares": Scenario(
        "mrc", lambda side, ev, port: PathModel(jitter=50e-6),
        later=lambda side, ev: PathModel(dead=True) if ev >= 4 else None,
        policy=EVPolicy(active_per_plane=3, probe_interval=0.002)),
    "rocev2, loss and duplicates": Scenario(
        "rocev2", lambda side, ev, port: PathModel(latency=100e-6, loss=0.03, dup=0.02)),
    "rocev2, ECN marks and trimming": Scenario(
        "rocev2", lambda side, ev, port: PathModel(jitter=50e-6, ecn=0.1, trim=0.03)),
    "rocev2, the path dies": Scenario(
        "rocev2", lambda side, ev, port: PathModel(),
        later=lambda side, ev: PathModel(dead=True), until=2.0),
}


def pair(s: Scenario) -> tuple[QueuePair, QueuePair, bytearray, bytearray]:
    bufs = bytearray(SIZE), bytearray(SIZE)
    if s.transport == "mrc":
        return (MrcQP(1, 2, memoryview(bufs[0]), CFG, EVSet.build(TABLE, s.policy,
                                                                 random.Random(1)), 1),
                MrcQP(2, 1, memoryview(bufs[1]), CFG, EVSet.build(TABLE, s.policy,
                                                                 random.Random(2)), 2),
                *bufs)
    return (RoceQP(1, 2, memoryview(bufs[0]), CFG, 1),
            RoceQP(2, 1, memoryview(bufs[1]), CFG, 2), *bufs)


def completions(qp: QueuePair) -> list[object]:
    out: list[object] = []
    for e in qp.events:
        if isinstance(e, WriteDone):
            out.append(["done", e.msg_id, repr(e.stats.end), e.stats.retransmits,
                        e.stats.trims, e.stats.evs_used])
        elif isinstance(e, ImmArrived):
            out.append(["imm", e.imm])
        elif isinstance(e, QPFailed):
            out.append(["failed", e.reason])
    return out


def fingerprint(name: str) -> dict[str, object]:
    """What scenario `name` did, seeded: everything two runs of the same code agree on."""
    s = SCENARIOS[name]
    a, b, buf_a, buf_b = pair(s)
    data = random.Random(name).randbytes(2 * SIZE)
    quarter = SIZE // 4
    for qp, src in ((a, data[:SIZE]), (b, data[SIZE:])):
        for k in range(4):
            qp.post_write(k, memoryview(src)[k * quarter:(k + 1) * quarter], k * quarter,
                          100 + k if k % 2 else None, 0.0, peer=0)
    net = SimNet(a, b, seed=len(name))
    for side in ("a", "b"):
        port = Link(rate=2e6, ecn_bytes=8e3, trim_bytes=24e3)  # bytes/s: 16 Mbit/s
        for ev in range(len(TABLE)):
            net.paths[(side, ev)] = s.paths(side, ev, port)
    sent = {"a": hashlib.sha256(), "b": hashlib.sha256()}
    send = net._send

    def tapped(side: str, ev: int, datagram: bytes) -> None:
        sent[side].update(f"{net.now!r} {ev} {len(datagram)}|".encode() + datagram)
        send(side, ev, datagram)
    net._send = tapped

    def finished() -> bool:
        return bool(a.failed or b.failed) or all(
            sum(isinstance(e, WriteDone) for e in qp.events) == 4 for qp in (a, b))
    net.run(lambda: finished() or net.now >= FAULT_AT, until=s.until)
    for side in ("a", "b"):
        for ev in range(len(TABLE)):
            model = s.later(side, ev)
            if model is not None:
                net.paths[(side, ev)] = model
    end = net.run(finished, until=s.until)
    out: dict[str, object] = {"end": repr(end), "delivered": net.delivered,
                              "dropped": net.dropped}
    for side, qp, buf in (("a", a, buf_a), ("b", b, buf_b)):
        cc = qp.cc
        out[side] = {
            "sent": sent[side].hexdigest(),
            "counters": dataclasses.asdict(qp.counters),
            "events": completions(qp),
            "received": hashlib.sha256(buf).hexdigest(),
            "cc": [repr(cc.cwnd), repr(cc.srtt), repr(cc.rttvar), cc.decreases],
            "transitions": [[repr(t.time), t.ev, t.old.value, t.new.value, t.reason]
                            for t in qp.evset.transitions] if isinstance(qp, MrcQP) else [],
        }
    return out


def fingerprints() -> dict[str, dict[str, object]]:
    return {name: fingerprint(name) for name in SCENARIOS}


def from_sources() -> dict[str, dict[str, object]]:
    """The fingerprints of the interpreted modules, from a process that imports them."""
    env = {**os.environ, compiled.PURE: "1"}
    run = subprocess.run([sys.executable, "-m", "tests.unit.hostagent.test_compiled"], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=300, check=True)
    result: dict[str, dict[str, object]] = json.loads(run.stdout)
    return result


def test_the_scenarios_exercise_what_they_are_named_for():
    """Whichever modules run: the loss, trims, marks and failures happened, so that the
    comparison covers the code that handles them."""
    f = fingerprints()
    counters = {name: (f[name]["a"]["counters"], f[name]["b"]["counters"]) for name in f}
    assert all(a["retransmits"] > 0 for a, _ in counters.values() if a["data_sent"])
    assert counters["mrc, trimming and ECN marks"][1]["nacks_sent"] > 0
    assert counters["mrc, loss, reordering and duplicates"][1]["duplicates"] > 0
    assert counters["mrc, loss, reordering and duplicates"][1]["out_of_order"] > 0
    assert counters["mrc, a congested port"][0]["spurious_timeouts"] > 0
    assert f["mrc, a congested port"]["a"]["cc"][3] > 0, "the window was cut"
    assert counters["rocev2, ECN marks and trimming"][1]["cnps_sent"] > 0
    assert counters["rocev2, loss and duplicates"][1]["dropped_out_of_order"] > 0
    assert f["mrc, a dead path each way"]["a"]["transitions"], "the dead path was condemned"
    assert len(f["mrc, a plane gone under spares"]["a"]["transitions"]) >= 4
    dies = f["rocev2, the path dies"]
    assert any(e[0] == "failed" for side in ("a", "b") for e in dies[side]["events"])
    for name, result in f.items():
        if name != "rocev2, the path dies":
            for side in ("a", "b"):
                assert sum(e[0] == "done" for e in result[side]["events"]) == 4, (name, side)


@pytest.mark.skipif(not compiled.ACTIVE, reason="no compiled protocol in use: `make fast` "
                    "builds it (MRC_TESTBED_PURE=1, or a source newer than the build, turns "
                    "it off)")
def test_the_compiled_protocol_sends_and_counts_exactly_what_its_sources_do():
    here, there = fingerprints(), from_sources()
    assert here.keys() == there.keys()
    for name in here:
        assert here[name] == there[name], name


def test_the_switch_imports_the_sources():
    """MRC_TESTBED_PURE=1: every compiled module from its .py file, build or no build."""
    code = ("import hostagent, importlib; print(hostagent.compiled.ACTIVE, *(importlib"
            ".import_module(f'hostagent.{m}').__file__ for m in hostagent.compiled.MODULES))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True, env={**os.environ, compiled.PURE: "1"})
    active, *files = out.stdout.split()
    assert active == "False"
    assert [Path(f).relative_to(ROOT).as_posix() for f in files] == [
        f"hostagent/{m.replace('.', '/')}.py" for m in compiled.MODULES]
    assert "runtime.driver" in compiled.MODULES, "the IO driver is compiled with the protocol"


@pytest.mark.skipif(not compiled.ACTIVE, reason="no compiled protocol in use (`make fast`)")
def test_a_build_in_use_is_every_module_compiled():
    import importlib
    for m in compiled.MODULES:
        path = Path(importlib.import_module(f"hostagent.{m}").__file__ or "")
        # mypyc's modules name their file from their package's directory, doubling it
        assert path.as_posix().endswith(f"hostagent/{m.replace('.', '/')}{compiled.SUFFIX}")


@pytest.mark.skipif(not compiled.ACTIVE, reason="no compiled protocol in use (`make fast`)")
@pytest.mark.parametrize("name", ["protocol.qp.Packet", "protocol.qp.Message",
                                  "protocol.qp.WriteDone", "protocol.qp.ImmArrived",
                                  "protocol.qp.QPFailed", "protocol.endpoint.MessageStats",
                                  "runtime.driver._Pending"])
def test_what_is_made_per_packet_write_or_event_has_a_compiled_constructor(name):
    """A dataclass's __init__ is generated Python, interpreted even in a compiled module: one
    made per packet was an eighth of a data packet's instructions."""
    import importlib
    import types

    module, cls = name.rsplit(".", 1)
    made = getattr(importlib.import_module(f"hostagent.{module}"), cls)
    assert not isinstance(made.__init__, types.FunctionType), name


def _file(root: Path, module: str, suffix: str) -> Path:
    """Where `module`'s source or build lies under `root`, its directory made."""
    path = compiled.file_of(module, suffix, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def test_a_build_is_used_only_while_newer_than_every_source(tmp_path):
    for m in compiled.MODULES:
        _file(tmp_path, m, ".py").write_text("")
    assert compiled.outdated(tmp_path) == list(compiled.MODULES), "nothing built"
    assert not compiled.built(tmp_path)
    for m in (*compiled.MODULES, compiled.LIBRARY):
        _file(tmp_path, m, compiled.SUFFIX).write_bytes(b"")
    assert compiled.built(tmp_path) and compiled.outdated(tmp_path) == []
    for edited in ("protocol.mrc", "runtime.driver"):
        source = _file(tmp_path, edited, ".py")
        then = source.stat().st_mtime
        os.utime(source, (then + 10, then + 10))
        assert compiled.outdated(tmp_path) == [edited], "a source edited since the build"
        os.utime(source, (then - 10, then - 10))
    _file(tmp_path, compiled.LIBRARY, compiled.SUFFIX).unlink()
    assert compiled.outdated(tmp_path) == list(compiled.MODULES), "the shared library is gone"


def _build(root: Path, library: bytes = b"the library") -> None:
    for m in compiled.MODULES:
        _file(root, m, ".py").write_text("")
        os.utime(_file(root, m, ".py"), (1.0, 1.0))  # every source older than its build
        _file(root, m, compiled.SUFFIX).write_bytes(b"")
    _file(root, compiled.LIBRARY, compiled.SUFFIX).write_bytes(library)


def test_a_process_names_the_build_it_runs_and_why(tmp_path):
    """What every agent reports and every run records: compiled (with the build's identity,
    the shared library's SHA-256) or the sources, with the reason."""
    assert compiled.choose(tmp_path, {}) == (False, "sources: no build")
    _build(tmp_path)
    want = hashlib.sha256(b"the library").hexdigest()[:12]
    assert compiled.choose(tmp_path, {}) == (True, f"compiled: {want}")
    assert compiled.choose(tmp_path, {compiled.PURE: "0"}) == (True, f"compiled: {want}")
    assert compiled.choose(tmp_path, {compiled.PURE: "1"}) == (False,
                                                              "sources: MRC_TESTBED_PURE=1")
    library = _file(tmp_path, compiled.LIBRARY, compiled.SUFFIX)
    library.write_bytes(b"another build")
    os.utime(library, (2.0, 2.0))
    for m in compiled.MODULES:
        os.utime(_file(tmp_path, m, compiled.SUFFIX), (2.0, 2.0))
    other = compiled.choose(tmp_path, {})[1]
    assert other.startswith("compiled: ") and other != f"compiled: {want}", "builds told apart"
    os.utime(_file(tmp_path, "protocol.nscc", ".py"), (3.0, 3.0))
    assert compiled.choose(tmp_path, {}) == (
        False, "sources: the build is older than hostagent/protocol/nscc.py")


def test_a_process_reports_what_it_imported():
    """MRC_TESTBED_PURE=1 in a process: its BUILD says the sources, and why."""
    code = "import hostagent; print(hostagent.compiled.BUILD)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True, env={**os.environ, compiled.PURE: "1"})
    assert out.stdout.strip() == ("sources: MRC_TESTBED_PURE=1" if compiled.built()
                                  else "sources: no build")
    assert compiled.BUILD.startswith("compiled: ") == compiled.ACTIVE


def test_agents_that_disagree_are_said_in_the_line():
    same = compiled.agreement({"h0": "compiled: abc", "h1": "compiled: abc", "h2": "compiled: abc"})
    assert same == {"build": "compiled: abc", "agents": {"compiled: abc": 3}}
    assert compiled.line(same) == "compiled: abc (all 3 agents)"
    mixed = compiled.agreement({"h0": "compiled: abc", "h1": "sources: no build",
                                "h2": "compiled: abc", "h3": None})
    assert mixed["build"] == "mixed"
    assert compiled.line(mixed) == ("AGENTS DISAGREE: compiled: abc on 2, sources: no build "
                                    "on 1, not reported on 1")
    assert compiled.line(None) == "not recorded"


if __name__ == "__main__":
    json.dump(fingerprints(), sys.stdout)
