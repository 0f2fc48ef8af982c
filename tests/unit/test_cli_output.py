"""`report` and `compare` where their output cannot go: one message, the exit status of a
problem the user fixes (not 1, a bug), and a fix that says how to choose another folder."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from analysis import render
from testbed import cli
from tests.unit.made_runs import made_run


@pytest.fixture
def runs(tmp_path: Path) -> list[str]:
    return [str(made_run(tmp_path / "results", t)) for t in ("mrc", "rocev2")]


@pytest.fixture
def no_notebook(monkeypatch):
    """The folder is refused before any notebook runs; one that got that far is a failure."""
    import papermill

    def execute(*_args, **_kwargs):
        raise AssertionError("the notebook ran although its folder was refused")
    monkeypatch.setattr(papermill, "execute_notebook", execute)


@pytest.mark.parametrize("where", ["a file", "under a file", "not writable"])
def test_compare_whose_out_cannot_be_written_exits_2_naming_out(where: str, runs, tmp_path,
                                                                no_notebook, monkeypatch,
                                                                capsys):
    (tmp_path / "file").write_text("")
    out = {"a file": tmp_path / "file", "under a file": tmp_path / "file" / "cmp",
           "not writable": tmp_path / "locked"}[where]
    if where == "not writable":  # root writes anywhere: this user is refused instead
        out.mkdir()
        real = os.access
        monkeypatch.setattr(render.os, "access",
                            lambda p, mode: False if Path(p) == out else real(p, mode))
    assert cli.main(["compare", *runs, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and str(out) in err
    assert "fix: give `--out DIR`" in err
    assert "internal error" not in err and "Traceback" not in err


def test_compare_whose_default_folder_cannot_be_made_names_out(runs, tmp_path, no_notebook,
                                                               monkeypatch, capsys):
    monkeypatch.setattr(render, "default_compare_dir", lambda _runs: tmp_path / "nope" / "x")
    (tmp_path / "nope").write_text("")
    assert cli.main(["compare", *runs]) == 2
    assert "--out DIR" in capsys.readouterr().err


def test_report_that_cannot_go_to_the_run_nor_the_cache_exits_3(runs, tmp_path, no_notebook,
                                                                monkeypatch, capsys):
    (tmp_path / "cache").write_text("")  # XDG_CACHE_HOME a file: nothing can be made under it
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    run = Path(runs[0])
    real = os.access
    monkeypatch.setattr(render.os, "access", lambda p, mode: False if Path(p) in (
        run, run / "report") else real(p, mode))
    assert cli.main(["report", str(run)]) == 3
    err = capsys.readouterr().err
    assert "cannot make the report folder" in err and "XDG_CACHE_HOME" in err
    assert "internal error" not in err


def test_a_reader_that_leaves_early_gets_no_error():
    """`mrc-testbed schema | head -1`: the pipe closes under the command, which ends quietly
    with SIGPIPE's status, as a shell tool does. The pipe holds 4 KiB, so the schema (some
    60 KiB) cannot fit in it before the reader leaves."""
    import fcntl
    import subprocess
    import sys
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096)
    proc = subprocess.Popen([sys.executable, "-m", "testbed.cli", "schema"], stdout=write_end,
                            stderr=subprocess.PIPE)
    os.close(write_end)
    assert os.read(read_end, 10)
    os.close(read_end)  # the reader leaves
    err = proc.communicate(timeout=60)[1].decode()
    assert proc.returncode == 141 and err == ""
