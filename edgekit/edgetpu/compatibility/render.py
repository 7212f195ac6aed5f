"""The text of ``edgekit check``: the report's document renders it (:meth:`edgekit.results.check.CheckResult.
render_text`: the compiler-style operation table and the report), so the engine and the command print one text."""

from __future__ import annotations

from typing import TYPE_CHECKING

from edgekit.results.check import CheckResult
from edgekit.results.words import format_table, mib  # noqa: F401 (the package's names)

if TYPE_CHECKING:
    from edgekit.edgetpu.compatibility.check import CheckReport


def render(report: CheckReport) -> str:
    """Human-readable text for ``edgekit check``."""
    return CheckResult.of_report(report).render_text()
