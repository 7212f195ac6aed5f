"""ONNX graphs the ONNX tests build with onnx.helper and fixed numpy weights (no torch needed).

:func:`digits_onnx` writes the session's trained digits CNN as PyTorch would export it: NCHW, Conv weights
(out, in, kh, kw), BatchNormalization, a channels-first Flatten, Gemm with transB=1, a dynamic batch.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def _init(name: str, value: np.ndarray):
    from onnx import numpy_helper

    return numpy_helper.from_array(np.asarray(value), name)


def save(
    nodes,
    inits,
    path: Path,
    input_shape=("N", 3, 32, 32),
    output_shape=("N", 10),
    opset: int = 13,
    input_name: str = "input",
    output_name: str = "output",
) -> Path:
    """A one-input, one-output float32 model of ``nodes`` (the last one writes ``output_name``)."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        nodes,
        "edgekit_test",
        [helper.make_tensor_value_info(input_name, TensorProto.FLOAT, list(input_shape))],
        [helper.make_tensor_value_info(output_name, TensorProto.FLOAT, list(output_shape))],
        [_init(k, v) for k, v in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="pytorch")
    model.ir_version = 8
    onnx.checker.check_model(model)
    path = Path(path)
    path.write_bytes(model.SerializeToString())
    return path


def digits_onnx(model, path: Path, inflate: tuple[int, float] | None = None) -> Path:
    """The Keras digits CNN (tests/conftest.py's digits_keras) written as a PyTorch-style NCHW ONNX graph.

    ``inflate=(unit, r)`` scales one hidden Gemm unit by r and its row in the last Gemm by 1/r: the same float
    function, and a PTQ-hostile one (that activation's int8 steps r times coarser for every other unit).
    """
    import keras
    from onnx import helper

    convs = [layer for layer in model.layers if isinstance(layer, keras.layers.Conv2D)]
    norms = [layer for layer in model.layers if isinstance(layer, keras.layers.BatchNormalization)]
    dense = [layer for layer in model.layers if isinstance(layer, keras.layers.Dense)]
    inits, nodes, x = {}, [], "input"
    for i, (conv, bn) in enumerate(zip(convs, norms)):
        inits[f"c{i}.w"] = conv.get_weights()[0].transpose(3, 2, 0, 1)
        gamma, beta, mean, var = bn.get_weights()
        inits.update({f"bn{i}.g": gamma, f"bn{i}.b": beta, f"bn{i}.m": mean, f"bn{i}.v": var})
        nodes += [
            helper.make_node(
                "Conv",
                [x, f"c{i}.w"],
                [f"c{i}"],
                name=f"/features/conv{i}/Conv",
                kernel_shape=[3, 3],
                pads=[1, 1, 1, 1],
                strides=[1, 1],
            ),
            helper.make_node(
                "BatchNormalization",
                [f"c{i}", f"bn{i}.g", f"bn{i}.b", f"bn{i}.m", f"bn{i}.v"],
                [f"n{i}"],
                name=f"/features/bn{i}/BatchNormalization",
                epsilon=bn.epsilon,
            ),
            helper.make_node("Relu", [f"n{i}"], [f"r{i}"], name=f"/features/relu{i}/Relu"),
            helper.make_node(
                "MaxPool", [f"r{i}"], [f"p{i}"], name=f"/features/pool{i}/MaxPool", kernel_shape=[2, 2], strides=[2, 2]
            ),
        ]
        x = f"p{i}"
    (k1, b1), (k2, b2) = (d.get_weights() for d in dense)
    h = w = 8
    c = k1.shape[0] // (h * w)
    k1 = k1.reshape(h, w, c, -1).transpose(2, 0, 1, 3).reshape(k1.shape[0], -1)  # rows in NCHW flatten order
    if inflate:
        unit, r = inflate
        k1, b1, k2 = k1.copy(), b1.copy(), k2.copy()
        k1[:, unit] *= r
        b1[unit] *= r
        k2[unit] /= r
    inits.update({"fc1.w": k1.T, "fc1.b": b1, "fc2.w": k2.T, "fc2.b": b2})
    nodes += [
        helper.make_node("Flatten", [x], ["flat"], name="/Flatten", axis=1),
        helper.make_node("Gemm", ["flat", "fc1.w", "fc1.b"], ["g1"], name="/fc1/Gemm", transB=1),
        helper.make_node("Relu", ["g1"], ["h1"], name="/relu/Relu"),
        helper.make_node("Gemm", ["h1", "fc2.w", "fc2.b"], ["logits"], name="/fc2/Gemm", transB=1),
        helper.make_node("Softmax", ["logits"], ["output"], name="/Softmax", axis=1),
    ]
    return save(nodes, {k: np.asarray(v, np.float32) for k, v in inits.items()}, path)


def yolo_onnx(
    path: Path, nc: int = 3, size: int = 64, form: str = "split", attention: bool = False, seed: int = 0
) -> Path:
    """A YOLOv8-shaped detector as Ultralytics' ``format=onnx`` writes it (fixed random weights): a strided SiLU
    backbone, per level a box conv (4 x 16 DFL bins) and a class conv, then the export's decode (DFL softmax
    and its arange Conv, anchors, strides, sigmoid) into one ``[1, 4+nc, N]`` output. ``form``: "split" (each
    level's box and class maps joined, then a Split) or "joined" (Ultralytics 8.4: boxes and classes joined
    apart). ``attention`` adds a MatMul between two activations (YOLO11's C2PSA) in the backbone."""
    from onnx import helper

    rng = np.random.default_rng(seed)
    inits: dict[str, np.ndarray] = {}
    nodes: list = []

    def conv(x, cin, cout, k, stride, name, act=True):
        inits[name + ".w"] = rng.normal(0, np.sqrt(2.0 / (cin * k * k)), (cout, cin, k, k)).astype(np.float32)
        inits[name + ".b"] = rng.normal(0, 0.1, cout).astype(np.float32)
        nodes.append(
            helper.make_node(
                "Conv",
                [x, name + ".w", name + ".b"],
                [name],
                name=f"/{name}/Conv",
                kernel_shape=[k, k],
                strides=[stride, stride],
                pads=[k // 2] * 4,
            )
        )
        if not act:
            return name
        nodes.extend(
            [
                helper.make_node("Sigmoid", [name], [name + ".s"], name=f"/{name}/act/Sigmoid"),
                helper.make_node("Mul", [name, name + ".s"], [name + ".a"], name=f"/{name}/act/Mul"),
            ]
        )
        return name + ".a"

    x = conv(conv("images", 3, 8, 3, 2, "b0"), 8, 8, 3, 2, "b1")
    if attention:
        inits["att.shape"] = np.asarray([1, 8, -1], np.int64)
        nodes += [
            helper.make_node("Reshape", [x, "att.shape"], ["q"], name="/model.10/attn/Reshape"),
            helper.make_node("Transpose", ["q"], ["k"], name="/model.10/attn/Transpose", perm=[0, 2, 1]),
            helper.make_node("MatMul", ["k", "q"], ["qk"], name="/model.10/attn/MatMul"),
            helper.make_node("Softmax", ["qk"], ["p"], name="/model.10/attn/Softmax", axis=-1),
            helper.make_node("MatMul", ["q", "p"], ["v"], name="/model.10/attn/MatMul_1"),
            helper.make_node("Reshape", ["v", "b1.shape"], ["x_att"], name="/model.10/attn/Reshape_1"),
        ]
        inits["b1.shape"] = np.asarray([1, 8, size // 4, size // 4], np.int64)
        x = "x_att"
    levels, reg = [conv(x, 8, 16, 3, 2, "p3")], 16
    levels.append(conv(levels[-1], 16, 16, 3, 2, "p4"))
    levels.append(conv(levels[-1], 16, 16, 3, 2, "p5"))
    boxes = [conv(p, 16, 4 * reg, 3, 1, f"cv2.{i}", act=False) for i, p in enumerate(levels)]
    classes = [conv(p, 16, nc, 1, 1, f"cv3.{i}", act=False) for i, p in enumerate(levels)]
    n = sum((size // s) ** 2 for s in (8, 16, 32))
    inits["flat"] = np.asarray([1, 4 * reg + nc, -1], np.int64)
    inits["flat_box"], inits["flat_cls"] = np.asarray([1, 4 * reg, -1], np.int64), np.asarray([1, nc, -1], np.int64)
    if form == "split":
        for i, (b, c) in enumerate(zip(boxes, classes)):
            nodes += [
                helper.make_node("Concat", [b, c], [f"cat{i}"], name=f"/model.22/Concat_{i}", axis=1),
                helper.make_node("Reshape", [f"cat{i}", "flat"], [f"r{i}"], name=f"/model.22/Reshape_{i}"),
            ]
        inits["split"] = np.asarray([4 * reg, nc], np.int64)
        nodes += [
            helper.make_node("Concat", ["r0", "r1", "r2"], ["xcat"], name="/model.22/Concat_3", axis=2),
            helper.make_node("Split", ["xcat", "split"], ["box", "cls"], name="/model.22/Split", axis=1),
        ]
    else:
        for i, (b, c) in enumerate(zip(boxes, classes)):
            nodes += [
                helper.make_node("Reshape", [b, "flat_box"], [f"rb{i}"], name=f"/model.22/Reshape_b{i}"),
                helper.make_node("Reshape", [c, "flat_cls"], [f"rc{i}"], name=f"/model.22/Reshape_c{i}"),
            ]
        nodes += [
            helper.make_node("Concat", ["rb0", "rb1", "rb2"], ["box"], name="/model.22/Concat_b", axis=2),
            helper.make_node("Concat", ["rc0", "rc1", "rc2"], ["cls"], name="/model.22/Concat_c", axis=2),
        ]
    nodes += _yolo_decode(inits, size, reg, n)
    path = save(
        nodes,
        inits,
        path,
        input_shape=(1, 3, size, size),
        output_shape=(1, 4 + nc, n),
        opset=13,
        input_name="images",
        output_name="output0",
    )
    import onnx

    model = onnx.load(str(path))
    for key, value in {
        "author": "Ultralytics",
        "task": "detect",
        "stride": "32",
        "imgsz": f"[{size}, {size}]",
        "names": str({i: f"class{i}" for i in range(nc)}),
    }.items():
        model.metadata_props.add(key=key, value=value)
    path.write_bytes(model.SerializeToString())
    return path


def _yolo_decode(inits: dict, size: int, reg: int, n: int) -> list:
    """Ultralytics' Detect decode as torch.onnx.export writes it: DFL, dist2bbox (xywh), strides, sigmoid."""
    from onnx import helper

    points, strides = [], []
    for s in (8, 16, 32):
        h = w = size // s
        sy, sx = np.meshgrid(np.arange(h) + 0.5, np.arange(w) + 0.5, indexing="ij")
        points.append(np.stack([sx.reshape(-1), sy.reshape(-1)], 0))
        strides.append(np.full(h * w, s))
    inits["anchors"] = np.concatenate(points, 1)[None].astype(np.float32)
    inits["strides"] = np.concatenate(strides)[None, None].astype(np.float32)
    inits["dfl.w"] = np.arange(reg, dtype=np.float32).reshape(1, reg, 1, 1)
    inits["dfl.shape"], inits["box.shape"] = np.asarray([1, 4, reg, n], np.int64), np.asarray([1, 4, n], np.int64)
    inits.update(
        {
            "s0": np.asarray([0], np.int64),
            "s2": np.asarray([2], np.int64),
            "s4": np.asarray([4], np.int64),
            "ax1": np.asarray([1], np.int64),
            "half": np.asarray(2.0, np.float32),
        }
    )
    m = "/model.22/"
    return [
        helper.make_node("Reshape", ["box", "dfl.shape"], ["d0"], name=m + "dfl/Reshape"),
        helper.make_node("Transpose", ["d0"], ["d1"], name=m + "dfl/Transpose", perm=[0, 2, 1, 3]),
        helper.make_node("Softmax", ["d1"], ["d2"], name=m + "dfl/Softmax", axis=1),
        helper.make_node("Conv", ["d2", "dfl.w"], ["d3"], name=m + "dfl/conv/Conv", kernel_shape=[1, 1]),
        helper.make_node("Reshape", ["d3", "box.shape"], ["dist"], name=m + "dfl/Reshape_1"),
        helper.make_node("Slice", ["dist", "s0", "s2", "ax1"], ["lt"], name=m + "Slice"),
        helper.make_node("Slice", ["dist", "s2", "s4", "ax1"], ["rb"], name=m + "Slice_1"),
        helper.make_node("Sub", ["anchors", "lt"], ["x1y1"], name=m + "Sub"),
        helper.make_node("Add", ["anchors", "rb"], ["x2y2"], name=m + "Add"),
        helper.make_node("Add", ["x1y1", "x2y2"], ["sum"], name=m + "Add_1"),
        helper.make_node("Div", ["sum", "half"], ["cxy"], name=m + "Div"),
        helper.make_node("Sub", ["x2y2", "x1y1"], ["wh"], name=m + "Sub_1"),
        helper.make_node("Concat", ["cxy", "wh"], ["xywh"], name=m + "Concat_4", axis=1),
        helper.make_node("Mul", ["xywh", "strides"], ["dbox"], name=m + "Mul"),
        helper.make_node("Sigmoid", ["cls"], ["scores"], name=m + "Sigmoid"),
        helper.make_node("Concat", ["dbox", "scores"], ["output0"], name=m + "Concat_5", axis=1),
    ]
