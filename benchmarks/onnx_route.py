"""How much does `edgekit quantize model.onnx` cost over a bare ONNX → TensorFlow → TFLiteConverter script?

The issue's baseline is the onnx2tf + TFLiteConverter script a user would write. onnx2tf cannot be installed
beside edgekit (its latest release, 1.29.24, pins tensorflow 2.19, onnx 1.19 and numpy 1.26; edgekit pins
tensorflow-cpu 2.21 and runs numpy 2) and it downloads a calibration file while converting; so the bare
script timed here takes the only ONNX → TensorFlow step this venv has, edgekit's translator, with nothing
else of edgekit's: load the ONNX file, trace the translation at batch 1, 300 images read with Pillow and
divided by 255, TFLiteConverter with the int8 settings, write the file. The ratio is then what edgekit's
route adds (ONNX Runtime as the reference, the translation check, balanced sampling, held-back images, the
preprocessing search, Edge TPU checks, verification, the record). With ``--onnx2tf-python PY`` (a Python
in a separate venv holding onnx2tf and its TensorFlow) onnx2tf's own route is timed too, given the same
images as its calibration file (and its sample file made from them) and the network blocked in its process
(as tests/fixtures/exports/make_exports.py runs it), so it downloads nothing.

All run as fresh processes (each pays the TensorFlow import, as a user does), alternating, ``--repeat``
times each, on copies of two fixtures (never the committed files): the digits classifier
(tests/fixtures/exports/digits_cnn_float32.onnx, a PyTorch CNN, calibrated on scikit-learn's digits as class
folders) and the trained YOLOv8 (yolov8t_256_float32.onnx, 300 calibration images from edgekit's shapes
writer, seed 3601). Prints the ratios and writes benchmarks/out/onnx_route.json (not committed).

Measured 2026-12-07 on this project's 2-core machine (shared with other jobs: single runs varied 2x), onnx2tf
1.28.8 + TensorFlow 2.19 from /work/venv-exports, ``--repeat 3`` (median seconds):
  digits: bare 15.5, edgekit 19.9, onnx2tf 16.3 -> edgekit / bare 1.29, edgekit / onnx2tf 1.22
          (per run: 1.04, 1.34, 0.93 against bare; the quietest run, 3, gave bare 7.5, edgekit 7.0, onnx2tf 5.9)
          again with --repeat 5: bare 16.2, edgekit 17.8, onnx2tf 12.6 -> 1.10 and 1.42 (the load varied 3x)
  yolo:   bare 19.2, edgekit 22.7, onnx2tf 82.1 -> edgekit / bare 1.18, edgekit / onnx2tf 0.28
Against onnx2tf, the script a user would write, edgekit is 3.6x faster on YOLOv8 and 20 to 40% slower on the
small classifier (seconds of fixed cost: ONNX Runtime, the preprocessing search on labelled folders, checks).
Against the bare translator + TFLiteConverter floor it is 10 to 30% (digits, noisy) and 18% (YOLO) slower: over
the 1.15 goal on YOLO; what it pays for is the verification (ONNX Runtime reference, held-back images, the detection
and mAP checks).

Usage: python benchmarks/onnx_route.py [--repeat N] [--models digits,yolo] [--onnx2tf-python PY]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
OUT = REPO / "benchmarks" / "out" / "onnx_route"
EXPORTS = REPO / "tests" / "fixtures" / "exports"
GOAL = 1.15

from benchmarks.quantize_speed import timed  # noqa: E402

BARE_SCRIPT = '''
import sys, random
from pathlib import Path
import numpy as np
import tensorflow as tf
from PIL import Image
from edgekit.converters import onnx_io   # the ONNX -> TensorFlow step only (no checks, no reference)

model_path, folder, out = sys.argv[1:4]
loaded = onnx_io.load(model_path)
h, w, c = loaded.input_shape
files = sorted(Path(folder).rglob("*.png"))
random.Random(0).shuffle(files)
images = np.stack([np.asarray(Image.open(f).convert("RGB").resize((w, h)), np.float32) / 255.0
                   for f in files[:300]])

def representative_dataset():
    for x in images:
        yield [x[None]]

cf = tf.function(loaded.call).get_concrete_function(tf.TensorSpec([1, h, w, c], tf.float32))
converter = tf.lite.TFLiteConverter.from_concrete_functions([cf])
converter.optimizations = [tf.lite.Optimize.DEFAULT]
converter.representative_dataset = representative_dataset
converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
converter.inference_input_type = tf.uint8
converter.inference_output_type = tf.uint8
Path(out).write_bytes(converter.convert())
'''

# onnx2tf with the network blocked in its process (as tests/fixtures/exports/make_exports.py runs it): a download
# attempt fails the run instead of fetching anything
OFFLINE_ONNX2TF = '''
import os, runpy, socket, sys

def refuse(*args, **kwargs):
    raise OSError("network blocked by benchmarks/onnx_route.py: nothing is downloaded")

socket.socket.connect = socket.socket.connect_ex = socket.create_connection = socket.getaddrinfo = refuse
os.environ.update({"TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""})
sys.argv = ["onnx2tf"] + sys.argv[1:]
runpy.run_module("onnx2tf", run_name="__main__")
'''


def prepare_digits() -> tuple[Path, Path]:
    """A copy of the digits classifier fixture (a PyTorch CNN exported to ONNX) and scikit-learn's digits written
    as class folders of 32x32 RGB images (its calibration data)."""
    from edgekit.training import digits

    folders = digits.write_digits(OUT / "digits")
    model_path = OUT / "digits_cnn_float32.onnx"
    shutil.copyfile(EXPORTS / "digits_cnn_float32.onnx", model_path)   # never the committed file
    return model_path, Path(folders.train)


def prepare_yolo() -> tuple[Path, Path]:
    """A copy of the trained YOLOv8 fixture and 300 calibration images from the writer of its training set, with
    another seed."""
    from edgekit.detection.data import make_shapes

    s = json.loads((EXPORTS / "manifest.json").read_text())["shapes"]
    calib = OUT / "shapes_calib"
    if not (calib / "images").is_dir():
        make_shapes(calib, n_images=300, size=tuple(s["size"]), seed=3601, min_side=s["min_side"],
                    max_objects=s["max_objects"], empty_every=s["empty_every"])
    model_path = OUT / "yolov8t_256_float32.onnx"
    shutil.copyfile(EXPORTS / "yolov8t_256_float32.onnx", model_path)
    return model_path, calib / "images"


def onnx2tf_command(python: str, model_path: Path, folder: Path) -> list[str]:
    """onnx2tf's int8 route (-oiqt) calibrated on the same images (-cind), its sample file put where it looks
    first (the working folder) so that it downloads nothing, run with the network blocked."""
    import numpy as np
    import onnx
    from PIL import Image

    inp = onnx.load(str(model_path)).graph.input[0]
    _, _, h, w = (d.dim_value for d in inp.type.tensor_type.shape.dim)
    files = sorted(folder.rglob("*.png"))[:300]
    images = np.stack([np.asarray(Image.open(f).convert("RGB").resize((w, h)), np.float32) / 255.0
                       for f in files])
    calib = OUT / f"{model_path.stem}_calib.npy"
    np.save(calib, images)
    sample = np.stack([np.asarray(Image.open(f).convert("RGB").resize((128, 128)), np.float32) / 255.0
                       for f in files[:20]])
    np.save(OUT / "calibration_image_sample_data_20x128x128x3_float32.npy", sample)
    (OUT / "onnx2tf_offline.py").write_text(OFFLINE_ONNX2TF)
    return [python, str(OUT / "onnx2tf_offline.py"), "-i", str(model_path), "-o",
            str(OUT / f"onnx2tf_{model_path.stem}"), "-oiqt", "-cind", inp.name, str(calib),
            "[[[[0,0,0]]]]", "[[[[1,1,1]]]]"]


def bench(name: str, model_path: Path, folder: Path, repeat: int, onnx2tf_python: str | None) -> dict:
    """The routes on one model, as fresh processes, interleaved ``repeat`` times; their medians and ratios."""
    bare_script = OUT / "bare_onnx_quantize.py"
    bare_script.write_text(BARE_SCRIPT)
    commands = {
        "bare": [sys.executable, str(bare_script), str(model_path), str(folder), str(OUT / f"{name}_bare.tflite")],
        "edgekit": [sys.executable, "-m", "edgekit", "quantize", str(model_path), "--calib", str(folder),
                    "-o", str(OUT / f"{name}_edgekit.tflite"), "--quiet"]}
    if onnx2tf_python:
        commands["onnx2tf"] = onnx2tf_command(onnx2tf_python, model_path, folder)
    times: dict[str, list[float]] = {route: [] for route in commands}
    for i in range(repeat):   # interleaved, so drifting load on the shared cores hits all alike
        for route, cmd in commands.items():
            times[route].append(timed(cmd) if route != "onnx2tf" else _in(OUT, cmd))
        print(f"{name} run {i + 1}: " + ", ".join(f"{n} {t[-1]:.2f} s" for n, t in times.items()), flush=True)
    med = {route: statistics.median(t) for route, t in times.items()}
    ratio = med["edgekit"] / med["bare"]
    result = {"seconds": times, "median_s": med, "ratio": ratio, "goal": GOAL, "ok": ratio <= GOAL,
              "ratio_vs_onnx2tf": med["edgekit"] / med["onnx2tf"] if "onnx2tf" in med else None}
    print(f"{name}: edgekit quantize model.onnx / bare translate + TFLiteConverter script (median of {repeat}): "
          f"{ratio:.3f} (goal <= {GOAL}) -> {'OK' if result['ok'] else 'OVER'}")
    if result["ratio_vs_onnx2tf"] is not None:
        print(f"{name}: edgekit quantize model.onnx / onnx2tf -oiqt: {result['ratio_vs_onnx2tf']:.3f}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--models", default="digits,yolo", help="digits, yolo or both: digits,yolo")
    parser.add_argument("--onnx2tf-python", help="a Python whose venv has onnx2tf (timed too when given)")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    prepare = {"digits": prepare_digits, "yolo": prepare_yolo}
    results = {name: bench(name, *prepare[name](), args.repeat, args.onnx2tf_python)
               for name in args.models.split(",")}
    (OUT.parent / "onnx_route.json").write_text(json.dumps(results, indent=2))


def _in(folder: Path, cmd: list[str]) -> float:
    """``timed`` in ``folder`` (where onnx2tf finds its sample file instead of downloading it)."""
    import os

    here = Path.cwd()
    os.chdir(folder)
    try:
        return timed(cmd)
    finally:
        os.chdir(here)


if __name__ == "__main__":
    main()
