"""``edgekit train``: the model trained."""

from __future__ import annotations

from dataclasses import dataclass

from edgekit.records import Record
from edgekit.results.preprocess import PreprocessSpec


@dataclass(frozen=True)
class TrainData(Record):
    """What the model learned from: DATA, its kind (``images`` | ``tfrecord``), the classes and the split."""

    source: str
    kind: str
    classes: int
    train_samples: int
    validation_samples: int


@dataclass(frozen=True, kw_only=True)
class TrainPreprocess(PreprocessSpec):
    """The preprocessing recorded with the model and its description."""

    description: str


@dataclass(frozen=True)
class TrainStrategy(Record):
    """The tf.distribute strategy that trained (``kind``: tpu | multi_worker | mirrored | default), why, and why
    not the ones before it (``tried``); ``chief``: this run writes the model."""

    kind: str
    reason: str
    replicas: int
    tried: tuple[str, ...]
    chief: bool


@dataclass(frozen=True)
class Epoch(Record):
    """One epoch's numbers as Keras reported them (None where it did not: no validation split)."""

    epoch: int
    loss: float | None
    accuracy: float | None
    val_loss: float | None
    val_accuracy: float | None
    seconds: float


@dataclass(frozen=True)
class TrainResult(Record):
    """``edgekit train --json``: the model trained (``output`` None on a worker that is not the chief)."""

    output: str | None
    record: str | None
    arch: str
    labels: tuple[str, ...]
    data: TrainData
    preprocess: TrainPreprocess
    strategy: TrainStrategy
    batch_per_replica: int
    global_batch: int
    steps_per_execution: int
    advice: tuple[str, ...]
    epochs: tuple[Epoch, ...]
    validation_accuracy: float | None
    seconds: float

    def render_text(self) -> str:
        data, s = self.data, self.strategy
        val = self.validation_accuracy
        written = self.output is not None
        return "\n".join(
            [
                f"{self.output if written else 'this worker (the chief writes the model)'}: {self.arch} trained "
                f"{len(self.epochs)} epoch(s) in {self.seconds:.1f} s"
                + (f", validation accuracy {val:.1%}" if val is not None else ""),
                f"Data: {data.source} ({data.kind}, {data.classes} classes, {data.train_samples} training, "
                f"{data.validation_samples} validation examples)",
                f"Strategy: {s.kind} ({s.reason}), {s.replicas} replica(s), global batch {self.global_batch}",
                f"Preprocessing: {self.preprocess.description}",
            ]
            + (
                [
                    f"Record: {self.record} (preprocessing, labels, data): `edgekit quantize {self.output}` needs no flags"
                ]
                if written
                else []
            )
        )
