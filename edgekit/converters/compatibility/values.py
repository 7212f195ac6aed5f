"""The engine's values: a judgement, a verdict, a problem, the context a constraint reads, a rule."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from edgekit.converters.compatibility.evidence import Refs
from edgekit.converters.compatibility.words import CONFIRMED, MAPPED, UNCERTAIN
from edgekit.tflite_model import ModelInfo, OpInfo, SubgraphInfo, TensorInfo


@dataclass(frozen=True)
class Judgement:
    """One op on its own: MAPPED, or the status words of the first rule it fails, and why."""

    status: str
    detail: str | None = None
    fix: str | None = None
    evidence: Refs = ()
    confidence: str = CONFIRMED
    code: str | None = None  # the problem code, when not the one of its status words

    @property
    def mappable(self) -> bool:
        return self.status == MAPPED


@dataclass(frozen=True)
class OpVerdict:
    """Where one op runs and why."""

    index: int
    name: str
    version: int
    target: str  # "edgetpu" | "cpu"
    reason: str  # the compiler's status words where known
    detail: str | None = None
    fix: str | None = None
    confidence: str = CONFIRMED
    subgraph: int | None = None  # which Edge TPU subgraph (0-based), for target "edgetpu"
    code: str | None = field(default=None, compare=False)  # the problem code of the rule that fired

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "name": self.name, "version": self.version, "target": self.target,
                "reason": self.reason, "detail": self.detail, "confidence": self.confidence,
                "subgraph": self.subgraph}


@dataclass(frozen=True)
class Problem:
    """Something that keeps ops (or the whole model) off the Edge TPU, with what to do about it."""

    code: str
    message: str
    hint: str | None = None
    ops: tuple[int, ...] = ()
    fatal: bool = False  # the compiler would refuse the whole model
    status: str | None = None  # for fatal problems: the words every op gets
    confidence: str = CONFIRMED

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "hint": self.hint, "ops": list(self.ops),
                "fatal": self.fatal, "confidence": self.confidence}


@dataclass(frozen=True)
class OpContext:
    """What a constraint looks at: the op, its tensors, the model, the target runtime."""

    info: ModelInfo
    g: SubgraphInfo
    op: OpInfo
    ins: list[TensorInfo | None]
    outs: list[TensorInfo | None]
    min_runtime: int

    @property
    def activations(self) -> list[TensorInfo]:
        return [t for t in self.ins + self.outs if t is not None and not t.is_constant]

    def const_ints(self, pos: int) -> list[int] | None:
        t = self.ins[pos] if pos < len(self.ins) else None
        if t is None or not t.is_constant or t.dtype not in ("int32", "int64"):
            return None
        v = self.info.constant_value(t)
        return None if v is None else [int(x) for x in v.reshape(-1)]


#: A constraint's test: None when the op meets it, else what is wrong (or (what, fix)).
Test = Callable[[OpContext], "str | tuple[str, str] | None"]


@dataclass(frozen=True)
class Constraint:
    """One condition an op must meet to be mapped, with what the compiler says when it is not."""

    test: Test
    status: str
    fix: str | None
    evidence: Refs
    confidence: str = UNCERTAIN
    code: str | None = None  # the problem code, when not the one of its status words
    looked_for: str = ""     # for an uncertain constraint: the evidence searched for and not found


@dataclass(frozen=True)
class OpRule:
    """A supported op: the Edge TPU runtime it needs, its constant params and its constraints."""

    min_runtime: int = 10
    params: tuple[tuple[int, str], ...] = ()  # (input position, what it is): must be constant
    constraints: tuple[Constraint, ...] = ()


@dataclass(frozen=True)
class ModelRule:
    """A rule about the whole model (a :class:`Problem` code), with its evidence."""

    confidence: str
    evidence: Refs
    looked_for: str = ""
