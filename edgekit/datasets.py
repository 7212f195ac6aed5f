"""Labelled image sets on disk, read without TensorFlow: shared by calibration (converters) and evaluate (devices).

A class-folder tree gives class ids in Keras's ``image_dataset_from_directory`` order: subfolder
names sorted, folder *k* is class *k*. An ``.npz`` gives ``x`` (uint8 images, or float model inputs)
and ``y`` (class ids, or one-hot rows).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from edgekit.preprocess import IMAGE_EXTENSIONS
from edgekit.errors import InputError, first_line

X_KEYS = ("x", "images", "x_train", "data", "x_calib", "x_test")
Y_KEYS = ("y", "labels", "y_train", "y_test")


def list_images(folder: Path, flag: str = "--calib") -> tuple[list[list[Path]], list[str] | None]:
    """Image files grouped by class subfolder (``None`` classes for a flat folder)."""
    def images_in(d: Path) -> list[Path]:
        return sorted(f for f in d.iterdir() if f.is_file() and f.suffix.lower() in IMAGE_EXTENSIONS)

    subdirs = sorted(d for d in folder.iterdir() if d.is_dir() and not d.name.startswith("."))
    groups = [(d.name, images_in(d)) for d in subdirs]
    groups = [(n, files) for n, files in groups if files]
    flat = images_in(folder)
    if groups and not flat:
        return [files for _, files in groups], [n for n, _ in groups]
    if flat:
        return [flat], None
    raise InputError(f"{flag} {folder}: no images found (looked for {', '.join(sorted(IMAGE_EXTENSIONS))}, "
                     "flat or one subfolder per class)", "put the images in the folder, or one subfolder per class")


def class_ids(y: np.ndarray, what: str = "y") -> np.ndarray:
    """Labels as int class ids: one-hot (or score) rows become their argmax.

    InputError for labels that are no class ids: NaN or infinite values, fractions, non-numbers.
    """
    y = np.asarray(y)
    if y.dtype.kind not in "iubf":
        raise InputError(f"{what} holds {y.dtype} values, not class ids", "store int class ids (or one-hot rows)")
    if y.dtype.kind == "f" and not np.isfinite(y).all():
        raise InputError(f"{what} holds NaN or infinite values", "store int class ids (or one-hot rows)")
    if y.ndim > 1:
        return y.reshape(len(y), -1).argmax(1).astype(np.int64)
    if y.dtype.kind == "f" and (y != np.round(y)).any():
        raise InputError(f"{what} holds fractions such as {y[y != np.round(y)][0]:g}, not class ids",
                         "store int class ids (or one-hot rows)")
    return y.astype(np.int64)


def read_labelled_arrays(path: Path, flag: str = "--data") -> tuple[np.ndarray, np.ndarray]:
    """(x, y class ids) from an .npz holding images (or model inputs) and their labels."""
    try:
        with np.load(path, allow_pickle=False) as z:
            names = list(z.files)
            xkey = next((k for k in X_KEYS if k in names), None)
            ykey = next((k for k in Y_KEYS if k in names), None)
            if xkey is None or ykey is None:
                raise InputError(f"{flag} {path}: needs an image array and a label array (arrays: {', '.join(names)})",
                                 "save them with np.savez(path, x=images, y=labels)")
            x, y = z[xkey], z[ykey]
    except InputError:
        raise
    except (ValueError, OSError, EOFError) as exc:
        raise InputError(f"{flag} {path}: cannot read the arrays ({first_line(exc)})",
                         "save uint8 images and int labels with np.savez (edgekit never unpickles)") from None
    if x.ndim not in (3, 4) or len(x) != len(y) or not len(x):
        raise InputError(f"{flag} {path}: x has shape {x.shape} and y {y.shape}: expected (N, H, W[, C]) and N labels",
                         "save one label per image: np.savez(path, x=images, y=labels)")
    if x.dtype != np.uint8 and x.dtype.kind != "f":
        raise InputError(f"{flag} {path}: x is {x.dtype}, neither uint8 images nor float model inputs",
                         "save uint8 images (or float32 model inputs) as x")
    if x.dtype.kind == "f" and not np.isfinite(x).all():
        raise InputError(f"{flag} {path}: x holds NaN or infinite values", "replace them, or drop those samples")
    return x, class_ids(y, f"{flag} {path}: y")
