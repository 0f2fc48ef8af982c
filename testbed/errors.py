"""Errors a user can act on.

Every failure the CLI reports without a traceback is a `TestbedError`: it carries one message
that names the problem and, where there is one, the fix. Anything else is a bug and is shown
with its traceback only under `--debug`.
"""
from __future__ import annotations

from runcontract import UserError


class TestbedError(UserError):
    """A problem the user can fix; `exit_code` tells scripts which kind it was."""


class ScenarioError(TestbedError):
    """The scenario file (or a command-line value) is invalid; nothing was built."""

    exit_code = 2


class EnvironmentProblem(TestbedError):
    """The machine cannot run the testbed as asked: not root, a kernel feature or tool missing."""

    exit_code = 3


class VerificationFailed(TestbedError):
    """The fabric was built but some paths do not forward as planned."""

    exit_code = 4


class NotFaithful(TestbedError):
    """The run completed, but its fidelity verdict is not `faithful` (`run --require-faithful`):
    its numbers may be the CPU's, not the network's. The results are kept."""

    exit_code = 7


class Interrupted(KeyboardInterrupt):
    """SIGINT, SIGTERM or SIGHUP arrived; the run tears down.

    A KeyboardInterrupt, not an Exception: libraries on the run's path (asyncio under pyroute2
    among them) catch and log any Exception raised in their callbacks, which would swallow the
    signal; KeyboardInterrupt is the one they let through.
    """

    exit_code = 130

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message
