"""edgekit classify: parity with pycoral's classify_image.py, scoring, labels, bad images, records, --json."""

from __future__ import annotations

import json
import os
import shutil
import struct
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

from edgekit.board.backends import select_backend
from edgekit.board.preprocess import PreprocessSpec
from edgekit.cli.app import cli
from edgekit.devices import classify as C
from edgekit.errors import DeviceError, InputError
from edgekit.report import Collector
from edgekit.tflite.model_record import ModelRecord, sidecar_path
from tests.conftest import shared_file

MODEL = "mobilenet_v1_0.25_128_quant.tflite"
COMPILED = "mobilenet_v1_0.25_128_quant_edgetpu.tflite"
IMAGES = ["cat.bmp", "grace_hopper.bmp"]


# ------------------------------------------------------------------------------ pycoral parity
def pycoral_classify_image(model: Path, image: Path, mean: float = 128.0, std: float = 128.0) -> np.ndarray:
    """pycoral examples/classify_image.py (HEAD 46f06c8), step by step, returning the dequantized scores.

    Written out from ../shared/reference/edgetpu.md §4.5-4.6 with the same interpreter package
    edgekit uses, so the only difference left is edgekit's own code.
    """
    from PIL import Image

    interpreter = select_backend().interpreter_cls(model_path=str(model))
    interpreter.allocate_tensors()
    details = interpreter.get_input_details()[0]
    assert details["dtype"] == np.uint8, "Only support uint8 input type."
    _, height, width, _ = details["shape"]
    size = (int(width), int(height))  # common.input_size: (width, height)
    image = Image.open(image).convert("RGB").resize(size, Image.LANCZOS)
    params = details["quantization_parameters"]
    scale, zero_point = params["scales"], params["zero_points"]
    if abs(scale * std - 1) < 1e-5 and abs(mean - zero_point) < 1e-5:
        data = np.asarray(image)
    else:
        normalized = (np.asarray(image) - mean) / (std * scale) + zero_point
        np.clip(normalized, 0, 255, out=normalized)
        data = normalized.astype(np.uint8)
    interpreter.tensor(details["index"])()[0][:, :] = data  # common.set_input
    interpreter.invoke()
    out = interpreter.get_output_details()[0]
    scores = interpreter.tensor(out["index"])().flatten()  # classify.get_scores
    if np.issubdtype(out["dtype"], np.integer):
        o_scale, o_zero = out["quantization"]
        scores = o_scale * (scores.astype(np.int64) - o_zero)
    return scores


def pycoral_get_classes_from_scores(scores: np.ndarray, top_k: int, score_threshold: float = 0.0):
    """pycoral adapters/classify.get_classes_from_scores."""
    top_k = min(top_k, len(scores))
    classes = np.argpartition(scores, -top_k)[-top_k:]
    classes = [c for c in classes if scores[c] >= score_threshold]
    return sorted(((int(c), float(scores[c])) for c in classes), key=lambda c: c[1], reverse=True)


@pytest.mark.parametrize("image", IMAGES)
def test_same_top1_and_scores_as_pycoral_classify_image(image):
    model, img = shared_file(MODEL), shared_file(image)
    theirs = pycoral_classify_image(model, img)
    clf = C.HostClassifier(model)
    ours, _ = clf.infer(clf.prepare(str(img)))
    assert np.max(np.abs(ours - theirs)) <= 1 / 256
    best = theirs.max()
    ((our_id, our_score),) = C.top_k(ours, 1)
    assert abs(our_score - best) <= 1 / 256
    tied = sorted(int(i) for i in np.flatnonzero(theirs == best))
    assert our_id == tied[0]  # pycoral's own pick among ties is arbitrary; ours is the lowest id
    their_top = pycoral_get_classes_from_scores(theirs, 5)
    assert {round(s, 6) for _, s in C.top_k(ours, 5)} == {round(s, 6) for _, s in their_top}


def test_known_classes_on_coral_images():
    """The real model's verdicts, whichever interpreter package runs it.

    LiteRT's kernels score the cat a tie between two cat classes (the lower id wins);
    tflite-runtime 2.14's round differently and do not tie.
    """
    labels = shared_file("imagenet_labels.txt")
    report = C.classify([str(shared_file(i)) for i in IMAGES], shared_file(MODEL), labels=labels, k=2)
    assert [r.top[0].label for r in report.results] == ["tiger cat", "academic gown, academic robe, judge's robe"]
    cat = report.results[0].top
    assert cat[0].score > cat[1].score or cat[0].id < cat[1].id
    assert report.errors == () and report.device == "cpu"


# ------------------------------------------------------------------------------ top_k
def test_top_k_orders_by_score_then_lowest_id_and_applies_threshold():
    scores = np.array([0.1, 0.5, 0.2, 0.5, 0.05, 0.5])
    assert C.top_k(scores, 3) == [(1, 0.5), (3, 0.5), (5, 0.5)]
    assert C.top_k(scores, 10, threshold=0.2) == [(1, 0.5), (3, 0.5), (5, 0.5), (2, 0.2)]
    assert C.top_k(scores, 2, threshold=0.9) == []
    assert C.top_k(scores[::-1].copy(), 1) == [(0, 0.5)]  # permuted input: still the lowest id of the tie


def test_top_k_agrees_with_pycoral_where_there_are_no_ties():
    rng = np.random.default_rng(0)
    for _ in range(200):
        scores = rng.permutation(rng.integers(0, 10_000, size=50).astype(np.float64))
        scores = np.unique(scores)[rng.permutation(len(np.unique(scores)))]  # distinct values
        k = int(rng.integers(1, len(scores)))
        t = float(rng.choice(scores))
        assert C.top_k(scores, k, t) == pycoral_get_classes_from_scores(scores, k, t)


# ------------------------------------------------------------------------------ labels
@pytest.mark.parametrize(
    "text, expected",
    [
        ("0 cat\n1 dog\n", {0: "cat", 1: "dog"}),
        ("0: cat\n1:dog\n2 :  sea lion\n", {0: "cat", 1: "dog", 2: "sea lion"}),
        ("background\ntench, Tinca tinca\n", {0: "background", 1: "tench, Tinca tinca"}),
        ("3 cat\n7  dog\n", {3: "cat", 7: "dog"}),
    ],
)
def test_labels_in_pycorals_formats(text, expected):
    assert C.parse_labels(text) == expected


def test_blank_lines_at_the_end_of_a_labels_file_are_not_labels(tmp_path):
    labels = tmp_path / "labels.txt"
    labels.write_text("".join(f"class {i}\n" for i in range(1001)) + "\n\n")
    assert len(C.read_labels(labels)) == 1001
    result = CliRunner().invoke(
        cli, ["classify", str(shared_file("cat.bmp")), "-m", str(shared_file(MODEL)), "-l", str(labels), "-k", "1"]
    )
    assert result.exit_code == 0 and "warning" not in result.stderr


def test_real_imagenet_labels_are_one_per_line_with_background_first():
    labels = C.read_labels(shared_file("imagenet_labels.txt"))
    assert len(labels) == 1001 and labels[0] == "background" and labels[283] == "tiger cat"


def test_missing_labels_file_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        C.read_labels(tmp_path / "nope.txt")


def test_label_count_mismatch_warns_with_both_numbers(tmp_path):
    short = tmp_path / "labels.txt"
    short.write_text("\n".join(f"class {i}" for i in range(1000)) + "\n")
    result = CliRunner().invoke(
        cli, ["classify", str(shared_file("cat.bmp")), "-m", str(shared_file(MODEL)), "-l", str(short), "--quiet"]
    )
    assert result.exit_code == 0, result.output
    assert "warning: 1000 labels but the model has 1001 classes" in result.stderr


# ------------------------------------------------------------------------------ images
def _png_header_only(path: Path, width: int, height: int) -> None:
    """A valid PNG whose header claims width x height: tiny on disk, huge when decoded."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")
    )


@pytest.fixture()
def bad_images(tmp_path) -> dict[str, Path]:
    from PIL import Image

    rng = np.random.default_rng(1)
    good = tmp_path / "good.jpg"
    Image.fromarray(rng.integers(0, 255, (96, 96, 3), dtype=np.uint8)).save(good, quality=90)
    truncated = tmp_path / "truncated.jpg"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    text = tmp_path / "notes.jpg"
    text.write_text("this is not an image\n")
    bomb = tmp_path / "bomb.png"
    _png_header_only(bomb, 30_000, 30_000)
    return {"good": good, "truncated": truncated, "text": text, "bomb": bomb}


def test_bad_images_are_reported_and_the_rest_go_on(bad_images):
    order = ["truncated", "good", "text", "bomb"]
    report = C.classify([str(bad_images[n]) for n in order] + [str(shared_file("cat.bmp"))], shared_file(MODEL))
    assert [r.image for r in report.results] == [str(bad_images["good"]), str(shared_file("cat.bmp"))]
    errors = {Path(e.image).stem: e.error for e in report.errors}
    assert set(errors) == {"truncated", "notes", "bomb"}
    # what is said after the file name (which alone contains "truncated"): the reason, then the fix
    said = {k: v.split(": ", 1)[1] for k, v in errors.items()}
    assert said["truncated"].startswith("cannot decode image (") and "truncated" in said["truncated"]
    assert said["truncated"].endswith("(the file is damaged or truncated: save or copy it again)")
    assert "not an image" in errors["notes"]
    assert "too large" in errors["bomb"] and "decompression bomb" in errors["bomb"]


def test_folders_globs_and_missing_files(tmp_path):
    from PIL import Image

    for name in ["b.png", "a.jpg", "c.bmp"]:
        Image.new("RGB", (8, 8), (10, 200, 30)).save(tmp_path / name)
    (tmp_path / "readme.txt").write_text("not an image")
    (tmp_path / "empty").mkdir()
    images, errors = C.expand_images(
        [
            str(tmp_path),
            str(tmp_path / "*.png"),
            str(tmp_path / "x*.jpg"),
            str(tmp_path / "missing.jpg"),
            str(tmp_path / "empty"),
        ]
    )
    assert images == [str(tmp_path / n) for n in ["a.jpg", "b.png", "c.bmp", "b.png"]]
    assert [Path(e["image"]).name for e in errors] == ["x*.jpg", "missing.jpg", "empty"]
    assert "no file matches" in errors[0]["error"] and "no such file" in errors[1]["error"]


def test_an_empty_image_argument_is_an_error_not_the_current_folder(tmp_path, monkeypatch):
    """`edgekit classify "$IMG"` with IMG unset must not classify every image under the working folder."""
    from PIL import Image

    Image.new("RGB", (8, 8)).save(tmp_path / "here.png")
    monkeypatch.chdir(tmp_path)
    images, errors = C.expand_images(["", " "])
    assert (
        images == [] and [e["error"] for e in errors] == ["an image argument is empty (is a shell variable unset?)"] * 2
    )


def test_a_folder_of_class_folders_is_searched_recursively(tmp_path):
    from PIL import Image

    for name in ["cats/b.png", "cats/a.png", "dogs/deep/c.jpg"]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (8, 8)).save(tmp_path / name)
    images, errors = C.expand_images([str(tmp_path)])
    assert images == [str(tmp_path / n) for n in ["cats/a.png", "cats/b.png", "dogs/deep/c.jpg"]] and not errors


def test_hidden_files_in_a_folder_are_skipped_like_a_glob_skips_them(tmp_path):
    """A folder copied from a Mac holds '._a.png' companions that are not images; a notebook leaves checkpoints."""
    from PIL import Image

    Image.new("RGB", (8, 8)).save(tmp_path / "a.png")
    (tmp_path / "._a.png").write_bytes(b"\x00\x05\x16\x07 AppleDouble")
    (tmp_path / ".ipynb_checkpoints").mkdir()
    Image.new("RGB", (8, 8)).save(tmp_path / ".ipynb_checkpoints" / "a-checkpoint.png")
    hidden_root = tmp_path / ".cache" / "photos"  # a hidden folder given by name is searched
    hidden_root.mkdir(parents=True)
    Image.new("RGB", (8, 8)).save(hidden_root / "b.png")
    assert C.expand_images([str(tmp_path)]) == ([str(tmp_path / "a.png")], [])
    assert C.expand_images([str(tmp_path / "*.png")]) == ([str(tmp_path / "a.png")], [])
    assert C.expand_images([str(hidden_root)]) == ([str(hidden_root / "b.png")], [])


def test_prefetching_gives_the_same_results_in_the_same_order():
    paths = [str(shared_file(n)) for n in IMAGES * 4]
    clf = C.HostClassifier(shared_file(MODEL))
    seq = clf.run(paths, k=3, workers=1)
    par = clf.run(paths, k=3, workers=3)
    assert [(r.image, r.top) for r in seq.results] == [(r.image, r.top) for r in par.results]


# ------------------------------------------------------------------------------ preprocessing
def _record_copy(tmp_path: Path, spec: PreprocessSpec | None, labels: list[str] | None) -> Path:
    model = tmp_path / "mine.tflite"
    shutil.copy(shared_file(MODEL), model)
    sidecar_path(model).write_text(ModelRecord(spec, labels).to_json())
    return model


def test_recorded_preprocessing_and_labels_are_used_without_flags(tmp_path):
    spec = PreprocessSpec(128, 128, mean=(127.5,), std=(127.5,), resize="bilinear")
    labels = [f"recorded {i}" for i in range(1001)]
    model = _record_copy(tmp_path, spec, labels)
    cat = str(shared_file("cat.bmp"))
    recorded = C.HostClassifier(model)
    assert recorded.spec == spec and recorded.spec_source.startswith("recorded")
    flagged = C.HostClassifier(shared_file(MODEL), mean=(127.5,), std=(127.5,))
    default = C.HostClassifier(shared_file(MODEL))
    from dataclasses import replace

    flagged.spec = replace(flagged.spec, resize="bilinear")
    r_scores, _ = recorded.infer(recorded.prepare(cat))
    f_scores, _ = flagged.infer(flagged.prepare(cat))
    d_scores, _ = default.infer(default.prepare(cat))
    assert np.array_equal(r_scores, f_scores)
    assert not np.array_equal(r_scores, d_scores)  # the record really changed the preprocessing
    top = recorded.run([cat], k=1).results[0].top[0]
    assert top.label == f"recorded {top.id}"


def test_record_inside_the_model_metadata_is_used(tmp_path):
    """How `edgekit quantize` ships its record: a metadata entry named 'edgekit' (no sidecar here)."""
    pytest.importorskip("ai_edge_litert", reason="writing metadata uses ai-edge-litert's schema module")
    from edgekit.tflite.metadata import set_metadata
    from edgekit.tflite.model_record import METADATA_NAME

    record = ModelRecord(PreprocessSpec(128, 128, mean=(127.5,), std=(127.5,)), [f"meta {i}" for i in range(1001)])
    model = tmp_path / "with_metadata.tflite"
    model.write_bytes(set_metadata(shared_file(MODEL).read_bytes(), METADATA_NAME, record.to_json().encode()))
    clf = C.HostClassifier(model)
    assert clf.spec_source == "recorded (model metadata)" and clf.spec == record.preprocess
    assert clf.run([str(shared_file("cat.bmp"))], k=1).results[0].top[0].label.startswith("meta ")


def test_recorded_preprocessing_that_does_not_fit_the_model_is_refused(tmp_path):
    model = _record_copy(tmp_path, PreprocessSpec(128, 128, channels="L"), None)
    with pytest.raises(InputError, match="1-channel images but the model takes 3"):
        C.HostClassifier(model)


def test_record_of_the_cpu_twin_is_found_for_a_compiled_model(tmp_path, no_edgetpu):
    labels = [f"twin {i}" for i in range(1001)]
    model = _record_copy(tmp_path, None, labels)
    compiled = tmp_path / "mine_edgetpu.tflite"
    shutil.copy(shared_file(COMPILED), compiled)
    report = C.classify([str(shared_file("cat.bmp"))], compiled, k=1)
    assert report.model == str(model) and report.device == "cpu"
    assert report.results[0].top[0].label.startswith("twin ")


def test_mean_std_override_reproduces_classify_image_with_other_values():
    model, cat = shared_file(MODEL), shared_file("cat.bmp")
    theirs = pycoral_classify_image(model, cat, mean=100.0, std=64.0)
    clf = C.HostClassifier(model, mean=(100.0,), std=(64.0,))
    ours, _ = clf.infer(clf.prepare(str(cat)))
    assert np.max(np.abs(ours - theirs)) <= 1 / 256 + 1e-9


@pytest.mark.parametrize(
    "dtype, scale, zero_point, channels",
    [
        ("uint8", 1 / 128, 128, "RGB"),
        ("uint8", 0.003921568859368563, 0, "RGB"),
        ("int8", 0.003921568859368563, -128, "BGR"),
        ("int8", 1 / 128, 0, "L"),
        ("uint8", 1.0, 0, "RGB"),
        ("uint8", 1 / 128 * (1 + 9e-6), 128, "RGB"),
    ],
)
def test_integer_shortcut_of_prepare_equals_the_float_path(dtype, scale, zero_point, channels):
    """prepare() skips the float round trip when it maps pixels to pixels (- 128): it must change nothing."""
    from PIL import Image

    from edgekit.board import preprocess as P

    rng = np.random.default_rng(7)
    image = Image.fromarray(rng.integers(0, 256, (40, 50, 3), dtype=np.uint8))
    spec = P.spec_from_input_quantization(32, 24, 1 if channels == "L" else 3, dtype, scale, zero_point)
    spec = PreprocessSpec(32, 24, channels, "bilinear", spec.mean, spec.std)
    assert P._integer_shift(spec, dtype, scale, zero_point) is not None  # the shortcut is taken
    fast = P.prepare(image, spec, dtype, scale, zero_point)
    slow = P.quantize(P.to_float(image, spec), dtype, scale, zero_point)[None, ...]
    assert fast.dtype == slow.dtype and fast.shape == slow.shape and np.array_equal(fast, slow)


def test_mean_std_flags_take_one_value_or_one_per_channel():
    model, cat = shared_file(MODEL), shared_file("cat.bmp")
    theirs = pycoral_classify_image(model, cat, mean=100.0, std=64.0)
    result = CliRunner().invoke(
        cli,
        [
            "classify",
            str(cat),
            "-m",
            str(model),
            "--mean",
            "100, 100,100",
            "--std",
            "64",
            "-k",
            "1",
            "--json",
            "--quiet",
        ],
    )
    assert result.exit_code == 0, result.output
    top = json.loads(result.stdout)["results"][0]["top"][0]
    assert top["id"] == int(np.argmax(theirs)) and abs(top["score"] - theirs.max()) <= 1 / 256


@pytest.mark.parametrize(
    "flags, says",
    [
        (["--std", "wide"], "--std"),
        (["--mean", "1,2"], "1 or 3 values"),
        (["--std", "nan"], "finite"),
        (["--mean", "inf"], "finite"),
        (["--std", "0"], "not be zero"),
        (["--std", "1e-300"], "at least 1e-06"),
        (["--std=-64"], "at least 1e-06"),
        (["--mean", "1e300"], "finite"),
    ],
)
def test_bad_mean_std_values_are_usage_errors_not_garbage_scores(flags, says):
    result = CliRunner().invoke(cli, ["classify", str(shared_file("cat.bmp")), "-m", str(shared_file(MODEL)), *flags])
    assert result.exit_code == 2 and says in result.stderr and result.stdout == ""
    assert "Traceback" not in result.stderr and "RuntimeWarning" not in result.stderr
    line = result.stderr.strip()
    assert len(line.splitlines()) == 1 and line.endswith(")") and " (" in line  # what to do, too


# ------------------------------------------------------------------------------ compiled models
def test_compiled_model_without_edgetpu_runs_its_cpu_twin_and_says_so(no_edgetpu):
    told = Collector()
    report = C.classify([str(shared_file("cat.bmp"))], shared_file(COMPILED), k=1, report=told)
    assert report.device == "cpu" and report.model == str(shared_file(MODEL))
    assert any(MODEL in n and "instead of" in n for n in told.notes)


def test_the_fallback_note_is_shown_before_the_images_are_worked_on(monkeypatch, no_edgetpu):
    """With a big folder the user must learn at once that the model runs on the CPU, not after minutes."""
    import click

    events: list[str] = []
    echo, prepare = click.echo, C.HostClassifier.prepare
    monkeypatch.setattr(
        click, "echo", lambda message=None, **kw: (events.append(f"echo {message}"), echo(message, **kw))
    )
    monkeypatch.setattr(
        C.HostClassifier, "prepare", lambda self, path: (events.append("prepare"), prepare(self, path))[1]
    )
    cat = str(shared_file("cat.bmp"))
    result = CliRunner().invoke(cli, ["classify", cat, cat, cat, "-m", str(shared_file(COMPILED)), "-k", "1"])
    assert result.exit_code == 0, result.output
    note = next(i for i, e in enumerate(events) if e.startswith("echo note: running the CPU model"))
    assert note < events.index("prepare")


def test_compiled_model_without_twin_fails_naming_the_file_to_pass(tmp_path, no_edgetpu):
    alone = tmp_path / "alone_edgetpu.tflite"
    shutil.copy(shared_file(COMPILED), alone)
    with pytest.raises(DeviceError) as info:
        C.classify([str(shared_file("cat.bmp"))], alone)
    assert "needs" in info.value.message and "alone.tflite" in str(info.value)
    result = CliRunner().invoke(cli, ["classify", str(shared_file("cat.bmp")), "-m", str(alone)])
    assert result.exit_code == DeviceError.exit_code
    assert result.stderr.count("\n") == 1 and "alone.tflite" in result.stderr


# ------------------------------------------------------------------------------ --json
def test_json_schema_and_exit_codes(bad_images):
    cat, hopper = str(shared_file("cat.bmp")), str(shared_file("grace_hopper.bmp"))
    args = [
        "classify",
        cat,
        hopper,
        "-m",
        str(shared_file(MODEL)),
        "-l",
        str(shared_file("imagenet_labels.txt")),
        "-k",
        "3",
        "--json",
        "--quiet",
    ]
    ok = CliRunner().invoke(cli, args)
    assert ok.exit_code == 0, ok.output
    doc = json.loads(ok.stdout)
    assert list(doc) == ["model", "device", "backend", "first_inference_ms", "results", "errors"]
    assert doc["device"] == "cpu" and doc["backend"] == select_backend().name and doc["errors"] == []
    assert isinstance(doc["first_inference_ms"], float) and doc["first_inference_ms"] > 0
    assert [r["image"] for r in doc["results"]] == [cat, hopper]
    for r in doc["results"]:
        assert set(r) == {"image", "ms", "top"} and isinstance(r["ms"], float) and len(r["top"]) == 3
        for t in r["top"]:
            assert set(t) == {"id", "label", "score"}
            assert isinstance(t["id"], int) and isinstance(t["label"], str) and 0 <= t["score"] <= 1

    partial = CliRunner().invoke(cli, args + [str(bad_images["text"])])
    assert partial.exit_code == InputError.exit_code
    doc = json.loads(partial.stdout)
    said = f"{bad_images['text']}: not an image edgekit reads (pass JPEG, PNG, BMP, GIF, WebP, TIFF or PPM images)"
    assert len(doc["results"]) == 2 and doc["errors"] == [{"image": str(bad_images["text"]), "error": said}]
    assert partial.stderr.strip().splitlines() == [f"error: {said}"]  # one line for one bad image
    text = CliRunner().invoke(cli, [a for a in args if a != "--json"] + [str(bad_images["text"])])
    assert text.exit_code == 3 and text.stderr.strip().splitlines()[-1:] == [f"error: {said}"]
    assert sum(line.startswith("error:") for line in text.stderr.splitlines()) == 1


def test_text_output_without_labels_shows_ids():
    result = CliRunner().invoke(
        cli, ["classify", str(shared_file("grace_hopper.bmp")), "-m", str(shared_file(MODEL)), "-k", "1", "--quiet"]
    )
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith(str(shared_file(MODEL))) and " on cpu " in lines[0]
    # the expected class and score from pycoral's own classify_image.py steps, not from an edgekit run
    theirs = pycoral_classify_image(shared_file(MODEL), shared_file("grace_hopper.bmp"))
    assert lines[2].split() == [f"{theirs.max():.5f}", str(int(np.argmax(theirs)))]


def test_bad_device_string_is_a_usage_error():
    result = CliRunner().invoke(
        cli, ["classify", str(shared_file("cat.bmp")), "-m", str(shared_file(MODEL)), "--device", "tpu0"]
    )
    assert result.exit_code == 2 and "usb:N" in result.stderr


# ------------------------------------------------------------------------------ other real models
def test_grayscale_input_without_channel_axis_reads_the_mnist_nine():
    """keras_lstm_mnist_ptq takes [1, 28, 28] (no channel axis): the real digit must come out as 9."""
    report = C.classify([str(shared_file("mnist_nine.bmp"))], shared_file("keras_lstm_mnist_ptq.tflite"), k=1)
    assert report.errors == () and report.results[0].top[0].id == 9 and report.results[0].top[0].score > 0.9


@pytest.mark.parametrize(
    "model, says",
    [
        ("deeplabv3_mnv2_dm05_pascal_quant.tflite", "not a classifier"),
        ("model_invoking_error.tflite", "cannot load the model"),
    ],
)
def test_models_that_are_not_image_classifiers_are_refused_in_one_line(model, says):
    result = CliRunner().invoke(cli, ["classify", str(shared_file("cat.bmp")), "-m", str(shared_file(model))])
    assert result.exit_code == InputError.exit_code
    assert result.stderr.startswith("error: ") and says in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("wrong", ["imagenet_labels.txt", "cat.bmp"])
def test_a_file_that_is_not_a_model_is_named_in_the_error(wrong):
    path = shared_file(wrong)
    result = CliRunner().invoke(cli, ["classify", str(shared_file("cat.bmp")), "-m", str(path)])
    assert result.exit_code == InputError.exit_code
    assert result.stderr.startswith(f"error: {path}: not a valid TFLite model") and result.stderr.count("\n") == 1
    assert "-m/--model" in result.stderr


def _logits_model(path: Path, signature: list[int] | None = None) -> Path:
    """A uint8 [1,2,2,1] input reshaped to 4 output scores (scale 1/64, zero point 128): like logits, some negative."""
    builder = pytest.importorskip("tests.tflite_builder", reason="building a model uses ai-edge-litert's schema module")
    gb = builder.GraphBuilder()
    x = gb.tensor([1, 2, 2, 1], "uint8", scale=1 / 64, zero_point=128, name="input", signature=signature)
    y = gb.tensor([1, 4], "uint8", scale=1 / 64, zero_point=128, name="logits")
    gb.op("RESHAPE", [x, gb.const([1, 4])], [y])
    path.write_bytes(gb.build([x], [y]))
    return path


def test_negative_scores_of_a_model_without_softmax_are_shown_by_default(tmp_path):
    from PIL import Image

    model = _logits_model(tmp_path / "logits.tflite")
    image = tmp_path / "four.png"
    Image.fromarray(np.array([[0, 64], [128, 200]], dtype=np.uint8), "L").save(image)
    result = CliRunner().invoke(cli, ["classify", str(image), "-m", str(model), "-k", "4", "--json", "--quiet"])
    assert result.exit_code == 0, result.output
    top = json.loads(result.stdout)["results"][0]["top"]
    assert [(t["id"], t["score"]) for t in top] == [(3, 1.125), (2, 0.0), (1, -1.0), (0, -2.0)]
    result = CliRunner().invoke(cli, ["classify", str(image), "-m", str(model), "-t", "0", "--json", "--quiet"])
    assert [t["id"] for t in json.loads(result.stdout)["results"][0]["top"]] == [3, 2]


def test_an_input_of_any_size_is_refused_rather_than_fed_1x1_images(tmp_path):
    """The interpreter reports 1 for a dynamic dimension; resizing every image to that is silent garbage."""
    model = _logits_model(tmp_path / "any_size.tflite", signature=[1, -1, -1, 1])
    result = CliRunner().invoke(cli, ["classify", str(shared_file("cat.bmp")), "-m", str(model)])
    assert result.exit_code == InputError.exit_code and result.stdout == ""
    assert "input size is not fixed (shape signature [1, -1, -1, 1])" in result.stderr
    assert "--input-size" in result.stderr
    batch_free = _logits_model(tmp_path / "any_batch.tflite", signature=[-1, 2, 2, 1])  # a free batch is fine
    assert CliRunner().invoke(cli, ["classify", str(shared_file("cat.bmp")), "-m", str(batch_free)]).exit_code == 0


def test_model_facts_skip_the_parse_only_where_it_cannot_matter(tmp_path):
    from edgekit.tflite import model as tflite_model

    assert C._TFLITE_IDENTIFIER == tflite_model.FILE_IDENTIFIER
    assert tflite_model.EDGETPU_CUSTOM_OP.encode() == C.EDGETPU_CUSTOM_OP_BYTES
    assert C.model_facts(shared_file(MODEL)) == (False, {})
    compiled, _ = C.model_facts(shared_file(COMPILED))
    assert compiled is True
    not_a_model = tmp_path / "x.tflite"
    not_a_model.write_bytes(b"hello world, not a model")
    with pytest.raises(InputError, match="not a valid TFLite model"):
        C.model_facts(not_a_model)
    with pytest.raises(InputError, match="no such file"):
        C.model_facts(tmp_path / "missing.tflite")


def test_a_16bit_image_is_classified_like_its_8bit_copy(tmp_path):
    """Issue 9 item 0: Pillow turned a 16-bit grey cat all white ("nail"); scaled, it is the 8-bit cat."""
    grey = np.asarray(Image.open(shared_file("cat.bmp")).convert("L"))
    Image.fromarray(grey).save(tmp_path / "cat8.png")
    Image.fromarray(grey.astype(np.uint16) * 257).save(tmp_path / "cat16.png")
    Image.fromarray(grey.astype(np.uint16) * 257).save(tmp_path / "cat16.tif")
    report = C.classify([str(tmp_path / n) for n in ("cat8.png", "cat16.png", "cat16.tif")], shared_file(MODEL), k=3)
    tops = [[t.id for t in r.top] for r in report.results]
    assert len(tops) == 3 and 281 <= tops[0][0] <= 285, tops  # ImageNet ids 281-285 are cats
    assert tops[1] == tops[0] and tops[2] == tops[0], tops
    assert [r.top for r in report.results[1:]] == [report.results[0].top] * 2


def test_small_things_a_user_meets(tmp_path):
    """Issue 9, item 12: -t nan kept nothing with exit 0; an empty labels file gave no count warning;
    a file name that is not UTF-8 came out in --json as a lone surrogate strict parsers refuse."""
    model, cat = str(shared_file(MODEL)), shared_file("cat.bmp")
    r = CliRunner().invoke(cli, ["classify", str(cat), "-m", model, "-t", "nan"])
    assert r.exit_code == 2 and "-t/--threshold nan keeps no score" in r.stderr
    (tmp_path / "empty.txt").write_text("")
    r = CliRunner().invoke(cli, ["classify", str(cat), "-m", model, "-l", str(tmp_path / "empty.txt"), "-k", "1"])
    assert r.exit_code == 0 and "warning: 0 labels but the model has 1001 classes" in r.stderr
    if sys.platform.startswith("linux"):  # file names are bytes there
        odd = os.fsdecode(os.fsencode(str(tmp_path)) + b"/caf\xe9.bmp")
        shutil.copy(cat, odd)
        r = CliRunner().invoke(cli, ["classify", odd, "-m", model, "-k", "1", "--json"])
        assert r.exit_code == 0, r.output
        r.stdout.encode("utf-8")  # no lone surrogate left
        assert json.loads(r.stdout)["results"][0]["image"].endswith("caf\\xe9.bmp")


def test_a_broken_record_is_ignored_when_nothing_it_says_is_used(tmp_path):
    """classify with both --mean and --std (every preprocessing value given) and benchmark (no preprocessing at
    all) go on, with a warning, past a record beside the model that cannot be read; classify without them
    still stops, naming the file (was: all three stopped)."""
    from click.testing import CliRunner

    from edgekit.cli.app import cli

    model = tmp_path / "m.tflite"
    shutil.copyfile(shared_file(MODEL), model)
    (tmp_path / "m.edgekit.json").write_text("{not json")
    image = str(shared_file("cat.bmp"))
    stopped = CliRunner().invoke(cli, ["classify", image, "-m", str(model)])
    assert stopped.exit_code == 3 and "m.edgekit.json" in stopped.stderr
    overridden = CliRunner().invoke(
        cli, ["classify", image, "-m", str(model), "--mean", "128", "--std", "128", "-k", "1", "--quiet"]
    )
    assert overridden.exit_code == 0, overridden.output
    assert "warning: ignoring a record that cannot be read" in overridden.stderr
    timed = CliRunner().invoke(cli, ["benchmark", "-m", str(model), "-n", "2", "--warmup", "0", "--quiet"])
    assert timed.exit_code == 0 and "warning: ignoring a record that cannot be read" in timed.stderr


def test_a_model_without_a_record_does_not_import_model_record(tmp_path):
    """Start-up (issue 25): the record's names repeated in devices/classify agree with edgekit.tflite.model_record, and
    model_record (json, its record type) is imported only where a record may be: metadata or a sidecar."""
    import subprocess
    import sys

    from edgekit.tflite import model_record

    assert (C._RECORD_NAME, C._SIDECAR_SUFFIX) == (model_record.METADATA_NAME, model_record.SIDECAR_SUFFIX)
    model = tmp_path / "m_edgetpu.tflite"
    assert C.find_record(model, {}) is None
    sidecar = model_record.sidecar_path(model_record.cpu_model_path(model))
    sidecar.write_text(model_record.ModelRecord(labels=["a", "b"]).to_json())
    found = C.find_record(model, {})
    assert found is not None and found[0].labels == ["a", "b"] and found[1] == str(sidecar)
    code = (
        "import sys\nfrom edgekit.devices.classify import HostClassifier\nHostClassifier(sys.argv[1], device='cpu')\n"
        "assert 'edgekit.tflite.model_record' not in sys.modules and 'json' not in sys.modules\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(shared_file(MODEL))], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
