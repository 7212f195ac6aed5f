"""Ultralytics YOLO heads (YOLOv5u/v8/v11 ``format=onnx``) found in an ONNX graph, by structure, never by name.

The Edge TPU runs everything but the decode; the decode (DFL expectation, anchors, strides) runs on the host,
as ``cut`` leaves it (:func:`edgekit.board.decode.decode_split_dfl`). So the model edgekit converts ends at the
head's per-level maps: the box maps (4 x reg_max DFL bins) joined into one output ``[1, N, 4*reg_max]`` and
the class maps, through their Sigmoid, into another ``[1, N, nc]``, each with its own int8 scale (one tensor
for both is what costs Ultralytics' own int8 export ~9 points of mAP50-95, issue 32). Joining NHWC maps
row by row is a plain RESHAPE + CONCATENATION: no transpose.

Two head forms are recognised: the older export joins each level's box and class maps (Concat on channels),
flattens levels (Reshape to ``[1, C, -1]``) and joins them (Concat on the last axis) before a Split into
boxes and classes; Ultralytics 8.4 joins all levels' box maps and all levels' class maps separately.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

Node = Any  # an onnx.NodeProto (onnx is imported only where a model is read)


@dataclass(frozen=True)
class OnnxYoloHead:
    """Where a YOLO head's per-level maps are: box and class map names per level (finest first)."""

    boxes: tuple[str, ...]
    scores: tuple[str, ...]
    reg_max: int
    nc: int


def _axis(node: Any) -> int | None:
    return next((a.i for a in node.attribute if a.name == "axis"), None)


def _flattened_levels(concat: Node, producer: dict[str, Node], consts: dict[str, np.ndarray]) -> list[str] | None:
    """The 4-D maps a Concat on the last axis joins, each through a Reshape to ``[1, C, -1]``; None if not that."""
    if concat.op_type != "Concat" or _axis(concat) not in (2, -1) or len(concat.input) < 2:
        return None
    maps = []
    for name in concat.input:
        reshape = producer.get(name)
        if reshape is None or reshape.op_type != "Reshape" or reshape.input[1] not in consts:
            return None
        if len(np.asarray(consts[reshape.input[1]]).reshape(-1)) != 3:
            return None
        maps.append(reshape.input[0])
    return maps


def find_head(nodes: list[Any], consts: dict[str, np.ndarray], channels: dict[str, int]) -> OnnxYoloHead | None:
    """The YOLO head of a graph (``channels``: each 4-D tensor's channel count, as traced), or None."""
    producer = {o: n for n in nodes for o in n.output}
    consumers: dict[str, list[Node]] = {}
    for n in nodes:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    levels = [(n, _flattened_levels(n, producer, consts)) for n in nodes]
    joined = [(n, maps) for n, maps in levels if maps]
    for concat, maps in joined:  # the older form: a Split into boxes and classes after the join
        split = next((c for c in consumers.get(concat.output[0], []) if c.op_type == "Split"), None)
        pairs = [p for p in (producer.get(m) for m in maps) if p is not None]
        if (
            split is None
            or len(split.output) != 2
            or len(pairs) != len(maps)
            or not all(p.op_type == "Concat" and len(p.input) == 2 for p in pairs)
        ):
            continue
        head = _head(tuple(p.input[0] for p in pairs), tuple(p.input[1] for p in pairs), channels)
        if head:
            return head
    for box_concat, boxes in joined:  # Ultralytics 8.4: boxes and classes joined apart, classes into a Sigmoid
        for cls_concat, scores in joined:
            if cls_concat is box_concat or len(scores) != len(boxes):
                continue
            if any(c.op_type == "Sigmoid" for c in consumers.get(cls_concat.output[0], [])):
                head = _head(tuple(boxes), tuple(scores), channels)
                if head:
                    return head
    return None


def _head(boxes: tuple[str, ...], scores: tuple[str, ...], channels: dict[str, int]) -> OnnxYoloHead | None:
    box_c = {channels.get(b) for b in boxes}
    cls_c = {channels.get(s) for s in scores}
    if len(box_c) != 1 or len(cls_c) != 1:
        return None
    (bc,), (nc,) = box_c, cls_c
    if bc is None or nc is None or bc % 4 or bc < 8:
        return None
    return OnnxYoloHead(boxes, scores, bc // 4, nc)


def join_levels_nhwc(tf: Any, maps: list[Any]) -> Any:
    """``[1, h, w, C]`` maps (finest first) → ``[1, sum(h*w), C]``: a reshape per level and one concatenation."""
    return tf.concat([tf.reshape(m, (1, -1, int(m.shape[-1]))) for m in maps], axis=1)


def join_levels_nchw(maps: list[np.ndarray]) -> np.ndarray:
    """The same rows from ONNX Runtime's ``[n, C, h, w]`` maps: ``[n, sum(h*w), C]``."""
    return np.concatenate([m.reshape(m.shape[0], m.shape[1], -1).transpose(0, 2, 1) for m in maps], axis=1)
