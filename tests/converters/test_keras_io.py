"""Every Keras input format through `edgekit quantize`, and each bad input's error.

Keras-2 (tf_keras) artifacts and a model trained under MirroredStrategy over two logical CPUs are
made once in a subprocess (tests/converters/make_keras_artifacts.py); Keras 3 ones in-process.
Each format is loaded, checked against the predictions its maker recorded, and quantized.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from click.testing import CliRunner

from edgekit.cli.app import cli
from edgekit.converters import keras_io
from edgekit.errors import InputError, UsageError
from edgekit.tflite import model as tflite_model

pytestmark = pytest.mark.tf

MAKER = Path(__file__).with_name("make_keras_artifacts.py")
ARCH_SOURCE = textwrap.dedent("""
    import keras

    def create_model(units=3):
        return keras.Sequential([
            keras.Input((16, 16, 3)),
            keras.layers.Conv2D(8, 3, use_bias=False),
            keras.layers.BatchNormalization(),
            keras.layers.ReLU(),
            keras.layers.Flatten(),
            keras.layers.Dense(units, activation="softmax"),
        ])

    def create_wider_model():
        return create_model(units=4)
""")


def _need_tf_keras() -> None:
    if importlib.util.find_spec("tf_keras") is None:
        pytest.skip("tf_keras is not installed: pip install --no-deps tf-keras==2.21.0 (make test does)")


@pytest.fixture(scope="module")
def art(tmp_path_factory):
    """All artifacts: Keras 2 and mirrored (subprocess), Keras 3 (here), arch modules, calibration npz."""
    out = tmp_path_factory.mktemp("keras_artifacts")
    x = np.random.default_rng(0).integers(0, 256, (40, 16, 16, 3), dtype=np.uint8)
    np.savez(out / "x.npz", x=x)
    proc = subprocess.run(
        [sys.executable, str(MAKER), str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "replicas 2" in proc.stdout

    (out / "tiny_arch.py").write_text(ARCH_SOURCE)
    (out / "tinypkg").mkdir()
    (out / "tinypkg" / "__init__.py").write_text("")
    (out / "tinypkg" / "nets.py").write_text(ARCH_SOURCE)

    from edgekit.converters.tf_quiet import import_tensorflow, silenced

    import_tensorflow()
    import keras

    spec = importlib.util.spec_from_file_location("_test_tiny_arch", out / "tiny_arch.py")
    arch = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(arch)
    keras.utils.set_random_seed(5)
    model = arch.create_model()
    kernel, bias = model.layers[-1].get_weights()
    model.layers[-1].set_weights([kernel * 20, bias])  # confident scores, so top-1 is well defined
    with silenced():
        model.save(out / "k3.keras")
        model.save(out / "k3_full.h5")
        model.save_weights(out / "k3.weights.h5")
        model.export(out / "k3_savedmodel", verbose=False)
        model.export(
            out / "k3_savedmodel_batch1",
            verbose=False,  # toolchain.md's way to force batch 1
            input_signature=[keras.InputSpec(shape=(1, 16, 16, 3), dtype="float32")],
        )
    np.save(out / "k3_expected.npy", model.predict(x / 255.0, verbose=0))
    return SimpleNamespace(dir=out, x=x.astype(np.float32) / 255.0)


FORMATS = [
    # (file, --arch, expected predictions, format name)
    ("k2_full.h5", None, "k2", "h5"),
    ("k2_weights.h5", "tiny_arch.py:create_model", "k2", "weights+arch"),
    ("k2_savedmodel", None, "k2", "savedmodel"),
    ("k3.keras", None, "k3", "keras"),
    ("k3_full.h5", None, "k3", "h5"),
    ("k3.weights.h5", "tinypkg.nets:create_model", "k3", "weights+arch"),
    ("k3_savedmodel", None, "k3", "savedmodel"),
    ("k3_savedmodel_batch1", None, "k3", "savedmodel"),
    ("mirrored.keras", None, "mirrored", "keras"),
    ("mirrored.weights.h5", "tiny_arch.py:create_model", "mirrored", "weights+arch"),
    ("mirrored_savedmodel", None, "mirrored", "savedmodel"),
]


@pytest.mark.parametrize("name, arch, expected, fmt", FORMATS, ids=[f[0] for f in FORMATS])
def test_each_format_loads_faithfully_and_quantizes(art, monkeypatch, tmp_path, name, arch, expected, fmt):
    if expected == "k2":
        _need_tf_keras()
    monkeypatch.chdir(art.dir)  # `package.module:function` imports from the current directory
    loaded = keras_io.load(art.dir / name, arch=arch)
    assert loaded.format == fmt and loaded.input_shape == (16, 16, 3)
    want = np.load(art.dir / f"{expected}_expected.npy")
    np.testing.assert_allclose(loaded.predict(art.x), want, atol=1e-5)

    out = tmp_path / "out.tflite"
    args = [
        "quantize",
        name,
        "--calib",
        "x.npz",
        "--scaling",
        "0..1",
        "-o",
        str(out),
        "--min-agreement",
        "0.8",
        "--quiet",
    ]
    result = CliRunner().invoke(cli, args + (["--arch", arch] if arch else []))
    assert result.exit_code == 0, result.output
    info = tflite_model.load(out)
    assert info.quantization_state == "full-int8" and not info.has_dynamic_shapes
    assert list(info.inputs[0].shape_signature) == [1, 16, 16, 3]


def test_weights_only_without_arch_says_so_and_shows_the_flag(art):
    _need_tf_keras()
    result = CliRunner().invoke(cli, ["quantize", str(art.dir / "k2_weights.h5"), "--calib", "random"])
    assert result.exit_code == UsageError.exit_code
    assert "holds only weights" in result.stderr and "--arch model_def.py:create_model" in result.stderr


def test_architecture_mismatch_names_the_layer(art):
    with pytest.raises(InputError, match=r"do not fit the --arch model at layer '?dense") as exc:
        keras_io.load(art.dir / "k3.weights.h5", arch=f"{art.dir / 'tiny_arch.py'}:create_wider_model")
    assert "--arch must build exactly" in exc.value.hint
    _need_tf_keras()
    with pytest.raises(InputError, match="do not fit the --arch model"):
        keras_io.load(art.dir / "k2_weights.h5", arch=f"{art.dir / 'tiny_arch.py'}:create_wider_model")


def test_arch_that_does_not_exist(art):
    with pytest.raises(UsageError, match="has no function 'nope'"):
        keras_io.load(art.dir / "k3.weights.h5", arch=f"{art.dir / 'tiny_arch.py'}:nope")
    with pytest.raises(UsageError, match="does not name a function"):
        keras_io.load(art.dir / "k3.weights.h5", arch="tiny_arch.py")


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("broken.h5", b"\x89HDF\r\n\x1a\n" + b"\x00" * 100, "not a valid HDF5 file"),
        ("broken.keras", b"PK\x03\x04 truncated", "not a valid .keras file"),
        ("model.onnx", b"\x08\x07", "the ONNX file has no graph"),
        ("model.tflite", b"\x1c\x00\x00\x00TFL3", "already a TFLite model"),
    ],
)
def test_corrupt_or_unsupported_files(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_bytes(content)
    result = CliRunner().invoke(cli, ["quantize", str(path), "--calib", "random"])
    assert result.exit_code == InputError.exit_code, result.output
    assert message in result.stderr
    assert "Traceback" not in result.output


def test_directory_that_is_not_a_savedmodel(tmp_path):
    with pytest.raises(InputError, match="not a SavedModel"):
        keras_io.load(tmp_path)


@pytest.fixture(scope="module")
def lambda_model(tmp_path_factory):
    import keras

    from edgekit.converters.tf_quiet import silenced

    inp = keras.Input((16, 16, 3))
    x = keras.layers.Lambda(lambda t: t * 2.0)(inp)
    out = keras.layers.Dense(3, activation="softmax")(keras.layers.Flatten()(x))
    folder = tmp_path_factory.mktemp("lambda")
    with silenced():
        for suffix in (".keras", ".h5"):
            keras.Model(inp, out).save(folder / f"lambda{suffix}")
    return folder


@pytest.mark.parametrize("suffix", [".keras", ".h5", "keras2.h5"])
def test_lambda_layers_are_refused_unless_trusted(lambda_model, art, suffix):
    if suffix == "keras2.h5":  # saved by tf_keras, as a 2019 Colab notebook would
        _need_tf_keras()
        path = art.dir / "k2_lambda.h5"
    else:
        path = lambda_model / f"lambda{suffix}"
    with pytest.raises(InputError, match="contains a Lambda layer") as exc:
        keras_io.load(path)
    assert "--trust-model" in exc.value.hint
    assert keras_io.load(path, trust_model=True).input_shape == (16, 16, 3)


@pytest.mark.parametrize(
    "name, stem", [("m.h5", "m"), ("m.weights.h5", "m"), ("m.keras", "m"), ("saved.v2/", "saved.v2")]
)
def test_default_output_stem(tmp_path, name, stem):
    if name.endswith("/"):
        (tmp_path / name).mkdir()  # a SavedModel folder keeps its whole name, dots included
    assert keras_io.default_output_stem(tmp_path / name) == stem


def test_savedmodel_given_as_dot_is_named_after_its_folder(art, monkeypatch):
    """`cd saved_model_dir && edgekit quantize .` writes ../saved_model_dir_int8.tflite."""
    monkeypatch.chdir(art.dir / "k3_savedmodel")
    result = CliRunner().invoke(
        cli, ["quantize", ".", "--calib", "../x.npz", "--scaling", "0..1", "--no-verify", "--quiet"]
    )
    assert result.exit_code == 0, result.output
    out = art.dir / "k3_savedmodel_int8.tflite"
    assert tflite_model.load(out).quantization_state == "full-int8"
    assert (art.dir / "k3_savedmodel_int8.edgekit.json").is_file()


CUSTOM_SOURCE = textwrap.dedent("""
    import keras

    class Doubling(keras.layers.Layer):
        def call(self, x):
            return x * 2.0
""")


def test_custom_layers_need_custom_objects(tmp_path):
    import keras

    from edgekit.converters.tf_quiet import silenced

    module_file = tmp_path / "my_layers.py"
    module_file.write_text(CUSTOM_SOURCE)
    module = keras_io._import_user_module(str(module_file), "--custom-objects")
    inp = keras.Input((16, 16, 3))
    out = keras.layers.Dense(3, activation="softmax")(keras.layers.Flatten()(module.Doubling()(inp)))
    path = tmp_path / "custom.keras"
    with silenced():
        keras.Model(inp, out).save(path)
    del sys.modules[module.__name__]  # as in a fresh process: the class is not importable by name

    with pytest.raises(InputError, match="needs the custom class or function 'Doubling'") as exc:
        keras_io.load(path)
    assert "--custom-objects my_layers.py" in exc.value.hint
    loaded = keras_io.load(path, custom_objects=str(module_file))
    x = np.ones((1, 16, 16, 3), np.float32)
    assert loaded.predict(x).shape == (1, 3)


def test_full_model_with_arch_is_a_usage_error(art):
    with pytest.raises(UsageError, match="only for weights-only files"):
        keras_io.load(art.dir / "k3.keras", arch="tiny_arch.py:create_model")


# ------------------------------------------------------- every error line says what to do (issue 9, item 11)
def _weights_only_h5(path):
    import h5py

    with h5py.File(path, "w") as f:
        f.create_group("dense")
    return path


@pytest.mark.parametrize(
    "case",
    [
        "--arch file missing",
        "--custom-objects file missing",
        "corrupt SavedModel",
        "TFRecord glob without a match",
        "image glob",
    ],
)
def test_each_bad_conversion_input_is_one_line_with_what_to_do(tmp_path, case, monkeypatch):
    from tests.test_cli import one_error_line_with_its_fix

    weights = _weights_only_h5(tmp_path / "w.weights.h5")
    (tmp_path / "sm").mkdir()
    (tmp_path / "sm" / "saved_model.pb").write_bytes(b"\x00garbage")
    (tmp_path / "imgs").mkdir()
    argv, code, says = {
        "--arch file missing": (
            ["quantize", str(weights), "--arch", str(tmp_path / "nope.py") + ":f", "--calib", "random"],
            3,
            "no such file",
        ),
        "--custom-objects file missing": (
            ["quantize", str(weights), "--custom-objects", str(tmp_path / "no.py"), "--calib", "random"],
            3,
            "--custom-objects: no such file",
        ),
        "corrupt SavedModel": (
            ["quantize", str(tmp_path / "sm"), "--calib", "random"],
            3,
            "TensorFlow could not load the SavedModel",
        ),
    }.get(case, (None, None, None))
    if argv is None:  # calibration sources, read after the model: checked on the library call
        from edgekit.board.preprocess import PreprocessSpec
        from edgekit.converters import calibration
        from edgekit.errors import InputError

        source = str(tmp_path / "none" / "*.tfrecord") if "TFRecord" in case else str(tmp_path / "imgs" / "*.png")
        with pytest.raises(InputError) as exc:
            calibration.load(source, PreprocessSpec(8, 8))
        line = f"error: {exc.value}"
        assert exc.value.hint, line
        assert ("no TFRecord files found" if "TFRecord" in case else "a glob names TFRecord files only") in line
        return
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == code, result.output
    assert says in one_error_line_with_its_fix(result.stderr)


def test_a_broken_record_beside_the_model_does_not_block_a_run_with_calib(digits_keras, tmp_path, monkeypatch):
    """Was: exit 3 on the stray record even though --calib says where the data is."""
    model = tmp_path / "m.h5"
    shutil.copy(digits_keras.path, model)
    (tmp_path / "m.edgekit.json").write_text("{broken")

    def reached(*args, **kwargs):
        raise keras_io.InputError("the model loader was reached", "test sentinel")

    monkeypatch.setattr(keras_io, "load", reached)
    result = CliRunner().invoke(cli, ["quantize", str(model), "--calib", "random"])
    assert (
        "warning: ignoring the record beside the model" in result.stderr
        and "the model loader was reached" in result.stderr
    )
    result = CliRunner().invoke(cli, ["quantize", str(model)])  # without --calib the record is needed: refused
    assert result.exit_code == 3 and "fix or delete that file" in result.stderr
