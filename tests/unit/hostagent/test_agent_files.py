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


def test_progress_is_a_growing_count_in_one_file(tmp_path):
    """The runner reads how many iterations a host has completed while the host writes it:
    every read gives a whole count that only grows, and the file is never replaced (renaming
    a file over another makes ext4 write it out at once, with the pooled process waiting)."""
    path = tmp_path / agent.PROGRESS_FILE
    records = agent.ProgressRecords(path)
    inode = path.stat().st_ino
    assert agent.progress_count(path.read_text()) == 0 and agent.progress_count(None) == 0
    for k in range(1, 4):
        records.append(IterationRecord("all_reduce", 0, k, False, 1.0, 2.0, 1 << 20, True, None))
        assert agent.progress_count(path.read_text()) == k == len(records)
        assert path.stat().st_ino == inode, "the progress file was replaced"
    assert agent.progress_count(path.read_text()[:2]) == 2  # a read of part of it: a count
