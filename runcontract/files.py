"""The files of a results folder and the columns both sides rely on."""
from __future__ import annotations

from typing import Final

META: Final = "meta.json"  # what ran, on what, how it ended; `facts` for the analysis
SCENARIO: Final = "scenario.yaml"  # the scenario as run, byte for byte
SUMMARY: Final = "summary.txt"  # the nccl-tests style table the terminal printed

# `meta.json` status: `running` until the run ends; `crashed` is written by a later clean-up
# of a run whose runner died.
STATUSES: Final = ("running", "complete", "failed", "interrupted", "crashed")

# Tables every report needs; the others may be absent (older runs, no faults) or empty (RoCEv2
# has no EVs).
REQUIRED_TABLES: Final = ("iterations", "messages", "qps")
OPTIONAL_TABLES: Final = ("paths", "ev_states", "links", "events", "ev_load")

ITERATION_COLUMNS: Final = ("host", "rank", "transport", "kind", "iteration", "warmup", "start",
                            "end", "bytes", "verified", "error")
# One row per fault action: `applied` is when its last node was done, `lag` that minus
# `scheduled`, `spread` from its first node's change to its last (s); `holder` the fault whose
# condition it turns on or off (a link_up ends its link_down's).
EVENT_COLUMNS: Final = ("event", "kind", "target", "condition", "on", "links", "scheduled",
                        "applied", "lag", "spread", "holder", "params", "note")


def table_file(name: str) -> str:
    return f"{name}.parquet"
