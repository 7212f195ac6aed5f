"""One op on its own (:func:`judge`): the first table entry that decides it, or MAPPED.

The order is data: :data:`~edgekit.edgetpu.compatibility.cases.OP_CASES` (custom ops, ops missing
from the table, QUANTIZE of float data), then :data:`~edgekit.edgetpu.compatibility.common.COMMON`
and the op's own constraints in :data:`~edgekit.edgetpu.compatibility.rules.RULES`. A confirmed
constraint that fires refuses the op. An uncertain one refuses it only when its kind's record says
such rules mostly hold (:func:`~edgekit.edgetpu.compatibility.guess.best_guess`); otherwise the op
is judged mappable as a best guess, stays uncertain, and carries the rule as its ``doubt``.
"""

from __future__ import annotations

from edgekit.edgetpu.compatibility.cases import OP_CASES
from edgekit.edgetpu.compatibility.common import COMMON
from edgekit.edgetpu.compatibility.evidence import DOCS, SEEN_MAPPED
from edgekit.edgetpu.compatibility.guess import best_guess
from edgekit.edgetpu.compatibility.model_rules import dynamic_ops, fatal_problems, model_problems
from edgekit.edgetpu.compatibility.rules import RULES
from edgekit.edgetpu.compatibility.values import Judgement, OpContext
from edgekit.edgetpu.compatibility.words import COMPILER_DEFAULT_MIN_RUNTIME, CONFIRMED, MAPPED, UNCERTAIN, Target
from edgekit.errors import InvalidModelError
from edgekit.tflite.model import ModelInfo, OpInfo, SubgraphInfo

__all__ = ["dynamic_ops", "fatal_problems", "judge", "model_problems"]


def judge(info: ModelInfo, g: SubgraphInfo, op: OpInfo, min_runtime: int = COMPILER_DEFAULT_MIN_RUNTIME) -> Judgement:
    """Whether ``op`` could run on the Edge TPU on its own (before partitioning), and if not why."""
    ins = [g.tensor(i) for i in op.inputs]
    outs = [g.tensor(i) for i in op.outputs]
    rule = RULES.get(op.name)
    if rule is not None and (not ins or ins[0] is None or not outs or outs[0] is None):
        raise InvalidModelError(
            f"op #{op.index} {op.name} has no input or no output tensor",
            "re-export the model; TensorFlow Lite would not run it either",
        )
    c = OpContext(info, g, op, ins, outs, min_runtime, rule)
    for case in OP_CASES:
        if case.applies(c):
            fix = case.fix(c) if callable(case.fix) else case.fix
            return Judgement(case.status, case.detail(c), fix, case.evidence, case.confidence)
    doubt = None
    for k in COMMON + (rule.constraints if rule is not None else ()):  # OP_CASES judged an op not in RULES
        why = k.test(c)
        if why is None:
            continue
        detail, fix = why if isinstance(why, tuple) else (why, k.fix)
        if k.confidence == CONFIRMED or best_guess(k.kind) == Target.CPU:
            return Judgement(k.status, detail, fix, k.evidence, k.confidence, k.code)
        doubt = doubt or (k.id, k.status, detail, fix)  # best guess: mapped; a later sure rule may still refuse
    seen = SEEN_MAPPED.get(op.name)
    sure = bool(seen) and doubt is None
    return Judgement(MAPPED, evidence=seen or DOCS, confidence=CONFIRMED if sure else UNCERTAIN, doubt=doubt)
