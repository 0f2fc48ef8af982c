"""The summary of a flows workload (pure): each flow's goodput and its writes' completion
times, from the message table's rows (a write from posted to acknowledged). A send node's own
span is not a write's completion: it starts before its receiver's clear-to-send, so the first
write of an iteration would count the wait for the slowest flow of the one before."""
from __future__ import annotations

from typing import Any

from testbed.scenario import Scenario
from testbed.scenario.units import format_size


def _quantile(values: list[float], q: float) -> float:
    """The q-quantile of sorted `values` (nearest rank)."""
    return values[min(len(values) - 1, int(q * len(values)))]


def flow_lines(messages: list[dict[str, Any]], scenario: Scenario, transport: str) -> str:
    """A line per flow over the timed iterations, then the flows together against what the
    receivers' ports carry (the planes the transport uses x the host link's rate)."""
    hosts = scenario.rank_hosts()
    sends: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for row in messages:
        if not row["warmup"] and row["end"] is not None:
            sends.setdefault((row["rank"], row["peer"]), []).append(row)
    if not sends:
        return "# Flows                : no timed write completed\n"
    line_rate = scenario.ideal_busbw(transport)[0] * 8e9  # bit/s a host injects or takes
    lines, first, last, total = [], [], [], 0
    for (src, dst), rows in sorted(sends.items()):
        start, end = min(r["start"] for r in rows), max(r["end"] for r in rows)
        bits = 8 * sum(r["size"] for r in rows)
        fct = sorted(r["end"] - r["start"] for r in rows)
        first.append(start)
        last.append(end)
        total += bits
        lines.append(f"# flow {hosts[src]} -> {hosts[dst]}: {len(rows)} writes of "
                     f"{format_size(rows[0]['size'])}, goodput {bits / (end - start) / 1e6:.3g} "
                     f"Mbit/s, write completion p50 {_quantile(fct, 0.5) * 1e3:.1f} ms, p99 "
                     f"{_quantile(fct, 0.99) * 1e3:.1f} ms (n={len(fct)})")
    receivers = len({dst for _, dst in sends})
    rate = total / (max(last) - min(first))
    lines.append(f"# Flows together       : {rate / 1e6:.3g} Mbit/s into {receivers} receiver"
                 f"{'s' if receivers > 1 else ''}, {rate / (receivers * line_rate):.0%} of "
                 f"what their ports take ({line_rate / 1e6:.3g} Mbit/s each)")
    return "\n".join(lines) + "\n"
