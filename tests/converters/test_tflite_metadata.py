"""Writing the edgekit record into a real model's metadata keeps the model intact and runnable."""

from __future__ import annotations

import numpy as np

from edgekit.tflite import model as tflite_model
from edgekit.tflite.metadata import set_metadata
from tests.conftest import shared_file


def _run(model: bytes) -> np.ndarray:
    from ai_edge_litert.interpreter import Interpreter

    interp = Interpreter(model_content=model, num_threads=1)
    interp.allocate_tensors()
    inp = interp.get_input_details()[0]
    interp.set_tensor(inp["index"], np.arange(np.prod(inp["shape"])).reshape(inp["shape"]).astype(inp["dtype"]))
    interp.invoke()
    return interp.get_tensor(interp.get_output_details()[0]["index"])


def test_metadata_is_added_then_replaced_and_the_model_still_runs():
    original = shared_file("mobilenet_v1_0.25_128_quant.tflite").read_bytes()
    before = tflite_model.ModelInfo.from_bytes(original)
    first = set_metadata(original, "edgekit", b'{"a": 1}')
    second = set_metadata(first, "edgekit", b'{"a": 2}')
    info = tflite_model.ModelInfo.from_bytes(second)
    assert info.metadata["edgekit"] == b'{"a": 2}'
    assert len(second) == len(first)  # replaced in place: the old record is not left behind in the file
    assert set(info.metadata) == set(before.metadata) | {"edgekit"}
    assert [(op.name, op.version) for op in info.ops] == [(op.name, op.version) for op in before.ops]
    np.testing.assert_array_equal(_run(second), _run(original))
