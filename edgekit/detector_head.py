"""Find the head of a YOLO detector in a .tflite model: where the network ends and its decode begins.

Ultralytics' detection heads (YOLOv5u, v8, v9, v11: ``ultralytics/nn/modules/head.py``, ``Detect.forward``)
end each pyramid level with ``cat(cv2(x), cv3(x))`` along the channels: ``4 * reg_max`` box-distribution
channels (DFL, ``reg_max`` bins per side, 16 by default) followed by ``nc`` class logits, on a grid of
``input / stride`` cells (strides 8, 16, 32). Everything after those per-level concatenations is the
decode: the levels flattened and concatenated, DFL's softmax and weighted sum, anchors, the
sigmoid of the class logits. In a TFLite export that decode is what keeps a detector off the Edge TPU:
the real ``ppe_yolov8n`` pair in ../shared/testdata/detection left 24 of 255 ops on the CPU, every one of
them after the per-level concatenations (TRANSPOSEs over the size limit, the DFL SOFTMAX, the
RESHAPEs and STRIDED_SLICEs that follow them).

:func:`find_yolo_head` matches that structure on the graph (it never guesses from a file name):
per-level CONCATENATIONs along the last axis of two 4-D tensors, ``4 * reg_max`` and ``nc`` channels,
on grids that are the input divided by a power-of-two stride, at least two levels, with the same
``reg_max`` and ``nc`` on every level, and a SOFTMAX over ``reg_max`` bins in the tail when
``reg_max > 1``. Pure: reads :class:`~edgekit.tflite_model.ModelInfo`, imports no TensorFlow.
"""

from __future__ import annotations

from dataclasses import dataclass

from edgekit.tflite_model import ModelInfo, SubgraphInfo

#: Strides a pyramid level may have (YOLO P3..P6).
STRIDES = (8, 16, 32, 64)


@dataclass(frozen=True)
class HeadLevel:
    """One pyramid level of the head: its stride, grid, and the two tensors the decode starts from."""

    stride: int
    grid: tuple[int, int]      # (rows, columns)
    box_tensor: int            # [1, rows, columns, 4 * reg_max]: DFL logits, sides (left, top, right, bottom)
    class_tensor: int          # [1, rows, columns, nc]: class logits (before the sigmoid)
    concat_op: int             # the CONCATENATION that joins them (the first op of the decode)


@dataclass(frozen=True)
class YoloHead:
    """The head found in a model, and the decode ops after it."""

    levels: tuple[HeadLevel, ...]      # ordered by stride
    reg_max: int
    num_classes: int
    input_hw: tuple[int, int]
    decode_ops: tuple[int, ...]        # indices of the ops after the head (none of them needed by it)

    @property
    def strides(self) -> tuple[int, ...]:
        return tuple(level.stride for level in self.levels)

    @property
    def num_anchors(self) -> int:
        return sum(level.grid[0] * level.grid[1] for level in self.levels)

    @property
    def output_tensors(self) -> tuple[int, ...]:
        """The tensors a cut model outputs: per level, the box distributions then the class logits."""
        return tuple(t for level in self.levels for t in (level.box_tensor, level.class_tensor))

    def describe(self) -> str:
        grids = ", ".join(f"{lv.grid[0]}x{lv.grid[1]}/{lv.stride}" for lv in self.levels)
        return (f"YOLO head with DFL ({self.reg_max} bins), {self.num_classes} classes, levels {grids} "
                f"({self.num_anchors} anchors)")


def _producers(g: SubgraphInfo) -> dict[int, int]:
    return {t: op.index for op in g.ops for t in op.outputs}


def ancestors(g: SubgraphInfo, tensors: tuple[int, ...]) -> set[int]:
    """The ops needed to compute ``tensors`` (indices), following inputs back to the model's inputs."""
    made_by = _producers(g)
    needed: set[int] = set()
    stack = [made_by[t] for t in tensors if t in made_by]
    while stack:
        i = stack.pop()
        if i in needed:
            continue
        needed.add(i)
        stack.extend(made_by[t] for t in g.ops[i].inputs if t in made_by and made_by[t] not in needed)
    return needed


def _plain_1x1_conv(g: SubgraphInfo, made_by: dict[int, int], tensor: int) -> bool:
    """``tensor`` comes from a 1x1 CONV_2D with no fused activation (a head's last layer, ``nn.Conv2d``)."""
    op = g.ops[made_by[tensor]] if tensor in made_by else None
    if op is None or op.name != "CONV_2D" or len(op.inputs) < 2:
        return False
    weights = g.tensor(op.inputs[1])
    return (weights is not None and len(weights.shape) == 4 and weights.shape[1:3] == (1, 1)
            and op.options.get("fused_activation_function", 0) == 0)


def _level(g: SubgraphInfo, made_by: dict[int, int], op, input_hw: tuple[int, int]
           ) -> tuple[HeadLevel, int, int] | None:
    """(level, reg_max, nc) when ``op`` joins a box-distribution and a class tensor of one grid."""
    if op.name != "CONCATENATION" or len(op.inputs) != 2 or len(op.outputs) != 1:
        return None
    out = g.tensor(op.outputs[0])
    ins = [g.tensor(t) for t in op.inputs]
    if out is None or any(t is None or len(t.shape) != 4 for t in ins) or len(out.shape) != 4:
        return None
    if op.options.get("axis") not in (3, -1):
        return None
    rows, cols = out.shape[1:3]
    if any(t.shape[:3] != out.shape[:3] for t in ins) or out.shape[0] != 1 or rows < 1 or cols < 1:
        return None
    stride = input_hw[0] // rows
    if stride not in STRIDES or rows * stride != input_hw[0] or cols * stride != input_hw[1]:
        return None
    box, cls = ins   # Ultralytics' order: cat(cv2 (box), cv3 (class)) — Detect.forward
    if box.shape[3] % 4 or box.shape[3] < 4:
        return None
    if not (_plain_1x1_conv(g, made_by, box.index) and _plain_1x1_conv(g, made_by, cls.index)):
        return None
    return HeadLevel(stride, (rows, cols), box.index, cls.index, op.index), box.shape[3] // 4, cls.shape[3]


def find_yolo_head(info: ModelInfo) -> YoloHead | None:
    """The YOLO head of ``info``'s main graph, or None when it has none this module can vouch for."""
    if not info.subgraphs or not info.inputs:
        return None
    g = info.main
    shape = info.inputs[0].shape
    if len(shape) != 4 or shape[0] != 1:
        return None
    input_hw = (shape[1], shape[2])
    made_by = _producers(g)
    found = [x for x in (_level(g, made_by, op, input_hw) for op in g.ops) if x is not None]
    heads = [h for h in (_head(g, [x for x in found if x[1:] == kind], input_hw)
                         for kind in sorted({x[1:] for x in found})) if h is not None]
    return heads[0] if len(heads) == 1 else None   # two candidate heads: not one this module can vouch for


def _head(g: SubgraphInfo, found: list, input_hw: tuple[int, int]) -> YoloHead | None:
    """The head made of ``found`` levels (all of one reg_max and nc), when they form one."""
    strides = [level.stride for level, _, _ in found]
    if len(found) < 2 or len(set(strides)) != len(strides):
        return None
    _, reg_max, nc = found[0]
    levels = tuple(sorted((level for level, _, _ in found), key=lambda lv: lv.stride))
    head = YoloHead(levels, reg_max, nc, input_hw, ())
    needed = ancestors(g, head.output_tensors)
    decode = tuple(op.index for op in g.ops if op.index not in needed)
    if any(lv.concat_op in needed for lv in levels):
        return None   # a "decode" op the head itself needs: not the structure described above
    if reg_max > 1 and not any(g.ops[i].name == "SOFTMAX" and g.tensor(g.ops[i].outputs[0]).shape[-1:] == (reg_max,)
                               for i in decode):
        return None   # no DFL softmax over reg_max bins after the head
    return YoloHead(levels, reg_max, nc, input_hw, decode)


def decode_tail_advice(info: ModelInfo, cpu_ops: set[int]) -> str | None:
    """check's advice for a YOLO model whose decode keeps ops on the CPU (``cpu_ops``: op indices), or None.

    Says how many of the CPU ops are the decode's, and what is left on the CPU once the model is cut
    before it (the head's own ops keep their placement: a cut removes only ops after them).
    """
    head = find_yolo_head(info)
    if head is None or not cpu_ops:
        return None
    decode = set(head.decode_ops)
    in_decode = len(cpu_ops & decode)
    if not in_decode:
        return None
    kept = len(info.ops) - len(decode)
    left = len(cpu_ops - decode)
    after = ("all of them predicted on the Edge TPU" if not left
             else f"{left} of them still predicted on the CPU (see above)")
    first = min(cpu_ops & decode)
    return (f"{in_decode} of the {len(cpu_ops)} ops on the CPU (from #{first}) are the detector's decode after its "
            f"{head.describe()}: DFL softmax, anchors, class sigmoid, the levels joined. `edgekit cut` cuts the "
            f"model before its decode, leaving {kept} ops, {after}; `edgekit detect` then decodes on the host.")
