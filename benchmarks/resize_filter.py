"""Does the resize filter matter for a model trained through a Keras pipeline? (issue 24, item 8)

Keras's ``image_dataset_from_directory`` (and ``keras.ops.image.resize``, ``tf.image.resize``) resize
with ``bilinear`` and ``antialias=False`` by default, on float pixels; edgekit's default is Pillow's
``lanczos`` (antialiased), and ``--resize bilinear`` is Pillow's bilinear, which is antialiased too
(its support grows with the downscale factor). This script measures, rather than assumes, what
feeding a model trained on Keras-resized images through each of edgekit's filters costs:

* data: random square crops (64..200 px, so downscaled 2x to 6x) of real photographs, by default
  the two scikit-learn ships (``load_sample_images``: no download), each split into a 2x3 grid of
  regions (``--grid``); the class of a crop is its region (12 classes by default). ``--photos DIR`` adds the images in DIR.
* training: edgekit's small CNN (``edgekit train --arch cnn``) on crops resized the Keras way
  (``keras.ops.image.resize``, bilinear, no antialias), scaled to 0..1, a few epochs;
* test: fresh crops, the same crops through four resizes: Keras's (what the model was trained
  on), edgekit ``bilinear`` (Pillow), edgekit ``lanczos`` (Pillow, the default) and edgekit ``keras``
  (:func:`edgekit.board.preprocess.resize_like_keras`, rounded to uint8), each through
  :func:`edgekit.board.preprocess.pixels` as ``classify`` does;

and prints, per seed, the float model's accuracy under each, the paired difference of each edgekit
filter against the training resize (Tango's paired interval, exact McNemar p), and how often the
predictions agree. Writes benchmarks/out/resize_filter.json.

    python benchmarks/resize_filter.py [--seeds N] [--train N] [--test N] [--epochs N] [--grid RxC] [--photos DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
OUT = REPO / "benchmarks" / "out" / "resize_filter.json"
SIZE = 32
GRID = [2, 3]  # regions per photo: rows, columns (--grid)


def photos(folder: str | None) -> list:
    import numpy as np
    from PIL import Image
    from sklearn.datasets import load_sample_images

    images = [np.asarray(im, np.uint8) for im in load_sample_images().images]
    if folder:
        for f in sorted(Path(folder).iterdir()):
            try:
                images.append(np.asarray(Image.open(f).convert("RGB"), np.uint8))
            except OSError:
                continue
    return images


def crops(images: list, n: int, rng) -> tuple[list, np.ndarray]:
    """``n`` random square crops, each inside one region of one photo, and the region's class id."""
    import numpy as np

    out, labels = [], []
    rows, cols = GRID
    for _ in range(n):
        k = int(rng.integers(len(images)))
        img = images[k]
        r, c = int(rng.integers(rows)), int(rng.integers(cols))
        h, w = img.shape[0] // rows, img.shape[1] // cols
        side = int(rng.integers(min(64, h, w), min(200, h, w) + 1))
        y0 = r * h + int(rng.integers(h - side + 1))
        x0 = c * w + int(rng.integers(w - side + 1))
        out.append(img[y0 : y0 + side, x0 : x0 + side])
        labels.append((k * rows + r) * cols + c)
    return out, np.asarray(labels, np.int64)


def keras_resize(images: list) -> np.ndarray:
    """What image_dataset_from_directory feeds a model: float pixels, bilinear, antialias=False, then /255."""
    import keras
    import numpy as np

    return (
        np.stack(
            [
                np.asarray(
                    keras.ops.image.resize(
                        np.asarray(im, np.float32), (SIZE, SIZE), interpolation="bilinear", antialias=False
                    )
                )
                for im in images
            ]
        )
        / 255.0
    )


def edgekit_resize(images: list, resize: str) -> np.ndarray:
    """edgekit's preprocessing (the function classify and calibration use), scaling 0..1."""
    import numpy as np

    from edgekit.board.preprocess import PreprocessSpec, to_float

    spec = PreprocessSpec(SIZE, SIZE, "RGB", resize, (0.0,), (255.0,))
    return np.stack([to_float(im, spec) for im in images])


def run_seed(seed: int, images: list, args: argparse.Namespace) -> dict:
    import keras
    import numpy as np

    from edgekit.results import metrics
    from edgekit.training.archs import small_cnn

    rng = np.random.default_rng(seed)
    train_images, y = crops(images, args.train, rng)
    test_images, yt = crops(images, args.test, rng)
    classes = len(images) * GRID[0] * GRID[1]
    keras.utils.set_random_seed(seed)
    model = small_cnn((SIZE, SIZE, 3), classes)
    model.compile(optimizer=keras.optimizers.Adam(2e-3), loss="sparse_categorical_crossentropy")
    start = time.perf_counter()
    model.fit(keras_resize(train_images), y, batch_size=32, epochs=args.epochs, verbose=0, shuffle=True)
    seconds = time.perf_counter() - start
    predicted = {
        name: model.predict(x, verbose=0).argmax(1)
        for name, x in (
            ("keras_bilinear", keras_resize(test_images)),
            ("edgekit_bilinear", edgekit_resize(test_images, "bilinear")),
            ("edgekit_lanczos", edgekit_resize(test_images, "lanczos")),
            ("edgekit_keras", edgekit_resize(test_images, "keras")),
        )
    }
    right = {name: p == yt for name, p in predicted.items()}
    row = {
        "seed": seed,
        "classes": classes,
        "train": len(y),
        "test": len(yt),
        "train_seconds": round(seconds, 1),
        "accuracy": {name: float(np.mean(r)) for name, r in right.items()},
        "against_training_resize": {},
    }
    for name in ("edgekit_bilinear", "edgekit_lanczos", "edgekit_keras"):
        d = metrics.paired_difference(right[name], right["keras_bilinear"])
        row["against_training_resize"][name] = {
            "difference_points": round(100 * d["difference"], 2),
            "interval_points": [round(100 * v, 2) for v in d["interval"]],
            "only_edgekit": d["only_a"],
            "only_keras": d["only_b"],
            "p_edgekit_worse": metrics.binomial_sf(d["only_b"], d["only_a"] + d["only_b"], 0.5),
            "prediction_agreement": float(np.mean(predicted[name] == predicted["keras_bilinear"])),
        }
    d = metrics.paired_difference(right["edgekit_lanczos"], right["edgekit_bilinear"])
    row["lanczos_minus_bilinear"] = {
        "difference_points": round(100 * d["difference"], 2),
        "interval_points": [round(100 * v, 2) for v in d["interval"]],
    }
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--train", type=int, default=3000)
    ap.add_argument("--test", type=int, default=2000)
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--photos", help="a folder of more photographs (each adds rows x columns classes)")
    ap.add_argument("--grid", default="2x3", help="regions per photo, ROWSxCOLUMNS (more: a harder task)")
    ap.add_argument("--out", default=str(OUT), help="the JSON file to write")
    args = ap.parse_args(argv)
    GRID[:] = [int(v) for v in args.grid.lower().split("x")]
    from edgekit.converters.tf_quiet import import_tensorflow, silenced

    import_tensorflow()
    images = photos(args.photos)
    rows = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        with silenced():
            row = run_seed(seed, images, args)
        rows.append(row)
        acc = row["accuracy"]
        print(
            f"seed {seed}: {row['classes']} classes, {row['train']} train / {row['test']} test crops; float top-1 "
            f"keras-bilinear {acc['keras_bilinear']:.1%}, edgekit bilinear {acc['edgekit_bilinear']:.1%}, "
            f"edgekit lanczos {acc['edgekit_lanczos']:.1%}, edgekit keras {acc['edgekit_keras']:.1%}"
        )
        for name, d in row["against_training_resize"].items():
            lo, hi = d["interval_points"]
            print(
                f"  {name} - keras: {d['difference_points']:+.2f} points (95% {lo:+.2f} to {hi:+.2f}; "
                f"{d['only_edgekit']} only edgekit right, {d['only_keras']} only keras; p(worse)="
                f"{d['p_edgekit_worse']:.2g}); predictions agree {d['prediction_agreement']:.1%}"
            )
        lb = row["lanczos_minus_bilinear"]
        print(
            f"  lanczos - bilinear (edgekit): {lb['difference_points']:+.2f} points "
            f"(95% {lb['interval_points'][0]:+.2f} to {lb['interval_points'][1]:+.2f})"
        )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"benchmark": "resize_filter", "size": SIZE, "grid": GRID, "runs": rows}, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
