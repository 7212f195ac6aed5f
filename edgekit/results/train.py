"""``edgekit train``: the model trained."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Tuple

from edgekit.records import Record


@dataclass(frozen=True)
class TrainResult(Record):
    """``edgekit train --json``: the model trained (``output`` None on a worker that is not the chief)."""

    output: Optional[str]
    record: Optional[str]
    arch: str
    labels: Tuple[str, ...]
    data: Mapping[str, Any]
    preprocess: Mapping[str, Any]
    strategy: Mapping[str, Any]
    batch_per_replica: int
    global_batch: int
    steps_per_execution: int
    advice: Tuple[str, ...]
    epochs: Tuple[Mapping[str, Any], ...]
    validation_accuracy: Optional[float]
    seconds: float

    def render_text(self) -> str:
        data, s = self.data, self.strategy
        val = self.validation_accuracy
        written = self.output is not None
        return "\n".join([
            f"{self.output if written else 'this worker (the chief writes the model)'}: {self.arch} trained "
            f"{len(self.epochs)} epoch(s) in {self.seconds:.1f} s"
            + (f", validation accuracy {val:.1%}" if val is not None else ""),
            f"Data: {data['source']} ({data['kind']}, {data['classes']} classes, {data['train_samples']} training, "
            f"{data['validation_samples']} validation examples)",
            f"Strategy: {s['kind']} ({s['reason']}), {s['replicas']} replica(s), global batch {self.global_batch}",
            f"Preprocessing: {self.preprocess['description']}",
        ] + ([f"Record: {self.record} (preprocessing, labels, data): `edgekit quantize {self.output}` needs no flags"]
             if written else []))
