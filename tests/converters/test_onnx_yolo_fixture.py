"""Issue 32's "Done when" for YOLO on the real trained fixture: ``edgekit quantize yolov8t_256_float32.onnx`` (a
YOLOv8 trained 40 epochs on edgekit's shapes by tests/fixtures/exports/make_exports.py) with no flags but ``--calib``
and ``--eval``, as a new user runs it.

The calibration set is written by the same writer with another seed than the training (3501) and val (3502) sets;
the val set is the 100 images ``yolo val`` scored (the ``shapes_val`` fixture). The figures of this run and of
Ultralytics' own ``format=edgetpu`` file are in docs/commands/quantize.md (ONNX section).
"""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from edgekit.cli.app import cli
from tests.test_exports_runtime import EXPORTS, FILES, MANIFEST, shapes_val  # noqa: F401 (the fixture)

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytestmark = [pytest.mark.tf, pytest.mark.slow]

MODEL = "yolov8t_256_float32.onnx"
THEIRS = "yolov8t_256_full_integer_quant.tflite"  # Ultralytics' format=edgetpu int8 file
CALIB_SEED = 3601
MAX_DROP = 0.02  # the bar: int8 mAP50-95 within 2 points of the ONNX float model's


def test_quantize_the_trained_yolov8_onnx_keeps_its_map(tmp_path, shapes_val):
    import edgekit
    from edgekit.detection.data import make_shapes

    s = MANIFEST["shapes"]
    make_shapes(
        tmp_path / "calib",
        n_images=200,
        size=tuple(s["size"]),
        seed=CALIB_SEED,
        min_side=s["min_side"],
        max_objects=s["max_objects"],
        empty_every=s["empty_every"],
    )
    model = tmp_path / MODEL
    shutil.copyfile(EXPORTS / MODEL, model)
    result = CliRunner().invoke(
        cli, ["quantize", str(model), "--calib", str(tmp_path / "calib" / "images"), "--eval", str(shapes_val)]
    )
    assert result.exit_code == 0, result.output
    out = tmp_path / "yolov8t_256_float32_int8.tflite"
    record = json.loads(out.with_suffix(".edgekit.json").read_text())

    # every op but the decode (which runs on the host) on the Edge TPU; boxes and scores in their own outputs
    check = edgekit.check(out)
    assert check.verdict.value == "full", check.summary
    layout = record["detection"]["layout"]
    assert layout["kind"] == "split-dfl" and layout["roles"] == {"boxes": 0, "scores": 1} and layout["letterbox"]

    # the float reference is the ONNX model run by ONNX Runtime, letterboxed as yolo val feeds it: its mAP50-95
    # agrees with yolo val's (a stretched feed had scored it 6.8 against yolo val's 8.6)
    gate = record["verification"]["map50"]
    assert abs(gate["float_map"] - FILES[MODEL]["yolo_val"]["mAP50-95"]) <= 0.01, gate
    # the drop, paired over the 100 images: the whole 95% interval within 2 points (not a point estimate)
    assert gate["map_drop_interval"][1] <= MAX_DROP, gate

    # measured by edgekit evaluate, against Ultralytics' own Edge TPU export: not worse (paired interval)
    ev = edgekit.evaluate_detector(out, shapes_val, against=[EXPORTS / THEIRS])
    ours = ev.models[0]
    assert ours.map >= FILES[MODEL]["yolo_val"]["mAP50-95"] - MAX_DROP, ours
    assert ev.differences[0].map_interval[1] > 0, ev.differences[0]
