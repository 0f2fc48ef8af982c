"""What an agent writes for the runner: its record files hold every field of every record, as
dataclasses.asdict would give them (the collector reads them into parquet)."""
from __future__ import annotations

import json
from dataclasses import asdict

from hostagent.runtime import agent
from hostagent.workloads.iterations import IterationRecord, MessageRecord
from hostagent.workloads.steps import NodeRecord


def test_record_files_hold_every_field_in_order():
    iteration = IterationRecord("all_reduce", 3, 1, False, 10.5, 11.25, 1 << 20, False,
                                "element 7 is 1.0")
    message = MessageRecord(3, 1, True, 4, 32768, 1.0, 2.5, 2, 1, [0, 2, 3])
    node = NodeRecord(3, 1, False, 5, "dp-allreduce", "collective", "all_reduce", "dp", None,
                      4096, 0.5, 0.75, True, None)
    for records in ([iteration, iteration], [message], [node], []):
        got = json.loads(agent._rows(records))
        want = [asdict(r) for r in records]
        assert got == json.loads(json.dumps(want))
        assert [list(row) for row in got] == [list(row) for row in want], "field order"
