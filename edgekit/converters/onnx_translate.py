"""edgekit's ONNX → TensorFlow translator for the ops Edge TPU image models use, channels-last throughout.

A PyTorch graph is channels-first (NCHW). Transposing at the input and back after every op is what makes the
Edge TPU compiler give up (issue 32: a channels-first entry transpose fails to map at 64 channels, 32x32); so
every 4-D activation is *kept* NHWC and each op is translated for that layout: axes remapped (Concat, Softmax,
Split, Slice, Pad, ReduceMean), weights transposed once (Conv, Gemm), constants broadcast in NHWC order. A
channels-first Flatten feeding a Gemm permutes the Gemm's weight rows instead of transposing the activation.
BatchNormalization after a Conv is folded into it. The input takes NHWC images: no TRANSPOSE at the input.

An op outside :data:`OPS` (or a MatMul between two activations: attention) is refused before anything runs, as
one line naming the op and its node. The result is checked against ONNX Runtime by :func:`onnx_io.check_translation`.
"""

from __future__ import annotations

import copy
from typing import Any, cast

import numpy as np

from edgekit.converters.onnx_ops import ATTENTION_HINT, OPS, T, attrs_of, plain, refuse, tensor_of
from edgekit.converters.onnx_yolo import OnnxYoloHead, join_levels_nhwc
from edgekit.converters.tf_quiet import import_tensorflow
from edgekit.errors import ConversionError, InputError


class Translation:
    """The ONNX graph as a tf-traceable function of an NHWC float32 batch (``__call__``), checked op by op up front."""

    def __init__(self, model: Any, image: Any, output: str, shown: str, head: OnnxYoloHead | None = None):
        self.graph, self.image, self.output, self.shown, self.head = model.graph, image, output, shown, head
        self.consts: dict[str, np.ndarray] = {t.name: tensor_of(t) for t in model.graph.initializer}
        wanted = list(head.boxes + head.scores) if head else [output]
        self.nodes = [copy.deepcopy(n) for n in needed(list(model.graph.node), wanted)]  # BatchNorm folding edits
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 13)
        self.notes: list[str] = []
        self._fold_batch_norms()
        self._check_ops()
        self._traced: dict[tuple[int, int], Any] = {}

    # ---------------------------------------------------------------------------------------- before tracing
    def _fold_batch_norms(self) -> None:
        """A BatchNormalization right after a Conv (its only consumer) becomes the Conv's weights and bias."""
        users: dict[str, int] = {}
        for n in self.nodes:
            for i in n.input:
                users[i] = users.get(i, 0) + 1
        producer = {o: n for n in self.nodes for o in n.output}
        kept = []
        for n in self.nodes:
            conv = producer.get(n.input[0]) if n.op_type == "BatchNormalization" else None
            if (
                conv is None
                or conv.op_type != "Conv"
                or users.get(n.input[0]) != 1
                or len(n.output) != 1
                or any(i not in self.consts for i in list(n.input[1:5]) + list(conv.input[1:]))
            ):
                kept.append(n)
                continue
            scale, bias, mean, var = (self.consts[i].astype(np.float64) for i in n.input[1:5])
            factor = scale / np.sqrt(var + attrs_of(n).get("epsilon", 1e-5))
            w = self.consts[conv.input[1]].astype(np.float64)
            b = self.consts[conv.input[2]].astype(np.float64) if len(conv.input) > 2 and conv.input[2] else 0.0
            wname, bname = conv.output[0] + "/folded_w", conv.output[0] + "/folded_b"
            self.consts[wname] = (w * factor[:, None, None, None]).astype(np.float32)
            self.consts[bname] = ((b - mean) * factor + bias).astype(np.float32)
            del conv.input[1:]
            conv.input.extend([wname, bname])
            conv.output[0] = n.output[0]
        self.nodes = kept

    def _check_ops(self) -> None:
        """Refuse what cannot be translated before any slow work: unknown ops, attention MatMuls (a MatMul whose
        inputs both depend on the image; weights reached through constant ops, e.g. a Transpose, are constants)."""
        made_const = set(self.consts)
        for n in self.nodes:  # in graph order: a node of constants only makes constants
            if n.op_type not in OPS:
                raise refuse(n, self.shown)
            if n.op_type == "MatMul" and n.input[1] not in made_const and n.input[0] not in made_const:
                raise refuse(n, self.shown, "multiplies two activations (attention)", ATTENTION_HINT)
            if n.op_type != "Shape" and all(i in made_const for i in n.input if i):
                made_const.update(n.output)

    # ---------------------------------------------------------------------------------------- tracing
    def __call__(self, x: Any) -> Any:
        """The translated graph on an NHWC float32 batch: the chosen output in ONNX's layout, or a YOLO head's
        (boxes [1, N, 4*reg_max], class scores [1, N, nc]) with the decode left to the host."""
        values = self.trace(x)
        if self.head is not None:
            tf = import_tensorflow()
            maps = [[values[name] for name in names] for names in (self.head.boxes, self.head.scores)]
            if not all(isinstance(m, T) and m.nhwc for level in maps for m in level):
                raise ConversionError(
                    f"{self.shown}: the YOLO head's maps are not 4-D image tensors",
                    "export the model with Ultralytics' format=onnx at a fixed imgsz",
                )
            # each a T: checked just above
            boxes, scores = (join_levels_nhwc(tf, [cast(T, m).x for m in level]) for level in maps)
            return boxes, tf.sigmoid(scores)
        out = values[self.output]
        return plain(out) if isinstance(out, T) else import_tensorflow().constant(out)

    def trace(self, x: Any) -> dict[str, object]:
        """Every value of the (pruned) graph on an NHWC float32 batch."""
        values: dict[str, object] = dict(self.consts)
        values[self.image.name] = T(x, nhwc=self.image.nchw)
        for n in self.nodes:
            ins = [values[i] if i else None for i in n.input]
            try:
                outs = OPS[n.op_type](self, n, ins, attrs_of(n))
            except (InputError, ConversionError):
                raise
            except Exception as exc:  # a shape or attribute the translator does not handle
                raise refuse(
                    n,
                    self.shown,
                    f"could not be translated ({type(exc).__name__}: "
                    f"{str(exc).splitlines()[0][:200] if str(exc) else ''})",
                ) from None
            for name, value in zip(n.output, outs if isinstance(outs, (list, tuple)) else [outs]):
                values[name] = value
        return values

    def concrete(self, height: int, width: int) -> Any:
        """The translation traced once per input size at batch 1: the one graph both the translation check runs and
        TensorFlow's converter quantizes (each remedy included). Traced without autograph: the translator is plain
        Python over the graph's nodes with no control flow on tensor values, so autograph would only re-parse every
        op function's source (seconds of fixed cost, twice) to emit the same ops."""
        if (height, width) not in self._traced:
            tf = import_tensorflow()
            spec = tf.TensorSpec([1, height, width, self.image.hwc[2]], tf.float32, name="input")
            self._traced[height, width] = tf.function(self, autograph=False).get_concrete_function(spec)
        return self._traced[height, width]

    def predict(self, x: np.ndarray) -> Any:
        """The translation's float outputs for a preprocessed NHWC batch: flattened per sample, or a YOLO head's
        [boxes, scores] batches."""
        tf = import_tensorflow()
        run = self.concrete(int(x.shape[1]), int(x.shape[2])) if len(x) else None
        outs = [run(tf.constant(s[None], tf.float32)) for s in x] if run is not None else []  # None: no sample
        if self.head is not None:
            return [np.concatenate([np.asarray(o[i]) for o in outs]) for i in (0, 1)]
        outs = [np.asarray(o).reshape(-1) for o in outs]
        return np.stack(outs) if outs else np.zeros((0, 0), np.float32)


def needed(nodes: list[Any], outputs: list[str]) -> list[Any]:
    """The nodes ``outputs`` depend on, in their order (a YOLO head's decode is left out, for the host)."""
    producer = {o: n for n in nodes for o in n.output}
    todo, keep = list(outputs), set()
    while todo:
        node = producer.get(todo.pop())
        if node is not None and id(node) not in keep:
            keep.add(id(node))
            todo += [i for i in node.input if i]
    return [n for n in nodes if id(n) in keep]
