"""`make demo`: the whole edgekit flow on a built-in example, narrated for a newcomer.

1. write scikit-learn's handwritten digits as 32x32 RGB images, one folder per class;
2. train a small Edge-TPU-friendly CNN on them for a few seconds and save it as .h5;
3. `edgekit quantize` it to a verified full-int8 .tflite, calibrated on the image folder;
4. `edgekit inspect` the result; 5. `edgekit check` it for the Edge TPU (when built);
6. `edgekit classify` one held-out image with the int8 model on the CPU (when built);
7. `edgekit evaluate` the int8 model on the held-out folders against the float model.
Everything goes to demo/out/.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import textwrap
import time
from pathlib import Path

OUT = Path(__file__).resolve().parent / "out"


def say(title: str, text: str) -> None:
    print(f"\n=== {title}\n" + textwrap.fill(" ".join(text.split()), 100), flush=True)


def run(*args: str) -> None:
    """Run an edgekit command as a user would, showing the command line first."""
    args = tuple(os.path.relpath(a) if os.path.isabs(a) else a for a in args)
    shown = ["edgekit", *args]
    print(f"\n$ {shlex.join(shown)}", flush=True)
    proc = subprocess.run([sys.executable, "-m", "edgekit", *args])
    if proc.returncode != 0:
        sys.exit(f"demo: `{shlex.join(shown)}` failed with exit code {proc.returncode}")


def main() -> None:
    os.chdir(OUT.parent.parent)  # paths shown relative to the repository
    OUT.mkdir(parents=True, exist_ok=True)
    from edgekit.cli import cli

    say("1. Data", """scikit-learn ships 1,797 handwritten digits (8x8 pixels) that need no download. We write
        them as 32x32 RGB PNGs in one folder per class: demo/out/digits/train/<digit>/ and
        demo/out/digits/test/<digit>/ (about 20% held out).""")
    from edgekit.training import digits

    folders = digits.write_digits(OUT / "digits")
    print(f"wrote {sum(1 for _ in folders.train.rglob('*.png'))} training and "
          f"{sum(1 for _ in folders.test.rglob('*.png'))} test images")

    say("2. Train", """A small CNN: Conv(no bias) -> BatchNorm -> ReLU twice, MaxPool, Dropout, Dense. That order
        lets the converter fold each BatchNorm into its convolution, which the Edge TPU likes. It trains
        for a few seconds on the CPU and is saved as digits_cnn.h5, with digits_cnn.edgekit.json beside
        it recording the preprocessing (pixels/255), the labels and where the training images are.""")
    from edgekit.converters.tf_quiet import import_tensorflow, silenced

    import_tensorflow()
    start = time.perf_counter()
    with silenced():
        model, stats = digits.train(folders)
        model_path = digits.save(model, OUT / "digits_cnn.h5", folders)
    print(f"trained in {time.perf_counter() - start:.1f} s: float accuracy on the held-out images "
          f"{stats['test_accuracy']:.1%}")

    say("3. Quantize", """The Edge TPU runs only full-int8 models. `edgekit quantize` loads the Keras model, reads 300
        calibration images (balanced across the class folders) through the same preprocessing that
        classify will use, converts with int8 ops, uint8 input/output and a fixed batch of 1, checks
        what edgetpu_compiler 16 would reject, and compares the int8 model with the float one on 100
        held-back images. The preprocessing and labels are recorded inside the .tflite and beside it.
        (--calib is spelled out here; the record beside digits_cnn.h5 names the training folder, so
        `edgekit quantize demo/out/digits_cnn.h5` alone would use it.)""")
    int8 = OUT / "digits_cnn_int8.tflite"
    run("quantize", str(model_path), "--calib", str(folders.train), "-o", str(int8))

    say("4. Inspect", """`edgekit inspect` reads the .tflite without TensorFlow: inputs and outputs with their
        quantization, the op list, and the 'edgekit' metadata entry that holds the record.""")
    run("inspect", str(int8))

    if "check" in cli.commands:
        say("5. Check", """`edgekit check` predicts, offline, which ops edgetpu_compiler would map to the Edge TPU.""")
        run("check", str(int8))

    image = sorted((folders.test / "7").glob("*.png"))[0]
    if "classify" in cli.commands:
        say("6. Classify", f"""`edgekit classify` runs the int8 model on one held-out image of a 7
            ({image.name}). There is
            no Edge TPU here, so it runs on the CPU; it needs no preprocessing flags because the model carries
            its record. With a Coral attached, compile the model first (`edgekit compile`) and classify the
            *_edgetpu.tflite instead.""")
        run("classify", str(image), "-m", str(int8), "-k", "3")
    else:
        say("6. Classify", "`edgekit classify` is not built yet in this checkout.")
    say("7. Evaluate", """`edgekit evaluate` measures the int8 model's top-1/top-5 on the held-out class folders and,
        with --reference, the float model's on the same images, their agreement, the classes that changed
        most and each layer's own int8 error (TensorFlow Lite's quantization debugger).""")
    run("evaluate", "-m", str(int8), "--data", str(folders.test), "--reference", str(model_path))
    print("\ndemo finished: outputs in demo/out/")


if __name__ == "__main__":
    main()
