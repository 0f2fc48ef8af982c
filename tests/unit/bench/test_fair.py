"""The benches' fairness: every variant runs the same scenario copy on the same seeds, and a
run counts toward min / median / max only when it and its control were faithful."""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import pytest
import yaml

from analysis.load import RunError
from bench import fair, faults, paper
from bench.fair import (
    add_options,
    counted,
    header,
    parse_seeds,
    parse_variants,
    spread,
    table,
    variant_text,
    why,
)
from testbed.scenario.schema import Switch, parse

ROOT = Path(__file__).resolve().parents[3]
SCENARIO = """name: base
fabric: {planes: 2, host_link: {rate: 10Mbit}}
switch: {ecn: false}
workload: {iterations: 3}
"""


def test_every_variant_is_the_same_scenario_but_transport_seed_and_lossless():
    copies = {v: yaml.safe_load(variant_text(SCENARIO, v, 7)[1])
              for v in ("mrc", "rocev2", "rocev2-lossless")}
    original = yaml.safe_load(SCENARIO)
    for data in copies.values():
        assert data["seed"] == 7
        assert ({k: data[k] for k in ("fabric", "workload")} ==
                {k: original[k] for k in ("fabric", "workload")})
    assert copies["mrc"]["transport"] == ["mrc"] and copies["mrc"]["switch"] == {"ecn": False}
    assert copies["rocev2"]["transport"] == ["rocev2"]
    assert copies["rocev2"]["switch"] == {"ecn": False}, "lossy RoCEv2: the switch as it was"
    assert copies["rocev2-lossless"]["transport"] == ["rocev2"]
    assert copies["rocev2-lossless"]["switch"] == {"ecn": False, "lossless": True}
    names = {v: variant_text(SCENARIO, v, 7)[0] for v in copies}
    assert names == {"mrc": "base-s7", "rocev2": "base-s7", "rocev2-lossless": "base-s7-lossless"}
    with pytest.raises(ValueError, match="longer than 40"):
        variant_text(SCENARIO.replace("name: base", "name: " + "x" * 30), "rocev2-lossless", 1)


def test_the_condemn_variant_is_mrc_condemning_untrimmed_losses_and_runs_only_when_asked():
    name, text = variant_text(SCENARIO.replace("workload:", "mrc: {spray: random}\nworkload:"),
                              "mrc-condemn", 3)
    sc = parse(text, "t")
    assert name == "base-s3-condemn" and sc.transport == ["mrc"]
    assert sc.mrc.untrimmed_loss == "condemn" and sc.mrc.spray == "random"  # merged, not replaced
    assert parse(variant_text(SCENARIO, "mrc", 3)[1], "t").mrc.untrimmed_loss == "judge"
    ap = argparse.ArgumentParser()
    add_options(ap, "x")
    assert "mrc-condemn" not in parse_variants(ap.parse_args([]).variants)


def test_the_ev16_variant_condemns_with_16_evs_a_path():
    name, text = variant_text(SCENARIO, "mrc-condemn-ev16", 2)
    sc = parse(text, "t")
    assert name == "base-s2-condemn-ev16"
    assert (sc.mrc.untrimmed_loss, sc.mrc.evs_per_path) == ("condemn", 16)


def test_the_lossless_variant_of_a_trimming_scenario_is_a_valid_scenario():
    text = SCENARIO.replace("host_link: {rate: 10Mbit}", "host_link: {rate: 10Mbit, "
                            "buffer: 100KB, trim_threshold: 100KB}")
    parse(text, "t")  # valid as written: a lossy fabric trims at the threshold
    sc = parse(variant_text(text, "rocev2-lossless", 1)[1], "t")  # no trimming, no threshold
    assert sc.switch.lossless and sc.fabric.host_link.buffer == 100_000
    assert yaml.safe_load(variant_text(text, "mrc", 1)[1])["fabric"]["host_link"][
        "trim_threshold"] == "100KB"


@pytest.mark.parametrize("text, ok", [("1,2,3", [1, 2, 3]), ("3, 1", [3, 1]), ("1,1", None),
                                      ("", None), ("-1", None), ("x", None), ("1,a", None)])
def test_seeds_are_distinct_non_negative(text: str, ok: list[int] | None):
    if ok is None:
        with pytest.raises(ValueError, match="give distinct non-negative integers"):
            parse_seeds(text)
    else:
        assert parse_seeds(text) == ok


def test_variants_are_known():
    assert parse_variants("mrc,rocev2") == ["mrc", "rocev2"]
    with pytest.raises(ValueError, match="choose from"):
        parse_variants("mrc,roce")


def test_only_runs_judged_faithful_with_their_control_count():
    assert counted(["faithful", "faithful"]) and counted(["faithful"])
    assert not counted(["faithful", "degraded"]) and not counted(["not faithful"])
    assert not counted(["faithful", "no run"]) and not counted([])


def test_the_spread_leaves_out_excluded_runs_and_missing_values():
    s = spread([3.0, None, 1.0, 2.0, 10.0], [True, True, True, True, False])
    assert (s.n, s.runs, s.low, s.median, s.high) == (3, 5, 1.0, 2.0, 3.0)
    assert s.text() == "1.00/2.00/3.00"
    assert spread([0.5, 0.7], [False, False]).text() == "-"
    assert spread([1.0, 2.0, 4.0, 5.0], [True] * 4).median == 3.0  # the mean of the middle two


def test_the_report_starts_with_the_command_and_the_commit():
    top = header("bench/x.py", [".venv/bin/python", "-m", "bench.x", "--seeds", "1,2,3", "a b"])
    assert top.startswith("## bench/x.py\n")
    # as a shell would take it back
    assert "- command: `.venv/bin/python -m bench.x --seeds 1,2,3 'a b'`" in top
    assert re.search(r"^- commit: ([0-9a-f]{12}|\?)( \(with uncommitted changes\))?$", top, re.M)


def test_a_failed_run_says_why_in_one_cell():
    assert (why("error: x.yaml: invalid scenario\n  switch.lossless: unknown | key\n") ==
            "error: x.yaml: invalid scenario switch.lossless: unknown / key")
    assert why("a" * 50 + "the problem", limit=11) == "...the problem"
    assert why("") == "no output"


def test_a_markdown_table():
    assert table(["a", "b"], [[1, "x"]]) == "| a | b |\n|---|---|\n| 1 | x |\n"


def _row(experiment: str, variant: str, seed: int, whole: float, fidelity: str,
         control: str | None) -> dict:
    return {"experiment": experiment, "variant": variant, "seed": seed, "ratio_whole": whole,
            "cct": 0.5 / whole,
            "ratio_window": whole, "ratio_after": None, "n_window": 2, "failed_qps": 0,
            "retransmits": 0, "timeouts": 0, "fidelity": fidelity, "verified": True,
            "cct_before": None, "cct_window": None, "n_before": 0, "cpu": {},
            "control": None if control is None else {"fidelity": control, "cpu": {}, "cct": 0.5}}


def test_the_paper_report_excludes_a_row_whose_control_was_not_faithful():
    rows = [_row("gray-loss", "mrc", 1, 0.9, "faithful", "faithful"),
            _row("gray-loss", "mrc", 2, 0.5, "faithful", "degraded"),
            _row("gray-loss", "mrc", 3, 0.8, "faithful", "faithful"),
            _row("gray-loss", "rocev2", 1, 0.4, "faithful", "faithful"),
            _row("gray-loss", "rocev2", 2, 0.6, "faithful", "faithful"),
            _row("gray-loss", "rocev2", 3, 0.2, "faithful", "faithful")]
    out = paper.report(rows, ["gray-loss"], ["mrc", "rocev2", "rocev2-lossless"], [1, 2, 3],
                       [["gray-loss", "rocev2-lossless", 1, "control control", "invalid"]])
    assert "| gray-loss | rocev2-lossless | 1 | control control | invalid |" in out
    assert ("| gray-loss | mrc | 2 | 0.50 | 0.50 | - | 1000/500 | 2 | 0 | 0 | 0 | "
            "faithful/degraded **excluded** |" in out)
    summary = out.split("min/median/max")[1]
    assert ("| gray-loss | mrc | 2 of 3 | 0.80/0.85/0.90 | 0.80/0.85/0.90 | - |  | "
            "**runs excluded or missing** |" in summary)
    assert ("| gray-loss | rocev2 | 3 of 3 | 0.20/0.40/0.60 | 0.20/0.40/0.60 | - |  |  |"
            in summary)
    assert ("| gray-loss | rocev2-lossless | 0 of 3 | - | - | - |  | "
            "**runs excluded or missing** |" in summary)


def test_a_run_whose_qp_failed_gets_no_ratio():
    """A flapping port can exhaust a RoCEv2 QP's retries: its collective stops, and the
    iterations it finished first (often faster than the control's) are no ratio."""
    rows = [_row("host-flap", "rocev2", 1, 1.2, "faithful", "faithful"),
            _row("host-flap", "rocev2", 2, 0.4, "faithful", "faithful"),
            _row("host-flap", "rocev2", 3, 0.6, "faithful", "faithful")]
    rows[0]["failed_qps"] = 2
    summary = paper.report(rows, ["host-flap"], ["rocev2"], [1, 2, 3]).split("min/median")[1]
    assert ("| host-flap | rocev2 | 2 of 3 | 0.40/0.50/0.60 | 0.40/0.50/0.60 | - | 1 of 3 |  |"
            in summary)


def test_a_failed_run_is_no_result_with_its_reason(tmp_path: Path):
    """A QP that used up its retries stopped the collective: bench/faults.py reports the run
    as no result, naming the failure, instead of measuring the iterations it finished."""
    from tests.unit.analysis.test_hostile_runs import _run
    run = _run(tmp_path)  # a folder a run wrote, which ended `failed`
    with pytest.raises(RunError, match="the run failed: agent said"):
        faults.measure(run)


def test_the_faults_report_pairs_mrc_with_each_variant_seed_by_seed():
    def m(busbw: float, fidelity: str = "faithful") -> dict:
        return {"busbw": busbw, "share": busbw / 20.0, "p50": 100.0, "p99": 120.0, "n": 5,
                "retx": 0, "trims": 0, "verified": True, "fidelity": fidelity}

    runs = {("mrc", 1): m(18.0), ("mrc", 2): m(16.0), ("rocev2", 1): m(9.0),
            ("rocev2", 2): m(4.0, "degraded")}
    out = faults.report({"gray-loss": runs}, ["mrc", "rocev2"], [1, 2])
    summary = out.split("min/median/max")[1]
    assert "| gray-loss | mrc | 2 of 2 | 80%/85%/90% |" in summary
    # seed 2's RoCEv2 run was degraded: only seed 1's pair, 18 / 9
    assert ("| gray-loss | rocev2 | 1 of 2 | 45%/45%/45% | 120/120/120 | 2.00x/2.00x/2.00x | "
            "**runs excluded or missing** |" in summary)


def test_an_other_checkout_pairs_with_its_own_mrc_runs():
    """With --against, `rocev2@abc1234` is MRC@abc1234's peer, not this checkout's MRC."""
    def m(busbw: float) -> dict:
        return {"busbw": busbw, "share": busbw / 20.0, "p50": 100.0, "p99": 120.0, "n": 5,
                "retx": 0, "trims": 0, "verified": True, "fidelity": "faithful"}

    runs = {("mrc@abc1234", 1): m(12.0), ("mrc", 1): m(18.0), ("rocev2@abc1234", 1): m(3.0),
            ("rocev2", 1): m(9.0)}
    summary = faults.report({"spines": runs}, ["mrc@abc1234", "mrc", "rocev2@abc1234",
                                               "rocev2"], [1]).split("min/median/max")[1]
    assert ("| spines | rocev2@abc1234 | 1 of 1 | 15%/15%/15% | 120/120/120 | 4.00x/4.00x/4.00x"
            in summary)
    assert "| spines | rocev2 | 1 of 1 | 45%/45%/45% | 120/120/120 | 2.00x/2.00x/2.00x" in summary


def test_a_run_on_an_other_checkout_uses_its_interpreter_and_folder(tmp_path: Path,
                                                                     monkeypatch):
    other = tmp_path / "old"
    (other / ".venv" / "bin").mkdir(parents=True)
    (other / ".venv" / "bin" / "python").touch()
    seen = {}

    class Done:
        def __init__(self, argv, cwd, **_):
            seen.update(argv=argv, cwd=cwd)

        def communicate(self, timeout=None):
            return "", "no run"

    monkeypatch.setattr(fair.Checkout, "commit", lambda self: "abc1234")
    monkeypatch.setattr(fair.subprocess, "Popen", Done)
    file = tmp_path / "s.yaml"
    file.write_text("name: s\n")
    checkout = fair.Checkout(other)
    checkout.check()
    assert (fair.run_variant(file, "rocev2", 1, tmp_path / "out", checkout=checkout)
            == (None, "no run"))
    assert seen["argv"][0] == str(other / ".venv" / "bin" / "python") and seen["cwd"] == other
    fair.run_variant(file, "rocev2", 1, tmp_path / "out")
    assert seen["argv"][0] == sys.executable and seen["cwd"] == fair.ROOT
    with pytest.raises(ValueError, match="make install"):
        fair.Checkout(tmp_path / "nowhere").check()


def test_overrides_merge_into_the_copy_and_the_label_names_its_files(tmp_path: Path,
                                                                      monkeypatch):
    text = SCENARIO + "dcqcn: {cnp_rtts: 3}\n"
    overrides = {"dcqcn": {"timer_rtts": 7.0}, "switch": {"ecn": True}}
    name, copy = variant_text(text, "rocev2-lossless", 2, overrides)
    data = yaml.safe_load(copy)
    assert data["dcqcn"] == {"cnp_rtts": 3, "timer_rtts": 7.0}, "merged key by key"
    assert data["switch"] == {"ecn": True, "lossless": True}
    assert data["fabric"] == yaml.safe_load(SCENARIO)["fabric"] and name == "base-s2-lossless"
    assert parse(copy, "copy").dcqcn.timer_rtts == 7.0
    assert overrides == {"dcqcn": {"timer_rtts": 7.0}, "switch": {"ecn": True}}, "not mutated"
    seen = {}

    class Done:
        def __init__(self, argv, cwd, **_):
            seen.update(argv=argv)

        def communicate(self, timeout=None):
            return "", "no run"

    monkeypatch.setattr(fair.subprocess, "Popen", Done)
    file = tmp_path / "s.yaml"
    file.write_text(text)
    fair.run_variant(file, "rocev2", 1, tmp_path / "out", overrides=overrides, label="-t7")
    spec = tmp_path / "out" / "specs" / "base-s1-rocev2-t7.yaml"
    assert seen["argv"][4] == str(spec) and "timer_rtts: 7.0" in spec.read_text()
    assert seen["argv"][-1] == str(tmp_path / "out" / "runs" / "base-s1-rocev2-t7")


@pytest.mark.parametrize("which", list(paper.SETS))
def test_every_experiment_of_a_set_has_its_files_and_valid_variants(which: str):
    folder, experiments = paper.SETS[which]
    for fault, control in experiments.values():
        for stem in (fault, control):
            if stem is None:
                continue
            text = (folder / f"{stem}.yaml").read_text()
            for variant in ("mrc", "rocev2", "rocev2-lossless"):
                name, copy = variant_text(text, variant, 99)
                if variant == "rocev2-lossless" and "lossless" not in Switch.model_fields:
                    continue  # the schema has no lossless switch yet: the copy's name fits
                assert parse(copy, stem).name == name


@pytest.mark.parametrize("which", ["validation", "validation-real"])
def test_validation_scenarios_say_so_and_use_their_own_controls(which: str):
    folder, experiments = paper.SETS[which]
    files = sorted(folder.glob("*.yaml"))
    used = {s for pair in experiments.values() for s in pair if s is not None}
    assert {f.stem for f in files} == used, "every validation file is run, and only those"
    for f in files:
        assert f.read_text().splitlines()[1].startswith("# Validation scenario"), (
            f"{f.name}: says what it is, under its schema line")
        assert re.search(r"^# .*varies", f.read_text(), re.M), f"{f.name}: says what it varies"
    for fault, control in experiments.values():
        assert control is not None and control.endswith("-control"), fault
        assert fault.split("-")[0] == control.split("-")[0], f"{fault}: its own fabric's control"
        a, b = (parse((folder / f"{s}.yaml").read_text(), s) for s in (fault, control))
        assert (a.fabric == b.fabric and a.workload == b.workload and not b.faults
                and not b.background), f"{fault}: the control is the same run without the fault"


def test_paper_against_runs_each_variant_on_both_checkouts_with_its_own_control(
        tmp_path: Path, monkeypatch, capsys):
    """`bench/paper.py --against OLD`: OLD first on each seed, then this checkout, each fault
    run compared with the control run on the same code, labelled `VARIANT@COMMIT`."""
    other = tmp_path / "old"
    (other / ".venv" / "bin").mkdir(parents=True)
    (other / ".venv" / "bin" / "python").touch()
    monkeypatch.setattr(fair.Checkout, "commit", lambda self: "abc1234")
    calls: list[tuple[str, str, int, Path]] = []
    cct = {(True, "control"): 1.0, (True, "gray-loss"): 2.0,  # this checkout: ratio 0.5
           (False, "control"): 1.0, (False, "gray-loss"): 4.0}  # the other: 0.25

    def run_variant(file, variant, seed, out, checkout=fair.THIS):
        calls.append((file.stem, variant, seed, checkout.path))
        return tmp_path / f"{file.stem}-{checkout == fair.THIS}", ""

    def measure(d):
        this, stem = d.name.rsplit("-", 1)[1] == "True", d.name.rsplit("-", 1)[0]
        c = cct[(this, stem)]
        return {"seed": 1, "cct": c, "cct_window": c, "cct_after": c, "cct_before": None,
                "n_window": 1, "failed_qps": 0, "retransmits": 0, "timeouts": 0,
                "fidelity": "faithful", "verified": True}

    monkeypatch.setattr(fair, "run_variant", run_variant)
    monkeypatch.setattr(paper, "measure", measure)
    monkeypatch.setattr(sys, "argv", ["paper.py", "gray-loss", "--seeds", "1", "--variants",
                                      "rocev2", "--against", str(other),
                                      "--results", str(tmp_path / "out")])
    assert paper.main() == 0
    assert calls == [("control", "rocev2", 1, other.resolve()),
                     ("gray-loss", "rocev2", 1, other.resolve()),
                     ("control", "rocev2", 1, fair.ROOT), ("gray-loss", "rocev2", 1, fair.ROOT)]
    out = capsys.readouterr().out
    assert re.search(r"\| gray-loss \| rocev2@abc1234 \| 1 of 1 \| 0\.25/0\.25/0\.25 ", out)
    assert re.search(r"\| gray-loss \| rocev2 \| 1 of 1 \| 0\.50/0\.50/0\.50 ", out)


def test_an_older_checkout_without_lossless_mode_runs_no_lossless_variant(tmp_path: Path):
    """A checkout whose schema has no `switch.lossless` is asked once and left out of the
    lossless variant's runs, said in the report's header; the other variants still run."""
    old = tmp_path / "old"
    (old / ".venv" / "bin").mkdir(parents=True)
    python = old / ".venv" / "bin" / "python"
    python.write_text("#!/bin/sh\nexit 1\n")  # its schema check fails: no lossless mode
    python.chmod(0o755)
    other = fair.Checkout(old)
    plan = fair.pairs(["mrc", "rocev2-lossless"], [other, fair.THIS])
    assert plan == [("mrc", other), ("mrc", fair.THIS), ("rocev2-lossless", fair.THIS)]
    assert "rocev2-lossless@" in fair.left_out(["mrc", "rocev2-lossless"], [other, fair.THIS])
    assert fair.left_out(["mrc", "rocev2-lossless"], [fair.THIS]) == ""
    python.write_text("#!/bin/sh\nexit 0\n")  # a checkout that has it
    newer = fair.Checkout(tmp_path / "new")
    (newer.path / ".venv" / "bin").mkdir(parents=True)
    (newer.path / ".venv" / "bin" / "python").symlink_to(python)
    assert fair.supports(newer, "rocev2-lossless")


def test_again_finds_the_run_an_earlier_sitting_made_and_runs_nothing(tmp_path, monkeypatch):
    """`--again`: the newest run folder under the sitting's naming (the runs of one seed,
    variant and label), without running anything; none there: no folder and why."""
    from bench import fair
    scenario = tmp_path / "s.yaml"
    scenario.write_text("name: s\n")
    monkeypatch.setattr(fair, "run_variant", lambda *a, **k: pytest.fail("ran a run"))
    assert fair.run_or_earlier(scenario, "mrc", 2, tmp_path, True, label="-x") == (
        None, "no run folder in the sitting")
    runs = tmp_path / "runs" / "s-s2-mrc-x"
    for stamp in ("20261207T010000Z-s", "20261207T020000Z-s"):
        (runs / stamp).mkdir(parents=True)
    assert fair.run_or_earlier(scenario, "mrc", 2, tmp_path, True, label="-x") == (
        runs / "20261207T020000Z-s", "no run folder in the sitting")
