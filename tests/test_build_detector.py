"""edgekit build from a detector .tflite made elsewhere (issue 35, item 4): Ultralytics' export and its compiled
twin, and the small YOLO-like detectors of tests/detection_models.py (no TensorFlow, no ../shared needed)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from edgekit.board import manifest
from edgekit.cli.app import cli
from tests.conftest import shared_file
from tests.detection_models import image_for, save_png, slice_model, with_ultralytics_metadata
from tests.test_detect import HW, N, yolo_values

YOLO = "ppe_yolov8n_full_integer_quant"


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def small_yolo(folder: Path, names=("cat", "dog"), name: str = "tiny_yolo") -> Path:
    """A YOLO [1, 4+nc, N] detector with Ultralytics' metadata (letterboxed, pixels / 255, names), as its
    TFLite exports are; its outputs are slices of its input (tests/detection_models.py)."""
    path = folder / f"{name}.tflite"
    path.write_bytes(with_ultralytics_metadata(slice_model(HW, [{"shape": [1, 4 + len(names), N]}]), names, HW))
    return path


def detected(model: Path, image: Path) -> list:
    out = invoke("detect", str(image), "-m", str(model), "--json", "-q")
    assert out.exit_code == 0, out.output
    return [(o["label"], o["bbox"]) for o in json.loads(out.stdout)["results"][0]["objects"]]


def test_build_bundles_a_detector_tflite_with_its_layout_labels_and_metadata(tmp_path):
    """Was: exit 3, "<temporary folder>/tiny_yolo.tflite: not a classifier" at the end of the build."""
    model = small_yolo(tmp_path)
    out = invoke("build", str(model), "-o", str(tmp_path / "b"), "--no-compile", "--json")
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    m = doc["manifest"]
    assert m["models"] == {"cpu": "tiny_yolo.tflite", "edgetpu": None} and m["source"]["model"] == "tiny_yolo.tflite"
    assert (tmp_path / "b" / "labels.txt").read_text() == "cat\ndog\n"  # the exporter's names
    layout = m["detection"]["layout"]
    assert layout["kind"] == "yolo" and layout["letterbox"] and layout["num_classes"] == 2
    assert m["detection"]["metadata"]["task"] == "detect" and m["detection"]["metadata"]["version"] == "8.3.0"
    assert m["preprocess"]["mean"] == [0.0] and m["preprocess"]["std"] == [255.0]  # pixels / 255, from metadata
    manifest.load(tmp_path / "b").verify_all()
    text = invoke("build", str(model), "-o", str(tmp_path / "b"), "--no-compile")
    assert text.exit_code == 0 and f"Run it: edgekit detect IMAGES -m {tmp_path / 'b'}" in text.stdout
    image = save_png(tmp_path / "i.png", image_for(HW, [yolo_values()], input_scale=1 / 128, input_zp=-128))
    assert detected(tmp_path / "b", image) == detected(model, image) != []


def test_build_labels_flag_names_a_detectors_classes(tmp_path):
    model = small_yolo(tmp_path)
    labels = tmp_path / "names.txt"
    labels.write_text("kitten\npuppy\n")
    out = invoke("build", str(model), "-o", str(tmp_path / "b"), "--no-compile", "--labels", str(labels), "--json")
    assert out.exit_code == 0, out.output
    assert (tmp_path / "b" / "labels.txt").read_text() == "kitten\npuppy\n"


def test_a_build_error_names_the_users_file_never_the_work_folder(tmp_path):
    """A model whose outputs fit no detector layout and are no classifier's: one line naming the file given."""
    model = tmp_path / "odd.tflite"
    model.write_bytes(slice_model(HW, [{"shape": [1, 7, 5]}, {"shape": [1, 3, 3]}]))
    out = invoke("build", str(model), "-o", str(tmp_path / "b"), "--no-compile")
    assert out.exit_code == 3, out.output
    assert f"{model}:" in out.stderr and ".work" not in out.stderr and "Traceback" not in out.output
    assert not (tmp_path / "b").exists() and [p.name for p in tmp_path.iterdir()] == ["odd.tflite"]


def test_build_takes_the_real_ultralytics_export_with_its_compiled_twin(tmp_path):
    """Ultralytics' format=edgetpu writes x_full_integer_quant.tflite and its compiled x_..._edgetpu.tflite side
    by side: the bundle holds both as they are, the names and letterbox from its metadata."""
    cpu = shared_file(f"detection/{YOLO}.tflite")
    tpu = shared_file(f"detection/{YOLO}_edgetpu.tflite")
    out = invoke("build", str(cpu), "-o", str(tmp_path / "b"), "--json")
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    m = doc["manifest"]
    assert m["models"] == {"cpu": f"{YOLO}.tflite", "edgetpu": f"{YOLO}_edgetpu.tflite"}
    assert (tmp_path / "b" / f"{YOLO}_edgetpu.tflite").read_bytes() == tpu.read_bytes()
    assert (
        any(n.startswith(f"took {YOLO}_edgetpu.tflite beside") for n in doc["notes"])
        or f"took {YOLO}_edgetpu.tflite beside" in out.stderr
    )
    assert (tmp_path / "b" / "labels.txt").read_text().split() == ["bota", "capacete", "oculos", "pessoa"]
    assert m["detection"]["layout"]["letterbox"] and m["detection"]["metadata"]["version"] == "8.3.169"
    assert m["input"]["shape"] == [1, 640, 640, 3] and m["preprocess"]["std"] == [255.0]
    image = shared_file("grace_hopper.bmp")
    assert detected(tmp_path / "b", image) == detected(cpu, image)


def test_a_twin_that_is_not_the_models_compiled_one_is_not_taken(tmp_path):
    model = small_yolo(tmp_path)
    shutil.copy(shared_file("mobilenet_v1_0.25_128_quant_edgetpu.tflite"), tmp_path / "tiny_yolo_edgetpu.tflite")
    out = invoke("build", str(model), "-o", str(tmp_path / "b"))
    assert out.exit_code == 0, out.output
    assert (
        "tiny_yolo_edgetpu.tflite beside tiny_yolo.tflite is not taken as its compiled model: its inputs and "
        "outputs differ" in out.stderr
    )
    assert "tiny_yolo_edgetpu.tflite" not in {
        e["path"] for e in json.loads((tmp_path / "b" / "manifest.json").read_text())["files"]
    }


def test_a_float_ultralytics_export_is_refused_with_what_to_do_in_ultralytics(tmp_path):
    """Was: 'quantize the Keras model instead: edgekit build model.keras ...' for an Ultralytics export that is not
    int8 inside, which has no Keras model. (A float-I/O int8 export, QUANTIZE and DEQUANTIZE only at its edges, is
    built: tests/test_exports_runtime.py.)"""
    import numpy as np

    from tests.tflite_builder import GraphBuilder

    g = GraphBuilder()
    x = g.tensor([1, 16, 16, 3], "float32", scale=None, name="serving_default_images:0")
    w = g.tensor([4, 3, 3, 3], "float32", data=np.ones((4, 3, 3, 3)), scale=None)
    b = g.tensor([4], "float32", data=np.zeros(4), scale=None)
    y = g.tensor([1, 16, 16, 4], "float32", scale=None, name="Identity")
    g.op("CONV_2D", [x, w, b], [y], version=1, padding=0, stride_w=1, stride_h=1)
    model = tmp_path / "yolo11n_float32.tflite"
    model.write_bytes(with_ultralytics_metadata(g.build([x], [y]), ["person"], (16, 16)))
    out = invoke("build", str(model), "-o", str(tmp_path / "b"))
    assert out.exit_code == 3 and f"error: {model} is not a full-int8 model" in out.stderr, out.stderr
    assert "format=edgetpu" in out.stderr and "model.keras" not in out.stderr
    assert not (tmp_path / "b").exists()


def test_a_detector_only_layout_settles_is_bundled_with_layout(tmp_path):
    """Two [1, N, 64] outputs: DFL bins beside 64 classes, which is which only --layout settles: refused without
    it (naming the file given and --layout), bundled with it, the layout chosen in the manifest."""
    model = tmp_path / "two64.tflite"
    model.write_bytes(slice_model(HW, [{"shape": [1, N, 64]}, {"shape": [1, N, 64]}], input_scale=0.1, input_zp=0))
    refused = invoke("build", str(model), "-o", str(tmp_path / "b"), "--no-compile")
    assert refused.exit_code == 3 and f"error: {model}:" in refused.stderr, refused.output
    assert "--layout split-dfl" in refused.stderr and ".work" not in refused.stderr
    out = invoke("build", str(model), "-o", str(tmp_path / "b"), "--no-compile", "--layout", "split-dfl", "--json")
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["manifest"]["detection"]["layout"]["kind"] == "split-dfl"
