"""edgekit evaluate's runtime half on a real Coral model, without TensorFlow (runs under tflite-runtime too)."""

from __future__ import annotations

import importlib.util
import json
import shutil

import numpy as np
import pytest
from click.testing import CliRunner

from edgekit.cli.app import cli
from tests.conftest import shared_file


def test_class_folders_named_as_the_labels_are_matched_by_name(tmp_path):
    model = shared_file("mobilenet_v1_0.25_128_quant.tflite")
    labels = shared_file("imagenet_labels.txt")
    # Egyptian cat (286) holds the cat, military uniform (653) Grace Hopper: not sorted ids, matched by name
    for folder, image in (("Egyptian cat", "cat.bmp"), ("military uniform", "grace_hopper.bmp")):
        (tmp_path / "data" / folder).mkdir(parents=True)
        shutil.copy(shared_file(image), tmp_path / "data" / folder / image)
    result = CliRunner().invoke(
        cli,
        [
            "evaluate",
            "-m",
            str(model),
            "--data",
            str(tmp_path / "data"),
            "-l",
            str(labels),
            "--device",
            "cpu",
            "--threads",
            "1",
            "--json",
            "--quiet",
        ],
    )
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
    result = CliRunner().invoke(
        cli, ["evaluate", "-m", str(model), "--data", str(tmp_path / "cat.npz"), "--json", "--device", "cpu"]
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["device"] == "cpu" and doc["model"].endswith("mobilenet_v1_0.25_128_quant.tflite")
    assert "mobilenet_v1_0.25_128_quant.tflite" in result.stderr  # the note names the CPU model that ran


def test_evaluate_text_has_a_per_class_table_worst_first_and_bounded(tmp_path):
    """Was: the text gave top-1 and top-5 only; per class was in --json alone."""
    from edgekit.board.preprocess import PreprocessSpec
    from edgekit.devices.evaluate import PER_CLASS_ROWS, Evaluation

    classes, per = 14, 5
    labels = np.repeat(np.arange(classes), per)
    scores = np.eye(classes, dtype=np.float32)[labels]
    scores[labels == 3] = np.eye(classes, dtype=np.float32)[5]  # class 3: all read as 5 (recall 0)
    scores[np.flatnonzero(labels == 7)[:2]] = np.eye(classes, dtype=np.float32)[0]  # class 7: 3 of 5 right
    ev = Evaluation(
        "m.tflite",
        "cpu",
        "litert",
        "recorded",
        PreprocessSpec(8, 8),
        "arrays",
        scores,
        labels,
        {i: f"c{i}" for i in range(classes)},
    )
    doc = ev.result().to_dict()
    five = next(c for c in doc["per_class"] if c["id"] == 5)
    assert five["predicted"] == 10 and five["precision"] == 0.5 and five["top1"] == 1.0
    from edgekit.results import EvaluateResult

    text = EvaluateResult.from_dict(doc).render_text().splitlines()
    start = next(i for i, ln in enumerate(text) if ln.startswith("Per class, worst first"))
    assert f"({PER_CLASS_ROWS} of {classes}; all in --json)" in text[start]
    rows = text[start + 2 : start + 2 + PER_CLASS_ROWS]
    assert rows[0].split()[:3] == ["3", "c3", "0.0%"] and rows[1].split()[:3] == ["7", "c7", "60.0%"]
    assert "(" in rows[0] and " to " in rows[0]  # the interval a class's few samples allow
    assert len(text) == start + 2 + PER_CLASS_ROWS  # bounded: the rest is in --json


def _mean_classifier(dtype: str, out_scale: float = 0.25) -> bytes:
    """A classifier whose class is the image's brightest channel (MEAN over height and width): float32, or uint8
    whose outputs are requantized in quarters, so that a green barely above red ties with it (class 0 wins)."""
    from tests.tflite_builder import GraphBuilder

    g = GraphBuilder()
    if dtype == "float32":
        x = g.tensor([1, 8, 8, 3], "float32", scale=None, name="image")
        y = g.tensor([1, 3], "float32", scale=None, name="scores")
    else:
        x = g.tensor([1, 8, 8, 3], "uint8", scale=1 / 255, zero_point=0, name="image")
        y = g.tensor([1, 3], "uint8", scale=out_scale, zero_point=0, name="scores")
    g.op("MEAN", [x, g.const([1, 2])], [y], keepDims=False)
    return g.build([x], [y])


def test_against_compares_a_float_classifier_tflite_with_its_int8_one(tmp_path):
    """issue 35: `evaluate -m int8.tflite --data folders --against float.tflite` for classifiers: the same samples
    through both, the paired change with Tango's interval, the flips and McNemar's exact test, decided against
    --max-drop (exit 6 beyond it, the result printed); the counts are the ones the colours make by hand."""
    pytest.importorskip("flatbuffers", reason="building a model uses the flatbuffers package (tests/tflite_builder.py)")
    from PIL import Image

    from edgekit.results.evaluate import EvaluateResult

    (tmp_path / "f.tflite").write_bytes(_mean_classifier("float32"))
    (tmp_path / "q.tflite").write_bytes(_mean_classifier("uint8"))
    colours = {
        "a_red": [(230, 40, 30)] * 20,
        "b_green": [(40, 230, 30)] * 12 + [(190, 200, 20)] * 8,
        "c_blue": [(30, 40, 230)] * 20,
    }  # the 8 greens barely above red: int8 reads them as red
    for folder, cs in colours.items():
        (tmp_path / "d" / folder).mkdir(parents=True)
        for i, c in enumerate(cs):
            Image.fromarray(np.full((8, 8, 3), c, np.uint8)).save(tmp_path / "d" / folder / f"{i}.png")
    args = [
        "evaluate",
        "-m",
        str(tmp_path / "q.tflite"),
        "--data",
        str(tmp_path / "d"),
        "--against",
        str(tmp_path / "f.tflite"),
        "--mean",
        "0",
        "--std",
        "255",
        "--device",
        "cpu",
        "--json",
        "-q",
    ]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    (d,) = doc["against"]
    assert (d["samples"], d["only_model"], d["only_against"]) == (60, 0, 8)
    assert d["top1"] == 52 / 60 and d["against_top1"] == 1.0 and abs(d["top1_change"] + 8 / 60) < 1e-12
    assert d["top1_interval"][0] < -8 / 60 < d["top1_interval"][1] < 0
    assert abs(d["mcnemar_p"] - 2 * 0.5**8) < 1e-12 and d["verdict"] is None
    assert EvaluateResult.from_dict(doc).to_dict() == doc
    res = CliRunner().invoke(cli, args + ["--max-drop", "2"])
    assert res.exit_code == 6 and "top-1 drops 13.3 points" in res.stderr and "--max-drop 2" in res.stderr
    assert json.loads(res.stdout)["against"][0]["verdict"]["verdict"] == "failed"
    res = CliRunner().invoke(cli, args + ["--max-drop", "40"])
    assert res.exit_code == 0 and json.loads(res.stdout)["against"][0]["verdict"]["verdict"] == "passed"
    text = CliRunner().invoke(cli, args[:-2] + ["--max-drop", "10"])
    assert text.exit_code == 0 and "top-1 86.7% against 100.0%, -13.3 points" in text.stdout
    assert (
        "uncertain at --max-drop 10: about" in text.stdout and "0 sample(s) only -m gets right, 8 only" in text.stdout
    )
    if importlib.util.find_spec("matplotlib"):  # --plots: the int8 model's confusion beside the float one's
        from edgekit.devices.plots import require

        res = CliRunner().invoke(cli, args + ["--plots", str(tmp_path / "plots")])
        assert res.exit_code == 0 and json.loads(res.stdout)["plots"] == [
            str(tmp_path / "plots" / "confusion_matrix.png")
        ]
        assert require() and Image.open(tmp_path / "plots" / "confusion_matrix.png").format == "PNG"
    own = CliRunner().invoke(cli, args[:7] + ["--device", "cpu"])  # each model's own preprocessing: they differ
    assert own.exit_code == 0 and "is preprocessed unlike" in own.stderr and "--mean/--std apply to both" in own.stderr
