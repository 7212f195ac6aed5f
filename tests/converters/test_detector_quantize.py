"""quantize for detectors: a Keras YOLO-style head (fixed weights, no training: the same on every machine) to a
verified full-int8 model detect runs with no flags; pixel boxes beside scores in one output refused with the
reason; the detections gate."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from edgekit.detection import Layout

pytestmark = [pytest.mark.tf, pytest.mark.slow]

NC = 2


def keras_detector(path: Path, pixel_boxes: bool = False, seed: int = 0) -> Path:
    """64x64 RGB -> [1, 4+NC, 84]: per stride 8/16/32, average pooling then 1x1 convolutions with fixed random
    weights: sigmoid cx, cy, w, h (normalized, or times 64 with ``pixel_boxes``) beside sigmoid class scores."""
    from edgekit.converters.tf_quiet import import_tensorflow, silenced

    import_tensorflow()
    import keras

    rng = np.random.RandomState(seed)
    with silenced():
        inp = keras.Input((64, 64, 3))
        x = keras.layers.Rescaling(1 / 255.0)(inp)
        levels = []
        for s in (8, 16, 32):
            p = keras.layers.AveragePooling2D(s)(x)
            h = keras.layers.Conv2D(16, 1, activation="relu")(p)
            box = keras.layers.Conv2D(4, 1, activation="sigmoid")(h)
            if pixel_boxes:
                box = keras.layers.Rescaling(64.0)(box)
            cls = keras.layers.Conv2D(NC, 1, activation="sigmoid")(h)
            levels.append(keras.layers.Reshape((-1, 4 + NC))(keras.layers.Concatenate()([box, cls])))
        out = keras.layers.Permute((2, 1))(keras.layers.Concatenate(axis=1)(levels))
        model = keras.Model(inp, out)
        for layer in model.layers:
            if isinstance(layer, keras.layers.Conv2D):
                k, b = layer.get_weights()
                scale = 8.0 if k.shape[-1] in (4, NC) else 2.0   # wide logits: few scores near the threshold
                layer.set_weights([rng.normal(0, scale / np.sqrt(k.shape[-2]), k.shape).astype(np.float32),
                                   rng.normal(-0.5, 1.0, b.shape).astype(np.float32)])
        model.save(path)
    return path


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    from edgekit.detection_data import make_shapes

    root = tmp_path_factory.mktemp("shapes")
    make_shapes(root, n_images=60, size=(64, 64), seed=2)
    return root


def quantize_detector(model: Path, shapes: Path, out: Path):
    from edgekit.converters.quantize import QuantizeOptions, quantize

    return quantize(QuantizeOptions(model=str(model), output=str(out), calib=str(shapes / "images"), scaling="raw",
                                    samples=40, holdout=20, show_progress=False))


def test_a_keras_detector_quantizes_verifies_and_detects_with_no_flags(shapes, tmp_path):
    from edgekit.devices.detect import detect

    model = keras_detector(tmp_path / "det.keras")
    result = quantize_detector(model, shapes, tmp_path / "det_int8.tflite")
    v = result.summary["verification"]
    assert v["kind"] == "detection" and v["float_detections"] > 20, v
    assert v["passed"] and v["kept"] >= 0.8 and v["kept_interval"][0] <= v["kept"] <= v["kept_interval"][1], v
    r = detect([str(shapes / "images")], result.output)
    assert r.layout.kind == Layout.YOLO and r.layout.num_classes == NC and r.layout.boxes_normalized is True
    assert sum(len(x.objects) for x in r.results) > 0
    from edgekit.model_record import find_record

    record, _ = find_record(result.output, {})
    assert record.extra["detection"]["layout"]["kind"] == "yolo"


def test_pixel_boxes_beside_scores_in_one_output_are_refused_with_the_reason(shapes, tmp_path):
    from edgekit.errors import ConversionError

    model = keras_detector(tmp_path / "px.keras", pixel_boxes=True)
    with pytest.raises(ConversionError, match="pixel-scale boxes beside 0..1 scores") as info:
        quantize_detector(model, shapes, tmp_path / "px_int8.tflite")
    assert "normalized" in info.value.hint and not (tmp_path / "px_int8.tflite").exists()
