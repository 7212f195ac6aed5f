"""edgekit build: Keras model → bundle (quantize → check → compile when possible), and classify from it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from edgekit import manifest
from edgekit.cli import cli
from edgekit.devices import classify as C
from edgekit.model_record import ModelRecord, sidecar_path
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
    return target, _build([str(digits_keras.path), "-o", str(target), "--no-compile",
                           "--eval", str(digits_folders.test)])


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


def test_a_failed_build_leaves_nothing(digits_keras, tmp_path):
    out = CliRunner().invoke(cli, ["build", str(digits_keras.path), "--calib", str(tmp_path / "none"),
                                   "-o", str(tmp_path / "bundle")])
    assert out.exit_code == 3, out.output
    assert list(tmp_path.iterdir()) == []


def test_build_with_a_compiler_adds_the_compiled_model_and_its_report(standin, digits_keras, tmp_path):  # noqa: F811
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
