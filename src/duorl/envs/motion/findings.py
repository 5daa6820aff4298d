"""What the clip checks say: one Finding per problem, and the error that carries them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

ERROR = "error"  # the clip cannot be used as it is
WARNING = "warning"  # it can, and the message says what duorl did about it


@dataclass(frozen=True)
class Finding:
    level: str
    field: str  # the file's field (or column range) at fault
    problem: str  # what was found against what was expected
    cause: str = ""  # the likely cause
    fix: str = ""

    def message(self, source: str) -> str:
        text = f"{source}: {self.field}: {self.problem}"
        if self.cause:
            text += f"; likely cause: {self.cause}"
        if self.fix:
            text += f"; fix: {self.fix}"
        return text


class MotionFileError(ValueError):
    """A clip that cannot be used: its errors (and the warnings found before them)."""

    def __init__(self, source: str, findings: Sequence[Finding]) -> None:
        self.source = source
        self.findings = list(findings)
        self.errors = [f for f in self.findings if f.level == ERROR]
        first = self.errors[0] if self.errors else self.findings[0]
        more = f" (and {len(self.errors) - 1} more errors)" if len(self.errors) > 1 else ""
        super().__init__(first.message(source) + more)


def error(field: str, problem: str, cause: str = "", fix: str = "") -> Finding:
    return Finding(ERROR, field, problem, cause, fix)


def warning(field: str, problem: str, cause: str = "", fix: str = "") -> Finding:
    return Finding(WARNING, field, problem, cause, fix)
