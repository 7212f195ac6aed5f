"""Labelled image sets on disk, read without TensorFlow: shared by calibration (converters) and evaluate (devices).

A class-folder tree gives class ids in Keras's ``image_dataset_from_directory`` order: subfolder
names sorted, folder *k* is class *k*. An ``.npz`` gives ``x`` (uint8 images, or float model inputs)
and ``y`` (class ids, or one-hot rows).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from edgekit.preprocess import IMAGE_EXTENSIONS
from edgekit.errors import InputError, first_line, regular_file

#: Image array names in an .npz, in the order looked for, each with the label array names that go with it.
ARRAY_PAIRS = {"x": ("y", "labels"), "images": ("labels", "y"), "x_train": ("y_train",), "data": ("labels", "y"),
               "x_calib": ("y_calib", "y"), "x_test": ("y_test",)}


def array_names(names: list[str]) -> tuple[str | None, str | None]:
    """(images, labels): the names of an .npz's image array and of the labels that go with it (None: absent).

    Labels pair with their images (``x_test`` with ``y_test``, never with ``y_train``).
    """
    x = next((k for k in ARRAY_PAIRS if k in names), None)
    y = next((k for k in ARRAY_PAIRS[x] if k in names), None) if x else None
    return x, y


def labels_of(x: np.ndarray, y: np.ndarray, where: str) -> np.ndarray:
    """Class ids of the images ``x`` from ``y``, one label per image (see :func:`class_ids`); else InputError."""
    y = np.asarray(y)
    if y.ndim == 0 or len(y) != len(x):
        raise InputError(f"{where}: x has shape {x.shape} and y {y.shape}: expected one label per image",
                         "save one label per image: np.savez(path, x=images, y=labels)")
    return class_ids(y, f"{where}: y")


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
        if not y[0].size:
            raise InputError(f"{what} has shape {y.shape}: rows with no values", "store int class ids (or one-hot rows)")
        return y.reshape(len(y), -1).argmax(1).astype(np.int64)
    if y.dtype.kind == "f" and (y != np.round(y)).any():
        raise InputError(f"{what} holds fractions such as {y[y != np.round(y)][0]:g}, not class ids",
                         "store int class ids (or one-hot rows)")
    return y.astype(np.int64)


def read_labelled_arrays(path: Path, flag: str = "--data") -> tuple[np.ndarray, np.ndarray]:
    """(x, y class ids) from an .npz holding images (or model inputs) and their labels."""
    regular_file(path, flag)
    try:
        with np.load(path, allow_pickle=False) as z:
            names = list(z.files)
            xkey, ykey = array_names(names)
            if xkey is None or ykey is None:
                raise InputError(f"{flag} {path}: needs an image array and a label array (arrays: {', '.join(names)})",
                                 "save them with np.savez(path, x=images, y=labels)")
            x, y = z[xkey], z[ykey]
    except InputError:
        raise
    except (ValueError, OSError, EOFError) as exc:
        raise InputError(f"{flag} {path}: cannot read the arrays ({first_line(exc)})",
                         "save uint8 images and int labels with np.savez (edgekit never unpickles)") from None
    if x.ndim not in (3, 4) or not len(x):
        raise InputError(f"{flag} {path}: x has shape {x.shape}: expected (N, H, W[, C]) images",
                         "save the images as one (N, H, W, C) array: np.savez(path, x=images, y=labels)")
    if x.dtype != np.uint8 and x.dtype.kind != "f":
        raise InputError(f"{flag} {path}: x is {x.dtype}, neither uint8 images nor float model inputs",
                         "save uint8 images (or float32 model inputs) as x")
    if x.dtype.kind == "f" and not np.isfinite(x).all():
        raise InputError(f"{flag} {path}: x holds NaN or infinite values", "replace them, or drop those samples")
    return x, labels_of(x, y, f"{flag} {path}")
