"""`drill --judge` judges a drill's runs again without overwriting the verdicts the drill
wrote when it ran: the new ones go to a folder of their own, and the output says where both
are."""
from __future__ import annotations

from pathlib import Path

import pytest

from testbed import cli
from testbed.errors import EnvironmentProblem
from tests.unit.made_runs import made_run

SMOKE = str(Path(__file__).resolve().parents[2] / "drills" / "smoke.yaml")
ORIGINAL = {"drills.txt": "the table as the drill ran\n", "drills.json": "[]\n",
            "junit.xml": "<testsuites/>\n"}


def drill_folder(base: Path) -> Path:
    """What `mrc-testbed drill drills/smoke.yaml` leaves: one control and one repetition of
    MRC, and its verdicts."""
    for sub in ("control1", "rep1"):
        made_run(base / "smoke" / "mrc" / sub, "mrc")
    for name, text in ORIGINAL.items():
        (base / name).write_text(text)
    return base


def test_judging_again_keeps_the_first_verdicts_and_says_where_each_are(tmp_path: Path,
                                                                          capsys):
    base = drill_folder(tmp_path / "20261201T000000Z-drills")
    status = cli.main(["drill", SMOKE, "--judge", str(base)])
    assert status in (0, 5, 6)
    out = capsys.readouterr().out
    assert {n: (base / n).read_text() for n in ORIGINAL} == ORIGINAL
    (judged,) = base.glob("judged-*")
    assert sorted(p.name for p in judged.iterdir()) == sorted(ORIGINAL)
    assert (judged / "drills.txt").read_text() != ORIGINAL["drills.txt"]
    assert f"drills: {judged / 'junit.xml'}" in out
    assert f"stay in {base}/" in out


def test_a_second_judgement_in_the_same_second_gets_its_own_folder(tmp_path: Path, capsys):
    base = drill_folder(tmp_path / "d")
    first = cli._judgement_folder(base, (2026, 12, 5, 12, 0, 0, 5, 339, 0))
    second = cli._judgement_folder(base, (2026, 12, 5, 12, 0, 0, 5, 339, 0))
    assert first != second and first.is_dir() and second.is_dir()
    assert first.name == "judged-20261205T120000Z"


def test_a_folder_the_verdicts_cannot_go_to_is_one_message(tmp_path: Path):
    (tmp_path / "file").write_text("")
    with pytest.raises(EnvironmentProblem, match="cannot write the verdicts"):
        cli._judgement_folder(tmp_path / "file", (2026, 12, 5, 12, 0, 0, 5, 339, 0))
