"""``edgekit deploy``: what was copied to a board."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

from edgekit.records import Record


@dataclass(frozen=True)
class DeployResult(Record):
    """``edgekit deploy --json``: what was copied to the board, and what it runs with."""

    target: str
    path: str
    bundle: str
    python: str
    interpreter: str
    uploaded: Tuple[str, ...]
    deleted: Tuple[str, ...]
    unchanged: int
    bytes_sent: int

    def render_text(self) -> str:
        from edgekit.devices.remote import deploy_summary  # the line classify/benchmark --on also say

        return deploy_summary(self.to_dict())
