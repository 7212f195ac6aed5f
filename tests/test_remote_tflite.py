"""deploy, detect --on and benchmark --on given a .tflite rather than a bundle (issue 35, item 4): the model is
bundled on the fly in a temporary folder, as edgekit build would, and said in a note. Through the real sshd of
tests/test_remote.py (its board Python: .venv-py37 where it exists, else this run's)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import shared_file
from tests.detection_models import image_for, save_png, slice_model
from tests.test_build_detector import YOLO, small_yolo
from tests.test_detect import HW, yolo_values
from tests.test_remote import _no_agent, invoke, ssh_args, sshd  # noqa: F401  (fixtures)

pytestmark = pytest.mark.remote
ON_THE_FLY = "is a model, not a bundle: bundled on the fly in a temporary folder"


def _objects(result) -> list:
    assert result.exit_code == 0, result.output
    return [(o["label"], o["bbox"]) for o in json.loads(result.stdout)["results"][0]["objects"]]


def test_detect_on_takes_a_detector_tflite(sshd, tmp_path):
    """Was: exit 3, "<model>.tflite: no such bundle folder": --on needed a bundle."""
    model = small_yolo(tmp_path)
    image = str(save_png(tmp_path / "i.png", image_for(HW, [yolo_values()])))
    board = ssh_args(sshd, tmp_path / "board" / "edgekit")
    theirs = invoke("detect", image, "--on", sshd.destination, "-m", str(model), *board, "--json")
    assert _objects(theirs) == _objects(invoke("detect", image, "-m", str(model), "--json", "-q")) != []
    assert f"{model} {ON_THE_FLY}" in theirs.stderr and "edgekit-bundle-" not in theirs.output
    assert (
        tmp_path / "board" / "edgekit" / "bundles" / "tiny_yolo" / "tiny_yolo.tflite"
    ).read_bytes() == model.read_bytes()
    labels = tmp_path / "names.txt"
    labels.write_text("kitten\npuppy\n")  # --labels goes into the bundle made of a .tflite
    named = invoke(
        "detect", image, "--on", sshd.destination, "-m", str(model), "--labels", str(labels), *board, "--json", "-q"
    )
    assert {label for label, _ in _objects(named)} <= {"kitten", "puppy"} and _objects(named)


def test_deploy_and_benchmark_on_take_a_tflite_with_its_compiled_twin(sshd, tmp_path):
    """Ultralytics' real YOLOv8n export: its compiled twin beside it goes to the board with it."""
    cpu = shared_file(f"detection/{YOLO}.tflite")
    shared_file(f"detection/{YOLO}_edgetpu.tflite")
    board = ssh_args(sshd, tmp_path / "board" / "edgekit")
    deployed = invoke("deploy", str(cpu), "--to", sshd.destination, *board, "--json")
    assert deployed.exit_code == 0, deployed.output
    doc = json.loads(deployed.stdout)
    assert doc["bundle"].endswith(f"/bundles/{YOLO}") and f"{cpu} {ON_THE_FLY}" in deployed.stderr
    there = tmp_path / "board" / "edgekit" / "bundles" / YOLO
    assert json.loads((there / "manifest.json").read_text())["models"]["edgetpu"] == f"{YOLO}_edgetpu.tflite"
    timed = invoke("benchmark", "--on", sshd.destination, "-m", str(cpu), "-n", "2", "--warmup", "1", *board, "--json")
    assert timed.exit_code == 0, timed.output
    assert json.loads(timed.stdout)["model"].endswith(f"/bundles/{YOLO}/{YOLO}.tflite")


def test_a_tflite_that_cannot_be_bundled_is_named_as_given_before_connecting(sshd, tmp_path):
    model = tmp_path / "odd.tflite"
    model.write_bytes(slice_model(HW, [{"shape": [1, 7, 5]}, {"shape": [1, 3, 3]}]))
    image = str(save_png(tmp_path / "i.png", image_for(HW, [])))
    result = invoke(
        "detect", image, "--on", sshd.destination, "-m", str(model), *ssh_args(sshd, tmp_path / "board" / "edgekit")
    )
    assert result.exit_code == 3 and f"error: {model}:" in result.stderr, result.output
    assert "edgekit-bundle-" not in result.output and not (tmp_path / "board").exists()


def test_detect_on_layout_settles_a_tflite_bundled_on_the_fly(sshd, tmp_path):
    """A model only --layout reads: the bundle made of it takes the --layout given to detect --on."""
    model = tmp_path / "two64.tflite"
    model.write_bytes(slice_model(HW, [{"shape": [1, 21, 64]}, {"shape": [1, 21, 64]}], input_scale=0.1, input_zp=0))
    image = str(save_png(tmp_path / "i.png", image_for(HW, [], input_scale=0.1, input_zp=0)))
    board = ssh_args(sshd, tmp_path / "board" / "edgekit")
    refused = invoke("detect", image, "--on", sshd.destination, "-m", str(model), *board)
    assert refused.exit_code == 3 and "--layout split-dfl" in refused.stderr, refused.output
    done = invoke(
        "detect", image, "--on", sshd.destination, "-m", str(model), "--layout", "split-dfl", *board, "--json"
    )
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["layout"]["kind"] == "split-dfl"
