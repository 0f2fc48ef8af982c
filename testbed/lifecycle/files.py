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
from runcontract.meta import MetaError, RunMeta, parse_meta


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


def write_meta(run_dir: Path, meta: RunMeta) -> None:
    """A run's meta.json, only ever from its model: what is written is a record every reader
    parses (`parse_meta`), of the current version."""
    write_json(run_dir / META, meta.to_json())


def mark_ended_elsewhere(run_dir: Path, status_text: str) -> None:
    """For a run whose runner died: record that it did not finish, if nothing else did. A
    file that is not a record this testbed reads (damaged, or of a newer version) is left as
    it is: rewriting what is not understood would lose what the newer writer put there."""
    meta_path = run_dir / META
    try:
        if meta_path.is_symlink() or run_dir.is_symlink():
            return  # not a folder this testbed made
        meta = parse_meta(json.loads(meta_path.read_text()), str(meta_path))
    except (OSError, ValueError, MetaError):
        return
    if meta.status == "running":
        meta.status, meta.error, meta.ended = "crashed", status_text, datetime.now(timezone.utc)
        try:
            write_meta(run_dir, meta)
        except OSError:
            pass  # a full or read-only disk: `list` still tells a dead run from a live one
