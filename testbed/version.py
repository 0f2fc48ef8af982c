"""What `mrc-testbed --version` says: the package's version, and its commit when it runs from
a git checkout. Standard library only: the entry point answers `--version` before it imports
the CLI, which needs the agents' C extension."""
from __future__ import annotations

import subprocess
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the checkout, when the package runs from one


def version() -> str:
    """The installed package's version and, when the package runs from a git checkout, its
    commit (marked when files tracked by git were changed since)."""
    try:
        out = f"mrc-testbed {metadata.version('mrc-testbed')}"
    except metadata.PackageNotFoundError:
        out = "mrc-testbed (version unknown: the package is not installed)"
    if not (ROOT / ".git").exists():  # a directory, or a file in a worktree
        return out

    def git(*argv: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(ROOT), *argv], capture_output=True,
                                  text=True, timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "--short=12", "HEAD")
    if commit is None:
        return out
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return f"{out} (commit {commit}{', with uncommitted changes' if dirty else ''})"
