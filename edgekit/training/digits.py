"""scikit-learn's handwritten digits as an image folder, and a small Edge-TPU-friendly CNN trained on it.

The demo and the test fixtures use this as real data that needs no download: 1,797 8x8 digits,
written as 32x32 RGB PNGs in one folder per class (``train/`` and ``test/`` splits), then read back
through :func:`edgekit.board.preprocess.to_float` so training, calibration and inference preprocess alike.
The model orders Conv(use_bias=False) → BatchNorm → ReLU so the BN folds into the CONV_2D
(../shared/reference/toolchain.md, pitfall 8).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edgekit.board.preprocess import PreprocessSpec, open_image, to_float
from edgekit.tflite.model_record import ModelRecord, sidecar_path

SIZE = 32
CLASSES = [str(i) for i in range(10)]
SPEC = PreprocessSpec.with_scaling(SIZE, SIZE, "0..1")


@dataclass
class DigitsFolders:
    root: Path
    train: Path
    test: Path


def write_digits(root: str | Path, test_fraction: float = 0.2, seed: int = 0) -> DigitsFolders:
    """Write the digits as ``root/{train,test}/<class>/<n>.png`` (32x32 RGB); idempotent."""
    from PIL import Image
    from sklearn.datasets import load_digits

    root = Path(root)
    folders = DigitsFolders(root, root / "train", root / "test")
    if (root / ".complete").exists():
        return folders
    digits = load_digits()
    rng = np.random.default_rng(seed)
    is_test = rng.random(len(digits.images)) < test_fraction
    for i, (img, label) in enumerate(zip(digits.images, digits.target)):
        pixels = (img * (255.0 / 16.0)).clip(0, 255).astype(np.uint8)
        im = Image.fromarray(pixels, "L").resize((SIZE, SIZE), Image.Resampling.BILINEAR).convert("RGB")
        folder = (folders.test if is_test[i] else folders.train) / str(label)
        folder.mkdir(parents=True, exist_ok=True)
        im.save(folder / f"{i:04d}.png")
    (root / ".complete").write_text("ok\n")
    return folders


def load_folder(folder: str | Path, spec: PreprocessSpec = SPEC) -> tuple[np.ndarray, np.ndarray, list[Path]]:
    """All images of a class-folder tree as (x float32, y int, paths), preprocessed with ``spec``."""
    folder = Path(folder)
    classes = sorted(d.name for d in folder.iterdir() if d.is_dir())
    paths, ys = [], []
    for k, name in enumerate(classes):
        files = sorted(f for f in (folder / name).iterdir() if f.suffix == ".png")
        paths += files
        ys += [k] * len(files)
    x = np.stack([to_float(open_image(p), spec) for p in paths]) if paths else np.zeros((0, SIZE, SIZE, 3), np.float32)
    return x, np.asarray(ys, np.int64), paths


def build_cnn(input_shape: tuple[int, int, int] = (SIZE, SIZE, 3), num_classes: int = 10, seed: int = 0) -> Any:
    """Conv(no bias)-BN-ReLU ×2 with MaxPool and Dropout, then Dense: small and fully int8/Edge TPU mappable."""
    import keras

    from edgekit.training.archs import small_cnn

    keras.utils.set_random_seed(seed)
    model = small_cnn(input_shape, num_classes)
    model.compile(optimizer=keras.optimizers.Adam(2e-3), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def train(folders: DigitsFolders, epochs: int = 8, seed: int = 0, verbose: int = 0) -> tuple[Any, dict[str, float]]:
    """Train :func:`build_cnn` on ``train/`` for a few seconds; returns (model, {"test_accuracy", "seconds"})."""
    x, y, _ = load_folder(folders.train)
    xt, yt, _ = load_folder(folders.test)
    model = build_cnn(seed=seed)
    start = time.perf_counter()
    model.fit(x, y, batch_size=32, epochs=epochs, verbose=verbose, shuffle=True)
    seconds = time.perf_counter() - start
    _, acc = model.evaluate(xt, yt, verbose=0)
    return model, {"test_accuracy": float(acc), "seconds": seconds}


def save(model: Any, path: str | Path, folders: DigitsFolders) -> Path:
    """Save the model and, beside it, the record ``edgekit train`` writes: spec, labels, calibration data."""
    path = Path(path)
    model.save(path)
    calib = Path(folders.train)
    try:
        calib = calib.resolve().relative_to(path.resolve().parent)
    except ValueError:
        calib = calib.resolve()
    record = ModelRecord(
        SPEC, CLASSES, {"created_by": "edgekit.training.digits", "calibration": {"source": str(calib)}}
    )
    sidecar_path(path).write_text(record.to_json())
    return path
