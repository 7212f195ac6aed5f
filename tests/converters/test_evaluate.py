"""edgekit evaluate on the digits models: numbers recomputed here, and a layer broken on purpose named worst."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from edgekit.board.preprocess import quantize as quantize_input
from edgekit.cli.app import cli

pytestmark = pytest.mark.tf


def _int8_scores(path, x_float):
    from ai_edge_litert.interpreter import Interpreter

    interp = Interpreter(model_path=str(path), num_threads=1)
    interp.allocate_tensors()
    inp, out = interp.get_input_details()[0], interp.get_output_details()[0]
    scale, zp = inp["quantization"]
    rows = []
    for sample in x_float:
        interp.set_tensor(inp["index"], quantize_input(sample[None], "uint8", scale, zp))
        interp.invoke()
        rows.append(interp.get_tensor(out["index"]).ravel().astype(np.float32))
    return np.stack(rows)


def test_evaluate_reports_int8_and_float_accuracy_recomputed_independently(digits_int8, digits_keras, digits_folders):
    from edgekit.training import digits

    result = CliRunner().invoke(
        cli,
        [
            "evaluate",
            "-m",
            str(digits_int8.output),
            "--data",
            str(digits_folders.test),
            "--reference",
            str(digits_keras.path),
            "--json",
            "--quiet",
        ],
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    x, y, _ = digits.load_folder(digits_folders.test)  # 0..1, written here, not read from the record
    int8 = _int8_scores(digits_int8.output, x)
    floats = digits_keras.model.predict(x, verbose=0)
    top5 = np.mean([label in np.argsort(-s, kind="stable")[:5] for s, label in zip(int8, y)])
    assert doc["samples"] == len(y) and doc["classes"] == 10
    assert doc["top1"] == pytest.approx(np.mean(int8.argmax(1) == y))
    assert doc["top5"] == pytest.approx(top5)
    ref = doc["reference"]
    assert ref["top1"] == pytest.approx(np.mean(floats.argmax(1) == y))
    assert ref["top1_agreement"] == pytest.approx(np.mean(floats.argmax(1) == int8.argmax(1)))
    assert doc["labels_from"].startswith("class folder names") and doc["per_class"][3]["label"] == "3"
    assert ref["layers"] and ref["layers_error"] is None
    text = CliRunner().invoke(
        cli, ["evaluate", "-m", str(digits_int8.output), "--data", str(digits_folders.test), "--quiet"]
    )
    assert text.exit_code == 0 and f"int8 top-1 {doc['top1']:.1%}" in text.stdout


def test_per_layer_report_names_the_layer_broken_on_purpose(digits_keras, digits_folders, tmp_path):
    """An outlier weight on an input that is always zero: float unchanged, the int8 weight range wrecked."""
    import keras

    from edgekit.converters.quantize import QuantizeOptions, quantize
    from edgekit.converters.tf_quiet import silenced
    from edgekit.training import digits

    model = keras.models.clone_model(digits_keras.model)
    model.set_weights(digits_keras.model.get_weights())
    dense = next(layer for layer in model.layers if isinstance(layer, keras.layers.Dense))
    x, _, _ = digits.load_folder(digits_folders.train)
    features = keras.Model(model.inputs[0], dense.input)(x[:400]).numpy()
    dead = int(np.argmin(np.abs(features).max(0)))  # a Flatten feature that stays (near) zero
    kernel, bias = dense.get_weights()
    kernel[dead, :] = 200 * np.abs(kernel).max()  # every column's int8 range (per-tensor or per-channel) wrecked
    dense.set_weights([kernel, bias])
    path = tmp_path / "broken.keras"
    with silenced():
        model.save(path)
    out = quantize(
        QuantizeOptions(
            model=str(path),
            calib=str(digits_folders.train),
            scaling="0..1",
            samples=100,
            no_verify=True,
            show_progress=False,
        )
    ).output
    result = CliRunner().invoke(
        cli,
        ["evaluate", "-m", str(out), "--data", str(digits_folders.test), "--reference", str(path), "--json", "--quiet"],
    )
    assert result.exit_code == 0, result.output
    ref = json.loads(result.stdout)["reference"]
    worst = ref["layers"][0]
    # the first Dense (ReLU fused into it), not the logits Dense after it
    assert worst["op"] == "FULLY_CONNECTED" and "Relu" in worst["tensor"], ref["layers"][:3]
    assert (
        worst["relative_rms_error"] > 0.5 and worst["relative_rms_error"] > 2 * ref["layers"][1]["relative_rms_error"]
    )
    assert ref["top1"] > 0.85 and ref["class_changes"][0]["change"] < 0  # float fine, int8 lost classes


def test_evaluate_refuses_data_it_cannot_label(digits_int8, tmp_path):
    flat = tmp_path / "flat"
    flat.mkdir()
    result = CliRunner().invoke(cli, ["evaluate", "-m", str(digits_int8.output), "--data", str(flat)])
    assert result.exit_code == 3 and "no images found" in result.stderr
    np.savez(tmp_path / "bad.npz", x=np.zeros((2, 32, 32, 3), np.uint8), y=np.array([3, 12]))
    result = CliRunner().invoke(cli, ["evaluate", "-m", str(digits_int8.output), "--data", str(tmp_path / "bad.npz")])
    assert result.exit_code == 3 and "outside the model's 10 outputs" in result.stderr


def test_the_text_lists_only_classes_whose_accuracy_changed():
    """Was: five unchanged classes listed under "Classes that changed most" when int8 matched float."""
    from edgekit.results import EvaluateResult

    def render(document):
        return EvaluateResult.from_dict({**document, "per_class": [], "errors": []}).render_text()

    def doc(changes):
        rows = [
            {"id": i, "label": str(i), "samples": 10, "float_top1": 0.9, "int8_top1": 0.9 + d, "change": d}
            for i, d in enumerate(changes)
        ]
        reference = {
            "model": "m.keras",
            "top1": 0.9,
            "top5": 1.0,
            "samples": 20,
            "top1_agreement": 1.0,
            "agreement_interval": [0.84, 1.0],
            "mean_abs_diff": 0.0,
            "max_abs_diff": 0.0,
            "class_changes": rows,
            "layers": None,
            "layers_error": None,
        }
        return {
            "model": "m.tflite",
            "device": "cpu",
            "backend": "x",
            "samples": 20,
            "classes": 2,
            "top1": 0.9,
            "top5": 1.0,
            "preprocess": {
                "version": 1,
                "width": 8,
                "height": 8,
                "channels": "RGB",
                "resize": "lanczos",
                "mean": [0.0],
                "std": [1.0],
                "source": "recorded",
            },
            "labels_from": "folders",
            "per_class": [],
            "reference": reference,
        }

    same = render(doc([0.0, 0.0]))
    assert "No class's top-1 accuracy changed from float to int8" in same and "% -> " not in same
    lost = render(doc([-0.1, 0.0]))
    assert "Classes that changed most" in lost and lost.count("% -> ") == 1 and "90.0% -> 80.0%" in lost


def test_a_reference_of_another_input_shape_is_exit_3_naming_both(digits_keras, tmp_path):
    """It was exit 70: the float model was run on inputs of the wrong shape."""
    from PIL import Image

    from tests.conftest import shared_file

    cat = np.asarray(Image.open(shared_file("cat.bmp")).convert("RGB").resize((128, 128)), np.uint8)
    np.savez(tmp_path / "cat.npz", x=cat[None], y=np.asarray([283]))
    out = CliRunner().invoke(
        cli,
        [
            "evaluate",
            "-m",
            str(shared_file("mobilenet_v1_0.25_128_quant.tflite")),
            "--data",
            str(tmp_path / "cat.npz"),
            "--reference",
            str(digits_keras.path),
        ],
    )
    assert out.exit_code == 3, out.output
    line = [ln for ln in out.stderr.splitlines() if ln.startswith("error: ")][0]
    assert "(32, 32, 3)" in line and "(128, 128, 3)" in line


def test_a_cifar_shaped_npz_evaluates_like_the_same_images_in_class_folders(digits_int8, digits_folders, tmp_path):
    """keras.datasets.cifar10 gives uint8 (N, H, W, 3) images and uint8 (N, 1) labels. Was: every label read
    as class 0 (one-hot rows of one class), so evaluate printed chance-level accuracy with exit 0."""
    from PIL import Image

    classes = sorted(d.name for d in digits_folders.test.iterdir() if d.is_dir())
    images, ids = [], []
    for k, name in enumerate(classes):
        for f in sorted((digits_folders.test / name).glob("*.png")):
            images.append(np.asarray(Image.open(f).convert("RGB")))
            ids.append(k)
    np.savez(tmp_path / "cifar_like.npz", x_test=np.stack(images), y_test=np.asarray(ids, np.uint8)[:, None])
    docs = []
    for data in (digits_folders.test, tmp_path / "cifar_like.npz"):
        result = CliRunner().invoke(
            cli, ["evaluate", "-m", str(digits_int8.output), "--data", str(data), "--json", "--quiet"]
        )
        assert result.exit_code == 0, result.output
        docs.append(json.loads(result.stdout))
    folders, arrays = docs
    assert arrays["samples"] == folders["samples"] == len(ids)
    assert arrays["top1"] == folders["top1"] > 0.8
    assert [c["top1"] for c in arrays["per_class"]] == [c["top1"] for c in folders["per_class"]]
