"""A FULLY_CONNECTED with per-channel int8 weights, requantized per tensor in a bundle's copy (edgekit.converters.
fc_per_tensor): tflite-runtime 2.7, a Coral board's, reads one scale there and outputs the zero point for every
class. On onnx2tf's real digits classifier: the bundle's weights are per tensor, its top-1 on the 360 held-out
digits is the exported model's within a point, and the Python 3.7 board (where .venv-py37 exists) scores it too."""

from __future__ import annotations

import subprocess

import numpy as np

from edgekit.tflite import model as tflite_model
from tests.test_exports_runtime import EXPORTS, ONNX2TF_INT8, heldout_digits, top1


def _fc_scales(path) -> list[int]:
    info = tflite_model.load(path)
    return [len(info.main.tensor(op.inputs[1]).quantization.scales) for op in info.ops if op.name == "FULLY_CONNECTED"]


def test_build_requantizes_a_per_channel_fully_connected_and_keeps_its_accuracy(tmp_path):
    import edgekit

    assert _fc_scales(EXPORTS / ONNX2TF_INT8) == [10]
    result = edgekit.build(EXPORTS / ONNX2TF_INT8, output=tmp_path / "digits", no_compile=True)
    bundled = tmp_path / "digits" / ONNX2TF_INT8
    assert _fc_scales(bundled) == [1]
    assert [n for n in result.notes if "requantized per tensor in the bundle" in n]
    images, labels = heldout_digits()
    with edgekit.open(EXPORTS / ONNX2TF_INT8) as given, edgekit.open(bundled) as rewritten:
        before, after = top1(given, images, labels), top1(rewritten, images, labels)
    assert abs(after - before) <= 0.01, (before, after)  # measured: 0.922 -> 0.925


def test_the_board_runtime_scores_the_requantized_model(tmp_path):
    """On tflite-runtime 2.7 (the board's venv), the given model's logits are all its zero point; the bundle's are
    not, and pick the right digit."""
    import pytest

    from tests.test_remote import PY37

    if not PY37.is_file():
        pytest.skip(f"no board Python at {PY37} (make venv-py37)")
    import edgekit

    edgekit.build(EXPORTS / ONNX2TF_INT8, output=tmp_path / "digits", no_compile=True)
    images, labels = heldout_digits()
    np.save(tmp_path / "x.npy", images[:20])
    script = """import sys, numpy as np
from tflite_runtime.interpreter import Interpreter
it = Interpreter(sys.argv[1]); it.allocate_tensors()
i, o = it.get_input_details()[0], it.get_output_details()[0]
for x in np.load(sys.argv[2]):
    q = np.clip(np.round(x / 255.0 / i['quantization'][0] + i['quantization'][1]), -128, 127).astype(np.int8)[None]
    it.set_tensor(i['index'], q); it.invoke(); print(' '.join(map(str, it.get_tensor(o['index'])[0])))
"""
    runs = {}
    for name, path in (("given", EXPORTS / ONNX2TF_INT8), ("bundled", tmp_path / "digits" / ONNX2TF_INT8)):
        out = subprocess.run(
            [str(PY37), "-c", script, str(path), str(tmp_path / "x.npy")],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout
        runs[name] = np.array([[int(v) for v in line.split()] for line in out.splitlines()])
    assert (runs["given"] == runs["given"][0, 0]).all()  # every class, every digit: the zero point
    assert (runs["bundled"].argmax(1) == labels[:20]).mean() >= 0.85
