"""Calibration data for full-integer quantization: real inputs, preprocessed like inference will be.

Sources: a folder of images (flat, or one subfolder per class), a ``.npy``/``.npz`` array, TFRecord
files with an encoded-image feature (the Cloud TPU format), or ``random`` (noise, for plumbing
tests only). Every image goes through :func:`edgekit.board.preprocess.pixels` and the spec's normalization,
the same steps as :func:`edgekit.board.preprocess.to_float`, the function
``classify`` uses, because a calibration set preprocessed differently from inference is the most
common cause of int8 accuracy loss. Samples are drawn seeded and balanced across classes; a second,
disjoint draw is held back to verify the int8 model against the float one.
"""

from __future__ import annotations

import glob
import io
import math
import os
import re
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any, TypeVar

import numpy as np

from edgekit.board.preprocess import IMAGE_EXTENSIONS, PreprocessSpec, normalize_rgb, open_image, pixels
from edgekit.converters.quantize_options import QuantizeOptions
from edgekit.data import labelled as datasets
from edgekit.data.labelled import list_images
from edgekit.errors import InputError, UsageError, first_line, regular_file
from edgekit.report import SILENT, Reporter
from edgekit.results.quantize import Calibration

IMAGE_SUFFIXES = IMAGE_EXTENSIONS  # the images classify reads are the images calibration reads
TFRECORD_SUFFIXES = (".tfrecord", ".tfrecords", ".tfrec", ".record")
DEFAULT_SAMPLES = QuantizeOptions.samples  # quantize's defaults, declared once (edgekit.flags)
DEFAULT_HOLDOUT = QuantizeOptions.holdout
MIN_RECOMMENDED = 100
DEFAULT_TFRECORD_KEY = QuantizeOptions.tfrecord_key
TFRECORD_LABEL_KEYS = ("image/class/label", "label")
MAX_TFRECORD_SCAN = 5000
RANDOM_WARNING = (
    "CALIBRATING ON RANDOM NOISE: the int8 model's accuracy is meaningless. "
    "Use --calib random only to test the plumbing; pass real images with --calib for a usable model."
)
CALIB_EXAMPLE = (
    "--calib path/to/images/  (a folder of training images, flat or one subfolder per class; "
    "also .npy, .npz, .tfrecord)"
)

T = TypeVar("T")


def _example(flag: str) -> str:
    """:data:`CALIB_EXAMPLE` for the option at hand (quantize's ``--eval`` reads the same kinds of data)."""
    return CALIB_EXAMPLE.replace("--calib", flag, 1)


@dataclass
class CalibrationData:
    """Preprocessed float32 batches: ``calib`` feeds the converter, ``holdout`` the verification."""

    calib: np.ndarray
    holdout: np.ndarray
    kind: str  # images | npy | npz | tfrecord | random
    source: str
    classes: list[str] | None = None
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # The same samples as resized uint8 pixels in RGB (or L) order, so another spec can be applied
    # (None for float arrays, which are model inputs already), and their class ids where the data
    # says them: the position of the class folder in sorted order (Keras's image_dataset_from_directory
    # order), a TFRecord's image/class/label, an .npz's y.
    calib_pixels: np.ndarray | None = None
    holdout_pixels: np.ndarray | None = None
    calib_labels: np.ndarray | None = None
    holdout_labels: np.ndarray | None = None
    # Class folders matched by name to a few of many labels: ``classes`` is then the labels (the ids'
    # space) and this the number of folders read (None: as many as ``classes``).
    folders: int | None = None
    # What ``calib`` and ``holdout`` were last normalized with (channels, mean, std: all normalize_rgb reads), so
    # that using the spec they already follow (an exporter's or a recorded spec, a search that keeps the first
    # guess) does not normalize every sample again.
    normalized_as: tuple[Any, ...] | None = field(default=None, repr=False, compare=False)

    @property
    def labelled(self) -> bool:
        return self.calib_labels is not None

    @property
    def class_names(self) -> list[str] | None:
        """Class names worth recording as labels: class folder names (TFRecord and .npz give only ids)."""
        return self.classes if self.kind == "images" else None

    def use(self, spec: PreprocessSpec) -> None:
        """Renormalize ``calib`` and ``holdout`` under another spec of the same size (float arrays stay)."""
        key = (spec.channels == "BGR", tuple(spec.mean), tuple(spec.std))
        if self.calib_pixels is not None and self.holdout_pixels is not None and key != self.normalized_as:
            self.calib = normalize_rgb(self.calib_pixels, spec)
            self.holdout = normalize_rgb(self.holdout_pixels, spec)
            self.normalized_as = key

    def summary(self) -> Calibration:
        """What was read and the notes reading it gave (quantize's ``calibration``)."""
        return Calibration(
            self.source,
            self.kind,
            len(self.calib),
            len(self.holdout),
            self.folders or (len(self.classes) if self.classes else None),
            self.kind == "random",
            tuple(self.notes),
        )


# ------------------------------------------------------------------------------------------ sampling
def split_balanced(groups: Sequence[Sequence[T]], samples: int, holdout: int, seed: int) -> tuple[list[T], list[T]]:
    """Draw disjoint calibration and held-back lists, seeded, round-robin over the groups (classes).

    When there is not enough for both, a quarter of the pool (at most ``holdout``) is held back.
    """
    rng = np.random.default_rng(seed)
    shuffled = [[g[i] for i in rng.permutation(len(g))] for g in groups if len(g)]
    total = sum(len(g) for g in shuffled)
    if total >= samples + holdout:
        n_hold = holdout
    else:
        n_hold = min(holdout, total // 4)
    n_cal = min(samples, total - n_hold)
    order: list[T] = []
    depth = 0
    while len(order) < n_cal + n_hold:
        for g in shuffled:
            if depth < len(g):
                order.append(g[depth])
        depth += 1
    order = order[: n_cal + n_hold]
    return order[:n_cal], order[n_cal:]


# ------------------------------------------------------------------------------------------ sources
def is_glob(source: str) -> bool:
    return any(ch in source for ch in "*?[")


def tfrecord_files(source: str, flag: str = "--calib") -> list[str]:
    p = Path(source)
    if p.is_dir():
        files = sorted(str(f) for f in p.iterdir() if f.suffix.lower() in TFRECORD_SUFFIXES)
    elif is_glob(source):
        files = sorted(glob.glob(source))
    else:
        files = [source] if p.is_file() else []
    if not files:
        raise InputError(
            f"{flag} {source}: no TFRecord files found",
            "check the folder or glob (quote it so the shell leaves the * alone), e.g. {flag} 'data/train-*.tfrecord'",
        )
    return files


def is_tfrecord(source: str) -> bool:
    name = source.lower()
    if name.endswith(TFRECORD_SUFFIXES) or ".tfrecord" in name:
        return True
    p = Path(source)
    return (
        p.is_dir()
        and any(f.suffix.lower() in TFRECORD_SUFFIXES for f in p.iterdir())
        and not any(f.suffix.lower() in IMAGE_SUFFIXES or f.is_dir() for f in p.iterdir())
    )


def _records_in_shares(tf: Any, files: Sequence[str], budget: int) -> Iterator[Any]:
    """Up to ``budget`` serialized records, an even share from the start of each file, one file open at a time.

    Shards written class by class are then all sampled, whatever their number, and the open files stay
    at one however many shards there are (an interleave over all of them opens every shard at once and
    runs into ``ulimit -n`` with ImageNet's 1,024). A file that holds less than its share leaves the rest
    to the files that had more, read on from where they stopped. With more files than ``budget``, the
    first ``budget`` files in the (seeded, shuffled) order give one record each.
    """

    def reader(index: Any, name: Any, skip: Any, take: Any) -> Any:
        return tf.data.TFRecordDataset(name).skip(skip).take(take).map(lambda raw: (index, raw))

    read = [0] * len(files)
    active = list(range(len(files)))  # files that may hold more, unread ones first
    remaining = budget
    while active and remaining > 0:
        share, extra = divmod(remaining, len(active))
        plan = [(i, share + (j < extra)) for j, i in enumerate(active)]
        unread = [i for i, n in plan if n == 0]
        plan = [(i, n) for i, n in plan if n > 0]
        indices, takes = [i for i, _ in plan], [n for _, n in plan]
        records = tf.data.Dataset.from_tensor_slices(
            (
                np.asarray(indices, np.int64),
                [files[i] for i in indices],
                np.asarray([read[i] for i in indices], np.int64),
                np.asarray(takes, np.int64),
            )
        ).flat_map(reader)
        got = dict.fromkeys(indices, 0)
        for index, raw in records:
            got[int(index)] += 1
            yield raw
        for i in indices:
            read[i] += got[i]
        remaining -= sum(got.values())
        active = unread + [i for i, n in plan if got[i] == n]


def _read_tfrecords(
    source: str, key: str, seed: int = 0, flag: str = "--calib"
) -> tuple[list[list[bytes]], list[str] | None, list[str]]:
    from edgekit.converters.tf_quiet import import_tensorflow

    tf = import_tensorflow()
    files = tfrecord_files(source, flag)
    files = [files[i] for i in np.random.default_rng(seed).permutation(len(files))]
    by_label: dict[Any, list[bytes]] = {}
    notes: list[str] = []
    count = 0
    try:
        for raw in _records_in_shares(tf, files, MAX_TFRECORD_SCAN):
            example = tf.train.Example.FromString(raw.numpy())
            feats = example.features.feature
            if key not in feats or not feats[key].bytes_list.value:
                present = ", ".join(sorted(feats)) or "none"
                raise InputError(
                    f"{flag} {source}: TFRecord example has no encoded image under {key!r} "
                    f"(features present: {present})",
                    "name the feature with --tfrecord-key KEY",
                )
            label = None
            for lk in TFRECORD_LABEL_KEYS:
                if lk in feats and (feats[lk].int64_list.value or feats[lk].float_list.value):
                    label = _record_label(feats[lk], f"--calib {source}: {lk!r}")
                    break
            by_label.setdefault(label, []).append(bytes(feats[key].bytes_list.value[0]))
            count += 1
    except InputError:
        raise
    except Exception as exc:  # DataLossError for corrupt files, DecodeError for non-Example records
        # TensorFlow wraps the reason in "{{function_node ...}} ... [Op:IteratorGetNext]"
        reason = re.sub(r"\{\{.*?\}\}\s*|\s*\[Op:\w+\].*", "", first_line(exc, 1000))[:200]
        if "Too many open files" in reason:
            hint = "raise the limit on open files (ulimit -n) and run again"
        elif isinstance(exc, (tf.errors.NotFoundError, tf.errors.PermissionDeniedError)):
            hint = "check that the files exist and can be read"
        else:
            hint = "the file is damaged or truncated, or is not a TFRecord of tf.train.Example"
        raise InputError(f"{flag} {source}: cannot read TFRecord: {reason}", hint) from None
    if count >= MAX_TFRECORD_SCAN:
        notes.append(
            f"sampled from {MAX_TFRECORD_SCAN} records, an even share from the start of each of {len(files)} file(s)"
            if len(files) <= MAX_TFRECORD_SCAN
            else f"sampled from {MAX_TFRECORD_SCAN} records, one from each of {MAX_TFRECORD_SCAN} of the "
            f"{len(files)} files (chosen with --seed)"
        )
    labels = sorted(by_label, key=lambda v: (v is None, v))
    classes = [str(v) for v in labels] if len(labels) > 1 and None not in by_label else None
    return [by_label[v] for v in labels], classes, notes


def _record_label(feature: Any, what: str) -> int:
    """A TFRecord label: one id, or a one-hot row (int64 or float list) read as :func:`datasets.class_ids` reads
    an .npz's rows (never its first value alone); ambiguous rows are refused naming them."""
    values = list(feature.int64_list.value) or list(feature.float_list.value)
    return int(datasets.class_ids(np.asarray([values]), what)[0])


def _not_an_array(source: Any, flag: str = "--calib") -> InputError:
    return InputError(
        f"{flag} {source}: not a NumPy array of numbers (not a .npy/.npz file, or it holds "
        "Python objects, which edgekit never unpickles)",
        ARRAY_HINT,
    )


def _check_npy_header(f: IO[bytes], available: int, where: str, flag: str = "--calib") -> None:
    """Refuse an array whose header promises more bytes than there are, before numpy allocates them."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(f)
    except ValueError:
        raise _not_an_array(where, flag) from None
    if version not in ((1, 0), (2, 0)):  # 3.0 (utf-8 field names) is rare: left to np.load
        return
    shape, _, dtype = (fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0)(f)
    needed = math.prod(shape) * dtype.itemsize
    available -= f.tell()  # the header's own bytes
    if needed > available:
        raise InputError(
            f"{flag} {where}: its header says {tuple(shape)} {dtype} ({needed:,} bytes) but the file "
            f"holds {available:,} (truncated or damaged)",
            "save the array again with np.save",
        )


def _check_headers(source: Path, flag: str = "--calib") -> None:
    """:func:`_check_npy_header` for a .npy, or for every array of a .npz (a zip of .npy members)."""
    if source.suffix.lower() == ".npy":
        with open(source, "rb") as f:
            _check_npy_header(f, source.stat().st_size, str(source), flag)
        return
    with zipfile.ZipFile(source) as z:
        for info in z.infolist():
            if info.filename.endswith(".npy"):
                with z.open(info) as f:
                    head = io.BytesIO(f.read(65536 + 16))  # a header is at most a few KiB
                _check_npy_header(head, info.file_size, f"{source} ({info.filename[:-4]})", flag)


def _read_array(source: Path, flag: str = "--calib") -> tuple[np.ndarray, np.ndarray | None]:
    regular_file(source, flag)
    try:
        _check_headers(source, flag)
        if source.suffix.lower() == ".npy":
            return np.load(source, allow_pickle=False), None
        with np.load(source, allow_pickle=False) as z:
            names = list(z.files)
            xkey, ykey = datasets.array_names(names)
            xkey = xkey or next((k for k in names if z[k].ndim >= 3), None)
            if xkey is None:
                raise InputError(
                    f"{flag} {source}: no image array in the .npz (arrays: {', '.join(names)})",
                    "store the images as an (N, H, W, C) array named 'x'",
                )
            return z[xkey], (z[ykey] if ykey else None)
    except InputError:
        raise
    except ValueError as exc:  # numpy's "pickled (object) data" also for files that are no .npy at all
        if "pickle" in str(exc):
            raise _not_an_array(source, flag) from None
        raise InputError(f"{flag} {source}: cannot read the array ({first_line(exc)})", ARRAY_HINT) from None
    except (OSError, EOFError, zipfile.BadZipFile) as exc:
        raise InputError(f"{flag} {source}: cannot read the array ({first_line(exc)})", ARRAY_HINT) from None


ARRAY_HINT = "save the images with np.save / np.savez as a uint8 (N, H, W, C) array"


# ------------------------------------------------------------------------------------------ main
def check_exists(source: str, recorded_in: str | Path | None = None, flag: str = "--calib") -> None:
    """Refuse a calibration path that does not exist (``random`` and globs pass), before any slow work.

    ``recorded_in`` names the record the source came from when the user gave no ``--calib``.
    """
    if source == "random" or is_glob(source) or Path(source).exists():
        return
    if recorded_in:
        raise InputError(
            f"the calibration data recorded in {recorded_in} is gone: no such file or folder {source}",
            f"pass it explicitly: {CALIB_EXAMPLE}",
        )
    raise InputError(f"{flag} {source}: no such file or folder", f"example: {_example(flag)}")


@dataclass
class _Source:
    """What a reader found in a calibration source: the items grouped by class, and how to decode one."""

    kind: str
    groups: list[list[Any]]
    decode: Callable[[Any], np.ndarray]
    classes: list[str] | None = None
    class_ids: list[int] | None = None
    notes: list[str] = field(default_factory=list)
    is_float: bool = False  # float arrays are model inputs already: no pixels to renormalize


def load(
    source: str,
    spec: PreprocessSpec,
    samples: int = DEFAULT_SAMPLES,
    holdout: int = DEFAULT_HOLDOUT,
    seed: int = QuantizeOptions.seed,
    tfrecord_key: str = DEFAULT_TFRECORD_KEY,
    report: Reporter = SILENT,
    flag: str = "--calib",
    letterbox: bool = False,
) -> CalibrationData:
    """Read, sample and preprocess calibration data from ``source`` (see the module docstring); ``report``
    draws the progress; ``flag`` is the option errors name (``--calib``, or quantize's ``--eval``); ``letterbox``:
    images are letterboxed to the input size (a detector fed like Ultralytics' predict and val), not stretched."""
    if samples < 1:
        raise UsageError("--samples must be at least 1", "e.g. --samples 300")
    check_exists(source, flag=flag)
    rgb = replace(spec, channels="L" if spec.num_channels == 1 else "RGB")  # decode once; use() applies any order
    if source == "random":
        return _random(spec, rgb, samples, holdout, seed)
    found = _open_source(source, spec, _fitter(rgb, letterbox), seed, tfrecord_key, flag)
    return _sample(found, source, spec, samples, holdout, seed, report, flag)


def _random(spec: PreprocessSpec, rgb: PreprocessSpec, samples: int, holdout: int, seed: int) -> CalibrationData:
    """``random``: seeded noise images (for plumbing tests only; the data carries :data:`RANDOM_WARNING`)."""
    h, w, c = spec.height, spec.width, spec.num_channels
    rng = np.random.default_rng(seed)
    noise = rng.integers(0, 256, (samples + holdout, h, w, 3 if c == 3 else 1), dtype=np.uint8)
    px = np.stack([pixels(n if c == 3 else n[..., 0], rgb) for n in noise])
    data = CalibrationData(
        np.zeros(0),
        np.zeros(0),
        "random",
        "random",
        warnings=[RANDOM_WARNING],
        calib_pixels=px[:samples],
        holdout_pixels=px[samples:],
    )
    data.use(spec)
    return data


def _fitter(rgb: PreprocessSpec, letterbox: bool) -> Callable[[Any], np.ndarray]:
    """Image → resized pixels (:func:`edgekit.board.preprocess.pixels`); letterboxed first for a detector that takes
    letterboxed images, exactly as evaluate and detect feed it (:meth:`edgekit.board.decode.Geometry.apply`)."""
    if not letterbox:
        return lambda image: pixels(image, rgb)
    from PIL import Image

    from edgekit.board.decode import Geometry
    from edgekit.board.preprocess import to_8bit

    def fit(image: Any) -> np.ndarray:
        image = to_8bit(Image.fromarray(image) if isinstance(image, np.ndarray) else image)
        image = image.convert("L" if rgb.channels == "L" else "RGB")
        return pixels(Geometry.letterboxed(image.size, (rgb.width, rgb.height)).apply(image), rgb)

    return fit


def _open_source(
    source: str, spec: PreprocessSpec, fit: Callable[[Any], np.ndarray], seed: int, tfrecord_key: str, flag: str
) -> _Source:
    """The reader for the kind of ``source`` (TFRecord, image folder, array), or the refusal naming what it is."""
    path = Path(source)
    if is_tfrecord(source):
        return _tfrecord_source(source, fit, seed, tfrecord_key, flag)
    if path.is_dir():
        return _folder_source(source, fit, flag)
    if path.suffix.lower() in (".npy", ".npz") and path.is_file():
        return _array_source(source, spec, fit, flag)
    if is_glob(source):  # a glob is read as TFRecord files only (README): say so, not "a single image"
        folder = path.parent if not is_glob(str(path.parent)) else None
        raise InputError(
            f"{flag} {source}: a glob names TFRecord files only, and this one names none",
            f"pass the folder that holds the images: {flag} {folder}"
            if folder
            else f"pass a folder of images; example: {_example(flag)}",
        )
    if path.suffix.lower() in IMAGE_SUFFIXES:
        raise InputError(
            f"{flag} {source} is a single image; calibration needs a few hundred",
            f"pass the folder that holds the images: {flag} {path.parent}",
        )
    raise InputError(f"{flag} {source}: unsupported calibration source", f"example: {_example(flag)}")


def _tfrecord_source(source: str, fit: Callable[[Any], np.ndarray], seed: int, tfrecord_key: str, flag: str) -> _Source:
    """TFRecord files: encoded images grouped by their label feature."""
    groups, classes, notes = _read_tfrecords(source, tfrecord_key, seed, flag)

    def decode(b: bytes) -> np.ndarray:
        try:
            return fit(open_image(io.BytesIO(b)))
        except InputError as exc:
            raise InputError(
                f"{flag} {source}: a record's {tfrecord_key!r} is not a readable image "
                f"({exc.message.split(': ', 1)[-1]})",
                "name the feature holding encoded images with --tfrecord-key",
            ) from None

    return _Source("tfrecord", groups, decode, classes, [int(c) for c in classes] if classes else None, notes)


def _folder_source(source: str, fit: Callable[[Any], np.ndarray], flag: str) -> _Source:
    """A folder of images, flat or one subfolder per class (ids in sorted order, as Keras numbers them)."""
    groups, classes = list_images(Path(source))

    def decode(f: Path) -> np.ndarray:
        try:
            return fit(open_image(f))
        except InputError as exc:
            raise InputError(f"{flag} {source}: {exc.message}", "remove or replace that file") from None

    return _Source("images", groups, decode, classes, list(range(len(classes))) if classes else None)


def _array_source(source: str, spec: PreprocessSpec, fit: Callable[[Any], np.ndarray], flag: str) -> _Source:
    """A .npy/.npz: uint8 images (preprocessed here) or float model inputs (used as they are), with an .npz's y."""
    path = Path(source)
    x, y = _read_array(path, flag)
    _check_array(x, source, flag)
    found = _Source(
        path.suffix.lower()[1:],
        [list(range(len(x)))],
        _array_decoder(x, source, spec, fit, flag),
        is_float=x.dtype.kind == "f",
    )
    if x.dtype.kind == "f":
        found.notes.append("float array used as model inputs as is (no preprocessing applied)")
    if y is not None:  # labels that are there must be labels, as evaluate requires of the same file
        labels = datasets.labels_of(x, y, f"{flag} {source}")  # one-hot rows → ids; NaN, fractions refused
        values = sorted(set(labels.tolist()))
        found.groups = [[i for i in range(len(x)) if labels[i] == v] for v in values]
        found.classes = [str(v) for v in values]
        found.class_ids = [int(v) for v in values]
    return found


def _check_array(x: np.ndarray, source: str, flag: str) -> None:
    """Refuse an array that holds no images: wrong rank, empty, odd channels, NaN or infinite values."""
    if x.ndim not in (3, 4) or len(x) == 0:
        raise InputError(f"{flag} {source}: expected an (N, H, W, C) image array, got shape {x.shape}", ARRAY_HINT)
    if x.dtype == np.uint8 and x.ndim == 4 and x.shape[-1] not in (1, 3, 4):
        raise InputError(
            f"{flag} {source}: images with {x.shape[-1]} channels (shape {x.shape})",
            "store 1 (grey), 3 (RGB) or 4 (RGBA) channels, as (N, H, W, C)",
        )
    if x.dtype.kind == "f" and not np.isfinite(x).all():
        raise InputError(
            f"{flag} {source}: the array holds NaN or infinite values "
            f"({int(np.count_nonzero(~np.isfinite(x)))} of {x.size})",
            "replace them (np.nan_to_num) or drop those samples",
        )


def _array_decoder(
    x: np.ndarray, source: str, spec: PreprocessSpec, fit: Callable[[Any], np.ndarray], flag: str
) -> Callable[[int], np.ndarray]:
    """Sample ``i`` of the array: uint8 pixels resized like an image, or a float input of the model's shape."""
    if x.dtype == np.uint8:

        def decode(i: int) -> np.ndarray:
            return fit(x[i] if x[i].ndim == 2 or x[i].shape[-1] != 1 else x[i][..., 0])

        return decode
    if x.dtype.kind == "f":
        shape = (spec.height, spec.width, spec.num_channels)
        if tuple(x.shape[1:]) != shape:
            raise InputError(
                f"{flag} {source}: float array of shape {tuple(x.shape[1:])} per sample, but the model takes {shape}",
                "store uint8 images (edgekit preprocesses them) or already-preprocessed inputs of the model's shape",
            )

        def as_input(i: int) -> np.ndarray:
            return x[i].astype(np.float32)

        return as_input
    raise InputError(
        f"{flag} {source}: array dtype {x.dtype} is neither uint8 images nor float inputs",
        "save 0..255 images as uint8 (x.astype(np.uint8)), or preprocessed model inputs as float32",
    )


def _sample(
    found: _Source,
    source: str,
    spec: PreprocessSpec,
    samples: int,
    holdout: int,
    seed: int,
    report: Reporter,
    flag: str,
) -> CalibrationData:
    """Draw the calibration and held-back samples (balanced over the classes), decode and normalize them."""
    h, w, c = spec.height, spec.width, spec.num_channels
    tagged = [[(k, item) for item in g] for k, g in enumerate(found.groups)]  # each item with its group
    chosen, held = split_balanced(tagged, samples, holdout, seed)
    if not chosen:  # e.g. TFRecord files with no records
        raise InputError(f"{flag} {source}: no samples in it", f"example: {_example(flag)}")
    title = "Reading calibration data" if flag == "--calib" else f"Reading {flag} data"
    tensors = [found.decode(item) for _, item in report.iterate(chosen + held, len(chosen) + len(held), title)]
    empty = np.zeros((0, h, w, c), np.float32 if found.is_float else np.uint8)
    first = np.stack(tensors[: len(chosen)])
    rest = np.stack(tensors[len(chosen) :]) if held else empty
    kind, classes, notes = found.kind, found.classes, found.notes
    if found.is_float:
        data = CalibrationData(first.astype(np.float32), rest.astype(np.float32), kind, source, classes, notes=notes)
    else:
        data = CalibrationData(
            np.zeros(0), np.zeros(0), kind, source, classes, notes=notes, calib_pixels=first, holdout_pixels=rest
        )
        data.use(spec)
    if found.class_ids is not None:
        data.calib_labels = np.asarray([found.class_ids[k] for k, _ in chosen], np.int64)
        data.holdout_labels = np.asarray([found.class_ids[k] for k, _ in held], np.int64)
    if len(chosen) < MIN_RECOMMENDED:
        data.warnings.append(
            f"only {len(chosen)} calibration samples (fewer than {MIN_RECOMMENDED}): "
            "int8 ranges may be poorly estimated; give more data or a larger --samples"
        )
    if holdout and not held:
        data.notes.append("too little data to hold any back: verification uses the calibration samples")
    return data


def describe_missing(model_path: str) -> UsageError:
    """The refusal when no calibration data was given and none is recorded beside the model."""
    return UsageError(
        f"no calibration data for {os.path.basename(model_path)}: full-int8 quantization needs "
        "real inputs to measure activation ranges",
        f"pass {CALIB_EXAMPLE}; `--calib random` only to test the plumbing",
    )
