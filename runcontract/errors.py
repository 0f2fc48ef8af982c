"""The one kind of error a person can act on, shared by the testbed and the analysis.

The CLI prints a `UserError` as one message (and its fix) without a traceback and exits with
its `exit_code`; anything else is a bug.
"""
from __future__ import annotations


class UserError(Exception):
    """A problem the user can fix; `exit_code` tells scripts which kind it was."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  fix: {self.hint}"
