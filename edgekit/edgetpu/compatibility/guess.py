"""Best guesses for uncertain rules, from how often rules of the same kind held once a compile tested them.

An uncertain rule is one no compile shows either way: Coral's documentation, or edgekit's reading of
it. Check still has to place the op. Until issue 27 its guess was always "CPU", which contradicts the
record. :data:`TESTED` lists every rule that was once untested and that a compile then confirmed or
contradicted. Each entry has its kind and its evidence. For an untested rule of one kind, the guess
follows that kind's record:

* the rule held more often than not: the op is refused, as the rule says;
* the rule was contradicted more often: the op is mapped, and the problem is still reported;
* a tie, or no record for the kind: the record of every documented kind together decides.

Either way the placement stays ``uncertain``, so ``--strict`` never fails on it. The rates, with Wilson
intervals fitted to these small samples, are printed in docs/edgetpu-compatibility.md. Size limits drawn
between the largest size seen mapped and the smallest seen refused, and refusals inferred from compiles
(:class:`Kind` ``INFERRED``), guess what their own evidence shows: refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from edgekit.edgetpu.compatibility.evidence import EV_FLOAT_IO, EV_SRGAN, EV_YOLOV8N, Refs
from edgekit.edgetpu.compatibility.op_constraints import EV_FC_2D
from edgekit.edgetpu.compatibility.words import Kind, Target
from edgekit.results.metrics import wilson


@dataclass(frozen=True)
class Tested:
    """A once-untested rule that a compile then confirmed (``held``) or contradicted."""

    rule: str
    kind: Kind
    held: bool
    evidence: Refs


#: Documented constraints (Coral's model requirements, its table's runtime column and "known
#: limitations") and edgekit heuristics that compiles have since tested.
TESTED: tuple[Tested, ...] = (
    Tested("8-bit data only (model requirements)", Kind.TYPE, True, EV_FLOAT_IO + ("log:v14_not_quantized.txt",)),
    Tested("runtime column: TRANSPOSE needs runtime 14", Kind.TYPE, True, ("log:v15_partial_yolov5s_stdout.txt",)),
    Tested(
        "at most 3 innermost dimensions larger than 1 (model requirements)",
        Kind.LAYOUT,
        True,
        EV_SRGAN + ("report:google-coral/edgetpu#708",),
    ),
    Tested("FULLY_CONNECTED: output tensor is one-dimensional", Kind.LAYOUT, False, EV_FC_2D),
    Tested("SOFTMAX: 1-D input tensor only", Kind.LAYOUT, False, EV_YOLOV8N),
    Tested("STRIDED_SLICE: all strides equal to 1", Kind.OPTION, True, ("log:v15_partial_yolov5s_stdout.txt",)),
    Tested("weights constant at compile time (FULLY_CONNECTED with run-time weights)", Kind.OPTION, False, EV_FC_2D),
    Tested(
        "RESHAPE: might not be mapped for large tensor sizes", Kind.SIZE, True, ("report:ultralytics/yolov5#10527",)
    ),
    Tested(
        "resizes: might not be mapped depending on size",
        Kind.SIZE,
        True,
        ("pair:mistake0316+Google-Coral-Style-Transfer__model__dark_Decoder",),
    ),
    Tested(
        "RESIZE_NEAREST_NEIGHBOR by integer factors only (edgekit's reading)",
        Kind.HEURISTIC,
        False,
        ("report:jiri-kula/EfficientDet",),
    ),
)

#: Kinds whose record decides their untested rules (the others guess what their own evidence shows).
DOCUMENTED_KINDS = (Kind.TYPE, Kind.LAYOUT, Kind.OPTION, Kind.SIZE, Kind.HEURISTIC)


@dataclass(frozen=True)
class KindRecord:
    """How often rules of one kind held once tested, and the guess it gives."""

    kind: Kind | None  # None: every documented kind together
    held: int
    tested: int
    guess: Target

    @property
    def interval(self) -> tuple[float, float]:
        return wilson(self.held, self.tested) if self.tested else (0.0, 1.0)

    def text(self) -> str:
        lo, hi = self.interval
        return (
            f"{self.kind or 'all documented'}: held {self.held} of {self.tested} once tested "
            f"(95% interval {lo:.0%}-{hi:.0%}); best guess {self.guess}"
        )


def _record(kind: Kind | None) -> tuple[int, int]:
    tested = [t for t in TESTED if kind is None or t.kind == kind]
    return sum(t.held for t in tested), len(tested)


@cache
def record(kind: Kind | None) -> KindRecord:
    """The record of ``kind`` (None: all documented kinds) and the guess it gives an untested rule."""
    held, tested = _record(kind)
    if kind is not None and kind not in DOCUMENTED_KINDS:
        return KindRecord(kind, held, tested, Target.CPU)  # size gaps and inferences: their own evidence refuses
    if tested and 2 * held != tested:
        return KindRecord(kind, held, tested, Target.CPU if 2 * held > tested else Target.EDGETPU)
    pooled = record(None) if kind is not None else None
    if pooled is not None:
        return KindRecord(kind, held, tested, pooled.guess)
    return KindRecord(None, held, tested, Target.CPU)


def best_guess(kind: Kind) -> Target:
    """Where an op goes when an untested rule of ``kind`` would refuse it."""
    return record(kind).guess
