"""Issue 35 item 2 on the real Ultralytics 8.4 exports (tests/fixtures/exports): ``edgekit cut`` then ``edgekit
evaluate`` and ``edgekit detect`` of the cut model against the uncut one and against the float export's ``yolo val``.

Measured here (100 val images, 215 objects; pycocotools, conf 0.001 per class, NMS IoU 0.7; mAP50-95 in points):

====================================  =====  ====  ==============================  =====
model                                 uncut  cut   cut - uncut (paired 95% int.)   float
====================================  =====  ====  ==============================  =====
yolov8t_256 format=edgetpu             8.2   8.8   +0.6 (+0.2 to +1.1)              8.6
yolov8t_256 LiteRT int8 (NCHW float)   9.7  10.2   +0.4 (+0.1 to +0.8)              8.6
yolov8t_640 format=edgetpu             7.3   8.1   +0.8 (+0.5 to +1.4)              -
yolov8t_640 LiteRT int8 (NCHW float)   7.9   9.2   +1.4 (+0.7 to +2.1)              -
====================================  =====  ====  ==============================  =====

These are weak models (40 epochs on 320 generated images, mAP50-95 ~8-10), so the int8 exports' own scatter around the
float figure is large: the two int8 exports of the same weights differ by 1.3 points under ``yolo val`` (8.17 and
9.49 against the float 8.62). The bar is the issue's: the cut model loses at most a point to the float export; above
the float figure it may be by that scatter (1.3 points between the two exports, plus the cut's own gain of up to
0.8 on the 256 px models), 2.5 points at most. The 640 px exports have no float figure at 640 (the float ONNX is
256 px only): their cut is checked against the uncut model alone.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

EXPORTS = Path(__file__).resolve().parent / "fixtures" / "exports"
MANIFEST = json.loads((EXPORTS / "manifest.json").read_text())
FLOAT = MANIFEST["files"]["yolov8t_256_float32.onnx"]["yolo_val"]["mAP50-95"]
CUT_256 = ["yolov8t_256_full_integer_quant.tflite", "yolov8t_256_litert_int8.tflite"]
BELOW_FLOAT, ABOVE_FLOAT = 0.01, 0.025  # the issue's point; the int8 exports' scatter plus the cut's gain (above)


@pytest.fixture(scope="module")
def shapes_val(tmp_path_factory) -> Path:
    """The 100 val images ``yolo val`` scored the exports on, regenerated deterministically (as in
    test_exports_runtime.py; its sha256 is checked in test_export_fixtures.py)."""
    from edgekit.detection.data import make_shapes

    s, v = MANIFEST["shapes"], MANIFEST["shapes"]["val"]
    folder = tmp_path_factory.mktemp("shapes") / "val"
    make_shapes(
        folder,
        n_images=v["n_images"],
        size=tuple(s["size"]),
        seed=v["seed"],
        min_side=s["min_side"],
        max_objects=s["max_objects"],
        empty_every=s["empty_every"],
    )
    return folder


@pytest.fixture(scope="module")
def cut_models(tmp_path_factory) -> dict:
    import edgekit

    folder = tmp_path_factory.mktemp("cut")
    return {n: edgekit.cut(EXPORTS / n, output=folder / n.replace(".tflite", "_cut.tflite")).output for n in CUT_256}


@pytest.mark.parametrize("name", CUT_256)
def test_the_cut_models_map_is_the_float_exports_within_a_point(name, shapes_val, cut_models):
    """The cut model's mAP50-95 within a point below the float export's (8.6; above by the int8 scatter at most), and
    no loss against the uncut model: the paired interval of the change excludes a loss."""
    pytest.importorskip("pycocotools")
    import edgekit

    result = edgekit.evaluate_detector(cut_models[name], shapes_val, against=[EXPORTS / name])
    cut, uncut = result.models
    assert FLOAT - BELOW_FLOAT <= cut.map <= FLOAT + ABOVE_FLOAT, (cut.map, FLOAT)
    change = result.differences[0]
    assert change.map_change > 0 and change.map_interval[0] > -0.001, change
    assert abs(uncut.map - MANIFEST["files"][name]["yolo_val"]["mAP50-95"]) <= 0.01  # evaluate is yolo val's
    assert [o.model for o in result.cut] == [str(EXPORTS / name)]  # the uncut model is offered the cut, not the cut


def test_evaluate_offers_the_cut_and_try_cut_measures_what_it_gives_back(shapes_val, cut_models):
    """A plain evaluate of the uncut export offers `edgekit cut MODEL` (~20 ms: the graph walked, nothing run);
    --try-cut scores the model cut in memory: the same mAP as the cut file's, with its paired change."""
    pytest.importorskip("pycocotools")
    from click.testing import CliRunner

    import edgekit
    from edgekit.cli.app import cli

    name = CUT_256[0]
    plain = edgekit.evaluate_detector(EXPORTS / name, shapes_val)
    assert [(o.command, o.decode_ops, o.score) for o in plain.cut] == [(f"edgekit cut {EXPORTS / name}", 31, None)]
    assert f"`edgekit cut {EXPORTS / name}`" in plain.render_text() and "--try-cut measures" in plain.render_text()
    out = CliRunner().invoke(
        cli, ["evaluate", "-m", str(EXPORTS / name), "--data", str(shapes_val), "--try-cut", "--json"]
    )
    assert out.exit_code == 0, out.output
    offer = json.loads(out.stdout)["cut"][0]
    on_file = edgekit.evaluate_detector(cut_models[name], shapes_val).models[0]
    assert offer["score"]["map"] == pytest.approx(on_file.map, abs=1e-9) and offer["score"]["map"] > FLOAT - 0.01
    assert offer["change"]["map_change"] == pytest.approx(on_file.map - plain.models[0].map, abs=1e-9)
    assert offer["change"]["map_interval"][0] > 0  # measured: +0.2 to +1.1 points, a real gain


def _boxes(objects) -> np.ndarray:
    return np.array([[o.bbox.xmin, o.bbox.ymin, o.bbox.xmax, o.bbox.ymax] for o in objects]).reshape(-1, 4)


def _iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    lt, rb = np.maximum(a[:, None, :2], b[None, :, :2]), np.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = np.clip(rb - lt, 0, None).prod(2)
    area_a, area_b = (a[:, 2:] - a[:, :2]).prod(1), (b[:, 2:] - b[:, :2]).prod(1)
    return inter / (area_a[:, None] + area_b[None] - inter)


@pytest.mark.parametrize("name", CUT_256)
def test_detect_on_the_cut_model_finds_the_objects_of_the_uncut_one(name, shapes_val, cut_models):
    """Every object detect finds on the uncut model (conf 0.25) is found on the cut one, of the same class, at COCO's
    match IoU (0.5) at least and 0.9 on average: the uncut model leaves its boxes on an int8 grid (a pixel or more at
    256 px, ~0.8 IoU on the smallest boxes; measured 0.82 at worst), which the cut's float decode does not. An object
    only the cut finds scores within the uncut output's rounding of the threshold (a few hundredths)."""
    import edgekit

    images = sorted((shapes_val / "images").glob("*.png"))
    uncut = edgekit.detect(images, model=EXPORTS / name)
    cut = edgekit.detect(images, model=cut_models[name])
    ious, found = [], 0
    for a, b in zip(uncut.results, cut.results):
        assert a.image == b.image
        found += len(a.objects)
        if not a.objects:
            assert all(o.score < 0.25 + 0.03 for o in b.objects), b
            continue
        same = np.array([[o.id == p.id for p in b.objects] for o in a.objects]).reshape(len(a.objects), -1)
        iou = np.where(same, _iou(_boxes(a.objects), _boxes(b.objects)), 0.0)
        best = iou.max(1) if iou.size else np.zeros(len(a.objects))
        assert (best >= 0.5).all(), (a.image, best)
        ious += list(best)
        extra = [p for k, p in enumerate(b.objects) if not iou.size or iou[:, k].max() < 0.5]
        assert all(o.score < 0.25 + 0.03 for o in extra), extra
    assert found >= 15 and np.mean(ious) >= 0.9, (found, np.mean(ious))


def test_a_compiled_model_is_offered_the_cut_of_its_cpu_twin_then_the_compile(tmp_path):
    """``evaluate -m x_edgetpu.tflite``: the cut takes the CPU twin ``x.tflite`` (a compiled model cannot be cut), then
    the cut model is compiled; with no twin beside it, no offer (nothing to run it on)."""
    from edgekit.devices.evaluate_detector import cut_head
    from tests.conftest import shared_file

    compiled = shared_file("detection/ppe_yolov8n_full_integer_quant_edgetpu.tflite")
    found = cut_head(str(compiled))
    assert found is not None and found[0] == str(compiled.with_name("ppe_yolov8n_full_integer_quant.tflite"))
    assert found[1].num_classes == 4
    alone = tmp_path / compiled.name
    alone.write_bytes(compiled.read_bytes())
    assert cut_head(str(alone)) is None and cut_head(str(tmp_path)) is None


def test_try_cut_is_refused_for_a_classifier_with_the_reason(tmp_path):
    from click.testing import CliRunner

    from edgekit.cli.app import cli

    data = tmp_path / "d.npz"
    np.savez(data, x=np.zeros((2, 8, 8, 3), np.uint8), y=np.zeros(2, np.int64))
    out = CliRunner().invoke(
        cli,
        [
            "evaluate",
            "-m",
            str(EXPORTS / "digits_cnn_onnx2tf_full_integer_quant.tflite"),
            "--data",
            str(data),
            "--try-cut",
        ],
    )
    assert out.exit_code == 2 and "--try-cut apply to detectors only" in out.output, out.output
