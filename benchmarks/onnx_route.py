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
images as its calibration file so it downloads nothing.

Both run as fresh processes (each pays the TensorFlow import, as a user does), alternating, ``--repeat``
times each, on the digits CNN written as PyTorch exports it (tests/converters/onnx_graphs.py).
Prints the ratios and writes benchmarks/out/onnx_route.json.

Usage: python benchmarks/onnx_route.py [--repeat N] [--onnx2tf-python PY]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
OUT = REPO / "benchmarks" / "out" / "onnx_route"
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
files = sorted(Path(folder).rglob("*.png"))
random.Random(0).shuffle(files)
images = np.stack([np.asarray(Image.open(f).convert("RGB").resize((32, 32)), np.float32) / 255.0
                   for f in files[:300]])

def representative_dataset():
    for x in images:
        yield [x[None]]

cf = tf.function(loaded.call).get_concrete_function(tf.TensorSpec([1, 32, 32, 3], tf.float32))
converter = tf.lite.TFLiteConverter.from_concrete_functions([cf])
converter.optimizations = [tf.lite.Optimize.DEFAULT]
converter.representative_dataset = representative_dataset
converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
converter.inference_input_type = tf.uint8
converter.inference_output_type = tf.uint8
Path(out).write_bytes(converter.convert())
'''


def prepare() -> tuple[Path, Path]:
    """The digits CNN trained here and written as ONNX, and its training folder."""
    from edgekit.converters.tf_quiet import import_tensorflow, silenced
    from edgekit.training import digits
    from tests.converters.onnx_graphs import digits_onnx

    folders = digits.write_digits(OUT / "digits")
    model_path = OUT / "digits_cnn.onnx"
    if not model_path.exists():
        import_tensorflow()
        with silenced():
            model, _ = digits.train(folders, epochs=3)
        digits_onnx(model, model_path)
    return model_path, Path(folders.train)


def onnx2tf_command(python: str, model_path: Path, folder: Path) -> list[str]:
    """onnx2tf's int8 route (-oiqt) calibrated on the same images (-cind), its sample file put where it looks
    first (the working folder) so that it downloads nothing."""
    import numpy as np
    from PIL import Image

    files = sorted(folder.rglob("*.png"))[:300]
    images = np.stack([np.asarray(Image.open(f).convert("RGB").resize((32, 32)), np.float32) / 255.0
                       for f in files])
    np.save(OUT / "calib.npy", images)
    np.save(OUT / "calibration_image_sample_data_20x128x128x3_float32.npy", np.zeros((20, 128, 128, 3), np.float32))
    return [python, "-m", "onnx2tf", "-i", str(model_path), "-o", str(OUT / "onnx2tf"), "-oiqt",
            "-cind", "input", str(OUT / "calib.npy"), "[[[[0,0,0]]]]", "[[[[1,1,1]]]]"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--onnx2tf-python", help="a Python whose venv has onnx2tf (timed too when given)")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    model_path, folder = prepare()
    bare_script = OUT / "bare_onnx_quantize.py"
    bare_script.write_text(BARE_SCRIPT)
    commands = {
        "bare": [sys.executable, str(bare_script), str(model_path), str(folder), str(OUT / "bare.tflite")],
        "edgekit": [sys.executable, "-m", "edgekit", "quantize", str(model_path), "--calib", str(folder),
                    "-o", str(OUT / "edgekit.tflite"), "--quiet"]}
    if args.onnx2tf_python:
        commands["onnx2tf"] = onnx2tf_command(args.onnx2tf_python, model_path, folder)
    times: dict[str, list[float]] = {name: [] for name in commands}
    for i in range(args.repeat):   # interleaved, so drifting load on the shared cores hits all alike
        for name, cmd in commands.items():
            times[name].append(timed(cmd) if name != "onnx2tf" else _in(OUT, cmd))
        print(f"run {i + 1}: " + ", ".join(f"{n} {t[-1]:.2f} s" for n, t in times.items()), flush=True)
    med = {name: statistics.median(t) for name, t in times.items()}
    ratio = med["edgekit"] / med["bare"]
    result = {"seconds": times, "median_s": med, "ratio": ratio, "goal": GOAL, "ok": ratio <= GOAL,
              "ratio_vs_onnx2tf": med["edgekit"] / med["onnx2tf"] if "onnx2tf" in med else None}
    (OUT.parent / "onnx_route.json").write_text(json.dumps(result, indent=2))
    print(f"edgekit quantize model.onnx / bare translate + TFLiteConverter script (median of {args.repeat}): "
          f"{ratio:.3f} (goal <= {GOAL}) -> {'OK' if result['ok'] else 'OVER'}")
    if result["ratio_vs_onnx2tf"] is not None:
        print(f"edgekit quantize model.onnx / onnx2tf -oiqt: {result['ratio_vs_onnx2tf']:.3f}")


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
