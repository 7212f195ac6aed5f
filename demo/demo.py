"""`make demo`: the whole edgekit flow on a built-in example, narrated for a newcomer.

1. write scikit-learn's handwritten digits as 32x32 RGB images, one folder per class;
2. `edgekit train` a small Edge-TPU-friendly CNN on them (a few seconds on a CPU);
3. `edgekit build` it into a bundle: quantize, check, compile (where edgetpu_compiler exists), manifest;
4. `edgekit classify` held-out images from the bundle (on the CPU here, on the Edge TPU with a Coral).
5. `edgekit evaluate` the bundle's int8 model on the held-out folders against the float model.
Everything goes to demo/out/.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import textwrap
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

    say(
        "1. Data",
        """scikit-learn ships 1,797 handwritten digits (8x8 pixels) that need no download. We write
        them as 32x32 RGB PNGs in one folder per class: demo/out/digits/train/<digit>/ and
        demo/out/digits/test/<digit>/ (about 20% held out).""",
    )
    from edgekit.training import digits

    folders = digits.write_digits(OUT / "digits")
    print(
        f"wrote {sum(1 for _ in folders.train.rglob('*.png'))} training and "
        f"{sum(1 for _ in folders.test.rglob('*.png'))} test images"
    )

    say(
        "2. Train",
        """`edgekit train` picks the tf.distribute strategy (a TPU, several GPUs, or this one CPU), feeds
        the class folders through a tf.data pipeline that preprocesses exactly as classify will (pixels/255),
        and trains the built-in small CNN: Conv(no bias) -> BatchNorm -> ReLU twice, MaxPool, Dropout, Dense,
        an order that lets each BatchNorm fold into its convolution on the Edge TPU. 20% of each class is held
        out for the validation accuracy printed after each epoch. Beside digits_cnn.keras it writes
        digits_cnn.edgekit.json: the preprocessing, the labels (the folder names) and where the images are.""",
    )
    model = OUT / "digits_cnn.keras"
    run("train", str(folders.train), "-o", str(model), "--epochs", "8")

    say(
        "3. Build",
        """`edgekit build` goes from the Keras model to a deployable bundle in one command: it quantizes
        to full int8 with calibration images read through the same preprocessing (taken from the record, so no
        flags), verifies the int8 model against the float one, predicts the Edge TPU op mapping (`edgekit
        check`), compiles with edgetpu_compiler where it exists (x86-64 Linux; not here, so the bundle holds the
        CPU model only), measures the int8 model's accuracy on the held-out images (--eval), and writes the
        folder all at once: the model(s), labels.txt and manifest.json with each file's sha256, the
        preprocessing, the input spec, the versions, the reports and the accuracy.""",
    )
    bundle = OUT / "bundle"
    run("build", str(model), "-o", str(bundle), "--eval", str(folders.test))
    manifest = json.loads((bundle / "manifest.json").read_text())
    print(
        f"\nmanifest.json: models {manifest['models']}, labels {manifest['labels']}, "
        f"check verdict {manifest['reports']['check']['verdict']}, files "
        + ", ".join(f"{e['path']} (sha256 {e['sha256'][:12]}...)" for e in manifest["files"])
    )

    images = [sorted((folders.test / d).glob("*.png"))[0] for d in ("3", "7")]
    say(
        "4. Classify",
        f"""`edgekit classify -m {os.path.relpath(bundle)}` runs the bundle: the compiled model on a
        Coral, else its CPU model, after checking the sha256 of what it loads. It needs no preprocessing
        flags or labels file: the manifest carries both. Here, two held-out images, a 3 and a 7.""",
    )
    run("classify", *map(str, images), "-m", str(bundle), "-k", "3")

    say(
        "5. Evaluate",
        """`edgekit evaluate` measures the bundle's int8 model's top-1/top-5 on the held-out class
        folders and, with --reference, the float model's on the same images, their agreement, the classes that
        changed most and each layer's own int8 error (TensorFlow Lite's quantization debugger).""",
    )
    run("evaluate", "-m", str(bundle), "--data", str(folders.test), "--reference", str(model))
    print("\ndemo finished: outputs in demo/out/ (copy demo/out/bundle/ to a Coral to run it there)")


if __name__ == "__main__":
    main()
