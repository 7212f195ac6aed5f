"""How fast is `edgekit detect` against the script a user writes around LiteRT with Ultralytics' decode?

The baseline is what an Ultralytics YOLOv8 `format=edgetpu` user writes for a board without torch
(Ultralytics' AutoBackend + its `non_max_suppression`, in numpy): letterbox with Pillow, /255, quantize
the input, invoke, dequantize the whole `[1, 4+nc, N]` output, transpose, scale the normalized boxes,
best class per anchor, `conf` filter, xywh -> xyxy, per-class greedy NMS, boxes back through the
letterbox. edgekit does the same work with its layout read from the model, the score filter on the
quantized integers (only the kept anchors dequantized) and one class-offset NMS.

Both run in this process on the same model, images and interpreter settings, on the CPU (there is no
Edge TPU here; on one, invoke shrinks and the host's share grows). Printed as ratios and written to
benchmarks/out/detect_speed.json:

1. host post-processing per image (decode + NMS + mapping), baseline over edgekit, on the same raw outputs;
2. whole image (decode image, letterbox, invoke, post-process), baseline over edgekit;
3. the detections agree: each baseline box has an edgekit box of its class at IoU >= 0.9.

Usage: python benchmarks/detect_speed.py [MODEL] [--images N] [--repeat R]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
DEFAULT_MODEL = REPO.parent / "shared" / "testdata" / "detection" / "ppe_yolov8n_full_integer_quant.tflite"


# ------------------------------------------------------------------------------------ the baseline script
def letterbox(im, size=640, fill=114):
    from PIL import Image

    w, h = im.size
    r = min(size / w, size / h)
    nw, nh = int(round(w * r)), int(round(h * r))
    dw, dh = (size - nw) / 2, (size - nh) / 2
    left, top = int(round(dw - 0.1)), int(round(dh - 0.1))
    canvas = Image.new("RGB", (size, size), (fill, fill, fill))
    canvas.paste(im.resize((nw, nh), Image.BILINEAR), (left, top))
    return canvas, r, (left, top)


def nms_numpy(boxes, scores, iou_thres):
    order = scores.argsort()[::-1]
    keep = []
    while order.size:
        i = order[0]
        keep.append(i)
        xx1 = np.maximum(boxes[i, 0], boxes[order[1:], 0])
        yy1 = np.maximum(boxes[i, 1], boxes[order[1:], 1])
        xx2 = np.minimum(boxes[i, 2], boxes[order[1:], 2])
        yy2 = np.minimum(boxes[i, 3], boxes[order[1:], 3])
        inter = np.maximum(0, xx2 - xx1) * np.maximum(0, yy2 - yy1)
        a = (boxes[i, 2] - boxes[i, 0]) * (boxes[i, 3] - boxes[i, 1])
        b = (boxes[order[1:], 2] - boxes[order[1:], 0]) * (boxes[order[1:], 3] - boxes[order[1:], 1])
        order = order[1:][inter / (a + b - inter + 1e-9) <= iou_thres]
    return keep


def baseline_post(raw, out_scale, out_zp, r, pad, image_wh, conf=0.25, iou=0.45, max_det=100, size=640):
    y = (raw.astype(np.float32) - out_zp) * out_scale  # the whole output dequantized
    y = y[0].T  # [N, 4 + nc]
    y[:, :4] *= size  # Ultralytics: normalized xywh in TFLite exports
    scores = y[:, 4:]
    cls = scores.argmax(1)
    best = scores.max(1)
    m = best > conf
    xywh, best, cls = y[m, :4], best[m], cls[m]
    boxes = np.concatenate([xywh[:, :2] - xywh[:, 2:] / 2, xywh[:, :2] + xywh[:, 2:] / 2], 1)
    out = []
    for c in np.unique(cls):
        idx = np.where(cls == c)[0]
        for k in nms_numpy(boxes[idx], best[idx], iou):
            out.append((int(c), float(best[idx][k]), boxes[idx][k].copy()))
    out.sort(key=lambda t: -t[1])
    out = out[:max_det]
    for _, _, b in out:
        b[[0, 2]] = ((b[[0, 2]] - pad[0]) / r).clip(0, image_wh[0])
        b[[1, 3]] = ((b[[1, 3]] - pad[1]) / r).clip(0, image_wh[1])
    return out


class Baseline:
    def __init__(self, model: str):
        from ai_edge_litert.interpreter import Interpreter

        self.it = Interpreter(model, num_threads=2)
        self.it.allocate_tensors()
        self.inp = self.it.get_input_details()[0]
        self.out = self.it.get_output_details()[0]

    def image(self, path: str):
        from PIL import Image

        im = Image.open(path).convert("RGB")
        boxed, r, pad = letterbox(im)
        s, z = self.inp["quantization"]
        x = np.asarray(boxed, np.float32)[None] / 255.0
        q = np.clip(np.round(x / s + z), -128, 127).astype(np.int8)
        self.it.set_tensor(self.inp["index"], q)
        self.it.invoke()
        raw = self.it.get_tensor(self.out["index"])
        return raw, r, pad, im.size

    def post(self, raw, r, pad, wh):
        s, z = self.out["quantization"]
        return baseline_post(raw, s, z, r, pad, wh)


# ------------------------------------------------------------------------------------ the measurement
def make_images(folder: Path, n: int) -> list[str]:
    from edgekit.detection.data import make_shapes

    make_shapes(folder, n_images=n, size=(640, 480), seed=0)
    images = sorted(str(p) for p in (folder / "images").glob("*.png"))
    shared = REPO.parent / "shared" / "testdata"
    return [str(shared / "grace_hopper.bmp"), str(shared / "cat.bmp")] + images


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?", default=str(DEFAULT_MODEL))
    ap.add_argument("--images", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=200, help="post-processing runs per image")
    args = ap.parse_args()

    from edgekit.board import decode as detection
    from edgekit.devices.detect import open_detector

    with tempfile.TemporaryDirectory() as tmp:
        images = make_images(Path(tmp), args.images)
        det = open_detector(args.model, device="cpu", num_threads=2)
        base = Baseline(det.opened.model_path)
        post_e, post_b, whole_e, whole_b, agree, total = [], [], [], [], 0, 0
        for path in images:
            # whole image, each way, interleaved, best of 3 (invoke dominates and a shared CPU is noisy)
            te_w, tb_w = [], []
            for _ in range(3):
                t0 = time.perf_counter()
                tensor, geometry = det.prepare(path)
                objs, _, _, _ = det.detect_tensor(tensor, geometry, 0.25, 0.45, 100)
                te_w.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                raw, r, pad, wh = base.image(path)
                theirs = base.post(raw, r, pad, wh)
                tb_w.append(time.perf_counter() - t0)
            whole_e.append(min(te_w))
            whole_b.append(min(tb_w))
            # post-processing alone, on the same raw output
            outputs, _ = det.infer(tensor)
            for _ in range(3):
                detection.postprocess(outputs, det.quant, det.layout, geometry)
                base.post(raw, r, pad, wh)
            te, tb = [], []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                detection.postprocess(outputs, det.quant, det.layout, geometry)
                te.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                base.post(raw, r, pad, wh)
                tb.append(time.perf_counter() - t0)
            post_e.append(statistics.median(te))
            post_b.append(statistics.median(tb))
            for c, _s, b in theirs:
                total += 1
                mine = [o for o in objs if o.id == c]
                if (
                    mine
                    and detection.box_iou(
                        [b], [[o.bbox.xmin, o.bbox.ymin, o.bbox.xmax, o.bbox.ymax] for o in mine]
                    ).max()
                    >= 0.9
                ):
                    agree += 1
        det.opened.close()

    post_ratio = statistics.median(post_b) / statistics.median(post_e)
    whole_ratio = statistics.median(whole_b) / statistics.median(whole_e)
    doc = {
        "model": args.model,
        "images": len(images),
        "repeat": args.repeat,
        "postprocess_ms": {"edgekit": 1000 * statistics.median(post_e), "baseline": 1000 * statistics.median(post_b)},
        "whole_image_ms": {"edgekit": 1000 * statistics.median(whole_e), "baseline": 1000 * statistics.median(whole_b)},
        "postprocess_speedup": post_ratio,
        "whole_image_speedup": whole_ratio,
        "baseline_boxes": total,
        "matched_at_iou_0.9": agree,
    }
    print(f"{args.model}: {len(images)} images, CPU")
    print(
        f"post-processing per image: edgekit {doc['postprocess_ms']['edgekit']:.3f} ms, baseline "
        f"{doc['postprocess_ms']['baseline']:.3f} ms: {post_ratio:.2f}x"
    )
    print(
        f"whole image (decode, letterbox, invoke, post): edgekit {doc['whole_image_ms']['edgekit']:.1f} ms, "
        f"baseline {doc['whole_image_ms']['baseline']:.1f} ms: {whole_ratio:.2f}x"
    )
    print(f"detections: {agree} of the baseline's {total} boxes found by edgekit at IoU >= 0.9")
    out = REPO / "benchmarks" / "out"
    out.mkdir(exist_ok=True)
    (out / "detect_speed.json").write_text(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
