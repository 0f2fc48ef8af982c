"""The drill file: schema, its scenario by path or embedded, and the variants each run runs."""
from __future__ import annotations

from pathlib import Path

import pytest

from testbed.errors import ScenarioError
from testbed.scenario.drill import drill_files, json_schema, load_drill, parse_drill

ROOT = Path(__file__).resolve().parents[3]
EMBEDDED = """name: d
scenario:
  workload: {iterations: 3}
  faults: [{at: 0.1, kind: link_down, target: {plane: 0, leaf: 0, spine: 0}, duration: 0.2}]
repetitions: 2
objectives: {mrc: {goodput_ratio: 0.5}}
"""


def error(text: str) -> str:
    with pytest.raises(ScenarioError) as info:
        parse_drill(text, "d.yaml")
    return str(info.value)


def test_an_embedded_scenario_and_its_variants():
    d = parse_drill(EMBEDDED, "d.yaml")
    assert d.transports == ["mrc", "rocev2"] and d.scenario.name == "d"
    control, _ = d.variant("mrc", 1, faults=False)
    assert control.faults == [] and control.transport == ["mrc"]
    rep, text = d.variant("rocev2", d.drill.run_seeds(d.scenario)[1])
    assert rep.seed == 2 and len(rep.faults) == 1 and rep.transport == ["rocev2"]
    assert "seed: 2" in text  # what the run's folder keeps


def test_the_lossless_variant_is_rocev2_over_a_lossless_switch():
    """`rocev2-lossless` runs the same scenario as RoCEv2 with `switch: {lossless: true}`,
    its other switch settings kept; the other transports' runs stay lossy."""
    d = parse_drill(EMBEDDED.replace("repetitions: 2", "transports: [mrc, rocev2, "
                                     "rocev2-lossless]\nrepetitions: 2")
                    .replace("workload:", "switch: {ecn: true}\n  workload:"), "d.yaml")
    assert d.transports == ["mrc", "rocev2", "rocev2-lossless"]
    lossless, text = d.variant("rocev2-lossless", 1)
    assert lossless.transport == ["rocev2"] and lossless.switch.lossless
    assert lossless.switch.ecn and "lossless: true" in text
    control, _ = d.variant("rocev2-lossless", 1, faults=False)
    assert control.switch.lossless and control.faults == []
    for other in ("mrc", "rocev2"):
        run, _ = d.variant(other, 1)
        assert run.transport == [other] and not run.switch.lossless


def test_problems_are_listed_with_their_paths_and_the_keys_allowed():
    message = error("name: d\nscenario: {}\nobjectives: {mrc: {goodput_ratoi: 0.5}, "
                    "tcp: {}}\nrepetitions: 0\n")
    assert "invalid drill (3 problems)" in message
    assert "objectives.mrc.goodput_ratoi: unknown key; did you mean 'goodput_ratio'?" in message
    assert "repetitions: 0 is not allowed" in message
    assert "'tcp' is not allowed" in message


@pytest.mark.parametrize("text, message", [
    (EMBEDDED + "seeds: [1, 2, 3]\n", "seeds has 3 entries for 2 repetitions"),
    (EMBEDDED + "seeds: [4, 4]\n", "repeat a seed"),
    (EMBEDDED.replace("repetitions: 2", "transports: [rocev2]"),
     "objectives for mrc, which the drill does not run"),
    ("name: d\nscenario: {fabric: {plnaes: 2}}\nobjectives: {}\n",
     "fabric.plnaes: unknown key; did you mean 'planes'?"),
    ("name: d\nscenario: nowhere.yaml\nobjectives: {}\n", "nowhere.yaml: no such scenario file"),
    (EMBEDDED.replace("{goodput_ratio: 0.5}", "{step_slowdown: 1.05, exposed_ratio: 2}"),
     "objectives mrc.exposed_ratio, mrc.step_slowdown judge training steps, but the "
     "scenario's workload is a collective"),
    (EMBEDDED + "report: [exposed_ratio, max_stall_ms]\n",
     "objectives report.exposed_ratio judge training steps"),
    (EMBEDDED + "report: [goodput_ratio]\n", "report.0: 'goodput_ratio' is not allowed"),
    (EMBEDDED + "transports: [mrc, rocev2-pfc]\n", "'rocev2-pfc' is not allowed"),
])
def test_bad_drills_are_refused(text: str, message: str):
    assert message in error(text)


def test_step_objectives_on_a_training_scenario():
    d = parse_drill(EMBEDDED.replace("{iterations: 3}", "{iterations: 3, training: {dp: 4}}")
                    .replace("{goodput_ratio: 0.5}", "{step_slowdown: 1.05}"), "d.yaml")
    assert d.drill.objectives["mrc"].step_slowdown == 1.05
    assert d.drill.objectives["mrc"].model_dump()["exposed_ratio"] is None


def test_shipped_drills_load_and_the_schema_is_published():
    files = drill_files([ROOT / "drills"])
    assert len(files) >= 5
    for f in files:
        d = load_drill(f)
        assert d.drill.objectives, f"{f}: a shipped drill states objectives"
        assert d.drill.seeds is not None, f"{f}: a shipped drill names its seeds"
        assert f.name == "smoke.yaml" or len(d.drill.seeds) >= 3, f"{f}: at least 3 seeds"
    assert json_schema()["title"] == "mrc-testbed drill"


def test_a_scenario_of_several_jobs_is_refused_with_where_its_comparison_is():
    text = EMBEDDED.replace("workload: {iterations: 3}",
                            "jobs: [{name: a, hosts: [h0, h1]}, {name: b, hosts: [h2, h3]}]")
    assert "jobs" in text
    assert "the scenario has jobs" in error(text)
