"""edgekit quantize on the digits CNN: accuracy, Edge TPU structure, recorded preprocessing, CLI behaviour."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from edgekit.board.preprocess import open_image, prepare
from edgekit.cli.app import cli
from edgekit.tflite import model as tflite_model
from edgekit.tflite import model_record

pytestmark = pytest.mark.tf


@pytest.fixture(scope="module")
def held_out(digits_folders):
    from edgekit.training import digits

    return digits.load_folder(digits_folders.test)


@pytest.fixture(scope="module")
def float_top1(digits_keras, held_out):
    x, _, _ = held_out
    return digits_keras.model.predict(x, verbose=0).argmax(1)


def _interpreter(path):
    from ai_edge_litert.interpreter import Interpreter

    interp = Interpreter(model_path=str(path), num_threads=1)
    interp.allocate_tensors()
    return interp


def test_int8_accuracy_within_one_point_of_float(digits_int8, held_out, float_top1):
    from edgekit.converters.quantize import run_int8

    x, y, _ = held_out
    float_acc = float(np.mean(float_top1 == y))
    int8_acc = float(np.mean(run_int8(digits_int8.output.read_bytes(), x).argmax(1) == y))
    assert float_acc > 0.9, f"the digits CNN did not learn ({float_acc:.1%})"
    assert abs(float_acc - int8_acc) <= 0.01, (float_acc, int8_acc)


def test_output_passes_the_edge_tpu_structural_checks(digits_int8):
    from edgekit.edgetpu import op_versions

    info = tflite_model.load(digits_int8.output)
    assert digits_int8.output.name == "digits_int8.tflite"  # default name, beside the input
    assert info.quantization_state == "full-int8"
    assert not info.has_dynamic_shapes
    assert [list(t.shape_signature) for t in info.inputs] == [[1, 32, 32, 3]]
    assert [t.dtype for t in info.inputs + info.outputs] == ["uint8", "uint8"]
    assert [(op.name, op.version) for op in info.ops if op_versions.version_problem(op.name, op.version)] == []
    names = [op.name for op in info.ops]
    assert "SHAPE" not in names and "STRIDED_SLICE" not in names  # static batch: a single RESHAPE
    assert "MUL" not in names and "ADD" not in names  # BatchNorm folded into CONV_2D
    for op in info.ops:
        if op.name == "FULLY_CONNECTED":
            assert not info.tensors[op.inputs[1]].quantization.per_channel
    assert digits_int8.summary.to_dict()["verification"]["top1_agreement"] >= 0.9


def test_record_is_inside_the_model_and_beside_it(digits_int8):
    from edgekit.training import digits

    info = tflite_model.load(digits_int8.output)
    inside = model_record.ModelRecord.from_json(info.metadata["edgekit"])
    beside = model_record.ModelRecord.from_json(model_record.sidecar_path(digits_int8.output).read_text())
    for rec in (inside, beside):
        assert rec.preprocess == digits.SPEC
        assert rec.labels == digits.CLASSES
        # every labelled sample verifies: the 100 held back and the 300 calibration samples
        assert rec.extra["verification"]["samples"] == 400
        assert rec.extra["verification"]["sources"] == {"held_back": 100, "calibration": 300}
        assert rec.extra["versions"]["tensorflow"]
    assert info.metadata["edgekit"].decode() == beside.to_json()
    _interpreter(digits_int8.output).invoke()  # the edited flatbuffer still loads and runs


def test_recorded_preprocessing_reproduces_the_float_model(digits_int8, held_out, float_top1):
    """What classify does with no flags: prepare() with the recorded spec, then the int8 model."""
    _, _, paths = held_out
    info = tflite_model.load(digits_int8.output)
    rec, _ = model_record.find_record(digits_int8.output, info.metadata)
    interp = _interpreter(digits_int8.output)
    inp, out = interp.get_input_details()[0], interp.get_output_details()[0]
    top1 = []
    for p in paths:
        interp.set_tensor(inp["index"], prepare(open_image(p), rec.preprocess, "uint8", *inp["quantization"]))
        interp.invoke()
        top1.append(int(interp.get_tensor(out["index"]).argmax()))
    assert np.mean(np.asarray(top1) == float_top1) >= 0.98


def test_classify_cli_with_no_preprocessing_flags_agrees(digits_int8, digits_folders, held_out, float_top1):
    _, _, paths = held_out
    result = CliRunner().invoke(
        cli, ["classify", *map(str, paths), "-m", str(digits_int8.output), "-k", "1", "--json", "--device", "cpu"]
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    by_image = {os.path.realpath(r["image"]): int(r["top"][0]["id"]) for r in doc["results"]}
    top1 = [by_image[os.path.realpath(p)] for p in paths]
    assert len(top1) == len(paths)
    assert np.mean(np.asarray(top1) == float_top1) >= 0.98


def test_cli_json_is_clean_and_tensorflow_noise_stays_off_the_terminal(digits_keras, digits_folders, tmp_path):
    """Also when a --custom-objects module imports keras itself (that import used to print TF's C++ log)."""
    out = tmp_path / "q.tflite"
    (tmp_path / "my_layers.py").write_text("import keras\n\nclass Unused(keras.layers.Layer):\n    pass\n")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "edgekit",
            "quantize",
            str(digits_keras.path),
            "--calib",
            str(digits_folders.train),
            "--samples",
            "60",
            "-o",
            str(out),
            "--json",
            "--custom-objects",
            str(tmp_path / "my_layers.py"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["output"] == str(out) and out.is_file()
    assert doc["calibration"]["samples"] == 60 and doc["calibration"]["classes"] == 10
    assert doc["io"]["input"]["dtype"] == "uint8" and doc["verification"]["passed"]
    assert doc["size_bytes"] < doc["source"]["size_bytes"]
    # only our own warnings (fewer than 100 samples; 160 samples cannot show a drop under 1 point) reach
    # stderr: no absl/C++/Keras lines
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert [ln for ln in lines if not ln.startswith("note: ")] == [f"warning: {w}" for w in doc["warnings"]]
    assert [ln for ln in lines if ln.startswith("note: ")] == [f"note: {n}" for n in doc["notes"]]
    assert "fewer than 100" in proc.stderr


def test_verbose_shows_tensorflow_output_on_stderr_so_json_stays_clean(capfd):
    """What TensorFlow prints (Python or C++) reaches the user with --verbose, but never stdout."""
    import os

    from edgekit.converters.tf_quiet import silenced

    for verbose in (True, False):
        with silenced(verbose):
            print("python-level noise")
            os.write(1, b"native noise\n")
        out, err = capfd.readouterr()
        assert out == ""
        assert ("python-level noise" in err and "native noise" in err) == verbose


def test_int8_io_option(digits_keras, digits_folders, tmp_path):
    out = tmp_path / "new_folder" / "io8.tflite"  # a missing -o folder is created, and said
    result = CliRunner().invoke(
        cli, ["quantize", str(digits_keras.path), "--calib", str(digits_folders.train), "--io", "int8", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert f"note: created output folder {out.parent}" in result.stderr
    info = tflite_model.load(out)
    assert [t.dtype for t in info.inputs + info.outputs] == ["int8", "int8"]
    assert info.inputs[0].quantization.zero_point == -128
    assert "QUANTIZE" not in [op.name for op in info.ops]
    assert "top-1 agreement" in result.stdout


def test_no_calibration_data_is_refused_with_the_flag_shown(digits_keras, tmp_path):
    bare = tmp_path / "model.h5"
    shutil.copy(digits_keras.path, bare)  # no record beside it
    result = CliRunner().invoke(cli, ["quantize", str(bare)])
    assert result.exit_code == 2
    assert "no calibration data" in result.stderr and "--calib path/to/images/" in result.stderr
    assert not (tmp_path / "model_int8.tflite").exists()


def test_missing_model_is_named_before_anything_else(tmp_path):
    result = CliRunner().invoke(cli, ["quantize", str(tmp_path / "absent.h5")])
    assert result.exit_code == 3
    assert result.stderr.strip() == f"error: no such file or folder: {tmp_path / 'absent.h5'} (check the path)"


def test_a_tflite_given_as_the_model_is_named_not_asked_for_calibration(tmp_path):
    tflite = tmp_path / "model_int8.tflite"
    tflite.write_bytes(b"\x1c\x00\x00\x00TFL3")
    result = CliRunner().invoke(cli, ["quantize", str(tflite)])  # no --calib, no record beside it
    assert result.exit_code == 3, result.output
    assert result.stderr.startswith(f"error: {tflite} is already a TFLite model")
    assert "calibration" not in result.stderr


def test_cheap_mistakes_are_refused_before_the_model_is_loaded(digits_keras, digits_folders, tmp_path, monkeypatch):
    """A typo in --calib or -o fails at once, not after TensorFlow has loaded and converted the model."""
    from edgekit.converters import keras_io

    def must_not_load(*args, **kwargs):
        raise AssertionError("the model was loaded before the mistake was reported")

    monkeypatch.setattr(keras_io, "load", must_not_load)
    result = CliRunner().invoke(cli, ["quantize", str(digits_keras.path), "--calib", str(tmp_path / "typo")])
    assert result.exit_code == 3, result.output
    assert f"--calib {tmp_path / 'typo'}: no such file or folder" in result.stderr
    (tmp_path / "afile").write_text("")
    result = CliRunner().invoke(
        cli,
        [
            "quantize",
            str(digits_keras.path),
            "--calib",
            str(digits_folders.train),
            "-o",
            str(tmp_path / "afile" / "sub" / "m.tflite"),
        ],
    )
    assert result.exit_code == 3, result.output
    assert f"cannot create output folder {tmp_path / 'afile' / 'sub'}" in result.stderr
    if os.path.isdir("/proc/self"):  # Linux: a folder where nobody, not even root, can create a file
        result = CliRunner().invoke(
            cli, ["quantize", str(digits_keras.path), "--calib", str(digits_folders.train), "-o", "/proc/m.tflite"]
        )
        assert result.exit_code == 3, result.output
        assert "cannot write in output folder /proc" in result.stderr


def test_recorded_calibration_that_is_gone_says_where_it_was_recorded(digits_keras, tmp_path):
    model = tmp_path / "m.h5"
    shutil.copy(digits_keras.path, model)
    record = model_record.ModelRecord.from_json(model_record.sidecar_path(digits_keras.path).read_text())
    record.extra["calibration"] = {"source": "moved/train"}
    model_record.sidecar_path(model).write_text(record.to_json())
    result = CliRunner().invoke(cli, ["quantize", str(model)])
    assert result.exit_code == 3, result.output
    assert (
        f"error: the calibration data recorded in {model_record.sidecar_path(model)} is gone: "
        f"no such file or folder {tmp_path / 'moved' / 'train'}"
    ) in result.stderr
    assert "pass it explicitly: --calib path/to/images/" in result.stderr


def test_calib_random_warns_loudly(digits_keras, tmp_path):
    out = tmp_path / "random.tflite"
    result = CliRunner().invoke(
        cli, ["quantize", str(digits_keras.path), "--calib", "random", "--samples", "20", "--no-verify", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "RANDOM NOISE" in result.stderr and "meaningless" in result.stderr
    rec = model_record.ModelRecord.from_json(model_record.sidecar_path(out).read_text())
    assert rec.extra["calibration"]["random"] is True


def test_output_never_overwrites_the_input(digits_keras):
    before = digits_keras.path.read_bytes()
    result = CliRunner().invoke(cli, ["quantize", str(digits_keras.path), "-o", str(digits_keras.path)])
    assert result.exit_code == 2 and "would overwrite the input" in result.stderr
    assert digits_keras.path.read_bytes() == before


def test_quantize_to_the_models_own_name_keeps_its_training_record(digits_keras, digits_folders, tmp_path):
    """`quantize m.h5 -o m.tflite` beside m.edgekit.json (m.h5's training record). Was: refused (exit 2), since both
    records are named m.edgekit.json. Now the output's record goes inside the model and the input's stays."""
    model = tmp_path / "m.h5"
    shutil.copy(digits_keras.path, model)
    shutil.copy(model_record.sidecar_path(digits_keras.path), tmp_path / "m.edgekit.json")
    before = (tmp_path / "m.edgekit.json").read_bytes()
    for _ in range(2):  # and again: the training record is still recognised as the input's
        result = CliRunner().invoke(
            cli,
            [
                "quantize",
                str(model),
                "-o",
                str(tmp_path / "m.tflite"),
                "--calib",
                str(digits_folders.train),
                "--samples",
                "60",
                "--no-verify",
                "--json",
            ],
        )
        assert result.exit_code == 0, result.output
        assert "note: m.edgekit.json beside the output is m.h5's own record" in result.stderr
        assert json.loads(result.stdout)["record"] is None
        assert (tmp_path / "m.edgekit.json").read_bytes() == before
    inside = json.loads(tflite_model.load(tmp_path / "m.tflite").metadata["edgekit"])
    assert inside["created_by"].startswith("edgekit quantize") and inside["labels"] == [str(i) for i in range(10)]


def test_default_outputs_of_two_sources_never_replace_each_other(digits_keras, digits_folders, tmp_path):
    """m.keras and m.h5 both default to m_int8.tflite. Was: the second run replaced the first's without a word."""
    from edgekit.converters.tf_quiet import silenced

    with silenced():
        digits_keras.model.save(tmp_path / "m.keras")
    shutil.copy(digits_keras.path, tmp_path / "m.h5")
    args = ["--calib", str(digits_folders.train), "--samples", "60", "--no-verify", "--quiet"]
    first = CliRunner().invoke(cli, ["quantize", str(tmp_path / "m.keras"), *args])
    assert first.exit_code == 0, first.output
    written = (tmp_path / "m_int8.tflite").read_bytes()
    second = CliRunner().invoke(cli, ["quantize", str(tmp_path / "m.h5"), *args])
    assert second.exit_code == 2, second.output
    assert "the default output" in second.stderr and "exists and was made from m.keras, not from m.h5" in second.stderr
    assert "-o " in second.stderr and (tmp_path / "m_int8.tflite").read_bytes() == written
    again = CliRunner().invoke(cli, ["quantize", str(tmp_path / "m.keras"), *args])  # its own output: replaced
    assert again.exit_code == 0, again.output
    named = CliRunner().invoke(cli, ["quantize", str(tmp_path / "m.h5"), *args, "-o", str(tmp_path / "m_h5.tflite")])
    assert named.exit_code == 0, named.output
    assert json.loads(tflite_model.load(tmp_path / "m_h5.tflite").metadata["edgekit"])["source_model"]["name"] == "m.h5"


def test_rerunning_with_an_output_named_like_the_model_works(digits_keras, digits_folders, tmp_path):
    """`-o model.tflite` writes model.edgekit.json beside model.h5: the output's record, not a training record."""
    model = tmp_path / "m.h5"
    shutil.copy(digits_keras.path, model)
    args = [
        "quantize",
        str(model),
        "--calib",
        str(digits_folders.train),
        "--samples",
        "150",
        "--no-verify",
        "-o",
        str(tmp_path / "m.tflite"),
        "--json",
        "--quiet",
    ]
    for _ in range(2):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["preprocess"]["origin"] == "the labelled calibration data"  # not the record
    assert (tmp_path / "m.edgekit.json").is_file()


def test_verification_failure_exits_6_with_the_numbers_and_keeps_the_output(digits_folders, tmp_path):
    """A model whose class scores differ by less than one uint8 step: int8 loses the decision."""
    from edgekit.converters.tf_quiet import silenced
    from edgekit.training import digits

    model = digits.build_cnn(seed=3)
    last = model.layers[-1]
    kernel, bias = last.get_weights()
    last.set_weights([kernel * 1e-3, bias])
    path = tmp_path / "flat.keras"
    with silenced():
        model.save(path)
    args = ["quantize", str(path), "--calib", str(digits_folders.train), "--scaling", "0..1", "--samples", "100"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 6, result.output
    assert "on 200 samples (100 held-back, 100 calibration): int8 model agrees with the float model on" in result.stderr
    assert "below --min-agreement 0.9" in result.stderr and "(top-1; 95% interval " in result.stderr
    assert "the float model itself is no better than chance" in result.stderr  # an untrained model, labelled data
    assert "%" in result.stderr and "mean |score difference|" in result.stderr
    assert (tmp_path / "flat_int8.tflite").is_file() and (tmp_path / "flat_int8.edgekit.json").is_file()
    assert "minimum 0.9: failed), mean |score diff|" in result.stdout and ": FAILED" in result.stdout  # still described
    # --json: the document (with the numbers) on stdout, the one-line error on stderr, exit 6
    result = CliRunner().invoke(cli, args + ["--json", "--quiet"])
    assert result.exit_code == 6, result.output
    doc = json.loads(result.stdout)
    assert doc["verification"]["passed"] is False and doc["verification"]["top1_agreement"] < 0.9
    assert doc["output"] == str(tmp_path / "flat_int8.tflite")
    errors = [ln for ln in result.stderr.splitlines() if not ln.startswith("warning: ")]
    assert len(errors) == 1 and errors[0].startswith(
        "error: on 200 samples (100 held-back, 100 calibration): int8 model agrees with the float model on "
    )


@pytest.mark.parametrize(
    "activation, named", [("gelu", "GELU needs TensorFlow Lite 2.9.0"), ("elu", "ELU: ELU on float32 data")]
)
def test_ops_the_compiler_would_reject_are_named_after_trying_the_remedies(tmp_path, activation, named):
    import keras

    from edgekit.converters.tf_quiet import silenced

    inp = keras.Input((8, 8, 3))
    x = keras.layers.Conv2D(4, 3, activation=activation)(inp)
    model = keras.Model(inp, keras.layers.Dense(3, activation="softmax")(keras.layers.Flatten()(x)))
    path = tmp_path / f"{activation}.keras"
    with silenced():
        model.save(path)
    result = CliRunner().invoke(
        cli, ["quantize", str(path), "--calib", "random", "--samples", "20", "--no-verify", "--scaling", "0..1"]
    )
    assert result.exit_code == 5, result.output
    assert "would not pass edgetpu_compiler 16" in result.stderr and named in result.stderr
    assert "tried per-tensor Dense weights, per-tensor weights for every layer" in result.stderr
    assert "QUANTIZE" not in result.stderr
    assert not (tmp_path / f"{activation}_int8.tflite").exists()


def test_without_calib_the_data_recorded_beside_the_model_is_used(digits_keras, digits_folders, tmp_path):
    out = tmp_path / "recorded.tflite"
    result = CliRunner().invoke(
        cli, ["quantize", str(digits_keras.path), "-o", str(out), "--samples", "50", "--no-verify", "--json"]
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert os.path.realpath(doc["calibration"]["source"]) == os.path.realpath(digits_folders.train)
    assert doc["preprocess"]["origin"] == "the record beside the model" and doc["labels"] == 10
    assert doc["verification"] is None
    assert doc["calibration"]["holdout_samples"] == 0 and doc["calibration"]["notes"] == []  # nothing to verify


@pytest.mark.parametrize(
    "typed, expected",
    [("saved", "saved_int8.tflite"), ("saved/", "saved_int8.tflite"), ("sub/model.h5", "sub/model_int8.tflite")],
)
def test_default_output_is_beside_the_input_as_typed(tmp_path, monkeypatch, typed, expected):
    from edgekit.converters.quantize import default_output

    (tmp_path / "saved").mkdir()
    monkeypatch.chdir(tmp_path)
    assert str(default_output(typed)) == expected
    monkeypatch.chdir(tmp_path / "saved")
    assert default_output(".") == tmp_path / "saved_int8.tflite"


def test_the_bytes_written_are_the_bytes_verified(digits_keras, digits_folders, tmp_path, monkeypatch):
    """Adding the record repacks the model: a repack that changed a weight must not be written as verified."""
    from edgekit.tflite import metadata as tflite_metadata

    real = tflite_metadata.set_metadata

    def damaging(model: bytes, name: str, data: bytes) -> bytes:
        out = bytearray(real(model, name, data))
        info = tflite_model.ModelInfo.from_bytes(bytes(out))
        conv = next(op for op in info.ops if op.name == "CONV_2D")
        weights = info._buffers[info.tensors[conv.inputs[1]].buffer]
        out[weights.start : weights.start + weights.size] = bytes(weights.size)  # zero the first convolution
        return bytes(out)

    monkeypatch.setattr(tflite_metadata, "set_metadata", damaging)
    out = tmp_path / "m.tflite"
    for extra in ([], ["--no-verify"]):
        result = CliRunner().invoke(
            cli,
            [
                "quantize",
                str(digits_keras.path),
                "--calib",
                str(digits_folders.train),
                "--samples",
                "50",
                "-o",
                str(out),
                "--quiet",
                *extra,
            ],
        )
        assert result.exit_code == 70, result.output
        assert "adding the record to the model changed its outputs" in result.stderr
        assert not out.exists()


def test_a_converter_setting_tensorflow_lacks_is_not_set_silently():
    """setattr on a renamed private attribute adds one TensorFlow never reads: refuse to pretend."""
    from edgekit.converters.quantize import apply_settings

    class Converter:
        _experimental_disable_per_channel = False

    conv = Converter()
    assert apply_settings(conv, {"_experimental_disable_per_channel": True, "_renamed_in_tf_3": True}) == [
        "_renamed_in_tf_3"
    ]
    assert conv._experimental_disable_per_channel is True and not hasattr(conv, "_renamed_in_tf_3")


def test_a_bug_in_edgekit_during_conversion_is_an_internal_error_not_exit_5(digits_keras, tmp_path, monkeypatch):
    """Was: the broad except around conversion said "TensorFlow could not convert" (exit 5) for our own bug."""
    from edgekit.report import Reporter

    class Broken(Reporter):
        def iterate(self, items, *args, **kwargs):
            raise AttributeError("'NoneType' object has no attribute 'write'")  # a bug in edgekit's feed

    x = np.zeros((4, 32, 32, 3), np.float32)
    from edgekit.board.preprocess import PreprocessSpec
    from edgekit.converters import keras_io
    from edgekit.converters.quantize import convert

    loaded = keras_io.load(digits_keras.path)
    with pytest.raises(AttributeError, match="no attribute 'write'"):
        convert(loaded, x, PreprocessSpec(32, 32), "uint8", report=Broken())
