"""bench/scale.py's per-packet CPU, user space and kernel apart, from a run's own numbers, and
its choice of protocol build for the agents."""
from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from bench import scale
from hostagent import compiled
from testbed import scenario
from testbed.emulation import calibration
from testbed.run.results import facts
from tests.unit.made_runs import run_meta


# Two processes: a pooled one serving two hosts (each reports the process's CPU so far) and one
# with a host of its own. Workload CPU, by hand: pooled user 4.0 - 1.0 = 3.0 s, system
# 0.9 - 0.2 = 0.7 s; the other user 2.5 - 0.5 = 2.0 s, system 0.4 - 0.1 = 0.3 s: 5.0 and 1.0.
def _cpu(user: float, system: float) -> dict[str, float]:
    return {"user_s": user, "system_s": system}


RESULTS = [
    {"pid": 1, "cpu_start": _cpu(1.0, 0.2), "cpu": _cpu(3.0, 0.5)},
    {"pid": 1, "cpu_start": _cpu(1.5, 0.3), "cpu": _cpu(4.0, 0.9)},
    {"pid": 2, "cpu_start": _cpu(0.5, 0.1), "cpu": _cpu(2.5, 0.4)},
    {"pid": 3, "status": "failed", "cpu": _cpu(9.0, 9.0)},  # failed before the start
]
# 6,000 + 4,500 data packets sent, 400 + 100 of them again: 10,000 delivered
QPS = pd.DataFrame({"data_sent": [6000, 4500], "retransmits": [400, 100]})


def test_user_and_system_time_per_delivered_packet():
    assert calibration.agents_cpu_split(RESULTS) == pytest.approx((5.0, 1.0))
    assert scale.delivered_packets(QPS) == 10_000
    got = scale.per_packet((5.0, 1.0), 1.5, 10_000)
    assert got == pytest.approx({"user_us": 500.0, "system_us": 100.0, "softirq_pkt_us": 150.0,
                                 "user_kernel": 5.0 / (1.0 + 1.5)})


def test_nothing_delivered_or_no_softirq_measured_is_no_number():
    assert set(scale.per_packet((1.0, 1.0), 1.0, 0).values()) == {None}
    assert set(scale.per_packet(None, 1.0, 10_000).values()) == {None}, "agents without the split"
    got = scale.per_packet((5.0, 1.0), None, 10_000)
    assert got["user_us"] == 500.0 and got["softirq_pkt_us"] is None
    assert got["user_kernel"] is None, "a ratio without the softirq would overstate user space"


def _fake_run(base: Path) -> None:
    """The folder a run leaves (what run_one reads): 2 hosts over 4 s of iterations, the monitor
    saw softirq on 25% of 2 cores, so 0.25 x 2 x 4 = 2.0 s of it."""
    d = base / "20260101T000000Z-scale-2-mrc"
    (d / "agents").mkdir(parents=True)
    ran = replace(facts(scenario.parse("name: scale-2", "t"), "mrc"),
                  link_rates={"host": 10e6, "fabric": 10e6}, ideal_busbw=1.0)
    meta = run_meta(facts=ran.to_json(), protocol={
        "build": "sources: no build", "agents": {"sources: no build": 2}},
        fidelity={"verdict": "faithful", "reasons": [],
                  "cpu": {"run_total": 0.5, "softirq": 0.25, "cores": 2},
                  "agents": {"lag_p99_s": 0.001}})
    (d / "meta.json").write_text(json.dumps(meta.to_json()))
    pd.DataFrame({"rank": [0, 1], "iteration": [0, 0], "start": [10.0, 10.5],
                  "end": [13.5, 14.0]}).to_parquet(d / "iterations.parquet")
    QPS.to_parquet(d / "qps.parquet")
    for i, r in enumerate(RESULTS):
        (d / "agents" / f"h{i}").mkdir()
        (d / "agents" / f"h{i}" / "result.json").write_text(json.dumps(
            {**r, "cpu_s": sum(r["cpu"].values()),
             "cpu_start_s": sum(r["cpu_start"].values()) if "cpu_start" in r else None}))


def test_a_runs_row_has_user_system_and_softirq_apart(tmp_path, monkeypatch):
    monkeypatch.setattr(scale, "run", lambda sc, text, options, progress: _fake_run(tmp_path))
    sc, text = scale.scenario(4, "pooled", "mrc", "10Mbit", "1MiB", 4096, 4200)
    row = scale.run_one(sc, text, tmp_path)
    assert row["build"] == "sources: no build"
    assert row["user_us"] == pytest.approx(500.0) and row["system_us"] == pytest.approx(100.0)
    assert row["softirq_us"] == pytest.approx(200.0) == row["softirq_pkt_us"]
    assert row["user_kernel"] == pytest.approx(5.0 / (1.0 + 2.0))
    assert row["agent_us"] == pytest.approx(600.0), "user + system, as before"


def test_the_builds_the_agents_are_given(monkeypatch):
    monkeypatch.setenv(compiled.PURE, "")  # and as it was after the test
    scale.use_build("pure")
    assert os.environ[compiled.PURE] == "1"
    monkeypatch.setattr(compiled, "choose", lambda environ: (False, "sources: no build"))
    with pytest.raises(SystemExit, match="make fast"):
        scale.use_build("compiled")
    monkeypatch.setattr(compiled, "choose", lambda environ: (True, "compiled: 0123456789ab"))
    scale.use_build("compiled")
    assert os.environ[compiled.PURE] == "0"


def test_against_runs_each_row_on_the_other_checkout_first(tmp_path, monkeypatch, capsys):
    """`--against`: every row on the other checkout, then here, with the other's rows named
    by its commit; a checkout without its venv is one clear error."""
    other = tmp_path / "other"
    with pytest.raises(SystemExit, match="--against: .*make install"):
        monkeypatch.setattr("sys.argv", ["scale.py", "--against", str(other)])
        scale.main()
    (other / ".venv" / "bin").mkdir(parents=True)
    (other / ".venv" / "bin" / "python").touch()
    ran: list[tuple[int, str, str]] = []

    def fake_run_one(sc, text, base, checkout=scale.THIS):
        ran.append((sc.fabric.host_count, sc.transport[0], "here" if checkout == scale.THIS
                    else checkout.path.name))
        return {"error": "fake"}

    monkeypatch.setattr(scale, "run_one", fake_run_one)
    monkeypatch.setattr("sys.argv", ["scale.py", "--hosts", "8", "16", "--modes", "pooled",
                                     "--transport", "mrc,rocev2", "--against", str(other)])
    scale.main()
    assert ran == [(h, t, c) for h in (8, 16) for t in ("mrc", "rocev2")
                   for c in ("other", "here")]
    rows = [line for line in capsys.readouterr().out.splitlines() if "fake" in line]
    assert [("@other" in row) for row in rows] == [True, False] * 4
