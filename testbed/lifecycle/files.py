"""Writing a results folder's files so that a reader never sees half of one, and so that a
planted symlink is never written through (the runner is root).

Every file is written to a fresh temporary file in the same folder (created exclusively, so no
existing name is followed) and renamed over its name: rename replaces a symlink itself instead of
writing where it points, and a reader sees the old file or the new one, never a part.
"""
from __future__ import annotations

import json
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from runcontract import META


def write_bytes(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Whole or not at all, never through a symlink."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, mode)  # mkstemp makes 0600: results are for every user to read
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text(path: Path, text: str) -> None:
    write_bytes(path, text.encode())


def write_json(path: Path, data: dict) -> None:
    write_bytes(path, (json.dumps(data, indent=2, default=str) + "\n").encode())


def make_dir(path: Path) -> None:
    """A folder that did not exist: an existing one, or a symlink, raises FileExistsError."""
    path.mkdir(mode=0o755)


def mark_ended_elsewhere(run_dir: Path, status_text: str) -> None:
    """For a run whose runner died: record that it did not finish, if nothing else did."""
    meta_path = run_dir / META
    try:
        if meta_path.is_symlink() or run_dir.is_symlink():
            return  # not a folder this testbed made
        meta = json.loads(meta_path.read_text())
    except (OSError, ValueError):
        return
    if isinstance(meta, dict) and meta.get("status") == "running":
        meta.update(status="crashed", error=status_text,
                    ended=datetime.now(timezone.utc).isoformat())
        try:
            write_json(meta_path, meta)
        except OSError:
            pass  # a full or read-only disk: `list` still tells a dead run from a live one
