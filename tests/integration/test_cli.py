"""Every CLI command as a user runs it, and bad input that must build nothing."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from .helpers import ROOT, run_cli

BAD_FILES = {
    "typo.yaml": ("name: typo\nfabric: {plnaes: 2}\n",
                  "fabric.plnaes: unknown key; did you mean 'planes'?"),
    "shell.yaml": ('name: "x; rm -rf /"\n', "name: 'x; rm -rf /' is not allowed"),
    "impossible.yaml": ("name: imp\nfabric: {hosts: 9}\n", "set leaves_per_plane: 5"),
    "huge.yaml": ("name: huge\nfabric: {planes: 16, leaves_per_plane: 64, spines_per_plane: 64}\n",
                  "exceed this testbed's limit of 600"),
    "broken.yaml": ("name: [unclosed\n", "not valid YAML"),
}


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_bad_scenario_builds_nothing(name: str, tmp_path: Path, results_dir: Path):
    text, expected = BAD_FILES[name]
    file = tmp_path / name
    file.write_text(text)
    for args in (["validate", str(file)], ["run", str(file)]):
        res = run_cli(*args, results=results_dir)
        assert res.returncode == 2, res.stderr
        assert expected in res.stderr
        assert "Traceback" not in res.stderr and res.stdout == ""
    assert not results_dir.exists(), "a results folder was made for a file that never ran"


def test_validate_every_shipped_scenario():
    files = sorted(str(p) for p in (ROOT / "scenarios").glob("*.yaml"))
    res = run_cli("validate", *files)
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("ok: ") == len(files) >= 5
    assert "ref-64: 4 planes x (8 leaves + 4 spines), 64 hosts, 112 nodes, 384 links" in res.stdout


def test_missing_file():
    res = run_cli("validate", "no/such.yaml")
    assert res.returncode == 2 and "no/such.yaml: no such scenario file" in res.stderr


def test_schema_is_json_schema():
    res = run_cli("schema")
    schema = json.loads(res.stdout)
    assert set(schema["properties"]) >= {"name", "fabric", "naming", "verify", "seed"}
    assert schema["additionalProperties"] is False


def test_not_root_gets_one_line(results_dir: Path):
    if shutil.which("runuser") is None:
        pytest.skip("runuser (util-linux) is not installed")
    res = subprocess.run(["runuser", "-u", "nobody", "--", str(ROOT / ".venv/bin/python"), "-m",
                          "testbed.cli", "run", "--results", str(results_dir)],
                         capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert res.returncode == 3
    assert res.stderr.strip().splitlines() == [
        "error: `mrc-testbed run` needs root: it makes or removes network namespaces and the "
        "processes in them",
        f"  fix: run it with sudo: `sudo .venv/bin/mrc-testbed run --results {results_dir}`"]


def test_netem_latency_on_a_kernel_without_netem_builds_nothing(tmp_path: Path,
                                                                results_dir: Path):
    from testbed.kernel import features
    if features.probe_kernel()["netem"] is True:
        pytest.skip("this kernel has netem: the scenario would run")
    file = tmp_path / "netem.yaml"
    file.write_text("name: netem\nfabric: {hop_latency: 1ms, latency_by: netem}\n")
    res = run_cli("run", str(file), results=results_dir)
    assert res.returncode == 3, res.stderr
    errors = [line for line in res.stderr.splitlines() if line.startswith(("error", "  fix"))]
    assert errors[0].startswith("error: fabric.latency_by: netem delays every link, which "
                                "needs sch_netem: sch_netem missing"), res.stderr
    assert "latency_by: agents" in errors[1] and "Traceback" not in res.stderr
    assert not results_dir.exists()


def test_list_shows_how_runs_ended(results_dir: Path):
    assert run_cli("run", "--verify-only", results=results_dir).returncode == 0
    res = run_cli("list", results=results_dir)
    assert res.returncode == 0
    (line,) = [row for row in res.stdout.splitlines() if "quickstart" in row]
    assert "complete" in line


def test_clean_with_nothing_to_clean():
    res = run_cli("clean")
    assert res.returncode == 0
    assert "nothing to clean" in res.stdout


def test_vagrantfile_is_valid_ruby():
    if shutil.which("ruby") is None:
        pytest.skip("ruby is not installed (scripts/install.sh installs it)")
    res = subprocess.run(["ruby", "-c", str(ROOT / "Vagrantfile")], capture_output=True, text=True)
    assert res.returncode == 0 and "Syntax OK" in res.stdout
    text = (ROOT / "Vagrantfile").read_text()
    assert "scripts/install.sh" in text and "debian/bookworm64" in text
