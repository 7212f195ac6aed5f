"""The verification gate decides on evidence: never refuses a good model on noise, always refuses a real loss.

The models are built for the purpose from the session's digits CNN: the same float function with one
hidden unit's range inflated (its Dense column scaled by r, its row in the next Dense by 1/r), so the
per-tensor int8 activations of that layer have r times coarser steps for every other unit: a real int8
loss whose size r sets, measured independently on the held-out test images.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from click.testing import CliRunner

from edgekit.cli.app import cli

pytestmark = pytest.mark.tf


def _inflated(model, r: float, path):
    """``model`` with its widest hidden Dense unit scaled by ``r`` (and undone after): same float function."""
    import keras

    from edgekit.converters.tf_quiet import silenced
    from edgekit.training import digits

    twin = keras.models.clone_model(model)
    twin.set_weights(model.get_weights())
    hidden, last = [layer for layer in twin.layers if isinstance(layer, keras.layers.Dense)]
    x, _, _ = digits.load_folder(digits.write_digits(path.parent / "d").train)
    with silenced():
        unit = int(keras.Model(twin.inputs, hidden.output).predict(x[:200], verbose=0).max(0).argmax())
    k, b = (w.copy() for w in hidden.get_weights())
    k[:, unit] *= r
    b[unit] *= r
    hidden.set_weights([k, b])
    k2, b2 = (w.copy() for w in last.get_weights())
    k2[unit] /= r
    last.set_weights([k2, b2])
    with silenced():
        twin.save(path)
    return path


def _subset(src, dst, per_class: int):
    """A class-folder tree with the first ``per_class`` images of each class (the issue's 300-image folders)."""
    for d in sorted(p for p in src.iterdir() if p.is_dir()):
        (dst / d.name).mkdir(parents=True)
        for f in sorted(d.glob("*.png"))[:per_class]:
            shutil.copy(f, dst / d.name / f.name)
    return dst


def _quantize(*args):
    result = CliRunner().invoke(cli, ["quantize", *map(str, args), "--json", "--quiet"])
    return result, (json.loads(result.stdout) if result.stdout.strip() else None)


def test_a_real_int8_loss_is_refused_while_agreement_stays_above_90(digits_keras, digits_folders, tmp_path):
    from edgekit.converters.quantize import run_int8
    from edgekit.training import digits

    # One hidden unit inflated (and the next layer deflated to match): float is unchanged, int8 loses that unit's
    # resolution. How much it loses is steep in the factor and moves with the trained weights (thread count, seed):
    # the first factor of the ladder whose int8 twin the gate refuses while agreement stays above 90% is the case.
    for factor in (100.0, 110.0, 105.0, 115.0):
        path = _inflated(digits_keras.model, factor, tmp_path / f"inflated{factor:g}.keras")
        result, doc = _quantize(path, "--calib", digits_folders.train, "--scaling", "0..1")
        v = (doc or {}).get("verification") or {}
        if result.exit_code == 6 and v.get("top1_agreement", 0) > 0.9:
            break
    else:
        pytest.fail(f"no inflation of the ladder made a refused model with agreement above 90%: {result.output}")
    assert result.exit_code == 6, result.output
    assert v["accuracy_verdict"] == "failed" and v["accuracy_drop_interval"][0] > 1.0
    assert v["top1_agreement"] > 0.9 and v["agreement_verdict"] != "failed"  # agreement alone would pass it
    assert v["mcnemar_p"] < 0.01 and v["flips"]["float_only"] > v["flips"]["int8_only"]
    assert "more than --max-accuracy-drop 1 beyond doubt" in result.stderr and "95% interval" in result.stderr
    # the advice names the layers int8 loses most in (issue 24): the inflated hidden Dense leads the list
    worst = [a for a in doc["advice"] if a["key"] == "worst_layers"]
    assert worst and worst[0]["found"].split(": ", 1)[1].startswith("FULLY_CONNECTED"), doc["advice"]
    assert any(a["key"] == "remedies" for a in doc["advice"]) and "names the layers" in result.stderr
    # the loss is real: the held-out test images, which the gate never saw, show it too
    x, y, _ = digits.load_folder(digits_folders.test)
    float_acc = np.mean(digits_keras.model.predict(x, verbose=0).argmax(1) == y)
    int8_acc = np.mean(run_int8((tmp_path / f"inflated{factor:g}_int8.tflite").read_bytes(), x).argmax(1) == y)
    assert float_acc - int8_acc > 0.01, (float_acc, int8_acc)


@pytest.mark.slow
def test_a_model_that_loses_nothing_real_is_never_refused_on_noise(digits_keras, digits_folders, tmp_path):
    """300 labelled images, all defaults, five seeds: the case the point-difference gate refused on one flip."""
    folder = _subset(digits_folders.train, tmp_path / "three_hundred", 30)
    path = _inflated(digits_keras.model, 50.0, tmp_path / "mild.keras")  # a flip or two, no real loss

    for seed in range(5):
        result, doc = _quantize(
            path, "--calib", folder, "--scaling", "0..1", "--seed", seed, "-o", tmp_path / f"s{seed}.tflite"
        )
        assert result.exit_code == 0, (seed, result.output)
        v = doc["verification"]
        assert v["samples"] == 300 and v["sources"] == {"held_back": 75, "calibration": 225}
        assert v["accuracy_verdict"] in ("passed", "uncertain") and v["passed"]
        if v["accuracy_verdict"] == "uncertain":  # said, with the interval and how much data would settle it:
            # a warning only when the estimate itself is beyond the limit, else a note (issue 24)
            said = doc["warnings"] if v["accuracy_drop"] > 1.0 else doc["notes"]
            assert any(
                "cannot tell yet whether int8 loses more than --max-accuracy-drop 1" in w
                and "95% interval" in w
                and "labelled samples" in w
                for w in said
            )
            assert not any(
                "cannot tell yet" in w for w in (doc["notes"] if said is doc["warnings"] else doc["warnings"])
            )


def test_swapped_class_folders_are_refused_with_the_mapping(digits_keras, digits_folders, tmp_path):
    swapped = tmp_path / "swapped"
    shutil.copytree(digits_folders.train, swapped)
    (swapped / "3").rename(swapped / "tmp")
    (swapped / "7").rename(swapped / "3")
    (swapped / "tmp").rename(swapped / "7")
    result, doc = _quantize(digits_keras.path, "--calib", swapped, "-o", tmp_path / "s.tflite")
    assert result.exit_code == 6, result.output
    assert "the labels do not follow the model's class order" in result.stderr
    assert "label 3 ('3') is read as class 7" in result.stderr and "label 7 ('7') is read as class 3" in result.stderr
    assert "rename the folders, or pass --labels" in result.stderr
    assert [(m["label"], m["predicted"]) for m in doc["verification"]["class_order"]] == [(3, 7), (7, 3)]


def test_swapped_folders_are_refused_though_another_class_is_weak(digits_keras, digits_folders, tmp_path):
    """Issue 31: folders 3 and 5 swapped while label 8 is read right on only ~30% of its images (the rest of its
    folder are 1s): the old test gave up on any other class read mostly as another; the swap is a cycle, 8 is not."""
    data = tmp_path / "weak"
    shutil.copytree(digits_folders.train, data)
    (data / "3").rename(data / "tmp")
    (data / "5").rename(data / "3")
    (data / "tmp").rename(data / "5")
    eights, ones = sorted((data / "8").glob("*.png")), sorted((data / "1").glob("*.png"))
    keep = len(eights) * 3 // 10
    for f in eights[keep:]:
        f.unlink()
    for f in ones[: len(eights) - keep]:
        shutil.copy(f, data / "8" / f"one_{f.name}")
    result, doc = _quantize(digits_keras.path, "--calib", data, "-o", tmp_path / "w.tflite")
    assert result.exit_code == 6, result.output
    assert "the labels do not follow the model's class order" in result.stderr
    assert "label 3 ('3') is read as class 5" in result.stderr and "label 5 ('5') is read as class 3" in result.stderr
    assert [(m["label"], m["predicted"]) for m in doc["verification"]["class_order"]] == [(3, 5), (5, 3)]


def test_folders_named_like_the_labels_are_matched_by_name(digits_keras, digits_folders, tmp_path):
    """A model whose class order is not the folders' sorted order: --labels says it, folders match by name."""
    renamed = tmp_path / "renamed"
    for d in digits_folders.train.iterdir():
        if d.is_dir():
            shutil.copytree(d, renamed / f"digit_{9 - int(d.name)}")  # class k's folder sorts at 9 - k
    labels = tmp_path / "labels.txt"
    labels.write_text("".join(f"digit_{9 - k}\n" for k in range(10)))
    result, doc = _quantize(digits_keras.path, "--calib", renamed, "--labels", labels, "-o", tmp_path / "n.tflite")
    assert result.exit_code == 0, result.output
    assert doc["verification"]["float_top1"] > 0.9 and doc["verification"]["class_order"] == []
    assert any("matched to the labels by name" in w for w in doc["warnings"])
    # without the labels, the reversed order is found and refused, not passed as a bad accuracy
    result, _ = _quantize(digits_keras.path, "--calib", renamed, "-o", tmp_path / "r.tflite")
    assert result.exit_code == 6 and "do not follow the model's class order" in result.stderr, result.output


@pytest.mark.slow
def test_a_two_class_model_trained_by_edgekit_quantizes_and_builds_with_no_flags(digits_folders, tmp_path):
    two = tmp_path / "two"
    for c in ("0", "1"):
        shutil.copytree(digits_folders.train / c, two / c)
    model = tmp_path / "two.keras"
    train = CliRunner().invoke(cli, ["train", str(two), "-o", str(model), "--epochs", "3", "--quiet"])
    assert train.exit_code == 0, train.output
    result, doc = _quantize(model)
    assert result.exit_code == 0, result.output
    v = doc["verification"]
    assert v["float_top1"] > 0.9 and v["chance"]["near_chance"] is False and v["passed"]
    build = CliRunner().invoke(cli, ["build", str(model), "-o", str(tmp_path / "bundle"), "--quiet"])
    assert build.exit_code == 0, build.output
    assert (tmp_path / "bundle" / "manifest.json").is_file()
