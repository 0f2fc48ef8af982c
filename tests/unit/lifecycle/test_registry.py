"""The run registry survives damage, never deletes another run's file, and a clean-up signals
only processes it can prove are the run's."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from runcontract.meta import RunMeta
from testbed.errors import EnvironmentProblem
from testbed.lifecycle import cleanup, registry
from testbed.lifecycle.files import write_meta
from testbed.lifecycle.registry import NodeRecord, RunRecord, RunRegistry


@pytest.fixture
def state(tmp_path: Path, monkeypatch) -> Path:
    folder = tmp_path / "state"
    monkeypatch.setattr(registry, "STATE_DIR", folder)
    return folder


def test_a_bad_line_or_file_is_skipped_and_reported_never_fatal(state: Path):
    good = RunRegistry("good", state / "r", "x")
    good.add_node("h0", os.getpid(), 123)
    with open(good.path, "a") as fh:
        fh.write('{"node": "h1", "pid": 4')  # torn by a SIGKILL
    (state / "garbage.jsonl").write_text("not json\n")
    (state / "list.jsonl").write_text("[1, 2]\n")
    problems: list[str] = []
    records = registry.read_all(problems)
    assert [r.run_id for r in records] == ["good"]
    assert records[0].nodes == {"h0": NodeRecord(os.getpid(), 123,
                                                 registry.start_time(os.getpid()))}
    assert len(problems) == 3 and any("line 3" in p for p in problems)
    assert (state / "garbage.jsonl").exists() and (state / "list.jsonl").exists()
    good.close()


def test_an_empty_file_is_a_run_being_born_and_is_left_alone(state: Path):
    state.mkdir()
    (state / "newborn.jsonl").write_text("")
    assert registry.read_all() == []
    assert (state / "newborn.jsonl").exists()


def test_a_registry_file_is_created_exclusively(state: Path):
    state.mkdir()
    victim = state.parent / "victim"
    victim.write_text("precious")
    (state / "r1.jsonl").symlink_to(victim)
    with pytest.raises(FileExistsError):
        RunRegistry("r1", state, "x")
    assert victim.read_text() == "precious"


def test_the_registry_marks_every_process_of_the_run(state: Path):
    reg = RunRegistry("marked-run", state, "x")
    try:
        out = subprocess.run([sys.executable, "-c", "import os; print(os.environ['"
                              + registry.RUN_ENV + "'])"], capture_output=True, text=True)
        assert out.stdout.strip() == "marked-run"
    finally:
        reg.close()
    assert registry.RUN_ENV not in os.environ


def test_only_one_run_holds_the_lock(state: Path):
    with registry.run_lock():
        child = subprocess.run(
            [sys.executable, "-c", "from testbed.lifecycle import registry as r; "
             f"r.STATE_DIR = __import__('pathlib').Path({str(state)!r}); "
             "import contextlib\n"
             "try:\n with r.run_lock(): print('got it')\n"
             "except Exception as e: print(type(e).__name__, e)"],
            capture_output=True, text=True, timeout=20)
        assert "EnvironmentProblem another run is active" in child.stdout
        assert f"pid {os.getpid()}" in child.stdout
    with registry.run_lock():  # released at the end of the first
        pass


def test_a_symlinked_state_folder_is_refused(tmp_path: Path, monkeypatch):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    monkeypatch.setattr(registry, "STATE_DIR", tmp_path / "link")
    with pytest.raises(EnvironmentProblem, match="not a folder of this user"):
        RunRegistry("x", tmp_path, "x")


# ---- clean-up: the namespace inode alone is never enough -----------------------------------

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="namespaces need root")


def _in_new_netns(argv: list[str], env: dict | None = None) -> subprocess.Popen:
    proc = subprocess.Popen(["unshare", "--net", "--", *argv], env=env)
    _until(lambda: cleanup.netns_of(proc.pid) != cleanup.netns_of("self"))
    return proc


def _until(condition) -> None:
    deadline = time.monotonic() + 5
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.01)


def _alive(proc: subprocess.Popen) -> bool:
    """Not Popen.poll(): the clean-up reaps its own dead children, and poll() then says None."""
    return registry.start_time(proc.pid) is not None


def _record(run_id: str, results: Path, nodes: dict[str, NodeRecord]) -> RunRecord:
    return RunRecord(run_id, 999_999_999, None, str(results), "x", nodes)


@needs_root
def test_a_reused_namespace_inode_does_not_get_another_tools_processes_killed(tmp_path):
    """The record names a namespace inode whose shell is long gone; the kernel gave the inode
    to another tool's namespace. Its processes carry no mark of the run: they live."""
    env = {k: v for k, v in os.environ.items() if k != registry.RUN_ENV}
    other = _in_new_netns(["sleep", "30"], env)
    try:
        ino = cleanup.netns_of(other.pid)
        record = _record("dead-run", tmp_path, {"h0": NodeRecord(other.pid + 10**6, ino, 1)})
        assert cleanup.clean_record(record, "crashed") == 0
        assert _alive(other)
    finally:
        other.kill()
        other.wait()


@needs_root
def test_the_init_namespace_is_never_touched(tmp_path):
    """Init's namespace (here also the caller's; a sandbox may hide pid 1's)."""
    bystander = subprocess.Popen(["sleep", "30"],
                                 env=os.environ | {registry.RUN_ENV: "dead-run"})
    try:
        root_ns = cleanup.netns_of(1) or cleanup.netns_of("self")
        record = _record("dead-run", tmp_path, {"h0": NodeRecord(
            bystander.pid, root_ns, registry.start_time(bystander.pid))})
        assert cleanup.clean_record(record, "crashed") == 0
        assert _alive(bystander)
    finally:
        bystander.kill()
        bystander.wait()


@needs_root
def test_a_proven_shell_takes_its_whole_namespace_and_marked_processes_go_too(tmp_path):
    shell = _in_new_netns([sys.executable, "-c", "import time; time.sleep(30)", "mininet:h0"])
    ino = cleanup.netns_of(shell.pid)
    helper = subprocess.Popen(["nsenter", f"--net=/proc/{shell.pid}/ns/net", "sleep", "30"])
    # the clean-up proves the shell by its command line and finds the helper by its namespace:
    # both must be in place first (unshare and nsenter exec their commands a moment later)
    _until(lambda: b"mininet:h0" in Path(f"/proc/{shell.pid}/cmdline").read_bytes())
    _until(lambda: cleanup.netns_of(helper.pid) == ino)
    orphan = _in_new_netns(["sleep", "30"], os.environ | {registry.RUN_ENV: "dead-run"})
    try:
        record = _record("dead-run", tmp_path, {
            "h0": NodeRecord(shell.pid, ino, registry.start_time(shell.pid)),
            "h1": NodeRecord(orphan.pid + 10**6, cleanup.netns_of(orphan.pid), 5)})
        write_meta(tmp_path, RunMeta(run_id="dead-run", scenario="x", transport=None, seed=1,
                                     status="running", started=datetime.now(timezone.utc)))
        assert cleanup.clean_record(record, "crashed") >= 3
        assert not any(_alive(p) for p in (shell, helper, orphan))
        assert json.loads((tmp_path / "meta.json").read_text())["status"] == "crashed"
    finally:
        for p in (shell, helper, orphan):
            p.kill()
            p.wait()


def test_servers_and_folders_are_read_back(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(registry, "STATE_DIR", tmp_path)
    run = registry.RunRegistry("r1", tmp_path / "results", "q")
    run.add_named_netns("mrc-abc-hub")
    run.add_node("h0", 123, None)
    run.add_named_netns("mrc-abc-srv0")
    run.add_dir(tmp_path / "r1.ssh")
    run.add_node("h0", 123, 4026531999)
    (record,) = registry.read_all()
    assert record.named_netns == ["mrc-abc-hub", "mrc-abc-srv0"]
    assert record.dirs == [str(tmp_path / "r1.ssh")]
    node = record.nodes["h0"]  # the later line completes the first
    assert (node.pid, node.netns) == (123, 4026531999)
    run.close()
    assert registry.read_all() == []


def test_servers_are_recorded_with_their_clean_command_and_cleaned_first(state: Path):
    """A cluster run's servers: each cleaned by its recorded command (over ssh in a run;
    here a shell that answers as a server's `--clean` does); one that fails is a problem,
    and the record is kept for another `clean`."""
    run = RunRegistry("cl", state / "r", "x")
    run.add_server("s1", ["sh", "-c", "echo noise; echo '{\"killed\": 3, \"nodes\": 2}'"])
    run.add_server("s2", ["sh", "-c", "echo 'ssh: connect: no route' >&2; exit 255"])
    (record,) = registry.read_all()
    assert list(record.servers) == ["s1", "s2"]
    record.runner_start = None  # as if its runner had died
    problems: list[str] = []
    assert cleanup.clean_record(record, "test", problems) == 3
    assert problems == ["server s2: clean-up over ssh failed (exit 255): ssh: connect: no "
                        "route"]
    assert run.path.exists()  # s2 still holds what it held: `clean` again once reachable
    run.add_server("s2", ["sh", "-c", "echo '{\"killed\": 0}'"])  # reachable now
    (record,) = registry.read_all()
    problems = []
    assert cleanup.clean_record(record, "test", problems) == 3 and not problems
    assert not run.path.exists()
    run.close()


def test_a_server_recorded_under_the_agents_former_module_is_cleaned_under_its_own(state: Path):
    """A record of an earlier version names the server agent's module as it was then; the
    clean-up runs the command with the module's current name (here a shell that answers as
    `--clean` does only when it is given that name)."""
    answer = ('case "$1" in *"-m testbed.cluster.server_agent --clean"*) '
              'echo \'{"killed": 2}\';; *) echo "no module $1" >&2; exit 1;; esac')
    run = RunRegistry("old", state / "r", "x")
    run.add_server("s1", ["sh", "-c", answer, "sh",
                          "cd / && exec python -P -m testbed.emulation.cluster.server_agent "
                          "--clean /run/x s1"])
    (record,) = registry.read_all()
    record.runner_start = None  # as if its runner had died
    problems: list[str] = []
    assert cleanup.clean_record(record, "test", problems) == 2 and not problems
    run.close()
