"""Drill objectives judged from runs' tables: pass, fail and inconclusive, with the sample
counts the percentiles rest on, and the verdict files CI reads."""
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis import drill_report
from analysis import objectives as O
from analysis.load import Run, RunError
from tests.unit.made_runs import run_meta

T0 = 1000.0
B = 100_000  # bytes each rank writes per iteration


def run(durations: list[float], fault: tuple[float, float] | None = None,
        faithful: bool | None = True, wrong: int = 0, failed_qps: int = 0,
        gap_after: int | None = None, gap: float = 0.0, name: str = "r") -> Run:
    """Two ranks; iteration k lasts durations[k]; in each, each rank writes B bytes to the
    other over the whole iteration. A fault (start, end) in s since t0 goes to events; a
    pause of `gap` s after iteration `gap_after` leaves no write completing."""
    its, msgs = [], []
    t = 0.0
    for k, d in enumerate(durations):
        for rank, host in ((0, "h0"), (1, "h1")):
            its.append({"host": host, "rank": rank, "transport": "mrc", "kind": "all_reduce",
                        "iteration": k, "warmup": False, "start": T0 + t, "end": T0 + t + d,
                        "bytes": 2 * B, "verified": not (wrong and k < wrong), "error": None})
            msgs.append({"host": host, "rank": rank, "peer": 1 - rank, "iteration": k,
                         "warmup": False, "start": T0 + t, "end": T0 + t + d, "size": B})
        t += d + (gap if k == gap_after else 0.0)
    events = pd.DataFrame()
    if fault is not None:
        events = pd.DataFrame({"event": [0, 0], "kind": ["link_down"] * 2,
                               "target": ["p0 leaf 0-spine 0"] * 2,
                               "condition": ["down", "down"], "on": [True, False],
                               "applied": [T0 + fault[0], T0 + fault[1]], "holder": [0, 0],
                               "links": [("p0l0-p0s0",)] * 2})
    meta = {"transport": "mrc", "status": "complete", "workload_start": T0}
    if faithful is not None:
        meta["fidelity"] = {"verdict": "faithful" if faithful else "degraded", "reasons": []}
    tables = {"iterations": pd.DataFrame(its), "messages": pd.DataFrame(msgs),
              "qps": pd.DataFrame({"failed": ["PSN 7 unacknowledged after 13 timeouts in a row"]
                                   * failed_qps + [None] * 2}),
              "events": events}
    return Run(Path(name), run_meta(**meta), None, tables)  # type: ignore[arg-type]


STEADY = [0.1] * 120
SPEC = {"verified": True, "no_failed_qp": True, "goodput_ratio": 0.45, "cct_p99_ratio": 2.5,
        "recovery_ms": 500, "recovery_from": "end", "max_stall_ms": 250, "faithful": True}


def faulty(**kw) -> Run:
    """120 iterations of 0.1 s, those from 4.0 s to 5.0 s (fault window) twice as long."""
    d = [0.1] * 40 + [0.2] * 5 + [0.1] * 75
    return run(d, fault=(4.0, 5.0), **kw)


def by_name(verdicts: list[O.Verdict]) -> dict[str, O.Verdict]:
    return {v.objective: v for v in verdicts}


def test_every_objective_passes_on_faithful_runs_that_meet_them():
    v = by_name(O.evaluate([faulty()], [run(STEADY)], SPEC))
    assert {k: x.status for k, x in v.items()} == {
        "every collective verified": "pass", "no QP failed": "pass",
        "goodput in the fault window": "pass", "CCT p99": "pass", "recovery to 90%": "pass",
        "longest stall": "pass", "run judged faithful": "pass"}
    # the fault window runs at half the steady rate: 50%, whatever the absolute rate
    assert v["goodput in the fault window"].value == pytest.approx(0.5, abs=0.01)
    assert "n=120" in v["CCT p99"].measured  # n beside the percentile
    assert O.overall(list(v.values())) == "pass"


def test_goodput_in_the_window_is_a_share_of_the_control_run():
    spec = {"goodput_ratio": 0.6}
    (half,) = O.evaluate([faulty()], [run(STEADY)], spec)
    assert half.value == pytest.approx(0.5, abs=0.01) and half.status == "fail"
    (ok,) = O.evaluate([faulty()], [run(STEADY)], {"goodput_ratio": 0.45})
    assert ok.status == "pass"
    (pre,) = O.evaluate([faulty()], [], spec)  # no control: the level before the fault
    assert pre.value == pytest.approx(0.5, abs=0.01) and "before the first fault" in pre.measured


def test_a_share_just_under_its_limit_is_not_shown_as_the_limit():
    """94.6% against ">= 95%" printed as "95% ... fail" reads as a judge's bug: one decimal
    where whole percent would round onto the limit."""
    (share,) = O.evaluate([faulty()], [run(STEADY)], {"goodput_ratio": 0.45})
    limit = share.value + 0.001
    assert round(limit, 2) == round(share.value, 2)  # both print as the same whole percent
    (close,) = O.evaluate([faulty()], [run(STEADY)], {"goodput_ratio": limit})
    assert close.status == "fail"
    assert close.measured.startswith(f"{share.value:.1%} "), close.measured
    assert share.measured.startswith(f"{share.value:.0%} "), "far from the limit: whole percent"


def test_the_window_ends_with_the_workload_when_the_fault_outlasts_it():
    """A fault undone after the last iteration ended: the window stops at the workload's
    end, or its idle tail would count as goodput lost to the fault."""
    late = run(STEADY, fault=(11.0, 14.0))  # the workload ends at 12.0 s
    assert O.fault_window(late) == pytest.approx((11.0, 12.0))
    (share,) = O.evaluate([late], [run(STEADY)], {"goodput_ratio": 0.95})
    assert share.value == pytest.approx(1.0, abs=0.01) and share.status == "pass"


def test_a_run_without_a_fidelity_verdict_is_never_a_pass():
    verdicts = O.evaluate([faulty(faithful=None)], [run(STEADY)], SPEC)
    assert by_name(verdicts)["run judged faithful"].status == "inconclusive"
    assert O.overall(verdicts) == "inconclusive"
    degraded = O.evaluate([faulty(faithful=False)], [run(STEADY)], SPEC)
    assert O.overall(degraded) == "inconclusive"


def test_a_failure_on_a_run_not_judged_faithful_stays_a_failure_and_says_so():
    verdicts = by_name(O.evaluate([faulty(faithful=None, wrong=3, failed_qps=1)],
                                  [run(STEADY)], SPEC))
    assert verdicts["every collective verified"].status == "fail"
    assert verdicts["no QP failed"].status == "fail"
    assert "not all judged faithful" in verdicts["no QP failed"].note
    assert O.overall(list(verdicts.values())) == "fail"


def test_a_percentile_without_enough_samples_is_inconclusive():
    (few,) = O.evaluate([run([0.1] * 50, fault=(1.0, 2.0))], [run(STEADY)],
                        {"cct_p99_ratio": 100})
    assert few.status == "inconclusive" and "n=50" in few.measured
    assert "needs >= 100 samples, has 50" in few.note
    # two repetitions of 50 pool to 100: judged
    (two,) = O.evaluate([run([0.1] * 50, fault=(1.0, 2.0))] * 2, [run(STEADY)],
                        {"cct_p99_ratio": 100})
    assert two.status == "pass" and "n=100" in two.measured


def test_cct_tail_against_the_steady_median():
    slow = [0.1] * 97 + [0.5] * 3  # p99 = 0.5 s, 5x the steady 0.1 s
    (v,) = O.evaluate([run(slow, fault=(1.0, 2.0))], [run(STEADY)], {"cct_p99_ratio": 4})
    assert v.status == "fail" and v.value == pytest.approx(5.0, rel=0.01)


def test_a_stall_is_the_longest_time_no_write_completed():
    (v,) = O.evaluate([run([0.1] * 100, gap_after=50, gap=0.4)], [], {"max_stall_ms": 300})
    assert v.status == "fail" and v.value == pytest.approx(500, abs=1)  # 0.4 s + one write


def test_recovery_not_back_by_the_limit_fails():
    d = [0.1] * 40 + [0.4] * 20 + [0.1] * 20  # slow from 4 s to 12 s, fault 4 s to 5 s
    (v,) = O.evaluate([run(d, fault=(4.0, 5.0))], [], {"recovery_ms": 1000})
    assert v.status == "fail" and "not back by the limit" in v.measured
    (late,) = O.evaluate([run(d, fault=(4.0, 5.0))], [], {"recovery_ms": 8000})
    assert late.status == "pass" and 6000 < late.value < 8000, late


def test_a_dip_after_the_deadline_is_not_the_faults():
    """Back at once, then a slow stretch 3 s after the fault ended (another cause), and the
    workload's own ramp-down at its end: recovery is 0 ms, not the later dip."""
    d = [0.1] * 40 + [0.1] * 10 + [0.1] * 30 + [0.4] * 5 + [0.1] * 20
    (v,) = O.evaluate([run(d, fault=(4.0, 5.0))], [], {"recovery_ms": 500})
    assert v.status == "pass" and v.value == 0.0, v


def test_junit_and_exit_status(tmp_path: Path):
    ok = drill_report.DrillResult("d", "mrc", O.evaluate([faulty()], [run(STEADY)], SPEC))
    bad = drill_report.DrillResult("d", "rocev2", O.evaluate([faulty(wrong=1)], [run(STEADY)],
                                                             SPEC))
    unsure = drill_report.DrillResult("e", "mrc", O.evaluate([faulty(faithful=None)],
                                                             [run(STEADY)], SPEC))
    assert drill_report.exit_status([ok]) == 0
    assert drill_report.exit_status([ok, unsure]) == 6
    assert drill_report.exit_status([ok, unsure, bad]) == 5
    contrast = drill_report.DrillResult("d", "rocev2", bad.verdicts, contrast=True)
    assert drill_report.exit_status([ok, contrast]) == 0, "a contrast row is not judged"
    files = drill_report.write([ok, bad, unsure], tmp_path)
    root = ET.parse(files[2]).getroot()
    suites = {s.get("name"): s for s in root}
    assert suites["d"].get("failures") == "1" and suites["d"].get("tests") == "14"
    assert suites["e"].get("skipped") == "1"
    failure = root.find(".//testcase[@classname='d.rocev2'][@name='every collective verified']")
    assert failure is not None and failure.find("failure") is not None
    text = files[0].read_text()
    assert "d / rocev2: FAIL" in text and "e / mrc: INCONCLUSIVE" in text


def test_stall_of_a_steady_run_is_one_write():
    assert O.longest_stall(run(STEADY)) == pytest.approx(0.1)
    assert np.isnan(O.goodput_between(run(STEADY), 1.0, 1.0))


def test_one_slow_iteration_of_a_steady_run_is_no_dip():
    """Iterations of about 40 ms, as in the drills; one of them 21% slower (a steady run's
    bins fell to 0.80-0.88 of its mean, measured in the suite's controls) fills the 50 ms bin
    from 3.30 s at 82.5% of the level. Read over single bins it was a dip and a 350 ms
    recovery; over 100 ms it is none."""
    d = [0.04125] * 80 + [0.05] + [0.04125] * 40  # the slow one from 3.30 s, fault at 3.0 s
    (v,) = O.evaluate([run(d, fault=(3.0, 3.1))], [], {"recovery_ms": 500,
                                                       "recovery_from": "start"})
    assert v.status == "pass" and v.value == 0.0, v


def test_a_fault_the_workload_ends_before_its_limit_is_not_judged_not_back():
    """The workload ends 0.3 s after the fault began, goodput down since: whether it is back
    by the 500 ms limit is unknown, so the fault is not judged (as t1-blackhole-reboot's
    reboot, 0.25 s before the workload ended); it used to count as not back by the limit."""
    d = [0.04] * 75 + [0.04] * 2 + [0.08] * 3  # fault at 3.0 s, half speed from 3.08 s
    (v,) = O.evaluate([run(d, fault=(3.0, 3.5))], [], {"recovery_ms": 500,
                                                       "recovery_from": "start"})
    assert v.status == "inconclusive" and "1 fault not judged" in v.note, v


def test_recovery_from_the_end_is_sought_after_the_end():
    """A flap: half speed in its first cycle, back in between, half speed again in its last
    cycle and until 0.7 s after the fault's end. Timed from the end it is not back by the
    500 ms limit; the return between cycles used to stand for the whole fault (0 ms)."""
    d = [0.1] * 20 + [0.2] * 2 + [0.1] * 13 + [0.2] * 5 + [0.1] * 20  # 2.0-2.4, 3.7-4.7 s
    (v,) = O.evaluate([run(d, fault=(2.0, 4.0))], [], {"recovery_ms": 500,
                                                       "recovery_from": "end"})
    assert v.status == "fail" and "not back by the limit" in v.measured, v
    (late,) = O.evaluate([run(d, fault=(2.0, 4.0))], [], {"recovery_ms": 1000,
                                                          "recovery_from": "end"})
    assert late.status == "pass" and 600 <= late.value <= 800, late


# ---- training steps: step time and exposed communication in the fault window ----
C = 0.8  # s of compute per rank and step; the step's all-reduce (both ranks) follows it


def step_run(comm: list[float], fault: tuple[float, float] | None = None,
             warmup: float | None = None, name: str = "s") -> Run:
    """Two ranks; step k: both compute C s, then all-reduce on group dp for comm[k] s, so it
    lasts C + comm[k] and each rank's exposed communication is comm[k]. A `warmup` step of
    that many seconds of communication comes first and must be left out."""
    plan = ([(warmup, True)] if warmup is not None else []) + [(x, False) for x in comm]
    nodes, t = [], 0.0
    for k, (x, is_warmup) in enumerate(plan):
        for rank in (0, 1):
            base = {"host": f"h{rank}", "rank": rank, "transport": "mrc", "iteration": k,
                    "warmup": is_warmup, "peer": None, "verified": True, "error": None}
            nodes += [{**base, "node": 0, "name": "c", "kind": "compute", "collective": None,
                       "group": None, "bytes": 0, "start": T0 + t, "end": T0 + t + C},
                      {**base, "node": 1, "name": "ar", "kind": "collective",
                       "collective": "all_reduce", "group": "dp", "bytes": 4,
                       "start": T0 + t + C, "end": T0 + t + C + x}]
        t += C + x
    r = run([C + x for x, _ in plan], fault=fault, name=name)
    r.tables["steps"] = pd.DataFrame(nodes)
    return r


HEALTHY_STEPS = [0.2] * 10  # 1.0 s steps, 0.2 s exposed per rank
# steps 4 and 5 (4.0-5.3 and 5.3-6.6 s) overlap the window 4.2-5.5 s: 1.3 s, 0.5 s exposed
SLOW_STEPS = [0.2] * 4 + [0.5, 0.5] + [0.2] * 4
WINDOW = (4.2, 5.5)


def test_step_time_and_exposure_in_the_window_against_the_control():
    control = step_run(HEALTHY_STEPS, warmup=5.0)  # the warmup would raise the mean to 1.45
    v = by_name(O.evaluate([step_run(SLOW_STEPS, WINDOW)], [control],
                           {"step_slowdown": 1.5, "exposed_ratio": 3}))
    slow, exposed = v["step time in the fault window"], v["exposed communication in the fault "
                                                        "window"]
    assert slow.value == pytest.approx(1.3) and slow.status == "pass"
    assert "2 steps in the window" in slow.measured and "steady 1000.0 ms" in slow.measured
    assert exposed.value == pytest.approx(0.5 / 0.2) and exposed.status == "pass"
    assert "most grown: dp 2.50 x" in exposed.measured
    tight = by_name(O.evaluate([step_run(SLOW_STEPS, WINDOW)], [control],
                               {"step_slowdown": 1.2, "exposed_ratio": 2}))
    assert {x.status for x in tight.values()} == {"fail"}


def test_the_worst_repetition_is_judged_and_steps_before_the_fault_stand_in_for_a_control():
    milder = [0.2] * 4 + [0.3, 0.3] + [0.2] * 4  # 1.1 s in the window
    (v,) = O.evaluate([step_run(milder, WINDOW), step_run(SLOW_STEPS, WINDOW)], [],
                      {"step_slowdown": 1.5})
    # no control: steps 0-3, which end by 4.0 s (before the window), are the steady 1.0 s
    assert v.value == pytest.approx(1.3) and "worst of 2" in v.measured
    assert "steps before the first fault" in v.measured


@pytest.mark.parametrize("runs, controls, why", [
    ([step_run(SLOW_STEPS)], [step_run(HEALTHY_STEPS)], "no fault was applied"),
    ([step_run(SLOW_STEPS, (20.0, 21.0))], [step_run(HEALTHY_STEPS)],
     "no timed step overlaps the fault window"),
    ([faulty()], [run(STEADY)], "no training-step iterations"),
])
def test_step_objectives_without_an_answer_are_inconclusive(runs, controls, why):
    (v,) = O.evaluate(runs, controls, {"step_slowdown": 1.05})
    assert (v.status, v.note) == ("inconclusive", why)


def straggler(at: float, duration: float | None = None) -> dict:
    fault = {"at": at, "kind": "straggler", "target": {"host": "h1"}, "factor": 2}
    return fault if duration is None else {**fault, "duration": duration}


def test_a_straggler_opens_the_fault_window_it_was_scheduled_for():
    """No event records a straggler (its agent applies it): its window is the scenario's
    [at, at + duration), and the step objectives judge the steps that overlap it."""
    slow = step_run(SLOW_STEPS)
    slow.scenario = {"faults": [straggler(WINDOW[0], WINDOW[1] - WINDOW[0])]}
    assert O.fault_window(slow) == pytest.approx(WINDOW)
    v = by_name(O.evaluate([slow], [step_run(HEALTHY_STEPS)],
                           {"step_slowdown": 1.5, "exposed_ratio": 3}))
    assert v["step time in the fault window"].value == pytest.approx(1.3)
    assert "2 steps in the window" in v["step time in the fault window"].measured
    assert v["exposed communication in the fault window"].value == pytest.approx(0.5 / 0.2)


def test_a_straggler_without_an_end_holds_the_window_open_to_the_workload_end():
    """A network fault 4.2-5.5 s and a straggler from 8 s on: one window from the first
    start to the workload's end (ten steps, two of them 1.3 s: 10.6 s)."""
    slow = step_run(SLOW_STEPS, WINDOW)
    slow.scenario = {"faults": [straggler(8.0)]}
    assert O.fault_window(slow) == pytest.approx((4.2, 10.6))


def test_reported_rows_are_measured_for_every_transport_and_judge_nothing(monkeypatch,
                                                                         tmp_path: Path):
    """A drill's `report`: the step rows measured without a limit, beside the judged ones,
    for the transport with objectives and for a contrast; neither verdict nor JUnit counts
    them."""
    runs = {Path("rep"): step_run(SLOW_STEPS, WINDOW), Path("ctl"): step_run(HEALTHY_STEPS)}
    monkeypatch.setattr(drill_report, "load_run", runs.__getitem__)
    spec, report = {"verified": True, "no_failed_qp": True}, ["step_slowdown", "exposed_ratio"]
    mrc = drill_report.judge("d", "mrc", [Path("rep")], [Path("ctl")], spec, report=report)
    roce = drill_report.judge("d", "rocev2", [Path("rep")], [Path("ctl")], None,
                              contrast=spec, report=report)
    for result in (mrc, roce):
        rows = by_name(result.verdicts)
        slow = rows["step time in the fault window"]
        exposed = rows["exposed communication in the fault window"]
        assert (slow.status, slow.limit, exposed.status) == ("reported", "-", "reported")
        assert slow.value == pytest.approx(1.3) and exposed.value == pytest.approx(0.5 / 0.2)
    assert mrc.status == "pass" and roce.status == "contrast (not judged)"
    assert drill_report.exit_status([mrc, roce]) == 0
    root = ET.parse(drill_report.write([mrc, roce], tmp_path)[2]).getroot()
    assert root[0].get("tests") == "2"  # mrc's two judged objectives


def test_a_control_that_exposes_nothing_gives_no_exposure_ratio():
    (v,) = O.evaluate([step_run(SLOW_STEPS, WINDOW)], [step_run([0.0] * 10)],
                      {"exposed_ratio": 2})
    assert (v.status, v.note) == ("inconclusive", "the steady state exposes no communication")


# ---- each repetition against its own seed's control ----
# Seed 1's healthy step takes 1.0 s, seed 2's 1.3 s (its QPs share a spine, say). Repetition 1
# (seed 1) slows to 1.05 s in the window (steps 4 and 5, 4.0-5.05 and 5.05-6.1 s, overlap
# 4.2-5.5 s); repetition 2 (seed 2) runs at its seed's healthy 1.3 s throughout (steps 3 and
# 4, 3.9-5.2 and 5.2-6.5 s, overlap the window). Against its own control: 1.05 and 1.0, worst
# 1.05; against seed 1's control alone: 1.05 and 1.3, worst 1.3.
SEED_CONTROLS = (HEALTHY_STEPS, [0.5] * 10)
SEED_REPS = ([0.2] * 4 + [0.25, 0.25] + [0.2] * 4, [0.5] * 10)


def test_each_repetition_is_judged_against_its_own_seeds_control():
    controls = [step_run(c, name=f"control{k}") for k, c in enumerate(SEED_CONTROLS, 1)]
    reps = [step_run(r, WINDOW, name=f"rep{k}") for k, r in enumerate(SEED_REPS, 1)]
    spec = {"step_slowdown": 1.1}
    (own,) = O.evaluate(reps, controls, spec, paired=True)
    assert own.value == pytest.approx(1.05) and own.status == "pass"
    assert "against its seed's control, 2 runs" in own.measured
    assert "steady 1000.0 ms per step" in own.measured, "the worst repetition's control"
    (first,) = O.evaluate(reps, controls[:1], spec)  # first_seed: seed 1's control for both
    assert first.value == pytest.approx(1.3) and first.status == "fail"
    assert "control, 1 run)" in first.measured
    # the pairs are by position: swapped, rep1 / control2 = 1.05 / 1.3, rep2 / control1 = 1.3
    (swapped,) = O.evaluate(reps, controls[::-1], spec, paired=True)
    assert swapped.value == pytest.approx(1.3) and swapped.status == "fail"
    with pytest.raises(ValueError, match="2 repetitions paired with 1 controls"):
        O.evaluate(reps, controls[:1], spec, paired=True)


def test_goodput_of_each_repetition_is_a_share_of_its_own_seeds_control():
    """Seed 2's control runs 0.2 s iterations, half seed 1's goodput; its repetition runs the
    same through the fault window: 100% of its own control, 50% of seed 1's."""
    controls = [run(STEADY), run([0.2] * 120)]
    reps = [run(STEADY, fault=(4.0, 5.0)), run([0.2] * 120, fault=(4.0, 5.0))]
    (own,) = O.evaluate(reps, controls, {"goodput_ratio": 0.95}, paired=True)
    assert own.value == pytest.approx(1.0, abs=0.01) and own.status == "pass"
    assert "against its seed's control, 2 runs" in own.measured
    (first,) = O.evaluate(reps, controls[:1], {"goodput_ratio": 0.95})
    assert first.value == pytest.approx(0.5, abs=0.01) and first.status == "fail"


def test_the_judge_pairs_repetition_k_with_control_k_and_fails_a_pair_without_data(
        monkeypatch):
    """Paths in, verdicts out: the pairs are kept by position; a pair whose control left no
    run is left out of the ratios and fails "every run has data"."""
    made = {Path(f"control{k}"): step_run(c) for k, c in enumerate(SEED_CONTROLS, 1)}
    made |= {Path(f"rep{k}"): step_run(r, WINDOW) for k, r in enumerate(SEED_REPS, 1)}
    made[Path("rep3")] = step_run([0.2] * 4 + [0.6, 0.6] + [0.2] * 4, WINDOW)  # no control3

    def load(path: Path) -> Run:
        if path not in made:
            raise RunError(f"{path}: no such run folder")
        return made[path]

    monkeypatch.setattr(drill_report, "load_run", load)
    spec = {"step_slowdown": 1.1}
    reps, controls = [Path("rep1"), Path("rep2")], [Path("control1"), Path("control2")]
    paired = drill_report.judge("d", "mrc", reps, controls, spec, paired=True)
    assert paired.status == "pass" and paired.paired
    assert paired.verdicts[0].value == pytest.approx(1.05)
    first = drill_report.judge("d", "mrc", reps, controls[:1], spec)
    assert first.status == "fail" and first.verdicts[0].value == pytest.approx(1.3)
    lost = drill_report.judge("d", "mrc", [*reps, Path("rep3")],
                              [*controls, Path("control3")], spec, paired=True)
    rows = by_name(lost.verdicts)
    data, slow = rows["every run has data"], rows["step time in the fault window"]
    assert data.status == "fail" and data.measured == "1 of 6 runs have none"
    assert "control3" in data.note
    assert "worst of 2" in slow.measured and slow.value == pytest.approx(1.05), (
        "rep3 (1.4 s steps) is not judged against another seed's control")
