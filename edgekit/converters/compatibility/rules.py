"""The tables: :data:`RULES` (per supported op), :data:`MODEL_RULES` (whole model), the shape-setting inputs."""

from __future__ import annotations

from edgekit.converters.compatibility.common import RESHAPE_LIMIT, _elements, _shape
from edgekit.converters.compatibility.evidence import DOCS, EV_DECODERS, EV_DYNAMIC, EV_UNRESOLVED
from edgekit.converters.compatibility.op_constraints import (CONV, EXPAND_DIMS, FULLY_CONNECTED, MEAN,
    NO_FUSED_ACTIVATION, REDUCE, RESIZE_BILINEAR, RESIZE_RANK, RESIZE_SIZE, SOFTMAX, SPLIT, STRIDED_SLICE,
    TRANSPOSE, _concat_constant, _pack_batch, _pad_batch, _prelu, _squeeze)
from edgekit.converters.compatibility.values import Constraint, ModelRule, OpContext, OpRule
from edgekit.converters.compatibility.words import CONFIRMED, UNCERTAIN, UNSPECIFIED


def _reshape_size(c: OpContext) -> str | None:
    t = c.ins[0]
    if _elements(t) > RESHAPE_LIMIT:
        return (f"reshapes {_elements(t):,} values ({_shape(t)} -> {_shape(c.outs[0])}); the Edge TPU maps "
                f"RESHAPE only on smaller tensors (~{RESHAPE_LIMIT:,}; heuristic)")
    return None

_AXIS = ((1, "axis"),)
#: The supported ops (coral.ai supported-operations table), by TFLite builtin name. Runtime numbers
#: for the newer ops come from the coral.ai table as remembered in ../shared/reference/edgetpu.md.
RULES: dict[str, OpRule] = {
    "ADD": OpRule(), "SUB": OpRule(), "MUL": OpRule(), "MAXIMUM": OpRule(), "MINIMUM": OpRule(),
    "AVERAGE_POOL_2D": OpRule(constraints=(NO_FUSED_ACTIVATION,)),
    "MAX_POOL_2D": OpRule(constraints=(NO_FUSED_ACTIVATION,)),
    "CONCATENATION": OpRule(constraints=(NO_FUSED_ACTIVATION, Constraint(
        _concat_constant, UNSPECIFIED, "feed the constant as a model input, or use PAD for zero padding", DOCS,
        looked_for="a compiled CONCATENATION with a constant input"))),
    "CONV_2D": OpRule(params=((1, "filter"), (2, "bias")), constraints=CONV),
    "DEPTHWISE_CONV_2D": OpRule(params=((1, "filter"), (2, "bias")), constraints=CONV),
    "TRANSPOSE_CONV": OpRule(13, ((0, "output shape"), (1, "filter"), (3, "bias"))),
    "FULLY_CONNECTED": OpRule(constraints=FULLY_CONNECTED),  # run-time weights map: EV_FC_2D
    "EXPAND_DIMS": OpRule(13, _AXIS, EXPAND_DIMS), "SQUEEZE": OpRule(constraints=(Constraint(
        _squeeze, UNSPECIFIED, "squeeze only leading dimensions of size 1", DOCS,
        looked_for="a compiled SQUEEZE of an inner dimension"),)),
    "L2_NORMALIZATION": OpRule(), "LOGISTIC": OpRule(), "TANH": OpRule(),
    "RELU": OpRule(), "RELU6": OpRule(), "RELU_N1_TO_1": OpRule(),
    "LSTM": OpRule(14), "UNIDIRECTIONAL_SEQUENCE_LSTM": OpRule(14),
    "MEAN": OpRule(params=_AXIS, constraints=MEAN), "SUM": OpRule(13, _AXIS, REDUCE),
    "REDUCE_MAX": OpRule(14, _AXIS, REDUCE), "REDUCE_MIN": OpRule(14, _AXIS, REDUCE),
    "PACK": OpRule(13, constraints=(Constraint(_pack_batch, UNSPECIFIED, "pack along an inner dimension", DOCS,
                                               looked_for="a compiled PACK along the batch"),)),
    "PAD": OpRule(params=((1, "paddings"),), constraints=(Constraint(
        _pad_batch, UNSPECIFIED, "do not pad the batch dimension", DOCS,
        looked_for="a compiled PAD of the batch dimension"),)),
    "PRELU": OpRule(13, ((1, "alpha"),), (Constraint(_prelu, UNSPECIFIED, "Keras PReLU with shared_axes=[1, 2]",
                                                     DOCS, looked_for="a compiled PRELU with a 2-D or 3-D alpha"),)),
    "QUANTIZE": OpRule(13),
    # A computed shape input makes the whole model dynamic: see fatal_problems.
    "RESHAPE": OpRule(constraints=(Constraint(
        _reshape_size, UNSPECIFIED, "reshape smaller tensors (e.g. reshape each detection level after slicing it), "
        "or leave the reshape to the CPU after the Edge TPU part",
        DOCS + ("report:ultralytics/yolov5#10527", "report:Team-Protom/road-signs-recognition-model"), UNCERTAIN,
        looked_for="a compile reshaping between 408,000 (mapped) and 1,632,000 (refused) values"),)),
    "RESIZE_BILINEAR": OpRule(params=((1, "size"),), constraints=RESIZE_BILINEAR),
    "RESIZE_NEAREST_NEIGHBOR": OpRule(params=((1, "size"),), constraints=(RESIZE_RANK, RESIZE_SIZE)),
    "RSQRT": OpRule(14), "SQUARED_DIFFERENCE": OpRule(14),
    "SLICE": OpRule(params=((1, "begin"), (2, "size"))),
    "SOFTMAX": OpRule(constraints=SOFTMAX),
    "SPACE_TO_DEPTH": OpRule(),
    "SPLIT": OpRule(params=((0, "axis"),), constraints=SPLIT),
    "STRIDED_SLICE": OpRule(params=((1, "begin"), (2, "end"), (3, "strides")), constraints=STRIDED_SLICE),
    "TRANSPOSE": OpRule(14, ((1, "permutation"),), TRANSPOSE),
}


MODEL_RULES: dict[str, ModelRule] = {
    "op_version": ModelRule(CONFIRMED, ("log:v16_op_version_exp.txt", "log:v16_op_version_quantize.txt",
                                        "log:v16_op_version_transpose_conv.txt")),
    # Versions first released in TFLite 2.6.0: unregistered at v2.5.0, the compiler built after 2.6 added them.
    "op_version_unsure": ModelRule(UNCERTAIN, ("report:tensorflow-register-2.5.0",),
                                   "a compile (pair or log) of a model with an op version first released in "
                                   "TFLite 2.6.0 (ADD v4, MUL v5, PAD v4, STRIDED_SLICE v6, ...)"),
    # The log shows exactly a RESHAPE whose shape a SHAPE op computes (a Keras model with a -1 batch);
    # the other shape-setting inputs in SHAPE_INPUTS follow TFLite's kernels (SetTensorToDynamic).
    "dynamic_shapes": ModelRule(CONFIRMED, EV_DYNAMIC),
    "custom_op": ModelRule(UNCERTAIN, EV_UNRESOLVED + EV_DECODERS, "a compiler 15/16 log of a model with a custom "
                           "op other than TFLite_Detection_PostProcess"),
    "control_flow": ModelRule(UNCERTAIN, DOCS, "a compiled pair or log of a model with WHILE/IF subgraphs"),
    "not_quantized": ModelRule(CONFIRMED, ("log:v14_not_quantized.txt",)),
}

#: Inputs that set an op's output shape. When one is computed at run time, TensorFlow Lite makes
#: the output a dynamic-sized tensor, and the compiler, a delegate for static-sized tensors only,
#: fails: "Attempting to use a delegate that only supports static-sized tensors with a graph that
#: has dynamic-sized tensors" (TFLite's kernels call SetTensorToDynamic for exactly these; evidence:
#: EV_DYNAMIC). A -1 in ``shape_signature`` alone does not: TFLite allocates the stored shape.
SHAPE_INPUTS: dict[str, tuple[int, ...]] = {
    "RESHAPE": (1,), "RESIZE_BILINEAR": (1,), "RESIZE_NEAREST_NEIGHBOR": (1,), "STRIDED_SLICE": (1, 2, 3),
    "SLICE": (1, 2), "PAD": (1,), "PADV2": (1,), "MIRROR_PAD": (1,), "TILE": (1,), "BROADCAST_TO": (1,),
    "FILL": (0,), "MEAN": (1,), "SUM": (1,), "REDUCE_MAX": (1,), "REDUCE_MIN": (1,), "REDUCE_PROD": (1,),
    "REDUCE_ANY": (1,), "TRANSPOSE": (1,), "EXPAND_DIMS": (1,), "SPLIT": (0,), "SPLIT_V": (1, 2),
    "TRANSPOSE_CONV": (0,), "SPACE_TO_BATCH_ND": (1, 2), "BATCH_TO_SPACE_ND": (1, 2), "ARG_MAX": (1,),
    "ARG_MIN": (1,), "ONE_HOT": (1,), "TOPK_V2": (1,), "RANGE": (0, 1, 2), "WHERE": (0,),
    "NON_MAX_SUPPRESSION_V4": (2,), "NON_MAX_SUPPRESSION_V5": (2,),
}
#: Ops whose output size depends on the data itself: always dynamic.
ALWAYS_DYNAMIC = {"UNIQUE"}
