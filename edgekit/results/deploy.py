"""``edgekit deploy``: what was copied to a board."""

from __future__ import annotations

from dataclasses import dataclass

from edgekit.records import Record


@dataclass(frozen=True)
class DeployResult(Record):
    """``edgekit deploy --json``: what was copied to the board, and what it runs with."""

    target: str
    path: str
    bundle: str
    python: str
    interpreter: str
    uploaded: tuple[str, ...]
    deleted: tuple[str, ...]
    unchanged: int
    bytes_sent: int

    def render_text(self) -> str:
        """One line for people about what ``deploy`` did (classify/benchmark ``--on`` note it too)."""
        if not self.uploaded and not self.deleted:
            return f"{self.bundle} on {self.target} is up to date (Python {self.python}, {self.interpreter})"
        return (
            f"deployed to {self.target}:{self.bundle}: {len(self.uploaded)} file(s) copied ({self.bytes_sent:,} "
            f"bytes), {self.unchanged} unchanged, {len(self.deleted)} removed (Python {self.python}, "
            f"{self.interpreter})"
        )
