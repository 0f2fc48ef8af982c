"""Which runs a drill makes, in which order, and finding them again to judge them."""
from __future__ import annotations

from pathlib import Path

import pytest

from testbed.errors import ScenarioError
from testbed.lifecycle.progress import Progress
from testbed.run import drill as run_drill
from testbed.run.drill import found, plan
from testbed.scenario.drill import parse_drill

DRILL = """name: d
scenario:
  faults: [{at: 0.1, kind: link_down, target: {plane: 0, leaf: 0, spine: 0}, duration: 0.2}]
repetitions: 2
seeds: [7, 9]
objectives: {mrc: {goodput_ratio: 0.5}}
"""


def runs_of(text: str) -> list[tuple[str, str, int]]:
    """(transport, folder, seed) of every run the drill makes, in order."""
    return [(s.transport, s.folder, s.seed) for s in plan([parse_drill(text, "d.yaml")])]


def test_each_repetition_runs_right_after_a_control_on_its_own_seed():
    """The default, `every_seed`: per transport, control k then repetition k, both on seed k."""
    expected = [(t, f, seed) for t in ("mrc", "rocev2")
                for k, seed in ((1, 7), (2, 9)) for f in (f"control{k}", f"rep{k}")]
    assert runs_of(DRILL) == expected
    assert runs_of(DRILL + "control: every_seed\n") == expected


def test_first_seed_runs_one_control_before_the_repetitions_and_none_runs_no_control():
    assert runs_of(DRILL + "control: first_seed\n") == [
        ("mrc", "control", 7), ("mrc", "rep1", 7), ("mrc", "rep2", 9),
        ("rocev2", "control", 7), ("rocev2", "rep1", 7), ("rocev2", "rep2", 9)]
    assert [f for _, f, _ in runs_of(DRILL + "control: none\n")] == ["rep1", "rep2"] * 2
    for mode in ("every_seed", "first_seed"):
        calm = f"name: c\nscenario: {{}}\ncontrol: {mode}\nobjectives: {{mrc: {{}}}}\n"
        assert [f for _, f, _ in runs_of(calm)] == ["rep1", "rep2", "rep3"] * 2, (
            "no faults: nothing to control")


def test_control_is_one_of_three_modes():
    for wrong in ("true", "every", "[first_seed]"):
        with pytest.raises(ScenarioError, match="control"):
            parse_drill(DRILL + f"control: {wrong}\n", "d.yaml")


def test_earlier_runs_are_found_to_judge_again(tmp_path: Path):
    d = parse_drill(DRILL, "d.yaml")
    for transport in ("mrc", "rocev2"):
        for sub in ("control", "rep1", "rep2"):
            (tmp_path / "d" / transport / sub / f"2026-{sub}").mkdir(parents=True)
    runs = found([d], tmp_path)
    assert [(r.transport, [p.name for p in r.controls], [p.name for p in r.repetitions],
             r.paired) for r in runs] == [
        ("mrc", ["2026-control"], ["2026-rep1", "2026-rep2"], False),
        ("rocev2", ["2026-control"], ["2026-rep1", "2026-rep2"], False)]
    with pytest.raises(ScenarioError, match="no runs of drill d over mrc"):
        found([d], tmp_path / "elsewhere")


def test_per_seed_controls_are_found_paired_with_their_repetitions(tmp_path: Path):
    """controlN pairs with repN, in repetition order (rep10 after rep2); the half of a pair
    that left no run stands as its folder, for the judge to find without data."""
    d = parse_drill(DRILL, "d.yaml")
    folder = tmp_path / "d" / "mrc"
    for sub in ("rep1", "rep2", "rep10", "control1", "control10"):
        (folder / sub / f"2026-{sub}").mkdir(parents=True)
    (folder / "control2").mkdir()  # the control ran, but left no run folder
    (tmp_path / "d" / "rocev2" / "rep1" / "2026-rep1").mkdir(parents=True)
    mrc, _ = found([d], tmp_path)
    assert mrc.paired
    assert [p.name for p in mrc.repetitions] == ["2026-rep1", "2026-rep2", "2026-rep10"]
    assert mrc.controls == [folder / "control1" / "2026-control1", folder / "control2",
                            folder / "control10" / "2026-control10"]


def test_the_runner_runs_and_pairs_each_control_with_its_seed(tmp_path: Path, monkeypatch):
    """Through run_drills with the fabric left out: each control runs without faults on its
    repetition's seed, just before it, and comes back paired with it."""
    ran: list[tuple[str, int, int]] = []

    def fake_run(scenario, text, options, progress):
        folder = options.results_base
        ran.append((f"{folder.parent.name}/{folder.name}", scenario.seed, len(scenario.faults)))
        made = folder / f"run-{len(ran)}"
        made.mkdir()
        return [made]

    monkeypatch.setattr(run_drill, "run", fake_run)
    d = parse_drill(DRILL.replace("objectives:", "transports: [mrc]\nobjectives:"), "d.yaml")
    (runs,) = run_drill.run_drills([d], tmp_path, Progress(quiet=True))
    assert ran == [("mrc/control1", 7, 0), ("mrc/rep1", 7, 1),
                   ("mrc/control2", 9, 0), ("mrc/rep2", 9, 1)]
    assert runs.paired
    assert [p.name for p in runs.controls] == ["run-1", "run-3"]
    assert [p.name for p in runs.repetitions] == ["run-2", "run-4"]


def test_every_transport_runs_the_same_seeds_and_each_control_on_its_repetitions():
    """With seeds given, one repetition per seed; without, the scenario's seed onwards. Either
    way each transport's list of seeds is the same, and so are its controls' (first_seed:
    the first only)."""
    for text, seeds in [(DRILL.replace("repetitions: 2\n", "").replace("[7, 9]", "[4, 2, 8, 6]"),
                         [4, 2, 8, 6]),
                        (DRILL.replace("seeds: [7, 9]\n", "").replace("scenario:\n",
                                                                         "scenario:\n  seed: 5\n"),
                         [5, 6])]:
        for mode, controls in (("every_seed", seeds), ("first_seed", seeds[:1])):
            steps = plan([parse_drill(text + f"control: {mode}\n", "d.yaml")])
            for transport in ("mrc", "rocev2"):
                mine = [s for s in steps if s.transport == transport]
                assert [s.seed for s in mine if not s.control] == seeds
                assert [s.seed for s in mine if s.control] == controls
