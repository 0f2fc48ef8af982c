"""Step metrics on hand-built node records; every expected value worked out by hand below."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml

from analysis import step_report, summary
from analysis.metrics import bandwidth
from analysis.steps import (
    GROUPS_PID,
    collective_calls,
    group_exposed,
    iteration_times,
    minus,
    pack,
    rank_lanes,
    rank_metrics,
    straggler_windows,
    trace_events,
    union,
)
from tests.unit.made_runs import run_meta


def row(rank, kind, start, end, group=None, collective=None, nbytes=0, iteration=0):
    return {"transport": "mrc", "rank": rank, "iteration": iteration, "warmup": False,
            "node": 0, "name": "", "kind": kind, "collective": collective, "group": group,
            "peer": None, "bytes": nbytes, "start": start, "end": end, "verified": True,
            "error": None}


# rank 0: compute 0-4 and 6-8 (6); all-reduce on dp 3-7 (overlaps compute 3-4 and 6-7: exposed
#   4-6 = 2); a send on pp 8-9 (exposed 1); comm 4 + 1 = 5, exposed 3; span 0-9 = 9, all of
#   it covered by compute or comm: idle 0.
# rank 1: compute 0-2; all-reduce on dp 2.5-7.5 (exposed 5); idle 2-2.5 = 0.5; span 0-7.5.
STEPS = pd.DataFrame([
    row(0, "compute", 0, 4), row(0, "compute", 6, 8),
    row(0, "collective", 3, 7, "dp", "all_reduce", 8_000_000_000),
    row(0, "send", 8, 9, "pp", nbytes=4),
    row(1, "compute", 0, 2),
    row(1, "collective", 2.5, 7.5, "dp", "all_reduce", 8_000_000_000),
])


def test_interval_arithmetic():
    assert union([(3, 5), (0, 1), (0.5, 2), (5, 6)]) == [(0, 2), (3, 6)]
    assert minus([(0, 10)], [(1, 2), (4, 6), (9, 12)]) == 10 - 1 - 2 - 1


def test_rank_metrics():
    m = rank_metrics(STEPS).set_index("rank")
    assert (m.loc[0, ["time", "compute", "communication", "exposed", "idle"]].tolist() ==
            [9, 6, 5, 3, 0])
    assert (m.loc[1, ["time", "compute", "communication", "exposed", "idle"]].tolist() ==
            [7.5, 2, 5, 5, 0.5])


def test_iteration_time_spans_every_rank():
    assert iteration_times(STEPS)["time"].tolist() == [9]


def test_an_iteration_begins_when_the_one_before_it_has_ended_everywhere():
    """Write flows: rank 1 sends to rank 0 in 0-3 and is done; it posts its next write at once
    (starts iteration 1 at 3), which waits for rank 0, busy until 5 with rank 2's write, and
    runs 5-8. Iteration 1 takes 5-8 (3 s), not 3-8 (5 s): the 3-5 wait is iteration 0's. The
    iterations' times add up to the loop's 8 s."""
    flows = pd.DataFrame([
        row(1, "send", 0, 3, iteration=0), row(2, "send", 0, 5, iteration=0),
        row(0, "recv", 0, 5, iteration=0),
        row(1, "send", 3, 8, iteration=1), row(2, "send", 5, 8, iteration=1),
        row(0, "recv", 5, 8, iteration=1),
        row(0, "recv", 8, 9, iteration=2), row(1, "send", 8, 9, iteration=2)])
    t = iteration_times(flows)
    assert t["time"].tolist() == [5, 3, 1] and t["start"].tolist() == [0, 5, 8]
    # each transport's iterations on their own: rocev2's iteration 1 is not begun by mrc's end
    both = pd.concat([flows, flows.assign(transport="rocev2", start=flows["start"] - 100,
                                          end=flows["end"] - 100)])
    t = iteration_times(both).set_index(["transport", "iteration"])["time"]
    assert t.tolist() == [5, 3, 1, 5, 3, 1]


def test_busbw_of_a_call():
    """The call runs from rank 1's start (2.5, the earlier) to rank 1's end (7.5, the later):
    5 s for 8 GB on 2 ranks: algbw 1.6 GB/s, x 2(n-1)/n = 1."""
    (call,) = collective_calls(STEPS).to_dict("records")
    assert call["time"] == 5
    assert call["ranks"] == 2
    assert call["busbw"] == pytest.approx(1.6)


def test_group_exposed():
    """dp: rank 0 exposed 2, rank 1 exposed 5: mean 3.5, max 5. pp: rank 0 only, 1."""
    g = group_exposed(STEPS).set_index("group")
    assert g.loc["dp", ["exposed_mean", "exposed_max", "ranks"]].tolist() == [3.5, 5, 2]
    assert g.loc["pp", ["exposed_mean", "ranks"]].tolist() == [1, 1]


def test_lanes_of_each_rank():
    """Rank 0 computes 0-4 and 6-8, so within its span 0-9 it waits 4-6 and 8-9; rank 1
    computes 0-2 and waits 2-7.5. Times since t0 = 0.5."""
    lanes = rank_lanes(STEPS, 0.5)

    def of(rank, lane):
        sel = lanes[(lanes["rank"] == rank) & (lanes["lane"] == lane)]
        return list(zip(sel["start"], sel["end"], strict=True))
    assert of(0, "compute") == [(-0.5, 3.5), (5.5, 7.5)]
    assert of(0, "communication") == [(2.5, 6.5), (7.5, 8.5)]
    assert of(0, "waiting") == [(3.5, 5.5), (7.5, 8.5)]
    assert of(1, "waiting") == [(1.5, 7.0)]


def test_pack_puts_overlapping_slices_on_other_lanes():
    """Sorted by start: (0,2) lane 0; (0.5,0.6) lane 1; (1,3): lane 0 busy until 2, lane 1
    free at 0.6; (2,4): lane 0 free at 2."""
    assert pack([(0, 2), (1, 3), (2, 4), (0.5, 0.6)]) == [0, 1, 0, 1]


def test_straggler_windows_as_scheduled():
    scenario = {"faults": [
        {"at": 1, "kind": "straggler", "target": {"host": "h3"}, "factor": 2, "duration": 2},
        {"at": 0.5, "kind": "link_down", "target": {"plane": 0, "leaf": 0, "spine": 0}},
        {"at": 4, "kind": "straggler", "target": {"host": "h1"}, "factor": 1.5}]}
    w = straggler_windows(scenario, t_end=9.0)
    assert w[["label", "start", "end"]].values.tolist() == [["straggler h3 x2", 1.0, 3.0],
                                                          ["straggler h1 x1.5", 4.0, 9.0]]


def test_trace_events_structure():
    """Rank tracks: rank 0's compute needs one track, its comm one (the all-reduce 3-7 and
    the send 8-9 do not overlap); the dp group's call spans 2.5-7.5; one fault window (its
    times already since t0). Times in us since t0 = 0.5."""
    windows = pd.DataFrame([{"label": "straggler h1 x2", "start": 1.0, "end": 2.0}])
    trace = json.loads(json.dumps(trace_events(STEPS, 0.5, windows, {0: "h0", 1: "h1"})))
    events = trace["traceEvents"]
    names = {(e["pid"], e.get("tid")): e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] in ("process_name", "thread_name")}
    assert names[(0, None)] == "rank 0 (h0)" and names[(1, None)] == "rank 1 (h1)"
    assert names[(0, 0)] == "compute" and names[(0, 1)] == "communication"
    assert names[(GROUPS_PID, 0)] == "dp"
    slices = [e for e in events if e["ph"] == "X"]
    assert all({"name", "cat", "ts", "dur", "pid", "tid"} <= set(e) for e in slices)
    assert len(slices) == 6 + 1 + 1  # every node, the dp call, the fault
    (call,) = [e for e in slices if e["pid"] == GROUPS_PID]
    assert (call["ts"], call["dur"]) == (2e6, 5e6)
    (fault,) = [e for e in slices if e["cat"] == "fault"]
    assert (fault["name"], fault["ts"], fault["dur"]) == ("straggler h1 x2", 1e6, 1e6)
    send = next(e for e in slices if e["cat"] == "send")
    assert (send["pid"], send["tid"], send["ts"], send["dur"]) == (0, 1, 7.5e6, 1e6)
    assert send["args"]["group"] == "pp"
    # no two slices of one track partly overlap (a viewer would nest them wrongly)
    for track in {(e["pid"], e["tid"]) for e in slices}:
        spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in slices
                       if (e["pid"], e["tid"]) == track)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))


def test_overlapping_communication_gets_a_second_track():
    steps = pd.DataFrame([row(0, "collective", 0, 2, "a", "all_reduce", 4),
                          row(0, "collective", 1, 3, "b", "all_reduce", 4)])
    events = trace_events(steps, 0.0, pd.DataFrame(columns=["label", "start", "end"]),
                          {0: "h0"})["traceEvents"]
    tracks = {e["tid"] for e in events if e["ph"] == "X" and e["pid"] == 0}
    names = {e["args"]["name"] for e in events if e["name"] == "thread_name" and e["pid"] == 0}
    assert len(tracks) == 2 and names == {"compute", "communication", "communication 2"}


def test_a_step_iteration_has_no_busbw():
    ccts = pd.DataFrame({"kind": ["step"], "bytes": [100], "cct": [1.0]})
    assert bandwidth(ccts, 4)["busbw"].isna().all()


def _frame(times, comm):
    """Per iteration of t s, rank 0 computes, then both ranks all-reduce for the last c s."""
    rows = []
    for it, (t, c) in enumerate(zip(times, comm, strict=True)):
        base = 100.0 * it
        rows += [row(0, "compute", base, base + t - c, iteration=it),
                 row(0, "collective", base + t - c, base + t, "dp", "all_reduce", 4,
                     iteration=it),
                 row(1, "collective", base + t - c, base + t, "dp", "all_reduce", 4,
                     iteration=it)]
    return pd.DataFrame(rows).assign(host=lambda f: "h" + f["rank"].astype(str))


def _view(folder, label, times, comm, transport="mrc", scenario=None):
    """A step run's view with the scenario it ran."""
    folder.mkdir()
    run = SimpleNamespace(steps=_frame(times, comm), world=2, dir=folder, transport=transport,
                          scenario=scenario or {"name": label},
                          facts=SimpleNamespace(scenario="s", ctrl_deps_dropped=None,
                                                algorithm=None))
    return SimpleNamespace(label=label, run=run)


def _cells(text):
    return {line[:24].strip(): line[24:].split() for line in text.splitlines()
            if not line.startswith("#")}


def test_summary_table_side_by_side(tmp_path):
    """mrc: t = 10, 20, 30: p50 20 s, p99 interpolated 20 + 0.98 x 10 = 29.8 s; rocev2:
    t = 10, 10, 40: p50 10 s, p99 10 + 0.98 x 30 = 39.4 s (in ms in the table)."""
    text = step_report.table([_view(tmp_path / "a", "mrc", [10, 20, 30], [2, 2, 2]),
                              _view(tmp_path / "b", "rocev2", [10, 10, 40], [1, 4, 7],
                                    "rocev2")])
    lines = _cells(text)
    assert lines["iterations"] == ["3", "3"]
    assert lines["step time p50"] == ["20000.0", "10000.0"]
    assert lines["step time p99"] == ["29800.0*", "39400.0*"]
    # exposed per member: rank 0 the all-reduce after its compute, rank 1 all of it (no
    # compute): mean of 2 per iteration; rocev2 (1 + 4 + 7) / 3 = 4
    assert lines["exposed dp"] == ["2000.0", "4000.0"]
    assert "step p50 / control" not in lines  # no run has a control: no ratio rows


HEALTHY = {"name": "step", "seed": 1, "fabric": {"planes": 2}, "workload": {"iterations": 3}}
FAULT = {**HEALTHY, "name": "step-blackhole", "seed": 2, "description": "a T1 blackhole",
         "workload": {"iterations": 12, "warmup": 1},
         "faults": [{"at": 1, "kind": "blackhole"}]}


def test_a_fault_run_pairs_with_the_healthy_run_of_its_scenario_and_transport():
    other_fabric = {**FAULT, "fabric": {"planes": 4}}
    other_step = {**FAULT, "workload": {"iterations": 3, "training": {"dp": 2}}}
    pairs = step_report.pair_controls([
        ("ctl mrc", "mrc", HEALTHY), ("ctl rocev2", "rocev2", HEALTHY),
        ("bh mrc", "mrc", FAULT), ("bh rocev2", "rocev2", FAULT),
        ("4p mrc", "mrc", other_fabric), ("dp mrc", "mrc", other_step),
        ("bg mrc", "mrc", {**HEALTHY, "background": [{}]})])
    assert pairs == {"ctl mrc": None, "ctl rocev2": None, "bh mrc": "ctl mrc",
                     "bh rocev2": "ctl rocev2", "4p mrc": None, "dp mrc": None,
                     "bg mrc": "ctl mrc"}


def test_summary_table_gives_each_fault_run_its_slowdown_against_the_control(tmp_path):
    """Control: steps of 10, 20, 30 s (p50 20, p99 29.8), exposed 2 s on dp. Fault run:
    15, 30, 90 s (p50 30, p99 30 + 0.98 x 60 = 88.8), exposed 3, 3, 9 (mean 5): ratios
    30/20 = 1.5, 88.8/29.8 = 2.98, 5/2 = 2.5."""
    text = step_report.table([
        _view(tmp_path / "c", "control", [10, 20, 30], [2, 2, 2], scenario=HEALTHY),
        _view(tmp_path / "f", "fault", [15, 30, 90], [3, 3, 9], scenario=FAULT)])
    lines = _cells(text)
    assert lines["step p50 / control"] == ["-", "1.50x"]
    assert lines["step p99 / control"] == ["-", "2.98x"]
    assert lines["exp. dp / control"] == ["-", "2.50x"]
    assert lines["exposed / control"] == ["-", "2.50x"]
    assert "#   fault: against its healthy control control" in text


def _step_view(folder: Path, label: str) -> SimpleNamespace:
    """A step run of 2 ranks as the summary reads it."""
    steps = pd.DataFrame([row(0, "compute", 0, 1), row(1, "compute", 0, 2)]).assign(
        host=["h0", "h1"])
    run = SimpleNamespace(steps=steps, tables={"steps": steps}, world=2, meta=run_meta(),
                          dir=folder, transport="mrc", scenario={"name": "s"},
                          messages=pd.DataFrame(), events=pd.DataFrame(),
                          facts=SimpleNamespace(scenario="s", ctrl_deps_dropped=None,
                                                algorithm=None))
    return SimpleNamespace(label=label, run=run, recoveries=pd.DataFrame())


def test_the_summary_of_step_runs_is_the_step_table(tmp_path):
    text = summary.text([_step_view(tmp_path, "mrc")])
    assert text.startswith("# training step on 2 ranks (s), timed iterations\n")
    assert "step time p50" in text and "fidelity mrc: not judged" in text


@pytest.mark.parametrize("fault, control", [
    ("training-t1-blackhole", "training-quickstart"),
    ("training-host-flap", "training-quickstart"),
    ("training-slow-rank", "training-quickstart"),
    ("training-degrade", "training-quickstart"),
    ("training-16-blackhole", "training-16"),
    ("training-moe-flap", "training-moe")])
def test_each_shipped_fault_twin_pairs_with_its_healthy_scenario(fault, control):
    folder = Path(__file__).resolve().parents[3] / "scenarios"
    runs = [(f"{name} {t}", t, yaml.safe_load((folder / f"{name}.yaml").read_text()))
            for name in (fault, control) for t in ("mrc", "rocev2")]
    pairs = step_report.pair_controls(runs)
    assert pairs[f"{fault} mrc"] == f"{control} mrc"
    assert pairs[f"{fault} rocev2"] == f"{control} rocev2"


def test_a_summary_of_collective_and_step_runs_has_each_table(tmp_path):
    """A run of jobs reports a collective job beside a step job (flows, training): each in its
    own table, where one table for both failed on the step's kind."""
    from analysis.load import load_run
    from analysis.report import views_of
    from tests.unit.made_runs import made_run

    collective = views_of([load_run(made_run(tmp_path / "c"))])[0]
    text = summary.text([collective, _step_view(tmp_path, "incast mrc")])
    assert text.startswith("# all_reduce of 1024 B on 4 ranks (o)\n")
    assert "# training step on 2 ranks (s), timed iterations\n" in text
