"""edgekit's Python API (edgekit/api.py, edgekit/results.py): cheap to import, the CLI's defaults, typed results."""

from __future__ import annotations

import inspect
import subprocess
import sys

import numpy as np
import pytest

import edgekit
from edgekit import api
from edgekit.errors import CompatibilityError, InputError, UsageError, VerificationError
from edgekit.records import Record
from edgekit.results import CheckResult, Class, Confidence, Decision, Target, Verdict, Verification
from tests.conftest import REPO, shared_file
from tests.helpers import COMPILED, MODEL


def test_importing_edgekit_imports_no_tensorflow_click_numpy_or_converters():
    code = (
        "import sys, edgekit\nassert callable(edgekit.open) and callable(edgekit.check)\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'click', 'numpy', 'PIL')\n"
        "         or m.startswith(('edgekit.converters', 'edgekit.devices', 'edgekit.cli.commands'))]\n"
        "print(heavy)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_every_public_name_resolves():
    for name in edgekit.__all__:
        assert getattr(edgekit, name) is not None, name
    with pytest.raises(AttributeError):
        edgekit.no_such_thing  # noqa: B018


def test_open_classifies_a_path_a_pil_image_and_an_array_into_class_records():
    from PIL import Image

    labels = shared_file("imagenet_labels.txt")
    cat = shared_file("cat.bmp")
    with edgekit.open(shared_file(MODEL), device="cpu", labels=labels) as model:
        assert model.device == "cpu" and model.labels[283] == "tiger cat"
        top = model.classify(cat, top_k=3)
        assert [c.id for c in top][:1] == [283] and all(isinstance(c, Class) for c in top)
        assert top == sorted(top, key=lambda c: -c.score) and top[0].label == "tiger cat"
        assert model.classify(Image.open(cat), top_k=3) == top
        assert model.classify(np.asarray(Image.open(cat).convert("RGB")), top_k=3) == top
        tensor = model.input_tensor(cat)
        assert model.classify(tensor, top_k=3) == top  # already the input: taken as it is
        assert model.classify(cat, top_k=None, threshold=0.2) == [c for c in top if c.score >= 0.2]
        (scores,) = model.infer(tensor)  # the seam a task layer (detection) decodes from
        assert scores.shape == (1, 1001) and int(scores.argmax()) == 283
        assert np.array_equal(model.outputs[0], scores)
        timing = model.time(3, 1)
        assert timing.count == 3 == len(timing.latencies_ms) and timing.min_ms <= timing.p50_ms <= timing.max_ms
        assert type(timing).from_dict(timing.to_dict()) == timing and "3 inferences" in timing.render_text()
    with pytest.raises(UsageError):  # closed by the with block
        model.classify(cat)


def test_the_compiled_model_falls_back_to_its_cpu_twin_and_says_so(monkeypatch):
    from edgekit.devices import discovery

    monkeypatch.setattr(discovery, "list_devices", lambda *a, **k: [])
    shared_file(MODEL)
    with edgekit.open(shared_file(COMPILED)) as model:
        assert model.device == "cpu" and model.model_path.endswith(MODEL)
        assert any("CPU" in n or "cpu" in n for n in model.notes)


def test_classify_files_and_the_module_level_classify_give_the_commands_document():
    result = edgekit.classify(
        [str(shared_file("cat.bmp")), "missing.jpg"], model=shared_file(MODEL), device="cpu", top_k=2
    )
    assert result.results[0].top[0].id == 283 and len(result.results[0].top) == 2
    assert [e.image for e in result.errors] == ["missing.jpg"]
    doc = result.to_dict()
    assert set(doc) == {"model", "device", "backend", "first_inference_ms", "results", "errors"}
    assert list(doc["results"][0]["top"][0]) == ["id", "label", "score"]
    assert type(result).from_dict(doc) == result


def test_check_is_typed_round_trips_and_strict_raises_with_the_result():
    full = edgekit.check(shared_file(MODEL))
    assert full.verdict is Verdict.FULL and full.verdict == "full" and full.fully_mappable
    assert all(o.target is Target.EDGETPU and o.confidence is Confidence.CONFIRMED for o in full.ops)
    assert CheckResult.from_dict(full.to_dict()) == full and full.edgetpu is None
    with pytest.raises(AttributeError):  # frozen (dataclasses.FrozenInstanceError)
        full.verdict = Verdict.NONE  # type: ignore[misc]
    partial = edgekit.check(shared_file("deeplabv3_mnv2_dm05_pascal_quant.tflite"))
    assert partial.verdict is Verdict.PARTIAL and partial.summary.cpu_ops > 0
    with pytest.raises(CompatibilityError) as err:
        edgekit.check(shared_file("deeplabv3_mnv2_dm05_pascal_quant.tflite"), strict=True)
    assert err.value.exit_code == 7 and err.value.result == partial
    compiled = edgekit.check(shared_file(COMPILED))
    assert compiled.compiled and compiled.edgetpu.subgraphs == 1
    assert CheckResult.from_dict(compiled.to_dict()).to_dict() == compiled.to_dict()


def test_benchmark_result_is_typed_and_round_trips():
    result = edgekit.benchmark(shared_file(MODEL), device="cpu", n=3, warmup=0, threads=1)
    assert result.iterations == 3 and len(result.latencies_ms) == 3 and result.threads == 1
    assert result.min_ms <= result.p50_ms <= result.max_ms and result.comparison is None
    assert type(result).from_dict(result.to_dict()) == result
    assert (
        result.render_text().splitlines()[0].endswith("(ai_edge_litert, 1 threads)")
        or "threads" in result.render_text().splitlines()[0]
    )


def test_records_refuse_a_drifted_document():
    doc = edgekit.check(shared_file(MODEL)).to_dict()
    with pytest.raises(ValueError, match="unknown field"):
        CheckResult.from_dict({**doc, "surprise": 1})
    with pytest.raises(ValueError, match="'verdict' is missing"):
        CheckResult.from_dict({k: v for k, v in doc.items() if k != "verdict"})
    with pytest.raises(ValueError, match="not one of"):
        CheckResult.from_dict({**doc, "verdict": "most"})


def test_a_block_of_a_shipped_dataclass_is_refused_as_a_records_would_be():
    """devices' Device (a dataclass of a module shipped to a Python 3.7 board, no Record) inside a result: a
    drifted document is a ValueError naming where, as for a Record's block (not a KeyError or TypeError)."""
    from edgekit.results import DevicesResult

    with pytest.raises(ValueError, match=r"DevicesResult.devices\[0\]: expected an object, got 1"):
        DevicesResult.from_dict({"devices": [1]})
    with pytest.raises(ValueError, match=r"DevicesResult.devices\[0\]: the field 'path' is missing"):
        DevicesResult.from_dict({"devices": [{"type": "usb"}]})


def _verification(**over):
    base = {
        "samples": 100,
        "top1_agreement": 0.7,
        "agreement_interval": [0.6, 0.78],
        "mean_abs_diff": 0.1,
        "max_abs_diff": 0.5,
        "min_agreement": 0.9,
        "sources": {"held_back": 100},
        "held_back": True,
        "labelled": False,
        "confidence": 0.95,
        "float_top1": None,
        "int8_top1": None,
        "accuracy_drop": None,
        "accuracy_drop_interval": None,
        "max_accuracy_drop": 1.0,
        "flips": None,
        "mcnemar_p": None,
        "float_near_chance": None,
        "chance": None,
        "class_order": None,
        "agreement_verdict": "failed",
        "passed": False,
        "failures": ["..."],
        "warnings": [],
    }
    return Verification.from_dict({**base, **over})


def _failed(message, v):
    """The VerificationError quantize raises for ``v``: built with the numbers it carries (issue 33: not set on it
    on the way up)."""
    from edgekit.converters.quantize import failed_measure

    measure, value, limit, interval = failed_measure(v)
    return VerificationError(message, "hint", measure=measure, value=value, limit=limit, interval=interval)


def test_a_verification_failure_carries_its_measure_value_limit_and_interval():
    v = _verification()
    assert v.agreement_verdict is Decision.FAILED and v.accuracy_verdict is None
    err = _failed("int8 disagrees", v)
    assert (err.measure, err.value, err.limit, err.interval) == ("top1_agreement", 0.7, 0.9, (0.6, 0.78))
    v = _verification(
        agreement_verdict="passed",
        accuracy_verdict="failed",
        labelled=True,
        float_top1=0.9,
        int8_top1=0.8,
        accuracy_drop=10.0,
        accuracy_drop_interval=[6.0, 14.0],
    )
    err = _failed("int8 loses accuracy", v)
    assert (err.measure, err.value, err.limit, err.interval) == ("accuracy_drop", 10.0, 1.0, (6.0, 14.0))
    assert err.exit_code == 6
    v = _verification(
        agreement_verdict="passed",
        labelled=True,
        float_top1=0.11,
        float_near_chance=True,
        chance={"chance": 0.1, "accuracy": 0.11, "interval": [0.06, 0.19], "p_value": 0.4, "near_chance": True},
    )
    err = _failed("the float model is no better than chance", v)
    assert (err.measure, err.value, err.limit) == ("float_top1", 0.11, 0.1)
    # strict=True (issue 31): an uncertain drop whose estimate is past the limit failed it: the drop is the measure
    v = _verification(
        agreement_verdict="passed",
        accuracy_verdict="uncertain",
        labelled=True,
        float_top1=0.93,
        int8_top1=0.9,
        accuracy_drop=3.0,
        accuracy_drop_interval=[0.8, 5.5],
    )
    err = _failed("cannot tell yet", v)
    assert (err.measure, err.value, err.limit, err.interval) == ("accuracy_drop", 3.0, 1.0, (0.8, 5.5))


def test_a_detector_verification_failure_carries_its_map50_drop():
    from edgekit.results.quantize import DetectionVerification

    gate = {
        "data": "coco.json",
        "images": 20,
        "objects": 40,
        "float_map50": 0.9,
        "int8_map50": 0.7,
        "drop": 0.2,
        "drop_interval": [0.1, 0.3],
        "max_drop_points": 6.0,
        "verdict": "failed",
        "resamples": 1000,
        "seed": 0,
        "scorer": "pycocotools",
        "notes": [],
    }
    layout = {
        "kind": "yolo",
        "roles": {"output": 0},
        "num_classes": 2,
        "input_hw": [64, 64],
        "boxes_normalized": True,
        "scores_are_logits": False,
        "transposed": True,
        "reg_max": 16,
        "strides": [8, 16, 32],
        "letterbox": False,
        "labels": None,
        "source": [],
        "options": {},
        "pixel_scaling": None,
        "description": "yolo",
    }
    v = DetectionVerification.from_dict(
        {
            "kind": "detection",
            "samples": 20,
            "sources": {"held_back": 20},
            "conf": 0.25,
            "match_iou": 0.5,
            "float_detections": 40,
            "int8_detections": 38,
            "matched": 36,
            "min_agreement": 0.9,
            "mean_abs_diff": 0.01,
            "class_order": None,
            "layout": layout,
            "failures": ["..."],
            "warnings": [],
            "kept": 0.9,
            "kept_interval": [0.8, 0.95],
            "agreement_verdict": "passed",
            "passed": False,
            "map50": gate,
        }
    )
    err = _failed("int8 loses mAP50", v)
    assert (err.measure, err.value, err.limit, err.interval) == ("map50_drop", 0.2, 6.0, (0.1, 0.3))


# Options that only the command line has: output format, SSH details (the API takes an SshTarget as ``on``),
# --save (json.dump(result.to_dict()) in Python), and positional arguments the API takes first.
CLI_ONLY = {
    "as_json",
    "quiet",
    "port",
    "identity",
    "remote_path",
    "python",
    "known_hosts",
    "accept_new_host_key",
    "connect_timeout",
    "timeout_ssh",
    "save",
    "images",
    "model",
    "on",
}


@pytest.mark.parametrize("command", ["check", "compile", "evaluate", "benchmark", "quantize", "build", "classify"])
def test_the_api_takes_every_flag_of_its_command_with_the_same_default(command):
    import click

    from edgekit.cli.app import cli

    cmd = cli.commands[command]
    function = getattr(edgekit if command == "build" else api, command)
    params = dict(inspect.signature(function).parameters)
    if command == "build":  # quantize's keywords go on by name to QuantizeOptions: its fields' defaults are theirs
        import dataclasses

        from edgekit.converters.quantize_options import QuantizeOptions

        fields = {
            f.name: inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default)
            for f in dataclasses.fields(QuantizeOptions)
        }
        params = {**fields, **params}
    ssh = command in ("classify", "benchmark")
    for p in cmd.params:
        if p.name in CLI_ONLY or (ssh and p.name == "timeout") or p.name == "debug":
            continue
        name = p.name  # click's parameter name is the API's keyword (edgekit.flags declares both at once)
        assert name in params, f"edgekit.{command} lacks {name} (--{p.name})"
        default = params[name].default
        if p.required:
            assert params[name].default is inspect.Parameter.empty, f"edgekit.{command}: {name} is required"
            continue
        expected = p.get_default(click.Context(cmd), call=True)
        if expected is None or "UNSET" in repr(expected):  # click 8.2+ marks "no default" with a sentinel
            expected = False if getattr(p, "is_flag", False) else None
        assert (
            default == expected
            or (default != default and expected != expected)
            or (isinstance(expected, float) and default == expected)
        ), f"{command} {name}: {default!r} != {expected!r}"


def test_records_are_plain_frozen_dataclasses():
    assert issubclass(CheckResult, Record)
    c = Class(3, 0.5, "x")
    assert c.to_dict() == {"id": 3, "score": 0.5, "label": "x"} and Class.from_dict(c.to_dict()) == c


@pytest.mark.tf
@pytest.mark.slow
def test_quantize_build_and_evaluate_return_typed_results_that_round_trip(digits_keras, digits_folders, tmp_path):
    from edgekit.results import BuildResult, EvaluateResult, QuantizeResult

    q = edgekit.quantize(
        digits_keras.path, output=tmp_path / "d_int8.tflite", calib=str(digits_folders.train), samples=64, holdout=32
    )
    assert isinstance(q, QuantizeResult) and q.output == str(tmp_path / "d_int8.tflite")
    assert q.verification is not None and q.verification.passed and q.verification.agreement_verdict is not None
    assert QuantizeResult.from_dict(q.to_dict()) == q
    assert q.render_text().startswith(f"{q.output}: full-int8")
    ev = edgekit.evaluate(q.output, digits_folders.test, device="cpu")
    assert isinstance(ev, EvaluateResult) and ev.samples > 0 and ev.top1 > 0.5 and ev.reference is None
    assert EvaluateResult.from_dict(ev.to_dict()) == ev
    assert "int8 top-1" in ev.render_text()
    b = edgekit.build(
        digits_keras.path,
        output=tmp_path / "bundle",
        calib=str(digits_folders.train),
        samples=64,
        holdout=32,
        no_compile=True,
    )
    assert isinstance(b, BuildResult) and b.manifest.models.edgetpu is None
    assert BuildResult.from_dict(b.to_dict()) == b and "Run it: edgekit classify" in b.render_text()
    with edgekit.open(b.bundle) as model:  # the bundle opens and classifies with its recorded preprocessing
        image = sorted((digits_folders.test / "3").iterdir())[0]
        assert model.classify(image, top_k=1)[0].label is not None


def test_edgekit_build_is_a_plain_function_and_its_module_is_a_plain_module():
    """Issue 33: ``edgekit.build`` (and ``from edgekit import build``) is the API's function, with its signature;
    edgekit/pipeline/build.py is an ordinary module that no longer turns itself into a callable."""
    import types

    from edgekit import build
    from edgekit.pipeline import build as build_module

    assert isinstance(build, types.FunctionType) and build is edgekit.build is build_module.build_bundle
    assert type(build_module) is types.ModuleType and not callable(build_module)
    assert inspect.signature(build).parameters["output"].kind is inspect.Parameter.KEYWORD_ONLY
    with pytest.raises(TypeError):  # the API's signature: output is a required keyword
        edgekit.build("model.keras")


# ------------------------------------------------------------------ what is no image, or no path (issue 31)
DETECTOR = "detection/ppe_yolov8n_full_integer_quant.tflite"


def _not_images():
    from PIL import Image

    return [
        (None, UsageError, "expected a file path, a PIL image or an HxWxC uint8 array, got None"),
        ([[1, 2], [3, 4]], UsageError, "got a list"),
        (7, UsageError, "got int 7"),
        (
            np.zeros((64, 64, 3), np.float32),
            InputError,
            "a 64x64x3 float32 array (values 0..0): a float frame does not "
            "say its range (say it: scale=255 for pixels in 0..1",
        ),
        (np.zeros((64, 64, 3), np.int64), InputError, "a 64x64x3 int64 array"),
        (np.zeros((1, 64, 64, 3), np.uint8), InputError, "a 1x64x64x3 uint8 array is not one image"),
        (np.zeros((64, 64, 2), np.uint8), InputError, "a 64x64x2 uint8 array is not one image"),
        (np.zeros((0, 0, 3), np.uint8), InputError, "a 0x0x3 uint8 array is an empty image"),
        (np.zeros((0, 5), np.uint8), InputError, "a 0x5 uint8 array is an empty image"),
        (np.zeros((64, 64, 1), np.uint8), InputError, "a 64x64x1 uint8 array is grayscale; the model takes RGB"),
        (np.zeros((64, 64), np.uint8), InputError, "a 64x64 uint8 array is grayscale; the model takes RGB"),
        (Image.new("RGB", (0, 0)), InputError, "the image is empty (0x0 pixels)"),
    ]


def test_model_classify_and_detect_refuse_what_they_cannot_use_naming_it():
    """HxWx1, float, 4-D, empty arrays and None were TypeError/AttributeError/ZeroDivisionError (or, for classify on
    a 0x0 image, an answer): now the EdgekitError that names what was passed (its shape and dtype)."""
    import re

    with (
        edgekit.open(shared_file(MODEL), device="cpu") as classifier,
        edgekit.open(shared_file(DETECTOR), device="cpu") as detector,
    ):
        for image, error, message in _not_images():
            for call in (classifier.classify, detector.detect, classifier.input_tensor):
                with pytest.raises(error, match=re.escape(message)):
                    call(image)
        rgba = np.zeros((64, 64, 4), np.uint8)  # taken as a PNG's pixels are: alpha dropped
        assert classifier.classify(rgba) == classifier.classify(rgba[..., :3])


def test_a_one_channel_model_takes_a_grayscale_array_hxw_or_hxwx1():
    from PIL import Image

    nine = shared_file("mnist_nine.bmp")
    with edgekit.open(shared_file("keras_lstm_mnist_ptq.tflite"), device="cpu") as model:
        assert model.preprocess.channels == "L"
        gray = np.asarray(Image.open(nine).convert("L"))
        tensor = model.input_tensor(nine)  # (the LSTM keeps state between runs: compare what goes in)
        assert np.array_equal(model.input_tensor(gray), tensor)
        assert np.array_equal(model.input_tensor(gray[..., None]), tensor)
        assert np.array_equal(model.input_tensor(np.asarray(Image.open(nine).convert("RGB"))), tensor)  # as a file
        assert model.classify(gray[..., None], top_k=1)[0].id == 9


def test_a_path_or_count_keyword_refuses_what_is_none_naming_it():
    """None for a path was a TypeError deep inside; an int was opened as a file descriptor (labels=3); one path for
    a list of them was read letter by letter; max_det=True was 1."""
    model = shared_file(MODEL)
    with pytest.raises(UsageError, match=r"^model: expected a path \(str or os.PathLike\), got None"):
        edgekit.open(None)
    with pytest.raises(UsageError, match="labels: expected a path .*got int 3"):
        edgekit.open(model, device="cpu", labels=3)
    for call in (edgekit.check, edgekit.inspect, edgekit.benchmark, edgekit.cut):
        with pytest.raises(UsageError, match="^model: expected a path"):
            call(None)
    with pytest.raises(UsageError, match="^data: expected a path"):
        edgekit.evaluate(model, None)
    with pytest.raises(UsageError, match="images: expected a list of paths, got a str"):
        edgekit.classify("cat.bmp", model=model)
    with pytest.raises(UsageError, match="images: expected a list of paths, one of them is None"):
        edgekit.detect([None], model=model)
    with pytest.raises(UsageError, match="max_det: expected an integer, got bool True"):
        edgekit.detect(["a.jpg"], model=shared_file(DETECTOR), max_det=True)
    with edgekit.open(shared_file(DETECTOR), device="cpu") as detector:
        with pytest.raises(UsageError, match="max_det: expected an integer, got bool True"):
            detector.detect(np.zeros((64, 64, 3), np.uint8), max_det=True)
        with pytest.raises(UsageError, match="max_det: expected an integer, got float 2.5"):
            detector.detect(np.zeros((64, 64, 3), np.uint8), max_det=2.5)
    # a generator of paths is read once, as a list
    result = edgekit.classify((str(p) for p in [shared_file("cat.bmp")]), model=model, device="cpu", top_k=1)
    assert result.results[0].top[0].id == 283


# ------------------------------------------- the API's frames: channel order, float, batch, timing (issue 35)
def _cat_rgb():
    from PIL import Image

    return np.asarray(Image.open(shared_file("cat.bmp")).convert("RGB"))


@pytest.fixture(scope="module")
def classifier():
    with edgekit.open(shared_file(MODEL), device="cpu", labels=shared_file("imagenet_labels.txt")) as model:
        yield model


def test_channels_bgr_takes_an_opencv_frame_and_rgb_is_the_default(classifier):
    """OpenCV hands BGR; the API took every array as RGB without a word (a cat became a mop): channels= says it."""
    rgb = _cat_rgb()
    bgr = np.ascontiguousarray(rgb[..., ::-1])  # what cv2.imread gives
    expected = classifier.input_tensor(rgb)
    assert np.array_equal(classifier.input_tensor(bgr, channels="BGR"), expected)
    assert classifier.classify(bgr, top_k=3, channels="BGR") == classifier.classify(rgb, top_k=3)
    assert classifier.classify(rgb, top_k=3, channels="rgb") == classifier.classify(rgb, top_k=3)
    assert not np.array_equal(classifier.input_tensor(bgr), expected)  # the default is RGB, never a guess
    assert classifier.classify(bgr, top_k=1)[0].id != 283
    bgra = np.dstack([bgr, np.full(rgb.shape[:2], 255, np.uint8)])
    assert np.array_equal(classifier.input_tensor(bgra, channels="BGR"), expected)
    assert inspect.signature(api.Model.classify).parameters["channels"].default == "RGB"
    assert inspect.signature(api.Model.detect).parameters["channels"].default == "RGB"
    for wrong in ("BRG", None, 3, "RGBA"):
        with pytest.raises(UsageError, match="^channels: expected 'RGB' or 'BGR'"):
            classifier.classify(rgb, channels=wrong)


def test_a_float_frame_is_taken_with_its_range_said_and_refused_without(classifier):
    """A float32 frame was refused outright (before: PIL's TypeError): with scale= it is pixels, never a guess."""
    rgb = _cat_rgb()
    expected = classifier.input_tensor(rgb)
    assert np.array_equal(classifier.input_tensor(rgb.astype(np.float32) / 255, scale=255), expected)
    assert np.array_equal(classifier.input_tensor(rgb.astype(np.float64), scale=1), expected)
    assert np.array_equal(classifier.input_tensor(rgb[..., ::-1] / 255, channels="BGR", scale=255), expected)
    assert classifier.classify(rgb / 255.0, top_k=3, scale=255) == classifier.classify(rgb, top_k=3)
    with pytest.raises(
        InputError,
        match=r"float64 array \(values 0.0\d+\.\.1\): a float frame does not say its "
        r"range \(say it: scale=255 for pixels in 0..1, scale=1",
    ):
        classifier.classify(rgb / 255.0)
    normalized = (rgb.astype(np.float32) - 127.5) / 58.0  # mean/std already applied: not pixels
    with pytest.raises(InputError, match=r"times scale=1 spans -2.\d+\.\.2.\d+, not pixels in 0..255"):
        classifier.classify(normalized, scale=1)
    with pytest.raises(InputError, match="times scale=255 spans 510..65025"):
        classifier.classify(rgb.astype(np.float32), scale=255)  # 0..255 said to be 0..1
    with pytest.raises(InputError, match="holds NaN or infinite values"):
        classifier.classify(np.full((8, 8, 3), np.nan, np.float32), scale=255)
    with pytest.raises(UsageError, match="scale=255 is for float arrays; a 341x512x3 uint8 array"):
        classifier.classify(rgb, scale=255)
    with pytest.raises(UsageError, match="scale=255 is for float arrays"):
        classifier.classify(shared_file("cat.bmp"), scale=255)
    for wrong in ("255", True, 0, -1.0, float("nan")):  # a string is refused, never read character by character
        with pytest.raises(UsageError, match="^scale: expected a positive number"):
            classifier.classify(rgb / 255.0, scale=wrong)


def test_classify_batch_answers_each_frame_in_order_and_names_a_bad_frames_index(classifier, monkeypatch):
    rgb = _cat_rgb()
    path = shared_file("grace_hopper.bmp")
    one = [classifier.classify(rgb, top_k=2), classifier.classify(path, top_k=2)]
    assert classifier.classify_batch([rgb, path], top_k=2) == one
    assert classifier.classify_batch((f for f in [rgb, path]), top_k=2) == one  # any iterable, read once
    assert classifier.classify_batch(np.stack([rgb, rgb[..., ::-1]]), top_k=2, channels="BGR") == [
        classifier.classify(rgb[..., ::-1], top_k=2),
        one[0],
    ]  # an NxHxWx3 array: its frames, BGR
    assert classifier.classify_batch([rgb / 255.0], top_k=2, scale=255) == one[:1]
    assert classifier.classify_batch([]) == []
    with pytest.raises(UsageError, match="got a list .*several: model.classify_batch / detect_batch"):
        classifier.classify([rgb, rgb])
    runs = []
    monkeypatch.setattr(classifier, "_call", lambda *a: runs.append(a))
    with pytest.raises(InputError, match=r"^frame 2: a 8x8x3 float32 array \(values 0\.\.0\)"):
        classifier.classify_batch([rgb, rgb, np.zeros((8, 8, 3), np.float32)])
    assert runs == []  # every frame is checked before any runs
    for frames, what in ((rgb, "a 341x512x3 array"), (str(path), "a str"), (None, "None")):
        with pytest.raises(UsageError, match=f"^frames: expected a list of images or an NxHxWxC array, got {what}"):
            classifier.classify_batch(frames)


def test_time_given_an_image_times_the_whole_classify_call_by_part(classifier):
    """model.time() timed invoke alone: given an image, the whole call, preprocessing and post-processing too."""
    from edgekit.results import CallTiming, Timing

    timing = classifier.time(4, 1, image=shared_file("cat.bmp"), top_k=1)
    assert isinstance(timing, CallTiming) and timing.call == "classify"
    for part in (timing.preprocess, timing.invoke, timing.postprocess, timing.total):
        assert isinstance(part, Timing) and part.count == 4 and part.min_ms >= 0
    for pre, inv, post, total in zip(
        timing.preprocess.latencies_ms,
        timing.invoke.latencies_ms,
        timing.postprocess.latencies_ms,
        timing.total.latencies_ms,
    ):
        assert pre > 0 and inv > 0 and post >= 0 and pre + inv + post == pytest.approx(total)
    assert timing.preprocess.p50_ms > 0.1  # decoding and resizing a 512x341 BMP: not nothing
    assert CallTiming.from_dict(timing.to_dict()) == timing and "preprocess: p50" in timing.render_text()
    bgr = np.ascontiguousarray(_cat_rgb()[..., ::-1])
    assert classifier.time(2, 0, image=bgr, channels="BGR").total.count == 2
    assert isinstance(classifier.time(2, 0), Timing)  # without an image: invoke alone, as before
    with pytest.raises(UsageError, match="conf: not a keyword of classify .*classify takes top_k, threshold"):
        classifier.time(2, image=bgr, conf=0.3)
    with pytest.raises(UsageError, match="top_k: keywords of the timed call, but no image="):
        classifier.time(2, top_k=1)
    with pytest.raises(UsageError, match="scale=255 is for float arrays"):
        classifier.time(2, image=bgr, scale=255)


@pytest.mark.parametrize(
    "old, new",
    [
        ("DetectedBox", "BBox"),
        ("DetectedObject", "Object"),
        ("DetectLayout", "DetectionLayout"),
        ("SpecRecord", "PreprocessSpec"),
        ("CalibrationSummary", "Calibration"),
        ("BundleCheck", "CheckResult"),
        ("CompilerOutput", "CompileResult"),
        ("BundleCompile", "CompileResult"),
    ],
)
def test_a_record_name_that_went_in_issue_33_still_imports_for_a_release_with_a_warning(old, new):
    """A document's second types went; their names still import, warning which type they are now."""
    import edgekit.results as results

    with pytest.warns(DeprecationWarning, match=f"edgekit.results.{old} is now edgekit.results.{new} "):
        assert getattr(results, old) is getattr(results, new)
    assert results.PreprocessSpec(8, 8, "RGB", "bilinear", (0.0,), (1.0,)).version == 1  # SpecRecord's first field
