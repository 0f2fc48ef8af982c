"""The command's process and signals outside a run's own regions (those: test_interrupts.py):
a signal between two steps ends it with 130 and a line saying so; one that arrives once the
command has returned its status leaves that status, rather than killing the process by the
signal (the interpreter's shutdown restores the default actions of the signals it handles)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def _command(tmp_path: Path, setup: str) -> subprocess.CompletedProcess[str]:
    code = ("import os, signal, sys, atexit, time\n"
            "import testbed.cli as cli\n"
            f"sys.argv[1:] = ['list', '--results', {str(tmp_path)!r}]\n"
            f"{setup}\n"
            "sys.exit(cli.command())\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP", "SIGINT"])
def test_a_signal_during_the_command_exits_130_saying_so(tmp_path: Path, sig: str):
    res = _command(tmp_path, "def stopped(args):\n"
                             f"    os.kill(os.getpid(), signal.{sig}); time.sleep(5)\n"
                             "cli._cmd_list = stopped")
    assert res.returncode == 130, res.stderr
    assert f"interrupted by {sig}" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP", "SIGINT"])
def test_a_signal_after_the_command_returned_keeps_its_status(tmp_path: Path, sig: str):
    res = _command(tmp_path, f"atexit.register(lambda: os.kill(os.getpid(), signal.{sig}))")
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr and "interrupted" not in res.stderr
