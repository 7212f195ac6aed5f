"""edgekit build: Keras model → bundle (quantize → check → compile when possible), and classify from it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from edgekit.board import manifest
from edgekit.cli.app import cli
from edgekit.devices import classify as C
from edgekit.tflite.model_record import ModelRecord, sidecar_path
from tests.converters.test_edgetpu_compiler import standin  # noqa: F401  (a fixture)

pytestmark = pytest.mark.tf


def _build(args: list[str]) -> dict:
    out = CliRunner().invoke(cli, ["build", *args, "--json", "-q"])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def built(digits_keras, digits_folders, tmp_path_factory):
    """`edgekit build digits.h5 --eval test/ -o bundle/` (calibration data from the record beside the model)."""
    target = tmp_path_factory.mktemp("build") / "bundle"
    return target, _build(
        [str(digits_keras.path), "-o", str(target), "--no-compile", "--eval", str(digits_folders.test)]
    )


def test_bundle_manifest_describes_the_built_model(built, digits_keras, digits_folders):
    target, doc = built
    m = json.loads((target / "manifest.json").read_text())
    assert doc["manifest"] == m and doc["bundle"] == str(target)
    assert m["models"] == {"cpu": "digits_int8.tflite", "edgetpu": None} and m["labels"] == "labels.txt"
    record = ModelRecord.from_json(sidecar_path(digits_keras.path).read_bytes())
    assert m["preprocess"] == record.preprocess.to_dict()
    assert (target / "labels.txt").read_text().split() == record.labels
    assert m["input"] == {"shape": [1, 32, 32, 3], "dtype": "uint8", "scale": pytest.approx(1 / 255), "zero_point": 0}
    assert m["versions"]["edgekit"] and m["versions"]["tensorflow"] and m["versions"]["edgetpu_compiler"] is None
    assert m["reports"]["check"]["verdict"] == "full" and m["reports"]["compile"] is None
    acc = m["accuracy"]  # the evaluate document of the bundle's CPU model on --eval
    assert acc["model"] == "digits_int8.tflite" and acc["samples"] == len(list(digits_folders.test.rglob("*.png")))
    assert acc["top1"] >= 0.9 and acc["labels_from"]
    assert {e["path"] for e in m["files"]} == {"digits_int8.tflite", "labels.txt"}
    manifest.load(target).verify_all()
    assert not [p for p in target.parent.iterdir() if p.name.startswith(".")], "work folders left behind"


def test_classify_from_the_bundle_equals_classify_from_its_files(built, digits_folders):
    target, _ = built
    images = [str(p) for p in sorted(digits_folders.test.rglob("*.png"))[::40]]
    from_bundle = C.classify(images, target, k=3).to_dict()
    from_file = C.classify(images, target / "digits_int8.tflite", k=3, labels=target / "labels.txt").to_dict()
    assert from_bundle["results"] and not from_bundle["errors"]
    assert [r["top"] for r in from_bundle["results"]] == [r["top"] for r in from_file["results"]]
    right = sum(r["top"][0]["label"] == Path(r["image"]).parent.name for r in from_bundle["results"])
    assert right >= 0.85 * len(images)


def test_a_changed_bundle_file_is_refused_by_classify(built, tmp_path, digits_folders):
    copy = tmp_path / "copy"
    shutil.copytree(built[0], copy)
    (copy / "labels.txt").write_text("zero\n" + "\n".join(str(i) for i in range(1, 10)) + "\n")
    image = str(next(digits_folders.test.rglob("*.png")))
    out = CliRunner().invoke(cli, ["classify", image, "-m", str(copy)])
    assert out.exit_code == 3 and "labels.txt has changed since the bundle was built" in out.stderr


def test_build_refuses_an_existing_folder_that_is_not_a_bundle_before_working(digits_keras, tmp_path):
    folder = tmp_path / "photos"
    folder.mkdir()
    (folder / "keep.jpg").write_bytes(b"x")
    out = CliRunner().invoke(cli, ["build", str(digits_keras.path), "-o", str(folder)])
    assert out.exit_code == 2 and "exists and is not an edgekit bundle" in out.stderr
    assert [p.name for p in folder.iterdir()] == ["keep.jpg"]


def test_build_never_replaces_a_folder_that_is_not_exactly_a_bundle(digits_keras, built, tmp_path, monkeypatch):
    """A project folder with a web app's manifest.json and a thesis survives (it used to be deleted, rc 0)."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "manifest.json").write_text('{"name": "my web app", "start_url": "/"}')
    (project / "thesis.txt").write_text("four years of work")
    out = CliRunner().invoke(cli, ["build", str(digits_keras.path), "-o", str(project)])
    assert out.exit_code == 2 and "is not an edgekit bundle that can be replaced" in out.stderr, out.output
    assert sorted(p.name for p in project.iterdir()) == ["manifest.json", "thesis.txt"]
    # a real bundle with one file the manifest does not list: refused, the file kept
    extra = tmp_path / "extra"
    shutil.copytree(built[0], extra)
    (extra / "notes.txt").write_text("mine")
    out = CliRunner().invoke(cli, ["build", str(digits_keras.path), "-o", str(extra)])
    assert out.exit_code == 2 and "does not list (notes.txt)" in out.stderr, out.output
    assert (extra / "notes.txt").read_text() == "mine"
    # `-o .` inside a bundle, before any work: refused (it failed with "Device or resource busy" after it)
    copy = tmp_path / "copy"
    shutil.copytree(built[0], copy)
    monkeypatch.chdir(copy)
    out = CliRunner().invoke(cli, ["build", str(digits_keras.path), "-o", "."])
    assert out.exit_code == 2 and "the folder you are in" in out.stderr, out.output


def test_build_replaces_a_previous_bundle_and_takes_an_empty_folder(digits_keras, built, tmp_path):
    previous = tmp_path / "previous"
    shutil.copytree(built[0], previous)
    empty = tmp_path / "empty"
    empty.mkdir()
    for target in (previous, empty):
        doc = _build([str(digits_keras.path), "-o", str(target), "--no-compile", "--samples", "60", "--no-verify"])
        assert doc["bundle"] == str(target)
        manifest.load(target).verify_all()


def test_a_weights_only_h5_with_arch_builds(digits_keras, digits_folders, tmp_path):
    """The Cloud TPU pattern: weights saved apart from the code that builds the model."""
    weights = tmp_path / "digits.weights.h5"
    digits_keras.model.save_weights(weights)
    (tmp_path / "model_def.py").write_text(
        "from edgekit.training.digits import build_cnn\n\ndef create_model():\n    return build_cnn()\n"
    )
    doc = _build(
        [
            str(weights),
            "--arch",
            f"{tmp_path / 'model_def.py'}:create_model",
            "--calib",
            str(digits_folders.train),
            "--scaling",
            "0..1",
            "-o",
            str(tmp_path / "bundle"),
            "--no-compile",
        ]
    )
    assert doc["quantize"]["source"]["format"] == "weights+arch"
    assert doc["quantize"]["verification"]["passed"] and doc["quantize"]["verification"]["float_top1"] > 0.9
    manifest.load(tmp_path / "bundle").verify_all()


def test_a_build_that_fails_verification_names_build_flags_and_leaves_nothing(digits_keras, digits_folders, tmp_path):
    swapped = tmp_path / "swapped"
    shutil.copytree(digits_folders.train, swapped)
    (swapped / "1").rename(swapped / "tmp")
    (swapped / "2").rename(swapped / "1")
    (swapped / "tmp").rename(swapped / "2")
    out = CliRunner().invoke(
        cli, ["build", str(digits_keras.path), "--calib", str(swapped), "-o", str(tmp_path / "bundle")]
    )
    assert out.exit_code == 6, out.output
    line = [ln for ln in out.stderr.splitlines() if ln.startswith("error: ")][0]
    assert "no bundle was written" in line and "output kept" not in line
    assert not (tmp_path / "bundle").exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_build_eval_errors_name_eval(digits_keras, tmp_path):
    flat = tmp_path / "flat"
    flat.mkdir()
    (flat / "a.png").write_bytes(b"not read")
    out = CliRunner().invoke(cli, ["build", str(digits_keras.path), "--eval", str(flat), "-o", str(tmp_path / "b")])
    assert out.exit_code == 3 and "error: --eval " in out.stderr and "--data" not in out.stderr, out.output


def test_a_failed_build_leaves_nothing(digits_keras, tmp_path):
    out = CliRunner().invoke(
        cli, ["build", str(digits_keras.path), "--calib", str(tmp_path / "none"), "-o", str(tmp_path / "bundle")]
    )
    assert out.exit_code == 3, out.output
    assert list(tmp_path.iterdir()) == []


def test_build_with_a_compiler_adds_the_compiled_model_and_its_report(standin, digits_keras, tmp_path):
    """STAND-IN compiler (it copies the model; compiles nothing): tests only how build packs its output."""
    standin()  # a v16 success in the real format, naming this model; it maps nothing (no real compile)
    doc = _build([str(digits_keras.path), "-o", str(tmp_path / "bundle")])
    m = doc["manifest"]
    assert m["models"] == {"cpu": "digits_int8.tflite", "edgetpu": "digits_int8_edgetpu.tflite"}
    assert m["reports"]["compile"]["succeeded"] is True and m["versions"]["edgetpu_compiler"]
    assert m["reports"]["compile"]["input_model"] == "digits_int8.tflite"  # no other model's report
    assert {e["path"] for e in m["files"]} == {"digits_int8.tflite", "digits_int8_edgetpu.tflite", "labels.txt"}
    assert m["accuracy"] is None  # no --eval
    manifest.load(tmp_path / "bundle").verify_all()


def _strings(doc):
    if isinstance(doc, dict):
        for v in doc.values():
            yield from _strings(v)
    elif isinstance(doc, list):
        for v in doc:
            yield from _strings(v)
    elif isinstance(doc, str):
        yield doc


def test_the_manifest_never_names_the_work_folder_it_was_made_in(built, standin, digits_keras, tmp_path):
    """Was: reports.check.model = ".bundle.xxxx.work/digits_int8.tflite" (a folder deleted at the end)."""
    target, doc = built
    assert doc["manifest"]["reports"]["check"]["model"] == "digits_int8.tflite"
    assert doc["manifest"]["source"] == {"model": "digits.h5", "format": "h5", "output": None}
    assert doc["quantize"]["output"] == str(target / "digits_int8.tflite") and doc["quantize"]["record"] is None
    standin()  # compile reports name models and commands too
    compiled = _build([str(digits_keras.path), "-o", str(tmp_path / "bundle"), "--samples", "60", "--no-verify"])
    for d in (doc, compiled):
        assert not [s for s in _strings(d) if ".work" in s], [s for s in _strings(d) if ".work" in s]


def test_build_from_an_existing_int8_tflite_checks_evaluates_and_bundles_it(built, digits_folders, tmp_path):
    """Was: "is already a TFLite model" (exit 3): build could only start from a Keras model."""
    target, first = built
    given = tmp_path / "mine.tflite"
    shutil.copy(target / "digits_int8.tflite", given)
    doc = _build([str(given), "-o", str(tmp_path / "b"), "--eval", str(digits_folders.test)])
    m = doc["manifest"]
    assert m["models"] == {"cpu": "mine.tflite", "edgetpu": None} and m["source"]["format"] == "tflite"
    assert m["preprocess"] == first["manifest"]["preprocess"] and m["labels"] == "labels.txt"  # from its record
    assert m["accuracy"]["top1"] == first["manifest"]["accuracy"]["top1"]  # the same model, the same data
    assert m["reports"]["check"]["verdict"] == "full" and doc["quantize"] is None
    assert m["versions"]["tensorflow"] is None
    manifest.load(tmp_path / "b").verify_all()
    refused = CliRunner().invoke(
        cli, ["build", str(given), "-o", str(tmp_path / "c"), "--calib", str(digits_folders.train)]
    )
    assert refused.exit_code == 2 and "--calib: for a Keras model" in refused.stderr
    assert not (tmp_path / "c").exists()


def test_build_from_a_compiled_model_bundles_it_with_its_cpu_twin(testdata, tmp_path):
    """Coral's own pair: x_edgetpu.tflite with x.tflite beside it; the compiled model is kept as it is."""
    doc = _build(
        [
            str(testdata / "mobilenet_v1_0.25_128_quant_edgetpu.tflite"),
            "--labels",
            str(testdata / "imagenet_labels.txt"),
            "-o",
            str(tmp_path / "b"),
        ]
    )
    m = doc["manifest"]
    assert m["models"] == {
        "cpu": "mobilenet_v1_0.25_128_quant.tflite",
        "edgetpu": "mobilenet_v1_0.25_128_quant_edgetpu.tflite",
    }
    assert (tmp_path / "b" / m["models"]["edgetpu"]).read_bytes() == (
        testdata / "mobilenet_v1_0.25_128_quant_edgetpu.tflite"
    ).read_bytes()
    assert any("not compiled again" in n for n in doc["notes"])
    result = C.classify([str(testdata / "cat.bmp")], tmp_path / "b", k=3, device="cpu").to_dict()
    assert any("cat" in t["label"] for t in result["results"][0]["top"])
    shutil.copy(testdata / "mobilenet_v1_0.25_128_quant_edgetpu.tflite", tmp_path / "lone_edgetpu.tflite")
    lone = CliRunner().invoke(cli, ["build", str(tmp_path / "lone_edgetpu.tflite"), "-o", str(tmp_path / "c")])
    assert lone.exit_code == 3 and "its CPU model lone.tflite is not beside it" in lone.stderr


def test_a_detector_bundles_accuracy_is_shown_in_its_text():
    """build's text for a detector built with --eval: the manifest's accuracy is a DetectorAccuracy (records, read
    by attribute), its mAP line and the detect command to run."""
    from edgekit.board.preprocess import PreprocessSpec
    from edgekit.results.build import (
        BuildResult,
        BundleInput,
        BundleManifest,
        BundleModels,
        BundleReports,
        BundleVersions,
        DetectorAccuracy,
    )
    from edgekit.results.evaluate import DetectionProtocol, DetectorScore

    score = DetectorScore(
        "det.tflite", "cpu", "ai_edge_litert", "yolo", 0.25, 0.5, None, None, None, None, (), 12, 1.0, 0.5, ()
    )
    accuracy = DetectorAccuracy(
        "detection",
        "coco.json",
        "coco",
        4,
        9,
        DetectionProtocol(0.001, 0.7, 100, True, "pycocotools"),
        (score,),
        (),
        (),
        (),
        model="det.tflite",
    )
    m = BundleManifest.new(
        models=BundleModels("det.tflite", None),
        labels=None,
        preprocess=PreprocessSpec(64, 64),
        input=BundleInput((1, 64, 64, 3), "uint8", 1 / 255, 0),
        versions=BundleVersions("0", None, None),
        reports=BundleReports(None, None),
        accuracy=accuracy,
    )
    result = BuildResult("bundle", m, None, ())
    assert BuildResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result
    text = result.render_text().splitlines()
    assert "Accuracy on coco.json: mAP 25.0%, mAP50 50.0% (4 images, the CPU int8 model)" in text
    assert text[-1] == "Run it: edgekit detect IMAGES -m bundle"
