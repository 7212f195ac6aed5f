"""evaluate for detectors: edgekit's mAP against pycocotools run by hand on detect's own output; the bootstrap's
re-accumulation against COCOeval.accumulate; YOLO and COCO forms of one set; the synthetic shapes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from edgekit.board.decode import anchor_count
from edgekit.detection.data import make_shapes, read_detection_set
from edgekit.devices import evaluate_detector as detection_eval
from edgekit.results.evaluate import DetectionEvaluateResult
from tests.detection_models import image_for, save_png, slice_model

pytest.importorskip("pycocotools")
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

HW = (64, 64)
NA = anchor_count(HW)  # 84
NC = 3


def encoded_set(folder: Path, n: int = 30, seed: int = 0, predict: bool = True, coarse: bool = False) -> Path:
    """A COCO set of 64x64 images whose pixels are the raw outputs of :func:`slice_model`'s yolo model: the
    detections are chosen here (ground truth jittered, some missed, some false, tiny boxes, images without
    objects, images without predictions). Returns the annotation file."""
    rng = np.random.RandomState(seed)
    (folder / "images").mkdir(parents=True, exist_ok=True)
    (folder / "labels").mkdir(exist_ok=True)
    images, anns = [], []
    for i in range(n):
        k = 0 if i % 6 == 5 else rng.randint(1, 5)
        out = np.zeros((4 + NC, NA))
        lines = []
        for j in range(k):
            w, h = rng.uniform(2, 6, 2) if j == 0 else rng.uniform(6, 50, 2)  # one tiny box per image
            x, y = rng.uniform(0, 64 - w), rng.uniform(0, 64 - h)
            c = rng.randint(NC)
            anns.append(
                {
                    "id": len(anns) + 1,
                    "image_id": i + 1,
                    "category_id": c,
                    "bbox": [x, y, w, h],
                    "area": w * h,
                    "iscrowd": 0,
                }
            )
            lines.append(f"{c} {(x + w / 2) / 64:.6f} {(y + h / 2) / 64:.6f} {w / 64:.6f} {h / 64:.6f}")
            if predict and i % 7 != 3 and rng.uniform() > 0.15:  # image 3, 10, ...: nothing predicted
                jit = rng.normal(0, 0.03 * max(w, h), 4)
                cx, cy = (x + w / 2 + jit[0]) / 64, (y + h / 2 + jit[1]) / 64
                out[:4, j] = [cx, cy, max(w + jit[2], 1) / 64, max(h + jit[3], 1) / 64]
                out[4 + (c if rng.uniform() > 0.1 else (c + 1) % NC), j] = rng.uniform(0.3, 1.0)
        if predict and i % 7 != 3:
            for j in range(10, 10 + rng.randint(0, 3)):  # false positives
                out[:4, j] = [*rng.uniform(0.2, 0.8, 2), *rng.uniform(0.05, 0.3, 2)]
                out[4 + rng.randint(NC), j] = rng.uniform(0.05, 0.6)
        out[:4] = out[:4].clip(0, 1.98)
        name = f"im{i:03d}.png"
        save_png(folder / "images" / name, image_for(HW, [out]))
        (folder / "labels" / f"im{i:03d}.txt").write_text("\n".join(lines))
        images.append({"id": i + 1, "file_name": name, "width": 64, "height": 64})
    ann = folder / "instances.json"
    ann.write_text(
        json.dumps(
            {"images": images, "annotations": anns, "categories": [{"id": c, "name": f"c{c}"} for c in range(NC)]}
        )
    )
    (folder / "classes.txt").write_text("".join(f"c{c}\n" for c in range(NC)))
    return ann


@pytest.fixture(scope="module")
def yolo_model(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("m") / "yolo.tflite"
    path.write_bytes(slice_model(HW, [{"shape": [1, 4 + NC, NA]}]))
    return path


def pycocotools_by_hand(ann: Path, detect_doc: dict, tmp_path: Path) -> np.ndarray:
    """What a user would do: detect --json, convert the boxes to COCO results, run pycocotools on files."""
    gt = json.loads(ann.read_text())
    by_name = {im["file_name"]: im["id"] for im in gt["images"]}
    results = []
    for r in detect_doc["results"]:
        for o in r["objects"]:
            b = o["bbox"]
            results.append(
                {
                    "image_id": by_name[Path(r["image"]).name],
                    "category_id": o["id"],
                    "score": o["score"],
                    "bbox": [b["xmin"], b["ymin"], b["xmax"] - b["xmin"], b["ymax"] - b["ymin"]],
                }
            )
    res = tmp_path / "results.json"
    res.write_text(json.dumps(results))
    coco = COCO(str(ann))
    ev = COCOeval(coco, coco.loadRes(str(res)), "bbox")
    ev.evaluate()
    ev.accumulate()
    ev.summarize()
    return ev.stats


def test_map_equals_pycocotools_on_detects_output(yolo_model, tmp_path):
    from click.testing import CliRunner

    from edgekit.cli.app import cli

    ann = encoded_set(tmp_path / "set")
    runner = CliRunner()
    res = runner.invoke(cli, ["evaluate", "-m", str(yolo_model), "--data", str(ann), "--json", "-q"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    m = doc["models"][0]
    det = runner.invoke(
        cli,
        [
            "detect",
            str(tmp_path / "set" / "images"),
            "-m",
            str(yolo_model),
            "--conf",
            "0.001",
            "--iou",
            "0.7",
            "--max-det",
            "100",
            "--json",
            "-q",
        ],
    )
    assert det.exit_code == 0, det.output
    stats = pycocotools_by_hand(ann, json.loads(det.stdout), tmp_path)
    assert 0.2 < stats[0] < 0.95  # a set with real hits and misses
    assert abs(m["map"] - stats[0]) < 1e-3 and abs(m["map50"] - stats[1]) < 1e-3
    assert abs(m["map75"] - stats[2]) < 1e-3 and abs(m["map_small"] - stats[3]) < 1e-3
    assert m["map_large"] is None and stats[5] == -1  # nothing large in 64x64 images: COCO's -1
    assert doc["protocol"] == {
        "conf": 0.001,
        "iou": 0.7,
        "max_det": 100,
        "standard": True,
        "scorer": "pycocotools COCOeval (bbox)",
    }
    assert any(c["objects"] for c in m["per_class"])
    # the YOLO folder form of the same set scores the same
    res = runner.invoke(cli, ["evaluate", "-m", str(yolo_model), "--data", str(tmp_path / "set"), "--json", "-q"])
    assert res.exit_code == 0, res.output
    assert abs(json.loads(res.stdout)["models"][0]["map"] - m["map"]) < 1e-3


def test_no_predictions_at_all_scores_zero(yolo_model, tmp_path):
    ann = encoded_set(tmp_path / "empty", n=8, predict=False)
    ev = detection_eval.evaluate_detector(yolo_model, ann)
    r = ev.models[0]
    assert r.detections == 0 and r.map == 0.0 and r.map50 == 0.0
    assert any("only 8 images" in w for w in ev.warnings)


def test_nonstandard_protocol_is_said(yolo_model, tmp_path):
    ann = encoded_set(tmp_path / "s", n=6)
    ev = detection_eval.evaluate_detector(yolo_model, ann, conf=0.25, max_det=10)
    assert not ev.protocol.standard and "NOT the standard protocol" in ev.render_text()


def test_reaccumulation_equals_cocoeval(yolo_model, tmp_path):
    """The bootstrap's per-resample AP is COCOeval.accumulate's on the full set, to float precision."""
    ann = encoded_set(tmp_path / "b", n=20, seed=3)
    dataset = read_detection_set(ann)
    from edgekit.devices.detect import open_detector

    det = open_detector(yolo_model)
    run = det.run([dataset.paths[i] for i in sorted(dataset.paths)], 0.001, 0.7, 100)
    per_image = {i: r.objects for i, r in zip(sorted(dataset.paths), run.results)}
    ev = detection_eval.run_cocoeval(
        dataset.coco, detection_eval.coco_detections(dataset, per_image, {k: k for k in range(NC)})
    )
    m, m50 = detection_eval.accumulate_images(ev, np.arange(len(dataset)))
    assert m == pytest.approx(ev.stats[0], abs=1e-12) and m50 == pytest.approx(ev.stats[1], abs=1e-12)


def test_coarse_twin_loses_map_with_an_interval(yolo_model, tmp_path):
    """A twin whose outputs are requantized coarsely (steps of 0.03: 1.9 px of 64) loses mAP; the interval says
    so, and a model against itself changes by exactly 0."""
    coarse = tmp_path / "coarse.tflite"
    coarse.write_bytes(slice_model(HW, [{"shape": [1, 4 + NC, NA], "requant": (0.03, -128)}]))
    ann = encoded_set(tmp_path / "c", n=40, seed=1)
    ev = detection_eval.evaluate_detector(coarse, ann, against=[str(yolo_model), str(coarse)], resamples=200)
    loss, same = ev.differences
    assert loss.map_change < 0 and loss.map_interval[1] < 0
    assert same.map_change == 0 and same.map_interval == (0.0, 0.0)
    assert "a real loss" in loss.line() or loss.map50_interval[1] >= 0
    doc = ev.to_dict()
    assert DetectionEvaluateResult.from_dict(json.loads(json.dumps(doc))).to_dict() == doc


def test_missing_pycocotools_is_exit_4(monkeypatch, yolo_model, tmp_path):
    import builtins

    real = builtins.__import__

    def no_coco(name, *a, **kw):
        if name.startswith("pycocotools"):
            raise ImportError(name)
        return real(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", no_coco)
    from edgekit.errors import MissingDependencyError

    with pytest.raises(MissingDependencyError, match="pycocotools") as info:
        detection_eval.evaluate_detector(yolo_model, tmp_path / "x.json")
    assert info.value.exit_code == 4


def test_synthetic_shapes_write_matching_coco_and_yolo(tmp_path):
    coco = make_shapes(tmp_path / "shapes", n_images=14, seed=5)
    a = read_detection_set(tmp_path / "shapes" / "annotations.json")
    b = read_detection_set(tmp_path / "shapes")
    assert len(a) == len(b) == 14 and a.kind == "coco" and b.kind == "yolo"
    boxes_a = np.array([x["bbox"] for x in a.coco["annotations"]])
    boxes_b = np.array([x["bbox"] for x in b.coco["annotations"]])
    assert np.abs(boxes_a - boxes_b).max() < 1e-3
    assert [c["name"] for c in b.categories] == ["rectangle", "ellipse", "triangle"]
    per_image = {im["id"]: 0 for im in coco["images"]}
    for x in coco["annotations"]:
        per_image[x["image_id"]] += 1
    assert 0 in per_image.values() and min(boxes_a[:, 2]) < 8  # images without objects, tiny objects
    assert make_shapes(tmp_path / "again", n_images=14, seed=5) == coco  # deterministic


def test_classifier_options_refused_for_class_folders(tmp_path):
    from click.testing import CliRunner

    from edgekit.cli.app import cli

    (tmp_path / "d" / "a").mkdir(parents=True)
    res = CliRunner().invoke(cli, ["evaluate", "-m", "x.tflite", "--data", str(tmp_path / "d"), "--conf", "0.1"])
    assert res.exit_code == 2 and "detectors only" in res.stderr


def test_a_map50_95_loss_gets_a_verdict_of_its_own(yolo_model, tmp_path):
    """issue 35: a twin whose boxes are requantized in steps of 0.02 (1.3 px of 64) keeps mAP50 within what 40
    images can tell, but loses mAP50-95 beyond doubt: --max-drop decides both, and fails (exit 6) on the second,
    the result still printed; a model against itself passes both."""
    from click.testing import CliRunner

    from edgekit.cli.app import cli

    coarse = tmp_path / "coarse.tflite"
    coarse.write_bytes(slice_model(HW, [{"shape": [1, 4 + NC, NA], "requant": (0.02, -128)}]))
    ann = encoded_set(tmp_path / "c", n=40, seed=1)
    ev = detection_eval.evaluate_detector(
        coarse, ann, against=[str(yolo_model), str(coarse)], resamples=200, max_drop=5
    )
    loss, same = ev.differences
    assert loss.map50_verdict.verdict != "failed" and loss.map_verdict.verdict == "failed"
    assert loss.map_verdict.estimate == pytest.approx(-loss.map_change) and loss.map_verdict.threshold == 0.05
    assert loss.map_verdict.interval == pytest.approx((-loss.map_interval[1], -loss.map_interval[0]))
    assert "FAILED: drops more than 5 points" in loss.line().split("mAP50-95")[1]
    assert same.map50_verdict.verdict == same.map_verdict.verdict == "passed"
    doc = ev.to_dict()
    assert DetectionEvaluateResult.from_dict(json.loads(json.dumps(doc))).to_dict() == doc
    res = CliRunner().invoke(
        cli,
        [
            "evaluate",
            "-m",
            str(coarse),
            "--data",
            str(ann),
            "--against",
            str(yolo_model),
            "--max-drop",
            "5",
            "--json",
            "-q",
        ],
    )
    assert res.exit_code == 6, res.output
    assert "mAP50-95 drops" in res.stderr and "--max-drop 5" in res.stderr
    shown = json.loads(res.stdout)["differences"][0]
    assert shown["map_verdict"]["verdict"] == "failed" and shown["max_drop_points"] == 5
    if shown["map50_verdict"]["verdict"] == "uncertain":  # the mAP50 one is said, with what would settle it
        assert shown["map50_verdict"]["settle_at"] > 40
    import edgekit
    from edgekit.errors import VerificationError

    with pytest.raises(VerificationError) as info:  # the Python API: the numbers and the whole result
        edgekit.evaluate_detector(coarse, ann, against=[yolo_model], max_drop=5)
    e = info.value
    assert (e.measure, e.limit) == ("map_drop", 5) and e.value == pytest.approx(-shown["map_change"])
    assert isinstance(e.result, DetectionEvaluateResult) and e.result.differences[0].map_verdict.verdict == "failed"


def test_max_drop_needs_against(yolo_model, tmp_path):
    from click.testing import CliRunner

    from edgekit.cli.app import cli

    ann = encoded_set(tmp_path / "c", n=4, seed=1)
    res = CliRunner().invoke(cli, ["evaluate", "-m", str(yolo_model), "--data", str(ann), "--max-drop", "1"])
    assert res.exit_code == 2 and "--max-drop needs --against" in res.stderr


def test_quantizes_detector_gate_says_a_map50_95_drop_beyond_its_limit():
    """quantize --eval: a mAP50-95 drop beyond --max-accuracy-drop for sure gets its verdict and a warning naming
    the command that gates on it, while the gate itself stays mAP50's as documented (issue 35's 8.9 points)."""
    import dataclasses

    from edgekit.converters.detector_verify import apply_map50_gate
    from edgekit.results.detect import DetectionLayout, Layout
    from edgekit.results.quantize import Decision, DetectionVerification, Map50Gate

    gate = Map50Gate(
        "eval",
        100,
        300,
        0.90,
        0.895,
        0.005,
        (-0.01, 0.02),
        2.0,
        Decision.PASSED,
        500,
        0,
        "pycocotools",
        (),
        0.885,
        0.796,
        0.089,
        (0.07, 0.11),
        Decision.FAILED,
    )
    layout = DetectionLayout(
        Layout.YOLO, {"boxes": 0}, 3, (64, 64), True, False, False, 0, (8, 16, 32), False, None, (), {}, None
    )
    v = DetectionVerification(
        "detection",
        40,
        {"held_back": 40},
        0.25,
        0.5,
        100,
        100,
        98,
        0.9,
        0.01,
        None,
        layout,
        (),
        (),
        0.98,
        (0.95, 0.99),
        Decision.PASSED,
        True,
    )
    out = apply_map50_gate(v, gate)
    assert out.passed and not out.failures and "mAP50-95 drops from 88.5 (float) to 79.6 (int8)" in out.warnings[0]
    assert "--max-drop" in out.warnings[0]
    assert any("mAP50-95 on the labels" in line and "failed" in line for line in out.lines())
    assert not apply_map50_gate(v, dataclasses.replace(gate, map_verdict=Decision.PASSED)).warnings
    unsure = apply_map50_gate(v, dataclasses.replace(gate, map_verdict=Decision.UNCERTAIN))
    assert unsure.passed and not unsure.warnings and "cannot tell for sure" in unsure.notes[0]
    assert not apply_map50_gate(v, dataclasses.replace(gate, verdict=Decision.FAILED)).passed


def test_plots_writes_pr_curves_and_confusion_matrices_beside_each_other(yolo_model, tmp_path):
    """evaluate --plots DIR: pr_curve.png and confusion_matrix.png, one panel per model (-m beside --against);
    the curves are pycocotools' precision array (their mean is the mAP50 printed)."""
    from click.testing import CliRunner
    from PIL import Image

    from edgekit.cli.app import cli
    from edgekit.devices import plots

    pytest.importorskip("matplotlib")
    coarse = tmp_path / "coarse.tflite"
    coarse.write_bytes(slice_model(HW, [{"shape": [1, 4 + NC, NA], "requant": (0.03, -128)}]))
    ann = encoded_set(tmp_path / "c", n=20, seed=1)
    res = CliRunner().invoke(
        cli,
        [
            "evaluate",
            "-m",
            str(coarse),
            "--data",
            str(ann),
            "--against",
            str(yolo_model),
            "--plots",
            str(tmp_path / "out" / "plots"),
            "--json",
            "-q",
        ],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["plots"] == [str(tmp_path / "out" / "plots" / n) for n in ("pr_curve.png", "confusion_matrix.png")]
    one = detection_eval.evaluate_detector(yolo_model, ann, plots=str(tmp_path / "single"), resamples=100)
    for name in ("pr_curve.png", "confusion_matrix.png"):
        two_panels, one_panel = (Image.open(p / name) for p in (tmp_path / "out" / "plots", tmp_path / "single"))
        assert two_panels.format == "PNG" and two_panels.width > 1.8 * one_panel.width
    assert "Plots: " in one.render_text()
    ds = read_detection_set(ann)
    run = (
        __import__("edgekit.devices.detect", fromlist=["x"])
        .open_detector(yolo_model)
        .run([ds.paths[i] for i in sorted(ds.paths)], 0.001, 0.7, 100)
    )
    ev = detection_eval.run_cocoeval(
        ds.coco,
        detection_eval.coco_detections(
            ds, {i: r.objects for i, r in zip(sorted(ds.paths), run.results)}, {k: k for k in range(NC)}
        ),
    )
    recall, per_class, mean = plots.pr_curves(ev)
    assert len(recall) == 101 and per_class.shape == (NC, 101)
    assert np.nanmean(mean) == pytest.approx(ev.stats[1], abs=1e-12) == doc["models"][1]["map50"]


def test_the_confusion_matrix_counts_as_ultralytics_val():
    """Detections at conf >= 0.25 matched one to one at IoU > 0.45: hits by class, a missed object in the
    background row, a false detection in the background column, a low-score one ignored."""
    from edgekit.devices.plots import confusion

    gt = {
        "images": [{"id": 1}, {"id": 2}],
        "annotations": [
            {"image_id": 1, "category_id": 5, "bbox": [0, 0, 10, 10]},
            {"image_id": 1, "category_id": 7, "bbox": [20, 20, 10, 10]},
            {"image_id": 2, "category_id": 7, "bbox": [0, 0, 10, 10]},
        ],
    }
    dets = [
        {"image_id": 1, "category_id": 5, "score": 0.9, "bbox": [1, 1, 10, 10]},  # right
        {"image_id": 1, "category_id": 5, "score": 0.8, "bbox": [20, 21, 10, 10]},  # 7 called 5
        {"image_id": 2, "category_id": 7, "score": 0.2, "bbox": [0, 0, 10, 10]},  # below 0.25: a miss
        {"image_id": 2, "category_id": 5, "score": 0.7, "bbox": [50, 50, 5, 5]},
    ]  # nothing there
    m = confusion(gt, dets, [5, 7])
    assert m.tolist() == [[1, 1, 1], [0, 0, 0], [0, 1, 0]]


def test_plots_without_matplotlib_is_exit_4_before_any_model_runs(monkeypatch, yolo_model, tmp_path):
    import builtins

    from click.testing import CliRunner

    from edgekit.cli.app import cli

    real = builtins.__import__

    def no_matplotlib(name, *a, **kw):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real(name, *a, **kw)

    ann = encoded_set(tmp_path / "c", n=4, seed=1)
    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    monkeypatch.setattr("edgekit.devices.detect.open_detector", lambda *a, **k: pytest.fail("a model ran"))
    res = CliRunner().invoke(
        cli, ["evaluate", "-m", str(yolo_model), "--data", str(ann), "--plots", str(tmp_path / "p")]
    )
    assert (
        res.exit_code == 4
        and "pip install matplotlib (or '.[plots]' in an edgekit checkout)" in res.stderr
        and not (tmp_path / "p").exists()
    )
    (tmp_path / "d" / "a").mkdir(parents=True)  # a classifier's too, before its model is opened
    res = CliRunner().invoke(cli, ["evaluate", "-m", "x.tflite", "--data", str(tmp_path / "d"), "--plots", "p"])
    assert res.exit_code == 4 and "pip install matplotlib (or '.[plots]' in an edgekit checkout)" in res.stderr


def test_evaluate_detector_is_its_own_api_function_and_evaluate_on_detection_data_is_deprecated(yolo_model, tmp_path):
    """Issue 33: one type per function. edgekit.evaluate_detector returns a DetectionEvaluateResult and refuses a
    classifier's data; edgekit.evaluate given detection data still scores it, for one release, with a
    DeprecationWarning naming evaluate_detector; the CLI's one evaluate command picks by the data, without it."""
    import warnings

    from click.testing import CliRunner

    import edgekit
    from edgekit.cli.app import cli
    from edgekit.errors import UsageError

    ann = encoded_set(tmp_path / "s", n=12, seed=2)
    result = edgekit.evaluate_detector(yolo_model, ann, device="cpu")
    assert isinstance(result, DetectionEvaluateResult) and result.models[0].map50 is not None
    with pytest.warns(DeprecationWarning, match=r"edgekit\.evaluate_detector\(model, data") as caught:
        old = edgekit.evaluate(yolo_model, ann, device="cpu")
    assert untimed(old.to_dict()) == untimed(result.to_dict())
    assert caught[0].filename == __file__  # the warning points at the caller's line
    (tmp_path / "classes" / "a").mkdir(parents=True)
    with pytest.raises(UsageError, match="not detection data"):
        edgekit.evaluate_detector(yolo_model, tmp_path / "classes")
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        res = CliRunner().invoke(cli, ["evaluate", "-m", str(yolo_model), "--data", str(ann), "--json", "-q"])
    assert res.exit_code == 0, res.output
    assert untimed(json.loads(res.stdout)) == untimed(json.loads(json.dumps(result.to_dict())))


def untimed(doc):
    """A document without its timings (``*_ms``), which differ from run to run."""
    if isinstance(doc, dict):
        return {k: untimed(v) for k, v in doc.items() if not k.endswith("_ms")}
    return [untimed(v) for v in doc] if isinstance(doc, list) else doc
