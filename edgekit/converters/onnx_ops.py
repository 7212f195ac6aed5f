"""The ONNX ops :mod:`onnx_translate` translates, each to TensorFlow ops on channels-last (NHWC) activations.

Each entry of :data:`OPS` takes (translation, node, inputs, attributes) and returns its output(s): a :class:`T`
(an activation) or a numpy array (a constant, folded here: the Shape → Gather → Concat → Reshape chains
``torch.onnx.export`` writes for ``x.view(x.size(0), -1)``). A 4-D activation the graph holds as NCHW is kept
NHWC (``T.nhwc``); its axes are remapped by :data:`TO_NHWC`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from edgekit.converters.tf_quiet import import_tensorflow
from edgekit.errors import InputError

#: An ONNX node's attributes as onnx.helper reads them from the file (raw protobuf values, not an edgekit document).
Attrs = Mapping[str, Any]

#: ONNX axis of a 4-D NCHW value → its axis in the NHWC tensor that holds it.
TO_NHWC = {0: 0, 1: 3, 2: 1, 3: 2}
ATTENTION_HINT = (
    "a MatMul between two activations is an attention block (YOLO11/YOLO26's C2PSA/Attention): the "
    "Edge TPU cannot run it (BATCH_MATMUL on the CPU splits the model). Use a model without attention "
    "for a Coral (YOLOv8 or YOLOv5u; a CNN classifier), or remove the block and fine-tune"
)


@dataclass
class T:
    """A traced activation: ``x`` holds an ONNX value; ``nhwc``: a 4-D NCHW value stored NHWC; ``perm``: a
    channels-first Flatten stored in NHWC order (stored element i is ONNX element perm[i]; ``hwc`` the 4-D shape it
    came from)."""

    x: Any
    nhwc: bool = False
    perm: np.ndarray | None = None
    hwc: tuple[int, int, int] | None = None

    def onnx_shape(self) -> list[int]:
        shape = [int(d) for d in self.x.shape]
        return [shape[0], shape[3], shape[1], shape[2]] if self.nhwc else shape


def attrs_of(node: Any) -> Attrs:
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def tensor_of(t: Any) -> np.ndarray:
    from onnx import numpy_helper

    return np.asarray(numpy_helper.to_array(t))


def refuse(node: Any, shown: str, why: str = "", hint: str = "") -> InputError:
    what = f"the ONNX op {node.op_type} (node {node.name or node.output[0]!r})"
    return InputError(
        f"{shown}: {what} {why or 'has no translation to an Edge TPU model in edgekit'}",
        hint
        or "replace it in the PyTorch model with an op the Edge TPU runs (Conv, ReLU/ReLU6, "
        "pooling, Add, Concat, Linear: docs/commands/quantize.md lists the ops) and export again",
    )


def plain(t: T) -> Any:
    """The value in ONNX's own layout (a TRANSPOSE where it was stored NHWC)."""
    tf = import_tensorflow()
    if t.perm is not None:
        assert t.hwc is not None  # set with perm: the 4-D shape the Flatten came from
        n = int(t.x.shape[0])
        return tf.reshape(tf.transpose(tf.reshape(t.x, (n, *t.hwc)), (0, 3, 1, 2)), (n, -1))
    return tf.transpose(t.x, (0, 3, 1, 2)) if t.nhwc else t.x


def tf_() -> Any:
    return import_tensorflow()


def as_plain(v: Any) -> Any:
    return plain(v) if isinstance(v, T) else v


def axis_of(t: T, axis: int) -> int:
    """The stored axis of ONNX axis ``axis`` (negative counted from the end) of ``t``."""
    rank = len(t.x.shape)
    axis = int(axis) + rank if axis < 0 else int(axis)
    return TO_NHWC[axis] if t.nhwc else axis


def aligned(c: Any, like: T) -> Any:
    """A constant broadcast against ``like`` the way ONNX broadcasts it against the NCHW value."""
    c = np.asarray(c, np.float32)
    if like.nhwc and 0 < c.ndim <= 4 and c.size > 1:
        c = c.reshape((1,) * (4 - c.ndim) + c.shape).transpose(0, 2, 3, 1)
    return c


NUMPY_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "Add": np.add,
    "Sub": np.subtract,
    "Mul": np.multiply,
    "Pow": np.power,
    "Div": lambda a, b: a // b if np.asarray(a).dtype.kind in "iu" else np.divide(a, b),
}


def binary(tr: Any, n: Any, ins: list[Any], a: Attrs) -> Any:
    """Add/Sub/Mul/Div/Pow with ONNX broadcasting; constants aligned to the NHWC layout."""
    tf = tf_()
    x, y = ins[0], ins[1]
    if not isinstance(x, T) and not isinstance(y, T):
        return np.asarray(NUMPY_BINARY[n.op_type](np.asarray(x), np.asarray(y)))
    like = x if isinstance(x, T) else y
    if (isinstance(x, T) and isinstance(y, T) and (x.nhwc != y.nhwc or x.perm is not None or y.perm is not None)) or (
        like.perm is not None and np.asarray(x if like is y else y).size > 1
    ):
        x, y, like = T(as_plain(x)), T(as_plain(y)), T(as_plain(x))
    xs = x.x if isinstance(x, T) else aligned(x, like)
    ys = y.x if isinstance(y, T) else aligned(y, like)
    if n.op_type == "Div" and not isinstance(y, T):
        out = xs * (np.float32(1) / ys)
    else:
        ops = {"Add": tf.add, "Sub": tf.subtract, "Mul": tf.multiply, "Div": tf.divide, "Pow": tf.pow}
        out = ops[n.op_type](xs, ys)
    return replace(like, x=out)


def unary(fn: Callable[[Any, Attrs], Any]) -> Callable[..., Any]:
    """An elementwise op: the layout (and a Flatten's permutation) carries through."""

    def op(tr: Any, n: Any, ins: list[Any], a: Attrs) -> Any:
        if not isinstance(ins[0], T):
            raise ValueError("a constant input")
        return replace(ins[0], x=fn(ins[0].x, a))

    return op


def clip(tr: Any, n: Any, ins: list[Any], a: Attrs) -> Any:
    tf = tf_()
    lo = float(np.asarray(ins[1])) if len(ins) > 1 and ins[1] is not None else a.get("min", -np.inf)
    hi = float(np.asarray(ins[2])) if len(ins) > 2 and ins[2] is not None else a.get("max", np.inf)
    x = ins[0]
    if lo == 0 and hi == 6:
        return replace(x, x=tf.nn.relu6(x.x))
    if lo == 0 and hi == np.inf:
        return replace(x, x=tf.nn.relu(x.x))
    return replace(x, x=tf.clip_by_value(x.x, np.float32(max(lo, -3.4e38)), np.float32(min(hi, 3.4e38))))


def hard_sigmoid(x: Any, a: Attrs) -> Any:
    tf = tf_()
    alpha, beta = a.get("alpha", 0.2), a.get("beta", 0.5)
    return tf.nn.relu6(x * np.float32(6 * alpha) + np.float32(6 * beta)) * np.float32(1 / 6)


def hard_swish(x: Any, a: Attrs) -> Any:
    tf = tf_()
    return x * tf.nn.relu6(x + np.float32(3)) * np.float32(1 / 6)


# ------------------------------------------------------------------------------------------ windows
def _same_pads(size: int, k: int, s: int) -> tuple[int, int]:
    out = -(-size // s)
    total = max((out - 1) * s + k - size, 0)
    return total // 2, total - total // 2


def as_nhwc(x: T) -> T:
    """An activation as NHWC: a 4-D value held in ONNX's NCHW order (after a Reshape) gets one TRANSPOSE."""
    if x.nhwc:
        return x
    if x.perm is not None or len(x.x.shape) != 4:
        raise ValueError("not a 2-D image tensor (N, C, H, W)")
    return T(tf_().transpose(x.x, (0, 2, 3, 1)), nhwc=True)


def windowed(
    x: T, a: Attrs, kernel: tuple[int, int], fill: float | None = 0.0, same_ok: bool = True
) -> tuple[Any, str]:
    """(input, TF padding) for a Conv or pool: SAME where the ONNX pads equal TensorFlow's, else an explicit PAD."""
    tf = tf_()
    x = as_nhwc(x)
    h, w = int(x.x.shape[1]), int(x.x.shape[2])
    strides = list(a.get("strides", [1, 1]))
    dil = list(a.get("dilations", [1, 1]))
    ek = [(k - 1) * d + 1 for k, d in zip(kernel, dil)]
    auto = a.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else str(auto)
    if auto == "VALID":
        return x.x, "VALID"
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = [_same_pads(n, k, s) for n, k, s in zip((h, w), ek, strides)]
        if auto == "SAME_LOWER":
            pads = [(e, b) for b, e in pads]
        top, left, bottom, right = pads[0][0], pads[1][0], pads[0][1], pads[1][1]
    else:
        top, left, bottom, right = (list(a.get("pads", [0, 0, 0, 0])) + [0] * 4)[:4]
    if a.get("ceil_mode", 0):
        for axis, (size, k, s) in enumerate(zip((h, w), ek, strides)):
            begin, end = (top, bottom) if axis == 0 else (left, right)
            out = -(-(size + begin + end - k) // s) + 1
            if (out - 1) * s >= size + begin:
                out -= 1
            extra = max((out - 1) * s + k - (size + begin + end), 0)
            bottom, right = (bottom + extra, right) if axis == 0 else (bottom, right + extra)
    if not (top or left or bottom or right):
        return x.x, "VALID"
    if same_ok and ((top, bottom), (left, right)) == tuple(_same_pads(n, k, s) for n, k, s in zip((h, w), ek, strides)):
        return x.x, "SAME"
    if fill is None:
        raise ValueError("average pooling that leaves padding out, with padding TensorFlow cannot express")
    return tf.pad(x.x, [[0, 0], [top, bottom], [left, right], [0, 0]], constant_values=fill), "VALID"


def conv(tr: Any, n: Any, ins: list[Any], a: Attrs) -> Any:
    """Conv: plain, depthwise (group = input channels) or grouped; weights transposed to TensorFlow's layout."""
    tf = tf_()
    x, w = ins[0], np.asarray(ins[1], np.float32)
    if w.ndim == 4:
        x = as_nhwc(x)
    if w.ndim != 4:
        raise ValueError(f"a {w.ndim - 2}-D convolution (edgekit translates 2-D ones)")
    b = np.asarray(ins[2], np.float32) if len(ins) > 2 and ins[2] is not None else None
    group, (kh, kw) = int(a.get("group", 1)), w.shape[2:]
    xx, padding = windowed(x, a, (kh, kw))
    strides = [1, *a.get("strides", [1, 1]), 1]
    dil = list(a.get("dilations", [1, 1]))
    cin = int(x.x.shape[3])
    if group == 1:
        y = tf.nn.conv2d(xx, w.transpose(2, 3, 1, 0), strides, padding, dilations=[1, *dil, 1])
    elif group == cin and w.shape[1] == 1:
        f = w.reshape(cin, w.shape[0] // cin, kh, kw).transpose(2, 3, 0, 1)
        y = tf.nn.depthwise_conv2d(xx, f, strides, padding, dilations=dil)
    else:
        parts = [
            tf.nn.conv2d(xi, wi.transpose(2, 3, 1, 0), strides, padding, dilations=[1, *dil, 1])
            for xi, wi in zip(tf.split(xx, group, axis=3), np.split(w, group, axis=0))
        ]
        y = tf.concat(parts, axis=3)
    return T(tf.nn.bias_add(y, b) if b is not None else y, nhwc=True)


def max_pool(tr: Any, n: Any, ins: list[Any], a: Attrs) -> Any:
    if any(d != 1 for d in a.get("dilations", [1, 1])):
        raise ValueError("dilated pooling")
    k = tuple(a["kernel_shape"])
    xx, padding = windowed(ins[0], a, k, fill=-3.4e38)
    return T(tf_().nn.max_pool2d(xx, k, [1, *a.get("strides", [1, 1]), 1], padding), nhwc=True)


def avg_pool(tr: Any, n: Any, ins: list[Any], a: Attrs) -> Any:
    k = tuple(a["kernel_shape"])
    include = bool(a.get("count_include_pad", 0))
    xx, padding = windowed(ins[0], a, k, fill=0.0 if include else None, same_ok=not include)
    return T(tf_().nn.avg_pool2d(xx, k, [1, *a.get("strides", [1, 1]), 1], padding), nhwc=True)


def global_pool(reduce: str) -> Callable[..., Any]:
    def op(tr: Any, n: Any, ins: list[Any], a: Attrs) -> Any:
        x = as_nhwc(ins[0])
        return T(getattr(tf_(), reduce)(x.x, axis=[1, 2], keepdims=True), nhwc=True)

    return op


def batch_norm(tr: Any, n: Any, ins: list[Any], a: Attrs) -> Any:
    """A BatchNormalization not folded into a Conv: x * factor + shift."""
    scale, bias, mean, var = (np.asarray(v, np.float64) for v in ins[1:5])
    factor = scale / np.sqrt(var + a.get("epsilon", 1e-5))
    shift = bias - mean * factor
    x = ins[0]
    shape = (1, 1, 1, -1) if x.nhwc else (1, -1) + (1,) * (len(x.x.shape) - 2)
    return replace(x, x=x.x * factor.astype(np.float32).reshape(shape) + shift.astype(np.float32).reshape(shape))


# ------------------------------------------------------------------------------------------ shapes
def onnx_shape(v: Any) -> list[int]:
    return v.onnx_shape() if isinstance(v, T) else list(np.shape(v))


def flat_perm(h: int, w: int, c: int) -> np.ndarray:
    """Stored (NHWC-order) element i of a flattened NCHW value is its ONNX element perm[i]."""
    return np.arange(c * h * w).reshape(c, h, w).transpose(1, 2, 0).reshape(-1)


def reshaped(x: Any, target: list[int]) -> Any:
    """Reshape in ONNX's order; a channels-first flatten of an NHWC value becomes a permuted flat value."""
    tf = tf_()
    if not isinstance(x, T):
        return np.asarray(x).reshape(target)
    shape = x.onnx_shape()
    if target == shape:
        return x
    if x.nhwc and len(target) == 2 and target[0] == shape[0]:
        n, c, h, w = shape
        flat = tf.reshape(x.x, (n, c * h * w))
        return T(flat) if h * w == 1 else T(flat, perm=flat_perm(h, w, c), hwc=(h, w, c))
    if x.nhwc or x.perm is not None:  # any other reshape of a channels-first value: in ONNX's order (TRANSPOSE)
        return T(tf.reshape(plain(x), target))
    return T(tf.reshape(x.x, target))


def reshape(tr: Any, n: Any, ins: list[Any], a: Attrs) -> Any:
    shape = onnx_shape(ins[0])
    target = [int(d) for d in np.asarray(ins[1]).reshape(-1)]
    if not a.get("allowzero", 0):
        target = [shape[i] if d == 0 else d for i, d in enumerate(target)]
    if -1 in target:
        known = int(np.prod([d for d in target if d != -1]))
        target[target.index(-1)] = int(np.prod(shape)) // known
    return reshaped(ins[0], target)


def flatten(tr: Any, n: Any, ins: list[Any], a: Attrs) -> Any:
    shape = onnx_shape(ins[0])
    axis = int(a.get("axis", 1)) % (len(shape) or 1) if a.get("axis", 1) < 0 else int(a.get("axis", 1))
    return reshaped(ins[0], [int(np.prod(shape[:axis])), int(np.prod(shape[axis:]))])


def gemm(tr: Any, n: Any, ins: list[Any], a: Attrs) -> Any:
    """Gemm / MatMul with constant weights (FULLY_CONNECTED); a permuted flat input permutes the weight rows."""
    tf = tf_()
    x, b = ins[0], ins[1]
    if isinstance(b, T) or not isinstance(x, T):
        raise InputError(
            f"{tr.shown}: the ONNX op {n.op_type} (node {n.name or n.output[0]!r}) multiplies two "
            "activations (attention)",
            ATTENTION_HINT,
        )
    if a.get("transA", 0):
        raise ValueError("transA=1")
    w = np.asarray(b, np.float32)
    w = (w.T if a.get("transB", 0) else w) * np.float32(a.get("alpha", 1.0))
    if x.perm is not None:
        w = w[x.perm]
    xs = x.x if x.perm is not None else as_plain(x)
    lead = [int(d) for d in xs.shape[:-1]]
    y = tf.matmul(tf.reshape(xs, (-1, w.shape[0])) if len(lead) != 1 else xs, w)
    if len(ins) > 2 and ins[2] is not None:
        y = y + np.asarray(ins[2], np.float32) * np.float32(a.get("beta", 1.0))
    return T(tf.reshape(y, (*lead, w.shape[1])) if len(lead) != 1 else y)


def softmax(tr: Any, n: Any, ins: list[Any], a: Attrs) -> Any:
    x = ins[0]
    rank = len(x.x.shape)
    axis = int(a.get("axis", -1 if tr.opset >= 13 else 1))
    if tr.opset < 13 and axis % rank != rank - 1:
        raise ValueError("a Softmax of opset < 13 over several axes")
    if x.perm is not None:
        return T(tf_().nn.softmax(x.x, axis=-1), perm=x.perm, hwc=x.hwc)
    return replace(x, x=tf_().nn.softmax(x.x, axis=axis_of(x, axis)))


def concat(tr: Any, n: Any, ins: list[Any], a: Attrs) -> Any:
    axis = int(a["axis"])
    ts = [v for v in ins if isinstance(v, T)]
    if not ts:
        return np.concatenate([np.asarray(v) for v in ins], axis=axis)
    if all(t.nhwc for t in ts) or all(not t.nhwc and t.perm is None for t in ts):
        like = ts[0]
        parts = [v.x if isinstance(v, T) else aligned(v, like) for v in ins]
        return T(tf_().concat(parts, axis=axis_of(like, axis)), nhwc=like.nhwc)
    return T(tf_().concat([as_plain(v) for v in ins], axis=axis))


def split(tr: Any, n: Any, ins: list[Any], a: Attrs) -> Any:
    x, axis = ins[0], int(a.get("axis", 0))
    sizes = ins[1] if len(ins) > 1 and ins[1] is not None else a.get("split")
    shape = onnx_shape(x)
    if sizes is None:
        parts = int(a.get("num_outputs", len(n.output)))
        step = -(-shape[axis] // parts)
        sizes = [min(step, shape[axis] - i * step) for i in range(parts)]
    sizes = [int(s) for s in np.asarray(sizes).reshape(-1)]
    if not isinstance(x, T):
        return np.split(np.asarray(x), np.cumsum(sizes)[:-1], axis=axis)
    x = x if x.perm is None else T(plain(x))
    ax = axis_of(x, axis)
    if len(set(sizes)) == 1:  # equal parts: SPLIT, which the Edge TPU maps (tf.split with sizes writes SPLIT_V,
        return [replace(x, x=part) for part in tf_().split(x.x, len(sizes), axis=ax)]  # which it does not)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])  # unequal parts: one slice each (SLICE maps)
    rank = len(x.x.shape)
    return [
        replace(
            x,
            x=tf_().slice(
                x.x, [int(b) if d == ax else 0 for d in range(rank)], [s if d == ax else -1 for d in range(rank)]
            ),
        )
        for b, s in zip(starts, sizes)
    ]


def slice_(tr: Any, n: Any, ins: list[Any], a: Attrs) -> Any:
    """Slice with constant starts/ends/axes/steps (opset >= 10 inputs, or the older attributes)."""
    if len(ins) > 1:
        starts, ends = (np.asarray(v).reshape(-1) for v in ins[1:3])
        axes = np.asarray(ins[3]).reshape(-1) if len(ins) > 3 and ins[3] is not None else range(len(starts))
        steps = np.asarray(ins[4]).reshape(-1) if len(ins) > 4 and ins[4] is not None else [1] * len(starts)
    else:
        starts, ends = a["starts"], a["ends"]
        axes, steps = a.get("axes", range(len(starts))), [1] * len(starts)
    x = ins[0] if not isinstance(ins[0], T) or ins[0].perm is None else T(plain(ins[0]))
    rank = len(onnx_shape(x))
    index = [slice(None)] * rank
    big = 2**62
    for s, e, ax, st in zip(starts, ends, axes, steps):
        e = None if (st > 0 and e >= big) or (st < 0 and e <= -big) else int(e)
        ax = int(ax) % rank
        index[axis_of(x, ax) if isinstance(x, T) else ax] = slice(int(s), e, int(st))
    if not isinstance(x, T):
        return np.asarray(x)[tuple(index)]
    return replace(x, x=x.x[tuple(index)])


def transpose(tr: Any, n: Any, ins: list[Any], a: Attrs) -> Any:
    x = ins[0]
    rank = len(onnx_shape(x))
    perm = [int(p) for p in a.get("perm", range(rank - 1, -1, -1))]
    if not isinstance(x, T):
        return np.transpose(np.asarray(x), perm)
    if not x.nhwc and x.perm is None and rank == 4 and perm == [0, 3, 1, 2]:
        return T(x.x, nhwc=True)  # NHWC → NCHW: the value already is NHWC, as stored
    stored = [axis_of(x, p) for p in perm] if x.perm is None else perm
    xs = x.x if x.perm is None else plain(x)
    if stored == list(range(rank)):
        return T(xs)
    return T(tf_().transpose(xs, stored))


def pad(tr: Any, n: Any, ins: list[Any], a: Attrs) -> Any:
    mode = a.get("mode", b"constant")
    if (mode.decode() if isinstance(mode, bytes) else mode) != "constant":
        raise ValueError(f"mode {mode!r} (edgekit translates constant padding)")
    pads = [int(p) for p in np.asarray(ins[1] if len(ins) > 1 else a["pads"]).reshape(-1)]
    value = float(np.asarray(ins[2])) if len(ins) > 2 and ins[2] is not None else float(a.get("value", 0.0))
    x = ins[0] if ins[0].perm is None else T(plain(ins[0]))
    rank = len(x.x.shape)
    stored = [[0, 0] for _ in range(rank)]
    for ax in range(rank):
        stored[axis_of(x, ax)] = [pads[ax], pads[ax + rank]]
    return replace(x, x=tf_().pad(x.x, stored, constant_values=value))


def reduce(name: str) -> Callable[..., Any]:
    def op(tr: Any, n: Any, ins: list[Any], a: Attrs) -> Any:
        x = ins[0] if ins[0].perm is None else T(plain(ins[0]))
        rank = len(x.x.shape)
        axes = a.get("axes", np.asarray(ins[1]).reshape(-1) if len(ins) > 1 and ins[1] is not None else range(rank))
        axes = sorted(int(ax) % rank for ax in axes)
        stored = [axis_of(x, ax) for ax in axes]
        y = getattr(tf_(), name)(x.x, axis=stored, keepdims=bool(a.get("keepdims", 1)))
        if a.get("keepdims", 1):
            return replace(x, x=y)
        kept = [ax for ax in range(rank) if ax not in axes]  # ONNX order of the axes left
        kept_stored = sorted(kept, key=lambda ax: axis_of(x, ax))
        order = [kept_stored.index(ax) for ax in kept]
        return T(y if order == sorted(order) else tf_().transpose(y, order))

    return op


def resize(tr: Any, n: Any, ins: list[Any], a: Attrs) -> Any:
    """Resize (Upsample) of an image tensor: nearest by an integer factor, or bilinear."""
    tf = tf_()
    x = as_nhwc(ins[0])
    shape = x.onnx_shape()
    sizes = ins[3] if len(ins) > 3 and ins[3] is not None and np.size(ins[3]) else None
    if sizes is None:
        scales = np.asarray(ins[2] if n.op_type == "Resize" else ins[1] if len(ins) > 1 else a["scales"])
        sizes = [int(np.floor(d * s)) for d, s in zip(shape, scales.reshape(-1))]
    sizes = [int(s) for s in np.asarray(sizes).reshape(-1)]
    if sizes[:2] != shape[:2]:
        raise ValueError("a resize of the batch or channel axes")
    mode = a.get("mode", b"nearest")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    ctm = a.get("coordinate_transformation_mode", b"half_pixel")
    ctm = ctm.decode() if isinstance(ctm, bytes) else ctm
    out = sizes[2:]
    if mode == "nearest":
        if out[0] % shape[2] or out[1] % shape[3] or ctm == "tf_crop_and_resize":
            raise ValueError("nearest resizing by a factor that is not a whole number")
        return T(
            tf.compat.v1.image.resize_nearest_neighbor(x.x, out, align_corners=False, half_pixel_centers=False),
            nhwc=True,
        )
    if mode == "linear" and ctm in ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"):
        return T(
            tf.compat.v1.image.resize_bilinear(
                x.x,
                out,
                align_corners=ctm == "align_corners",
                half_pixel_centers=ctm in ("half_pixel", "pytorch_half_pixel"),
            ),
            nhwc=True,
        )
    raise ValueError(f"mode {mode} with coordinate_transformation_mode {ctm}")


# ------------------------------------------------------------------------------------------ constants
def _const_only(fn: Callable[..., Any]) -> Callable[..., Any]:
    def op(tr: Any, n: Any, ins: list[Any], a: Attrs) -> Any:
        if any(isinstance(v, T) for v in ins):
            raise InputError(
                f"{tr.shown}: the ONNX op {n.op_type} (node {n.name or n.output[0]!r}) is applied to an "
                "activation; edgekit translates it for shape arithmetic on constants only",
                "export the model without it (torch.flatten / nn.Flatten instead of view/size "
                "arithmetic), or simplify it with onnxsim first",
            )
        return fn(tr, n, ins, a)

    return op


def constant(tr: Any, n: Any, ins: list[Any], a: Attrs) -> Any:
    if "value" in a:
        return tensor_of(a["value"])
    for key in ("value_float", "value_int", "value_floats", "value_ints"):
        if key in a:
            return np.asarray(a[key], np.float32 if "float" in key else np.int64)
    raise ValueError("a Constant without a value")


def shape_of(tr: Any, n: Any, ins: list[Any], a: Attrs) -> Any:
    shape = onnx_shape(ins[0])
    return np.asarray(shape[a.get("start", 0) : a.get("end", len(shape))], np.int64)


def squeeze_unsqueeze(tr: Any, n: Any, ins: list[Any], a: Attrs) -> Any:
    axes = a.get("axes", np.asarray(ins[1]).reshape(-1) if len(ins) > 1 and ins[1] is not None else None)
    shape = onnx_shape(ins[0])
    if n.op_type == "Squeeze":
        drop = {int(ax) % len(shape) for ax in axes} if axes is not None else {i for i, d in enumerate(shape) if d == 1}
        target = [d for i, d in enumerate(shape) if i not in drop]
    else:
        target = list(shape)
        for ax in sorted(int(ax) % (len(shape) + len(axes)) for ax in axes):
            target.insert(ax, 1)
    return reshaped(ins[0], target)


def cast(tr: Any, n: Any, ins: list[Any], a: Attrs) -> Any:
    from onnx import helper

    dtype = np.dtype(helper.tensor_dtype_to_np_dtype(a["to"]))
    if isinstance(ins[0], T):
        if dtype.kind != "f":
            raise ValueError(f"a cast of an activation to {dtype}")
        return ins[0]
    return np.asarray(ins[0]).astype(dtype)


def gather(tr: Any, n: Any, ins: list[Any], a: Attrs) -> Any:
    return np.take(np.asarray(ins[0]), np.asarray(ins[1]), axis=int(a.get("axis", 0)))


def constant_of_shape(tr: Any, n: Any, ins: list[Any], a: Attrs) -> Any:
    value = tensor_of(a["value"]) if "value" in a else np.zeros(1, np.float32)
    return np.full([int(d) for d in np.asarray(ins[0]).reshape(-1)], value.reshape(-1)[0], value.dtype)


def identity(tr: Any, n: Any, ins: list[Any], a: Attrs) -> Any:
    return [ins[0]] + [None] * (len(n.output) - 1)


def numpy_unary(fn: Callable[[Any], Any]) -> Callable[..., Any]:
    return _const_only(lambda tr, n, ins, a: fn(np.asarray(ins[0])))


def _tf_unary(name: str) -> Callable[..., Any]:
    return unary(lambda x, a: getattr(tf_().nn if hasattr(tf_().nn, name) else tf_(), name)(x))


OPS: dict[str, Callable[..., Any]] = {
    "Conv": conv,
    "BatchNormalization": batch_norm,
    "Relu": _tf_unary("relu"),
    "Clip": clip,
    "Sigmoid": _tf_unary("sigmoid"),
    "Tanh": _tf_unary("tanh"),
    "LeakyRelu": unary(lambda x, a: tf_().nn.leaky_relu(x, alpha=a.get("alpha", 0.01))),
    "HardSigmoid": unary(hard_sigmoid),
    "HardSwish": unary(hard_swish),
    "Add": binary,
    "Sub": binary,
    "Mul": binary,
    "Div": binary,
    "Pow": binary,
    "MaxPool": max_pool,
    "AveragePool": avg_pool,
    "GlobalAveragePool": global_pool("reduce_mean"),
    "GlobalMaxPool": global_pool("reduce_max"),
    "Concat": concat,
    "Reshape": reshape,
    "Flatten": flatten,
    "Gemm": gemm,
    "MatMul": gemm,
    "Softmax": softmax,
    "Resize": resize,
    "Upsample": resize,
    "Split": split,
    "Slice": slice_,
    "Transpose": transpose,
    "Pad": pad,
    "ReduceMean": reduce("reduce_mean"),
    "ReduceMax": reduce("reduce_max"),
    "Identity": identity,
    "Dropout": identity,
    "Constant": constant,
    "Shape": shape_of,
    "Squeeze": squeeze_unsqueeze,
    "Unsqueeze": squeeze_unsqueeze,
    "Cast": cast,
    "Gather": _const_only(gather),
    "ConstantOfShape": _const_only(constant_of_shape),
    "Sqrt": numpy_unary(np.sqrt),
    "Floor": numpy_unary(np.floor),
    "Ceil": numpy_unary(np.ceil),
    "Neg": numpy_unary(np.negative),
}
