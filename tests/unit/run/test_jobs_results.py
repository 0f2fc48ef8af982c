"""A run of several jobs on disk: each job's folder ends as the run does (a job none of whose
QPs gave up completed), a report of the run is a report of each job's folder, and the summary's
comparison of each job together against alone."""
from __future__ import annotations

from runcontract.meta import GaveUp, JobRecord, read_meta
from testbed.cli import job_folders
from testbed.run.results import RunResults
from testbed.run.runner import jobs_table
from testbed.scenario import parse
from testbed.scenario.job_views import views

TEXT = ("fabric: {planes: 1, leaves_per_plane: 2, hosts_per_leaf: 2, spines_per_plane: 2}\n"
        "jobs:\n  - {name: a, hosts: [h0, h1]}\n  - {name: b, hosts: [h2, h3]}\n")


def record(name: str, time_s: float | None, solo: float | None, verdict: str = "faithful"
           ) -> JobRecord:
    return JobRecord(name=name, hosts=["h0", "h1"], placement="hosts as listed", start_s=0.0,
                     transport="mrc", time_s=time_s, solo_time_s=solo, solo_run=f"solo/{name}",
                     solo_verdict=verdict)


def test_job_folders_end_with_the_run(tmp_path):
    sc = parse(TEXT, "t.yaml", "t")
    run = RunResults(tmp_path, sc, TEXT, 1, "mrc")
    assert run.meta.facts is None, "a run of several jobs has its jobs' facts, not its own"
    for view in views(sc):
        part = RunResults(run.dir / "jobs", view.scenario, TEXT, 1, "mrc", folder=view.name)
        assert part.meta.facts is not None and part.meta.facts.collective == "all_reduce"
        run.parts.append(part)
    run.parts[0].meta.gave_up = [GaveUp(host="h0", peer_host="h1", rank=0, peer=1, qpn=1,
                                        after_s=1.0, timeouts=13, retry_budget_s=4.8,
                                        reason="retries exhausted")]
    run.finish("gave_up", None, {})
    assert [read_meta(run.dir / "jobs" / n).status for n in ("a", "b")] == ["gave_up",
                                                                              "complete"]
    run.finish("interrupted", "interrupted", {})
    assert {read_meta(run.dir / "jobs" / n).status for n in ("a", "b")} == {"interrupted"}


def test_a_report_of_a_run_of_jobs_is_one_of_each_job_then_each_control(tmp_path):
    sc = parse(TEXT, "t.yaml", "t")
    run = RunResults(tmp_path, sc, TEXT, 1, "mrc")
    assert job_folders(run.dir) == [run.dir]  # no job recorded yet: the folder itself
    run.meta.jobs = [record("a", 0.2, 0.1), record("b", 0.3, None)]
    run.save()
    assert job_folders(run.dir) == [run.dir / "jobs" / "a", run.dir / "jobs" / "b",
                                    run.dir / "solo" / "a", run.dir / "solo" / "b"]


def test_the_comparison_divides_together_by_alone():
    text = jobs_table([record("a", 0.150, 0.100), record("b", 0.2, None)], "faithful")
    a, b = text.splitlines()[2:4]
    assert "150.00 ms" in a and "100.00 ms" in a and "1.500x" in a
    assert b.split()[3:7] == ["200.00", "ms", "-", "-"]
    assert "NOT a result" not in text
    assert "NOT a result" in jobs_table([record("a", 0.1, 0.1, "degraded")], "faithful")
    assert "NOT a result" in jobs_table([record("a", 0.1, 0.1)], "degraded")
