"""Which runs a drill makes, in which order, and finding them again to judge them."""
from __future__ import annotations

from pathlib import Path

import pytest

from testbed.errors import ScenarioError
from testbed.run.drill import found, plan
from testbed.scenario.drill import parse_drill

DRILL = """name: d
scenario:
  faults: [{at: 0.1, kind: link_down, target: {plane: 0, leaf: 0, spine: 0}, duration: 0.2}]
repetitions: 2
seeds: [7, 9]
objectives: {mrc: {goodput_ratio: 0.5}}
"""


def test_a_control_then_the_repetitions_per_transport():
    d = parse_drill(DRILL, "d.yaml")
    steps = [(s.transport, s.repetition, s.seed) for s in plan([d])]
    assert steps == [("mrc", None, 7), ("mrc", 0, 7), ("mrc", 1, 9),
                     ("rocev2", None, 7), ("rocev2", 0, 7), ("rocev2", 1, 9)]
    quiet = parse_drill(DRILL + "control: false\n", "d.yaml")
    assert [s.repetition for s in plan([quiet])] == [0, 1, 0, 1]
    calm = parse_drill("name: c\nscenario: {}\nobjectives: {mrc: {}}\n", "c.yaml")
    assert None not in [s.repetition for s in plan([calm])], "no faults: nothing to control"


def test_earlier_runs_are_found_to_judge_again(tmp_path: Path):
    d = parse_drill(DRILL, "d.yaml")
    for transport in ("mrc", "rocev2"):
        for sub in ("control", "rep1", "rep2"):
            (tmp_path / "d" / transport / sub / f"2026-{sub}").mkdir(parents=True)
    runs = found([d], tmp_path)
    assert [(r.transport, [p.name for p in r.controls], [p.name for p in r.repetitions])
            for r in runs] == [("mrc", ["2026-control"], ["2026-rep1", "2026-rep2"]),
                               ("rocev2", ["2026-control"], ["2026-rep1", "2026-rep2"])]
    with pytest.raises(ScenarioError, match="no runs of drill d over mrc"):
        found([d], tmp_path / "elsewhere")


def test_every_transport_runs_the_same_seeds_and_its_control_on_the_first():
    """With seeds given, one repetition per seed; without, the scenario's seed onwards. Either
    way each transport's list of seeds is the same, its control on the first."""
    for text, seeds in [(DRILL.replace("repetitions: 2\n", "").replace("[7, 9]", "[4, 2, 8, 6]"),
                         [4, 2, 8, 6]),
                        (DRILL.replace("seeds: [7, 9]\n", "").replace("scenario:\n",
                                                                         "scenario:\n  seed: 5\n"),
                         [5, 6])]:
        steps = plan([parse_drill(text, "d.yaml")])
        for transport in ("mrc", "rocev2"):
            mine = [s for s in steps if s.transport == transport]
            assert [s.seed for s in mine if s.repetition is not None] == seeds
            assert [s.seed for s in mine if s.repetition is None] == seeds[:1]
