"""edgekit detect: layouts read from the model, decode + NMS, geometry, the CLI; on models built here and the
real Ultralytics YOLOv8n export in ../shared/testdata/detection."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgekit.board import decode as detection
from edgekit.board.decode import Geometry
from edgekit.detection.layout import AmbiguousLayoutError, find_layout
from edgekit.devices.detect import detect
from edgekit.errors import InputError
from edgekit.results.detect import BBox, DetectionLayout, DetectResult, Layout, Object
from tests.conftest import shared_file
from tests.detection_models import image_for, postprocess_model, save_png, slice_model, with_ultralytics_metadata

HW = (32, 32)
N = 21  # anchors of a 32x32 input at strides 8/16/32: 16 + 4 + 1


def run(tmp_path: Path, model: bytes, values, name: str = "m", input_scale=None, input_zp=None, **kw):
    path = tmp_path / f"{name}.tflite"
    path.write_bytes(model)
    q = {} if input_scale is None else {"input_scale": input_scale, "input_zp": input_zp}
    image = save_png(tmp_path / f"{name}.png", image_for(HW, values, **q))
    return detect([str(image)], path, **kw)


def boxes_of(report: DetectResult):
    return [
        (o.id, round(o.score, 2), tuple(round(v, 1) for v in o.bbox.to_dict().values()))
        for o in report.results[0].objects
    ]


# ------------------------------------------------------------------------------------ layouts
def yolo_values(nc: int = 2) -> np.ndarray:
    v = np.zeros((4 + nc, N))
    v[:, 3] = [0.5, 0.5, 0.25, 0.5] + [0.9] + [0.1] * (nc - 1)
    v[:, 5] = [0.52, 0.5, 0.25, 0.5] + [0.8] + [0.1] * (nc - 1)  # overlaps anchor 3, same class: suppressed
    v[:, 6] = [0.52, 0.5, 0.25, 0.5] + [0.1, 0.6] + [0.0] * (nc - 2)  # same place, other class: kept
    v[:, 7] = [0.2, 0.2, 0.1, 0.1] + [0.24] + [0.0] * (nc - 1)  # below --conf
    return v


def test_yolo_channels_first(tmp_path):
    r = run(tmp_path, slice_model(HW, [{"shape": [1, 6, N]}]), [yolo_values()])
    assert r.layout.kind == Layout.YOLO and r.layout.transposed and r.layout.boxes_normalized is True
    assert any("quantization range" in s for s in r.layout.source)
    # 0.52 quantized is 67/128
    assert boxes_of(r) == [(0, 0.9, (12.0, 8.0, 20.0, 24.0)), (1, 0.6, (12.8, 8.0, 20.8, 24.0))]
    assert r.results[0].invoke_ms >= 0 and r.results[0].postprocess_ms > 0


def test_yolo_anchors_last_axis_and_pixel_boxes(tmp_path):
    v = yolo_values().T.copy()  # [1, N, 6]
    v[:, :4] *= 32 / 20  # pixels / 20 so they fit the input's range: requantized below
    model = slice_model(HW, [{"shape": [1, N, 6], "requant": (0.5, -128)}])
    path = tmp_path / "px.tflite"
    path.write_bytes(model)
    layout = find_layout(path)
    assert layout.kind == Layout.YOLO and not layout.transposed and layout.boxes_normalized is False


def test_yolov5_objectness(tmp_path):
    nc = 3
    v = np.zeros((3 * N, 5 + nc))
    v[10] = [0.5, 0.5, 0.5, 0.5, 0.9, 0.1, 0.8, 0.1]  # 0.72 for class 1
    v[11] = [0.5, 0.5, 0.5, 0.5, 0.3, 0.9, 0.0, 0.0]  # 0.27 for class 0
    v[12] = [0.5, 0.5, 0.5, 0.5, 0.2, 1.0, 0.0, 0.0]  # 0.2: below conf
    r = run(tmp_path, slice_model(HW, [{"shape": [1, 3 * N, 5 + nc]}]), [v])
    assert r.layout.kind == Layout.YOLOV5
    assert boxes_of(r) == [(1, 0.72, (8.0, 8.0, 24.0, 24.0)), (0, 0.27, (8.0, 8.0, 24.0, 24.0))]


def test_end2end(tmp_path):
    v = np.zeros((10, 6))
    v[0] = [0.1, 0.2, 0.5, 0.6, 0.8, 1]
    v[1] = [0.1, 0.2, 0.5, 0.6, 0.7, 0]  # NMS already done by the model: both kept
    r = run(tmp_path, slice_model(HW, [{"shape": [1, 10, 6]}]), [v])
    assert r.layout.kind == Layout.END2END
    assert [(i, s) for i, s, _ in boxes_of(r)] == [(1, 0.8), (0, 0.7)]
    assert boxes_of(r)[0][2] == (3.2, 6.5, 16.0, 19.2)  # 0.2 quantized: 26/128


@pytest.mark.parametrize("order", ["tf1", "tf2"])
def test_postprocess_op_both_orders(tmp_path, order):
    """The real TFLite_Detection_PostProcess op runs; its outputs are found by tensor in either graph order."""
    anchors = np.array([[0.5, 0.5, 0.4, 0.4], [0.2, 0.2, 0.1, 0.1], [0.8, 0.8, 0.2, 0.2]])
    enc = np.zeros((3, 4))
    cls = np.array([[0, 0.9, 0.1], [0, 0.1, 0.6], [0, 0.05, 0.02]])
    r = run(tmp_path, postprocess_model(HW, anchors, 2, order), [enc, cls], name=order)
    assert r.layout.kind == Layout.POSTPROCESS
    roles = dict(r.layout.roles)
    assert roles == (
        {"boxes": 0, "classes": 1, "scores": 2, "count": 3}
        if order == "tf1"
        else {"scores": 0, "boxes": 1, "count": 2, "classes": 3}
    )
    assert dict(r.layout.options)["max_detections"] == 10 and dict(r.layout.options)["num_classes"] == 2
    assert boxes_of(r) == [(0, 0.9, (9.6, 9.6, 22.4, 22.4)), (1, 0.6, (4.8, 4.8, 8.0, 8.0))]


def _hostile_outputs(monkeypatch, change):
    """The interpreter's outputs for each image, changed by ``change`` (a list of arrays -> a list of arrays) as
    a damaged or hostile model's could be: the real pipeline after the interpreter runs on them."""
    from edgekit.board.detector import Detector

    infer = Detector.infer
    monkeypatch.setattr(Detector, "infer", lambda self, tensor: (change(infer(self, tensor)[0]), 1.0))


def test_boxes_that_cannot_be_boxes_are_dropped_or_ordered_with_one_note(tmp_path, monkeypatch):
    """Issue 31: NaN, infinite and inverted boxes, NaN scores and class ids like -2^63 passed through with numpy's
    raw RuntimeWarning, and --save then failed (exit 70)."""
    import warnings

    rows = np.zeros((1, 10, 6), np.float32)
    rows[0, 0] = [0.1, 0.2, 0.5, 0.6, 0.9, 1]  # sound
    rows[0, 1] = [0.5, 0.6, 0.1, 0.2, 0.8, 0]  # inverted corners: ordered
    rows[0, 2] = [np.nan, 0.2, 0.5, 0.6, 0.7, 0]  # NaN coordinate
    rows[0, 3] = [0.1, np.inf, 0.5, 0.6, 0.7, 0]  # infinite coordinate
    rows[0, 4] = [0.1, 0.2, 0.5, 0.6, np.nan, 0]  # NaN score
    rows[0, 5] = [0.1, 0.2, 0.5, 0.6, 0.7, -(2.0**63)]
    rows[0, 6] = [0.1, 0.2, 0.5, 0.6, 0.7, np.nan]  # NaN class
    rows[0, 7] = [0.1, 0.2, 0.5, 0.6, 0.7, 1e30]
    _hostile_outputs(monkeypatch, lambda outs: [rows])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's RuntimeWarning reached stderr before
        r = run(tmp_path, slice_model(HW, [{"shape": [1, 10, 6]}]), [np.zeros((10, 6))], save=tmp_path / "out")
    assert r.layout.kind == Layout.END2END and not r.errors
    assert boxes_of(r) == [(1, 0.9, (3.2, 6.4, 16.0, 19.2)), (0, 0.8, (3.2, 6.4, 16.0, 19.2))]
    assert [n for n in r.notes if "dropped" in n] == [
        "5 candidate detections dropped: a NaN or infinite box or score, or a class id outside the model's classes; "
        "1 box with inverted corners ordered (the model's raw outputs)"
    ]
    assert (tmp_path / "out" / "m.png").is_file()


def test_a_postprocess_count_that_is_no_number_is_exit_3(tmp_path, monkeypatch):
    """The rows past the count are the op's uninitialized memory (reading them all found scores of 1e34): a count
    of NaN or inf is refused, not read."""
    anchors = np.array([[0.5, 0.5, 0.4, 0.4], [0.2, 0.2, 0.1, 0.1], [0.8, 0.8, 0.2, 0.2]])
    cls = np.array([[0, 0.9, 0.1], [0, 0.1, 0.6], [0, 0.05, 0.02]])

    def nan_count(outs):
        return [np.full_like(o, np.nan) if o.size == 1 else o for o in outs]

    _hostile_outputs(monkeypatch, nan_count)
    with pytest.raises(
        InputError, match="outputs do not fit the postprocess layout: its detection count is nan, not a number of boxes"
    ) as caught:
        run(tmp_path, postprocess_model(HW, anchors, 2), [np.zeros((3, 4)), cls])
    assert caught.value.exit_code == 3


def test_a_split_head_whose_score_rows_differ_from_its_box_rows_is_exit_3(tmp_path, monkeypatch):
    b, s = dfl_values(3, False)
    _hostile_outputs(monkeypatch, lambda outs: [outs[0], outs[1][:, :-1]])
    model = slice_model(HW, [{"shape": [1, N, 64]}, {"shape": [1, N, 3]}], input_scale=0.1, input_zp=0)
    with pytest.raises(InputError, match="outputs do not fit the split-dfl layout: split head: 21 box rows but 20"):
        run(tmp_path, model, [b, s], input_scale=0.1, input_zp=0)


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    import os
    import subprocess
    import sys

    from tests.conftest import REPO

    env = {**{k: v for k, v in os.environ.items() if not k.startswith("EDGEKIT_")}, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "edgekit", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_save_into_a_folder_holding_an_input_is_refused_before_any_work(tmp_path):
    """Issue 31: it stopped after part of the run (exit 2) with a hint naming -o, which detect does not have."""
    (tmp_path / "m.tflite").write_bytes(slice_model(HW, [{"shape": [1, 6, N]}]))
    pixels = image_for(HW, [yolo_values()])
    save_png(tmp_path / "a.png", pixels)
    (tmp_path / "imgs").mkdir()
    save_png(tmp_path / "imgs" / "b.png", pixels)
    proc = _cli("detect", "a.png", "imgs/b.png", "-m", "m.tflite", "--save", "imgs", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines()[-1].startswith("error: --save imgs holds the input image imgs/b.png")
    assert "-o" not in proc.stderr and sorted(p.name for p in (tmp_path / "imgs").iterdir()) == ["b.png"]


def test_save_writes_name_2_on_a_clash_and_never_replaces_a_file(tmp_path):
    """Two inputs named alike, and a file of that name already in the folder: name-2, name-3, the file kept."""
    (tmp_path / "m.tflite").write_bytes(slice_model(HW, [{"shape": [1, 6, N]}]))
    pixels = image_for(HW, [yolo_values()])
    for d in ("x", "y"):
        (tmp_path / d).mkdir()
        save_png(tmp_path / d / "a.png", pixels)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "a.png").write_bytes(b"a file of the user's")
    proc = _cli("detect", "x/a.png", "y/a.png", "-m", "m.tflite", "--save", "out", "-q", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["a-2.png", "a-3.png", "a.png"]
    assert (tmp_path / "out" / "a.png").read_bytes() == b"a file of the user's"


def dfl_values(nc: int, transposed: bool):
    """Boxes: anchor 0 (stride 8, centre (4, 4)) with sides 1, 2, 3, 4 bins; anchor 20 (stride 32) class 1."""
    boxes = np.zeros((N, 64))
    scores = np.full((N, nc), -10.0)
    for side, k in enumerate((1, 2, 3, 4)):
        boxes[0, side * 16 + k] = 10.0
        boxes[20, side * 16 + 0] = 10.0
    scores[0, 0] = 2.0  # sigmoid 0.881
    scores[20, 1] = 0.0  # sigmoid 0.5
    return (boxes.T.copy(), scores.T.copy()) if transposed else (boxes, scores)


@pytest.mark.parametrize("transposed", [False, True])
def test_split_dfl(tmp_path, transposed):
    nc = 3
    b, s = dfl_values(nc, transposed)
    shapes = [[1, 64, N], [1, nc, N]] if transposed else [[1, N, 64], [1, N, nc]]
    r = run(
        tmp_path,
        slice_model(HW, [{"shape": shapes[0]}, {"shape": shapes[1]}], input_scale=0.1, input_zp=0),
        [b, s],
        input_scale=0.1,
        input_zp=0,
        conf=0.3,
    )
    assert r.layout.kind == Layout.SPLIT_DFL and r.layout.scores_are_logits is True
    got = boxes_of(r)
    assert [(i, sc) for i, sc, _ in got] == [(0, 0.88), (1, 0.5)]
    # anchor 0: centre (0.5, 0.5) cells, stride 8, sides 1, 2, 3, 4: (-4, -12, 28, 36) clipped to the 32x32 image
    assert got[0][2] == pytest.approx((0.0, 0.0, 28.0, 32.0), abs=0.2)
    assert got[1][2] == pytest.approx((16.0, 16.0, 16.0, 16.0), abs=0.2)


def test_split_dfl_per_level_maps(tmp_path):
    nc = 2
    b, s = dfl_values(nc, False)
    levels = [(8, 4), (16, 2), (32, 1)]
    outs, vals, start = [], [], 0
    for _stride, g in levels:
        outs += [{"shape": [1, g, g, 64]}, {"shape": [1, g, g, nc]}]
        vals += [b[start : start + g * g], s[start : start + g * g]]
        start += g * g
    r = run(tmp_path, slice_model(HW, outs, input_scale=0.1, input_zp=0), vals, input_scale=0.1, input_zp=0, conf=0.3)
    assert r.layout.kind == Layout.SPLIT_DFL and "boxes@8" in dict(r.layout.roles)
    assert [(i, sc) for i, sc, _ in boxes_of(r)] == [(0, 0.88), (1, 0.5)]


def test_split_dfl_function_matches_reference():
    """decode_split_dfl (the integrator's entry point) against a direct reading of Ultralytics' dist2bbox."""
    rng = np.random.RandomState(0)
    boxes = rng.normal(size=(1, N, 64)).astype(np.float32)
    scores = rng.normal(size=(1, N, 3)).astype(np.float32)
    got = detection.decode_split_dfl(boxes, scores, HW, scores_are_logits=True)
    p = np.exp(boxes[0].reshape(N, 4, 16))
    p /= p.sum(-1, keepdims=True)
    dist = (p * np.arange(16)).sum(-1)
    anchors = [(x + 0.5, y + 0.5, s) for s, g in ((8, 4), (16, 2), (32, 1)) for y in range(g) for x in range(g)]
    a = np.array([(x, y) for x, y, _ in anchors])
    st = np.array([s for _, _, s in anchors])[:, None]
    expected = np.concatenate([a - dist[:, :2], a + dist[:, 2:]], 1) * st
    assert np.allclose(got.boxes, expected, atol=1e-4)
    assert np.allclose(got.scores, 1 / (1 + np.exp(-scores[0].max(1))), atol=1e-6)


def test_64_classes_beside_64_dfl_channels_is_refused(tmp_path):
    model = slice_model(HW, [{"shape": [1, N, 64]}, {"shape": [1, N, 64]}], input_scale=0.1, input_zp=0)
    path = tmp_path / "two64.tflite"
    path.write_bytes(model)
    with pytest.raises(InputError, match="64 channels") as info:
        find_layout(path)
    assert "--layout split-dfl" in info.value.hint
    assert find_layout(path, "split-dfl").role("boxes") == 0


def test_ambiguous_model_is_refused_with_candidates(tmp_path):
    """[1, 21, 21] at 32x32 fits yolo both ways (4 + 17 classes over 21 anchors, anchors on either axis)."""
    path = tmp_path / "square.tflite"
    path.write_bytes(slice_model(HW, [{"shape": [1, N, N]}]))
    with pytest.raises(AmbiguousLayoutError) as info:
        find_layout(path)
    assert info.value.exit_code == 3 and "--layout" in info.value.hint and "yolo" in str(info.value)


def test_a_forced_layout_says_how_it_read_the_box_scale(tmp_path):
    """--layout yolo on outputs the shapes do not single out (30 anchors, not a 32x32 input's 21) builds the layout by
    convention, and says how its box scale was read as a found layout does: that note went into a copy of the
    source list and was lost, so the layout note and the document's layout.source did not say why boxes were taken
    as normalized."""
    path = tmp_path / "odd.tflite"
    path.write_bytes(slice_model(HW, [{"shape": [1, 6, 30]}]))
    with pytest.raises(InputError, match="no detection layout"):
        find_layout(path)
    layout = find_layout(path, "yolo")
    assert layout.kind == Layout.YOLO and layout.transposed and layout.boxes_normalized is True
    assert layout.source[-2] == "--layout yolo" and "output quantization range" in layout.source[-1]


def test_detects_old_record_names_still_import_with_a_warning():
    import edgekit.results as results

    for old, new in (("DetectedBox", BBox), ("DetectedObject", Object), ("DetectLayout", DetectionLayout)):
        with pytest.warns(DeprecationWarning, match=f"edgekit.results.{old} is now edgekit.results.{new.__name__}"):
            assert getattr(results, old) is new


def test_classifier_is_not_a_detector(tmp_path):
    path = tmp_path / "cls.tflite"
    path.write_bytes(slice_model(HW, [{"shape": [1, 10]}]))
    with pytest.raises(InputError, match="no detection layout"):
        find_layout(path)


def test_ultralytics_metadata_gives_labels_letterbox_and_scaling(tmp_path):
    model = with_ultralytics_metadata(slice_model(HW, [{"shape": [1, 6, N]}]), ["cat", "dog"], HW)
    path = tmp_path / "u.tflite"
    path.write_bytes(model)
    layout = find_layout(path)
    assert layout.labels == ("cat", "dog") and layout.letterbox and layout.pixel_scaling == "0..1"
    assert DetectionLayout.from_dict(json.loads(json.dumps(layout.to_dict()))) == layout


def _zip_padded_model(tmp_path: Path, members: int) -> Path:
    """A runnable letterboxed detector whose appended ZIP holds metadata.json then ``members`` deflated MiB of
    zeros each (a 1.5 GB read for a file of about 2 MB)."""
    import io
    import zipfile

    buf = io.BytesIO()
    zero = bytes(1 << 20)
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        z.writestr("metadata.json", json.dumps({"task": "detect", "version": "8.3.0", "names": ["cat", "dog"]}))
        for i in range(members):
            z.writestr(f"pad/{i}.bin", zero)
    path = tmp_path / "padded.tflite"
    path.write_bytes(slice_model(HW, [{"shape": [1, 6, N]}]) + buf.getvalue())
    return path


def test_a_zip_of_many_large_members_appended_to_a_model_is_never_read_whole(tmp_path):
    """Issue 31, security 1: 1,500 one-MiB members made detect use 1.6 GB. Now only metadata.json (the member
    edgekit uses) is read, within the first 64 directory entries, and the rest is said."""
    import tracemalloc

    import edgekit
    from edgekit.detection.layout import find_layout

    model = _zip_padded_model(tmp_path, 1500)
    assert model.stat().st_size < 8 << 20
    image = str(save_png(tmp_path / "a.png", image_for(HW, [yolo_values()])))
    peaks = {}
    for what, call in (
        ("layout", lambda: find_layout(model)),
        ("detect", lambda: detect([image], model)),
        ("open().detect", lambda: edgekit.open(model).detect(image)),
        ("inspect", lambda: edgekit.inspect(model)),
    ):
        tracemalloc.start()
        try:
            result = call()
            peaks[what] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        if what == "layout":
            assert result.labels == ("cat", "dog") and result.letterbox
            assert any("1437 of its 1501 entries not read" in s for s in result.source), result.source
    assert max(peaks.values()) < 40 << 20, peaks  # 159 MB with 150 members before


def test_a_packed_member_is_read_only_within_its_caps(tmp_path):
    import io
    import zipfile

    from edgekit.tflite.packed_zip import read_packed

    def packed(members, compression=zipfile.ZIP_DEFLATED):
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", compression) as z:
            for name, data in members:
                z.writestr(name, data)
        return b"TFL3-model-bytes" + buf.getvalue()

    everything = lambda names: names
    big = packed([("a.txt", b"x" * ((1 << 20) + 1)), ("b.txt", b"ok")])
    got = read_packed(big, everything)
    assert got.files == {"b.txt": b"ok"} and "a.txt: over 1 MiB" in got.skipped
    stored = read_packed(packed([("a", b"1"), ("b", b"2")], zipfile.ZIP_STORED), lambda names: ["b"])
    assert stored.files == {"b": b"2"} and stored.names == ["a", "b"] and stored.skipped is None
    damaged = bytearray(packed([("m", b"hello" * 100)]))
    damaged[damaged.index(b"PK\x03\x04") + 30 + 1 + 2] ^= 0xFF  # a byte of the deflated data
    assert read_packed(bytes(damaged), everything).files == {}
    assert read_packed(b"no zip here", everything).files == {}
    import struct

    lookalike = b"TFL3" + b"PK\x05\x06" + struct.pack("<HHHHIIH", 0, 0, 3, 3, 0, 0, 0)  # no archive behind it
    assert read_packed(lookalike, everything).skipped is None  # not "3 of its 3 entries not read"
    deep = packed([("metadata.json", "[" * 200000 + "]" * 200000)])
    from edgekit.detection.layout import appended_zip, ultralytics_metadata

    assert ultralytics_metadata(appended_zip(deep)) is None  # RecursionError before: treated as no metadata


# ------------------------------------------------------------------------------------ pure parts
def test_quantized_threshold_is_exact():
    for scale, zp in ((0.003959, -128), (1 / 256, -128), (0.1, 3), (0.0187, -14)):
        q = np.arange(-128, 128)
        real = scale * (q - zp)
        for conf in (0.0, 0.001, 0.25, 0.5, float(real[200]), 0.999):
            t = detection.quantized_threshold(conf, (scale, zp), np.int8)
            assert set(q[q >= t]) == set(q[real >= conf])


_Q_DTYPES = (np.int8, np.uint8, np.int16)


@settings(max_examples=300, deadline=None)
@given(
    kind=st.sampled_from(range(len(_Q_DTYPES))),
    zp_frac=st.floats(0, 1),
    scale=st.one_of(
        st.floats(min_value=5e-324, max_value=1e-300),
        st.floats(min_value=1e-45, max_value=1e-20),
        st.floats(min_value=1e-6, max_value=1e3),
        st.sampled_from([5e-324, 1e-323, 2.5e-308]),
    ),
    value=st.one_of(st.floats(-1e3, 1e3), st.floats(-1e-300, 1e-300), st.just(0.0)),
    on_grid=st.integers(-1, 70000),
)
def test_quantized_threshold_is_exact_at_every_scale_and_dtype(kind, zp_frac, scale, value, on_grid):
    """Against a brute-force reference over every integer of the dtype (a tiny scale hung the old loop)."""
    dtype = _Q_DTYPES[kind]
    info = np.iinfo(dtype)
    q = np.arange(int(info.min), int(info.max) + 1, dtype=np.int64)
    zp = int(info.min) + int(round(zp_frac * (int(info.max) - int(info.min))))
    real = scale * (q - zp).astype(np.float64)
    if 0 <= on_grid < len(q):  # a value exactly on the grid: the floating-point edge
        value = float(real[on_grid])
    t = detection.quantized_threshold(value, (scale, zp), dtype)
    assert t is not None and int(info.min) <= t <= int(info.max) + 1
    assert np.array_equal(q >= t, real >= value), (scale, zp, value, t)


def test_nms_is_class_wise_and_capped():
    boxes = np.array([[0, 0, 10, 10], [1, 1, 10, 10], [0, 0, 10, 10], [50, 50, 60, 60]], float)
    scores = np.array([0.9, 0.8, 0.7, 0.6])
    classes = np.array([0, 0, 1, 0])
    assert list(detection.nms(boxes, scores, classes, 0.5, 10)) == [0, 2, 3]
    assert list(detection.nms(boxes, scores, classes, 0.5, 2)) == [0, 2]
    assert list(detection.nms(boxes, scores, classes, 0.95, 10)) == [0, 1, 2, 3]


def test_letterbox_geometry_round_trip():
    g = Geometry.letterboxed((512, 600), (640, 640))  # grace_hopper.bmp
    assert g.gain == (640 / 600, 640 / 600) and g.pad == (47, 0)  # round((640 - 546) / 2 - 0.1)
    box = np.array([[100.0, 50.0, 300.0, 500.0]])
    in_input = box * g.gain[0] + np.array([g.pad[0], g.pad[1], g.pad[0], g.pad[1]])
    assert np.allclose(g.to_image(in_input), box)
    r = Geometry.resize((200, 100), (32, 32))
    assert np.allclose(r.to_image(np.array([[16, 16, 32, 32]])), [[100, 50, 200, 100]])


@pytest.mark.parametrize("size", [(3000, 1), (1, 3000), (5000, 7)])
def test_a_very_tall_or_wide_image_keeps_a_pixel_when_letterboxed(tmp_path, size):
    """The short side rounded to 0 and the image was called damaged; now it keeps 1 pixel and is detected."""
    g = Geometry.letterboxed(size, (32, 32))
    assert min(g.scaled_wh) == 1 and max(g.scaled_wh) == 32
    model = tmp_path / "u.tflite"
    model.write_bytes(with_ultralytics_metadata(slice_model(HW, [{"shape": [1, 6, N]}]), ["cat", "dog"], HW))
    image = save_png(tmp_path / "long.png", np.full((size[1], size[0], 3), 128, np.uint8))
    r = detect([str(image)], model)
    assert not r.errors and r.results[0].width == size[0] and r.results[0].height == size[1]


def test_records_round_trip():
    o = Object(3, 0.5, BBox(1, 2, 3, 4), "person")
    assert Object.from_dict(o.to_dict()) == o
    assert Object.from_dict(o.to_dict(10, 20)) == dataclasses.replace(o, bbox_normalized=BBox(0.1, 0.1, 0.3, 0.2))
    assert o.to_dict(10, 20)["bbox_normalized"] == {"xmin": 0.1, "ymin": 0.1, "xmax": 0.3, "ymax": 0.2}


def test_ultralytics_metadata_is_read_into_its_record():
    from edgekit.detection.layout import UltralyticsMetadata, ultralytics_metadata, ultralytics_names

    def read(doc):
        return ultralytics_metadata({"metadata.json": json.dumps(doc).encode()})

    meta = read({"task": "detect", "version": "8.3.169", "names": {"1": "dog", "0": "cat"}})
    assert meta == UltralyticsMetadata("detect", "8.3.169", ("cat", "dog"))
    assert ultralytics_names(meta) == ("cat", "dog")
    assert read({"names": ["a", "b"]}) == UltralyticsMetadata(None, "?", ("a", "b"))
    assert read({"task": "segment", "names": {"0": "a", "2": "c"}}) == UltralyticsMetadata("segment", "?", None)
    assert read(["not", "an", "object"]) is None and ultralytics_metadata({}) is None
    assert ultralytics_metadata({"metadata.json": b"\xff{"}) is None


def test_detect_result_reads_back_its_own_document():
    """One type from the runtime to the document and back (issue 33): the DetectResult the runtime returns writes each
    object's box rounded and normalized to its image size, the layout's options sorted and its description; the
    document reads back into the same type, which writes it again byte for byte."""
    from edgekit.results import DetectResult, ImageObjects

    layout = DetectionLayout(
        Layout.YOLO, {"output": 0}, 2, HW, boxes_normalized=True, transposed=True, options={"num_classes": 2, "a": 1}
    )
    found = ImageObjects("a.png", 10, 20, 1.5, 0.25, (Object(1, 0.50000049, BBox(1.004, 2, 3, 4), "dog"),))
    result = DetectResult("m.tflite", "cpu", "litert", layout, 0.25, 0.45, 100, 3.0, (found,))
    text = json.dumps(result.to_dict())
    doc = json.loads(text)
    assert list(doc["layout"]["options"]) == ["a", "num_classes"] and doc["layout"]["roles"] == {"output": 0}
    assert doc["layout"]["description"] == "yolo, 2 classes, normalized boxes, resized input"
    assert doc["results"][0]["objects"] == [
        {
            "id": 1,
            "label": "dog",
            "score": 0.5,
            "bbox": {"xmin": 1.0, "ymin": 2, "xmax": 3, "ymax": 4},
            "bbox_normalized": {"xmin": 0.1, "ymin": 0.1, "xmax": 0.3, "ymax": 0.2},
        }
    ]
    again = DetectResult.from_dict(doc)
    assert again.layout == layout and json.dumps(again.to_dict()) == text
    assert again.results[0].objects[0].bbox_normalized == BBox(0.1, 0.1, 0.3, 0.2)
    assert again.render_text() == result.render_text()


def test_detect_results_text():
    """Two images (an even count: the median of two), an object without a label, an image that failed (the text the
    runtime's own report printed before it and the document became one type)."""
    from edgekit.results import DetectResult, ImageError, ImageObjects

    layout = DetectionLayout(Layout.YOLO, {"output": 0}, 2, HW, boxes_normalized=None, letterbox=True)
    one = ImageObjects(
        "a.png",
        10,
        20,
        1.5,
        0.25,
        (Object(1, 0.5, BBox(1, 2, 3, 4), "dog"), Object(0, 0.123456, BBox(0.4, 0.6, 9.5, 19.5))),
    )
    two = ImageObjects("b.png", 640, 480, 2.75, 1.0, ())
    result = DetectResult(
        "m.tflite", "usb:0", "pycoral", layout, 0.3, 0.5, 7, 3.0, (one, two), (ImageError("c.png", "unreadable"),)
    )
    assert result.render_text().splitlines() == [
        "a.png: 2 objects (10x20; invoke 1.5 ms, post-processing 0.2 ms)",
        "  dog              0.500  [1, 2, 3, 4]",
        "  class 0          0.123  [0, 1, 10, 20]",
        "b.png: 0 objects (640x480; invoke 2.8 ms, post-processing 1.0 ms)",
        "c.png: error: unreadable",
        "2 images on usb:0 (pycoral): invoke 2.1 ms, post-processing 0.6 ms per image (median); layout yolo, 2 classes, "
        "box scale read per image, letterboxed input; conf 0.3, IoU 0.5, max 7",
    ]
    assert DetectResult("m.tflite", "cpu", "litert", layout, 0.3, 0.5, 7).render_text() == ""


# ------------------------------------------------------------------------------------ the real YOLOv8n export
@pytest.fixture(scope="module")
def ppe_model():
    return shared_file("detection/ppe_yolov8n_full_integer_quant.tflite")


def test_real_yolov8n_finds_the_person_in_grace_hopper(ppe_model, tmp_path):
    labels = tmp_path / "en.txt"
    labels.write_text("boots\nhelmet\ngoggles\nperson\n")
    r = detect([str(shared_file("grace_hopper.bmp"))], ppe_model, labels=labels, save=tmp_path / "out")
    objs = r.results[0].objects
    person = [o for o in objs if o.label == "person"]
    assert person and person[0].score > 0.6
    b = person[0].bbox
    assert b.area > 0.5 * 512 * 600 and b.xmax <= 512 and b.ymax <= 600  # she fills most of the picture
    assert r.layout.letterbox and r.layout.labels == ("bota", "capacete", "oculos", "pessoa")
    assert (tmp_path / "out" / "grace_hopper.bmp").is_file()
    doc = r.to_dict()
    assert DetectResult.from_dict(json.loads(json.dumps(doc))).to_dict() == doc


def test_real_compiled_yolov8n_falls_back_to_its_cpu_twin(ppe_model):
    compiled = ppe_model.with_name("ppe_yolov8n_full_integer_quant_edgetpu.tflite")
    from edgekit.report import Collector

    c = Collector()
    r = detect([str(shared_file("grace_hopper.bmp"))], compiled, report=c)
    assert r.device == "cpu" and r.model.endswith("ppe_yolov8n_full_integer_quant.tflite")
    assert any(o.label == "pessoa" for o in r.results[0].objects)
    assert any("layout yolo" in n for n in c.notes)


def test_cli_detect_json_and_errors(ppe_model, tmp_path):
    from click.testing import CliRunner

    from edgekit.cli.app import cli

    runner = CliRunner()
    res = runner.invoke(cli, ["detect", str(shared_file("grace_hopper.bmp")), "-m", str(ppe_model), "--json", "-q"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    obj = doc["results"][0]["objects"][0]
    assert set(obj) == {"id", "label", "score", "bbox", "bbox_normalized"} and obj["label"] == "pessoa"
    res = runner.invoke(
        cli,
        ["detect", str(shared_file("grace_hopper.bmp")), "-m", str(shared_file("mobilenet_v1_0.25_128_quant.tflite"))],
    )
    assert res.exit_code == 3 and "no detection layout" in res.stderr and "Traceback" not in res.output
    missing = tmp_path / "nope.png"
    res = runner.invoke(cli, ["detect", str(missing), str(shared_file("grace_hopper.bmp")), "-m", str(ppe_model), "-q"])
    assert res.exit_code == 3 and "pessoa" in res.stdout and "no such file" in res.stderr


def test_benchmark_times_post_processing_apart_for_a_detector(tmp_path):
    from edgekit.devices.benchmark import benchmark

    path = tmp_path / "y.tflite"
    path.write_bytes(slice_model(HW, [{"shape": [1, 6, N]}]))
    post = benchmark(path, n=5, warmup=1).postprocess
    assert post.iterations == 5 and post.p50_ms > 0 and post.layout.startswith("yolo")
    cls = tmp_path / "c.tflite"
    cls.write_bytes(slice_model(HW, [{"shape": [1, 10]}]))
    assert benchmark(cls, n=2, warmup=0).postprocess is None


def test_float_output_box_scale_read_per_image(tmp_path):
    r = run(tmp_path, slice_model(HW, [{"shape": [1, 6, N], "float": True}]), [yolo_values()])
    assert r.layout.boxes_normalized is None and any("values" in s for s in r.layout.source)
    assert boxes_of(r)[0] == (0, 0.9, (12.0, 8.0, 20.0, 24.0))
    assert any("normalized" in n for n in r.notes)


def test_pixel_boxes_sharing_an_int8_scale_with_scores_are_warned(tmp_path):
    from edgekit.report import Collector

    v = yolo_values()
    v[4:] = 0
    path = tmp_path / "px.tflite"
    path.write_bytes(slice_model(HW, [{"shape": [1, 6, N], "requant": (0.25, -128)}]))
    save_png(tmp_path / "px.png", image_for(HW, [v]))
    c = Collector()
    r = detect([str(tmp_path / "px.png")], path, report=c)
    assert r.layout.boxes_normalized is False
    assert any("share one int8 output" in w and "4 steps" in w for w in c.warnings)


def test_postprocess_outputs_named_by_tflite_metadata(tmp_path):
    """Without the op (a model whose NMS was cut off, say), TFLite metadata's names say which output is which;
    without them the classes/scores pair is refused rather than guessed."""
    from edgekit.tflite.metadata import set_metadata
    from tests.detection_models import tflite_metadata

    k = 5
    shapes = [[1, k], [1, k, 4], [1], [1, k]]  # Model Maker's order: scores, boxes, count, classes
    model = slice_model(HW, [{"shape": s, "float": True} for s in shapes], input_scale=0.1, input_zp=0)
    bare = tmp_path / "bare.tflite"
    bare.write_bytes(model)
    with pytest.raises(InputError, match="classes and which is scores"):
        find_layout(bare)
    named = tmp_path / "named.tflite"
    named.write_bytes(
        set_metadata(
            model, "TFLITE_METADATA", tflite_metadata(["score", "location", "number of detections", "category"])
        )
    )
    layout = find_layout(named)
    assert dict(layout.roles) == {"scores": 0, "boxes": 1, "count": 2, "classes": 3}
    values = [
        np.array([0.9, 0.5, 0.1, 0, 0]),
        np.array([[0.1, 0.2, 0.5, 0.6]] * k),
        np.array([3.0]),
        np.array([1.0, 0, 0, 0, 0]),
    ]
    save_png(tmp_path / "n.png", image_for(HW, values, input_scale=0.1, input_zp=0))
    r = detect([str(tmp_path / "n.png")], named)
    assert boxes_of(r) == [(1, 0.9, (6.4, 3.2, 19.2, 16.0)), (0, 0.5, (6.4, 3.2, 19.2, 16.0))]


def combined_values(nc: int):
    b, s = dfl_values(nc, False)
    return np.concatenate([b, s], axis=1)  # [N, 64 + nc]


def test_split_dfl_in_one_tensor(tmp_path):
    nc = 3
    v = combined_values(nc)
    r = run(
        tmp_path,
        slice_model(HW, [{"shape": [1, 64 + nc, N]}], input_scale=0.1, input_zp=0),
        [v.T.copy()],
        input_scale=0.1,
        input_zp=0,
        conf=0.3,
    )
    assert r.layout.kind == Layout.SPLIT_DFL and dict(r.layout.roles) == {"combined": 0} and r.layout.num_classes == 3
    assert [(i, sc) for i, sc, _ in boxes_of(r)] == [(0, 0.88), (1, 0.5)]
    assert boxes_of(r)[0][2] == pytest.approx((0.0, 0.0, 28.0, 32.0), abs=0.2)
    # float, the same shape reads as yolo with 63 classes too: refused, not guessed
    path = tmp_path / "f.tflite"
    path.write_bytes(slice_model(HW, [{"shape": [1, 64 + nc, N], "float": True}], input_scale=0.1, input_zp=0))
    with pytest.raises(AmbiguousLayoutError, match="split-dfl.*yolo"):
        find_layout(path)


def test_split_dfl_per_level_combined_maps(tmp_path):
    nc = 2
    v = combined_values(nc)
    outs, vals, start = [], [], 0
    for g in (4, 2, 1):
        outs.append({"shape": [1, g, g, 64 + nc]})
        vals.append(v[start : start + g * g])
        start += g * g
    r = run(tmp_path, slice_model(HW, outs, input_scale=0.1, input_zp=0), vals, input_scale=0.1, input_zp=0, conf=0.3)
    assert "combined@8" in dict(r.layout.roles)
    assert [(i, sc) for i, sc, _ in boxes_of(r)] == [(0, 0.88), (1, 0.5)]


def test_real_yolov8n_cut_before_its_decode_finds_the_same_boxes(ppe_model, tmp_path):
    """The real export cut after its head's last concatenation ([1, 68, 8400]: DFL logits + class logits, one
    int8 scale), Ultralytics' metadata packed after it again, decodes to the same objects as the whole model, at
    IoU >= 0.9, with no flags: the layout is found (64 + 4 classes, logits from the negative int8 range)."""
    import io
    import zipfile

    from edgekit.detection.layout import appended_zip
    from edgekit.tflite import model as tflite_model
    from tests.detection_models import cut_before

    info = tflite_model.load(ppe_model)
    concat = [
        op
        for op in info.main.ops
        if op.name == "CONCATENATION" and info.main.tensors[op.outputs[0]].shape == (1, 68, 8400)
    ][0]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in appended_zip(ppe_model).items():
            z.writestr(name, data)
    cut = tmp_path / "ppe_cut.tflite"
    cut.write_bytes(cut_before(Path(ppe_model).read_bytes(), concat.index + 1, [concat.outputs[0]]) + buf.getvalue())
    layout = find_layout(cut)
    assert layout.kind == Layout.SPLIT_DFL and dict(layout.roles) == {"combined": 0} and layout.num_classes == 4
    assert layout.scores_are_logits is True and layout.letterbox and layout.labels[3] == "pessoa"
    image = str(shared_file("grace_hopper.bmp"))
    whole = detect([image], ppe_model).results[0].objects
    parts = detect([image], cut).results[0].objects
    assert [o.id for o in parts] == [o.id for o in whole] and whole
    for a, b in zip(whole, parts):
        assert abs(a.score - b.score) < 0.02
        assert detection.box_iou([list(a.bbox.to_dict().values())], [list(b.bbox.to_dict().values())])[0, 0] >= 0.9


def test_labels_packed_by_tflite_metadata(tmp_path):
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("labelmap.txt", "person\ncar\n")
    path = tmp_path / "mm.tflite"
    path.write_bytes(slice_model(HW, [{"shape": [1, 6, N]}]) + buf.getvalue())
    layout = find_layout(path)
    assert layout.labels == ("person", "car") and any("labelmap.txt" in s for s in layout.source)


# ------------------------------------------------------------------ a layout record that is hostile or stale
GOOD_RECORD = {
    "kind": "yolo",
    "roles": {"output": 0},
    "num_classes": 2,
    "input_hw": [32, 32],
    "transposed": True,
    "boxes_normalized": True,
}
BAD_RECORDS = {
    "roles a list": dict(GOOD_RECORD, roles=[0]),
    "roles null": dict(GOOD_RECORD, roles=None),
    "a role of another layout": dict(GOOD_RECORD, roles={"zzz": 0}),
    "a role past the outputs": dict(GOOD_RECORD, roles={"output": 7}),
    "options a list": dict(GOOD_RECORD, options=[1]),
    "no such kind": dict(GOOD_RECORD, kind="bogus"),
    "labels a number": dict(GOOD_RECORD, labels=5),
    "strides a string": dict(GOOD_RECORD, strides="ab"),
    "no DFL bins": dict(GOOD_RECORD, reg_max=0),
    "negative classes": dict(GOOD_RECORD, num_classes=-3),
    "classes that do not fit the tensor": dict(GOOD_RECORD, num_classes=10**12),
    "input size a string": dict(GOOD_RECORD, input_hw="32"),
    "another input size": dict(GOOD_RECORD, input_hw=[64, 64]),
    "a bad pixel scaling": dict(GOOD_RECORD, pixel_scaling="bogus"),
    "end2end on a yolo head": {"kind": "end2end", "roles": {"output": 0}, "num_classes": 0, "input_hw": [32, 32]},
    "yolov5 on a yolo head": dict(GOOD_RECORD, kind="yolov5"),
    "a kind that is an object": dict(GOOD_RECORD, kind={"a": 1}),
    "split levels not its strides": dict(GOOD_RECORD, kind="split-dfl", roles={"boxes@8": 0, "scores@8": 0}),
    "split boxes without scores": dict(GOOD_RECORD, kind="split-dfl", roles={"boxes": 0}),
    "split without strides": dict(GOOD_RECORD, kind="split-dfl", roles={"combined": 0}, strides=[]),
}


@pytest.mark.parametrize("case", sorted(BAD_RECORDS))
def test_a_recorded_layout_that_is_malformed_or_does_not_fit_is_ignored_with_a_note(tmp_path, case):
    """Issue 31: a layout in a model's record (metadata or sidecar, a file anyone can edit) was trusted: malformed
    ones were exit 70, a bad pixel scaling exit 2, an end2end layout on a YOLO head decoded to nothing in silence.
    Ignored now, said, and the layout read from the outputs."""
    (tmp_path / "m.edgekit.json").write_text(json.dumps({"detection": {"layout": BAD_RECORDS[case]}}))
    r = run(tmp_path, slice_model(HW, [{"shape": [1, 6, N]}]), [yolo_values()])
    assert r.layout.kind == Layout.YOLO and r.layout.transposed
    assert any(s.startswith("the layout recorded with the model ignored: ") for s in r.layout.source), r.layout.source
    assert boxes_of(r) == [(0, 0.9, (12.0, 8.0, 20.0, 24.0)), (1, 0.6, (12.8, 8.0, 20.8, 24.0))]


def test_a_recorded_layout_that_fits_is_used_and_cli_notes_an_ignored_one(tmp_path):
    (tmp_path / "m.edgekit.json").write_text(json.dumps({"detection": {"layout": GOOD_RECORD}}))
    r = run(tmp_path, slice_model(HW, [{"shape": [1, 6, N]}]), [yolo_values()])
    assert r.layout.source[0] == "recorded by edgekit quantize with the model"
    assert boxes_of(r)[0] == (0, 0.9, (12.0, 8.0, 20.0, 24.0))
    (tmp_path / "m.edgekit.json").write_text(json.dumps({"detection": {"layout": BAD_RECORDS["roles a list"]}}))
    p = _cli("detect", "m.png", "-m", "m.tflite", "--json", cwd=tmp_path)
    assert p.returncode == 0 and "Traceback" not in p.stderr
    assert "the layout recorded with the model ignored: its roles are not outputs of the model" in p.stderr
    assert [o["id"] for o in json.loads(p.stdout)["results"][0]["objects"]] == [0, 1]


def test_detect_here_returns_the_documents_values_as_a_boards_answer_reads_back(tmp_path):
    """Boxes to 2 decimals, scores to 6 and each box normalized to its image, as with on= (and before issue 33)."""
    r = run(tmp_path, slice_model(HW, [{"shape": [1, 6, N]}]), [yolo_values()])
    image = r.results[0]
    assert image.objects and r == DetectResult.from_dict(json.loads(json.dumps(r.to_dict())))
    for o in image.objects:
        assert o.bbox_normalized is not None
        assert o.bbox_normalized.xmax == pytest.approx(o.bbox.xmax / image.width, abs=1e-6)


def test_a_recorded_layout_with_a_field_this_edgekit_does_not_know_is_used(tmp_path):
    """A newer edgekit's record (a field more) or an edited description: the fields read here still hold."""
    record = dict(GOOD_RECORD, description=7, some_later_field={"x": 1})
    (tmp_path / "m.edgekit.json").write_text(json.dumps({"detection": {"layout": record}}))
    r = run(tmp_path, slice_model(HW, [{"shape": [1, 6, N]}]), [yolo_values()])
    assert r.layout.source[0] == "recorded by edgekit quantize with the model"
    assert r.layout.description == r.layout.describe()


OBJECT_DOC = {"id": 3, "label": "person", "score": 0.5, "bbox": {"xmin": 1, "ymin": 2, "xmax": 3, "ymax": 4}}


@pytest.mark.parametrize(
    "change, field",
    [
        ({"id": "3"}, "Object.id"),
        ({"id": 1.5}, "Object.id"),
        ({"id": True}, "Object.id"),
        ({"id": 2**70}, "Object.id"),
        ({"score": "0.5"}, "Object.score"),
        ({"score": None}, "Object.score"),
        ({"score": 10**400}, "Object.score"),
        ({"label": ["a"]}, "Object.label"),
        ({"label": 5}, "Object.label"),
        ({"bbox": [1, 2, 3, 4]}, "Object.bbox"),
        ({"bbox": {"xmin": "1", "ymin": 2, "xmax": 3, "ymax": 4}}, "Object.bbox.xmin"),
        ({"bbox": {"xmin": 1, "ymin": 2, "xmax": 3}}, "Object.bbox: the field 'ymax'"),
    ],
)
def test_object_from_dict_refuses_a_wrong_type_naming_the_field(change, field):
    """Issue 31 (records): edgekit.Object/BBox.from_dict took a list label or a string coordinate, which then
    crashed line(), or raised TypeError/KeyError; a ValueError names the field now, as the records' from_dict."""
    with pytest.raises(ValueError, match="^" + field.replace(".", r"\.")):
        Object.from_dict({**OBJECT_DOC, **change})
    with pytest.raises(ValueError, match="^Object: expected an object"):
        Object.from_dict([OBJECT_DOC])


def test_mutated_object_documents_are_read_whole_or_refused():
    import random

    rng = random.Random(31)
    odd = [None, True, "x", "", [], {}, [1], -1, 2**64, 1e308, float("nan"), {"xmin": 1}]
    for _ in range(600):
        doc = json.loads(json.dumps(OBJECT_DOC))
        target = doc if rng.random() < 0.5 else doc["bbox"]
        key = rng.choice(sorted(target) + ["extra"])
        if rng.random() < 0.2:
            target.pop(key, None)
        else:
            target[key] = rng.choice(odd)
        try:
            o = Object.from_dict(doc)
        except ValueError:
            continue
        o.line()
        json.dumps(o.to_dict(10, 20))
        assert Object.from_dict(o.to_dict()).id == o.id


def test_mutated_layout_records_end_in_a_detection_or_an_edgekit_error(tmp_path):
    """Seeded mutations of a recorded layout (its kind, roles, strides, counts, types) through detect: each ends in
    a report or an EdgekitError (exit 3), never in another exception (exit 70)."""
    import random

    from edgekit.errors import EdgekitError

    (tmp_path / "m.tflite").write_bytes(slice_model(HW, [{"shape": [1, 6, N]}]))
    image = save_png(tmp_path / "m.png", image_for(HW, [yolo_values()]))
    odd = [
        None,
        True,
        0,
        -1,
        1,
        2,
        6,
        64,
        2**63,
        1.5,
        "x",
        [],
        {},
        [8],
        [8, 16, 32],
        [16],
        [32, 32],
        [7],
        {"output": 0},
        {"output": 1},
        {"boxes": 0, "scores": 0},
        {"boxes": 0},
        {"combined": 0},
        {"boxes@8": 0, "scores@8": 0},
        {"combined@8": 0},
        {"combined@16": 0},
        {"boxes": 0, "classes": 0, "scores": 0, "count": 0},
        "yolo",
        "yolov5",
        "end2end",
        "split-dfl",
        "postprocess",
        "0..1",
        ["a", "b"],
        {"max_detections": 3},
    ]
    keys = sorted(GOOD_RECORD) + ["reg_max", "strides", "labels", "options", "pixel_scaling", "kind", "roles"]
    r = random.Random(31)
    ended = {"report": 0, "refused": 0}
    for _ in range(150):
        doc = dict(GOOD_RECORD, kind=r.choice(["yolo", "yolov5", "end2end", "split-dfl", "postprocess"]))
        for _ in range(r.choice([1, 2, 3])):
            doc[r.choice(keys)] = r.choice(odd)
        (tmp_path / "m.edgekit.json").write_text(json.dumps({"detection": {"layout": doc}}))
        try:
            report = detect([str(image)], tmp_path / "m.tflite")
        except EdgekitError:
            ended["refused"] += 1
            continue
        assert not report.errors, (doc, report.errors)
        ended["report"] += 1
    assert ended["report"] > 50, ended
