"""The rules about the whole model (:data:`MODEL_RULES`): each detects, says, advises, and rests on evidence.

Two are fatal (the compiler refuses the model: nothing is mapped); the others are problems check
reports beside the op-by-op placement. :func:`model_problems` runs them all, in table order.
"""

from __future__ import annotations

from edgekit.edgetpu.compatibility.evidence import DOCS, EV_DECODERS, EV_DYNAMIC, EV_UNRESOLVED
from edgekit.edgetpu.compatibility.values import ModelRule
from edgekit.edgetpu.compatibility.words import (
    CONFIRMED,
    CUSTOM_UNRESOLVED,
    DYNAMIC,
    FIX_QUANTIZE,
    KNOWN_CUSTOM_OPS,
    PARSE_FAILED,
    UNCERTAIN,
)
from edgekit.edgetpu.op_versions import refusal_is_sure, version_problem
from edgekit.results.check import CheckProblem
from edgekit.tflite.model import ModelInfo, OpInfo, SubgraphInfo

#: Inputs that set an op's output shape. When one is computed at run time, TensorFlow Lite makes
#: the output a dynamic-sized tensor, and the compiler, a delegate for static-sized tensors only,
#: fails: "Attempting to use a delegate that only supports static-sized tensors with a graph that
#: has dynamic-sized tensors" (TFLite's kernels call SetTensorToDynamic for exactly these; evidence:
#: EV_DYNAMIC). A -1 in ``shape_signature`` alone does not: TFLite allocates the stored shape.
SHAPE_INPUTS: dict[str, tuple[int, ...]] = {
    "RESHAPE": (1,),
    "RESIZE_BILINEAR": (1,),
    "RESIZE_NEAREST_NEIGHBOR": (1,),
    "STRIDED_SLICE": (1, 2, 3),
    "SLICE": (1, 2),
    "PAD": (1,),
    "PADV2": (1,),
    "MIRROR_PAD": (1,),
    "TILE": (1,),
    "BROADCAST_TO": (1,),
    "FILL": (0,),
    "MEAN": (1,),
    "SUM": (1,),
    "REDUCE_MAX": (1,),
    "REDUCE_MIN": (1,),
    "REDUCE_PROD": (1,),
    "REDUCE_ANY": (1,),
    "TRANSPOSE": (1,),
    "EXPAND_DIMS": (1,),
    "SPLIT": (0,),
    "SPLIT_V": (1, 2),
    "TRANSPOSE_CONV": (0,),
    "SPACE_TO_BATCH_ND": (1, 2),
    "BATCH_TO_SPACE_ND": (1, 2),
    "ARG_MAX": (1,),
    "ARG_MIN": (1,),
    "ONE_HOT": (1,),
    "TOPK_V2": (1,),
    "RANGE": (0, 1, 2),
    "WHERE": (0,),
    "NON_MAX_SUPPRESSION_V4": (2,),
    "NON_MAX_SUPPRESSION_V5": (2,),
}
#: Ops whose output size depends on the data itself: always dynamic.
ALWAYS_DYNAMIC = {"UNIQUE"}


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


# ------------------------------------------------------------------------------------ detections
def _unparsable(sure: bool):
    """Op versions compiler 16 cannot parse (surely, or only perhaps): the main subgraph's ops among them, and
    one message per (op, version) over every subgraph (control-flow bodies must parse too)."""

    def detect(info: ModelInfo) -> tuple[tuple[int, ...], list[str]] | None:
        whys: dict[tuple[str, int], str] = {}
        main: list[int] = []
        for sub in info.subgraphs:
            for op in sub.ops:
                why = version_problem(op.name, op.version)
                if why and refusal_is_sure(op.name, op.version) == sure:
                    whys.setdefault((op.name, op.version), why)
                    if sub is info.main:
                        main.append(op.index)
        return (tuple(main), list(whys.values())) if whys else None

    return detect


def _dynamic(info: ModelInfo) -> tuple[tuple[int, ...], list[str]] | None:
    dyn = dynamic_ops(info.main)
    return (
        (tuple(op.index for op, _ in dyn), [f"op #{dyn[0][0].index} makes a dynamic-sized tensor ({dyn[0][1]})"])
        if dyn
        else None
    )


def _custom(info: ModelInfo) -> tuple[tuple[int, ...], list[str]] | None:
    custom = [op for op in info.main.ops if op.name == "CUSTOM" and op.custom_code not in KNOWN_CUSTOM_OPS]
    return (tuple(op.index for op in custom), [str(custom[0].custom_code)]) if custom else None


def _control_flow(info: ModelInfo) -> tuple[tuple[int, ...], list[str]] | None:
    return ((), [str(len(info.subgraphs))]) if len(info.subgraphs) > 1 else None


def _float_model(info: ModelInfo) -> tuple[tuple[int, ...], list[str]] | None:
    return (tuple(op.index for op in info.main.ops), []) if info.quantization_state == "float" else None


def _some(whys: list[str]) -> str:
    return "; ".join(whys[:3]) + (f"; and {len(whys) - 3} more" if len(whys) > 3 else "")


MODEL_RULES: dict[str, ModelRule] = {
    r.code: r
    for r in (
        ModelRule(
            "op_version",
            CONFIRMED,
            ("log:v16_op_version_exp.txt", "log:v16_op_version_quantize.txt", "log:v16_op_version_transpose_conv.txt"),
            detect=_unparsable(True),
            message=lambda w: (
                "edgetpu_compiler 16 cannot parse this model ('Didn't find op for builtin opcode'): " + _some(w)
            ),
            hint="convert with op versions TFLite 2.5 knows: `edgekit quantize` checks them; with plain "
            "TensorFlow avoid int16 activations and newer op features",
            fatal=True,
            status=PARSE_FAILED,
        ),
        # The log shows exactly a RESHAPE whose shape a SHAPE op computes (a Keras model with a -1 batch);
        # the other shape-setting inputs in SHAPE_INPUTS follow TFLite's kernels (SetTensorToDynamic).
        ModelRule(
            "dynamic_shapes",
            CONFIRMED,
            EV_DYNAMIC,
            detect=_dynamic,
            message=lambda w: (
                f"{w[0]}: the compiler fails with 'Attempting to use a delegate that only "
                "supports static-sized tensors'"
            ),
            hint="convert with a fixed batch of 1 so that shapes fold to constants: keras.Input(shape, "
            "batch_size=1), or a tf.function with TensorSpec([1, H, W, C]); `edgekit quantize` does this",
            fatal=True,
            status=DYNAMIC,
        ),
        # Versions first released in TFLite 2.6.0: unregistered at v2.5.0, the compiler built after 2.6 added them.
        ModelRule(
            "op_version_unsure",
            UNCERTAIN,
            ("report:tensorflow-register-2.5.0",),
            "a compile (pair or log) of a model with an op version first released in TFLite 2.6.0 (ADD v4, "
            "MUL v5, PAD v4, STRIDED_SLICE v6, ...)",
            detect=_unparsable(False),
            message=lambda w: (
                "edgetpu_compiler 16 may fail to parse this model ('Didn't find op for builtin "
                f"opcode'): {_some(w)}. TFLite 2.5.0 does not register these versions, but the compiler was built "
                "after TFLite 2.6 added them; the placement shown assumes it parses them"
            ),
            hint="if the compile fails with 'Didn't find op', convert with TensorFlow 2.5 or older op versions "
            "(`edgekit quantize` checks them)",
        ),
        ModelRule(
            "custom_op",
            UNCERTAIN,
            EV_UNRESOLVED + EV_DECODERS,
            "a compiler 15/16 log of a model with a custom op other than TFLite_Detection_PostProcess",
            detect=_custom,
            message=lambda w: (
                f"custom op {w[0]!r} is not one the compiler's TensorFlow Lite knows: "
                f"edgetpu_compiler may refuse the model ('{CUSTOM_UNRESOLVED}: {w[0]}', as compilers 2.0 and 16 did); "
                "the placement shown is what Coral's own models with such an op got, by compiling the part before it"
            ),
            hint="if the compile fails, compile the model without the custom op (cut it off before the op) and "
            "run the op on the CPU after the Edge TPU part",
        ),
        ModelRule(
            "control_flow",
            UNCERTAIN,
            DOCS,
            "a compiled pair or log of a model with WHILE/IF subgraphs",
            detect=_control_flow,
            message=lambda w: (
                f"the model has {w[0]} subgraphs (control flow such as WHILE/IF); only the main "
                "subgraph is checked and the Edge TPU maps none of the control-flow ops"
            ),
            hint="unroll loops and conditionals (e.g. unroll=True for Keras RNNs)",
        ),
        ModelRule(
            "not_quantized",
            CONFIRMED,
            ("log:v14_not_quantized.txt",),
            detect=_float_model,
            message=lambda w: (
                "the model is not quantized (float ops): the Edge TPU runs only fully 8-bit "
                "quantized models, and the compiler refuses it ('Model not quantized') or maps nothing"
            ),
            hint=FIX_QUANTIZE,
        ),
    )
}


def model_problems(info: ModelInfo) -> list[CheckProblem]:
    """Every whole-model rule that fires on ``info``, as problems, in table order."""
    out = []
    for rule in MODEL_RULES.values():
        found = rule.detect(info) if rule.detect else None
        if found is None:
            continue
        ops, details = found
        message = rule.message(details) if rule.message else rule.code
        out.append(CheckProblem(rule.code, message, rule.hint, tuple(ops), rule.fatal, rule.confidence))
    return out


def fatal_problems(info: ModelInfo) -> list[CheckProblem]:
    """What makes edgetpu_compiler refuse the whole model (each problem says so, and how to fix it)."""
    return [p for p in model_problems(info) if p.fatal]
