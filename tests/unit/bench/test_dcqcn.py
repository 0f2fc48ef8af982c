"""bench/dcqcn.py --testbed: its grid, which setting it calls best, and that every run it counts
ran the setting it is listed under."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from analysis.load import RunError
from bench import dcqcn
from bench.dcqcn import Summary, best, parse_grid, parse_roce_variants, summarize, sweep_report
from bench.fair import spread
from tests.unit.made_runs import run_meta

ROOT = Path(__file__).resolve().parents[3]
PAPER = (50 / 10, 55 / 10)  # Zhu et al.'s 50 us CNP spacing and 55 us timers over a 10 us RTT
A, B, C = (1.0, 1.0), (2.0, 2.0), (10.0, 10.0)


def test_the_grid_is_pairs_within_the_scenarios_bounds_and_keeps_the_default():
    assert parse_grid("5:5.5, 0.5:2") == [PAPER, (0.5, 2.0)]
    assert parse_grid("1:1,20:20") == [PAPER, (1.0, 1.0), (20.0, 20.0)], "the default added"
    assert parse_grid("1:1,5:5.5") == [(1.0, 1.0), PAPER], "given: where it was given"
    assert dcqcn.GRID[0] == PAPER and len(dcqcn.GRID) == 6
    for bad, says in (("1:1,1:1", "twice"), ("0.05:1", "outside"), ("1:101", "outside"),
                      ("nan:1", "outside"), ("1", "CNP:TIMER"), ("1:2:3", "CNP:TIMER"),
                      ("a:b", "CNP:TIMER"), (" , ", "give")):
        with pytest.raises(ValueError, match=says):
            parse_grid(bad)


def test_only_rocev2_variants_sweep_dcqcn():
    assert parse_roce_variants("rocev2,rocev2-lossless") == ["rocev2", "rocev2-lossless"]
    with pytest.raises(ValueError, match="RoCEv2's"):
        parse_roce_variants("rocev2,mrc")


def _run(share: float, fidelity: str = "faithful") -> dict:
    return {"share": share, "p50": 100.0, "p99": 200.0, "timeouts": 1, "cnps": 10,
            "verified": True, "fidelity": fidelity}


# The default at 40%; A at a median of 60% (all faithful); B at 50% and 66% where faithful, and
# 99% where not (its median would beat A's if the unfaithful run counted); C the highest (90%)
# but one of its runs made no result.
RUNS = {**{(dcqcn.DEFAULT, "rocev2", s): _run(0.4) for s in (1, 2, 3)},
        (A, "rocev2", 1): _run(0.5), (A, "rocev2", 2): _run(0.6), (A, "rocev2", 3): _run(0.7),
        (B, "rocev2", 1): _run(0.5), (B, "rocev2", 2): _run(0.66),
        (B, "rocev2", 3): _run(0.99, "degraded"),
        (C, "rocev2", 1): _run(0.9), (C, "rocev2", 2): _run(0.9)}
GRID = [dcqcn.DEFAULT, A, B, C]


def test_the_best_is_the_highest_median_over_faithful_runs_of_complete_settings():
    summaries = summarize(RUNS, GRID, ["rocev2"], [1, 2, 3])
    by = {s.setting: s for s in summaries}
    assert by[B].share.n == 2 and by[B].share.median == pytest.approx(0.58)
    assert by[C].complete is False and by[A].complete is True
    assert best(summaries, "rocev2") == A
    assert best(summaries, "rocev2-lossless") is None
    assert best([Summary(A, "rocev2", spread([0.5], [True]), *[spread([], [])] * 3,
                         complete=False)], "rocev2") is None, "nothing complete: no best"


def test_the_report_marks_the_default_and_the_best():
    out = sweep_report({"degrade": RUNS}, {"degrade": 0.0055}, GRID, ["rocev2"], [1, 2, 3],
                       [["degrade", "rocev2", "10/10", 3, "the run failed: QP out of retries"]])
    rows = {line.split(" | ")[1]: line for line in out.splitlines()
            if line.startswith("| rocev2 | ")}
    assert rows["5/5.5 *"].split(" | ")[2:4] == ["3 of 3", "40%/40%/40%"]
    assert rows["1/1 <"].split(" | ")[2:4] == ["3 of 3", "50%/60%/70%"]
    assert rows["2/2"].split(" | ")[2:4] == ["2 of 3", "50%/58%/66%"]
    assert rows["10/10"].split(" | ")[2:4] == ["2 of 3", "90%/90%/90%"]
    assert "### degrade: base RTT 5.50 ms (the default spaces CNPs by 27.5 ms)" in out
    assert "QP out of retries" in out and "**excluded**" in out


def _fake_run(monkeypatch, ran: dict | None) -> None:
    monkeypatch.setattr(dcqcn.faults, "measure", lambda d: _run(0.5))
    qps = pd.DataFrame({"timeouts": [2, 3], "cnps": [4, None]})
    monkeypatch.setattr(dcqcn, "load_run", lambda d: SimpleNamespace(
        meta=run_meta(dcqcn=ran), tables={"qps": qps}))


def test_a_run_counts_only_if_its_meta_says_it_ran_the_setting(monkeypatch):
    _fake_run(monkeypatch, {"cnp_rtts": 1.0, "timer_rtts": 1.0})
    m = dcqcn.measure(Path("run"), A)
    assert (m["timeouts"], m["cnps"], m["share"]) == (5, 4, 0.5)
    with pytest.raises(RunError, match="not"):
        dcqcn.measure(Path("run"), B)
    _fake_run(monkeypatch, None)  # a run that predates the setting, or an MRC run
    with pytest.raises(RunError):
        dcqcn.measure(Path("run"), A)


def test_the_sweep_runs_every_seed_setting_and_variant_with_its_ratios(monkeypatch, tmp_path,
                                                                       capsys):
    calls = []

    def run_variant(file, variant, seed, out, overrides, label):
        calls.append((file.name, variant, seed, overrides["dcqcn"], label))
        return None, "no fabric in a unit test"
    monkeypatch.setattr(dcqcn, "run_variant", run_variant)
    files = [ROOT / "scenarios" / f"{n}.yaml" for n in dcqcn.SCENARIOS]
    dcqcn.sweep_testbed(files, [PAPER, (0.5, 2.0)], ["rocev2", "rocev2-lossless"], [1, 2],
                        tmp_path)
    assert len(calls) == 3 * 2 * 2 * 2
    assert ("gray-loss.yaml", "rocev2-lossless", 2, {"cnp_rtts": 0.5, "timer_rtts": 2.0},
            "-cnp0.5-timer2") in calls
    assert ("degrade.yaml", "rocev2", 1, {"cnp_rtts": 5.0, "timer_rtts": 5.5},
            "-cnp5-timer5.5") in calls
    out = capsys.readouterr().out
    assert out.startswith("## bench/dcqcn.py --testbed")
    assert out.count("no fabric in a unit test") == 24
