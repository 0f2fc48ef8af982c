"""What a new user reads first: `--help` of every subcommand and `--version`."""
from __future__ import annotations

import argparse
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

import testbed.version
from testbed import cli, entry

CHECKOUT = Path(__file__).resolve().parents[2]


def _subparsers() -> argparse._SubParsersAction:
    return next(a for a in cli._parser()._actions if isinstance(a, argparse._SubParsersAction))


def subcommands() -> dict[str, argparse.ArgumentParser]:
    return dict(_subparsers().choices)


def listed() -> dict[str, str | None]:
    """Each subcommand's line in `mrc-testbed --help`."""
    return {a.dest: a.help for a in _subparsers()._choices_actions}


def test_every_subcommand_and_argument_has_help_text():
    lines = listed()
    missing = []
    for name, sub in subcommands().items():
        if not lines.get(name):
            missing.append(name)
        missing += [f"{name} {a.option_strings or a.dest}" for a in sub._actions
                    if not isinstance(a, argparse._HelpAction) and not a.help]
    assert missing == []


def test_run_help_says_it_runs_the_workload_and_holding_is_an_option(capsys):
    run_line = listed()["run"] or ""
    assert "workload" in run_line and "hold" not in run_line
    with pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    own = " ".join(capsys.readouterr().out.split())
    assert "run the workload" in own
    hold = own.split("--hold SECONDS", 2)[2]  # the option's row, after the usage line
    assert "instead of running the workload" in hold.split("--cli", 1)[0]


def test_version_names_the_package_version_and_the_checkouts_commit(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["--version"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"mrc-testbed {metadata.version('mrc-testbed')}")
    head = subprocess.run(["git", "-C", str(CHECKOUT), "rev-parse", "HEAD"],
                          capture_output=True, text=True, check=True).stdout.strip()
    commit = out.split("(commit ", 1)[1].split(")")[0].split(",")[0]
    assert len(commit) >= 7 and head.startswith(commit)


def test_version_outside_a_checkout_names_no_commit(tmp_path: Path, monkeypatch, capsys):
    monkeypatch.setattr(testbed.version, "ROOT", tmp_path)
    with pytest.raises(SystemExit):
        cli.main(["--version"])
    out = capsys.readouterr().out
    assert out.strip() == f"mrc-testbed {metadata.version('mrc-testbed')}"


def test_version_answers_without_the_c_extension(monkeypatch, capsys):
    """A fresh clone, before `make dev`: the CLI cannot be imported, --version still works."""
    monkeypatch.setattr(sys, "argv", ["mrc-testbed", "--version"])
    monkeypatch.setitem(sys.modules, "testbed.cli", None)  # importing it raises ImportError
    assert entry.main() == 0
    assert capsys.readouterr().out.startswith(f"mrc-testbed {metadata.version('mrc-testbed')}")
