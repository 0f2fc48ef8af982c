"""The files of a results folder and the columns both sides rely on."""
from __future__ import annotations

from typing import Final, get_args

from runcontract.meta import Status

META: Final = "meta.json"  # what ran, on what, how it ended; `facts` for the analysis
SCENARIO: Final = "scenario.yaml"  # the scenario as run, byte for byte
SUMMARY: Final = "summary.txt"  # the nccl-tests style table the terminal printed

# `meta.json` status: `running` until the run ends; `gave_up` when it ran to its end but a QP
# exhausted its retries (`gave_up` lists them); `crashed` is written by a later clean-up of a
# run whose runner died.
STATUSES: Final = get_args(Status)

# Tables every report needs; the others may be absent (older runs, no faults) or empty (RoCEv2
# has no EVs).
REQUIRED_TABLES: Final = ("iterations", "messages", "qps")
OPTIONAL_TABLES: Final = ("paths", "ev_states", "links", "events", "ev_load", "link_gaps",
                          "cpu", "steps")

ITERATION_COLUMNS: Final = ("host", "rank", "transport", "kind", "iteration", "warmup", "start",
                            "end", "bytes", "verified", "error")
# A training step (workload.training): one row per node of each rank in each iteration, its
# start and end (wall clock), kind (compute, collective, send, recv), group and bytes;
# iterations.parquet then holds one row of kind "step" per rank and iteration.
STEP_COLUMNS: Final = ("host", "rank", "transport", "iteration", "warmup", "node", "name",
                       "kind", "collective", "group", "peer", "bytes", "start", "end",
                       "verified", "error")
# One row per fault action: `applied` is when its last node was done, `lag` that minus
# `scheduled`, `spread` from its first node's change to its last (s); `holder` the fault whose
# condition it turns on or off (a link_up ends its link_down's).
EVENT_COLUMNS: Final = ("event", "kind", "target", "condition", "on", "links", "scheduled",
                        "applied", "lag", "spread", "holder", "params", "note")

# The fidelity monitor's tables. link_gaps: one row per port and histogram bucket, `gaps` the
# backlogged dequeues later than the port's virtual link by less than `edge_pct` % of a full
# packet's time (and at least the previous bucket's edge; the last edge is inf), the port's
# totals repeated on each row (`backlogged` dequeues measured, `gap_ns` and `late_ns` summed).
# cpu: one row per sampling interval ending at `time` (wall clock): machine-wide busy share, its
# softirq part (where the fabric forwards), its steal part (a hypervisor running other guests
# while this machine's virtual CPUs wanted to run), the share of the interval some task waited
# for a CPU (PSI; null where the kernel lacks it) and the share of all cores the sampling
# process used (`process`: the runner; in the cluster mode, the server's agent).
LINK_GAP_COLUMNS: Final = ("node", "ifname", "link", "kind", "plane", "rate_bps", "dequeues",
                           "backlogged", "gap_ns", "late_ns", "bucket", "edge_pct", "gaps")
CPU_COLUMNS: Final = ("time", "interval_s", "busy", "softirq", "steal", "psi_some", "process")


def table_file(name: str) -> str:
    return f"{name}.parquet"
