"""One op on its own (:func:`judge`) and what makes the compiler refuse the whole model (:func:`fatal_problems`)."""

from __future__ import annotations

from edgekit.converters.compatibility.common import COMMON
from edgekit.converters.compatibility.evidence import DOCS, EV_DECODERS, EV_DEEPLAB, EV_FLOAT_IO, SEEN_MAPPED
from edgekit.converters.compatibility.rules import ALWAYS_DYNAMIC, MODEL_RULES, RULES, SHAPE_INPUTS
from edgekit.converters.compatibility.values import Judgement, OpContext, Problem
from edgekit.converters.compatibility.words import (_QUANT_TYPES, COMPILER_DEFAULT_MIN_RUNTIME, CONFIRMED, DATA_TYPE,
                                                    DYNAMIC, FIX_MOVE_TO_END, FIX_QUANTIZE, KNOWN_CUSTOM_OPS, MAPPED,
                                                    NOT_SUPPORTED, PARSE_FAILED, UNCERTAIN, UNSPECIFIED)
from edgekit.converters.op_versions import refusal_is_sure, version_problem
from edgekit.errors import InvalidModelError
from edgekit.tflite_model import FLOAT_DTYPES, ModelInfo, OpInfo, SubgraphInfo


def judge(info: ModelInfo, g: SubgraphInfo, op: OpInfo, min_runtime: int = COMPILER_DEFAULT_MIN_RUNTIME
          ) -> Judgement:
    """Whether ``op`` could run on the Edge TPU on its own (before partitioning), and if not why."""
    name = op.name
    ins = [g.tensor(i) for i in op.inputs]
    outs = [g.tensor(i) for i in op.outputs]
    if name == "CUSTOM":
        floats = any(t is not None and t.dtype in FLOAT_DTYPES for t in ins + outs)
        if op.custom_code in KNOWN_CUSTOM_OPS:
            return Judgement(DATA_TYPE, f"custom op {op.custom_code!r} runs on the CPU", FIX_MOVE_TO_END,
                             ("report:tensorflow/models#10695",), CONFIRMED)
        # Its place is certain (no custom op but the compiler's own runs on the Edge TPU); whether the compiler
        # accepts the model at all is the uncertain `custom_op` problem.
        return Judgement(DATA_TYPE if floats else NOT_SUPPORTED, f"custom op {op.custom_code!r} runs on the CPU",
                         FIX_MOVE_TO_END, EV_DECODERS, CONFIRMED)
    rule = RULES.get(name)
    if rule is not None and (not ins or ins[0] is None or not outs or outs[0] is None):
        raise InvalidModelError(f"op #{op.index} {name} has no input or no output tensor",
                                "re-export the model; TensorFlow Lite would not run it either")
    c = OpContext(info, g, op, ins, outs, min_runtime)
    if rule is None:
        # float/int16 data is reported as a data-type problem (DEQUANTIZE in real logs); index
        # outputs (int32/int64 of ARG_MAX and the like) do not change the verdict "not supported".
        odd = sorted({t.dtype for t in c.activations if t.dtype in FLOAT_DTYPES | {"int16"}})
        if odd:
            return Judgement(DATA_TYPE, f"{name} on {', '.join(odd)} data, and {name} is not an Edge TPU op",
                             FIX_QUANTIZE if set(odd) & FLOAT_DTYPES else FIX_MOVE_TO_END, EV_FLOAT_IO, CONFIRMED)
        return Judgement(NOT_SUPPORTED, f"{name} is not in the Edge TPU's supported-op table", FIX_MOVE_TO_END,
                         DOCS + EV_DEEPLAB, CONFIRMED)
    if name == "QUANTIZE" and any(t.dtype in FLOAT_DTYPES for t in ins if t is not None) \
            and all(t.dtype in _QUANT_TYPES for t in outs if t is not None):
        return Judgement(UNSPECIFIED, f"quantizes a {ins[0].dtype} input: the model has float I/O",
                         "use integer (uint8/int8) model inputs: `edgekit quantize` makes them", EV_FLOAT_IO,
                         CONFIRMED)
    for k in COMMON + rule.constraints:
        why = k.test(c)
        if why is not None:
            detail, fix = why if isinstance(why, tuple) else (why, k.fix)
            return Judgement(k.status, detail, fix, k.evidence, k.confidence, k.code)
    seen = SEEN_MAPPED.get(name)
    return Judgement(MAPPED, evidence=seen or DOCS, confidence=CONFIRMED if seen else UNCERTAIN)


def dynamic_ops(g: SubgraphInfo) -> list[tuple[OpInfo, str]]:
    """Ops whose output shape is only known at run time, with what makes it so."""
    out = []
    for op in g.ops:
        if op.name in ALWAYS_DYNAMIC:
            out.append((op, f"{op.name} output sizes depend on the data"))
            continue
        for pos in SHAPE_INPUTS.get(op.name, ()):
            t = g.tensor(op.inputs[pos]) if pos < len(op.inputs) else None
            if t is not None and not t.is_constant:
                why = f"{op.name}'s input {pos} ({t.name!r}), which sets its output shape, is computed at run time"
                out.append((op, why))
                break
    return out


def _unparsable(info: ModelInfo, sure: bool) -> tuple[dict[tuple[str, int], str], list[int]]:
    """The op versions compiler 16 cannot parse (surely, or only perhaps), one message per (op, version),
    and the main subgraph's ops among them."""
    unparsable: dict[tuple[str, int], str] = {}
    main_unparsable: list[int] = []
    for sub in info.subgraphs:
        for op in sub.ops:
            why = version_problem(op.name, op.version)
            if why and refusal_is_sure(op.name, op.version) == sure:
                unparsable.setdefault((op.name, op.version), why)
                if sub is info.main:
                    main_unparsable.append(op.index)
    return unparsable, main_unparsable


def parse_doubts(info: ModelInfo) -> list[Problem]:
    """Op versions the v2.5.0 registrations refuse but compiler 16 may parse (first released in 2.6.0): an
    uncertain problem each model has at most once; the best guess is that the model parses."""
    unparsable, main_unparsable = _unparsable(info, sure=False)
    if not unparsable:
        return []
    whys = list(unparsable.values())
    return [Problem(
        "op_version_unsure", "edgetpu_compiler 16 may fail to parse this model ('Didn't find op for builtin "
        "opcode'): " + "; ".join(whys[:3]) + (f"; and {len(whys) - 3} more" if len(whys) > 3 else "")
        + ". TFLite 2.5.0 does not register these versions, but the compiler was built after TFLite 2.6 "
        "added them; the placement shown assumes it parses them",
        "if the compile fails with 'Didn't find op', convert with TensorFlow 2.5 or older op versions "
        "(`edgekit quantize` checks them)", tuple(main_unparsable), False, None,
        MODEL_RULES["op_version_unsure"].confidence)]


def fatal_problems(info: ModelInfo) -> list[Problem]:
    """What makes edgetpu_compiler refuse the whole model (each problem says so, and how to fix it)."""
    g = info.main
    out: list[Problem] = []
    # Every op of every subgraph (control-flow bodies too) must parse. One message per (op, version).
    unparsable, main_unparsable = _unparsable(info, sure=True)
    if unparsable:
        whys = list(unparsable.values())
        out.append(Problem(
            "op_version", "edgetpu_compiler 16 cannot parse this model ('Didn't find op for builtin opcode'): "
            + "; ".join(whys[:3]) + (f"; and {len(whys) - 3} more" if len(whys) > 3 else ""),
            "convert with op versions TFLite 2.5 knows: `edgekit quantize` checks them; with plain TensorFlow "
            "avoid int16 activations and newer op features", tuple(main_unparsable), True, PARSE_FAILED,
            MODEL_RULES["op_version"].confidence))
    dyn = dynamic_ops(g)
    if dyn:
        first, why = dyn[0]
        out.append(Problem(
            "dynamic_shapes", f"op #{first.index} makes a dynamic-sized tensor ({why}): the compiler fails with "
            "'Attempting to use a delegate that only supports static-sized tensors'",
            "convert with a fixed batch of 1 so that shapes fold to constants: keras.Input(shape, batch_size=1), "
            "or a tf.function with TensorSpec([1, H, W, C]); `edgekit quantize` does this",
            tuple(op.index for op, _ in dyn), True, DYNAMIC, MODEL_RULES["dynamic_shapes"].confidence))
    return out
