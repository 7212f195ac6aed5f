"""quantize on the models people bring that are not plain float32 one-output classifiers (issue 24).

Several outputs (list or dict: a `digit` softmax and an `is_odd` sigmoid), float16 / mixed_float16 models.
Each is built from the trained digits CNN's own layers and weights, so no test trains anything new.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from edgekit.cli.app import cli
from edgekit.tflite import model as tflite_model

pytestmark = pytest.mark.tf


def _two_output_model(trained, as_dict: bool):
    """The trained digits CNN's layers with a second head, ``is_odd`` (sigmoid), on its last hidden layer."""
    import keras

    inp = keras.Input(trained.input_shape[1:])
    x = inp
    for layer in trained.layers[:-1]:
        x = layer(x)
    digit = keras.layers.Dense(10, activation="softmax", name="digit")(x)
    is_odd = keras.layers.Dense(1, activation="sigmoid", name="is_odd")(x)
    model = keras.Model(inp, {"is_odd": is_odd, "digit": digit} if as_dict else [digit, is_odd])
    model.get_layer("digit").set_weights(trained.layers[-1].get_weights())
    return model


@pytest.mark.parametrize("as_dict", [False, True], ids=["list", "dict"])
def test_a_model_with_two_outputs_is_refused_naming_them_or_converted_with_the_chosen_one(
    digits_keras, digits_folders, tmp_path, as_dict
):
    """Was: exit 0 with the first output (for a dict, the alphabetically first key) and not a word."""
    from edgekit.converters.tf_quiet import silenced

    with silenced():
        model = _two_output_model(digits_keras.model, as_dict)
        path = tmp_path / "two.keras"
        model.save(path)
    base = [
        "quantize",
        str(path),
        "--calib",
        str(digits_folders.train),
        "--scaling",
        "0..1",
        "--samples",
        "100",
        "--holdout",
        "100",
    ]
    refused = CliRunner().invoke(cli, base)
    assert refused.exit_code == 5, refused.output
    error = [ln for ln in refused.stderr.splitlines() if ln.startswith("error: ")]
    assert len(error) == 1 and "the model has 2 outputs (" in error[0] and "digit" in error[0] and "is_odd" in error[0]
    assert "--output-name NAME" in refused.stderr
    assert not (tmp_path / "two_int8.tflite").exists()

    wrong = CliRunner().invoke(cli, base + ["--output-name", "parity"])
    assert wrong.exit_code == 2 and "no output of that name" in wrong.stderr and "is_odd" in wrong.stderr

    chosen = CliRunner().invoke(cli, base + ["--output-name", "digit", "--json", "--quiet"])
    assert chosen.exit_code == 0, chosen.output
    doc = json.loads(chosen.stdout)
    assert doc["source"]["output"]["name"] == "digit" and sorted(doc["source"]["output"]["of"]) == ["digit", "is_odd"]
    assert doc["io"]["output"]["shape"] == [1, 10]
    assert doc["verification"]["passed"] and doc["verification"]["float_top1"] > 0.8
    record = json.loads(tflite_model.load(tmp_path / "two_int8.tflite").metadata["edgekit"])
    assert record["source_model"]["output"]["name"] == "digit"  # the choice travels with the model
    if as_dict:  # build takes the option too, and its manifest says which output the bundle holds
        built = CliRunner().invoke(
            cli,
            [
                "build",
                str(path),
                "-o",
                str(tmp_path / "bundle"),
                "--output-name",
                "digit",
                *base[2:],
                "--no-compile",
                "--json",
                "--quiet",
            ],
        )
        assert built.exit_code == 0, built.output
        assert json.loads(built.stdout)["manifest"]["source"]["output"]["name"] == "digit"


def test_an_output_can_be_chosen_by_index_and_a_one_output_model_needs_no_choice():
    from edgekit.converters import keras_io

    assert keras_io.choose_output(["digit", "is_odd"], "1", "m") == 1
    assert keras_io.choose_output(["digit"], None, "m") is None
    with pytest.raises(keras_io.UsageError, match="has one output"):
        keras_io.choose_output(["digit"], "is_odd", "m")


def _half_precision_copy(trained, policy: str):
    """The digits CNN built under a float16 or mixed_float16 policy, with the trained weights."""
    import keras

    from edgekit.training.archs import small_cnn

    before = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        model = small_cnn(trained.input_shape[1:], 10)
    finally:
        keras.config.set_dtype_policy(before)
    model.set_weights([w.astype(np.float16 if policy == "float16" else np.float32) for w in trained.get_weights()])
    return model


@pytest.mark.parametrize("policy", ["mixed_float16", "float16"])
def test_a_half_precision_model_loads_as_float32_with_a_note_and_its_int8_twin_agrees(
    digits_keras, digits_folders, tmp_path, policy
):
    """Was: exit 5 with TensorFlow's MLIR dump and the hint "every op must have an int8 kernel"."""
    from edgekit.converters.tf_quiet import silenced
    from edgekit.training import digits

    with silenced():
        model = _half_precision_copy(digits_keras.model, policy)
        path = tmp_path / f"{policy}.keras"
        model.save(path)
    result = CliRunner().invoke(
        cli,
        [
            "quantize",
            str(path),
            "--calib",
            str(digits_folders.train),
            "--scaling",
            "0..1",
            "--samples",
            "100",
            "--holdout",
            "100",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    assert f"note: the model computes in {policy}: loaded as float32" in result.stderr
    doc = json.loads(result.stdout)
    assert doc["source"]["notes"] and doc["verification"]["passed"]
    # the int8 twin against the half-precision model itself, on the test images neither has seen
    from edgekit.converters.quantize import run_int8

    x, y, _ = digits.load_folder(digits_folders.test)
    half = np.asarray(model.predict(x, verbose=0), np.float32)
    int8 = run_int8((tmp_path / f"{policy}_int8.tflite").read_bytes(), x)
    agree = float(np.mean(half.argmax(1) == int8.argmax(1)))
    assert agree >= 0.95, agree
    assert np.mean(int8.argmax(1) == y) >= np.mean(half.argmax(1) == y) - 0.03


def _head_1000(trained, offset: int = 100):
    """The digits CNN with a 1000-way head (fixed weights): digit k is output offset + k, no other output wins."""
    import keras

    inp = keras.Input(trained.input_shape[1:])
    x = inp
    for layer in trained.layers[:-1]:
        x = layer(x)
    model = keras.Model(inp, keras.layers.Dense(1000, activation="softmax", name="predictions")(x))
    kernel, bias = trained.layers[-1].get_weights()
    wide, wide_bias = np.zeros((kernel.shape[0], 1000), np.float32), np.full(1000, -20.0, np.float32)
    wide[:, offset : offset + 10], wide_bias[offset : offset + 10] = kernel, bias
    model.get_layer("predictions").set_weights([wide, wide_bias])
    return model


def test_a_1000_class_head_matches_a_few_class_folders_to_its_labels_by_name(digits_keras, digits_folders, tmp_path):
    """10 class folders of a 1000-class model, named like 10 of its --labels lines. Was: the labels unused with a
    half-false warning ("neither recorded nor used": the --labels were recorded), and --eval refused (exit 3)."""
    from edgekit.converters.tf_quiet import silenced

    with silenced():
        _head_1000(digits_keras.model).save(tmp_path / "wide.keras")
    names = [f"class{i}" for i in range(1000)]
    names[100:110] = [str(d) for d in range(10)]
    (tmp_path / "labels.txt").write_text("\n".join(names) + "\n")
    base = [
        "quantize",
        str(tmp_path / "wide.keras"),
        "--calib",
        str(digits_folders.train),
        "--labels",
        str(tmp_path / "labels.txt"),
        "--scaling",
        "0..1",
        "--samples",
        "100",
        "--holdout",
        "100",
    ]
    result = CliRunner().invoke(cli, base + ["--eval", str(digits_folders.test), "--json"])
    assert result.exit_code == 0, result.output
    assert "warning" not in result.stderr, result.stderr
    doc = json.loads(result.stdout)
    v = doc["verification"]
    assert v["labelled"] and v["sources"]["eval"] == len(list(digits_folders.test.rglob("*.png")))
    assert v["float_top1"] > 0.9 and v["passed"] and doc["labels"] == 1000
    assert doc["calibration"]["classes"] == 10
    assert any("10 class folders matched by name to 10 of the 1000 labels" in n for n in doc["calibration"]["notes"])
    # folders named like none of the labels: not used, and the warning says what is recorded
    (tmp_path / "other.txt").write_text("\n".join(f"class{i}" for i in range(1000)) + "\n")
    other = CliRunner().invoke(cli, base[:5] + [str(tmp_path / "other.txt")] + base[6:] + ["--no-verify"])
    assert other.exit_code == 0, other.output
    assert (
        "the calibration labels are not used to measure accuracy: 10 class folders for 1000 model outputs"
        in other.stderr
        and "neither recorded" not in other.stderr
    )


def test_a_savedmodel_with_two_outputs_is_refused_or_loaded_with_the_chosen_one(tmp_path):
    """Was: the alphabetically first signature output taken silently."""
    import keras

    from edgekit.converters import keras_io
    from edgekit.converters.tf_quiet import silenced
    from edgekit.errors import ConversionError

    inp = keras.Input((8, 8, 3))
    flat = keras.layers.Flatten()(inp)
    model = keras.Model(
        inp,
        {
            "is_odd": keras.layers.Dense(1, activation="sigmoid", name="is_odd")(flat),
            "digit": keras.layers.Dense(10, activation="softmax", name="digit")(flat),
        },
    )
    with silenced():
        model.export(str(tmp_path / "saved"))
    with pytest.raises(ConversionError, match=r"the model has 2 outputs \(digit, is_odd\)") as exc:
        keras_io.load(tmp_path / "saved")
    assert exc.value.exit_code == 5 and "--output-name" in exc.value.hint
    loaded = keras_io.load(tmp_path / "saved", output="is_odd")
    assert loaded.output.to_dict() == {"name": "is_odd", "index": 1, "of": ["digit", "is_odd"]}
    assert loaded.predict(np.zeros((3, 8, 8, 3), np.float32)).shape == (3, 1)
