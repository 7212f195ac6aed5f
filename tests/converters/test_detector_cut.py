"""Cutting a YOLO detector before its decode: the head found, the cut model fully mapped, the same detections.

The models: the real Ultralytics YOLOv8n export in ../shared/testdata/detection (skipped where absent); the real
exports among the evidence pairs (tests/fixtures/evidence/pairs: structure only, weights zeroed); YOLO-style models
with each head Ultralytics has shipped, built here without TensorFlow (tests/yolo_heads.py: 8.3's per-level joins,
8.4's joins across the levels, YOLO26 without DFL, P2/P6, Segment/Pose heads to refuse); runnable ones built with
Keras and TFLiteConverter, their weights set by hand to find coloured squares (detect on the cut model against the
uncut one); and the real 8.4 exports under tests/fixtures/exports once they are committed.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from edgekit.cli.app import cli
from edgekit.detection.cut import cut_decode
from edgekit.edgetpu.compatibility import check_model
from edgekit.errors import EdgekitError
from edgekit.tflite import model as tflite_model
from edgekit.tflite.yolo_head import find_yolo_head, image_size
from tests.conftest import TESTDATA, shared_file

YOLO = "detection/ppe_yolov8n_full_integer_quant.tflite"
YOLO_COMPILED = "detection/ppe_yolov8n_full_integer_quant_edgetpu.tflite"
TESTDATA_PHOTO = TESTDATA / "grace_hopper.bmp"


# --------------------------------------------------------------------------- a test oracle for the decode
def _run(data: bytes, x: np.ndarray) -> list[np.ndarray]:
    """Dequantized outputs of ``data`` on float input ``x`` (quantized with the input's own parameters)."""
    from ai_edge_litert.interpreter import Interpreter

    interp = Interpreter(model_content=data, num_threads=1)
    interp.allocate_tensors()
    d = interp.get_input_details()[0]
    scale, zero = d["quantization"]
    info = np.iinfo(d["dtype"])
    interp.set_tensor(d["index"], np.clip(np.round(x / scale + zero), info.min, info.max).astype(d["dtype"])[None])
    interp.invoke()
    outs = []
    for o in interp.get_output_details():
        s, z = o["quantization"]
        outs.append((interp.get_tensor(o["index"]).astype(np.float32) - z) * s)
    return outs


def _oracle_decode(outs: list[np.ndarray], strides) -> tuple[np.ndarray, np.ndarray]:
    """Ultralytics' decode written out (make_anchors, DFL, dist2bbox): xyxy pixels and class probabilities."""
    boxes, scores = [], []
    for k, stride in enumerate(strides):
        b, c = outs[2 * k][0], outs[2 * k + 1][0]
        rows, cols = b.shape[:2]
        d = b.reshape(rows * cols, 4, -1)
        p = np.exp(d - d.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        dist = (p * np.arange(d.shape[-1])).sum(-1)
        yy, xx = np.mgrid[0:rows, 0:cols]
        cx, cy = xx.ravel() + 0.5, yy.ravel() + 0.5
        boxes.append(np.stack([cx - dist[:, 0], cy - dist[:, 1], cx + dist[:, 2], cy + dist[:, 3]], 1) * stride)
        scores.append(1 / (1 + np.exp(-c.reshape(rows * cols, -1))))
    return np.concatenate(boxes), np.concatenate(scores)


def _iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    lt, rb = np.maximum(a[:, :2], b[:, :2]), np.minimum(a[:, 2:], b[:, 2:])
    inter = np.prod(np.clip(rb - lt, 0, None), 1)
    area = lambda z: np.prod(z[:, 2:] - z[:, :2], 1)
    return inter / (area(a) + area(b) - inter)


def _letterbox(name: str, size: int) -> np.ndarray:
    from PIL import Image

    img = Image.open(shared_file(name)).convert("RGB")
    r = min(size / img.width, size / img.height)
    w, h = round(img.width * r), round(img.height * r)
    canvas = Image.new("RGB", (size, size), (114, 114, 114))
    canvas.paste(img.resize((w, h), Image.BILINEAR), ((size - w) // 2, (size - h) // 2))
    return np.asarray(canvas, np.float32) / 255


# --------------------------------------------------------------------------- the real YOLOv8n export
@pytest.fixture(scope="module")
def yolo():
    data = shared_file(YOLO).read_bytes()
    cut, result = cut_decode(data)
    return data, cut, result


def test_the_head_of_the_real_export_is_found():
    info = tflite_model.load(shared_file(YOLO))
    head = find_yolo_head(info)
    assert head is not None
    assert (head.num_classes, head.reg_max, head.strides, head.num_anchors) == (4, 16, (8, 16, 32), 8400)
    assert [lv.grid for lv in head.levels] == [(80, 80), (40, 40), (20, 20)]


def test_what_the_real_compiler_left_on_the_cpu_is_the_decode():
    """The compiled twin keeps its CPU ops as builtins: every one of them is a decode op by type and count."""
    info = tflite_model.load(shared_file(YOLO))
    head = find_yolo_head(info)
    compiled = tflite_model.load(shared_file(YOLO_COMPILED))
    left = Counter(op.name for op in compiled.ops if op.custom_code is None)
    decode = Counter(info.ops[i].name for i in head.decode_ops)
    assert sum(left.values()) == 24 and not left - decode


def test_check_names_the_decode_and_the_cut(yolo):
    data, _, _ = yolo
    report = check_model(tflite_model.ModelInfo.from_bytes(data))
    advice = " ".join(report.advice)
    assert report.summary.cpu_ops == 24
    assert "24 of the 24 ops on the CPU" in advice and "edgekit cut" in advice
    assert "all of them predicted on the Edge TPU" in advice


def test_the_cut_model_maps_whole(yolo):
    _, cut, result = yolo
    info = tflite_model.ModelInfo.from_bytes(cut)
    report = check_model(info)
    assert (report.verdict, report.summary.cpu_ops, report.summary.edgetpu_ops) == ("full", 0, result.ops_after)
    assert [o.shape for o in info.outputs] == [
        (1, 80, 80, 64),
        (1, 80, 80, 4),
        (1, 40, 40, 64),
        (1, 40, 40, 4),
        (1, 20, 20, 64),
        (1, 20, 20, 4),
    ]
    record = json.loads(info.metadata["edgekit"])
    layout = record["detection"]["layout"]
    assert (layout["kind"], layout["strides"], layout["scores_are_logits"]) == ("split-dfl", [8, 16, 32], True)
    assert record["detection"]["letterbox"] is True and len(layout["labels"]) == 4
    assert len(cut) < len(shared_file(YOLO).read_bytes())


def test_the_cut_keeps_ultralytics_metadata(yolo):
    _, cut, _ = yolo
    with zipfile.ZipFile(io.BytesIO(cut)) as zf:
        meta = json.loads(zf.read("metadata.json"))
    assert meta["task"] == "detect" and len(meta["names"]) == 4


@pytest.mark.parametrize("image", ["grace_hopper.bmp", "cat.bmp"])
def test_the_cut_model_detects_what_the_uncut_one_does(yolo, image):
    """Before NMS: the same anchors over the threshold, boxes at IoU >= 0.9, scores within 2 output steps."""
    data, cut, result = yolo
    x = _letterbox(image, 640)
    full = _run(data, x)[0][0]  # [8, 8400]: normalized cx, cy, w, h, 4 class scores
    ref_boxes = (
        np.stack([full[0] - full[2] / 2, full[1] - full[3] / 2, full[0] + full[2] / 2, full[1] + full[3] / 2], 1) * 640
    )
    ref_scores = full[4:].T
    boxes, scores = _oracle_decode(_run(cut, x), result.strides)
    step = tflite_model.ModelInfo.from_bytes(data).outputs[0].quantization.scale
    assert np.abs(scores - ref_scores).max() <= 2 * step
    hit = ref_scores.max(1) > 0.25
    assert (
        np.array_equal(hit, scores.max(1) > 0.25)
        or np.abs(ref_scores.max(1) - 0.25)[hit != (scores.max(1) > 0.25)].max() <= 2 * step
    )
    if hit.any():
        assert _iou(ref_boxes[hit], boxes[hit]).min() >= 0.9


def test_detect_reads_the_recorded_layout_and_finds_the_uncut_models_boxes(tmp_path, yolo):
    """edgekit detect on the cut model (its layout recorded by cut, never guessed) against the uncut model."""
    from edgekit.devices.detect import detect

    data, cut, _ = yolo
    (tmp_path / "full.tflite").write_bytes(data)
    (tmp_path / "cut.tflite").write_bytes(cut)
    images = [str(shared_file("grace_hopper.bmp")), str(shared_file("cat.bmp"))]
    full = detect(images, tmp_path / "full.tflite", device="cpu")
    part = detect(images, tmp_path / "cut.tflite", device="cpu")
    assert "recorded by edgekit quantize with the model" in part.layout.source[0] or "edgekit cut" in " ".join(
        part.layout.source
    )
    for a, b in zip(full.results, part.results):
        assert [o.id for o in a.objects] == [o.id for o in b.objects]
        boxes = lambda r: np.array([[o.bbox.xmin, o.bbox.ymin, o.bbox.xmax, o.bbox.ymax] for o in r.objects])
        if a.objects:
            assert _iou(boxes(a), boxes(b)).min() >= 0.9


def test_cut_cli_writes_beside_and_refuses_what_it_cannot_cut(tmp_path):
    src = tmp_path / "yolo.tflite"
    src.write_bytes(shared_file(YOLO).read_bytes())
    out = CliRunner().invoke(cli, ["cut", str(src), "--json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert doc["output"] == str(tmp_path / "yolo_cut.tflite") and doc["check"] == {"verdict": "full", "cpu_ops": 0}
    assert CliRunner().invoke(cli, ["cut", str(src), "-o", str(src)]).exit_code == 2
    classifier = CliRunner().invoke(
        cli, ["cut", str(shared_file("mobilenet_v1_0.25_128_quant.tflite")), "-o", str(tmp_path / "m.tflite")]
    )
    assert classifier.exit_code == 3 and "no YOLO detection head" in classifier.output
    compiled = CliRunner().invoke(cli, ["cut", str(shared_file(YOLO_COMPILED)), "-o", str(tmp_path / "c.tflite")])
    assert compiled.exit_code == 3 and "already compiled" in compiled.output
    assert not (tmp_path / "m.tflite").exists() and not (tmp_path / "c.tflite").exists()


def test_cut_refuses_quantization_litert_would_crash_on_before_writing(tmp_path):
    """A NaN scale on an int8 tensor (LiteRT segfaults on such models: tests/devices/test_quant_params.py)."""
    from tests.helpers import with_quantization

    data = shared_file(YOLO).read_bytes()
    first = next(
        t.index
        for t in tflite_model.ModelInfo.from_bytes(data).main.tensors
        if t.dtype == "int8" and t.quantization is not None
    )
    src = tmp_path / "bad.tflite"
    src.write_bytes(with_quantization(data, first, float("nan")))
    out = CliRunner().invoke(cli, ["cut", str(src), "-o", str(tmp_path / "c.tflite")])
    assert out.exit_code == 3 and f"tensor {first} " in out.output and "scale nan" in out.output, out.output
    assert not (tmp_path / "c.tflite").exists()


# --------------------------------------------------------------------------- a YOLO-style detector built here
@pytest.fixture(scope="module")
def small_yolo():
    """A 64x64 YOLO-style detector, 3 classes, DFL with 16 bins, its decode in TF ops; full int8."""
    tf = pytest.importorskip("tensorflow")
    keras = tf.keras
    nc, reg_max, size = 3, 16, 64
    inp = keras.Input((size, size, 3))
    x, feats = inp, []
    rng = np.random.default_rng(0)
    for k in range(5):
        x = keras.layers.Conv2D(8 * (k + 1), 3, strides=2, padding="same", activation="relu")(x)
        if k >= 2:
            feats.append(x)  # strides 8, 16, 32
    flat = []
    for f in feats:
        box = keras.layers.Conv2D(4 * reg_max, 1)(f)
        cls = keras.layers.Conv2D(nc, 1)(f)
        joined = keras.layers.Concatenate(axis=-1)([box, cls])
        flat.append(keras.layers.Reshape((-1, 4 * reg_max + nc))(joined))
    allv = keras.layers.Concatenate(axis=1)(flat)
    dist = keras.layers.Reshape((-1, 4, reg_max))(allv[..., : 4 * reg_max])
    dist = keras.layers.Softmax(axis=-1)(dist)
    dist = keras.layers.Lambda(lambda d: tf.reduce_sum(d * tf.range(reg_max, dtype=d.dtype), -1))(dist)
    probs = keras.layers.Activation("sigmoid")(allv[..., 4 * reg_max :])
    model = keras.Model(inp, keras.layers.Concatenate(axis=-1)([dist, probs]))
    for w in model.weights:  # fixed weights: no training, same on any machine
        w.assign(rng.normal(0, 0.3, w.shape).astype("float32"))
    images = rng.uniform(0, 1, (16, size, size, 3)).astype("float32")

    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: ([im[None]] for im in images)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = converter.inference_output_type = tf.int8
    return converter.convert(), images, (nc, reg_max)


@pytest.mark.tf
def test_a_yolo_style_detector_built_here_is_found_and_cut(small_yolo):
    data, images, (nc, reg_max) = small_yolo
    head = find_yolo_head(tflite_model.ModelInfo.from_bytes(data))
    assert head is not None and (head.num_classes, head.reg_max, head.strides) == (nc, reg_max, (8, 16, 32))
    cut, result = cut_decode(data)
    assert result.ops_after < result.ops_before
    assert check_model(tflite_model.ModelInfo.from_bytes(cut)).summary.cpu_ops == 0
    full = _run(data, images[0])[0][0]  # [N, 4 + nc]: distances then probabilities
    outs = _run(cut, images[0])
    _, probs = _oracle_decode(outs, head.strides)
    step = tflite_model.ModelInfo.from_bytes(data).outputs[0].quantization.scale
    # the uncut model's own int8 tail rounds its sigmoid, softmax and sum: allow a few of its output steps
    assert np.abs(probs - full[:, 4:]).max() <= 4 * step


def test_a_plain_classifier_has_no_head():
    info = tflite_model.load(shared_file("mobilenet_v1_0.25_128_quant.tflite"))
    assert find_yolo_head(info) is None


@pytest.mark.slow
def test_the_cut_models_map_is_the_uncut_ones_within_half_a_point(tmp_path, yolo):
    """mAP of the cut model and of the uncut one, by pycocotools, on images made here from the shared photos
    (flipped, cropped, scaled), scored against the uncut model's own detections at conf 0.25 as ground truth:
    the two agree within 0.5 points of mAP50. At the strict IoUs of mAP@[.5:.95] (up to 0.95) this ground truth
    favours the uncut model, whose own int8 output rounding (2.5 pixels a step at 640) it is made of; the cut
    model's boxes, decoded in float, differ by about that much, so mAP@[.5:.95] is held to 5 points."""
    pytest.importorskip("pycocotools")
    from PIL import Image, ImageOps

    from edgekit.devices.detect import detect
    from edgekit.devices.evaluate_detector import evaluate_detector

    data, cut, _ = yolo
    (tmp_path / "full.tflite").write_bytes(data)
    (tmp_path / "cut.tflite").write_bytes(cut)
    folder = tmp_path / "images"
    folder.mkdir()
    for name in ("grace_hopper.bmp", "cat.bmp"):
        im = Image.open(shared_file(name)).convert("RGB")
        w, h = im.size
        variants = [
            im,
            ImageOps.mirror(im),
            im.crop((w // 8, h // 8, w - w // 8, h - h // 8)),
            im.resize((w * 3 // 2, h * 3 // 2)),
            im.resize((w * 2 // 3, h * 2 // 3)),
            im.crop((0, 0, w * 3 // 4, h)),
            ImageOps.mirror(im).crop((w // 4, 0, w, h * 3 // 4)),
        ]
        for k, v in enumerate(variants):
            v.save(folder / f"{Path(name).stem}_{k}.png")
    truth = detect([str(folder)], tmp_path / "full.tflite", device="cpu", conf=0.25)
    names = truth.layout.labels or tuple(str(i) for i in range(truth.layout.num_classes))
    images, annotations = [], []
    for i, r in enumerate(sorted(truth.results, key=lambda r: r.image), start=1):
        images.append({"id": i, "file_name": Path(r.image).name, "width": r.width, "height": r.height})
        for o in r.objects:
            b = o.bbox
            annotations.append(
                {
                    "id": len(annotations) + 1,
                    "image_id": i,
                    "category_id": o.id,
                    "iscrowd": 0,
                    "bbox": [b.xmin, b.ymin, b.xmax - b.xmin, b.ymax - b.ymin],
                    "area": (b.xmax - b.xmin) * (b.ymax - b.ymin),
                }
            )
    assert len(annotations) >= 10, "the shared photos should give the uncut model something to find"
    coco = tmp_path / "truth.json"
    coco.write_text(
        json.dumps(
            {
                "images": images,
                "annotations": annotations,
                "categories": [{"id": k, "name": n} for k, n in enumerate(names)],
            }
        )
    )
    ev = evaluate_detector(
        tmp_path / "cut.tflite",
        coco,
        images=folder,
        against=[str(tmp_path / "full.tflite")],
        device="cpu",
        resamples=100,
    )
    diff = ev.differences[0]
    assert abs(diff.map50_change) <= 0.005 and abs(diff.map_change) <= 0.05, diff


# --------------------------------------------------------------------------- the heads Ultralytics has shipped
# Built here without TensorFlow (tests/yolo_heads.py), so these run on a clone without ../shared.
HEADS = {
    "v8-8.3": {"head": "levels"},
    "v8-8.4": {"head": "joined"},
    "v8-8.4-nhwc": {"head": "joined", "nchw": False},
    "v26-8.4": {"head": "joined", "reg_max": 1},
    "v26-levels": {"head": "levels", "reg_max": 1},
    "v8-8.4-96x64": {"head": "joined", "size": (96, 64)},
    "v8-8.4-64-classes": {"head": "joined", "nc": 64},
    "v8-8.4-exp-softmax": {"head": "joined", "exp_softmax": True},
    "v8-8.4-litert-96x64": {"head": "joined", "litert": True, "size": (96, 64)},
    "v26-p2-8.4": {"head": "joined", "reg_max": 1, "strides": (4, 8, 16, 32)},
    "v8-p6-8.3": {"head": "levels", "strides": (8, 16, 32, 64), "size": (128, 128)},
}


def _strip_appended_zip(data: bytes) -> bytes:
    """``data`` without the ZIP a tool appended after the flatbuffer (as tools that rewrite a model drop it)."""
    start = data.index(b"PK\x03\x04", max(0, len(data) - 65536))
    stripped = data[:start]
    with pytest.raises(zipfile.BadZipFile):
        zipfile.ZipFile(io.BytesIO(stripped))
    return stripped


@pytest.mark.parametrize("kind", sorted(HEADS))
def test_every_shipped_head_is_found_by_structure_and_cut_to_a_full_model(kind):
    from tests.yolo_heads import tiny_yolo

    spec = HEADS[kind]
    data = tiny_yolo(**spec)
    info = tflite_model.ModelInfo.from_bytes(data)
    head = find_yolo_head(info)
    assert head is not None, kind
    h, w = spec.get("size", (64, 64))
    strides = spec.get("strides", (8, 16, 32))
    assert (head.reg_max, head.num_classes, head.strides) == (spec.get("reg_max", 16), spec.get("nc", 3), strides)
    assert head.join == ("per-level" if spec["head"] == "levels" else "joined") and not head.foreign
    cut, result = cut_decode(data)
    cut_info = tflite_model.ModelInfo.from_bytes(cut)
    assert [o.shape for o in cut_info.outputs] == [
        (1, h // s, w // s, c) for s in strides for c in (4 * head.reg_max, head.num_classes)
    ]
    # the cut maps whole, but for a float input's own TRANSPOSE and QUANTIZE (LiteRT's export), before the head
    uncut_cpu = {v.index for v in check_model(info).ops if v.target == "cpu"} - set(head.decode_ops)
    assert check_model(cut_info).summary.cpu_ops == len(uncut_cpu) == (2 if spec.get("litert") else 0)
    assert result.ops_after < result.ops_before
    assert [o.role for o in result.outputs] == [f"{k}@{s}" for s in strides for k in ("boxes", "scores")]
    layout = json.loads(cut_info.metadata["edgekit"])["detection"]["layout"]
    assert (layout["reg_max"], layout["input_hw"], layout["num_classes"]) == (head.reg_max, [h, w], head.num_classes)


def test_names_never_decide_the_head():
    """Tensor names say nothing to the finder: every tensor renamed to the same word, the same head is found."""
    import flatbuffers

    from tests.tflite_builder import S
    from tests.yolo_heads import tiny_yolo

    data = tiny_yolo()
    m = S.ModelT.InitFromPackedBuf(bytearray(data), 0)
    for t in m.subgraphs[0].tensors:
        t.name = "scores"
    b = flatbuffers.Builder(len(data))
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    a = find_yolo_head(tflite_model.ModelInfo.from_bytes(data))
    renamed = find_yolo_head(tflite_model.ModelInfo.from_bytes(bytes(b.Output())))
    assert renamed is not None and renamed.output_tensors == a.output_tensors


@pytest.mark.parametrize("metadata", [False, True])
def test_cut_cli_with_and_without_ultralytics_metadata_lists_the_output_tensors(tmp_path, metadata):
    """Issue 31: without Ultralytics' appended ZIP, cut wrote its output then exited 70; with it, its `outputs` were
    the class names. Both: exit 0 and the output tensors (role, name, shape, dtype, quantization)."""
    from tests.detection_models import with_ultralytics_metadata
    from tests.yolo_heads import tiny_yolo

    data = tiny_yolo(head="levels")
    src = tmp_path / "y.tflite"
    src.write_bytes(with_ultralytics_metadata(data, ["a", "b", "c"], [64, 64]) if metadata else data)
    out = CliRunner().invoke(cli, ["cut", str(src), "-o", str(tmp_path / "c.tflite"), "--json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    info = tflite_model.load(tmp_path / "c.tflite")
    assert [(o["name"], tuple(o["shape"]), o["dtype"]) for o in doc["outputs"]] == [
        (t.name, t.shape, t.dtype) for t in info.outputs
    ]
    assert [(o["scale"], o["zero_point"]) for o in doc["outputs"]] == [
        (pytest.approx(t.quantization.scale), t.quantization.zero_point) for t in info.outputs
    ]
    layout = json.loads(info.metadata["edgekit"])["detection"]["layout"]
    assert layout["labels"] == (["a", "b", "c"] if metadata else None)
    text = CliRunner().invoke(cli, ["cut", str(src), "-o", str(tmp_path / "d.tflite")]).output
    assert "next: edgekit compile" in text


def test_the_real_export_without_its_metadata_is_cut(tmp_path):
    """The real YOLOv8n export with Ultralytics' ZIP dropped (issue 31: exit 70 after writing its output)."""
    src = tmp_path / "yolo.tflite"
    src.write_bytes(_strip_appended_zip(shared_file(YOLO).read_bytes()))
    out = CliRunner().invoke(cli, ["cut", str(src), "--json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert [o["shape"] for o in doc["outputs"]] == [
        [1, 80, 80, 64],
        [1, 80, 80, 4],
        [1, 40, 40, 64],
        [1, 40, 40, 4],
        [1, 20, 20, 64],
        [1, 20, 20, 4],
    ]
    assert doc["check"] == {"verdict": "full", "cpu_ops": 0}


def test_nothing_is_written_before_the_result_stands(tmp_path, monkeypatch):
    """The typed result is made before the write: a failure there leaves no output behind."""
    from edgekit import api
    from edgekit.results import cut as results_cut
    from tests.yolo_heads import tiny_yolo

    src = tmp_path / "y.tflite"
    src.write_bytes(tiny_yolo())

    def broken(self):
        raise RuntimeError("rendering failed")

    monkeypatch.setattr(results_cut.CutResult, "render_text", broken)
    with pytest.raises(RuntimeError):
        api.cut(src, output=tmp_path / "c.tflite")
    assert not (tmp_path / "c.tflite").exists()


def _mutated(data: bytes, change) -> bytes:
    import flatbuffers

    from tests.tflite_builder import S

    m = S.ModelT.InitFromPackedBuf(bytearray(data), 0)
    change(m.subgraphs[0])
    b = flatbuffers.Builder(len(data))
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def _with_task(data: bytes, task: str) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("metadata.json", json.dumps({"author": "Ultralytics", "task": task, "names": {"0": "a"}}))
    return data + buf.getvalue()


def _cycle(g) -> None:  # the first conv reads what the last op writes
    g.operators[0].inputs[0] = g.operators[-1].outputs[0]


def _written_twice(g) -> None:  # the last op writes the first conv's output again
    g.operators[-1].outputs[0] = g.operators[0].outputs[0]


@pytest.mark.parametrize(
    "case,words",
    [
        ("segment", "Segment head"),
        ("pose", "Pose head"),
        ("segment-8.4", "Segment head"),
        ("pose-8.3", "Pose head"),
        ("task", "an Ultralytics segment model"),
        ("cycle", "the graph has a cycle"),
        ("twice", "malformed graph"),
    ],
)
def test_what_cut_cannot_handle_is_refused_in_one_line(tmp_path, case, words):
    """Segmentation and pose heads (whose masks or keypoints a cut would drop in silence), graphs with a cycle or a
    tensor written twice: exit 3, one line, nothing written."""
    from tests.yolo_heads import tiny_yolo

    data = {
        "segment": lambda: tiny_yolo(head="levels", extra="segment"),
        "pose": lambda: tiny_yolo(head="joined", extra="pose"),
        "segment-8.4": lambda: tiny_yolo(head="joined", extra="segment"),
        "pose-8.3": lambda: tiny_yolo(head="levels", extra="pose"),
        "task": lambda: _with_task(tiny_yolo(), "segment"),
        "cycle": lambda: _mutated(tiny_yolo(), _cycle),
        "twice": lambda: _mutated(tiny_yolo(), _written_twice),
    }[case]()
    src = tmp_path / "y.tflite"
    src.write_bytes(data)
    out = CliRunner().invoke(cli, ["cut", str(src), "-o", str(tmp_path / "c.tflite")])
    assert out.exit_code == 3, out.output
    assert words in out.output and len(out.output.strip().splitlines()) == 1
    assert not (tmp_path / "c.tflite").exists()


@pytest.mark.parametrize("kind", ["v8-8.4", "v26-8.4"])
def test_check_offers_the_cut_on_an_84_head_even_where_its_decode_maps(kind):
    """Issue 35: check's advice did not offer the cut on Ultralytics 8.4's heads. Where the decode maps (a small
    input), it is still offered: the int8 decode is what the host would do in float."""
    from tests.yolo_heads import tiny_yolo

    report = check_model(tflite_model.ModelInfo.from_bytes(tiny_yolo(**HEADS[kind])))
    assert report.verdict == "full"
    advice = " ".join(report.advice)
    assert "`edgekit cut` cuts the model before its decode" in advice and "Ultralytics 8.4" in advice


# --------------------------------------------------------------------------- runnable heads built here (TensorFlow)
KERAS = {
    "v8-8.3": {"head": "levels"},
    "v8-8.4": {"head": "joined"},
    "v26-8.4": {"head": "joined", "reg_max": 1},
    "v8-8.4-64x96": {"head": "joined", "size": (64, 96)},
}
SCENES = ([(0, 1, 2), (1, 1, 0)], [(0, 3, 3)], [(1, 0, 1), (0, 0, 0)], [])  # (class, row, column) per image


@pytest.fixture(scope="module")
def keras_heads():
    tf = pytest.importorskip("tensorflow")
    from tests.yolo_heads import keras_yolo

    return {kind: keras_yolo(tf, **spec) for kind, spec in KERAS.items()}


def _truth(cls: int, row: int, col: int) -> np.ndarray:
    from tests.yolo_heads import BLOBS

    side = BLOBS[cls][2]
    return np.array([[col * side, row * side, (col + 1) * side, (row + 1) * side]], np.float32)


@pytest.mark.tf
@pytest.mark.parametrize("metadata", [False, True])
@pytest.mark.parametrize("kind", sorted(KERAS))
def test_detect_on_the_cut_model_finds_the_objects_the_uncut_one_finds(tmp_path, keras_heads, kind, metadata):
    """Issue 35: a runnable detector with each head (8.3 per-level, 8.4 joined, YOLO26's joined without DFL), its
    weights set by hand to find coloured squares: `edgekit detect` on the cut model (its layout recorded by cut)
    finds the same objects as on the uncut model (Ultralytics' decode in int8 inside it), both on the squares,
    with and without Ultralytics' metadata, on a square input and a wide one."""
    from edgekit import api
    from edgekit.devices.detect import detect
    from tests.detection_models import save_png, with_ultralytics_metadata
    from tests.yolo_heads import blob_image

    data, size = keras_heads[kind], KERAS[kind].get("size", (64, 64))
    src = tmp_path / "full.tflite"
    src.write_bytes(with_ultralytics_metadata(data, ["red", "green"], list(size)) if metadata else data)
    result = api.cut(src, output=tmp_path / "cut.tflite")
    assert result.check.verdict == "full" and result.reg_max == KERAS[kind].get("reg_max", 16)
    images = [str(save_png(tmp_path / f"{i}.png", blob_image(size, scene))) for i, scene in enumerate(SCENES)]
    full = {r.image: r for r in detect(images, src, device="cpu").results}
    part = {r.image: r for r in detect(images, tmp_path / "cut.tflite", device="cpu").results}
    for image, scene in zip(images, SCENES):
        a, b = full[image], part[image]
        assert sorted(o.id for o in a.objects) == sorted(o.id for o in b.objects) == sorted(c for c, _, _ in scene)
        for cls, row, col in scene:
            for found in (a, b):
                o = next(o for o in found.objects if o.id == cls)
                box = np.array([[o.bbox.xmin, o.bbox.ymin, o.bbox.xmax, o.bbox.ymax]], np.float32)
                assert _iou(box, _truth(cls, row, col))[0] >= 0.9, (kind, image, o)
                assert o.score > 0.9


def test_checks_summary_in_quantize_and_build_offers_the_cut_whenever_it_applies():
    """The summary quantize and build print (results.check.CheckDigest) carries check's offer of the cut: on each
    head a cut can take, never on a model without one or on a head the cut refuses (Segment)."""
    import json as _json

    from edgekit.results.check import CheckDigest
    from tests.tflite_builder import conv_chain
    from tests.yolo_heads import tiny_yolo

    for spec in HEADS.values():
        summary = CheckDigest.from_check(check_model(tflite_model.ModelInfo.from_bytes(tiny_yolo(**spec))))
        assert summary.cut and "`edgekit cut` cuts the model before its decode" in summary.lines()[-1]
        assert CheckDigest.from_dict(_json.loads(_json.dumps(summary.to_dict()))) == summary
    for data in (conv_chain(2), tiny_yolo(head="levels", extra="segment")):
        summary = CheckDigest.from_check(check_model(tflite_model.ModelInfo.from_bytes(data)))
        assert summary.cut is None and not any("edgekit cut" in line for line in summary.lines())


@pytest.mark.tf
@pytest.mark.parametrize("kind", ["v26-8.4", "v8-8.4"])
def test_a_cut_model_whose_record_was_lost_is_still_read_by_its_shapes(tmp_path, keras_heads, kind):
    """A cut model without its edgekit record (a tool rewrote the metadata): detect reads the per-level maps by their
    shapes, 16-bin DFL or YOLO26's 4 distances (was: refused unless the boxes had 64 channels)."""
    import flatbuffers

    from edgekit.devices.detect import detect
    from tests.detection_models import save_png
    from tests.tflite_builder import S
    from tests.yolo_heads import blob_image

    cut, _ = cut_decode(keras_heads[kind])
    m = S.ModelT.InitFromPackedBuf(bytearray(cut), 0)
    m.metadata = [e for e in m.metadata or [] if e.name not in (b"edgekit", "edgekit")]
    b = flatbuffers.Builder(len(cut))
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    (tmp_path / "cut.tflite").write_bytes(bytes(b.Output()))
    assert "edgekit" not in tflite_model.load(tmp_path / "cut.tflite").metadata
    scene = SCENES[0]
    image = save_png(tmp_path / "a.png", blob_image((64, 64), scene))
    found = detect([str(image)], tmp_path / "cut.tflite", device="cpu").results[0]
    assert sorted(o.id for o in found.objects) == [0, 1]
    for cls, row, col in scene:
        o = next(o for o in found.objects if o.id == cls)
        box = np.array([[o.bbox.xmin, o.bbox.ymin, o.bbox.xmax, o.bbox.ymax]], np.float32)
        assert _iou(box, _truth(cls, row, col))[0] >= 0.9


# --------------------------------------------------------------------------- the cut against the uncut decode
EXPORTS = Path(__file__).resolve().parents[1] / "fixtures" / "exports"


def _ultralytics_detect_exports() -> list:
    """The real Ultralytics exports committed under tests/fixtures/exports (by their script) whose metadata says
    task=detect; none yet, a skipped case."""
    from edgekit.detection.layout import appended_zip, ultralytics_metadata

    found = []
    for p in sorted(EXPORTS.rglob("*.tflite")) if EXPORTS.is_dir() else []:
        meta = ultralytics_metadata(appended_zip(p))
        if meta is not None and meta.task == "detect" and not p.stem.endswith("_edgetpu"):
            found.append(pytest.param(p, id=str(p.relative_to(EXPORTS))))
    return found or [pytest.param(None, marks=pytest.mark.skip(reason=f"no Ultralytics detect export in {EXPORTS}"))]


def _invoke(data: bytes, image: np.ndarray) -> list[np.ndarray]:
    """The model's dequantized outputs on ``image`` (HxWx3, 0..1): channels first or last, float or integer input."""
    from ai_edge_litert.interpreter import Interpreter

    interp = Interpreter(model_content=data, num_threads=1)
    interp.allocate_tensors()
    d = interp.get_input_details()[0]
    x = image[None].astype(np.float32)
    if d["shape"][1] == 3 and d["shape"][3] != 3:
        x = x.transpose(0, 3, 1, 2)
    if np.issubdtype(d["dtype"], np.integer):
        scale, zero = d["quantization"]
        info = np.iinfo(d["dtype"])
        x = np.clip(np.round(x / scale + zero), info.min, info.max)
    interp.set_tensor(d["index"], x.astype(d["dtype"]))
    interp.invoke()
    outs = []
    for o in interp.get_output_details():
        v = interp.get_tensor(o["index"])
        s, z = o["quantization"]
        outs.append(v.astype(np.float32) if not s else (v.astype(np.float32) - z) * s)
    return outs


def _cut_agrees_with_the_uncut_decode(data: bytes, image: np.ndarray, boxes: bool = True) -> None:
    """Per anchor, the host's float decode of the cut model's maps (edgekit.board.decode.decode_split_dfl) against the
    uncut model's own int8 decode (Ultralytics' TFLite output: [1, 4 + nc, N] normalized xywh, then probabilities):
    the same best class where it matters, scores within a few of the uncut output's steps, boxes over a score of
    0.25 at IoU >= 0.9 or their corners within 4 steps of the uncut model's int8 grid (``boxes``: False for random
    weights, whose box maps are all but zero: the uncut int8 decode's boxes are then its rounding noise)."""
    from edgekit.board.decode import decode_split_dfl

    cut, result = cut_decode(data)
    h, w = image_size(tflite_model.ModelInfo.from_bytes(data).inputs[0].shape)  # what the head was found at
    full = _invoke(data, image)[0][0]
    full = full if full.shape[0] == 4 + result.num_classes else full.T  # [4 + nc, N]
    xy, wh = full[:2].T * (w, h), full[2:4].T * (w, h)
    ref_boxes, ref_scores = np.concatenate([xy - wh / 2, xy + wh / 2], 1), full[4:].T
    outs = _invoke(cut, image)
    got = decode_split_dfl(outs[0::2], outs[1::2], (h, w), result.strides, result.reg_max, True)
    q = tflite_model.ModelInfo.from_bytes(data).outputs[0].quantization
    step = max(q.scale if q is not None else 0.0, 1 / 256)  # the uncut int8 sigmoid's own step at least
    assert np.abs(got.scores - ref_scores.max(1)).max() <= 4 * step
    sure = ref_scores.max(1) > 0.25
    assert (
        np.array_equal(got.classes[sure], ref_scores.argmax(1)[sure])
        or np.sort(ref_scores[sure], 1)[:, -2:].ptp(1).min() <= 4 * step
    )  # a class may flip only where two were within the rounding
    if (
        boxes and sure.any()
    ):  # the uncut decode leaves on an int8 grid (what the cut wins back), at least max(h, w) / 255
        # pixels, coarser where its scale is (read from its own distinct values): its corners may sit a few steps
        # off, an IoU of ~0.8 on a 35-px box at 640, NaN on a point box of random weights
        levels = np.unique(np.round(full[:4] * max(h, w), 3))
        grid = max(max(h, w) / 255, float(np.diff(levels).min()) if len(levels) > 1 else 0.0)
        near = np.abs(ref_boxes[sure] - got.boxes[sure]).max(1) <= 4 * grid
        assert (near | (_iou(ref_boxes[sure], got.boxes[sure]) >= 0.9)).all()


@pytest.mark.tf
@pytest.mark.parametrize("kind", sorted(KERAS))
def test_the_cut_of_each_head_built_here_agrees_with_its_uncut_decode(keras_heads, kind):
    from tests.yolo_heads import blob_image

    size = KERAS[kind].get("size", (64, 64))
    _cut_agrees_with_the_uncut_decode(keras_heads[kind], blob_image(size, list(SCENES[0])) / 255.0)


@pytest.mark.parametrize("path", _ultralytics_detect_exports())
def test_the_cut_of_each_real_ultralytics_export_agrees_with_its_uncut_decode(path):
    """Each real Ultralytics detect export committed as a fixture (8.4: YOLOv8n, YOLO11n, YOLO26n; edgetpu and LiteRT
    int8): its head is found, the cut maps where the backbone allows, and the host decode agrees with the export's
    own. The image: a shared photo letterboxed where present, else a generated pattern."""
    data = path.read_bytes()
    info = tflite_model.ModelInfo.from_bytes(data)
    head = find_yolo_head(info)
    assert head is not None and not head.foreign, path
    cut, _ = cut_decode(data)
    before = {v.index for v in check_model(info).ops if v.target == "cpu"} - set(head.decode_ops)
    assert check_model(tflite_model.ModelInfo.from_bytes(cut)).summary.cpu_ops <= len(before)
    h, w = head.input_hw
    photo = TESTDATA_PHOTO if TESTDATA_PHOTO.is_file() else None
    image = (
        _letterbox("grace_hopper.bmp", h)
        if photo is not None and h == w
        else np.indices((h, w)).sum(0)[..., None].repeat(3, 2) % 64 / 63.0
    )
    made = json.loads((EXPORTS / "manifest.json").read_text())["files"].get(path.name, {})
    _cut_agrees_with_the_uncut_decode(data, image.astype(np.float32), boxes=made.get("epochs") != 0)


def test_a_model_cut_already_is_refused_saying_so(tmp_path):
    from tests.yolo_heads import tiny_yolo

    (tmp_path / "y.tflite").write_bytes(tiny_yolo())
    assert CliRunner().invoke(cli, ["cut", str(tmp_path / "y.tflite")]).exit_code == 0
    again = CliRunner().invoke(cli, ["cut", str(tmp_path / "y_cut.tflite")])
    assert again.exit_code == 3 and "cut before its decode already" in again.output
    assert not (tmp_path / "y_cut_cut.tflite").exists()


# --------------------------------------------------------------------------- real exports among the evidence pairs
PAIRS = Path(__file__).resolve().parents[1] / "fixtures" / "evidence" / "pairs"


def _pair_models() -> list[tuple[str, bytes, tflite_model.ModelInfo, dict]]:
    import gzip

    out = []
    for p in sorted(PAIRS.glob("*.tflite.gz")):
        data = gzip.decompress(p.read_bytes())
        try:
            info = tflite_model.ModelInfo.from_bytes(data)
        except EdgekitError:
            continue
        out.append((p.name, data, info, json.loads(p.with_name(p.name[: -len(".tflite.gz")] + ".json").read_text())))
    return out


def test_the_real_exports_among_the_evidence_pairs_are_found_and_nothing_else():
    """The evidence pairs (real models from public repositories, their compiled twins' logs, weights zeroed): a head
    is found exactly in the models whose output is Ultralytics' decoded one ([1, 4 + nc, anchors of the input]; the
    YOLOv8n exports at 640 and 320, the YOLOv5nu at 320), in none of the other 200-odd (SSD, EfficientDet, YOLOv5
    with anchor boxes, classifiers...); in each, every op the real compiler left on the CPU is a decode op, and the
    cut model is predicted whole on the Edge TPU."""
    from edgekit.board.decode import anchor_count

    found = []
    for name, data, info, pair in _pair_models():
        head = find_yolo_head(info)
        shapes = [o.shape for o in info.outputs]
        h, w = info.inputs[0].shape[1:3] if len(info.inputs) == 1 and len(info.inputs[0].shape) == 4 else (0, 0)
        decoded = len(shapes) == 1 and len(shapes[0]) == 3 and shapes[0][2] == anchor_count((h, w)) > 0
        assert (head is not None) == decoded, name
        if head is None:
            continue
        found.append((head.reg_max, head.input_hw, head.num_classes))
        assert set(pair["cpu_op_indices"]) <= set(head.decode_ops), name
        cut, _ = cut_decode(data)
        assert check_model(tflite_model.ModelInfo.from_bytes(cut)).summary.cpu_ops == 0, name
    assert len(found) >= 4 and {hw for _, hw, _ in found} >= {(640, 640), (320, 320)}, found
