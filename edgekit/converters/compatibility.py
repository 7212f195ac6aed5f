"""Offline Edge TPU compatibility: which op the real ``edgetpu_compiler`` 16 would map, and why.

Pure rules over :class:`edgekit.tflite_model.ModelInfo`; no TensorFlow, no subprocess, any OS.
:func:`check_model` gives every op of the main subgraph a ``target`` (``edgetpu`` or ``cpu``) and
a ``reason`` in the compiler's own status words where one is known (its operation log says
"Mapped to Edge TPU", "More than one subgraph is not supported", "Operation is working on an
unsupported data type", ...), plus a ``detail`` saying which rule fired.

Sources of the rules (see also ``../shared/reference/edgetpu.md``):

* the supported-op table and its "known limitations" from coral.ai (models-intro), with the
  minimum Edge TPU runtime each op needs;
* the op-version ceiling of compiler 16: :mod:`edgekit.converters.op_versions`;
* status words copied from real compiler logs (``tests/fixtures/compiler``).

**The one-subgraph rule.** Without ``-a`` the compiler makes exactly one Edge TPU subgraph. Which
ops land in it follows TensorFlow Lite's delegate partitioning (the compiler runs as a TFLite
delegate: "Restored original execution plan after delegate application failure" is TFLite's
message): ops are grouped, in execution order, into alternating runs of mappable and unmappable
ops, a run absorbing every op of its kind whose inputs are ready; the first mappable run becomes
the Edge TPU subgraph. Every other mappable op stays on the CPU as "More than one subgraph is not
supported" (a QUANTIZE there is reported as "Operation is otherwise supported, but not mapped due
to some unspecified limitation", as in google-coral/edgetpu#342). The evidence:

* deeplabv3 (``../shared/testdata``): everything from the first unmappable op (#64
  RESIZE_BILINEAR) on, all 8 ops of which depend on it, stays on the CPU, and ops #62/#63, which
  feed the CPU part but do not depend on #64, are mapped;
* a float-I/O model whose *first* op (QUANTIZE from float) is unmappable still gets all its other
  ops mapped (``yolov8s_integer_quant_edgetpu_160_CPU.log`` in the fixtures; f0cal/google-coral#20),
  so it is not "everything after the first unmappable op in execution order";
* google-coral/edgetpu#342: a 2-op first run is kept even though later runs are far larger, so it
  is the *first* mappable run, not the largest.

The compiled pairs in ``../shared/testdata`` cannot tell "ops that depend on the unmappable one"
from "all later ops" apart (every op after deeplab's #64 depends on it); the float-I/O evidence
can, and it favours the dependency-based partitioning implemented here.
"""

from __future__ import annotations

import heapq
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable

from edgekit.converters.op_versions import version_problem
from edgekit.errors import InvalidModelError, UsageError
from edgekit.tflite_model import EDGETPU_CUSTOM_OP, ModelInfo, OpInfo, SubgraphInfo, TensorInfo

# ---------------------------------------------------------------------------------- status words
MAPPED = "Mapped to Edge TPU"
MORE_THAN_ONE_SUBGRAPH = "More than one subgraph is not supported"
UNSPECIFIED = "Operation is otherwise supported, but not mapped due to some unspecified limitation"
NOT_SUPPORTED = "Operation not supported"
DATA_TYPE = "Operation is working on an unsupported data type"
VERSION = "Operation version not supported"
NOT_CONSTANT = "Filter, bias, or other param is not constant at compile-time"
RANK = "Tensor has unsupported rank"  # the compiler's words start so (google-coral/edgetpu#708)
# Not the compiler's words (no log shows what it says here):
RUNTIME = "Operation needs a newer Edge TPU runtime than --min-runtime"
# Whole-model failures: the compiler refuses the model, nothing is mapped.
PARSE_FAILED = "Model could not be parsed"
DYNAMIC = "Model has dynamic-sized tensors"
CUSTOM_UNRESOLVED = "Encountered unresolved custom op"

COMPILER_DEFAULT_MIN_RUNTIME = 14
SUPPORTED_MIN_RUNTIMES = range(10, 15)
#: On-chip parameter cache of the Edge TPU (~8 MB, coral.ai pipeline and multiple-edgetpu docs).
#: Real compiles cache up to ~6-7.6 MiB of it (the compiler keeps some for itself), so the
#: on-chip estimate is an upper bound near the limit.
PARAMETER_CACHE_BYTES = 8 * 1024 * 1024

_QUANT_TYPES = {"int8", "uint8"}
_FLOAT_TYPES = {"float32", "float16", "float64", "bfloat16"}
_CONST_OK_TYPES = {"int8", "uint8", "int32"}

#: Ops the Edge TPU supports (coral.ai supported-operations table, 40 ops), by TFLite builtin
#: name, with the Edge TPU runtime each needs (10 = every runtime). Runtime numbers for the newer
#: ops come from the coral.ai table as remembered in ../shared/reference/edgetpu.md (unverified).
SUPPORTED_OPS: dict[str, int] = {
    "ADD": 10, "AVERAGE_POOL_2D": 10, "CONCATENATION": 10, "CONV_2D": 10, "DEPTHWISE_CONV_2D": 10,
    "EXPAND_DIMS": 13, "FULLY_CONNECTED": 10, "L2_NORMALIZATION": 10, "LOGISTIC": 10,
    "LSTM": 14, "UNIDIRECTIONAL_SEQUENCE_LSTM": 14, "MAXIMUM": 10, "MAX_POOL_2D": 10, "MEAN": 10,
    "MINIMUM": 10, "MUL": 10, "PACK": 13, "PAD": 10, "PRELU": 13, "QUANTIZE": 13, "REDUCE_MAX": 14,
    "REDUCE_MIN": 14, "RELU": 10, "RELU6": 10, "RELU_N1_TO_1": 10, "RESHAPE": 10,
    "RESIZE_BILINEAR": 10, "RESIZE_NEAREST_NEIGHBOR": 10, "RSQRT": 14, "SLICE": 10, "SOFTMAX": 10,
    "SPACE_TO_DEPTH": 10, "SPLIT": 10, "SQUEEZE": 10, "STRIDED_SLICE": 10, "SUB": 10, "SUM": 13,
    "SQUARED_DIFFERENCE": 14, "TANH": 10, "TRANSPOSE": 14, "TRANSPOSE_CONV": 13,
}
#: Custom ops the compiler's TensorFlow Lite resolves (they stay on the CPU); any other custom op
#: makes the compile fail ("ERROR: Encountered unresolved custom op: Atan.").
KNOWN_CUSTOM_OPS = {"TFLite_Detection_PostProcess"}

# Constant "param" inputs by op: (input position, what it is).
_PARAM_INPUTS: dict[str, tuple[tuple[int, str], ...]] = {
    "CONV_2D": ((1, "filter"), (2, "bias")),
    "DEPTHWISE_CONV_2D": ((1, "filter"), (2, "bias")),
    "FULLY_CONNECTED": ((1, "weights"), (2, "bias")),
    "TRANSPOSE_CONV": ((0, "output shape"), (1, "filter"), (3, "bias")),
    "PRELU": ((1, "alpha"),),
    "PAD": ((1, "paddings"),),
    "MEAN": ((1, "axis"),), "SUM": ((1, "axis"),), "REDUCE_MAX": ((1, "axis"),), "REDUCE_MIN": ((1, "axis"),),
    "STRIDED_SLICE": ((1, "begin"), (2, "end"), (3, "strides")),
    "SLICE": ((1, "begin"), (2, "size")),
    "RESIZE_BILINEAR": ((1, "size"),), "RESIZE_NEAREST_NEIGHBOR": ((1, "size"),),
    "SPLIT": ((0, "axis"),), "TRANSPOSE": ((1, "permutation"),), "RESHAPE": ((1, "shape"),),
    "EXPAND_DIMS": ((1, "axis"),),
}
_FUSED_ACTIVATION_NOT_ALLOWED = {"AVERAGE_POOL_2D", "MAX_POOL_2D", "CONCATENATION"}

#: The detail of a mappable op left outside the one Edge TPU subgraph.
CUT_OFF = "mappable, but outside the one Edge TPU subgraph"

# What to change, by rule.
FIX_QUANTIZE = ("quantize the whole model to int8 (full-integer post-training quantization with integer I/O): "
                "`edgekit quantize`")
FIX_MOVE_TO_END = "replace it with a supported op, or move it after the last op that should run on the Edge TPU"


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

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "name": self.name, "version": self.version, "target": self.target,
                "reason": self.reason, "detail": self.detail}


@dataclass(frozen=True)
class Problem:
    """Something that keeps ops (or the whole model) off the Edge TPU, with what to do about it."""

    code: str
    message: str
    hint: str | None = None
    ops: tuple[int, ...] = ()
    fatal: bool = False  # the compiler would refuse the whole model

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "hint": self.hint, "ops": list(self.ops),
                "fatal": self.fatal}


@dataclass
class CheckReport:
    """The offline prediction of one compile (JSON schema: README, ``edgekit check --json``)."""

    model: str | None
    verdict: str  # "full" | "partial" | "none"
    ops: list[OpVerdict]
    subgraphs: int
    param_bytes: int
    on_chip_bytes_estimate: int | None
    off_chip_bytes_estimate: int | None
    problems: list[Problem] = field(default_factory=list)
    advice: list[str] = field(default_factory=list)
    min_runtime: int = COMPILER_DEFAULT_MIN_RUNTIME
    compiled: bool = False

    @property
    def edgetpu_ops(self) -> int:
        return sum(1 for o in self.ops if o.target == "edgetpu")

    @property
    def cpu_ops(self) -> int:
        return sum(1 for o in self.ops if o.target == "cpu")

    @property
    def fully_mappable(self) -> bool:
        return self.verdict == "full"

    def split_by_type(self) -> dict[str, Counter]:
        """{"edgetpu": Counter(op name -> n), "cpu": Counter(...)}, the way a compiled pair is scored."""
        out = {"edgetpu": Counter(), "cpu": Counter()}
        for o in self.ops:
            out[o.target][o.name] += 1
        return out

    def table(self) -> list[tuple[str, int, str]]:
        """Rows of the compiler's operation log: (operator, count, status), in first-seen order."""
        counts: dict[tuple[str, str], int] = {}
        for o in self.ops:
            counts[(o.name, o.reason)] = counts.get((o.name, o.reason), 0) + 1
        return [(name, n, status) for (name, status), n in counts.items()]

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "verdict": self.verdict,
            "compiled": self.compiled,
            "min_runtime": self.min_runtime,
            "ops": [o.to_dict() for o in self.ops],
            "summary": {
                "edgetpu_ops": self.edgetpu_ops,
                "cpu_ops": self.cpu_ops,
                "subgraphs": self.subgraphs,
                "param_bytes": self.param_bytes,
                "on_chip_bytes_estimate": self.on_chip_bytes_estimate,
                "off_chip_bytes_estimate": self.off_chip_bytes_estimate,
            },
            "problems": [p.to_dict() for p in self.problems],
            "advice": list(self.advice),
        }


# ------------------------------------------------------------------------------------ helpers
def _shape(t: TensorInfo) -> str:
    return "x".join(map(str, t.shape)) or "scalar"


def _const_ints(info: ModelInfo, t: TensorInfo | None) -> list[int] | None:
    if t is None or not t.is_constant or t.dtype not in ("int32", "int64"):
        return None
    v = info.constant_value(t)
    return None if v is None else [int(x) for x in v.reshape(-1)]


def _normalize_axes(axes: Iterable[int], rank: int) -> set[int]:
    return {a + rank if a < 0 else a for a in axes}


def _rank_problem(t: TensorInfo) -> bool:
    """More than 3 dimensions and one of the outer ones exceeds 1."""
    return len(t.shape) > 3 and any(d > 1 for d in t.shape[:-3])


class _Rule(Exception):
    """Raised inside the per-op judge: the op is not mappable."""

    def __init__(self, reason: str, detail: str, fix: str | None = None):
        super().__init__(detail)
        self.reason, self.detail, self.fix = reason, detail, fix


def _judge(info: ModelInfo, g: SubgraphInfo, op: OpInfo, min_runtime: int) -> tuple[str, str | None, str | None]:
    """(reason, detail, fix) for one op on its own; reason MAPPED when it could run on the Edge TPU."""
    try:
        _check_op(info, g, op, min_runtime)
    except _Rule as r:
        return r.reason, r.detail, r.fix
    return MAPPED, None, None


def _check_op(info: ModelInfo, g: SubgraphInfo, op: OpInfo, min_runtime: int) -> None:
    name = op.name
    ins = [g.tensor(i) for i in op.inputs]
    outs = [g.tensor(i) for i in op.outputs]

    if name == "CUSTOM":
        raise _Rule(DATA_TYPE if op.custom_code in KNOWN_CUSTOM_OPS else NOT_SUPPORTED,
                    f"custom op {op.custom_code!r} runs on the CPU", FIX_MOVE_TO_END)
    if name in SUPPORTED_OPS and (not ins or ins[0] is None or not outs or outs[0] is None):
        raise InvalidModelError(f"op #{op.index} {name} has no input or no output tensor",
                                "re-export the model; TensorFlow Lite would not run it either")

    # Data types: the Edge TPU computes on 8-bit integers only.
    activations = [t for t in ins + outs if t is not None and not t.is_constant and not t.is_variable]
    float_in = [t for t in activations if t.dtype in _FLOAT_TYPES]
    bad = [t for t in activations if t.dtype not in _QUANT_TYPES]
    bad += [t for t in ins if t is not None and t.is_constant and t.dtype not in _CONST_OK_TYPES]
    bad += [t for t in ins if t is not None and t.is_variable and t.dtype not in _QUANT_TYPES | {"int16"}]
    if name == "QUANTIZE" and float_in and not any(t.dtype not in _QUANT_TYPES for t in outs if t):
        raise _Rule(UNSPECIFIED, f"quantizes a {float_in[0].dtype} input: the model has float I/O",
                    "use integer (uint8/int8) model inputs: `edgekit quantize` makes them")
    if name not in SUPPORTED_OPS:
        # float/int16 data is reported as a data-type problem (DEQUANTIZE in real logs); index
        # outputs (int32/int64 of ARG_MAX and the like) do not change the verdict "not supported".
        odd = sorted({t.dtype for t in bad if t.dtype in _FLOAT_TYPES | {"int16"}})
        if odd:
            raise _Rule(DATA_TYPE, f"{name} on {', '.join(odd)} data, and {name} is not an Edge TPU op",
                        FIX_QUANTIZE if set(odd) & _FLOAT_TYPES else FIX_MOVE_TO_END)
        raise _Rule(NOT_SUPPORTED, f"{name} is not in the Edge TPU's supported-op table", FIX_MOVE_TO_END)
    if bad:
        types = sorted({t.dtype for t in bad})
        fix = FIX_QUANTIZE if set(types) & _FLOAT_TYPES else (
            "use 8-bit activations (no 16x8 quantization)" if "int16" in types else FIX_MOVE_TO_END)
        raise _Rule(DATA_TYPE, f"works on {', '.join(types)} tensors; the Edge TPU computes on int8/uint8 only", fix)

    # Runtime version needed for this op.
    need = SUPPORTED_OPS[name]
    if need > min_runtime:
        raise _Rule(RUNTIME, f"{name} needs Edge TPU runtime {need}; compiling for runtime {min_runtime}",
                    f"compile with --min-runtime {need} (the device then needs libedgetpu runtime {need} or newer)")

    # Compile-time constant params.
    for pos, what in _PARAM_INPUTS.get(name, ()):
        t = g.tensor(op.inputs[pos]) if pos < len(op.inputs) else None
        if t is not None and not t.is_constant:
            if name == "RESHAPE" and pos == 1:
                continue  # RESHAPE may take its shape from options; a computed shape shows as dynamic
            raise _Rule(NOT_CONSTANT, f"the {what} (input {pos}) is computed at run time",
                        "make weights and shape/axis params constants of the model (freeze the graph)")

    # Rank: only the three innermost dimensions may exceed 1.
    for t in ins + outs:
        if t is not None and not t.is_constant and _rank_problem(t):
            raise _Rule(RANK, f"tensor {t.name!r} is {_shape(t)}: only the 3 innermost dimensions may exceed 1",
                        "keep tensors at most 4-D with a batch of 1")

    opt = op.options
    if name in _FUSED_ACTIVATION_NOT_ALLOWED and opt.get("fused_activation_function", 0):
        raise _Rule(UNSPECIFIED, f"{name} with a fused activation function",
                    "apply the activation as a separate layer (ReLU after the pooling/concatenation)")
    rule = _OP_RULES.get(name)
    if rule:
        rule(info, g, op, ins, outs)


# --------------------------------------------------------------------------- per-op limitations
def _conv(info, g, op, ins, outs):
    o = op.options
    if o.get("dilation_w_factor", 1) != o.get("dilation_h_factor", 1):
        raise _Rule(UNSPECIFIED, f"dilation {o['dilation_h_factor']}x{o['dilation_w_factor']} differs in x and y",
                    "use the same dilation rate in both spatial dimensions")


def _fully_connected(info, g, op, ins, outs):
    o = op.options
    if o.get("keep_num_dims"):
        raise _Rule(VERSION, "keep_num_dims=True (a Dense layer applied to a 3-D or 4-D input)",
                    "Flatten (or Reshape to 2-D) before the Dense layer")
    if o.get("weights_format", 0) != 0:
        raise _Rule(UNSPECIFIED, "weights are not in the default format",
                    "convert with the default fully-connected weights format")
    out = outs[0] if outs else None
    if out is not None and sum(1 for d in out.shape if d > 1) > 1:
        raise _Rule(UNSPECIFIED, f"output is {_shape(out)}; the Edge TPU needs a one-dimensional FC output",
                    "Flatten before the Dense layer so that its output is [1, units]")
    w = ins[1] if len(ins) > 1 else None
    if w is not None and w.quantization is not None and w.quantization.per_channel:
        raise _Rule(UNSPECIFIED, f"per-channel weights ({len(w.quantization.scales)} scales); the Edge TPU "
                                 "toolchain expects per-tensor FULLY_CONNECTED weights",
                    "quantize Dense weights per tensor: `edgekit quantize` does "
                    "(converter._experimental_disable_per_channel_quantization_for_dense_layers = True)")


def _softmax(info, g, op, ins, outs):
    t = ins[0]
    n = 1
    for d in t.shape:
        n *= d
    if sum(1 for d in t.shape if d > 1) > 1:
        raise _Rule(UNSPECIFIED, f"input is {_shape(t)}; the Edge TPU supports only a 1-D softmax",
                    "apply the softmax over a flattened [1, N] tensor, or on the CPU after the model")
    if n > 16000:
        raise _Rule(UNSPECIFIED, f"{n} elements; the Edge TPU softmax takes at most 16,000",
                    "drop the final softmax (take argmax of the logits) or apply it on the CPU")


def _strided_slice(info, g, op, ins, outs):
    strides = _const_ints(info, ins[3] if len(ins) > 3 else None)
    o = op.options
    if strides is not None and any(s != 1 for s in strides):
        raise _Rule(UNSPECIFIED, f"strides {strides}; only strides of 1 are supported",
                    "slice with stride 1 (use a pooling or a strided convolution to subsample)")
    if o.get("ellipsis_mask") or o.get("new_axis_mask"):
        raise _Rule(UNSPECIFIED, "uses ellipsis_mask or new_axis_mask", "index with plain begin/end ranges")


def _batch_axis_rule(what: str):
    def rule(info, g, op, ins, outs):
        t = ins[0]
        axes = _const_ints(info, ins[1] if len(ins) > 1 else None)
        if axes is None or len(t.shape) < 4:
            return
        axes_n = _normalize_axes(axes, len(t.shape))
        if 0 in axes_n:
            raise _Rule(UNSPECIFIED, f"{what} over the batch dimension (axis {sorted(axes_n)})",
                        f"do not {what} over the batch dimension")
        if op.name == "MEAN" and len(t.shape) - 1 in axes_n and t.shape[-1] % 4:
            raise _Rule(UNSPECIFIED, f"mean over the channel dimension of depth {t.shape[-1]} (not a multiple of 4)",
                        "reduce over x/y only, or make the depth a multiple of 4")
    return rule


def _pad(info, g, op, ins, outs):
    pads = _const_ints(info, ins[1] if len(ins) > 1 else None)
    if pads and len(ins[0].shape) >= 4 and any(pads[:2]):
        raise _Rule(UNSPECIFIED, f"pads the batch dimension by {pads[:2]}", "do not pad the batch dimension")


def _pack(info, g, op, ins, outs):
    out = outs[0]
    axis = op.options.get("axis", 0)
    if axis < 0:
        axis += len(out.shape)
    if axis == 0 and len(out.shape) >= 4 and out.shape[0] > 1:
        raise _Rule(UNSPECIFIED, "packs along the batch dimension", "pack along an inner dimension")


def _concatenation(info, g, op, ins, outs):
    consts = [t for t in ins if t is not None and t.is_constant]
    if not consts:
        return
    if len(ins) != 2:
        raise _Rule(UNSPECIFIED, f"{len(ins)} inputs, {len(consts)} of them constant; with a constant input "
                                 "there must be exactly 2 inputs", "concatenate constants in a separate step")
    v = info.constant_value(consts[0])
    q = consts[0].quantization
    zero = q.zero_point if q else 0
    if v is None or bool((v != zero).any()):
        raise _Rule(UNSPECIFIED, "a constant input that is not all zeros (only zero-padding is supported)",
                    "feed the constant as a model input, or use PAD for zero padding")


def _resize(info, g, op, ins, outs):
    t, out = ins[0], outs[0]
    if len(t.shape) != 4 or len(out.shape) != 4:
        raise _Rule(UNSPECIFIED, f"{_shape(t)} -> {_shape(out)}; input and output must be 3-D (batch 1, H, W, C)",
                    "resize 4-D NHWC tensors with batch 1")
    align = op.options.get("align_corners", False)
    for axis, label in ((1, "height"), (2, "width")):
        i, o = t.shape[axis], out.shape[axis]
        if i == o:
            continue
        if align:
            if i == 1 or o == 1:
                raise _Rule(UNSPECIFIED, f"{label} {i} -> {o} with align_corners=True: no integer scale factor "
                                         "(the corner-aligned scale is undefined for a size of 1)",
                            "for a 1x1 input, broadcast instead of resizing (e.g. UpSampling2D/tile), or resize "
                            "with align_corners=False; otherwise move the resize after the last Edge TPU op")
            a, b = i - 1, o - 1
        else:
            a, b = i, o
        if max(a, b) % min(a, b):
            raise _Rule(UNSPECIFIED, f"{label} {i} -> {o}{' (align_corners)' if align else ''}: not an integer "
                                     "scale factor; the Edge TPU resizes by integer factors only (heuristic)",
                        "resize by an integer factor (e.g. x2), or move the resize after the last Edge TPU op")


def _squeeze(info, g, op, ins, outs):
    t, out = ins[0], outs[0]
    leading = 0
    for d in t.shape:
        if d != 1:
            break
        leading += 1
    # Fine when the output is the input minus some of its leading 1s (no relayout needed).
    if not any(tuple(out.shape) == tuple(t.shape[k:]) for k in range(leading + 1)):
        raise _Rule(UNSPECIFIED, f"{_shape(t)} -> {_shape(out)} squeezes an inner dimension (needs a relayout)",
                    "squeeze only leading dimensions of size 1")


def _prelu(info, g, op, ins, outs):
    alpha = ins[1] if len(ins) > 1 else None
    if alpha is not None and sum(1 for d in alpha.shape[:-1] if d > 1):
        raise _Rule(UNSPECIFIED, f"alpha is {_shape(alpha)}; it must be 1-D (only the innermost dimension > 1)",
                    "Keras PReLU with shared_axes=[1, 2]")


_OP_RULES = {
    "CONV_2D": _conv, "DEPTHWISE_CONV_2D": _conv, "FULLY_CONNECTED": _fully_connected, "SOFTMAX": _softmax,
    "STRIDED_SLICE": _strided_slice, "MEAN": _batch_axis_rule("reduce"), "SUM": _batch_axis_rule("reduce"),
    "REDUCE_MAX": _batch_axis_rule("reduce"), "REDUCE_MIN": _batch_axis_rule("reduce"), "PAD": _pad,
    "PACK": _pack, "CONCATENATION": _concatenation, "RESIZE_BILINEAR": _resize,
    "RESIZE_NEAREST_NEIGHBOR": _resize, "SQUEEZE": _squeeze, "PRELU": _prelu,
}


# ------------------------------------------------------------------------------ partitioning
def partition(g: SubgraphInfo, mappable: list[bool]) -> list[tuple[bool, list[int]]]:
    """TensorFlow Lite's delegate partitioning of ``g``'s ops into alternating runs.

    Each run has one kind (mappable or not); it starts with the lowest-index ready op and absorbs
    every op of its kind whose inputs are ready, transitively. Returns [(kind, op indices)] in run
    order. O((ops + tensor uses) log ops).
    """
    n = len(g.ops)
    producer: dict[int, int] = {}
    for op in g.ops:
        for t in op.outputs:
            if t >= 0:
                producer[t] = op.index
    waiting = [0] * n
    consumers: dict[int, list[int]] = {}
    for op in g.ops:
        deps = {t for t in op.inputs if t >= 0 and t in producer}
        waiting[op.index] = len(deps)
        for t in deps:
            consumers.setdefault(t, []).append(op.index)
    ready: dict[bool, list[int]] = {True: [], False: []}
    for i in range(n):
        if waiting[i] == 0:
            heapq.heappush(ready[mappable[i]], i)
    runs: list[tuple[bool, list[int]]] = []
    done = 0
    while done < n:
        if not ready[True] and not ready[False]:  # a cycle: cannot happen in a valid model
            rest = [i for i in range(n) if waiting[i] > 0]
            runs.append((False, rest))
            break
        kind = mappable[min(h[0] for h in ready.values() if h)]
        run: list[int] = []
        heap = ready[kind]
        while heap:
            i = heapq.heappop(heap)
            run.append(i)
            done += 1
            for t in g.ops[i].outputs:
                for c in consumers.get(t, ()):
                    waiting[c] -= 1
                    if waiting[c] == 0:
                        heapq.heappush(ready[mappable[c]], c)
        runs.append((kind, sorted(run)))
    return runs


# -------------------------------------------------------------------------------------- check
def check_model(info: ModelInfo, min_runtime: int = COMPILER_DEFAULT_MIN_RUNTIME) -> CheckReport:
    """Predict what ``edgetpu_compiler -m min_runtime`` (compiler 16, default flags) does with ``info``."""
    if min_runtime not in SUPPORTED_MIN_RUNTIMES:
        raise UsageError(f"--min-runtime {min_runtime} is not a runtime edgetpu_compiler 16 targets",
                         f"use {SUPPORTED_MIN_RUNTIMES.start}..{SUPPORTED_MIN_RUNTIMES.stop - 1} (default 14)")
    if info.is_compiled:
        return _check_compiled(info, min_runtime)
    g = info.main
    problems: list[Problem] = []
    advice: list[str] = []

    judged = [_judge(info, g, op, min_runtime) for op in g.ops]
    mappable = [r[0] == MAPPED for r in judged]

    # Whole-model failures: the compiler refuses the model.
    fatal: list[tuple[str, Problem]] = []
    # Every op of every subgraph (control-flow bodies too) must parse. One message per (op, version).
    unparsable: dict[tuple[str, int], str] = {}
    main_unparsable: list[int] = []
    for sub in info.subgraphs:
        for op in sub.ops:
            why = version_problem(op.name, op.version)
            if why:
                unparsable.setdefault((op.name, op.version), why)
                if sub is g:
                    main_unparsable.append(op.index)
    if unparsable:
        whys = list(unparsable.values())
        fatal.append((PARSE_FAILED, Problem(
            "op_version", "edgetpu_compiler 16 cannot parse this model ('Didn't find op for builtin opcode'): "
            + "; ".join(whys[:3]) + (f"; and {len(whys) - 3} more" if len(whys) > 3 else ""),
            "convert with op versions TFLite 2.5 knows: `edgekit quantize` checks them; with plain TensorFlow "
            "avoid int16 activations and newer op features", tuple(main_unparsable), fatal=True)))
    if info.has_dynamic_shapes:
        dyn = [t for t in g.tensors if t.is_dynamic]
        first = dyn[0] if dyn else None
        fatal.append((DYNAMIC, Problem(
            "dynamic_shapes", "the model has dynamic-sized tensors"
            + (f" (e.g. {first.name!r} with shape signature {list(first.shape_signature)})" if first else "")
            + ": the compiler fails with 'Attempting to use a delegate that only supports static-sized tensors'",
            "convert with a fixed batch of 1: keras.Input(shape, batch_size=1), or a tf.function with "
            "TensorSpec([1, H, W, C]); `edgekit quantize` does this", fatal=True)))
    unresolved = [op for op in g.ops if op.name == "CUSTOM" and op.custom_code not in KNOWN_CUSTOM_OPS
                  and op.custom_code != EDGETPU_CUSTOM_OP]
    if unresolved:
        fatal.append((CUSTOM_UNRESOLVED, Problem(
            "custom_op", f"custom op {unresolved[0].custom_code!r} is unknown to the compiler's TensorFlow Lite: "
            f"the compile fails with 'Encountered unresolved custom op: {unresolved[0].custom_code}'",
            "remove the custom op from the model and run that step on the CPU after the Edge TPU model",
            tuple(op.index for op in unresolved), fatal=True)))
    if len(info.subgraphs) > 1:
        problems.append(Problem(
            "control_flow", f"the model has {len(info.subgraphs)} subgraphs (control flow such as WHILE/IF); "
            "only the main subgraph is checked and the Edge TPU maps none of the control-flow ops",
            "unroll loops and conditionals (e.g. unroll=True for Keras RNNs)"))

    if info.quantization_state == "float":
        problems.append(Problem(
            "not_quantized", "the model is not quantized (float ops): the Edge TPU runs only fully 8-bit "
            "quantized models, and the compiler refuses it ('Model not quantized') or maps nothing",
            FIX_QUANTIZE, tuple(op.index for op in g.ops)))

    if info.quantization_state == "float":
        advice.append("The model is not quantized: " + FIX_QUANTIZE + ".")
    if fatal:
        status = fatal[0][0]
        verdicts = [OpVerdict(op.index, op.name, op.version, "cpu", status,
                              f"otherwise: {r[0]}" + (f" ({r[1]})" if r[1] else ""), r[2])
                    for op, r in zip(g.ops, judged)]
        problems = [p for _, p in fatal] + problems
        advice = [f"{p.message}. Fix: {p.hint}" for _, p in fatal if p.hint] + advice
        return CheckReport(info.path, "none", verdicts, 0, info.param_bytes, 0, 0, problems, advice,
                           min_runtime)

    runs = partition(g, mappable)
    tpu_run: set[int] = next((set(r) for kind, r in runs if kind), set())
    verdicts = []
    for op, (reason, detail, fix) in zip(g.ops, judged):
        if reason == MAPPED and op.index in tpu_run:
            verdicts.append(OpVerdict(op.index, op.name, op.version, "edgetpu", MAPPED))
        elif reason == MAPPED:
            words = UNSPECIFIED if op.name == "QUANTIZE" else MORE_THAN_ONE_SUBGRAPH
            verdicts.append(OpVerdict(op.index, op.name, op.version, "cpu", words, CUT_OFF))
        else:
            verdicts.append(OpVerdict(op.index, op.name, op.version, "cpu", reason, detail, fix))

    # Parameters of the Edge TPU ops against the on-chip cache.
    buffers = {t.buffer: t.buffer_bytes for i in tpu_run for k in g.ops[i].inputs
               if k >= 0 and (t := g.tensors[k]).is_constant}
    tpu_params = sum(buffers.values())
    on_chip = min(tpu_params, PARAMETER_CACHE_BYTES)
    off_chip = tpu_params - on_chip

    n_tpu = len(tpu_run)
    verdict = "full" if n_tpu == len(g.ops) and g.ops else ("none" if n_tpu == 0 else "partial")
    problems += _cpu_problems(verdicts)
    advice += _advice(g, verdicts, mappable)
    if off_chip:
        problems.append(Problem(
            "off_chip", f"about {_mib(tpu_params)} of parameters for a ~8 MiB on-chip cache: ~{_mib(off_chip)} "
            "would be streamed from host memory at every inference",
            "use a smaller or narrower model, or split it over several Edge TPUs with `edgekit compile --segments N`"))
        advice.append(f"Parameters ({_mib(tpu_params)}) exceed the Edge TPU's ~8 MiB cache; ~{_mib(off_chip)} would "
                      "stream from host memory each inference (slower). Shrink the model or pipeline it with "
                      "--segments.")
    elif tpu_params > 6 * 1024 * 1024:
        advice.append(f"Parameters ({_mib(tpu_params)}) are close to the ~8 MiB cache; the compiler caches ~6-7.6 MiB "
                      "in practice, so some may be streamed.")
    return CheckReport(info.path, verdict, verdicts, 1 if n_tpu else 0, info.param_bytes, on_chip, off_chip,
                       problems, advice, min_runtime)


def _mib(n: int) -> str:
    return f"{n / 1024 / 1024:.2f} MiB"


def _cpu_problems(verdicts: list[OpVerdict]) -> list[Problem]:
    """One problem per (reason, detail) among the unmappable ops."""
    grouped: dict[tuple[str, str, str | None], list[int]] = {}
    for v in verdicts:
        if v.target == "cpu" and v.detail != CUT_OFF:
            grouped.setdefault((v.reason, f"{v.name}: {v.detail or v.reason}", v.fix), []).append(v.index)
    codes = {NOT_SUPPORTED: "unsupported_op", DATA_TYPE: "data_type", VERSION: "op_version_not_mapped",
             NOT_CONSTANT: "not_constant", RANK: "rank", RUNTIME: "runtime", UNSPECIFIED: "limitation"}
    out = []
    for (reason, text, fix), idx in grouped.items():
        where = f"op #{idx[0]}" if len(idx) == 1 else f"{len(idx)} ops (#{', #'.join(map(str, idx[:5]))}" + \
            (", ...)" if len(idx) > 5 else ")")
        out.append(Problem(codes.get(reason, "limitation"), f"{where} {text}", fix, tuple(idx)))
    return out


def _advice(g: SubgraphInfo, verdicts: list[OpVerdict], mappable: list[bool]) -> list[str]:
    """Name the op that breaks the graph and what to change."""
    out: list[str] = []
    cut = [v for v in verdicts if v.detail == CUT_OFF]
    if not cut:
        cpu = [v for v in verdicts if v.target == "cpu"]
        if cpu and len(cpu) < len(verdicts):
            names = ", ".join(f"#{v.index} {v.name}" for v in cpu[:5]) + (" ..." if len(cpu) > 5 else "")
            out.append(f"Only {names} run(s) on the CPU; no op the Edge TPU could run is cut off by it, "
                       "so the Edge TPU subgraph is whole.")
            for v in cpu:
                if v.fix:
                    out.append(f"To map #{v.index} {v.name} too: {v.fix}.")
                    break
        return out
    # The breaking op: the earliest unmappable op that some cut-off mappable op depends on.
    producer = {t: op.index for op in g.ops for t in op.outputs}
    cut_set = {v.index for v in cut}
    breakers: dict[int, int] = {}
    for i in sorted(cut_set):
        # walk up the dependencies of a cut-off op to find unmappable ancestors
        stack, seen = [i], {i}
        while stack:
            j = stack.pop()
            for t in g.ops[j].inputs:
                p = producer.get(t)
                if p is None or p in seen:
                    continue
                seen.add(p)
                if not mappable[p]:
                    breakers[p] = breakers.get(p, 0) + 1
                else:
                    stack.append(p)
    if not breakers:
        return out
    first = min(breakers)
    v = verdicts[first]
    after = sum(1 for x in verdicts if x.index > first and x.target == "cpu")
    out.append(f"Op #{v.index} {v.name} breaks the graph: {v.detail or v.reason}. It and {after} later op(s) run on "
               f"the CPU, {len(cut)} of which the Edge TPU could run (\"{MORE_THAN_ONE_SUBGRAPH}\").")
    if v.fix:
        out.append(f"Change: {v.fix}.")
    others = sorted(b for b in breakers if b != first)
    if others:
        out.append("Also unmappable before CPU-side ops: " + ", ".join(f"#{b} {verdicts[b].name}" for b in others[:5]))
    out.append("Or compile with -a (edgetpu_compiler --enable_multiple_subgraphs, experimental) to map the later "
               "ops into further Edge TPU subgraphs; measure latency with and without it.")
    return out


def _check_compiled(info: ModelInfo, min_runtime: int) -> CheckReport:
    g = info.main
    verdicts = []
    for op in g.ops:
        if op.custom_code == EDGETPU_CUSTOM_OP:
            verdicts.append(OpVerdict(op.index, EDGETPU_CUSTOM_OP, op.version, "edgetpu", MAPPED,
                                      "an Edge TPU subgraph made by edgetpu_compiler"))
        else:
            name = op.custom_code if op.name == "CUSTOM" and op.custom_code else op.name
            verdicts.append(OpVerdict(op.index, name, op.version, "cpu", "Left on the CPU by the compiler"))
    cpu = [v for v in verdicts if v.target == "cpu"]
    n_sub = sum(1 for v in verdicts if v.target == "edgetpu")
    verdict = "full" if not cpu else "partial"
    msg = (f"the model is already compiled for the Edge TPU (it contains {EDGETPU_CUSTOM_OP}: "
           f"{info.edgetpu_bytes:,} bytes of Edge TPU program and parameters)")
    if cpu:
        hist = Counter(v.name for v in cpu)
        msg += "; still on the CPU: " + ", ".join(f"{n} x {name}" for name, n in hist.items())
    else:
        msg += "; nothing is left on the CPU"
    problems = [Problem("already_compiled", msg, "check or compile the model from before edgetpu_compiler "
                        "(the file without _edgetpu)")]
    return CheckReport(info.path, verdict, verdicts, n_sub, info.param_bytes, None, None, problems,
                       [msg[0].upper() + msg[1:] + "."], min_runtime, compiled=True)


# ----------------------------------------------------------------------------------- rendering
def format_table(rows: Iterable[tuple[str, int, str]]) -> str:
    """The compiler's operation-log table: ``Operator<pad 31>Count<pad 11>Status``."""
    lines = [f"{'Operator':<31}{'Count':<11}Status", ""]
    lines += [f"{name:<31}{count:<11}{status}" for name, count, status in rows]
    return "\n".join(lines)


def render(report: CheckReport) -> str:
    """Human-readable text for ``edgekit check``."""
    lines = [f"Edge TPU check: {report.model or '<model>'} (edgetpu_compiler 16 rules, --min-runtime "
             f"{report.min_runtime})"]
    if report.compiled:
        lines.append("This model is ALREADY COMPILED for the Edge TPU.")
    lines += ["", format_table(report.table()), ""]
    lines.append("Ops:")
    for v in report.ops:
        mark = "TPU" if v.target == "edgetpu" else "CPU"
        extra = "" if v.target == "edgetpu" and not v.detail else f"  {v.reason}" + (
            f" ({v.detail})" if v.detail else "")
        lines.append(f"  #{v.index:<4} {mark}  {v.name} v{v.version}{extra}")
    lines.append("")
    if report.on_chip_bytes_estimate is not None:
        lines.append(f"Parameters: {report.param_bytes:,} bytes; Edge TPU ops ~{_mib(report.on_chip_bytes_estimate)} "
                     f"on-chip, ~{_mib(report.off_chip_bytes_estimate or 0)} off-chip (streamed), of a ~8 MiB cache")
    else:
        lines.append(f"Parameters{' of the CPU ops' if report.compiled else ''}: {report.param_bytes:,} bytes")
    for p in report.problems:
        if p.code == "already_compiled":
            continue
        lines.append(f"{'FATAL' if p.fatal else 'Problem'}: {p.message}" + (f"\n  fix: {p.hint}" if p.hint else ""))
    total = len(report.ops)
    word = {"full": "FULL", "partial": "PARTIAL", "none": "NONE"}[report.verdict]
    lines.append(f"Verdict: {word}: {report.edgetpu_ops} of {total} ops on the Edge TPU "
                 f"({report.subgraphs} Edge TPU subgraph{'s' if report.subgraphs != 1 else ''}), "
                 f"{report.cpu_ops} on the CPU")
    for a in report.advice:
        lines.append(f"Advice: {a}")
    return "\n".join(lines)
