"""``edgekit doctor``: this machine's checks (Status per check)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from edgekit.records import Record


class Status(str, enum.Enum):
    """A doctor check's outcome."""

    OK = "ok"
    INFO = "info"
    WARN = "warn"
    FAIL = "fail"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class DoctorCheck(Record):
    name: str
    status: Status
    detail: str
    fix: str | None = None


@dataclass(frozen=True)
class DoctorResult(Record):
    """``edgekit doctor --json``: this machine checked for running and compiling Edge TPU models."""

    edgekit: str
    ok: bool
    checks: tuple[DoctorCheck, ...]

    def render_text(self) -> str:
        tags = {Status.OK: " ok ", Status.INFO: "info", Status.WARN: "WARN", Status.FAIL: "FAIL"}
        lines = [f"edgekit {self.edgekit} doctor (paste this into a bug report)"]
        for c in self.checks:
            lines.append(f"[{tags[c.status]}] {c.name}: {c.detail}")
            if c.fix and c.status in (Status.WARN, Status.FAIL):
                lines.append(f"       fix: {c.fix}")
        fails = sum(c.status is Status.FAIL for c in self.checks)
        warns = sum(c.status is Status.WARN for c in self.checks)
        lines.append(f"{fails} problem(s), {warns} warning(s)")
        return "\n".join(lines)
