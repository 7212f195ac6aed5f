"""The preprocessing spec edgekit quantize settles on (record → model → flags), labels, input sizes."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from edgekit.board.preprocess import PreprocessSpec
from edgekit.cli.app import cli
from edgekit.converters.keras_io import LoadedSource
from edgekit.converters.quantize import QuantizeOptions, read_labels, resolve_spec
from edgekit.errors import InputError, UsageError
from edgekit.tflite import model as tflite_model
from edgekit.tflite import model_record


def _loaded(shape=(32, 32, 3), raw=False):
    return LoadedSource(path=None, format="keras", input_shape=shape, call=None, raw_pixel_input=raw)


def test_rescaling_layer_means_raw_pixels():
    spec, origin, warnings = resolve_spec(_loaded(raw=True), QuantizeOptions(model="m"), None)
    assert (spec.mean, spec.std, spec.scaling_name) == ((0.0,), (1.0,), "raw")
    assert "Rescaling" in origin and warnings == []


def test_unknown_scaling_is_left_for_the_data_to_settle():
    spec, origin, warnings = resolve_spec(_loaded(), QuantizeOptions(model="m"), None)
    assert origin == "undecided" and warnings == []  # preprocess_search.settle measures it, or refuses
    spec, origin, warnings = resolve_spec(_loaded(), QuantizeOptions(model="m", channels="BGR"), None)
    assert (spec.channels, spec.scaling_name, origin) == ("BGR", "0..1", "the flags") and "0..1" in warnings[0]


def test_record_then_flags_override():
    recorded = PreprocessSpec(32, 32, "BGR", "bilinear", (127.5,), (127.5,))
    spec, origin, _ = resolve_spec(_loaded(), QuantizeOptions(model="m"), recorded)
    assert spec == recorded and origin == "the record beside the model"
    opts = QuantizeOptions(model="m", mean=(123.7, 116.3, 103.5), std=(58.4,), resize="bicubic", channels="RGB")
    spec, origin, _ = resolve_spec(_loaded(), opts, recorded)
    assert (spec.mean, spec.std, spec.resize, spec.channels) == ((123.7, 116.3, 103.5), (58.4,), "bicubic", "RGB")
    assert origin == "the flags"
    spec, _, _ = resolve_spec(_loaded(), QuantizeOptions(model="m", scaling="-1..1"), None)
    assert spec.scaling_name == "-1..1"


def test_std_alone_means_mean_0_as_in_quantize():
    """One rule for --mean/--std alone (issue 9 item 4): classify kept the recorded/derived mean, quantize 0."""
    from edgekit.devices import classify as C
    from tests.conftest import shared_file
    from tests.devices.test_classify import MODEL

    clf = C.HostClassifier(shared_file(MODEL), std=(64.0,))  # the derived spec has mean 128 (the input's zero point)
    spec, _, _ = resolve_spec(
        _loaded(), QuantizeOptions(model="m", std=(64.0,)), PreprocessSpec(32, 32, mean=(128.0,), std=(128.0,))
    )
    assert (clf.spec.mean, clf.spec.std) == ((0.0,), (64.0,)) == (spec.mean, spec.std)
    clf = C.HostClassifier(shared_file(MODEL), mean=(100.0,))
    spec, _, _ = resolve_spec(
        _loaded(), QuantizeOptions(model="m", mean=(100.0,)), PreprocessSpec(32, 32, mean=(128.0,), std=(128.0,))
    )
    assert (clf.spec.mean, clf.spec.std) == ((100.0,), (1.0,)) == (spec.mean, spec.std)


def test_grayscale_models_and_channel_mismatch():
    spec, _, _ = resolve_spec(_loaded((28, 28, 1)), QuantizeOptions(model="m"), None)
    assert spec.channels == "L" and (spec.width, spec.height) == (28, 28)
    with pytest.raises(UsageError, match="does not fit the model's 1-channel input"):
        resolve_spec(_loaded((28, 28, 1)), QuantizeOptions(model="m", channels="RGB"), None)


def test_any_size_models_need_input_size():
    with pytest.raises(UsageError, match="accepts any input size") as exc:
        resolve_spec(_loaded((None, None, 3)), QuantizeOptions(model="m"), None)
    assert "--input-size 224x224" in exc.value.hint
    spec, _, _ = resolve_spec(_loaded((None, None, 3)), QuantizeOptions(model="m", input_size=(40, 30)), None)
    assert (spec.width, spec.height) == (40, 30)
    with pytest.raises(UsageError, match="differs from the model's fixed input"):
        resolve_spec(_loaded(), QuantizeOptions(model="m", input_size=(40, 30)), None)


@pytest.mark.parametrize(
    "text, labels",
    [
        ("cat\ndog\n\n", ["cat", "dog"]),
        ("0 cat\n1 dog\n", ["cat", "dog"]),
        ("0: background\n2: dog\n", ["background", "1", "dog"]),
        ("\ufeff0 cat\n1 dog\n", ["cat", "dog"]),  # a BOM from a Windows editor
    ],
)
def test_label_files(tmp_path, text, labels):
    (tmp_path / "l.txt").write_text(text, encoding="utf-8")
    assert read_labels(str(tmp_path / "l.txt")) == labels


def test_recorded_labels_are_the_ones_classify_would_read(testdata):
    """One reader for both commands: the labels quantize records are those classify shows."""
    from edgekit.devices.classify import read_labels as classify_labels

    path = testdata / "imagenet_labels.txt"
    table = classify_labels(path)
    assert read_labels(str(path)) == [table[i] for i in range(len(table))]


def test_missing_or_empty_label_file(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        read_labels(str(tmp_path / "nope.txt"))
    (tmp_path / "empty.txt").write_text("\n")
    with pytest.raises(InputError, match="empty"):
        read_labels(str(tmp_path / "empty.txt"))


@pytest.mark.tf
def test_rescaling_behind_augmentation_and_resizing_still_means_raw_pixels(tmp_path):
    """The Keras tutorials' layout: a data_augmentation Sequential, Resizing, then Rescaling(1/255)."""
    import keras

    from edgekit.converters import keras_io
    from edgekit.converters.tf_quiet import silenced

    augment = keras.Sequential([keras.layers.RandomFlip("horizontal"), keras.layers.RandomRotation(0.1)])
    inp = keras.Input((40, 40, 3))
    x = keras.layers.Rescaling(1 / 255.0)(keras.layers.Resizing(32, 32)(augment(inp)))
    out = keras.layers.Dense(2, activation="softmax")(keras.layers.GlobalAveragePooling2D()(x))
    plain_out = keras.layers.Dense(2)(keras.layers.GlobalAveragePooling2D()(keras.layers.Conv2D(4, 3)(augment(inp))))
    with silenced():
        keras.Model(inp, out).save(tmp_path / "tutorial.keras")
        keras.Model(inp, plain_out).save(tmp_path / "plain.keras")
    spec, origin, warnings = resolve_spec(keras_io.load(tmp_path / "tutorial.keras"), QuantizeOptions(model="m"), None)
    assert spec.scaling_name == "raw" and "Rescaling" in origin and warnings == []
    spec, origin, _ = resolve_spec(keras_io.load(tmp_path / "plain.keras"), QuantizeOptions(model="m"), None)
    assert origin == "undecided"  # a Conv first: nothing says raw pixels


@pytest.mark.tf
def test_a_model_without_a_channel_axis_is_grayscale(digits_folders, tmp_path):
    """The Keras MNIST tutorials' model: Input((28, 28)) then Flatten; calibrated on RGB images, made L."""
    import keras

    from edgekit.converters.tf_quiet import silenced

    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [keras.Input((28, 28)), keras.layers.Flatten(), keras.layers.Dense(10, activation="softmax")]
    )
    with silenced():
        model.save(tmp_path / "mnist.keras")
    # --no-verify: the untrained model is at chance, which verification on the labelled folders refuses
    result = CliRunner().invoke(
        cli,
        [
            "quantize",
            str(tmp_path / "mnist.keras"),
            "--calib",
            str(digits_folders.train),
            "--scaling",
            "0..1",
            "--samples",
            "100",
            "--no-verify",
            "--quiet",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    info = tflite_model.load(tmp_path / "mnist_int8.tflite")
    assert list(info.inputs[0].shape_signature) == [1, 28, 28, 1] and info.quantization_state == "full-int8"
    rec, _ = model_record.find_record(tmp_path / "mnist_int8.tflite", info.metadata)
    assert rec.preprocess.channels == "L"


@pytest.mark.tf
def test_real_rescaling_model_any_size_and_labels_end_to_end(tmp_path):
    import keras

    from edgekit.converters.tf_quiet import silenced

    inp = keras.Input((None, None, 3))
    x = keras.layers.Rescaling(1 / 255.0)(inp)
    x = keras.layers.Conv2D(4, 3, use_bias=False)(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    model = keras.Model(inp, keras.layers.Dense(2, activation="softmax")(x))
    path = tmp_path / "any.keras"
    with silenced():
        model.save(path)
    (tmp_path / "labels.txt").write_text("no\nyes\nmaybe\n")
    args = [
        "quantize",
        str(path),
        "--calib",
        "random",
        "--samples",
        "10",
        "--no-verify",
        "--input-size",
        "24x20",
        "--labels",
        str(tmp_path / "labels.txt"),
    ]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "3 labels for 2 model outputs" in result.stderr
    out = tmp_path / "any_int8.tflite"
    info = tflite_model.load(out)
    assert list(info.inputs[0].shape_signature) == [1, 20, 24, 3]
    rec, _ = model_record.find_record(out, info.metadata)
    assert rec.preprocess.scaling_name == "raw" and (rec.preprocess.width, rec.preprocess.height) == (24, 20)
    assert rec.labels == ["no", "yes", "maybe"]
    bad = CliRunner().invoke(cli, ["quantize", str(path), "--calib", "random", "--input-size", "24"])
    assert bad.exit_code == 2 and "WIDTHxHEIGHT" in bad.stderr
