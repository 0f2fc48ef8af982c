"""Without root, each command that needs it says so once, naming the command line to repeat
with sudo: the command the user ran, not another one."""
from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import pytest

from testbed import cli

DRILL = str(Path(__file__).resolve().parents[2] / "drills" / "smoke.yaml")


@pytest.fixture
def not_root(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)


@pytest.mark.parametrize("argv", [
    ["drill", DRILL, "--results", "/tmp/somewhere"],
    ["calibrate"],
    ["clean"],
    ["run", "scenarios/quickstart.yaml", "--hold", "5"],
    ["--debug", "run"],
])
def test_the_hint_names_the_command_that_was_run(argv: list[str], not_root, capsys,
                                                 monkeypatch):
    monkeypatch.setattr(sys, "argv", ["/opt/venv/bin/mrc-testbed", *argv])
    if "--debug" in argv:
        with pytest.raises(Exception) as info:
            cli.main(argv)
        assert "sudo /opt/venv/bin/mrc-testbed --debug run" in str(info.value)
        return
    assert cli.main(argv) == 3
    err = capsys.readouterr().err
    command = argv[0]
    assert f"`mrc-testbed {command}` needs root" in err
    assert f"sudo /opt/venv/bin/mrc-testbed {shlex.join(argv)}`" in err
    assert err.count("error:") == 1 and "Traceback" not in err


def test_started_some_other_way_the_hint_names_the_venvs_program(not_root, capsys,
                                                                   monkeypatch):
    monkeypatch.setattr(sys, "argv", ["/usr/lib/python3/dist-packages/pytest"])
    assert cli.main(["clean"]) == 3
    assert "`sudo .venv/bin/mrc-testbed clean`" in capsys.readouterr().err


def test_a_drill_judged_or_validated_needs_no_root(not_root, capsys):
    assert cli.main(["drill", DRILL, "--validate"]) == 0
    assert "needs root" not in capsys.readouterr().err
