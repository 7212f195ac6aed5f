"""Labelled image sets on disk, read without TensorFlow: shared by calibration (converters) and evaluate (devices).

A class-folder tree gives class ids in Keras's ``image_dataset_from_directory`` order: subfolder
names sorted, folder *k* is class *k*. An ``.npz`` gives ``x`` (uint8 images, or float model inputs)
and ``y`` (class ids, or one-hot rows).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from edgekit.board.preprocess import IMAGE_EXTENSIONS, is_hidden
from edgekit.errors import InputError, first_line, regular_file

#: Image array names in an .npz, in the order looked for, each with the label array names that go with it.
ARRAY_PAIRS = {
    "x": ("y", "labels"),
    "images": ("labels", "y"),
    "x_train": ("y_train",),
    "data": ("labels", "y"),
    "x_calib": ("y_calib", "y"),
    "x_test": ("y_test",),
}


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
        raise InputError(
            f"{where}: x has shape {x.shape} and y {y.shape}: expected one label per image",
            "save one label per image: np.savez(path, x=images, y=labels)",
        )
    return class_ids(y, f"{where}: y")


def match_by_name(folders: list[str], labels: dict[int, str] | list[str]) -> np.ndarray | None:
    """The model output id of each class folder when every folder is named like one of the model's labels.

    Shared by ``quantize`` (``--calib``/``--eval`` with ``--labels``) and ``evaluate``: a model's labels say its
    class order, so folders named like them are matched by name, not by sorted position, and may be a
    few of its classes (20 folders for a 1000-class ImageNet head, or every class but a ``background`` 0).
    A name listed twice among the labels matches its first id. None when some folder names no label.
    """
    table = dict(enumerate(labels)) if isinstance(labels, list) else dict(labels)
    by_name = {name: i for i, name in sorted(table.items(), reverse=True)}
    if not folders or not all(n in by_name for n in folders):
        return None
    return np.asarray([by_name[n] for n in folders], np.int64)


def list_images(folder: Path, flag: str = "--calib") -> tuple[list[list[Path]], list[str] | None]:
    """Image files grouped by class subfolder (``None`` classes for a flat folder)."""

    def images_in(d: Path) -> list[Path]:
        return sorted(
            f
            for f in d.iterdir()
            if f.is_file() and f.suffix.lower() in IMAGE_EXTENSIONS and not is_hidden(f.relative_to(d))
        )

    subdirs = sorted(d for d in folder.iterdir() if d.is_dir() and not is_hidden(d.relative_to(folder)))
    groups = [(d.name, images_in(d)) for d in subdirs]
    groups = [(n, files) for n, files in groups if files]
    flat = images_in(folder)
    if groups and not flat:
        return [files for _, files in groups], [n for n, _ in groups]
    if flat:
        return [flat], None
    raise InputError(
        f"{flag} {folder}: no images found (looked for {', '.join(sorted(IMAGE_EXTENSIONS))}, "
        "flat or one subfolder per class)",
        "put the images in the folder, or one subfolder per class",
    )


LABEL_HINT = "store int class ids shaped (N,) or (N, 1), or one-hot rows shaped (N, classes)"


def class_ids(y: np.ndarray, what: str = "y") -> np.ndarray:
    """Labels as int class ids, from every shape Keras and its datasets use.

    ``(N,)`` ids; ``(N, 1)`` ids (what ``keras.datasets.cifar10.load_data()`` returns, and what Keras's
    sparse losses take: one column of ids, never one-hot rows of one class); ``(N, C)`` one-hot rows, as
    uint8, int or float (each row all 0 but one 1), or label-smoothed / probability rows (non-negative, summing
    to 1, one largest value): their argmax. Anything else is refused naming its shape, since reading it
    either way could be silently wrong: rows with several 1s (multi-label), all-0 rows, rows of scores or
    logits, ties. Also refused: NaN or infinite values, fractional ids, non-numbers.
    """
    y = np.asarray(y)
    if y.dtype.kind not in "iubf":
        raise InputError(f"{what} holds {y.dtype} values, not class ids", LABEL_HINT)
    if y.dtype.kind == "f" and not np.isfinite(y).all():
        raise InputError(f"{what} holds NaN or infinite values", LABEL_HINT)
    if y.ndim > 1:
        rows = y.reshape(len(y), -1)
        if not rows.shape[1]:
            raise InputError(f"{what} has shape {y.shape}: rows with no values", LABEL_HINT)
        if rows.shape[1] == 1:  # (N, 1): a column of ids, as keras.datasets returns them
            return class_ids(rows[:, 0], what)
        return _row_ids(rows, y.shape, what)
    if y.dtype.kind == "f" and (y != np.round(y)).any():
        raise InputError(f"{what} holds fractions such as {y[y != np.round(y)][0]:g}, not class ids", LABEL_HINT)
    if y.dtype.kind == "i" and len(y) and y.min() < 0:
        raise InputError(f"{what} holds negative class ids such as {y.min()}", LABEL_HINT)
    return y.astype(np.int64)


def _row_ids(rows: np.ndarray, shape: tuple[int, ...], what: str) -> np.ndarray:
    """Class ids of (N, C) label rows: one-hot or probability rows (see :func:`class_ids`); else InputError."""
    r = rows.astype(np.float64)
    top = r.argmax(1)
    onehot = np.isin(r, (0.0, 1.0)).all() and (r.sum(1) == 1).all()
    if onehot:
        return top.astype(np.int64)
    sums = r.sum(1)
    best = r[np.arange(len(r)), top]
    ties = (r == best[:, None]).sum(1) > 1
    if (r >= 0).all() and np.allclose(sums, 1.0, atol=1e-3) and not ties.any():
        return top.astype(np.int64)  # label smoothing, or soft labels: the class each row is for
    if np.isin(r, (0.0, 1.0)).all():
        bad = int(np.flatnonzero(sums != 1)[0])
        why = f"row {bad} has {int(sums[bad])} ones" + (" (multi-label?)" if sums[bad] > 1 else "")
    elif (r < 0).any() or not np.allclose(sums, 1.0, atol=1e-3):
        bad = int(np.flatnonzero((r < 0).any(1) | ~np.isclose(sums, 1.0, atol=1e-3))[0])
        why = f"row {bad} is no one-hot or probability row (sums to {sums[bad]:g}; scores or logits?)"
    else:
        bad = int(np.flatnonzero(ties)[0])
        why = f"row {bad} has a tie for its largest value"
    raise InputError(
        f"{what} has shape {tuple(shape)} but its rows are not one-hot: {why}, so the class of a sample is ambiguous",
        LABEL_HINT,
    )


def read_labelled_arrays(path: Path, flag: str = "--data") -> tuple[np.ndarray, np.ndarray]:
    """(x, y class ids) from an .npz holding images (or model inputs) and their labels."""
    regular_file(path, flag)
    try:
        with np.load(path, allow_pickle=False) as z:
            names = list(z.files)
            xkey, ykey = array_names(names)
            if xkey is None or ykey is None:
                raise InputError(
                    f"{flag} {path}: needs an image array and a label array (arrays: {', '.join(names)})",
                    "save them with np.savez(path, x=images, y=labels)",
                )
            x, y = z[xkey], z[ykey]
    except InputError:
        raise
    except (ValueError, OSError, EOFError) as exc:
        raise InputError(
            f"{flag} {path}: cannot read the arrays ({first_line(exc)})",
            "save uint8 images and int labels with np.savez (edgekit never unpickles)",
        ) from None
    if x.ndim not in (3, 4) or not len(x):
        raise InputError(
            f"{flag} {path}: x has shape {x.shape}: expected (N, H, W[, C]) images",
            "save the images as one (N, H, W, C) array: np.savez(path, x=images, y=labels)",
        )
    if x.dtype != np.uint8 and x.dtype.kind != "f":
        raise InputError(
            f"{flag} {path}: x is {x.dtype}, neither uint8 images nor float model inputs",
            "save uint8 images (or float32 model inputs) as x",
        )
    if x.dtype.kind == "f" and not np.isfinite(x).all():
        raise InputError(f"{flag} {path}: x holds NaN or infinite values", "replace them, or drop those samples")
    return x, labels_of(x, y, f"{flag} {path}")
