"""The `mrc-testbed` command: the CLI (testbed/cli.py), or exit status 3 naming the build when
the agents' C extension is missing. Every command needs it, since the scenario language reads
the transports' defaults and they import it; importing `testbed` itself does not. `--version`
alone needs nothing of it, so it answers before the CLI is imported."""
from __future__ import annotations

import sys

from testbed.errors import EnvironmentProblem
from testbed.version import version


def main() -> int:
    if sys.argv[1:] == ["--version"]:
        print(version())
        return 0
    try:
        from testbed.cli import command
    except ImportError as exc:
        if exc.name != "hostagent._fastio":
            raise
        print(f"error: {exc}", file=sys.stderr)
        return EnvironmentProblem.exit_code
    return command()
