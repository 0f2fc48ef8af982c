"""The files of a results folder (its tables' columns: tables.py)."""
from __future__ import annotations

from typing import Final, get_args

from runcontract.meta import Status
from runcontract.tables import TABLES

META: Final = "meta.json"  # what ran, on what, how it ended; `facts` for the analysis
SCENARIO: Final = "scenario.yaml"  # the scenario as run, byte for byte
SUMMARY: Final = "summary.txt"  # the nccl-tests style table the terminal printed

# `meta.json` status: `running` until the run ends; `gave_up` when it ran to its end but a QP
# exhausted its retries (`gave_up` lists them); `crashed` is written by a later clean-up of a
# run whose runner died.
STATUSES: Final = get_args(Status)


def table_file(name: str) -> str:
    return TABLES[name].file
