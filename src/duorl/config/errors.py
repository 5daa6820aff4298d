"""ConfigError: every configuration problem names the key, the value, what is allowed and the fix;
ConfigErrors: several of them at once; InputRefused: any other refusal before the run starts (exit
code 2, docs/exit_codes.md)."""

from __future__ import annotations

from typing import Any

# Marks an error about a key that has no value to show (a malformed override such as `foo`).
NO_VALUE: Any = object()


def format_value(value: Any) -> str:
    """Write a value the way a user types it in a `key=value` override (null, true, [0, 1])."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        # no spaces: the result must survive being pasted into a shell as one argument
        return "[" + ",".join(format_value(v) for v in value) + "]"
    return str(value)


class InputRefused(ValueError):
    """Input the run must not start with (exit code 2): one line for a terminal, naming what is wrong
    and the fix. Raised for checks beyond single keys too (memory, a rank's host state)."""


class ConfigError(InputRefused):
    """A configuration the run must not start with. The message is one line, made for a terminal."""

    def __init__(self, key: str, value: Any, problem: str, allowed: str, fix: str) -> None:
        self.key = key
        self.value = value
        self.problem = problem
        self.allowed = allowed
        self.fix = fix
        shown = key if value is NO_VALUE else f"{key}={format_value(value)}"
        super().__init__(f"{shown}: {problem}. Allowed: {allowed}. Fix: {fix}")


class ConfigErrors(ConfigError):
    """Several configuration problems, reported together on one line. It stands for its first problem
    where one is expected (key, value, problem, allowed, fix); `errors` holds them all."""

    def __init__(self, errors: list[ConfigError]) -> None:
        first = errors[0]
        super().__init__(first.key, first.value, first.problem, first.allowed, first.fix)
        self.errors = list(errors)
        listed = "; ".join(f"({i}) {e}" for i, e in enumerate(self.errors, start=1))
        self.args = (f"{len(self.errors)} configuration problems: {listed}",)
