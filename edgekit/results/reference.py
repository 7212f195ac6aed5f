"""``edgekit evaluate --reference``: the int8 model against the float model it was made from (typed rows)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from edgekit.records import Record


@dataclass(frozen=True)
class ClassChange(Record):
    """One class's top-1 accuracy under the float and the int8 model, and the change."""

    id: int
    label: Optional[str]
    samples: int
    float_top1: float
    int8_top1: float
    change: float


@dataclass(frozen=True)
class LayerError(Record):
    """One quantized op's own int8-vs-float error (TFLite's quantization debugger), relative to its signal."""

    op: str
    tensor: str
    relative_rms_error: float
    rms_error: float
    max_abs_error: float


@dataclass(frozen=True)
class ReferenceComparison(Record):
    """The ``reference`` block of ``evaluate --json``: float accuracy, agreement, class changes, layer errors."""

    model: str
    top1: Optional[float]
    top5: Optional[float]
    samples: int
    top1_agreement: float
    agreement_interval: Tuple[float, ...]
    mean_abs_diff: float
    max_abs_diff: float
    class_changes: Tuple[ClassChange, ...]
    layers: Optional[Tuple[LayerError, ...]]
    layers_error: Optional[str]
