"""The per-op table :data:`RULES`: each supported op, its runtime, constant inputs and constraints
(:func:`~edgekit.edgetpu.compatibility.catalogue.all_rules` lists every rule of the engine by its id)."""

from __future__ import annotations

from edgekit.edgetpu.compatibility.common import RESHAPE_LIMIT, elements, shape_text
from edgekit.edgetpu.compatibility.evidence import DOCS
from edgekit.edgetpu.compatibility.op_constraints import (
    CONV,
    EXPAND_DIMS,
    FULLY_CONNECTED,
    MEAN,
    NO_FUSED_ACTIVATION,
    REDUCE,
    RESIZE_BILINEAR,
    RESIZE_RANK,
    RESIZE_SIZE,
    SOFTMAX,
    SPLIT,
    STRIDED_SLICE,
    TRANSPOSE,
    concat_constant,
    pack_batch,
    pad_batch,
    prelu,
    squeeze,
)
from edgekit.edgetpu.compatibility.values import Constraint, OpContext, OpRule
from edgekit.edgetpu.compatibility.words import UNCERTAIN, UNSPECIFIED, Kind


def _reshape_size(c: OpContext) -> str | None:
    t, out = c.ins[0], c.outs[0]
    if t is None or out is None:  # judge() refuses an op without them before its constraints run
        return None
    if elements(t) > RESHAPE_LIMIT:
        return (
            f"reshapes {elements(t):,} values ({shape_text(t)} -> {shape_text(out)}); the Edge TPU maps "
            f"RESHAPE only on smaller tensors (~{RESHAPE_LIMIT:,}; heuristic)"
        )
    return None


_AXIS = ((1, "axis"),)
#: The supported ops (coral.ai supported-operations table), by TFLite builtin name. Runtime numbers
#: for the newer ops come from the coral.ai table as remembered in ../shared/reference/edgetpu.md.
RULES: dict[str, OpRule] = {
    "ADD": OpRule(),
    "SUB": OpRule(),
    "MUL": OpRule(),
    "MAXIMUM": OpRule(),
    "MINIMUM": OpRule(),
    "AVERAGE_POOL_2D": OpRule(constraints=(NO_FUSED_ACTIVATION,)),
    "MAX_POOL_2D": OpRule(constraints=(NO_FUSED_ACTIVATION,)),
    "CONCATENATION": OpRule(
        constraints=(
            NO_FUSED_ACTIVATION,
            Constraint(
                concat_constant,
                UNSPECIFIED,
                "feed the constant as a model input, or use PAD for zero padding",
                DOCS,
                looked_for="a compiled CONCATENATION with a constant input",
                id="concat_constant",
                kind=Kind.OPTION,
            ),
        )
    ),
    "CONV_2D": OpRule(params=((1, "filter"), (2, "bias")), constraints=CONV),
    "DEPTHWISE_CONV_2D": OpRule(params=((1, "filter"), (2, "bias")), constraints=CONV),
    "TRANSPOSE_CONV": OpRule(13, ((0, "output shape"), (1, "filter"), (3, "bias"))),
    "FULLY_CONNECTED": OpRule(constraints=FULLY_CONNECTED),  # run-time weights map: EV_FC_2D
    "EXPAND_DIMS": OpRule(13, _AXIS, EXPAND_DIMS),
    "SQUEEZE": OpRule(
        constraints=(
            Constraint(
                squeeze,
                UNSPECIFIED,
                "squeeze only leading dimensions of size 1",
                DOCS,
                looked_for="a compiled SQUEEZE of an inner dimension",
                id="squeeze",
                kind=Kind.LAYOUT,
            ),
        )
    ),
    "L2_NORMALIZATION": OpRule(),
    "LOGISTIC": OpRule(),
    "TANH": OpRule(),
    "RELU": OpRule(),
    "RELU6": OpRule(),
    "RELU_N1_TO_1": OpRule(),
    "LSTM": OpRule(14),
    "UNIDIRECTIONAL_SEQUENCE_LSTM": OpRule(14),
    "MEAN": OpRule(params=_AXIS, constraints=MEAN),
    "SUM": OpRule(13, _AXIS, REDUCE),
    "REDUCE_MAX": OpRule(14, _AXIS, REDUCE),
    "REDUCE_MIN": OpRule(14, _AXIS, REDUCE),
    "PACK": OpRule(
        13,
        constraints=(
            Constraint(
                pack_batch,
                UNSPECIFIED,
                "pack along an inner dimension",
                DOCS,
                looked_for="a compiled PACK along the batch",
                id="pack_batch",
                kind=Kind.LAYOUT,
            ),
        ),
    ),
    "PAD": OpRule(
        params=((1, "paddings"),),
        constraints=(
            Constraint(
                pad_batch,
                UNSPECIFIED,
                "do not pad the batch dimension",
                DOCS,
                looked_for="a compiled PAD of the batch dimension",
                id="pad_batch",
                kind=Kind.LAYOUT,
            ),
        ),
    ),
    "PRELU": OpRule(
        13,
        ((1, "alpha"),),
        (
            Constraint(
                prelu,
                UNSPECIFIED,
                "Keras PReLU with shared_axes=[1, 2]",
                DOCS,
                looked_for="a compiled PRELU with a 2-D or 3-D alpha",
                id="prelu",
                kind=Kind.LAYOUT,
            ),
        ),
    ),
    "QUANTIZE": OpRule(13),
    # A computed shape input makes the whole model dynamic: see fatal_problems.
    "RESHAPE": OpRule(
        constraints=(
            Constraint(
                _reshape_size,
                UNSPECIFIED,
                "reshape smaller tensors (e.g. reshape each detection level after slicing it), "
                "or leave the reshape to the CPU after the Edge TPU part",
                DOCS + ("report:ultralytics/yolov5#10527", "report:Team-Protom/road-signs-recognition-model"),
                UNCERTAIN,
                looked_for="a compile reshaping between 408,000 (mapped) and 1,632,000 (refused) values",
                id="reshape_size",
                kind=Kind.SIZE,
            ),
        )
    ),
    "RESIZE_BILINEAR": OpRule(params=((1, "size"),), constraints=RESIZE_BILINEAR),
    "RESIZE_NEAREST_NEIGHBOR": OpRule(params=((1, "size"),), constraints=(RESIZE_RANK, RESIZE_SIZE)),
    "RSQRT": OpRule(14),
    "SQUARED_DIFFERENCE": OpRule(14),
    "SLICE": OpRule(params=((1, "begin"), (2, "size"))),
    "SOFTMAX": OpRule(constraints=SOFTMAX),
    "SPACE_TO_DEPTH": OpRule(),
    "SPLIT": OpRule(params=((0, "axis"),), constraints=SPLIT),
    "STRIDED_SLICE": OpRule(params=((1, "begin"), (2, "end"), (3, "strides")), constraints=STRIDED_SLICE),
    "TRANSPOSE": OpRule(14, ((1, "permutation"),), TRANSPOSE),
}
