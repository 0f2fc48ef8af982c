"""The results contract: what a run's folder holds, as both sides know it.

The testbed writes a results folder; `analysis` reads it. Both depend on this package and on
nothing of each other: `analysis` never imports `testbed`, so a report can be made on a machine
without Mininet, root or the scenario language, from the folder alone.
"""
from runcontract.errors import UserError
from runcontract.facts import BackgroundWindow, RunFacts
from runcontract.files import META, SCENARIO, STATUSES, SUMMARY, table_file
from runcontract.meta import SCHEMA_VERSION, MetaError, RunMeta, parse_meta, read_meta
from runcontract.tables import (
    CPU_COLUMNS,
    EVENT_COLUMNS,
    ITERATION_COLUMNS,
    LINK_GAP_COLUMNS,
    OPTIONAL_TABLES,
    REQUIRED_TABLES,
    STEP_COLUMNS,
    TABLES,
)

__all__ = ["CPU_COLUMNS", "EVENT_COLUMNS", "ITERATION_COLUMNS", "LINK_GAP_COLUMNS", "META",
           "OPTIONAL_TABLES", "REQUIRED_TABLES", "SCENARIO", "SCHEMA_VERSION", "STATUSES",
           "STEP_COLUMNS", "SUMMARY", "TABLES", "BackgroundWindow", "MetaError", "RunFacts",
           "RunMeta", "UserError", "parse_meta", "read_meta", "table_file"]
