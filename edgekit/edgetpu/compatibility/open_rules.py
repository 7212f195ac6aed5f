"""The rules that rest on documentation alone, each with the compile that would settle it.

A rule rests on documentation alone when every reference it cites is one of Coral's own pages
(``report:coral-*`` in tests/fixtures/evidence/REPORTS.tsv): no compiled pair, no compiler log, no
public report of a compile shows it either way. :func:`documentation_only` finds them in the engine's
data (a rule that gains a compile leaves the list by itself); :data:`SETTLE` names, for each, the
compile that would settle it: the model, the op and its parameters, each for compiler 16 (its default
runtime 14) on a full-int8 model. docs/edgetpu-compatibility.md prints the list, and a test keeps
:data:`SETTLE`'s keys equal to :func:`documentation_only`'s rules.
"""

from __future__ import annotations

from edgekit.edgetpu.compatibility.catalogue import all_rules
from edgekit.edgetpu.compatibility.evidence import DOCS, SEEN_MAPPED, Refs
from edgekit.edgetpu.compatibility.values import OpRule

DOCUMENTATION_PREFIX = "report:coral-"

_POOL = (
    "a Keras model with {layer} whose TFLite op carries fused_activation_function=RELU (a tf.nn.relu right "
    "after it, fused by the converter): the {op} mapped or left on the CPU"
)
_REDUCE = (
    "a model with {op} over axis 0 of a 1x8x8x16 int8 tensor (keepdims), and one over axis 3 of a 1x8x8x6 "
    "tensor: each mapped or left on the CPU"
)
_RANK = (
    "a model resizing a 3-D 1x32x16 int8 tensor ({op} on a tensor that is not 1xHxWxC, written with "
    "tf.raw_ops on a rank-3 input): mapped or left on the CPU"
)

#: Rule id -> the compile that would settle it (model, op, parameters).
SETTLE: dict[str, str] = {
    "constant_params": "a model whose CONV_2D filter is a model input (tf.nn.conv2d(x, w) with w a second int8 "
    "input of 3x3x16x16), compiled: the CONV_2D mapped or left on the CPU, and the words",
    "AVERAGE_POOL_2D.no_fused_activation": _POOL.format(
        layer="AveragePooling2D(2) on 1x32x32x16 int8", op="AVERAGE_POOL_2D"
    ),
    "MAX_POOL_2D.no_fused_activation": _POOL.format(layer="MaxPooling2D(2) on 1x32x32x16 int8", op="MAX_POOL_2D"),
    "CONCATENATION.no_fused_activation": _POOL.format(
        layer="Concatenate of two 1x32x32x8 int8 tensors", op="CONCATENATION"
    ),
    "CONCATENATION.concat_constant": "a model concatenating a 1x16x16x8 activation with a constant 1x16x16x8 tensor "
    "that is not all zeros (and one with an all-zero constant): each CONCATENATION "
    "mapped or left on the CPU",
    "CONV_2D.equal_dilation": "a Keras Conv2D(16, 3, dilation_rate=(1, 2)) on 1x32x32x8 (and dilation_rate=(2, 2) "
    "beside it): the CONV_2D with unequal x/y dilation mapped or left on the CPU",
    "DEPTHWISE_CONV_2D.equal_dilation": "a Keras DepthwiseConv2D(3, dilation_rate=(1, 2)) on 1x32x32x8: mapped or "
    "left on the CPU",
    "EXPAND_DIMS.mapped": "a model with EXPAND_DIMS inside the Edge TPU part (1x28x6 -> 1x1x28x6 before a CONV_2D, "
    "the first op not EXPAND_DIMS): its log's status words for EXPAND_DIMS",
    "FULLY_CONNECTED.fc_weights_format": "a FULLY_CONNECTED 1x256 -> 1x256 converted with "
    "weights_format=SHUFFLED4x16INT8: mapped or left on the CPU",
    "LSTM.mapped": "a model with the builtin LSTM op (not UNIDIRECTIONAL_SEQUENCE_LSTM: a TFLite LSTM cell on "
    "1x16 int8 with 16 units), compiled for runtime 14: mapped or left on the CPU",
    "MEAN.reduce_axes": _REDUCE.format(op="MEAN"),
    "SUM.reduce_axes": _REDUCE.format(op="SUM"),
    "REDUCE_MAX.reduce_axes": _REDUCE.format(op="REDUCE_MAX"),
    "REDUCE_MIN.reduce_axes": _REDUCE.format(op="REDUCE_MIN"),
    "MINIMUM.mapped": "a model with a standalone MINIMUM of two 1x16x16x8 int8 tensors (tf.minimum): mapped or not",
    "REDUCE_MAX.mapped": "a model with REDUCE_MAX over axes 1, 2 of 1x8x8x16 int8 (tf.reduce_max, keepdims): "
    "mapped or not",
    "REDUCE_MIN.mapped": "a model with REDUCE_MIN over axes 1, 2 of 1x8x8x16 int8 (tf.reduce_min, keepdims): "
    "mapped or not",
    "RELU6.mapped": "a model with a standalone RELU6 (not fused into a convolution: after an ADD, as in "
    "MobileNetV3's hard-swish) on 1x16x16x8 int8: mapped or not",
    "RELU_N1_TO_1.mapped": "a model with a standalone RELU_N1_TO_1 (tf.clip_by_value(x, -1, 1) after an ADD) on "
    "1x16x16x8 int8: mapped or not",
    "PACK.pack_batch": "a model packing two 1x8x8x4 int8 tensors along axis 0 into 2x1x8x8x4 (or 2x8x8x4): mapped "
    "or left on the CPU",
    "PAD.pad_batch": "a model with PAD paddings [[1, 0], [0, 0], [0, 0], [0, 0]] on 1x8x8x4 int8: mapped or left on "
    "the CPU",
    "PRELU.prelu": "a Keras PReLU() without shared_axes after a Conv2D on 1x32x32x16 (alpha 32x32x16): mapped or "
    "left on the CPU",
    "RESIZE_BILINEAR.resize_rank": _RANK.format(op="RESIZE_BILINEAR"),
    "RESIZE_NEAREST_NEIGHBOR.resize_rank": _RANK.format(op="RESIZE_NEAREST_NEIGHBOR"),
    "RESIZE_BILINEAR.resize_zero_size": "none can: TensorFlow Lite refuses a resize to or from a size 0, so no "
    "compile of one exists (the rule only keeps check from dividing by zero)",
    "RESIZE_BILINEAR.bilinear_factor": "a model with RESIZE_BILINEAR 1x10x10x8 -> 1x15x15x8 (x1.5, "
    "align_corners=False) and 1x10x10x8 -> 1x19x19x8 (align_corners=True, factor "
    "2): each mapped or left on the CPU",
    "SOFTMAX.softmax_axis": "a model ending in SOFTMAX over 1x20000 int8 values (and one over 1x16000): mapped or "
    "left on the CPU",
    "SPACE_TO_DEPTH.mapped": "a model with SPACE_TO_DEPTH (block 2) on 1x32x32x4 int8 (as YOLOv5's Focus layer "
    "written with tf.nn.space_to_depth): mapped or not",
    "SQUEEZE.mapped": "a model with SQUEEZE inside the Edge TPU part (1x1x28x8 -> 1x28x8 between two convolutions): "
    "mapped or not",
    "SQUEEZE.squeeze": "a model with SQUEEZE 1x28x1x8 -> 1x28x8 (an inner dimension) between two ops the Edge TPU "
    "maps: mapped or left on the CPU",
    "STRIDED_SLICE.strided_slice_masks": "a model slicing x[..., 0:2] of 1x8x8x16 int8 with ellipsis_mask=1 kept in "
    "the TFLite op (and one with new_axis_mask): mapped or left on the CPU",
    "control_flow": "a model with a WHILE loop (an unrolled=False Keras RNN converted with control flow) compiled: "
    "the WHILE and the ops of its body subgraphs mapped or left on the CPU",
}


def rule_refs(where: str, rule: object) -> Refs:
    """What one rule of :func:`all_rules` cites: an op type's mapping cites the compiles that map it (Coral's table
    where none does), every other rule its own evidence."""
    if isinstance(rule, OpRule):
        return SEEN_MAPPED.get(where) or DOCS
    return getattr(rule, "evidence", ())


def documentation_only() -> list[tuple[str, str, object]]:
    """Every rule of the engine whose evidence is Coral's documentation alone, as (id, where it applies, the rule)."""
    return [
        (rid, where, rule)
        for rid, where, rule in all_rules()
        if all(ref.startswith(DOCUMENTATION_PREFIX) for ref in rule_refs(where, rule))
    ]
