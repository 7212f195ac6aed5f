"""edgekit evaluate's runtime half on a real Coral model, without TensorFlow (runs under tflite-runtime too)."""

from __future__ import annotations

import json
import shutil

import numpy as np
from click.testing import CliRunner

from edgekit.cli import cli
from tests.conftest import shared_file


def test_class_folders_named_as_the_labels_are_matched_by_name(tmp_path):
    model = shared_file("mobilenet_v1_0.25_128_quant.tflite")
    labels = shared_file("imagenet_labels.txt")
    # Egyptian cat (286) holds the cat, military uniform (653) Grace Hopper: not sorted ids, matched by name
    for folder, image in (("Egyptian cat", "cat.bmp"), ("military uniform", "grace_hopper.bmp")):
        (tmp_path / "data" / folder).mkdir(parents=True)
        shutil.copy(shared_file(image), tmp_path / "data" / folder / image)
    result = CliRunner().invoke(cli, ["evaluate", "-m", str(model), "--data", str(tmp_path / "data"), "-l",
                                      str(labels), "--device", "cpu", "--threads", "1", "--json", "--quiet"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["labels_from"] == "class folder names matched to the model's labels"
    assert doc["samples"] == 2 and doc["classes"] == 1001 and doc["reference"] is None
    # classify says: cat → 283 tiger cat / 286 Egyptian cat (tied, lower id first); Grace Hopper → 401, 668...
    assert doc["top1"] == 0.0 and doc["top5"] == 1.0
    assert [c["id"] for c in doc["per_class"]] == [286, 653]


def test_arrays_without_matching_folders_need_as_many_outputs(tmp_path):
    model = shared_file("mobilenet_v1_0.25_128_quant.tflite")
    for c in ("a", "b"):
        (tmp_path / "two" / c).mkdir(parents=True)
        shutil.copy(shared_file("cat.bmp"), tmp_path / "two" / c / "x.bmp")
    result = CliRunner().invoke(cli, ["evaluate", "-m", str(model), "--data", str(tmp_path / "two")])
    assert result.exit_code == 3 and "2 class folders for 1001 model outputs" in result.stderr
    from PIL import Image

    x = np.stack([np.asarray(Image.open(shared_file("cat.bmp")).convert("RGB").resize((128, 128)))])
    np.savez(tmp_path / "cat.npz", x=x, y=np.array([286]))
    result = CliRunner().invoke(cli, ["evaluate", "-m", str(model), "--data", str(tmp_path / "cat.npz"), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["top5"] == 1.0


def test_a_compiled_model_without_an_edge_tpu_is_evaluated_on_its_cpu_twin(tmp_path):
    model = shared_file("mobilenet_v1_0.25_128_quant_edgetpu.tflite")
    from PIL import Image

    x = np.stack([np.asarray(Image.open(shared_file("cat.bmp")).convert("RGB").resize((128, 128)))])
    np.savez(tmp_path / "cat.npz", x=x, y=np.array([286]))
    result = CliRunner().invoke(cli, ["evaluate", "-m", str(model), "--data", str(tmp_path / "cat.npz"), "--json",
                                      "--device", "cpu"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["device"] == "cpu" and doc["model"].endswith("mobilenet_v1_0.25_128_quant.tflite")
    assert "mobilenet_v1_0.25_128_quant.tflite" in result.stderr     # the note names the CPU model that ran


def test_evaluate_text_has_a_per_class_table_worst_first_and_bounded(tmp_path):
    """Was: the text gave top-1 and top-5 only; per class was in --json alone."""
    from edgekit.devices.evaluate import PER_CLASS_ROWS, Evaluation
    from edgekit.preprocess import PreprocessSpec

    classes, per = 14, 5
    labels = np.repeat(np.arange(classes), per)
    scores = np.eye(classes, dtype=np.float32)[labels]
    scores[labels == 3] = np.eye(classes, dtype=np.float32)[5]     # class 3: all read as 5 (recall 0)
    scores[np.flatnonzero(labels == 7)[:2]] = np.eye(classes, dtype=np.float32)[0]  # class 7: 3 of 5 right
    ev = Evaluation("m.tflite", "cpu", "litert", "recorded", PreprocessSpec(8, 8), "arrays", scores, labels,
                    {i: f"c{i}" for i in range(classes)})
    doc = ev.result().to_dict()
    five = next(c for c in doc["per_class"] if c["id"] == 5)
    assert five["predicted"] == 10 and five["precision"] == 0.5 and five["top1"] == 1.0
    from edgekit.results import EvaluateResult

    text = EvaluateResult.from_dict(doc).render_text().splitlines()
    start = next(i for i, ln in enumerate(text) if ln.startswith("Per class, worst first"))
    assert f"({PER_CLASS_ROWS} of {classes}; all in --json)" in text[start]
    rows = text[start + 2:start + 2 + PER_CLASS_ROWS]
    assert rows[0].split()[:3] == ["3", "c3", "0.0%"] and rows[1].split()[:3] == ["7", "c7", "60.0%"]
    assert "(" in rows[0] and " to " in rows[0]  # the interval a class's few samples allow
    assert len(text) == start + 2 + PER_CLASS_ROWS  # bounded: the rest is in --json
