"""Find the head of a YOLO detector in a .tflite model: where the network ends and its decode begins.

Ultralytics' detection heads (YOLOv5u, v8, v9, 11, 26: ``ultralytics/nn/modules/head.py``, ``Detect``) end each
pyramid level with two 1x1 convolutions without activation: ``cv2``, ``4 * reg_max`` box-distribution channels
(DFL, ``reg_max`` bins per side: 16, or 1 for YOLO26, which has no DFL) and ``cv3``, ``nc`` class logits, on a
grid of ``input / stride`` cells (strides 8, 16, 32, or 64 for P6 models). Everything after those convolutions
is the decode: the maps joined, DFL's softmax and weighted sum, anchors, the sigmoid of the class logits. Two
joins have shipped:

- up to Ultralytics 8.3, ``cat(cv2(x), cv3(x))`` per level along the channels, then the levels flattened and
  concatenated;
- since 8.4 (``Detect.forward_head``), every level's box map into one tensor and every level's class map into
  another (``cat([cv2[i](x[i]).view(bs, 4 * reg_max, -1) ...], -1)``, the same for ``cv3``), each map reaching
  its concatenation through layout ops only (TRANSPOSE, RESHAPE).

In a TFLite export that decode is what keeps a detector off the Edge TPU: the real ``ppe_yolov8n`` pair in
../shared/testdata/detection left 24 of 255 ops on the CPU, every one of them after the per-level
concatenations (TRANSPOSEs over the size limit, the DFL SOFTMAX, the RESHAPEs and STRIDED_SLICEs that follow).

:func:`find_yolo_head` matches that structure on the graph (it never reads a tensor or file name): the 1x1
convolutions on grids that are the input divided by a stride; per level, a pair joined along the channels
(boxes first: Ultralytics' order), or one concatenation of a map per level for the boxes and another for the
classes (the classes are the one whose join feeds a LOGISTIC, the boxes have ``4 * reg_max`` channels); at
least two levels, one ``reg_max`` and ``nc``; a SOFTMAX over ``reg_max`` bins in the tail when ``reg_max > 1`` (or
the EXP of one written out).
A head whose decode also reads other tensors of the network (the mask coefficients and prototypes of Segment,
the keypoints of Pose, the angle of OBB) is found with those ``foreign`` inputs, for the cut to refuse.
Pure: reads :class:`~edgekit.tflite.model.ModelInfo`, imports no TensorFlow.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from edgekit.results.words import CUT_COMMAND  # how check's advice names the cut (its digest picks that advice by it)
from edgekit.tflite.model import ModelInfo, SubgraphInfo

#: Strides a pyramid level may have (YOLO P2..P6: Ultralytics' -p2 and -p6 models, ultralytics/cfg/models).
STRIDES = (4, 8, 16, 32, 64)
#: Ops that move or requantize values and compute none: what lies between a head's maps and their join.
LAYOUT_OPS = frozenset({"RESHAPE", "TRANSPOSE", "QUANTIZE", "DEQUANTIZE", "SQUEEZE", "EXPAND_DIMS"})
#: The joins that have shipped (see the module's docstring).
PER_LEVEL, JOINED = "per-level", "joined"


@dataclass(frozen=True)
class HeadLevel:
    """One pyramid level of the head: its stride, grid, and the two tensors the decode starts from."""

    stride: int
    grid: tuple[int, int]  # (rows, columns)
    box_tensor: int  # [1, rows, columns, 4 * reg_max]: DFL logits, sides (left, top, right, bottom)
    class_tensor: int  # [1, rows, columns, nc]: class logits (before the sigmoid)


@dataclass(frozen=True)
class YoloHead:
    """The head found in a model, and the decode ops after it."""

    levels: tuple[HeadLevel, ...]  # ordered by stride
    reg_max: int
    num_classes: int
    input_hw: tuple[int, int]
    decode_ops: tuple[int, ...]  # indices of the ops after the head (none of them needed by it)
    join: str = PER_LEVEL  # PER_LEVEL or JOINED
    foreign: tuple[int, ...] = ()  # tensors of the network besides the head's that the decode reads

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
        boxes = f"DFL ({self.reg_max} bins)" if self.reg_max > 1 else "no DFL (4 box distances: YOLO26)"
        joined = (
            "boxes and classes joined per level"
            if self.join == PER_LEVEL
            else "boxes and classes each joined across the levels (Ultralytics 8.4)"
        )
        return (
            f"YOLO head with {boxes}, {self.num_classes} classes, levels {grids} ({self.num_anchors} anchors), {joined}"
        )


def _producers(g: SubgraphInfo) -> dict[int, int]:
    return {t: op.index for op in g.ops for t in op.outputs if t >= 0}


def _consumers(g: SubgraphInfo) -> dict[int, list[int]]:
    used: dict[int, list[int]] = defaultdict(list)
    for op in g.ops:
        for t in set(op.inputs):
            if t >= 0:
                used[t].append(op.index)
    return used


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


def graph_problem(g: SubgraphInfo) -> str | None:
    """What makes ``g`` no graph a cut can follow (a tensor written twice, an op reading what a later op writes:
    a cycle), or None. TensorFlow Lite runs the ops in their order, so a well-formed graph has neither."""
    made_by: dict[int, int] = {}
    for op in g.ops:
        for t in op.outputs:
            if t < 0:
                return f"op #{op.index} ({op.name}) has an output that is no tensor"
            if t in made_by or t in g.inputs or g.tensors[t].is_constant:
                return (
                    f"tensor {t} is written by op #{op.index} ({op.name}) and is also an input, a constant or "
                    "another op's output"
                )
            made_by[t] = op.index
    for op in g.ops:
        later = [t for t in op.inputs if made_by.get(t, -1) >= op.index]
        if later:
            return (
                f"op #{op.index} ({op.name}) reads tensor {later[0]}, which op #{made_by[later[0]]} writes at "
                "or after it: the graph has a cycle"
            )
    return None


def _plain_1x1_conv(g: SubgraphInfo, made_by: dict[int, int], tensor: int) -> bool:
    """``tensor`` comes from a 1x1 CONV_2D with no fused activation (a head's last layer, ``nn.Conv2d``)."""
    op = g.ops[made_by[tensor]] if tensor in made_by else None
    if op is None or op.name != "CONV_2D" or len(op.inputs) < 2:
        return False
    weights = g.tensor(op.inputs[1])
    return (
        weights is not None
        and len(weights.shape) == 4
        and weights.shape[1:3] == (1, 1)
        and op.options.get("fused_activation_function", 0) == 0
    )


def _head_map(
    g: SubgraphInfo, made_by: dict[int, int], t: int, input_hw: tuple[int, int]
) -> tuple[int, tuple[int, int], int] | None:
    """(stride, grid, channels) when tensor ``t`` is a plain 1x1 convolution's ``[1, rows, cols, C]`` map on a grid
    that is the input divided by a stride."""
    tensor = g.tensor(t)
    if tensor is None or len(tensor.shape) != 4 or tensor.shape[0] != 1 or min(tensor.shape[1:]) < 1:
        return None
    rows, cols, channels = tensor.shape[1:]
    stride = input_hw[0] // rows
    if stride not in STRIDES or rows * stride != input_hw[0] or cols * stride != input_hw[1]:
        return None
    return (stride, (rows, cols), channels) if _plain_1x1_conv(g, made_by, t) else None


def _join_of(g: SubgraphInfo, users: dict[int, list[int]], t: int) -> tuple[int, int] | None:
    """(the CONCATENATION, the input of it) that tensor ``t`` reaches through layout ops alone, each the only reader
    of its input's values (SHAPE ops beside it read only its shape: Keras' dynamic batch leaves them)."""
    for _ in range(8):
        readers = [i for i in users.get(t, []) if g.ops[i].name != "SHAPE"]
        if len(readers) != 1:
            return None
        op = g.ops[readers[0]]
        if op.name == "CONCATENATION" and len(op.outputs) == 1 and op.outputs[0] >= 0:
            return op.index, t
        if op.name not in LAYOUT_OPS or len(op.outputs) != 1 or op.outputs[0] < 0:
            return None
        t = op.outputs[0]
    return None


def _feeds(g: SubgraphInfo, users: dict[int, list[int]], t: int, name: str, depth: int = 6) -> bool:
    """Tensor ``t`` reaches an op ``name`` through layout ops and slices alone."""
    front = {t}
    for _ in range(depth):
        ops = [g.ops[i] for i in sorted({i for x in front for i in users.get(x, [])})]
        if any(op.name == name for op in ops):
            return True
        front = {
            o for op in ops if op.name in LAYOUT_OPS | {"STRIDED_SLICE", "SLICE", "SPLIT"} for o in op.outputs if o >= 0
        }
    return False


def find_yolo_head(info: ModelInfo) -> YoloHead | None:
    """The YOLO head of ``info``'s main graph, or None when it has none this module can vouch for (two candidate
    heads, or a malformed graph: :func:`graph_problem`)."""
    if not info.subgraphs or len(info.inputs) != 1:
        return None
    g = info.main
    input_hw = image_size(info.inputs[0].shape)
    if input_hw is None or graph_problem(g):
        return None
    made_by, users = _producers(g), _consumers(g)
    maps = {
        op.outputs[0]: m
        for op in g.ops
        if op.name == "CONV_2D" and len(op.outputs) == 1
        for m in [_head_map(g, made_by, op.outputs[0], input_hw)]
        if m is not None
    }
    joins: dict[int, dict[int, int]] = defaultdict(dict)  # concatenation -> {its input: the head map feeding it}
    for t in maps:
        j = _join_of(g, users, t)
        if j is not None:
            joins[j[0]][j[1]] = t
    entries = {
        j: [by_input[x] for x in g.ops[j].inputs]
        for j, by_input in joins.items()
        if set(by_input) == set(g.ops[j].inputs) and len(by_input) == len(g.ops[j].inputs)
    }
    heads = [
        h
        for h in _per_level_heads(g, maps, entries, input_hw) + _joined_heads(g, users, maps, entries, input_hw)
        if h is not None
    ]
    if len(heads) > 1 and all(h.foreign for h in heads):
        return heads[0]  # a Segment or Pose head read two ways: either way not a detector's, for the cut to refuse
    return heads[0] if len(heads) == 1 else None  # two candidate heads: not one this module can vouch for


def image_size(shape: tuple[int, ...]) -> tuple[int, int] | None:
    """(rows, columns) of an image input ``[1, H, W, C]`` or channels first ``[1, C, H, W]`` (C of 1 or 3)."""
    if len(shape) != 4 or shape[0] != 1:
        return None
    if shape[3] in (1, 3) or shape[1] not in (1, 3):
        return shape[1], shape[2]
    return shape[2], shape[3]


def _per_level_heads(g: SubgraphInfo, maps: dict, entries: dict[int, list[int]], input_hw: tuple[int, int]) -> list:
    """Up to Ultralytics 8.3: per level, a box map and a class map of one grid joined along the channels."""
    found = []
    for j, ts in entries.items():
        out = g.tensor(g.ops[j].outputs[0]) if g.ops[j].outputs else None
        if len(ts) != 2 or out is None or len(out.shape) != 4 or g.ops[j].options.get("axis") not in (3, -1):
            continue
        (stride, grid, boxes), (_, grid2, nc) = maps[ts[0]], maps[ts[1]]
        if grid == grid2 and boxes % 4 == 0:  # Ultralytics' order: cat(cv2 (box), cv3 (class)), Detect.forward
            found.append((HeadLevel(stride, grid, ts[0], ts[1]), boxes // 4, nc, j))
    kinds = sorted({f[1:3] for f in found})
    return [_head(g, [f for f in found if f[1:3] == kind], input_hw, PER_LEVEL) for kind in kinds]


def _joined_heads(
    g: SubgraphInfo, users: dict, maps: dict, entries: dict[int, list[int]], input_hw: tuple[int, int]
) -> list:
    """Since Ultralytics 8.4: one map per level joined for the boxes, another such join for the classes (the one
    feeding a LOGISTIC: the sigmoid)."""
    branches = [
        (j, ts)
        for j, ts in entries.items()
        if len(ts) >= 2 and len({maps[t][1] for t in ts}) == len(ts) and len({maps[t][2] for t in ts}) == 1
    ]
    heads = []
    for k, a in enumerate(branches):
        for b in branches[k + 1 :]:
            if sorted(maps[t][1] for t in a[1]) != sorted(maps[t][1] for t in b[1]):
                continue
            sigmoid = [_feeds(g, users, g.ops[br[0]].outputs[0], "LOGISTIC") for br in (a, b)]
            if sigmoid[0] == sigmoid[1]:
                continue  # no telling the classes from the boxes
            boxes, classes = (b, a) if sigmoid[0] else (a, b)
            channels, nc = maps[boxes[1][0]][2], maps[classes[1][0]][2]
            if channels % 4:
                continue
            by_grid = {maps[t][1]: t for t in classes[1]}
            found = [
                (HeadLevel(maps[t][0], maps[t][1], t, by_grid[maps[t][1]]), channels // 4, nc, boxes[0])
                for t in boxes[1]
            ]
            heads.append(_head(g, found, input_hw, JOINED, joins=(boxes[0], classes[0])))
    return heads


def _head(
    g: SubgraphInfo, found: list, input_hw: tuple[int, int], join: str, joins: tuple[int, ...] = ()
) -> YoloHead | None:
    """The head made of ``found`` levels (all of one reg_max and nc), when they form one."""
    strides = [level.stride for level, *_ in found]
    if len(found) < 2 or len(set(strides)) != len(strides):
        return None
    _, reg_max, nc, _ = found[0]
    levels = tuple(sorted((level for level, *_ in found), key=lambda lv: lv.stride))
    head = YoloHead(levels, reg_max, nc, input_hw, (), join)
    needed = ancestors(g, head.output_tensors)
    if any(j in needed for j in joins + tuple(f[3] for f in found)):
        return None  # a "decode" op the head itself needs: not the structure described above
    decode = tuple(op.index for op in g.ops if op.index not in needed)
    if reg_max > 1 and not _dfl_softmax(g, decode, reg_max):
        return None  # no DFL softmax over reg_max bins after the head
    return YoloHead(levels, reg_max, nc, input_hw, decode, join, _foreign(g, needed, decode, head.output_tensors))


def _dfl_softmax(g: SubgraphInfo, decode: tuple[int, ...], reg_max: int) -> bool:
    """The decode holds DFL's softmax over ``reg_max`` bins: a SOFTMAX whose last axis has them, or the EXP of a
    softmax a converter wrote out (exp, sum, divide) on a tensor with an axis of them."""
    for i in decode:
        op = g.ops[i]
        out = g.tensor(op.outputs[0]) if op.outputs else None
        if out is not None and (
            (op.name == "SOFTMAX" and out.shape[-1:] == (reg_max,)) or (op.name == "EXP" and reg_max in out.shape)
        ):
            return True
    return False


def _foreign(g: SubgraphInfo, needed: set[int], decode: tuple[int, ...], own: tuple[int, ...]) -> tuple[int, ...]:
    """The tensors of the network, besides the head's own maps, that the decode reads (a Segment head's mask
    coefficients and prototypes, a Pose head's keypoints): what a cut would drop."""
    made_by = _producers(g)
    return tuple(
        sorted(
            {
                t
                for i in decode
                for t in g.ops[i].inputs
                if t >= 0 and t not in own and (t in g.inputs or made_by.get(t, -1) in needed)
            }
        )
    )


def decode_tail_advice(info: ModelInfo, cpu_ops: set[int]) -> str | None:
    """check's advice for a YOLO model ``edgekit cut`` can cut (``cpu_ops``: the op indices check puts on the CPU),
    or None.

    Says how many of the CPU ops are the decode's, and what is left on the CPU once the model is cut before it
    (the head's own ops keep their placement: a cut removes only ops after them). Where the decode maps too, the
    cut is still offered: the decode then runs in int8, its boxes and class scores quantized together, which
    the host decodes in float from the cut model's maps instead.
    """
    head = find_yolo_head(info)
    if head is None or head.foreign:
        return None
    decode = set(head.decode_ops)
    kept = len(info.ops) - len(decode)
    in_decode = len(cpu_ops & decode)
    if not in_decode:
        return (
            f"The model ends with the decode of its {head.describe()}: {len(decode)} ops that run in int8 "
            f"(DFL, anchors, class sigmoid, the levels joined). {CUT_COMMAND} cuts the model before its decode, "
            f"leaving {kept} ops; `edgekit detect` then decodes the head's maps on the host in float."
        )
    left = len(cpu_ops - decode)
    after = (
        "all of them predicted on the Edge TPU"
        if not left
        else f"{left} of them still predicted on the CPU (see above)"
    )
    first = min(cpu_ops & decode)
    return (
        f"{in_decode} of the {len(cpu_ops)} ops on the CPU (from #{first}) are the detector's decode after its "
        f"{head.describe()}: DFL softmax, anchors, class sigmoid, the levels joined. {CUT_COMMAND} cuts the "
        f"model before its decode, leaving {kept} ops, {after}; `edgekit detect` then decodes on the host."
    )
