"""quantize finds the preprocessing from labelled class folders, records the folder names as labels,
and measures int8 against float accuracy (issue 11).

Each fixture model is trained (seconds) on the digits with its preprocessing outside the model, in
one of the keras.applications conventions, and quantized with class-folder calibration and no flags.
The accuracy checks recompute the preprocessing here, from numpy, not from edgekit's record.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from click.testing import CliRunner

from edgekit.board.preprocess import PreprocessSpec, open_image, pixels, to_float
from edgekit.board.preprocess import quantize as quantize_input
from edgekit.cli.app import cli
from edgekit.converters import preprocess_search
from edgekit.converters.preprocess_search import ORIGIN_DATA, Trial, decide
from edgekit.results import metrics
from edgekit.tflite import model as tflite_model
from edgekit.tflite import model_record

MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)
# How each convention is written in training code (keras.applications.imagenet_utils.preprocess_input),
# on RGB uint8 pixels: the ground truth the tests hold edgekit's choice against.
TRUE_PREPROCESSING = {
    "raw": lambda x: x.astype(np.float32),
    "0..1": lambda x: x.astype(np.float32) / 255.0,
    "-1..1": lambda x: x.astype(np.float32) / 127.5 - 1.0,
    "torch": lambda x: (x.astype(np.float32) / 255.0 - MEAN) / STD,
    "caffe": lambda x: x[..., ::-1].astype(np.float32) - np.array([103.939, 116.779, 123.68], np.float32),
}
RGB = PreprocessSpec(32, 32, "RGB")
# The models below are trained: they must pass under any seed and thread count (run them with
# EDGEKIT_TEST_SEED=1, 2 and TF_NUM_INTRAOP_THREADS=1, 2 before relying on a change).
SEED = int(os.environ.get("EDGEKIT_TEST_SEED", "0"))


# ------------------------------------------------------------------------------------------ pure parts
def _trial(name, correct):
    return Trial(name, preprocess_search.convention_spec(name, RGB), np.asarray(correct, bool))


def _correct(n, wrong):
    """(n,) bool: right everywhere but at the indices ``wrong``."""
    out = np.ones(n, bool)
    out[list(wrong)] = False
    return out


def test_a_clear_winner_is_chosen_a_close_race_that_matters_is_refused_and_chance_is_refused():
    n = 200
    good = _correct(n, range(6))  # 97%
    poor = np.arange(n) % 2 == 0  # 50%
    result = decide([_trial("raw", poor), _trial("0..1", good)], 10)
    assert (result.verdict, result.best.name, result.tied, result.chosen) == ("chosen", "0..1", [], "0..1")
    # 64% and 59% on 100 samples, right on different samples: the data cannot say which, and the
    # choice could change top-1 by far more than the margin: the user chooses (exit 6 with both flags)
    a = _correct(100, list(range(36)))
    b = _correct(100, list(range(20, 61)))
    result = decide([_trial("raw", a), _trial("-1..1", b)], 10)
    assert (result.verdict, result.chosen, result.tied) == ("ambiguous", None, ["-1..1"])
    message, hint = preprocess_search.describe_refusal(result)
    assert "not clearly better than -1..1" in message and "could change top-1 by up to" in message
    assert "--scaling raw" in hint and "--scaling -1..1" in hint
    chance = np.arange(n) % 8 == 0  # 12.5% with 10 classes
    result = decide([_trial("raw", chance), _trial("0..1", np.zeros(n, bool))], 10)
    assert result.verdict == "near-chance"
    assert "near chance" in preprocess_search.describe_refusal(result)[0]


def test_an_eleven_point_paired_difference_on_300_samples_is_a_clear_winner():
    """Issue 24: '0..1 (80.7%) is not clearly better than raw on 300 labelled samples' was refused
    (a BatchNorm-first CNN, where raw comes near). 33 more samples right of 300 is not a close call,
    even with many samples on which the two differ."""
    n = 300
    right_01 = _correct(n, range(58))  # 80.7%
    right_raw = _correct(n, list(range(25)) + list(range(58, 124)))  # 69.7%: 33 only-0..1, 58 + ... differ
    for names in (("0..1", "raw"), ("raw", "0..1")):  # whichever the prior prefers
        trials = {"0..1": right_01, "raw": right_raw}
        result = decide([_trial(k, trials[k]) for k in names], 10)
        assert result.chosen == "0..1" and result.verdict in ("chosen", "choice"), result
    # and when the better one is the one the prior ranks last, the data still picks it
    result = decide([_trial("raw", right_01), _trial("0..1", right_raw)], 10)
    assert result.chosen == "raw", result


def test_conventions_the_data_cannot_tell_apart_and_that_cannot_change_the_result_are_a_choice():
    """Issue 23: a -1..1 digits CNN scoring 98% under both -1..1 and torch normalization on another
    machine was refused. Either choice gives the same result: the common default is used, in one note."""
    n = 300
    minus = _correct(n, [1, 2, 3, 4, 5, 6])  # 98.0%
    for torch_wrong in ([1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 6, 7], [0, 1, 2, 3, 4, 5]):  # ahead, behind, even
        torch = _correct(n, torch_wrong)
        result = decide([_trial("torch", torch), _trial("-1..1", minus), _trial("raw", np.arange(n) % 3 == 0)], 10)
        assert (result.verdict, result.chosen, result.tied) == (
            "choice",
            "-1..1",
            ["-1..1"] if result.best.name == "torch" else ["torch"],
        )
        note = result.choice_note()
        assert note.count("\n") == 0 and "torch" in note and "--mean" in note and "using -1..1" in note
        assert result.record().to_dict()["chosen"] == "-1..1" and result.record().to_dict()["verdict"] == "choice"
    # the model's own layer (raw) comes before the prior
    result = decide([_trial("0..1", minus), _trial("raw", minus)], 10, preferred=("raw",))
    assert (result.verdict, result.chosen) == ("choice", "raw")
    assert "own input layer" in result.choice_note()


def test_a_comparison_is_typed_and_round_trips():
    a, b = _trial("0..1", _correct(100, range(3))), _trial("raw", _correct(100, range(10)))
    c = preprocess_search.TrialComparison.of(b, a)
    assert (c.only_name, c.only_against) == (0, 7) and c.difference == pytest.approx(-0.07)
    assert c.interval[0] < c.difference < c.upper_one_sided < c.interval[1] and c.p_value == pytest.approx(0.5**7)
    row = c.record()
    assert (row.convention, row.only_convention, row.only_against) == ("raw", 0, 7)
    assert type(row).from_dict(json.loads(json.dumps(row.to_dict()))) == row


def test_a_close_call_on_the_first_samples_is_measured_again_on_all_of_them():
    """Was: at most 200 samples, even with more labelled calibration data, so close calls were refused."""
    from types import SimpleNamespace

    n = 1000
    i = np.arange(n)
    right = {"0..1": i % 20 != 0, "raw": (i % 20 != 0) & (i % 25 != 1)}  # raw: 8 more misses in 200, 40 in 1000
    first_value = {200.0: "raw", round(200 / 255, 3): "0..1"}

    def predict(x):  # the convention from the value a 200-valued pixel gets; right or wrong per sample
        name = first_value.get(round(float(x[0, 0, 0, 0]), 3) if x[0, 0, 0, 0] < 100 else float(x[0, 0, 0, 0]))
        ok = right.get(name, np.zeros(n, bool))[: len(x)]
        scores = np.zeros((len(x), 10), np.float32)
        scores[np.arange(len(x)), np.where(ok, 0, 1)] = 1.0
        return scores

    # 600 calibration samples, 200 held back, 200 more from --eval: the search is not limited to calibration's
    px, y = np.full((n, 2, 2, 3), 200, np.uint8), np.zeros(n, np.int64)
    data = SimpleNamespace(
        calib_pixels=px[:600], calib_labels=y[:600], holdout_pixels=px[600:800], holdout_labels=y[600:800]
    )
    extra = SimpleNamespace(calib_pixels=px[800:], calib_labels=y[800:], holdout_pixels=px[:0], holdout_labels=y[:0])
    spec, origin, result, warnings, notes = preprocess_search.settle(
        preprocess_search.UNDECIDED, RGB, data, predict, 10, None, extra=extra
    )
    assert (result.verdict, result.best.name, result.samples) == ("chosen", "0..1", n)
    assert origin == preprocess_search.ORIGIN_DATA and spec.scaling_name == "0..1" and warnings == notes == []
    first = preprocess_search.search(predict, px[:200], y[:200], RGB, 10)
    assert (first.verdict, first.tied, first.chosen) == ("choice", ["raw"], "0..1")  # what 200 samples alone said


def test_near_chance_is_an_exact_test_against_guessing_that_scales_with_classes_and_samples():
    # 10 classes: 12% of 200 is what guessing gives (p ~0.2); 19% is beyond guessing (p < 0.001)
    assert metrics.near_chance(0.12, 200, 10) and not metrics.near_chance(0.19, 200, 10)
    assert metrics.near_chance(0.2, 20, 10)  # 4 of 20: guessing does that one time in eight
    assert not metrics.near_chance(0.05, 1000, 1000)  # 50x chance
    assert metrics.near_chance(0.003, 200, 1000)
    # 2 classes: a working classifier is not "near chance" (the old margin made even 100% so)
    assert not metrics.near_chance(1.0, 75, 2) and not metrics.near_chance(0.7, 75, 2)
    assert metrics.near_chance(0.55, 75, 2) and metrics.near_chance(0.0, 75, 2)


def test_a_two_class_model_gets_its_preprocessing_chosen():
    n = 120
    right = np.ones(n, bool)
    coin = np.arange(n) % 2 == 0
    result = decide([_trial("raw", coin), _trial("0..1", right), _trial("-1..1", coin)], 2)
    assert (result.verdict, result.best.name) == ("chosen", "0..1")


def test_each_convention_is_one_spec_that_to_float_applies():
    image = (np.random.default_rng(0).random((32, 32, 3)) * 255).astype(np.uint8)
    for name, truth in TRUE_PREPROCESSING.items():
        spec = preprocess_search.convention_spec(name, RGB)
        assert np.allclose(to_float(image, spec), truth(image), atol=1e-4), name
    assert (
        preprocess_search.flags_for(preprocess_search.convention_spec("caffe", RGB))
        == "--mean 103.939,116.779,123.68 --std 1 --channels BGR"
    )


def test_top_k_accuracy():
    scores = np.array([[0.1, 0.7, 0.2], [0.5, 0.3, 0.2], [0.2, 0.2, 0.6]])
    assert metrics.top_k_accuracy(scores, np.array([1, 1, 0]), 1) == pytest.approx(1 / 3)
    assert metrics.top_k_accuracy(scores, np.array([1, 1, 0]), 2) == 1.0  # a tie: the lower class id is in
    assert metrics.top_k_accuracy(scores, np.array([1, 1, 1]), 2) == pytest.approx(2 / 3)
    assert metrics.top_k_accuracy(scores, np.array([1, 2, 1]), 5) == 1.0


# ------------------------------------------------------------------------------------------ real models


def _rgb_pixels(folder):
    from edgekit.training import digits

    x, y, paths = digits.load_folder(folder, RGB)
    return x.astype(np.uint8), y, paths


@pytest.fixture(scope="session")
def digits_pixels(digits_folders):
    return _rgb_pixels(digits_folders.train), _rgb_pixels(digits_folders.test)


def _train(x, y, epochs=4, seed=SEED, wrap=None):
    from edgekit.converters.tf_quiet import import_tensorflow, silenced
    from edgekit.training import digits

    import_tensorflow()
    with silenced():
        model = digits.build_cnn(seed=seed)
        if wrap:
            model = wrap(model)
        model.fit(x, y, batch_size=32, epochs=epochs, verbose=0, shuffle=True)
    return model


def _quantize(path, calib, **kw):
    from edgekit.converters.quantize import QuantizeOptions, quantize

    return quantize(QuantizeOptions(model=str(path), calib=str(calib), samples=200, show_progress=False, **kw))


def _int8_accuracy(tflite_path, x_float, y):
    """Top-1 of the int8 model on inputs preprocessed here, quantized with the model's own input scale."""
    from ai_edge_litert.interpreter import Interpreter

    interp = Interpreter(model_path=str(tflite_path), num_threads=2)
    interp.allocate_tensors()
    inp, out = interp.get_input_details()[0], interp.get_output_details()[0]
    scale, zp = inp["quantization"]
    right = 0
    for sample, label in zip(x_float, y):
        interp.set_tensor(inp["index"], quantize_input(sample[None], "uint8", scale, zp))
        interp.invoke()
        right += int(interp.get_tensor(out["index"]).argmax() == label)
    return right / len(y)


@pytest.fixture(scope="session")
def conventions(digits_pixels, digits_folders, tmp_path_factory):
    """name → (Keras model, QuantizeResult): trained under that convention, quantized with no flags (once)."""
    built = {}

    def get(name):
        if name not in built:
            (x, y, _), _ = digits_pixels
            model = _train(TRUE_PREPROCESSING[name](x), y)
            path = tmp_path_factory.mktemp("convention") / "model.keras"
            model.save(path)
            built[name] = model, _quantize(path, digits_folders.train)
        return built[name]

    return get


@pytest.mark.tf
@pytest.mark.parametrize("name", list(TRUE_PREPROCESSING))
def test_quantize_finds_each_convention_and_int8_stays_within_a_point_of_float(name, conventions, digits_pixels):
    model, result = conventions(name)
    _, (xt, yt, _) = digits_pixels
    pre = result.summary.to_dict()["preprocess"]
    search = pre["search"]
    chosen = search["chosen"]
    assert pre["origin"] == ORIGIN_DATA, search
    x_true = TRUE_PREPROCESSING[name](xt)
    float_acc = float(np.mean(model.predict(x_true, verbose=0).argmax(1) == yt))
    assert float_acc > 0.85, f"the {name} model did not learn ({float_acc:.1%})"
    if chosen != name:
        # On some machines two conventions score alike on such a model (issue 23: -1..1 and torch both 98%):
        # a free choice, made only when it cannot change the result; the true one must be in the race.
        assert search["verdict"] == "choice" and name in [search["table"][0]["convention"], *search["tied"]], search
        chosen_acc = float(np.mean(model.predict(TRUE_PREPROCESSING[chosen](xt), verbose=0).argmax(1) == yt))
        assert chosen_acc >= float_acc - 0.08, (name, chosen, float_acc, chosen_acc)
    x_used = TRUE_PREPROCESSING[chosen](xt)
    used_acc = float(np.mean(model.predict(x_used, verbose=0).argmax(1) == yt))
    int8_acc = _int8_accuracy(result.output, x_used, yt)
    assert abs(used_acc - int8_acc) <= 0.01, (name, chosen, used_acc, int8_acc)
    # the record reproduces the convention (classify applies it with no flags) and names the classes
    rec = model_record.ModelRecord.from_json(tflite_model.load(result.output).metadata["edgekit"])
    image = open_image(_rgb_paths(digits_pixels)[0])
    assert np.allclose(to_float(image, rec.preprocess), TRUE_PREPROCESSING[chosen](pixels(image, RGB)), atol=1e-4)
    assert rec.labels == [str(i) for i in range(10)]
    v = result.summary.to_dict()["verification"]
    assert v["labelled"] and v["passed"] and v["float_top1"] > 0.8 and v["accuracy_drop"] <= 1.0


def _rgb_paths(digits_pixels):
    return digits_pixels[1][2]


@pytest.fixture(scope="session")
def digits_300(digits_folders, tmp_path_factory):
    """30 training images per class in class folders: the 300-image calibration set of issue 24."""
    import shutil

    root = tmp_path_factory.mktemp("digits_300") / "train"
    for d in sorted(p for p in digits_folders.train.iterdir() if p.is_dir()):
        (root / d.name).mkdir(parents=True)
        for f in sorted(d.glob("*.png"))[:30]:
            shutil.copy(f, root / d.name / f.name)
    return root


def _colab_cnn(seed):
    """A Colab-style CNN: BatchNormalization first, then Conv-ReLU blocks (nearly scale-invariant)."""
    import keras
    from keras import layers

    keras.utils.set_random_seed(seed)
    model = keras.Sequential(
        [
            keras.Input((32, 32, 3)),
            layers.BatchNormalization(),
            layers.Conv2D(16, 3, activation="relu"),
            layers.MaxPooling2D(),
            layers.Conv2D(32, 3, activation="relu"),
            layers.MaxPooling2D(),
            layers.Flatten(),
            layers.Dense(64, activation="relu"),
            layers.Dense(10, activation="softmax"),
        ]
    )
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    return model


@pytest.mark.tf
@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_colab_style_x255_model_quantizes_with_no_flags_on_300_images(seed, digits_pixels, digits_300, tmp_path):
    """Issue 24 item 3: every model trained with x / 255 in the input pipeline was refused with exit 6.
    A BatchNorm-first CNN scores near its 0..1 accuracy under caffe (and raw comes near): the data cannot
    always tell them apart, but the choice cannot change the result, so quantize picks x / 255, says so in
    a note, and the int8 model is verified."""
    from edgekit.converters.tf_quiet import import_tensorflow, silenced
    from edgekit.report import Collector

    import_tensorflow()
    (x, y, _), (xt, yt, _) = digits_pixels
    with silenced():
        model = _colab_cnn(seed + 10 * SEED)
        model.fit(x / 255.0, y, batch_size=32, epochs=3, verbose=0, shuffle=True)
    path = tmp_path / "colab.keras"
    model.save(path)
    told = Collector()
    from edgekit.converters.quantize import QuantizeOptions, quantize

    result = quantize(QuantizeOptions(model=str(path), calib=str(digits_300), show_progress=False, report=told))
    pre = result.summary.to_dict()["preprocess"]
    search = pre["search"]
    assert pre["origin"] == ORIGIN_DATA and search["samples"] == 300, search  # held-back samples searched too
    true_acc = float(np.mean(model.predict(xt / 255.0, verbose=0).argmax(1) == yt))
    assert true_acc > 0.85, f"the model did not learn ({true_acc:.1%})"
    if search["verdict"] == "chosen":
        assert search["chosen"] == "0..1", search
    else:  # a choice among conventions the data cannot tell apart: said once, in a note
        race = [search["table"][0]["convention"], *search["tied"]]
        assert search["verdict"] == "choice" and "0..1" in race and search["chosen"] in race, search
        assert [n for n in told.notes if n.startswith("preprocessing:")] == [
            n for n in result.summary.notes if n.startswith("preprocessing:")
        ]
        assert len([n for n in told.notes if n.startswith("preprocessing:")]) == 1
        used = TRUE_PREPROCESSING[search["chosen"]](xt)
        used_acc = float(np.mean(model.predict(used, verbose=0).argmax(1) == yt))
        assert used_acc >= true_acc - 0.08, (search["chosen"], used_acc, true_acc)
    assert not any("preprocessing" in w for w in told.warnings), told.warnings
    assert result.summary.to_dict()["verification"]["passed"]


@pytest.mark.tf
def test_caffe_is_told_from_the_others_on_colour_images_where_the_channel_order_matters(digits_pixels, tmp_path):
    """The digits are grey (R = G = B), where BGR and RGB look alike; tinted, the caffe model's BGR input
    differs from every RGB convention's, and the search must still pick caffe (channels BGR)."""
    from PIL import Image

    (x, y, _), (xt, yt, _) = digits_pixels

    def tint(g):  # a different curve per channel: red ink on a blue-ish ground
        g = g[..., 0].astype(np.float32)
        return np.stack([g, 0.5 * g + 40, 255 - 0.8 * g], -1).clip(0, 255).astype(np.uint8)

    cx, ct = tint(x), tint(xt)
    folder = tmp_path / "colour"
    for k, (img, label) in enumerate(zip(cx, y)):
        (folder / str(label)).mkdir(parents=True, exist_ok=True)
        Image.fromarray(img, "RGB").save(folder / str(label) / f"{k:04d}.png")
    model = _train(TRUE_PREPROCESSING["caffe"](cx), y)
    path = tmp_path / "caffe.keras"
    model.save(path)
    result = _quantize(path, folder)
    pre = result.summary.to_dict()["preprocess"]
    assert pre["search"]["chosen"] == "caffe" and pre["channels"] == "BGR", pre["search"]
    x_true = TRUE_PREPROCESSING["caffe"](ct)
    float_acc = float(np.mean(model.predict(x_true, verbose=0).argmax(1) == yt))
    assert float_acc > 0.85 and abs(float_acc - _int8_accuracy(result.output, x_true, yt)) <= 0.01


@pytest.mark.tf
def test_savedmodel_export_with_rescaling_inside_is_found_to_take_raw_pixels(
    digits_pixels, digits_folders, tmp_path_factory
):
    import keras

    (x, y, _), (xt, yt, _) = digits_pixels

    def with_rescaling(cnn):
        inp = keras.Input((32, 32, 3))
        model = keras.Model(inp, cnn(keras.layers.Rescaling(1 / 255.0)(inp)))
        model.compile(optimizer=keras.optimizers.Adam(2e-3), loss="sparse_categorical_crossentropy")
        return model

    model = _train(x.astype(np.float32), y, wrap=with_rescaling)
    folder = tmp_path_factory.mktemp("exported") / "digits_export"
    from edgekit.converters.tf_quiet import silenced

    with silenced():
        model.export(folder)
    result = _quantize(folder, digits_folders.train)
    assert result.summary.to_dict()["source"]["format"] == "savedmodel"
    assert result.summary.to_dict()["preprocess"]["search"]["chosen"] == "raw"
    float_acc = float(np.mean(model.predict(xt.astype(np.float32), verbose=0).argmax(1) == yt))
    int8_acc = _int8_accuracy(result.output, xt.astype(np.float32), yt)
    assert float_acc > 0.85 and abs(float_acc - int8_acc) <= 0.01, (float_acc, int8_acc)


@pytest.mark.tf
def test_a_model_trained_on_noise_labels_is_refused_with_the_table(digits_pixels, digits_folders, tmp_path):
    (x, y, _), _ = digits_pixels
    noise = np.random.default_rng(1).integers(0, 10, len(y))
    model = _train(x.astype(np.float32) / 255.0, noise, epochs=2)
    path = tmp_path / "noise.keras"
    model.save(path)
    result = CliRunner().invoke(
        cli, ["quantize", str(path), "--calib", str(digits_folders.train), "--samples", "200", "--quiet"]
    )
    assert result.exit_code == 6, result.output
    assert "near chance under every preprocessing convention" in result.stderr
    for name in TRUE_PREPROCESSING:
        assert f"  {name}" in result.stdout  # the table, one line per convention
    assert "--scaling -1..1" in result.stdout and "--channels BGR" in result.stdout
    assert not (tmp_path / "noise_int8.tflite").exists()
    as_json = CliRunner().invoke(
        cli, ["quantize", str(path), "--calib", str(digits_folders.train), "--samples", "200", "--quiet", "--json"]
    )
    doc = json.loads(as_json.stdout)
    assert as_json.exit_code == 6 and doc["output"] is None
    assert doc["preprocess"]["search"]["verdict"] == "near-chance"
    assert {r["convention"] for r in doc["preprocess"]["search"]["table"]} == set(TRUE_PREPROCESSING)


@pytest.mark.tf
def test_without_labels_nothing_is_assumed(conventions, digits_folders, tmp_path):
    """A flat folder (no classes) and no record or flag: refused with the flags to pass (exit 2)."""
    import shutil

    model, _ = conventions("0..1")
    flat = tmp_path / "flat"
    flat.mkdir()
    for f in sorted(digits_folders.train.glob("*/*.png"))[:60]:
        shutil.copy(f, flat / f"{f.parent.name}_{f.name}")
    path = tmp_path / "m.keras"
    model.save(path)
    result = CliRunner().invoke(cli, ["quantize", str(path), "--calib", str(flat), "--quiet"])
    assert result.exit_code == 2, result.output
    assert "the calibration data has no labels" in result.stderr
    assert "--scaling 0..1" in result.stderr and "--channels BGR" in result.stderr
    # a class-folder set whose class count does not fit the outputs: a warning, and no labels recorded
    three = tmp_path / "three"
    for c in "012":
        shutil.copytree(digits_folders.train / c, three / c)
    result = CliRunner().invoke(
        cli, ["quantize", str(path), "--calib", str(three), "--scaling", "0..1", "--no-verify", "--quiet", "--json"]
    )
    assert result.exit_code == 0, result.output
    assert "3 class folders for 10 model outputs" in result.stderr
    assert json.loads(result.stdout)["labels"] is None


@pytest.mark.tf
def test_int8_losing_accuracy_fails_with_both_numbers(conventions, digits_folders, tmp_path):
    """Class scores squeezed below one uint8 step: float still right, int8 loses the decision (exit 6)."""
    import keras

    from edgekit.converters.tf_quiet import silenced

    model, _ = conventions("-1..1")

    squeezed = keras.models.clone_model(model)
    squeezed.set_weights(model.get_weights())
    last = squeezed.layers[-1]
    kernel, bias = last.get_weights()
    last.set_weights([kernel * 2e-3, bias * 2e-3])
    path = tmp_path / "squeezed.keras"
    with silenced():
        squeezed.save(path)
    result = CliRunner().invoke(
        cli,
        [
            "quantize",
            str(path),
            "--calib",
            str(digits_folders.train),
            "--scaling",
            "-1..1",
            "--samples",
            "100",
            "--min-agreement",
            "0",
            "--json",
            "--quiet",
        ],
    )
    assert result.exit_code == 6, result.output
    v = json.loads(result.stdout)["verification"]
    assert v["float_top1"] > 0.85 and v["accuracy_drop"] > 1.0 and not v["passed"]
    assert (
        "points lost (95% interval" in result.stderr and "more than --max-accuracy-drop 1 beyond doubt" in result.stderr
    )
    assert v["accuracy_verdict"] == "failed" and v["accuracy_drop_interval"][0] > 1.0
    assert (tmp_path / "squeezed_int8.tflite").is_file()
