"""A piece of advice, as quantize's and build's documents carry it: what it is about, what was found, what to do,
and its evidence. The table that gives it is the engine's (:mod:`edgekit.edgetpu.advice`)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from edgekit.records import Record


class AdviceKind(str, Enum):
    """What the advice is about."""

    PLACEMENT = "placement"  # ops that keep the model (partly) off the Edge TPU
    ACCURACY = "accuracy"  # the int8 model losing accuracy against the float one


@dataclass(frozen=True)
class Advice(Record):
    """One piece of advice: what it is about, what was found, what to do, and why it can be trusted."""

    kind: AdviceKind
    key: str
    found: str
    text: str
    evidence: tuple[str, ...] = ()

    def line(self) -> str:
        cited = f" [evidence: {', '.join(e.split(':', 1)[1] for e in self.evidence)}]" if self.evidence else ""
        return f"Advice ({self.kind.value}): {self.found}: {self.text}{cited}"
