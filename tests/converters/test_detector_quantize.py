"""quantize for detectors: a Keras YOLO-style head (fixed weights, no training: the same on every machine) to a
verified full-int8 model detect runs with no flags; pixel boxes beside scores in one output refused with the
reason; the detections gate."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from edgekit.board.decode import Layout

pytestmark = [pytest.mark.tf, pytest.mark.slow]

NC = 2


def keras_detector(path: Path, pixel_boxes: bool = False, outlier: bool = False, seed: int = 0) -> Path:
    """64x64 RGB -> [1, 4+NC, 84], built like a trained YOLO head's output looks: for each stride 8/16/32, Dense
    layers (fixed weights) on the average-pooled image give each grid cell a box centred near that cell (sigmoid;
    normalized, or times 64 with ``pixel_boxes``), about the stride's size, and NC sigmoid class scores whose
    logits spread widely with the image (few near any threshold). Boxes of neighbouring cells barely overlap, so
    NMS keeps the same boxes in float and int8, as a trained detector's few confident boxes do.

    ``outlier``: one class logit of one cell is biased to +2000 and the others sit near the threshold: the
    int8 scale of the class layer's output (before its sigmoid) then steps by ~16 logits, and most scores
    flip (an outlier activation crushing int8 resolution, a real way int8 detectors lose)."""
    from edgekit.converters.tf_quiet import import_tensorflow, silenced

    import_tensorflow()
    import keras

    def logit(p):
        return np.log(p / (1 - p))

    rng = np.random.RandomState(seed)
    with silenced():
        inp = keras.Input((64, 64, 3))
        x = keras.layers.Rescaling(1 / 255.0)(inp)
        levels, weights = [], []
        for s in (8, 16, 32):
            g = 64 // s
            f = keras.layers.Flatten()(keras.layers.AveragePooling2D(s)(x))
            box_layer = keras.layers.Dense(g * g * 4, activation="sigmoid")
            cls_layer = keras.layers.Dense(g * g * NC, activation="sigmoid")
            box = keras.layers.Reshape((g * g, 4))(box_layer(f))
            if pixel_boxes:
                box = keras.layers.Rescaling(64.0)(box)
            cls = keras.layers.Reshape((g * g, NC))(cls_layer(f))
            levels.append(keras.layers.Concatenate()([box, cls]))
            cy, cx = np.mgrid[0:g, 0:g]
            centre = np.stack([(cx.ravel() + 0.5) / g, (cy.ravel() + 0.5) / g], 1)
            size = np.full((g * g, 2), 0.8 / g)
            box_bias = logit(np.concatenate([centre, size], 1)).ravel()
            n_in = g * g * 3
            weights.append((box_layer, [rng.normal(0, 0.3 / np.sqrt(n_in), (n_in, g * g * 4)), box_bias]))
            cls_bias = rng.normal(-3.0, 2.0, g * g * NC)
            cls_scale = 12.0
            if outlier:
                cls_bias = rng.normal(-1.1, 1.0, g * g * NC)
                cls_bias[0] = 2000.0
                cls_scale = 1.0
            weights.append((cls_layer, [rng.normal(0, cls_scale / np.sqrt(n_in), (n_in, g * g * NC)), cls_bias]))
        out = keras.layers.Permute((2, 1))(keras.layers.Concatenate(axis=1)(levels))
        model = keras.Model(inp, out)
        for layer, (k, b) in weights:
            layer.set_weights([k.astype(np.float32), b.astype(np.float32)])
        model.save(path)
    return path


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    from edgekit.detection.data import make_shapes

    root = tmp_path_factory.mktemp("shapes")
    make_shapes(root, n_images=60, size=(64, 64), seed=2)
    return root


def quantize_detector(model: Path, shapes: Path, out: Path):
    """Calibrated on a YOLO folder (images/ + labels/): quantize takes its images."""
    from edgekit.converters.quantize import QuantizeOptions, quantize

    return quantize(
        QuantizeOptions(
            model=str(model),
            output=str(out),
            calib=str(shapes),
            scaling="raw",
            samples=40,
            holdout=20,
            show_progress=False,
        )
    )


def test_pixel_boxes_beside_scores_in_one_output_are_refused_with_the_reason(shapes, tmp_path):
    from edgekit.errors import ConversionError

    model = keras_detector(tmp_path / "px.keras", pixel_boxes=True)
    with pytest.raises(ConversionError, match="pixel-scale boxes beside 0..1 scores") as info:
        quantize_detector(model, shapes, tmp_path / "px_int8.tflite")
    assert "normalized" in info.value.hint and not (tmp_path / "px_int8.tflite").exists()


def test_a_detector_whose_int8_twin_loses_its_detections_is_refused(shapes, tmp_path):
    """Both gates: unlabelled (the share of float detections kept) and labelled (--eval COCO: the mAP50 drop)."""
    from edgekit.converters.quantize import AgreementError, QuantizeOptions, quantize
    from edgekit.converters.tf_quiet import silenced

    model = keras_detector(tmp_path / "outlier.keras", outlier=True)
    with silenced():
        labels = pseudo_labels(model, shapes)
    with pytest.raises(AgreementError, match="keeps .* of the float model's .* detections.*mAP50 drops") as info:
        quantize(
            QuantizeOptions(
                model=str(model),
                output=str(tmp_path / "outlier_int8.tflite"),
                calib=str(shapes / "images"),
                scaling="raw",
                samples=40,
                holdout=20,
                eval=str(labels),
                max_accuracy_drop=6.0,
                show_progress=False,
            )
        )
    v = info.value.result.to_dict()["verification"]
    assert v["kept_interval"][1] < 0.9 and info.value.exit_code == 6, v
    # the difference it states is of the one output's boxes and scores, not a score difference
    assert "score difference" not in str(info.value)
    assert f"mean |difference| on output 0 (boxes and scores) {v['mean_abs_diff']:.4f}" in str(info.value)
    assert v["map50"]["verdict"] == "failed" and v["map50"]["drop_interval"][0] > 0.06, v["map50"]


def test_a_keras_detector_builds_a_bundle_detect_runs_with_no_flags(shapes, tmp_path):
    from edgekit.converters.quantize import QuantizeOptions
    from edgekit.devices.detect import detect
    from edgekit.pipeline.build import BuildOptions, build

    model = keras_detector(tmp_path / "det.keras")
    labels = tmp_path / "labels.txt"
    labels.write_text("rectangle\nellipse\n")
    from edgekit.converters.tf_quiet import silenced

    with silenced():
        coco = pseudo_labels(model, shapes)
    # int8 loses about 3 mAP50 points on these labels (its scores near 0.5 move): within --max-accuracy-drop 6
    doc = build(
        BuildOptions(
            QuantizeOptions(
                model=str(model),
                calib=str(shapes / "images"),
                scaling="raw",
                samples=40,
                holdout=20,
                labels=str(labels),
                eval=str(coco),
                max_accuracy_drop=6.0,
            ),
            output=str(tmp_path / "bundle"),
            compile=False,
            show_progress=False,
        )
    ).to_dict()
    v = doc["quantize"]["verification"]
    assert v["kind"] == "detection" and v["float_detections"] > 20, v
    assert v["passed"] and v["kept"] >= 0.8 and v["kept_interval"][0] <= v["kept"] <= v["kept_interval"][1], v
    gate = v["map50"]
    assert gate["float_map50"] > 0.9 and gate["verdict"] == "passed", gate
    record = doc["manifest"]
    assert record["models"]["edgetpu"] is None
    assert record["accuracy"]["task"] == "detection" and record["accuracy"]["models"][0]["map50"] > 0.8
    r = detect([str(shapes / "images")], tmp_path / "bundle")
    assert r.layout.kind == Layout.YOLO and r.layout.labels == ("rectangle", "ellipse")
    assert r.layout.source[0] == "recorded by edgekit quantize with the model"  # never re-guessed
    assert {o.label for x in r.results for o in x.objects} <= {"rectangle", "ellipse"}
    assert sum(len(x.objects) for x in r.results) > 0 and r.layout.boxes_normalized is True
    from edgekit.board import manifest
    from edgekit.tflite.model_record import ModelRecord

    bundle = manifest.load(tmp_path / "bundle")
    from edgekit.tflite import model as tflite_model

    rec = ModelRecord.from_json(tflite_model.load(bundle.path(bundle.cpu_model)).metadata["edgekit"])
    assert rec.extra["detection"]["layout"]["kind"] == "yolo"


def pseudo_labels(model: Path, shapes: Path) -> Path:
    """COCO labels that are the float model's own detections (conf 0.5) on the shapes images: data on which the float
    model scores mAP50 near 1, so what int8 loses shows."""
    import json

    import keras
    from PIL import Image

    from edgekit.board import decode as detection
    from edgekit.detection.data import read_detection_set

    ds = read_detection_set(shapes / "annotations.json")
    ids = [im["id"] for im in ds.coco["images"]]
    x = np.stack([np.asarray(Image.open(ds.paths[i]).convert("RGB"), np.float32) for i in ids])
    y = keras.models.load_model(model).predict(x, verbose=0)
    layout = detection.DetectionLayout(
        detection.Layout.YOLO, {"output": 0}, NC, (64, 64), boxes_normalized=True, transposed=True
    )
    g = detection.Geometry.resize((64, 64), (64, 64))
    anns = []
    for k, iid in enumerate(ids):
        objs, _ = detection.postprocess([y[k : k + 1]], [(0.0, 0)], layout, g, 0.5, 0.45, 100)
        for o in objs:
            b = o.bbox
            anns.append(
                {
                    "id": len(anns) + 1,
                    "image_id": iid,
                    "category_id": o.id,
                    "iscrowd": 0,
                    "bbox": [b.xmin, b.ymin, b.width, b.height],
                    "area": b.area,
                }
            )
    doc = {
        "images": ds.coco["images"],
        "annotations": anns,
        "categories": [{"id": c, "name": f"c{c}"} for c in range(NC)],
    }
    out = shapes / "images" / f"pseudo_{model.stem}.json"
    out.write_text(json.dumps(doc))
    return out


def test_quantize_records_the_class_names_of_an_ultralytics_data_yaml_given_as_eval(tmp_path):
    """Issue 35 item 3: ``--eval data.yaml`` (its val split and names) scores the detector and records the names,
    so detect needs no --labels afterwards (on the old code the model had no labels: detect printed class ids)."""
    from edgekit.converters.quantize import QuantizeOptions, quantize
    from edgekit.detection.data import make_shapes
    from edgekit.devices.detect import detect
    from edgekit.tflite import model as tflite_model
    from edgekit.tflite.model_record import ModelRecord

    root = tmp_path / "ds"
    make_shapes(root, n_images=40, size=(64, 64), seed=5, classes=("rectangle", "ellipse"))
    (root / "classes.txt").unlink()  # the names only in data.yaml, as Ultralytics writes datasets
    (root / "data.yaml").write_text("path: .\ntrain: images\nval: images\nnames:\n  0: rectangle\n  1: ellipse\n")
    model = keras_detector(tmp_path / "det.keras")
    out = tmp_path / "det_int8.tflite"
    result = quantize(
        QuantizeOptions(
            model=str(model),
            output=str(out),
            calib=str(root / "images"),
            scaling="raw",
            samples=30,
            holdout=10,
            eval=str(root / "data.yaml"),
            max_accuracy_drop=50.0,
            show_progress=False,
        )
    )
    assert any("class names from --eval" in n and "data.yaml" in n for n in result.summary.to_dict()["notes"])
    rec = ModelRecord.from_json(tflite_model.load(out).metadata["edgekit"])
    assert rec.labels == ["rectangle", "ellipse"]
    r = detect([str(root / "images")], out, conf=0.01)
    assert r.layout.labels == ("rectangle", "ellipse")
    assert {o.label for x in r.results for o in x.objects} <= {"rectangle", "ellipse"}
    from edgekit.pipeline.build import BuildOptions, build

    build(
        BuildOptions(
            QuantizeOptions(
                model=str(model),
                calib=str(root),
                scaling="raw",
                samples=30,
                holdout=10,
                eval=str(root / "data.yaml"),
                max_accuracy_drop=50.0,
            ),
            output=str(tmp_path / "bundle"),
            compile=False,
            show_progress=False,
        )
    )
    assert (tmp_path / "bundle" / "labels.txt").read_text() == "rectangle\nellipse\n"
    assert detect([str(root / "images")], tmp_path / "bundle", conf=0.01).layout.labels == ("rectangle", "ellipse")


def test_the_refusal_names_the_output_its_mean_difference_is_of():
    """A split head's output 0 holds box distributions: its difference is a box difference, not a score one."""
    from edgekit.board.decode import DetectionLayout
    from edgekit.converters.detector_verify import difference_said

    split = DetectionLayout(Layout.SPLIT_DFL, {"boxes": 0, "scores": 1}, 3, (64, 64))
    levels = DetectionLayout(Layout.SPLIT_DFL, {"scores@8": 1, "boxes@8": 0}, 3, (64, 64))
    joined = DetectionLayout(Layout.YOLO, {"output": 0}, 3, (64, 64))
    assert difference_said(split, 0.01234) == "mean |difference| on output 0 (boxes) 0.0123"
    assert difference_said(levels, 0.5) == "mean |difference| on output 0 (boxes) 0.5000"
    assert difference_said(joined, None) == "mean |difference| on output 0 (boxes and scores) 0.0000"
