"""Writing a results folder's files so that a reader never sees half of one."""
from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from runcontract import META


def write_json(path: Path, data: dict) -> None:
    """Whole or not at all: a temporary file in the same folder, renamed over `path`."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    tmp.replace(path)


def mark_ended_elsewhere(run_dir: Path, status_text: str) -> None:
    """For a run whose runner died: record that it did not finish, if nothing else did."""
    meta_path = run_dir / META
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, ValueError):
        return
    if meta.get("status") == "running":
        meta.update(status="crashed", error=status_text,
                    ended=datetime.now(timezone.utc).isoformat())
        write_json(meta_path, meta)
