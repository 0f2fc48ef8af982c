"""The run's tables and summary when an agent failed: the run must report the agent, not
crash on a table with a rank missing."""
from __future__ import annotations

import json
from pathlib import Path

from testbed import scenario
from testbed.fabric.plan import make_plan
from testbed.run.collect import collect
from testbed.run.traffic import AgentOutcome


def collect_table(out, res, outcomes, sc, transport, **tables) -> str:
    return collect(out, res, outcomes, make_plan(sc), transport, **tables).table


SC = scenario.parse("name: c\nworkload: {size: 1KiB, iterations: 2, warmup: 0}", "t")


def iteration(rank: int, host: str, k: int) -> dict:
    return {"rank": rank, "kind": "all_reduce", "iteration": k, "warmup": False,
            "start": 10.0 + k, "end": 10.5 + k, "bytes": 1024, "verified": True, "error": None}


def write(out: Path, host: str, iterations: list[dict]) -> None:
    (out / host).mkdir(parents=True)
    (out / host / "iterations.json").write_text(json.dumps(iterations))


def test_iterations_missing_a_rank_are_left_out_and_said(tmp_path: Path):
    out, res = tmp_path / "agents", tmp_path / "run"
    res.mkdir()
    hosts = SC.rank_hosts()
    for rank, host in enumerate(hosts):  # the last rank failed after its first iteration
        write(out, host, [iteration(rank, host, k) for k in range(1 if rank == 3 else 2)])
    outcomes = [AgentOutcome(h, r, 0, {}) for r, h in enumerate(hosts)]
    table = collect_table(out, res, outcomes, SC, "mrc")
    assert "1 iterations lack a rank (an agent failed); left out" in table
    assert "     1024" in table and (res / "iterations.parquet").exists()


def test_no_whole_iteration_gives_a_one_line_summary(tmp_path: Path):
    out, res = tmp_path / "agents", tmp_path / "run"
    res.mkdir()
    hosts = SC.rank_hosts()
    for rank, host in enumerate(hosts):
        write(out, host, [] if rank == 1 else [iteration(rank, host, 0)])
    table = collect_table(out, res, [AgentOutcome(h, r, 0, {}) for r, h in enumerate(hosts)],
                       SC, "mrc")
    assert table == ("# all_reduce over mrc (MRC, lossy, SACK, NSCC, trimming), 4 ranks: no "
                     "iteration completed on every rank (an agent failed)\n")


def link_row(node: str, time: float, overflow: int | None) -> dict:
    """A row as the telemetry sampler writes it; a host port has no eBPF counters."""
    bpf = None if overflow is None else 0
    return {"time": time, "node": node, "ifname": f"{node}-eth0", "link": f"{node}-x",
            "kind": "fabric", "plane": 0, "rx_bytes": 0, "rx_packets": 0, "rx_errors": 0,
            "rx_drop": 0, "tx_bytes": 0, "tx_packets": 0, "tx_errors": 0, "tx_drop": 0,
            "queue_backlog": None, "queue_drops": None, "ecn_marked": bpf, "trimmed": bpf,
            "bpf_dropped": bpf, "lossless_overflow": overflow, "vq_bytes": bpf}


def test_the_summary_names_the_variant_and_lossless_overflow(tmp_path: Path):
    """The table's head names what ran; a lossless run says whether any router port dropped
    past its lossless limit (counters are cumulative: a port's count is its last minus its
    first, and host ports carry none)."""
    lossless = scenario.parse("name: c\nswitch: {lossless: true}\n"
                              "workload: {size: 1KiB, iterations: 2, warmup: 0}", "t")
    hosts = lossless.rank_hosts()
    for sub, rows, says in (
            ("none", [link_row("p0l0", 1.0, 0), link_row("p0l0", 2.0, 0),
                      link_row("h0", 2.0, None)], "none (no router port dropped past"),
            ("some", [link_row("p0l0", 1.0, 2), link_row("p0l0", 2.0, 9),
                      link_row("p0s1", 1.0, 0), link_row("p0s1", 2.0, 1)],
             "8 packets at 2 ports (most 7 at p0l0 p0l0-eth0) dropped past the lossless limit")):
        out, res = tmp_path / sub / "agents", tmp_path / sub / "run"
        res.mkdir(parents=True)
        for rank, host in enumerate(hosts):
            write(out, host, [iteration(rank, host, k) for k in range(2)])
        table = collect_table(out, res, [AgentOutcome(h, r, 0, {}) for r, h in enumerate(hosts)],
                           lossless, "rocev2", link_rows=rows)
        assert table.startswith("# all_reduce over rocev2 (RoCEv2, lossless, Go-Back-N, DCQCN)")
        assert f"# Lossless overflow    : {says}" in table
    out, res = tmp_path / "lossy" / "agents", tmp_path / "lossy" / "run"
    res.mkdir(parents=True)
    for rank, host in enumerate(hosts):
        write(out, host, [iteration(rank, host, k) for k in range(2)])
    table = collect_table(out, res, [AgentOutcome(h, r, 0, {}) for r, h in enumerate(hosts)],
                       SC, "rocev2", link_rows=[link_row("p0l0", 1.0, 0)])
    assert "RoCEv2, lossy, Go-Back-N, DCQCN" in table and "Lossless" not in table


def test_the_summary_gives_the_share_of_the_ideal_with_latency(tmp_path: Path):
    """1 KiB all-reduce on 4 ranks, 0.5 s an iteration: the ideal with latency (ideal.py's
    tests check its arithmetic) over 0.5 s is the share printed."""
    from testbed.run.ideal import ideal_iteration
    out, res = tmp_path / "agents", tmp_path / "run"
    res.mkdir()
    hosts = SC.rank_hosts()
    for rank, host in enumerate(hosts):
        write(out, host, [iteration(rank, host, k) for k in range(2)])
    outcomes = [AgentOutcome(h, r, 0, {}) for r, h in enumerate(hosts)]
    table = collect_table(out, res, outcomes, SC, "mrc")
    best = ideal_iteration(make_plan(SC), "mrc")
    assert best is not None
    line = next(x for x in table.splitlines() if x.startswith("# Ideal with latency"))
    assert "(6 steps: " in line and line.endswith(f"measured {best.seconds / 0.5:.0%} of it")


def test_a_step_table_counts_a_wait_in_one_step_only():
    """Rank 1 is done with step 0 at 3 and starts step 1 at once, which cannot go on before
    rank 0 ends step 0 at 5: step 1 takes 5-8, 3 s (not 5 s from rank 1's start)."""
    from hostagent.workloads.iterations import IterationRecord
    from testbed.run.collect import step_table

    def rec(rank: int, iteration: int, start: float, end: float) -> IterationRecord:
        return IterationRecord("step", rank, iteration, iteration == 0, start, end, 0, True,
                               None)
    table = step_table([rec(0, 0, 0, 5), rec(1, 0, 0, 3), rec(0, 1, 5, 8), rec(1, 1, 3, 8),
                        rec(0, 2, 8, 9.5), rec(1, 2, 8, 9)], 2, "mrc", "flows")
    rows = [line.split() for line in table.splitlines() if not line.startswith("#")]
    assert rows == [["1", "3000.0", "2/2"], ["2", "1500.0", "2/2"]]
