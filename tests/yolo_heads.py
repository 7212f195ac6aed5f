"""Small YOLO-style detectors with each head Ultralytics has shipped, built without TensorFlow (for ``edgekit cut``).

:func:`tiny_yolo` writes the graph of an Ultralytics export in TFLite ops, shapes consistent, int8:

- a backbone of stride-2 3x3 convolutions, features at strides 8, 16 and 32 (or those asked: P2 models add 4,
  P6 models 64);
- per level, the head's last layers: two 1x1 convolutions without activation, ``4 * reg_max`` box channels
  (``cv2``) and ``nc`` class channels (``cv3``), as ``Detect.forward_head`` has them;
- ``head="levels"`` (Ultralytics up to 8.3): box and class maps joined per level along the channels, the
  levels flattened and concatenated; ``head="joined"`` (8.4): every level's box map into one tensor and every
  level's class map into another, channels first as ``forward_head`` writes them (``view(bs, 4 * reg_max, -1)``,
  one TRANSPOSE per level), or channels last (``nchw=False``: the RESHAPEs a converter may leave instead);
- the decode: DFL (softmax over ``reg_max`` bins and their weighted sum, none when ``reg_max`` is 1: YOLO26),
  the anchor arithmetic, the class sigmoid, and the final concatenation;
- ``extra``: Ultralytics' Segment or Pose head, whose per-level mask-coefficient (32) or keypoint (51)
  convolutions join the output beside the boxes and classes.

The model is for edgekit's structure readers (head finding, the cut, check); its numbers are not a detector's.
"""

from __future__ import annotations

import numpy as np

from tests.tflite_builder import GraphBuilder, S

STRIDES = (8, 16, 32)
EXTRA_CHANNELS = {"segment": 32, "pose": 51}


class _Yolo:
    def __init__(self, size: tuple[int, int], nc: int, reg_max: int, seed: int):
        self.g = GraphBuilder()
        self.size, self.nc, self.reg_max = size, nc, reg_max
        self.rng = np.random.default_rng(seed)

    def conv(self, x: int, cin: int, cout: int, hw: tuple[int, int], k: int, stride: int, relu: bool) -> int:
        g = self.g
        w = g.tensor(
            [cout, k, k, cin],
            "int8",
            data=self.rng.integers(-100, 100, (cout, k, k, cin)),
            scale=[0.02] * cout,
            zero_point=[0] * cout,
        )
        b = g.tensor(
            [cout], "int32", data=self.rng.integers(-50, 50, cout), scale=[0.001] * cout, zero_point=[0] * cout
        )
        y = g.tensor([1, hw[0], hw[1], cout], "int8", scale=0.05, zero_point=-10)
        g.op(
            "CONV_2D",
            [x, w, b],
            [y],
            version=3,
            padding=S.Padding.SAME,
            strideW=stride,
            strideH=stride,
            fusedActivationFunction=S.ActivationFunctionType.RELU if relu else S.ActivationFunctionType.NONE,
            dilationWFactor=1,
            dilationHFactor=1,
        )
        return y

    def unary(self, name: str, x: int, shape: list[int], **options) -> int:
        y = self.g.tensor(
            shape,
            "int8",
            scale=1 / 256 if name in ("SOFTMAX", "LOGISTIC") else 0.05,
            zero_point=-128 if name in ("SOFTMAX", "LOGISTIC") else 0,
        )
        self.g.op(name, [x], [y], **options)
        return y

    def reshape(self, x: int, shape: list[int]) -> int:
        y = self.g.tensor(shape, "int8", scale=0.05)
        self.g.op("RESHAPE", [x, self.g.const(shape)], [y], newShape=list(shape))
        return y

    def transpose(self, x: int, shape: list[int], perm: list[int]) -> int:
        y = self.g.tensor([shape[p] for p in perm], "int8", scale=0.05)
        self.g.op("TRANSPOSE", [x, self.g.const(perm)], [y])
        return y

    def concat(self, xs: list[int], shape: list[int], axis: int) -> int:
        y = self.g.tensor(shape, "int8", scale=0.05)
        self.g.op("CONCATENATION", xs, [y], axis=axis, fusedActivationFunction=0)
        return y

    def binary(self, name: str, a: int, b: int, shape: list[int]) -> int:
        y = self.g.tensor(shape, "int8", scale=0.05)
        self.g.op(name, [a, b], [y])
        return y

    def constant(self, shape: list[int]) -> int:
        return self.g.tensor(shape, "int8", data=self.rng.integers(0, 100, shape), scale=0.05)


def tiny_yolo(
    size: tuple[int, int] = (64, 64),
    nc: int = 3,
    reg_max: int = 16,
    head: str = "joined",
    nchw: bool = True,
    extra: str | None = None,
    seed: int = 0,
    exp_softmax: bool = False,
    litert: bool = False,
    strides: tuple[int, ...] = STRIDES,
) -> bytes:
    """A YOLO-style int8 detector .tflite (see the module's docstring; ``exp_softmax``: DFL's softmax written out as
    EXP, SUM, DIV, as a converter may lower it; ``litert``: a float32 channels-first input ``[1, 3, H, W]`` (TRANSPOSE,
    QUANTIZE) and a dequantized output, as Ultralytics 8.4's default LiteRT int8 export has them)."""
    m = _Yolo(size, nc, reg_max, seed)
    m.exp_softmax = exp_softmax
    g = m.g
    h, w = size
    if litert:
        first = g.tensor([1, 3, h, w], "float32", scale=None, name="images")
        hwc = g.tensor([1, h, w, 3], "float32", scale=None)
        g.op("TRANSPOSE", [first, g.const([0, 2, 3, 1])], [hwc])
        x = g.tensor([1, h, w, 3], "int8", scale=1 / 255, zero_point=-128)
        g.op("QUANTIZE", [hwc], [x])
    else:
        x = first = g.tensor([1, h, w, 3], "int8", scale=1 / 255, zero_point=-128, name="images")
    feats, c = [], 3
    for k in range(max(strides).bit_length() - 1):
        hw = (h >> (k + 1), w >> (k + 1))
        x = m.conv(x, c, 8, hw, 3, 2, relu=True)
        c = 8
        if 2 ** (k + 1) in strides:
            feats.append((x, hw))
    levels = [
        (
            m.conv(f, 8, 4 * reg_max, hw, 1, 1, relu=False),
            m.conv(f, 8, nc, hw, 1, 1, relu=False),
            m.conv(f, 8, EXTRA_CHANNELS[extra], hw, 1, 1, relu=False) if extra else None,
            hw,
        )
        for f, hw in feats
    ]
    n = sum(hw[0] * hw[1] for *_, hw in levels)
    if head == "levels":
        boxes, scores, more = _per_level(m, levels, n, extra)
    else:
        boxes, scores, more = _joined(m, levels, n, nchw, extra)
    if extra == "pose":  # the keypoints' visibility goes through a sigmoid too (Pose.kpts_decode)
        more = m.unary("LOGISTIC", more, list(g.tensors[more].shape))
    out = _decode(m, boxes, scores, more, n, nchw and head == "joined")
    if litert:
        q = g.tensors[out]
        dequantized = g.tensor(q.shape, "float32", scale=None, name="output")
        g.op("DEQUANTIZE", [out], [dequantized])
        out = dequantized
    return g.build([first], [out])


def _per_level(m: _Yolo, levels: list, n: int, extra: str | None) -> tuple[int, int, int | None]:
    """Ultralytics up to 8.3: ``cat(cv2(x), cv3(x))`` per level, the levels flattened and concatenated (NHWC)."""
    c = 4 * m.reg_max + m.nc
    rows = []
    for box, cls, _, hw in levels:
        joined = m.concat([box, cls], [1, hw[0], hw[1], c], axis=3)
        rows.append(m.reshape(joined, [1, hw[0] * hw[1], c]))
    allv = m.concat(rows, [1, n, c], axis=1)
    boxes, scores = m.g.tensor([1, n, 4 * m.reg_max], "int8", scale=0.05), m.g.tensor([1, n, m.nc], "int8", scale=0.05)
    m.g.op(
        "STRIDED_SLICE", [allv, m.g.const([0, 0, 0]), m.g.const([1, n, 4 * m.reg_max]), m.g.const([1, 1, 1])], [boxes]
    )
    m.g.op(
        "STRIDED_SLICE", [allv, m.g.const([0, 0, 4 * m.reg_max]), m.g.const([1, n, c]), m.g.const([1, 1, 1])], [scores]
    )
    more = None
    if extra:
        e = EXTRA_CHANNELS[extra]
        more = m.concat([m.reshape(x, [1, hw[0] * hw[1], e]) for _, _, x, hw in levels], [1, n, e], axis=1)
    return boxes, scores, more


def _joined(m: _Yolo, levels: list, n: int, nchw: bool, extra: str | None) -> tuple[int, int, int | None]:
    """Ultralytics 8.4: ``cat([cv2[i](x[i]).view(bs, 4 * reg_max, -1) ...], -1)``, the same for the classes."""

    def join(index: int, c: int) -> int:
        parts = []
        for level in levels:
            hw = level[3]
            t = level[index]
            if nchw:
                t = m.transpose(t, [1, hw[0], hw[1], c], [0, 3, 1, 2])
                parts.append(m.reshape(t, [1, c, hw[0] * hw[1]]))
            else:
                parts.append(m.reshape(t, [1, hw[0] * hw[1], c]))
        return m.concat(parts, [1, c, n] if nchw else [1, n, c], axis=2 if nchw else 1)

    more = join(2, EXTRA_CHANNELS[extra]) if extra else None
    return join(0, 4 * m.reg_max), join(1, m.nc), more


def _softmax(m: _Yolo, x: int, shape: list[int]) -> int:
    if not getattr(m, "exp_softmax", False):
        return m.unary("SOFTMAX", x, shape, beta=1.0)
    e = m.unary("EXP", x, shape)
    total = m.g.tensor(shape[:-1] + [1], "int8", scale=0.05)
    m.g.op("SUM", [e, m.g.const([-1])], [total])
    return m.binary("DIV", e, total, shape)


def _decode(m: _Yolo, boxes: int, scores: int, more: int | None, n: int, nchw: bool) -> int:
    """DFL, anchors, sigmoid, concat: ``[1, 4 + nc (+ extra), N]`` channels first, else ``[1, N, ...]``."""
    r = m.reg_max
    if nchw:
        if r > 1:
            d = m.transpose(m.reshape(boxes, [1, 4, r, n]), [1, 4, r, n], [0, 1, 3, 2])  # [1, 4, N, r]
            p = _softmax(m, d, [1, 4, n, r])
            dist = m.reshape(m.conv(p, r, 1, (4, n), 1, 1, relu=False), [1, 4, n])
        else:
            dist = boxes
        box_shape, cls, axis = [1, 4, n], m.unary("LOGISTIC", scores, [1, m.nc, n]), 1
    else:
        if r > 1:
            p = _softmax(m, m.reshape(boxes, [1, n, 4, r]), [1, n, 4, r])
            dist = m.reshape(m.conv(p, r, 1, (n, 4), 1, 1, relu=False), [1, n, 4])
        else:
            dist = boxes
        box_shape, cls, axis = [1, n, 4], m.unary("LOGISTIC", scores, [1, n, m.nc]), 2
    xy = m.binary("MUL", m.binary("ADD", dist, m.constant(box_shape), box_shape), m.constant(box_shape), box_shape)
    parts = [xy, cls] + ([more] if more is not None else [])
    channels = 4 + m.nc + (m.g.tensors[more].shape[1 if nchw else 2] if more is not None else 0)
    return m.concat(parts, [1, channels, n] if nchw else [1, n, channels], axis=axis)


# ----------------------------------------------------------------------------------- runnable ones (TensorFlow)
#: What the hand-set detector of :func:`keras_yolo` finds: (class, stride of the level that finds it, side in pixels).
BLOBS = ((0, 16, 16), (1, 32, 32))  # a red 16x16 square at stride 16, a green 32x32 square at stride 32


def blob_image(size: tuple[int, int], places: list[tuple[int, int, int]]) -> np.ndarray:
    """An HxWx3 uint8 black image with, per (class, row, column) of ``places``, that class's square (red for 0,
    green for 1) on the cell (row, column) of its level's grid."""
    img = np.zeros((size[0], size[1], 3), np.uint8)
    for cls, row, col in places:
        _, _, side = BLOBS[cls]
        img[row * side : (row + 1) * side, col * side : (col + 1) * side, cls] = 255
    return img


def keras_yolo(tf, head: str = "joined", reg_max: int = 16, size: tuple[int, int] = (64, 64)) -> bytes:
    """A runnable int8 YOLO-style detector with Ultralytics' head and decode, its weights set by hand so that it
    finds :data:`BLOBS` (see :func:`blob_image`) with boxes on their cells: the backbone averages the image over
    each level's cells (2x2 convolutions of stride 2), the class convolution of a class's level scores that
    class's colour (logit 8 x mean - 4), every other level/class scores -10, the box distributions put each side
    half a cell from the centre. Its output is Ultralytics' TFLite export's: ``[1, 4 + nc, N]``, normalized
    xywh then class probabilities. ``head``: ``joined`` (8.4, channels first) or ``levels`` (8.3)."""
    keras = tf.keras
    nc, h, w = len(BLOBS), size[0], size[1]
    inp = keras.Input((h, w, 3))
    x, feats = inp, []
    for k in range(5):
        conv = keras.layers.Conv2D(3, 2, strides=2, use_bias=False)
        x = conv(x)
        conv.set_weights([np.einsum("ij,cd->ijcd", np.full((2, 2), 0.25), np.eye(3)).astype("float32")])
        if k >= 2:
            feats.append((x, 2 ** (k + 1)))
    boxes, scores = [], []
    for f, stride in feats:
        box, cls = keras.layers.Conv2D(4 * reg_max, 1), keras.layers.Conv2D(nc, 1)
        b, c = box(f), cls(f)
        bins = np.full(reg_max, -6.0) if reg_max > 1 else np.full(1, 0.5)
        bins[:2] = 6.0 if reg_max > 1 else 0.5
        box.set_weights([np.full((1, 1, 3, 4 * reg_max), 1e-3, "float32"), np.tile(bins, 4).astype("float32")])
        wc, bc = np.zeros((1, 1, 3, nc), "float32"), np.full(nc, -10.0, "float32")
        for k, (_, s, _) in enumerate(BLOBS):
            if s == stride:
                wc[0, 0, k, k], bc[k] = 8.0, -4.0
        cls.set_weights([wc + 1e-3, bc])
        boxes.append(b)
        scores.append(c)
    out = _keras_decode(tf, boxes, scores, [s for _, s in feats], reg_max, nc, (h, w), head)
    model = keras.Model(inp, out)
    rng = np.random.default_rng(0)
    calib = [
        blob_image(
            size, [(0, rng.integers(h // 16), rng.integers(w // 16)), (1, rng.integers(h // 32), rng.integers(w // 32))]
        )
        for _ in range(24)
    ]
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: ([(im[None] / 255).astype("float32")] for im in calib)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = converter.inference_output_type = tf.int8
    return converter.convert()


def _keras_decode(
    tf, boxes: list, scores: list, strides: list[int], reg_max: int, nc: int, hw: tuple[int, int], head: str
):
    """Ultralytics' decode in Keras layers: the joins, DFL, anchors (``make_anchors``), ``dist2bbox`` (xywh),
    normalized by the input size as its TensorFlow exports do, the class sigmoid, the final concatenation."""
    keras = tf.keras
    grids = [(hw[0] // s, hw[1] // s) for s in strides]
    n = sum(a * b for a, b in grids)
    if head == "joined":  # Detect.forward_head: view(bs, C, -1) per level, levels joined along the anchors

        def flat(t, c, g):
            return keras.layers.Reshape((c, g[0] * g[1]))(keras.layers.Permute((3, 1, 2))(t))

        box = keras.layers.Concatenate(axis=-1)([flat(b, 4 * reg_max, g) for b, g in zip(boxes, grids)])
        cls = keras.layers.Concatenate(axis=-1)([flat(c, nc, g) for c, g in zip(scores, grids)])
    else:  # up to 8.3: cat(cv2, cv3) per level, then the levels
        per = [keras.layers.Concatenate(axis=-1)([b, c]) for b, c in zip(boxes, scores)]
        allv = keras.layers.Concatenate(axis=-1)(
            [
                keras.layers.Reshape((4 * reg_max + nc, g[0] * g[1]))(keras.layers.Permute((3, 1, 2))(p))
                for p, g in zip(per, grids)
            ]
        )
        box, cls = allv[:, : 4 * reg_max], allv[:, 4 * reg_max :]
    if reg_max > 1:
        d = keras.layers.Permute((1, 3, 2))(keras.layers.Reshape((4, reg_max, n))(box))  # [1, 4, N, reg_max]
        d = keras.layers.Softmax(axis=-1)(d)
        dist = keras.layers.Lambda(lambda p: tf.reduce_sum(p * tf.range(reg_max, dtype=p.dtype), -1))(d)
    else:
        dist = box
    ys, xs, ss = [], [], []
    for (gh, gw), s in zip(grids, strides):
        yy, xx = np.mgrid[0:gh, 0:gw]
        ys.append(yy.ravel() + 0.5)
        xs.append(xx.ravel() + 0.5)
        ss.append(np.full(gh * gw, s))
    anchors = np.stack([np.concatenate(xs), np.concatenate(ys)]).astype("float32")[None]  # [1, 2, N]
    scale = (np.concatenate(ss)[None, None] / np.array([hw[1], hw[0]])[None, :, None]).astype("float32")

    def to_xywh(dd):
        lt, rb = dd[:, :2], dd[:, 2:]
        x1y1, x2y2 = anchors - lt, anchors + rb
        return tf.concat([(x1y1 + x2y2) / 2 * scale, (x2y2 - x1y1) * scale], axis=1)

    xywh = keras.layers.Lambda(to_xywh)(dist)
    return keras.layers.Concatenate(axis=1)([xywh, keras.layers.Activation("sigmoid")(cls)])
