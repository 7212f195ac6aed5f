"""The constraints of single op types (each a :class:`Constraint` with its evidence)."""

from __future__ import annotations

from edgekit.edgetpu.compatibility.common import (
    RESHAPES,
    ROWS,
    TRANSPOSES,
    elements,
    normalize_axes,
    shape_text,
    size_constraints,
    transpose_test,
)
from edgekit.edgetpu.compatibility.evidence import DOCS, EV_DEEPLAB, Refs
from edgekit.edgetpu.compatibility.values import Constraint, OpContext, SizeLimit
from edgekit.edgetpu.compatibility.words import CONFIRMED, STRIDES, UNCERTAIN, UNSPECIFIED, Kind


# ---------------------------------------------------------------------------- per-op constraints
def _no_fused_activation(c: OpContext) -> str | None:
    if c.op.options.get("fused_activation_function", 0):
        return f"{c.op.name} with a fused activation function"
    return None


NO_FUSED_ACTIVATION = Constraint(
    _no_fused_activation,
    UNSPECIFIED,
    "apply the activation as a separate layer (ReLU after the pooling/concatenation)",
    DOCS,
    looked_for="a pooling or concatenation with a fused activation in a compiled "
    "pair (converters rarely fuse one there)",
    id="no_fused_activation",
    kind=Kind.OPTION,
)


def _equal_dilation(c: OpContext) -> str | None:
    o = c.op.options
    if o.get("dilation_w_factor", 1) != o.get("dilation_h_factor", 1):
        return f"dilation {o['dilation_h_factor']}x{o['dilation_w_factor']} differs in x and y"
    return None


CONV = (
    Constraint(
        _equal_dilation,
        UNSPECIFIED,
        "use the same dilation rate in both spatial dimensions",
        DOCS,
        looked_for="a compiled convolution with unequal x/y dilation",
        id="equal_dilation",
        kind=Kind.OPTION,
    ),
)


def _fc_keep_num_dims(c: OpContext) -> str | None:
    return (
        "keep_num_dims=True (a Dense layer applied to a 3-D or 4-D input)"
        if c.op.options.get("keep_num_dims")
        else None
    )


def _fc_weights_format(c: OpContext) -> str | None:
    return "weights are not in the default format" if c.op.options.get("weights_format", 0) != 0 else None


# Per-channel FULLY_CONNECTED weights (TF >= 2.16's default) are mapped: Coral's documentation and
# the TFLM convention expect per-tensor weights, but compiler 16 mapped the per-channel Dense layers
# (256 and 1024 scales) of ricardodeazambuja/LibrEdgeTPU's templates (ledger pairs dense_256, dense_1024).
# The rule that refused them is gone; `edgekit quantize` still writes per-tensor Dense weights.
EV_PER_CHANNEL_FC: Refs = (
    "pair:ricardodeazambuja+LibrEdgeTPU__libredgetpu__templates__dense_256",
    "pair:ricardodeazambuja+LibrEdgeTPU__libredgetpu__templates__dense_1024",
)


# A Dense layer on a 3-D or 4-D input keeps its dimensions (keep_num_dims, FULLY_CONNECTED v5 and up). Notes
# quoted in ../shared/reference/edgetpu.md give it "Operation version not supported"; the compiler-16 logs of
# five ledger pairs (KeondoPark/votenet_tf voting layers: FULLY_CONNECTED v5 with keep_num_dims on
# 1x1024x1x256) left all 14 of theirs on the CPU with "unspecified limitation": the logs' words are kept.
# dacarson/WeatherML's 2026 compile log (a Dense(4) on a 3-D input) also left it on the CPU, with "Operation
# version not supported", and its 11 plain Dense layers too, which mapped once that layer was gone; its CPU
# model is not published, so the op versions behind those words (and why the plain ones were refused) are
# unknown: the words for versions other than 5 stay unsettled.
EV_FC_KEEP_NUM_DIMS: Refs = tuple(
    f"pair:KeondoPark+votenet_tf__tflite__tflite_models__{m}"
    for m in (
        "1way__voting_quant_double",
        "2way__voting_quant_double",
        "2way_2__voting_quant_group",
        "scannet_2way__voting_quant",
        "scannet_2way__voting_quant_test",
    )
) + ("report:dacarson/WeatherML",)

FULLY_CONNECTED = (
    Constraint(
        _fc_keep_num_dims,
        UNSPECIFIED,
        "Flatten (or Reshape to 2-D) before the Dense layer",
        EV_FC_KEEP_NUM_DIMS,
        CONFIRMED,
        id="fc_keep_num_dims",
        kind=Kind.OPTION,
    ),
    Constraint(
        _fc_weights_format,
        UNSPECIFIED,
        "convert with the default fully-connected weights format",
        DOCS,
        looked_for="a compiled FULLY_CONNECTED with shuffled weights",
        id="fc_weights_format",
        kind=Kind.OPTION,
    ),
)
# Coral documents a 1-D FULLY_CONNECTED output and constant weights; compiler 16 mapped all 18 of the
# vision transformer in ledger pair prbodmann/Coral-TPU efficient_l3: 49x128 and 49x512 outputs, and
# the attention products whose "weights" are activations computed at run time (EV_FC_2D).
EV_FC_2D: Refs = ("pair:prbodmann+Coral-TPU__transformer__models__efficient_l3",)


def _softmax_axis(c: OpContext) -> str | None:
    t = c.ins[0]
    if t is not None and t.shape and t.shape[-1] > 16000:
        return f"softmax over {t.shape[-1]:,} values; the Edge TPU softmax takes at most 16,000"
    return None


# Coral documents "1-D input only"; the yolov8n log shows SOFTMAX on 1x4x8400x16 as otherwise
# mappable ("More than one subgraph is not supported"), and the yolov8s 160 log maps it: only the
# documented 16,000-value limit is kept, on the softmax axis.
SOFTMAX = (
    Constraint(
        _softmax_axis,
        UNSPECIFIED,
        "drop the final softmax (take argmax of the logits) or apply it on the CPU",
        DOCS,
        looked_for="a compiled softmax over more than 16,000 values",
        id="softmax_axis",
        kind=Kind.SIZE,
    ),
)


def _strided_slice_strides(c: OpContext) -> str | None:
    strides = c.const_ints(3)
    if strides is not None and any(s != 1 for s in strides):
        return f"strides {strides}; only strides of 1 are supported"
    return None


def _strided_slice_masks(c: OpContext) -> str | None:
    o = c.op.options
    return "uses ellipsis_mask or new_axis_mask" if o.get("ellipsis_mask") or o.get("new_axis_mask") else None


STRIDED_SLICE = (
    Constraint(
        _strided_slice_strides,
        STRIDES,
        "slice with stride 1 (use a pooling or a strided convolution to subsample)",
        DOCS + ("log:v15_partial_yolov5s_stdout.txt",),
        CONFIRMED,
        id="strided_slice_strides",
        kind=Kind.OPTION,
    ),
    Constraint(
        _strided_slice_masks,
        UNSPECIFIED,
        "index with plain begin/end ranges",
        DOCS,
        looked_for="a compiled STRIDED_SLICE with ellipsis_mask or new_axis_mask",
        id="strided_slice_masks",
        kind=Kind.OPTION,
    ),
)


def _reduce_axes(c: OpContext) -> str | None:
    t = c.ins[0]
    axes = c.const_ints(1)
    if t is None or axes is None or len(t.shape) < 4:
        return None
    axes_n = normalize_axes(axes, len(t.shape))
    if 0 in axes_n:
        return f"reduce over the batch dimension (axis {sorted(axes_n)})"
    if c.op.name == "MEAN" and len(t.shape) - 1 in axes_n and t.shape[-1] % 4:
        return f"mean over the channel dimension of depth {t.shape[-1]} (not a multiple of 4)"
    return None


def _mean_positions(c: OpContext) -> str | None:
    t = c.ins[0]
    positions = 1
    if t is None:
        return None
    for d in t.shape[:-1]:
        positions *= d
    if positions > MEAN_POSITIONS_LIMIT:
        return (
            f"mean over a {shape_text(t)} input ({positions:,} positions); the Edge TPU maps MEAN only on smaller "
            f"inputs (~{MEAN_POSITIONS_LIMIT:,} positions; heuristic)"
        )
    return None


REDUCE = (
    Constraint(
        _reduce_axes,
        UNSPECIFIED,
        "reduce over x/y only, never over the batch dimension",
        DOCS,
        looked_for="a compiled MEAN/SUM over the batch, or over a channel depth not a multiple of 4",
        id="reduce_axes",
        kind=Kind.LAYOUT,
    ),
)
# google-coral/edgetpu#461: Coral's engineer found MEAN on 1x256x128x3 (32,768 positions) not mapped;
# split into 1x64x128x3 pieces (8,192) it mapped. The limit is placed inside that gap.
MEANS = SizeLimit("mean_positions", 8_192, 32_768, 16_384, ("report:google-coral/edgetpu#461",))
MEAN_POSITIONS_LIMIT = MEANS.limit
MEAN = REDUCE + (
    Constraint(
        _mean_positions,
        UNSPECIFIED,
        "split the input (e.g. into horizontal bands) and "
        "average the parts, or pool first (AVERAGE_POOL_2D) to fewer positions",
        ("report:google-coral/edgetpu#461",),
        UNCERTAIN,
        looked_for="a compile with a MEAN between 8,192 and 32,768 positions",
        id="mean_positions",
        kind=Kind.SIZE,
    ),
)


def pad_batch(c: OpContext) -> str | None:
    pads = c.const_ints(1)
    t = c.ins[0]
    if pads and t is not None and len(t.shape) >= 4 and any(pads[:2]):
        return f"pads the batch dimension by {pads[:2]}"
    return None


def _split_outer(c: OpContext) -> str | None:
    axis = c.const_ints(0)
    t = c.ins[1] if len(c.ins) > 1 else None
    if axis is None or t is None or not t.shape:
        return None
    a = axis[0] + len(t.shape) if axis[0] < 0 else axis[0]
    if a == 0 and t.shape[0] > 1:
        return f"splits {shape_text(t)} along its first dimension"
    return None


# The vision transformer of ledger pair prbodmann/Coral-TPU efficient_l3 splits its attention heads
# along the first dimension of 4x49xN tensors: compiler 16 left all 4 of those SPLITs on the CPU and
# mapped everything around them; yamnet's split along a first dimension of 1 and split_concat's
# along channels mapped.
SPLIT = (
    Constraint(
        _split_outer,
        UNSPECIFIED,
        "split along an inner dimension (keep the leading dimension 1)",
        EV_FC_2D,
        UNCERTAIN,
        looked_for="more compiles splitting along a first dimension larger than "
        "1 (one model shows it, without a log to give the compiler's words)",
        id="split_outer",
        kind=Kind.INFERRED,
    ),
)


def _expand_dims(c: OpContext) -> str | None:
    return "EXPAND_DIMS is left on the CPU by the compiles seen (heuristic)"


# Coral's table lists EXPAND_DIMS (runtime 13), but in the three compiles of ledger repository
# antaramol/ref-signs (a 1-D CNN: EXPAND_DIMS on 1x28x6 with axis -3 before each CONV_2D; packages
# needing runtime 14, so compiler 16) the first EXPAND_DIMS was refused and cut the model after it.
# No compile shows one mapped; the compiler's words for it are unknown.
EXPAND_DIMS = (
    Constraint(
        _expand_dims,
        UNSPECIFIED,
        "insert the unit dimension with RESHAPE instead (a Keras Reshape layer), which maps",
        ("pair:antaramol+ref-signs__modelos__quantized_model", "pair:antaramol+ref-signs__quantized2_model"),
        UNCERTAIN,
        looked_for="a compile that maps an EXPAND_DIMS, or a log giving the compiler's words for it "
        "(one repository's models show it refused)",
        id="expand_dims",
        kind=Kind.INFERRED,
    ),
)


def pack_batch(c: OpContext) -> str | None:
    out = c.outs[0]
    if out is None:
        return None
    axis = c.op.options.get("axis", 0)
    if axis < 0:
        axis += len(out.shape)
    if axis == 0 and len(out.shape) >= 4 and out.shape[0] > 1:
        return "packs along the batch dimension"
    return None


def concat_constant(c: OpContext) -> str | None:
    consts = [t for t in c.ins if t is not None and t.is_constant]
    if not consts:
        return None
    if len(c.ins) != 2:
        return (
            f"{len(c.ins)} inputs, {len(consts)} of them constant; with a constant input there must be exactly 2 inputs"
        )
    v = c.info.constant_value(consts[0])
    q = consts[0].quantization
    zero = q.zero_point if q else 0
    if v is None or bool((v != zero).any()):
        return "a constant input that is not all zeros (only zero-padding is supported)"
    return None


def _resize_rank(c: OpContext) -> str | None:
    t, out = c.ins[0], c.outs[0]
    if t is None or out is None:  # judge() refuses an op without them before its constraints run
        return None
    if len(t.shape) != 4 or len(out.shape) != 4:
        return f"{shape_text(t)} -> {shape_text(out)}; input and output must be 3-D images (H, W, C, as 1xHxWxC)"
    return None


def _bilinear_from_one(c: OpContext) -> str | None:
    t, out = c.ins[0], c.outs[0]
    if t is None or out is None:  # judge() refuses an op without them before its constraints run
        return None
    if not c.op.options.get("align_corners", False):
        return None
    for axis, label in ((1, "height"), (2, "width")):
        i, o = t.shape[axis], out.shape[axis]
        if i != o and min(i, o) == 1:  # a size 0 is _bilinear_factor's
            return (
                f"{label} {i} -> {o} with align_corners=True: no integer scale factor (the corner-aligned "
                "scale is undefined for a size of 1)"
            )
    return None


def _resize_zero(c: OpContext) -> str | None:
    t, out = c.ins[0], c.outs[0]
    if t is None or out is None:  # judge() refuses an op without them before its constraints run
        return None
    for axis, label in ((1, "height"), (2, "width")):
        i, o = t.shape[axis], out.shape[axis]
        if i != o and min(i, o) <= 0:
            return f"{label} {i} -> {o}: a size 0 has no scale factor"
    return None


def _bilinear_factor(c: OpContext) -> str | None:
    t, out = c.ins[0], c.outs[0]
    if t is None or out is None:  # judge() refuses an op without them before its constraints run
        return None
    align = c.op.options.get("align_corners", False)
    for axis, label in ((1, "height"), (2, "width")):
        i, o = t.shape[axis], out.shape[axis]
        if i == o:
            continue
        a, b = (i - 1, o - 1) if align else (i, o)
        if min(a, b) <= 0:  # a size 0 is _resize_zero's, a size 1 with align_corners _bilinear_from_one's
            continue
        if max(a, b) % min(a, b):
            return (
                f"{label} {i} -> {o}{' (align_corners)' if align else ''}: not an integer scale factor; the "
                "Edge TPU resizes bilinearly by integer factors only (heuristic)"
            )
    return None


RESIZE_RANK = Constraint(
    _resize_rank,
    UNSPECIFIED,
    "resize images (1, H, W, C) in NHWC layout",
    DOCS,
    looked_for="a compiled resize of a tensor that is not 4-D",
    id="resize_rank",
    kind=Kind.LAYOUT,
)


# Large resizes are refused ("unspecified limitation"), nearest-neighbour or bilinear. The compiler
# 14.1 log of mistake0316/Google-Coral-Style-Transfer's decoder maps its x2 RESIZE_NEAREST_NEIGHBOR
# to 1x64x64x256 and 1x128x128x128 (2,097,152 values) and refuses the one to 1x256x256x64
# (4,194,304); google-coral/edgetpu#31's bilinear x2 to 512x512x32 (8.4M) was refused where 128x128x32
# mapped. The limit is placed inside that gap, on the output's size.
RESIZES = SizeLimit(
    "resize_size",
    2_097_152,
    4_194_304,
    3_145_728,
    ("pair:mistake0316+Google-Coral-Style-Transfer__model__dark_Decoder", "report:google-coral/edgetpu#31"),
)
RESIZE_LIMIT = RESIZES.limit


def _resize_size(c: OpContext) -> str | None:
    out = c.outs[0]
    if out is not None and elements(out) > RESIZE_LIMIT:
        return (
            f"resizes to {shape_text(out)} ({elements(out):,} values); the Edge TPU maps resizes only to smaller "
            f"outputs (~{RESIZE_LIMIT:,}; heuristic)"
        )
    return None


RESIZE_SIZE = Constraint(
    _resize_size,
    UNSPECIFIED,
    "resize to a smaller output (fewer channels or a lower resolution), or move the "
    "last resize to the CPU after the Edge TPU part",
    ("pair:mistake0316+Google-Coral-Style-Transfer__model__dark_Decoder", "report:google-coral/edgetpu#31"),
    UNCERTAIN,
    looked_for="a compile resizing to between 2,097,152 (mapped) and 4,194,304 (refused) values",
    id="resize_size",
    kind=Kind.SIZE,
)
# Coral's table says of both resizes that "depending on input/output size, this operation might not be
# mapped to the Edge TPU to avoid loss in precision", with no numbers. For nearest-neighbour resizing
# the factor does not matter: a Model Maker EfficientDet-Lite0 (320: its BiFPN upsamples 3x3 -> 5x5)
# compiled by compiler 16 maps all 12 of its RESIZE_NEAREST_NEIGHBOR (a published log:
# "RESIZE_NEAREST_NEIGHBOR 12 Mapped to Edge TPU", 2 classes), so the integer-factor heuristic applies
# to RESIZE_BILINEAR only. Large resizes of either kind are refused: RESIZE_SIZE.
FIX_BILINEAR = (
    "resize by an integer factor (e.g. x2) without align_corners from a size of 1, or move the resize "
    "after the last Edge TPU op"
)
RESIZE_ZERO = Constraint(
    _resize_zero,
    UNSPECIFIED,
    "resize to and from sizes of at least 1",
    DOCS,
    UNCERTAIN,
    looked_for="a compile of a resize to or from a size 0 (TensorFlow Lite cannot run one)",
    id="resize_zero_size",
    kind=Kind.INFERRED,
)
RESIZE_BILINEAR = (
    RESIZE_RANK,
    RESIZE_SIZE,
    RESIZE_ZERO,
    # deeplab's 1 -> 33 with align_corners (its image pooling branch) stays on the CPU in both pairs.
    Constraint(
        _bilinear_from_one, UNSPECIFIED, FIX_BILINEAR, EV_DEEPLAB, CONFIRMED, id="bilinear_from_one", kind=Kind.OPTION
    ),
    Constraint(
        _bilinear_factor,
        UNSPECIFIED,
        FIX_BILINEAR,
        DOCS,
        UNCERTAIN,
        looked_for="compiled RESIZE_BILINEAR with non-integer factors (only deeplab's 1 -> 33 with "
        "align_corners is seen refused; x2 maps)",
        id="bilinear_factor",
        kind=Kind.HEURISTIC,
    ),
)


def squeeze(c: OpContext) -> str | None:
    t, out = c.ins[0], c.outs[0]
    if t is None or out is None:  # judge() refuses an op without them before its constraints run
        return None
    leading = 0
    for d in t.shape:
        if d != 1:
            break
        leading += 1
    # Fine when the output is the input minus some of its leading 1s (no relayout needed).
    if not any(tuple(out.shape) == tuple(t.shape[k:]) for k in range(leading + 1)):
        return f"{shape_text(t)} -> {shape_text(out)} squeezes an inner dimension (needs a relayout)"
    return None


def prelu(c: OpContext) -> str | None:
    alpha = c.ins[1] if len(c.ins) > 1 else None
    if alpha is not None and any(d > 1 for d in alpha.shape[:-1]):
        return f"alpha is {shape_text(alpha)}; it must be 1-D (only the innermost dimension > 1)"
    return None


FIX_TRANSPOSE = "transpose on the CPU after the Edge TPU part, or keep the layout NHWC"
TRANSPOSE = size_constraints(TRANSPOSES, transpose_test, FIX_TRANSPOSE, measured="a transpose")


#: Every size limit the rules draw, as the compiles show it (docs/edgetpu-compatibility.md lists them).
SIZE_LIMITS: tuple[SizeLimit, ...] = (ROWS, TRANSPOSES, RESHAPES, RESIZES, MEANS)
