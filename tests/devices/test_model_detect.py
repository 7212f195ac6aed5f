"""``edgekit.open(...).detect``: the detection task layer on an opened model (issue 25), on a real YOLOv8n export."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import edgekit
from edgekit.api import Model
from edgekit.board import decode as detection
from edgekit.errors import InputError, UsageError
from tests.conftest import shared_file

DETECTOR = "detection/ppe_yolov8n_full_integer_quant.tflite"


def test_detect_defaults_are_the_commands():
    """Model.detect's defaults are edgekit detect's (the CLI's options) and edgekit.detect's."""
    from edgekit.cli.app import cli

    params = inspect.signature(Model.detect).parameters
    options = {p.name: p.default for p in cli.commands["detect"].params}
    api = inspect.signature(edgekit.detect).parameters
    for name, default in (
        ("conf", detection.DEFAULT_CONF),
        ("iou", detection.DEFAULT_IOU),
        ("max_det", detection.DEFAULT_MAX_DET),
    ):
        assert params[name].default == default == options[name] == api[name].default
    assert params["layout"].default is None


@pytest.fixture(scope="module")
def detector():
    with edgekit.open(shared_file(DETECTOR)) as model:
        yield model


def test_detect_returns_the_objects_edgekit_detect_finds(detector):
    image = shared_file("grace_hopper.bmp")
    objects = detector.detect(image)
    assert objects and all(isinstance(o, detection.Object) for o in objects)
    assert [o.score for o in objects] == sorted((o.score for o in objects), reverse=True)
    doc = edgekit.detect([str(image)], model=shared_file(DETECTOR)).to_dict()
    assert [o.to_dict(512, 600)["bbox"] for o in objects] == [o["bbox"] for o in doc["results"][0]["objects"]]
    assert [(o.id, o.label) for o in objects] == [(o["id"], o["label"]) for o in doc["results"][0]["objects"]]
    assert objects[0].label == "pessoa" and objects[0].bbox.height > 400  # Grace Hopper herself


def test_detect_takes_a_pil_image_or_an_array(detector):
    from PIL import Image

    path = shared_file("grace_hopper.bmp")
    expected = detector.detect(str(path))
    assert detector.detect(Image.open(path)) == expected
    assert detector.detect(np.asarray(Image.open(path).convert("RGB"))) == expected


def test_thresholds_apply_and_bad_ones_are_refused(detector):
    path = shared_file("grace_hopper.bmp")
    everything = detector.detect(path, conf=0.05, max_det=300)
    assert len(detector.detect(path, conf=0.05, max_det=1)) == 1
    strict = detector.detect(path, conf=0.85)
    assert all(o.score >= 0.85 for o in strict) and len(strict) < len(everything)
    with pytest.raises(UsageError, match="--conf"):
        detector.detect(path, conf=1.5)
    with pytest.raises(UsageError, match="--max-det"):
        detector.detect(path, max_det=0)


def test_a_detector_opens_but_does_not_classify(detector):
    with pytest.raises(InputError, match="not a classifier"):
        detector.classify(shared_file("grace_hopper.bmp"))


def test_a_classifier_has_no_detection_layout():
    with (
        edgekit.open(shared_file("mobilenet_v1_0.25_128_quant.tflite"), device="cpu") as model,
        pytest.raises(InputError),
    ):
        model.detect(shared_file("cat.bmp"))


def test_a_segmentation_model_opens_for_its_own_task_layer():
    """edgekit.open gives any image model the seam a task layer decodes from (input_tensor, infer): DeepLab's
    output is a class map, not scores, so classify refuses it in one line."""
    with edgekit.open(shared_file("deeplabv3_mnv2_dm05_pascal_quant.tflite"), device="cpu") as model:
        outputs = model.infer(model.input_tensor(shared_file("cat.bmp")))
        assert outputs[0].ndim >= 3 and not any("labels" in str(n) for n in model.notes)
        with pytest.raises(InputError, match="not a classifier"):
            model.classify(shared_file("cat.bmp"))


# ------------------------------------------- frames: channel order, float, batch, timing (issue 35)
def _grace_rgb():
    from PIL import Image

    return np.asarray(Image.open(shared_file("grace_hopper.bmp")).convert("RGB"))


def test_detect_takes_an_opencv_bgr_frame_and_a_float_frame_with_its_range(detector):
    """OpenCV's (and Ultralytics predict's) BGR frames were read as RGB without a word; a float frame was refused."""
    rgb = _grace_rgb()
    expected = detector.detect(rgb, conf=0.05)
    bgr = np.ascontiguousarray(rgb[..., ::-1])
    assert detector.detect(bgr, conf=0.05, channels="BGR") == expected
    assert detector.detect(bgr, conf=0.05) != expected  # the default is RGB: a BGR frame needs channels="BGR"
    assert detector.detect(rgb.astype(np.float32) / 255, conf=0.05, scale=255) == expected
    assert detector.detect(bgr / 255.0, conf=0.05, channels="BGR", scale=255) == expected
    with pytest.raises(InputError, match="a float frame does not say its range .*scale=255"):
        detector.detect(rgb / 255.0)


def test_detect_batch_answers_each_frame_in_order_and_names_a_bad_frames_index(detector):
    rgb = _grace_rgb()
    path = shared_file("grace_hopper.bmp")
    expected = detector.detect(path, conf=0.3)
    flipped = detector.detect(np.ascontiguousarray(rgb[:, ::-1]), conf=0.3)
    assert detector.detect_batch([path, rgb, rgb[:, ::-1]], conf=0.3) == [expected, expected, flipped]
    assert detector.detect_batch(np.stack([rgb[..., ::-1]] * 2), conf=0.3, channels="BGR") == [expected] * 2
    with pytest.raises(InputError, match=r"^frame 1: a 1x64x64x3 uint8 array is not one image"):
        detector.detect_batch([rgb, np.zeros((1, 64, 64, 3), np.uint8)])
    with pytest.raises(InputError, match="^frame 0: .*no-such.jpg"):
        detector.detect_batch([str(path) + ".no-such.jpg"])
    with pytest.raises(UsageError, match="--conf"):
        detector.detect_batch([rgb], conf=2.0)


def test_time_given_an_image_times_the_whole_detect_call_with_its_decode_and_nms(detector):
    """model.time() timed invoke alone; a detector's call is also its letterbox and its decode + NMS."""
    from edgekit.results import CallTiming

    timing = detector.time(3, 1, image=_grace_rgb(), conf=0.05, max_det=50)
    assert isinstance(timing, CallTiming) and timing.call == "detect"
    assert timing.preprocess.count == timing.invoke.count == timing.postprocess.count == timing.total.count == 3
    assert timing.postprocess.min_ms > 0 and timing.preprocess.min_ms > 0
    assert timing.total.p50_ms > timing.invoke.p50_ms
    for pre, inv, post, total in zip(
        timing.preprocess.latencies_ms,
        timing.invoke.latencies_ms,
        timing.postprocess.latencies_ms,
        timing.total.latencies_ms,
    ):
        assert pre + inv + post == pytest.approx(total)
    with pytest.raises(UsageError, match="top_k: not a keyword of detect .*detect takes conf, iou, max_det, layout"):
        detector.time(2, image=_grace_rgb(), top_k=1)
    with pytest.raises(UsageError, match="--iou"):
        detector.time(2, image=_grace_rgb(), iou=-1.0)


def test_frames_on_a_small_built_detector_with_no_shared_data(tmp_path):
    """The same, on a detector built here (its outputs are slices of its input), so a clone without
    ../shared/testdata runs it: a BGR frame is read as BGR only when said, a float frame only with its range."""
    pytest.importorskip("flatbuffers", reason="building a model uses the flatbuffers package (tests/tflite_builder.py)")
    from tests.detection_models import image_for, slice_model

    hw = (32, 32)
    values = np.zeros((10, 6))
    values[0] = [0.1, 0.2, 0.5, 0.6, 0.8, 1]  # end-to-end rows: x1, y1, x2, y2, score, class
    values[1] = [0.3, 0.1, 0.9, 0.7, 0.6, 0]
    path = tmp_path / "e2e.tflite"
    path.write_bytes(slice_model(hw, [{"shape": [1, 10, 6]}]))
    rgb = image_for(hw, [values])
    bgr = np.ascontiguousarray(rgb[..., ::-1])
    with edgekit.open(path, device="cpu") as model:
        expected = model.detect(rgb, layout="end2end")
        assert [(o.id, round(o.score, 2)) for o in expected] == [(1, 0.8), (0, 0.6)]
        assert model.detect(bgr, layout="end2end", channels="BGR") == expected
        assert model.detect(bgr, layout="end2end") != expected  # RGB is the default, never guessed
        assert model.detect(rgb / 255.0, layout="end2end", scale=255) == expected
        assert model.detect_batch([bgr, bgr], layout="end2end", channels="BGR") == [expected, expected]
        with pytest.raises(InputError, match="^frame 1: .*a float frame does not say its range"):
            model.detect_batch([rgb, rgb / 255.0], layout="end2end")
        timing = model.time(3, 0, image=bgr, channels="BGR", layout="end2end")
        assert timing.call == "detect" and timing.total.count == 3 and timing.postprocess.min_ms > 0
