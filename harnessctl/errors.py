"""Errors that reach users: each names the file (and field or line) it is about.

Exit codes, the same for every command (README "Exit codes"): 0 done; 1 done, and a check
it runs failed (a regression, a pool file altered, task records skipped); 2 the command
could not be carried out as asked (usage, configuration, input or workspace state: every
``HarnessctlError`` below that is not one of the others); 3 infrastructure (sandbox, engine,
gateway or provider: rollouts could not run; what finished is stored); 130 interrupted.
"""

from __future__ import annotations


class HarnessctlError(Exception):
    """A user-facing error; the CLI prints it without a traceback and exits non-zero."""

    exit_code = 2


class ConfigError(HarnessctlError):
    """A configuration or input file is invalid. ``where`` is ``file`` or ``file: field``."""

    exit_code = 2

    def __init__(self, where: str, message: str) -> None:
        self.where = where
        self.message = message
        super().__init__(f"{where}: {message}")

    def __reduce__(self):  # pickled across processes (a Ray task's error reaches the driver)
        return type(self), (self.where, self.message)


class InfraError(HarnessctlError):
    """The sandbox or the gateway failed; never a task failure."""

    exit_code = 3
