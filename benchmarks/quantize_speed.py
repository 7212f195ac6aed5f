"""How much does `edgekit quantize` cost over a bare TFLiteConverter script on the same model and data?

Both run here, as fresh processes (so each pays the TensorFlow import, as a user does), on the
digits CNN saved as .h5 and its folder of training images, alternating, ``--repeat`` times each.
The bare script is what a user would write from TensorFlow's post-training quantization guide:
load_model, 300 images read with Pillow and divided by 255, from_keras_model with the int8
settings, write the file. edgekit does more (balanced sampling, 100 held-back images, Edge TPU
checks, float-vs-int8 verification, the record): the goal is an overhead of at most 15%.

That guide's script converts with ``from_keras_model`` (a dynamic batch), which is slower than the
static batch-1 concrete function edgekit converts; so a second bare script that converts the way
edgekit does is timed too, and its ratio shows what edgekit's own extra work costs (informative,
not the goal). Prints the ratios and writes benchmarks/out/quantize_speed.json.

Usage: python benchmarks/quantize_speed.py [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "benchmarks" / "out" / "quantize_speed"
GOAL = 1.15

BARE_SCRIPT = """
import sys, random
from pathlib import Path
import numpy as np
import tensorflow as tf
from PIL import Image

model_path, folder, out = sys.argv[1:4]
model = tf.keras.models.load_model(model_path, compile=False)
files = sorted(Path(folder).rglob("*.png"))
random.Random(0).shuffle(files)
images = np.stack([np.asarray(Image.open(f).convert("RGB").resize((32, 32)), np.float32) / 255.0
                   for f in files[:300]])

def representative_dataset():
    for x in images:
        yield [x[None]]

if len(sys.argv) > 4 and sys.argv[4] == "static":  # edgekit's way: a static batch-1 concrete function
    cf = tf.function(lambda x: model(x, training=False)).get_concrete_function(
        tf.TensorSpec([1, 32, 32, 3], tf.float32))
    converter = tf.lite.TFLiteConverter.from_concrete_functions([cf])
else:
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
converter.optimizations = [tf.lite.Optimize.DEFAULT]
converter.representative_dataset = representative_dataset
converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
converter.inference_input_type = tf.uint8
converter.inference_output_type = tf.uint8
Path(out).write_bytes(converter.convert())
"""


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{proc.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)

    from edgekit.converters.tf_quiet import import_tensorflow, silenced
    from edgekit.training import digits

    folders = digits.write_digits(OUT / "digits")
    model_path = OUT / "digits_cnn.h5"
    if not model_path.exists():
        import_tensorflow()
        with silenced():
            model, _ = digits.train(folders, epochs=3)
            digits.save(model, model_path, folders)
    bare_script = OUT / "bare_quantize.py"
    bare_script.write_text(BARE_SCRIPT)

    bare_cmd = [sys.executable, str(bare_script), str(model_path), str(folders.train), str(OUT / "bare.tflite")]
    edgekit_cmd = [
        sys.executable,
        "-m",
        "edgekit",
        "quantize",
        str(model_path),
        "--calib",
        str(folders.train),
        "-o",
        str(OUT / "edgekit.tflite"),
        "--quiet",
    ]
    static_cmd = bare_cmd[:-1] + [str(OUT / "bare_static.tflite"), "static"]
    bare, static, ours = [], [], []
    for i in range(args.repeat):  # interleaved, so drifting load on the shared cores hits all three alike
        bare.append(timed(bare_cmd))
        static.append(timed(static_cmd))
        ours.append(timed(edgekit_cmd))
        print(
            f"run {i + 1}: bare {bare[-1]:.2f} s, bare static batch-1 {static[-1]:.2f} s, edgekit {ours[-1]:.2f} s",
            flush=True,
        )
    med = statistics.median
    ratio, static_ratio = med(ours) / med(bare), med(ours) / med(static)
    result = {
        "bare_s": bare,
        "bare_static_s": static,
        "edgekit_s": ours,
        "median_bare_s": med(bare),
        "median_bare_static_s": med(static),
        "median_edgekit_s": med(ours),
        "ratio": ratio,
        "ratio_vs_static": static_ratio,
        "goal": GOAL,
        "ok": ratio <= GOAL,
    }
    (OUT.parent / "quantize_speed.json").write_text(json.dumps(result, indent=2))
    print(
        f"edgekit quantize / bare TFLiteConverter script (median of {args.repeat}): {ratio:.3f} "
        f"(goal <= {GOAL}) -> {'OK' if result['ok'] else 'OVER'}"
    )
    print(
        f"edgekit quantize / bare script converting like edgekit (static batch 1): {static_ratio:.3f} "
        "(informative: edgekit's sampling, checks, verification and record)"
    )


if __name__ == "__main__":
    main()
