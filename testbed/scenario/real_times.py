"""Which times a scenario states in the real fabric's frame once `fabric.real_rate` is set.

With `real_rate`, these times are the real fabric's, and the testbed runs them D times longer
(testbed/fabric/frame.py, where D is the time dilation); without it they are emulated seconds,
as they always were. Because the same bare number would mean D times longer with `real_rate`
than without, a time here must name its unit there ("1us", "2ms"): a file written for the
emulated frame fails loudly instead of silently running D times longer. Transport timers join
them (testbed/fabric/timers.py). Other times (routing's convergence delay, the verification and
telemetry periods) stay emulated seconds and keep bare numbers.
"""
from __future__ import annotations

from typing import Any

# section -> its fields that are times in the real frame; "[]" marks a list of such sections
REAL_FRAME_TIMES: dict[str, tuple[str, ...]] = {
    "fabric": ("hop_latency", "nic_latency"),
    "qp": ("timeout",),
    "mrc": ("probe_interval", "probe_timeout", "congestion_holdoff"),
    "workload": ("compute_gap",),
    "workload.training": ("forward", "backward"),
    "faults[]": ("at", "duration", "period", "until", "delay"),
    "background[]": ("at", "duration"),
    "jobs[]": ("start",),
    "jobs[].workload": ("compute_gap",),
    "jobs[].workload.training": ("forward", "backward"),
}
FAULT_TIMES = REAL_FRAME_TIMES["faults[]"]
BACKGROUND_TIMES = REAL_FRAME_TIMES["background[]"]


def _sections(data: Any, path: str) -> list[tuple[str, dict[str, Any]]]:
    """The mappings at `path` in raw scenario data, each with its printable field path."""
    found: list[tuple[str, Any]] = [("", data)]
    for part in path.split("."):
        many = part.endswith("[]")
        key = part.removesuffix("[]")
        step: list[tuple[str, Any]] = []
        for where, node in found:
            value = node.get(key) if isinstance(node, dict) else None
            prefix = f"{where}.{key}" if where else key
            if many and isinstance(value, list):
                step += [(f"{prefix}.{i}", item) for i, item in enumerate(value)]
            elif not many and value is not None:
                step.append((prefix, value))
        found = step
    return [(where, node) for where, node in found if isinstance(node, dict)]


def bare_numbers(data: Any) -> list[str]:
    """Paths of the real-frame times in raw scenario data written as bare, non-zero numbers."""
    out = []
    for path, fields in REAL_FRAME_TIMES.items():
        for where, section in _sections(data, path):
            out += [f"{where}.{name}" for name in fields
                    if isinstance(section.get(name), (int, float))
                    and not isinstance(section.get(name), bool) and section.get(name) != 0]
    return out
