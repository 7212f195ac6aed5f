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


def save(nodes, inits, path: Path, input_shape=("N", 3, 32, 32), output_shape=("N", 10), opset: int = 13,
         input_name: str = "input", output_name: str = "output") -> Path:
    """A one-input, one-output float32 model of ``nodes`` (the last one writes ``output_name``)."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(nodes, "edgekit_test",
                              [helper.make_tensor_value_info(input_name, TensorProto.FLOAT, list(input_shape))],
                              [helper.make_tensor_value_info(output_name, TensorProto.FLOAT, list(output_shape))],
                              [_init(k, v) for k, v in inits.items()])
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
        nodes += [helper.make_node("Conv", [x, f"c{i}.w"], [f"c{i}"], name=f"/features/conv{i}/Conv",
                                   kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1]),
                  helper.make_node("BatchNormalization", [f"c{i}", f"bn{i}.g", f"bn{i}.b", f"bn{i}.m", f"bn{i}.v"],
                                   [f"n{i}"], name=f"/features/bn{i}/BatchNormalization", epsilon=bn.epsilon),
                  helper.make_node("Relu", [f"n{i}"], [f"r{i}"], name=f"/features/relu{i}/Relu"),
                  helper.make_node("MaxPool", [f"r{i}"], [f"p{i}"], name=f"/features/pool{i}/MaxPool",
                                   kernel_shape=[2, 2], strides=[2, 2])]
        x = f"p{i}"
    (k1, b1), (k2, b2) = (d.get_weights() for d in dense)
    h = w = 8
    c = k1.shape[0] // (h * w)
    k1 = k1.reshape(h, w, c, -1).transpose(2, 0, 1, 3).reshape(k1.shape[0], -1)   # rows in NCHW flatten order
    if inflate:
        unit, r = inflate
        k1, b1, k2 = k1.copy(), b1.copy(), k2.copy()
        k1[:, unit] *= r
        b1[unit] *= r
        k2[unit] /= r
    inits.update({"fc1.w": k1.T, "fc1.b": b1, "fc2.w": k2.T, "fc2.b": b2})
    nodes += [helper.make_node("Flatten", [x], ["flat"], name="/Flatten", axis=1),
              helper.make_node("Gemm", ["flat", "fc1.w", "fc1.b"], ["g1"], name="/fc1/Gemm", transB=1),
              helper.make_node("Relu", ["g1"], ["h1"], name="/relu/Relu"),
              helper.make_node("Gemm", ["h1", "fc2.w", "fc2.b"], ["logits"], name="/fc2/Gemm", transB=1),
              helper.make_node("Softmax", ["logits"], ["output"], name="/Softmax", axis=1)]
    return save(nodes, {k: np.asarray(v, np.float32) for k, v in inits.items()}, path)
