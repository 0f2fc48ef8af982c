"""Every run judges its own fidelity: quickstart is faithful on this machine, an overloaded run
is not (and `--require-faithful` says so with exit code 7), and a crashed agent ends the run
promptly with what completed kept."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from .helpers import CLI, ROOT, build, run_cli, scenario_mod

# 32 Python agents at 100 Mbit/s x 4 planes: far more per-packet work than 2 cores can do,
# in a process each, so that their timers wait for a CPU whatever one packet costs them (pooled,
# one process per core, the compiled agents may carry the same load with a verdict of `degraded`)
OVERLOAD = """name: overload-32
fabric:
  planes: 4
  leaves_per_plane: 4
  spines_per_plane: 4
  hosts_per_leaf: 8
  host_link: {rate: 100Mbit, buffer: 100KB}
  fabric_link: {rate: 100Mbit, buffer: 100KB}
transport: [mrc]
workload: {collective: all_reduce, size: 1MiB, iterations: 2, warmup: 0}
agents: {mode: per_host}
"""


def meta(run: Path) -> dict:
    return json.loads((run / "meta.json").read_text())


def test_quickstart_is_faithful(tmp_path: Path):
    # The verdict is a measurement of this machine: one scheduler hiccup of ~30 ms in
    # quickstart's 1.4 s of timed collectives is over the 2% bound (seen once in CI, with other
    # work on the machine: PSI 17%). So a second sitting is allowed, and only when the first was
    # judged on the CPU's side; links falling behind, or two sittings in a row, fail.
    results = tmp_path / "first"
    res = run_cli("run", "--no-report", "--require-faithful", results=results, timeout=300)
    if res.returncode == 7:
        first = _on_the_cpus_side(results)
        print("first sitting not faithful, on the CPU's side:\n" + res.stderr)
        results = tmp_path / "again"
        res = run_cli("run", "--no-report", "--require-faithful", results=results, timeout=300)
        if res.returncode == 7 and _stolen([*first, *_on_the_cpus_side(results)]):
            # a virtual machine whose host runs other guests on its cores: the verdict said so,
            # and this machine cannot show now whether quickstart is faithful
            pytest.skip("the hypervisor took this VM's CPU in both sittings (steal "
                        + ", ".join(f"{meta(r)['fidelity']['cpu']['steal']:.0%}"
                                    for r in sorted(results.iterdir())) + ")")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr
    runs = sorted(results.iterdir())
    assert len(runs) == 2
    for run in runs:
        f = _check_measured(run)
        assert f["verdict"] == "faithful", f
        if f["links"]["backlogged_gaps"] >= 200:
            assert f["links"]["within_one_packet"] >= 0.99, f
        else:  # DCQCN paces RoCEv2 below the line rate, and MRC's NIC pacing keeps a host
            # queue at a few packets (measured: 38 to 2,500 backlogged gaps between runs): the
            # link invariant is then not judged (said so), never passed blindly
            assert "not judged" in f["links"]["note"], f
        assert f["cpu"]["run_total"] < 0.8
        assert "fidelity: faithful" in (run / "summary.txt").read_text()
    assert (res.stdout + res.stderr).count("fidelity: faithful") == 2


def _on_the_cpus_side(results: Path) -> list[Path]:
    """The runs of a sitting that were not faithful, each measured in full and judged on the
    CPU's side only (never on links falling behind), and never worse than degraded."""
    runs = []
    for run in sorted(results.iterdir()):
        f = _check_measured(run)
        assert not any(r.startswith("links kept pace") for r in f["reasons"]), f["reasons"]
        assert f["verdict"] in ("faithful", "degraded"), f
        if f["verdict"] != "faithful":
            runs.append(run)
    return runs


def _stolen(runs: list[Path]) -> bool:
    """Every run's verdict named the hypervisor's steal among its reasons, while the run itself
    used less of the cores than its own bound (a slow agent is not excused by steal)."""
    for run in runs:
        f = meta(run)["fidelity"]
        assert f["cpu"]["run_total"] < 0.8, f
    return bool(runs) and all(any("(steal)" in r for r in meta(run)["fidelity"]["reasons"])
                              for run in runs)


def _check_measured(run: Path) -> dict:
    """What every verdict rests on was measured: 4 agents, every port's gaps, the CPU."""
    f = meta(run)["fidelity"]
    assert f["agents"]["agents"] == 4, f
    gaps = pd.read_parquet(run / "link_gaps.parquet")
    assert gaps.groupby(["node", "ifname"]).ngroups == 32, "every port of 16 links"
    assert gaps["gaps"].sum() == f["links"]["backlogged_gaps"]
    cpu = pd.read_parquet(run / "cpu.parquet")
    assert len(cpu) >= 4 and cpu["busy"].between(0, 1).all()
    # the runner's own process (telemetry at 10 Hz at least) counts in the run's CPU
    assert cpu["process"].between(0, 1).all() and 0 < f["cpu"]["run_runner"] < 0.5, f
    c = f["cpu"]
    assert c["run_sum"] >= c["run_agents"] + c["run_runner"], c
    assert c["run_total"] == min(c["run_sum"], c["busy_mean"]), c  # the machine's bounds it
    return f


def test_an_overloaded_run_is_not_faithful(tmp_path: Path, results_dir: Path):
    file = tmp_path / "overload.yaml"
    file.write_text(OVERLOAD)
    res = run_cli("run", str(file), "--no-report", "--require-faithful", results=results_dir,
                  timeout=300)
    assert res.returncode == 7, res.stdout[-3000:] + res.stderr
    assert "--require-faithful" in res.stderr and "not faithful" in res.stderr
    (run,) = results_dir.iterdir()
    m = meta(run)
    assert m["status"] == "complete", "the run itself completed; only its verdict fails"
    assert m["fidelity"]["verdict"] == "not faithful"
    # the CPU's symptoms: the run's own CPU over its bound, or (when others' work on the
    # machine starves the agents first, as in the README's scale table) their timers late
    assert any(r.startswith(("the run itself used", "agents' timers late", "agent timers late"))
               for r in m["fidelity"]["reasons"]), m["fidelity"]["reasons"]
    assert "fidelity: NOT FAITHFUL" in res.stdout + res.stderr


def test_a_crashed_agent_ends_the_run_promptly(tmp_path: Path, results_dir: Path):
    file = tmp_path / "long.yaml"
    # about 0.3 s an iteration: 40 of them outlast the kill; the agents' deadline is minutes
    file.write_text("name: long\ntransport: [mrc]\n"
                    "workload: {collective: all_reduce, size: 1MiB, iterations: 40}\n"
                    "agents: {mode: per_host}\n")  # one process to kill: h1's
    proc = subprocess.Popen([*CLI, "run", str(file), "--no-report", "--results",
                             str(results_dir)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        start = None
        for _ in range(600):
            start = next(results_dir.glob("*/agents/start"), None)
            if start is not None:
                break
            time.sleep(0.1)
        assert start is not None, "the workload never started"
        time.sleep(2.0)  # a few iterations complete
        victim = _agent_pid(start.parent / "h1" / "config.json")
        os.kill(victim, signal.SIGKILL)
        t_kill = time.monotonic()
        out, err = proc.communicate(timeout=120)
        ended_after = time.monotonic() - t_kill
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, out[-2000:] + err
    assert ended_after < 20, f"the run waited {ended_after:.0f} s for a dead agent"
    assert "h1: no result (exit -9)" in err, err
    (run,) = results_dir.iterdir()
    assert meta(run)["status"] == "failed"
    it = pd.read_parquet(run / "iterations.parquet")
    done = it[it["verified"] & it["error"].isna()]
    assert len(done) >= 4, "iterations completed before the crash are kept"
    marked = it[it["error"].fillna("").str.startswith("not completed")]
    assert len(marked) == 4 * 41 - len(done), "every other iteration is marked (1 warmup)"
    for host in ("h0", "h2", "h3"):
        last = (run / "agents" / host / "agent.log").read_text().strip().splitlines()[-1]
        # stopped by the runner, or it found the dead peer itself first (its QP to h1 ran out
        # of retries) and was stopped while it waited for its peers
        assert (last.endswith("stopped: stopped by the runner (SIGTERM)") or
                "failed: transport failed: QP to rank 1" in last), last
    last = (run / "agents" / "h1" / "agent.log").read_text().strip().splitlines()[-1]
    assert last == "runner: the agent ended with exit status -9 without a result", last
    assert "fidelity: " in (run / "summary.txt").read_text()


def _agent_pid(config: Path) -> int:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if str(config).encode() in (entry / "cmdline").read_bytes():
                    return int(entry.name)
            except OSError:
                continue
    raise AssertionError(f"no agent process with {config}")


# qp.compress_above_rtts: whatever rate the machine gives (D up to 400 Gbit/s over the lowest
# rung), MRC's 262 us timeout run D times longer stays within the run's bound
AUTO = """name: auto-4
fabric: {host_link: {rate: auto}, fabric_link: {rate: auto}, mtu: 4200, real_rate: 400Gbit}
qp: {mss: 4096, compress_above_rtts: 12}
transport: [mrc]
workload: {collective: all_reduce, size: 256KiB, iterations: 2, warmup: 0}
"""


def test_rate_auto_calibrates_once_chooses_and_records(tmp_path: Path, results_dir: Path):
    """No cache: `validate` (no root needed) says run will calibrate; `run` measures on a small
    fabric, caches it, picks the rung the arithmetic gives and runs at it; then `validate`
    shows the same choice from the cache."""
    import os

    from testbed.fabric import budget
    from testbed.scenario import limits, parse
    file = tmp_path / "auto.yaml"
    file.write_text(AUTO)
    env = os.environ | {"MRC_TESTBED_CACHE": str(tmp_path / "cache")}
    res = run_cli("validate", str(file), env=env)
    assert res.returncode == 0 and "`run` will first measure" in res.stdout, res.stdout
    res = run_cli("run", str(file), "--no-report", results=results_dir, timeout=300, env=env)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr
    out = res.stdout + res.stderr
    assert "measuring this machine's packet budget" in out and "rate auto: " in out
    (cache,) = (tmp_path / "cache").glob("calibration-*.json")
    cal = json.loads(cache.read_text())
    assert cal["method"] and cal["measured"] and cal["agent_s"] > 0 and cal["packets"] > 1000
    (run,) = results_dir.iterdir()
    m = meta(run)
    chosen = m["rate_auto"]["choice"]
    # the model's rung from the cached numbers, computed here again by the pure arithmetic
    cost = budget.PacketCost(cal["agent_s"], cal["kernel_s_per_link"], cal["cores"])
    want = budget.choose_rate(parse(AUTO, "t"), cost)
    assert chosen["rate"] == want.rate in limits.AUTO_RATE_LADDER
    # the pilot started there, measured the real machine, and its readings give the rung
    piloted = m["rate_auto"]["pilot"]
    readings = piloted["readings"]
    assert readings[0]["rate"] == want.rate and readings[0]["transport"] == "mrc"
    assert all(0 < r["busy"] <= 1 and r["window_s"] > 0 for r in readings), readings
    shares: dict[int, float] = {}
    for r in readings:
        shares[r["rate"]] = max(shares.get(r["rate"], 0.0), r["busy"])
    step = budget.pilot_step(shares)
    assert step.measure is None and piloted["rate"] == step.rate in limits.AUTO_RATE_LADDER
    assert m["facts"]["link_rates"] == {"host": step.rate, "fabric": step.rate}
    (pilot_cache,) = (tmp_path / "cache").glob("pilot-*.json")
    assert json.loads(pilot_cache.read_text())["rate"] == step.rate
    assert m["facts"]["real_rate"] == 400e9
    assert "Time dilation" in (run / "summary.txt").read_text()
    res = run_cli("validate", str(file), env=env)
    assert res.returncode == 0 and f"model: {want.lines()[0].split(': ')[1]}" in res.stdout
    assert "(the highest rung measured within" in res.stdout  # the pilot's, from its cache


def test_a_run_without_a_workload_does_not_pilot(tmp_path: Path, results_dir: Path):
    """--verify-only has no traffic to measure: the model's rung, no pilot, nothing cached."""
    import os

    from testbed.emulation import calibration
    file = tmp_path / "auto.yaml"
    file.write_text(AUTO)
    cache = tmp_path / "cache"
    env = os.environ | {"MRC_TESTBED_CACHE": str(cache)}
    # 100 us + 5 us per link: the model's rung without measuring (the test's own numbers)
    found = calibration.from_measurement(1.0, 0.15, 10_000, 5.0, 3.0)
    cache.mkdir()
    (cache / calibration.cache_path().name).write_text(json.dumps(found.__dict__))
    res = run_cli("run", str(file), "--verify-only", results=results_dir, timeout=120, env=env)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    assert "pilot: not run without a workload" in out and "measuring" not in out, out
    assert not list(cache.glob("pilot-*.json"))


def test_the_pilot_reshapes_every_auto_port_in_place(tmp_path: Path):
    """The pilot measures several rungs on one fabric: every port of an auto link class is
    shaped at the new rate, the fixed class left as it was."""
    from testbed.run import pilot
    text = ("name: reshape\nfabric: {host_link: {rate: auto}, fabric_link: {rate: 30Mbit}, "
            "mtu: 4200}\nqp: {mss: 4096}\n")
    sc = scenario_mod.parse(text, "test")
    network = build(yaml_at(text, "20Mbit"), tmp_path)
    try:
        pilot.reshape(network, sc, 5_000_000)
        for node, dev in (("h0", "h0-eth0"), ("p0l0", "p0l0-eth0"), ("p1l1", "p1l1-eth1")):
            classes = network.node(node).cmd(f"tc class show dev {dev}")
            assert "rate 5Mbit ceil 5Mbit" in classes, (node, classes)
        fabric_port = network.node("p0l0").cmd("tc class show dev p0l0-eth2")
        assert "rate 30Mbit" in fabric_port, fabric_port
    finally:
        network.close()


def yaml_at(text: str, rate: str) -> str:
    return text.replace("rate: auto", f"rate: {rate}")
