"""The engine's working values: a judgement, the context a constraint reads, a rule (the document it makes is
:class:`edgekit.results.check.CheckResult`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from edgekit.edgetpu.compatibility.evidence import Refs
from edgekit.edgetpu.compatibility.words import CONFIRMED, MAPPED, UNCERTAIN, Confidence, Kind
from edgekit.errors import InvalidModelError
from edgekit.tflite.model import ModelInfo, OpInfo, SubgraphInfo, TensorInfo


@dataclass(frozen=True)
class Judgement:
    """One op on its own: MAPPED, or the status words of the first rule it fails, and why."""

    status: str
    detail: str | None = None
    fix: str | None = None
    evidence: Refs = ()
    confidence: Confidence = CONFIRMED
    code: str | None = None  # the problem code, when not the one of its status words
    #: For an op mapped as a best guess: the uncertain rule that would refuse it (its id, words, detail, fix).
    doubt: tuple[str, str, str, str | None] | None = None

    @property
    def mappable(self) -> bool:
        return self.status == MAPPED


@dataclass(frozen=True)
class OpContext:
    """What a constraint looks at: the op, its tensors, the model, the target runtime."""

    info: ModelInfo
    g: SubgraphInfo
    op: OpInfo
    ins: list[TensorInfo | None]
    outs: list[TensorInfo | None]
    min_runtime: int
    rule: OpRule | None = None  # the op's OpRule when the table has the op (what COMMON's constraints read)

    @property
    def activations(self) -> list[TensorInfo]:
        return [t for t in self.ins + self.outs if t is not None and not t.is_constant]

    def const_ints(self, pos: int) -> list[int] | None:
        t = self.ins[pos] if pos < len(self.ins) else None
        if t is None or not t.is_constant or t.dtype not in ("int32", "int64"):
            return None
        v = self.info.constant_value(t)
        if v is None:
            return None
        # TensorFlow Lite refuses a constant whose buffer holds fewer bytes than its shape needs, or whose shape
        # has an unknown (-1) dimension ("Tensor N is invalidly specified in schema"): so does check.
        what = f"op #{self.op.index} {self.op.name}'s constant input {pos} ({t.name!r}, {t.dtype} {list(t.shape)})"
        hint = "the file is damaged (TensorFlow Lite refuses it too): copy or export the model again"
        if any(d < 0 for d in t.shape):
            raise InvalidModelError(f"{what} has an unknown (-1) dimension, which a constant cannot have", hint)
        need = 1
        for d in t.shape:
            need *= d
        if v.size < need:
            raise InvalidModelError(f"{what} holds {v.size} value(s) where its shape needs {need}", hint)
        return [int(x) for x in v.reshape(-1)[:need]]


#: A constraint's test: None when the op meets it, else what is wrong (or (what, fix)).
Test = Callable[[OpContext], "str | tuple[str, str] | None"]


@dataclass(frozen=True)
class Constraint:
    """One condition an op must meet to be mapped, with what the compiler says when it is not."""

    test: Test
    status: str
    fix: str | None
    evidence: Refs
    confidence: Confidence = UNCERTAIN
    code: str | None = None  # the problem code, when not the one of its status words
    looked_for: str = ""  # for an uncertain constraint: the evidence searched for and not found
    id: str = ""  # the rule's name (unique; the audit, the docs and the tests know it by it)
    kind: Kind = Kind.OPTION  # what it restricts: an uncertain rule's best guess follows its kind's record


@dataclass(frozen=True)
class OpRule:
    """A supported op: the Edge TPU runtime it needs, its constant params and its constraints."""

    min_runtime: int = 10
    params: tuple[tuple[int, str], ...] = ()  # (input position, what it is): must be constant
    constraints: tuple[Constraint, ...] = ()


@dataclass(frozen=True)
class OpCase:
    """A rule that decides an op before the per-op table: custom ops, ops missing from the table, QUANTIZE of
    float data. ``applies`` says when; the op then gets ``status`` with ``detail(context)`` and ``fix``."""

    id: str
    applies: Callable[[OpContext], bool]
    status: str
    detail: Callable[[OpContext], str]
    fix: str | Callable[[OpContext], str] | None
    evidence: Refs
    confidence: Confidence = CONFIRMED
    kind: Kind = Kind.TYPE


@dataclass(frozen=True)
class SizeLimit:
    """A size the compiler stops mapping at, as the compiles show it: the largest seen mapped, the smallest seen
    refused, and the line check draws in that gap. Above the smallest refused, a refusal is confirmed when a
    compile printed it (``refused_confirmed``; else it was read from counts or an answer, and stays uncertain);
    between the line and the smallest refused it is uncertain."""

    id: str
    largest_mapped: int
    smallest_refused: int
    limit: int
    evidence: Refs  # what the line rests on (the sizes seen mapped, and refused where not confirmed)
    refused_evidence: Refs = ()  # the compiles that printed the smallest refusal (makes it confirmed)

    @property
    def refused_confirmed(self) -> bool:
        return bool(self.refused_evidence)

    def __post_init__(self) -> None:
        assert self.largest_mapped <= self.limit < self.smallest_refused, self


@dataclass(frozen=True)
class ModelRule:
    """A rule about the whole model (a :class:`~edgekit.results.check.CheckProblem` code): how it is detected, what it says, what to do,
    how sure it is and what it rests on. ``detect`` returns (the ops it concerns, the details to quote) or None;
    ``message`` and ``hint`` make the problem's text from the details."""

    code: str
    confidence: Confidence
    evidence: Refs
    looked_for: str = ""
    detect: Callable[[ModelInfo], tuple[tuple[int, ...], list[str]] | None] | None = None
    message: Callable[[list[str]], str] | None = None
    hint: str | None = None
    fatal: bool = False  # the compiler refuses the whole model
    status: str | None = None  # for fatal rules: the words every op gets
