"""Image classification on an Edge TPU or the CPU: labels, scoring and the classify runner.

Scoring follows pycoral's ``adapters/classify.py``: scores are the first output, flattened and
dequantized (``scale * (q - zero_point)``); :func:`top_k` keeps the ``k`` best with
``score >= threshold``. Ties are broken by the lower class id, so results never depend on the
sort algorithm. Preprocessing is edgekit's one function (:mod:`edgekit.preprocess`) with the spec
recorded by ``edgekit quantize`` when there is one, else the spec derived from the input's own
quantization (raw pixels into uint8, pixels - 128 into int8).

Decoding and resizing run in a small thread pool ahead of inference (Pillow releases the GIL), so
a folder of images keeps the interpreter busy; results still come back in input order.
"""

from __future__ import annotations

import glob
import os
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from edgekit.classes import parse_labels, read_labels, top_k  # noqa: F401 (part of this module's API)
from edgekit.errors import DeviceError, InputError, first_line, regular_file
from edgekit.preprocess import IMAGE_EXTENSIONS  # noqa: F401 (part of this module's API)


# ------------------------------------------------------------------------------------- images
def _hidden(relative: Path) -> bool:
    """A dot file or a file in a dot folder: macOS's ``._photo.jpg`` companions, ``.ipynb_checkpoints``..."""
    return any(part.startswith(".") for part in relative.parts)


def expand_images(args: Iterable[str]) -> tuple[list[str], list[dict[str, str]]]:
    """Files, folders (their images and those of their subfolders, sorted; hidden ones skipped, as by a
    glob's ``*``) and globs → (image paths, errors)."""
    images: list[str] = []
    errors: list[dict[str, str]] = []
    for arg in args:
        p = Path(arg)
        if not arg.strip():  # Path("") is the current folder: an unset shell variable must not scan it
            errors.append({"image": arg, "error": "an image argument is empty (is a shell variable unset?)"})
        elif p.is_dir():
            found = sorted(str(c) for c in p.rglob("*") if c.suffix.lower() in IMAGE_EXTENSIONS and c.is_file()
                           and not _hidden(c.relative_to(p)))
            if not found:
                kinds = ", ".join(sorted(IMAGE_EXTENSIONS))
                errors.append({"image": arg, "error": f"{arg}: folder holds no images (only {kinds} files are read)"})
            images += found
        elif p.exists():
            images.append(arg)
        elif glob.has_magic(arg):
            found = sorted(m for m in glob.glob(arg, recursive=True) if Path(m).is_file())
            if not found:
                errors.append({"image": arg, "error": f"{arg}: no file matches this pattern (check the folder and the "
                                                      "pattern; quote it so the shell leaves the * alone)"})
            images += found
        else:
            errors.append({"image": arg, "error": f"{arg}: no such file (check the path)"})
    return images, errors


# ------------------------------------------------------------------------------------- runner
@dataclass
class ImageResult:
    image: str
    ms: float
    top: list[dict[str, Any]]


@dataclass
class ClassifyReport:
    """The document ``edgekit classify --json`` prints (schema in the README)."""

    model: str
    device: str
    backend: str
    first_inference_ms: float | None = None
    results: list[ImageResult] = field(default_factory=list)
    errors: list[dict[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "device": self.device, "backend": self.backend,
                "first_inference_ms": self.first_inference_ms,
                "results": [{"image": r.image, "ms": r.ms, "top": r.top} for r in self.results],
                "errors": self.errors}


def _quantization(details: dict[str, Any]) -> tuple[float | None, int | None]:
    scale, zero_point = details.get("quantization", (0.0, 0))
    return (float(scale) or None), int(zero_point)


# edgekit.tflite_model's FILE_IDENTIFIER and EDGETPU_CUSTOM_OP, repeated so that a plain model
# does not pay for importing the reader (a test checks they agree).
_TFLITE_IDENTIFIER = b"TFL3"
_EDGETPU_CUSTOM_OP = b"edgetpu-custom-op"


def model_facts(path: str | os.PathLike) -> tuple[bool, dict[str, bytes]]:
    """(is compiled for the Edge TPU, metadata entries) of a model, parsing it only when that can matter.

    A model whose bytes contain neither the Edge TPU custom op's name nor the record's metadata name
    is a plain CPU model without a record: the full parse (a few ms per start, most of it for
    nothing) is skipped. Anything else, including a file that is not a TFLite model, goes through
    :func:`edgekit.tflite_model.load`, which also gives the precise error.
    """
    import mmap

    from edgekit.model_record import METADATA_NAME

    regular_file(path)
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            plain = (data[4:8] == _TFLITE_IDENTIFIER and data.find(_EDGETPU_CUSTOM_OP) < 0
                     and data.find(METADATA_NAME.encode()) < 0)
    except (OSError, ValueError):  # missing, unreadable, empty, a folder: let load() say which
        plain = False
    if plain:
        return False, {}
    from edgekit import tflite_model
    from edgekit.errors import InvalidModelError

    try:
        info = tflite_model.load(path)
        return info.is_compiled, info.metadata
    except InvalidModelError as exc:  # its message does not say which file
        generic = not exc.hint or exc.hint == InvalidModelError.DEFAULT_HINT
        raise InputError(f"{path}: {exc.message}", "pass a .tflite model with -m/--model" if generic else exc.hint) from None


@dataclass
class LoadedModel:
    """What :class:`ModelLoader` opened: the interpreter, where it runs, and what was recorded about the model."""

    opened: Any                                  # backends.OpenedModel
    spec: Any = None                             # the recorded PreprocessSpec, None when there is none
    spec_source: str | None = None               # where it was recorded ("model metadata", a sidecar, a bundle)
    labels: dict[int, str] | None = None         # the recorded labels
    notes: list[str] = field(default_factory=list)
    bundle: Any = None                           # manifest.Bundle when the model came from a bundle folder


class ModelLoader:
    """Opens a model on a device (Polygraphy's loader half): backend, delegate, fallback to the CPU twin.

    ``model`` is a .tflite file or a bundle folder written by ``edgekit build``. From a bundle it
    picks the compiled model unless ``device`` is ``cpu`` (or there is none), and verifies the
    sha256 of every file it may load (the model, its CPU twin, the labels) before opening anything.
    Calling the loader opens the model and returns a :class:`LoadedModel`.
    """

    def __init__(self, model: str | os.PathLike, device: str = "auto", backend: Any = None,
                 num_threads: int | None = None, record_needed: bool = True):
        self.model, self.device, self.backend, self.num_threads = model, device, backend, num_threads
        # False where nothing the record says is used (benchmark) or all of it is overridden (--mean and
        # --std): a record that cannot be read is then ignored with a warning instead of stopping the run.
        self.record_needed = record_needed

    def __call__(self) -> LoadedModel:
        if Path(self.model).is_dir():
            return self._load_bundle()
        from edgekit.model_record import cpu_model_path, find_record

        twin = cpu_model_path(self.model)
        if not Path(self.model).exists() and twin != Path(self.model) and twin.is_file():
            # the quick start without edgetpu_compiler: step 3 made no compiled model
            raise InputError(f"no such file: {self.model}",
                             f"compile it first (edgekit compile {twin}), or run the CPU model: -m {twin}")
        is_compiled, metadata = model_facts(self.model)
        opened = self._open(self.model, is_compiled)
        notes = list(opened.notes)
        try:
            record = find_record(self.model, metadata)
            if record is None and opened.model_path != str(self.model):
                record = find_record(opened.model_path, model_facts(opened.model_path)[1])
        except InputError as exc:
            if self.record_needed:
                raise
            record = None
            notes.append(f"warning: ignoring a record that cannot be read: {exc.message}")
        rec = record[0] if record else None
        return LoadedModel(opened, rec.preprocess if rec else None, f"recorded ({record[1]})" if record else None,
                           dict(enumerate(rec.labels)) if rec is not None and rec.labels else None, notes)

    def _open(self, path: str | os.PathLike, is_compiled: bool) -> Any:
        from edgekit.devices import backends

        find_devices = None
        if is_compiled:
            from edgekit.devices.discovery import list_devices

            find_devices = list_devices
        return backends.open_model(path, self.device, backend=self.backend, num_threads=self.num_threads,
                                   is_compiled=is_compiled, find_devices=find_devices)

    def _load_bundle(self) -> LoadedModel:
        from edgekit import manifest
        from edgekit.devices.backends import parse_device
        from edgekit.preprocess import PreprocessSpec

        bundle = manifest.load(self.model)
        spec = PreprocessSpec.from_dict(bundle.preprocess)
        compiled = bundle.edgetpu_model is not None and parse_device(self.device).kind != "cpu"
        chosen = bundle.edgetpu_model if compiled else bundle.cpu_model
        for rel in dict.fromkeys([chosen, bundle.cpu_model] + ([bundle.labels] if bundle.labels else [])):
            bundle.verified(rel)  # before anything is opened: a changed file is refused, not loaded
        labels = read_labels(bundle.path(bundle.labels)) if bundle.labels else None
        opened = self._open(bundle.path(chosen), compiled)
        return LoadedModel(opened, spec, f"recorded (bundle {self.model})", labels, list(opened.notes), bundle)


class Classifier:
    """The runner half: images through a model that a :class:`ModelLoader` opened, with its preprocessing and labels."""

    def __init__(self, model: str | os.PathLike | ModelLoader, device: str = "auto",
                 labels: str | os.PathLike | None = None, mean: tuple[float, ...] | None = None,
                 std: tuple[float, ...] | None = None, backend: Any = None, num_threads: int | None = None):
        from edgekit import preprocess

        loader = model if isinstance(model, ModelLoader) else ModelLoader(
            model, device, backend, num_threads, record_needed=mean is None or std is None)
        model = loader.model
        self.loaded = loaded = loader()
        self.opened = loaded.opened
        self.notes: list[str] = list(loaded.notes)
        interp = self.opened.interpreter
        inp = interp.get_input_details()[0]
        out = interp.get_output_details()[0]
        self._input_index, self._output_index = inp["index"], out["index"]
        self.input_dtype = np.dtype(inp["dtype"]).name
        self.input_scale, self.input_zero_point = _quantization(inp)
        self.output_scale, self.output_zero_point = _quantization(out)
        self.num_classes = int(np.prod(out["shape"]))
        out_shape = [int(d) for d in out["shape"]]
        if sum(d > 1 for d in out_shape) > 1:
            raise InputError(f"{model}: not a classifier: its output has shape {out_shape}, not one score per class",
                             "edgekit classify needs an output of shape [1, classes]")
        shape = [int(d) for d in inp["shape"]]
        self._input_shape = tuple(shape)
        if len(shape) == 3:  # [1, height, width]: a grayscale image without its channel axis (e.g. MNIST)
            shape.append(1)
        if len(shape) != 4 or shape[0] != 1 or shape[3] not in (1, 3):
            raise InputError(f"{model}: expected an image input [1, height, width, 1 or 3], "
                             f"got {list(self._input_shape)}", "classify runs image classifiers; other models need "
                             "their own code")
        signature = [int(d) for d in inp.get("shape_signature", shape)]
        if any(d < 0 for d in signature[1:]):  # the interpreter shows 1 for such a dimension: 1x1 images otherwise
            raise InputError(f"{model}: the input size is not fixed (shape signature {signature})",
                             "convert the model with a fixed input size (edgekit quantize --input-size WxH); "
                             "the Edge TPU needs one too")
        _, height, width, channels = shape

        spec, self.spec_source, warnings = preprocess.spec_for_model(
            loaded.spec, loaded.spec_source, width, height, channels, self.input_dtype, self.input_scale,
            self.input_zero_point, mean, std, name=str(model))
        self.notes += warnings
        self.spec = spec

        if labels is not None:
            self.labels: dict[int, str] = read_labels(labels)
            recorded = dict(loaded.labels or {})
            differ = [i for i in sorted(set(recorded) | set(self.labels)) if recorded.get(i) != self.labels.get(i)]
            if recorded and differ:  # the file wins, as asked; but a wrong file gives wrong names to every answer
                first = differ[0]
                self.notes.append(f"warning: --labels {labels} differs from the labels recorded with the model in "
                                  f"{len(differ)} of {max(len(recorded), len(self.labels))} classes (class {first}: "
                                  f"{self.labels.get(first)!r} here, {recorded.get(first)!r} recorded); using "
                                  "--labels")
        else:
            self.labels = dict(loaded.labels or {})
        if (self.labels or labels is not None) and len(self.labels) != self.num_classes:  # an empty file too
            self.notes.append(f"warning: {len(self.labels)} labels but the model has {self.num_classes} classes; "
                              "labels may be shifted (e.g. a missing 'background' line)")
        self.first_inference_ms: float | None = None

    # -- steps ----------------------------------------------------------------------------------
    def prepare(self, image_path: str) -> np.ndarray:
        """Image file → the model's input tensor (InputError for an unreadable or refused image)."""
        from edgekit.preprocess import prepare_file

        return prepare_file(image_path, self.spec, self.input_dtype, self.input_scale, self.input_zero_point,
                            self._input_shape)

    def infer(self, tensor: np.ndarray) -> tuple[np.ndarray, float]:
        """Run one input; the dequantized scores and the invoke time in milliseconds."""
        from edgekit.preprocess import dequantize

        interp = self.opened.interpreter
        interp.set_tensor(self._input_index, tensor)
        start = time.perf_counter()
        try:
            interp.invoke()
        except (RuntimeError, ValueError) as exc:
            raise DeviceError(f"inference failed on {self.opened.device}: {first_line(exc)}",
                              "the model or the runtime is broken; `edgekit doctor` may tell which") from None
        ms = (time.perf_counter() - start) * 1000.0
        if self.first_inference_ms is None:
            self.first_inference_ms = ms
        raw = interp.get_tensor(self._output_index).ravel()
        return dequantize(raw, self.output_scale, self.output_zero_point), ms

    def label(self, class_id: int) -> str | None:
        return self.labels.get(class_id)

    def classify_tensor(self, tensor: np.ndarray, k: int | None,
                        threshold: float) -> tuple[list[dict[str, Any]], float]:
        scores, ms = self.infer(tensor)
        return [{"id": i, "label": self.label(i), "score": s} for i, s in top_k(scores, k, threshold)], ms

    def prepared(self, images: list[str],
                 workers: int | None = None) -> Iterator[tuple[str, np.ndarray | None, InputError | None]]:
        """Preprocessed inputs in order, decoded ``workers`` at a time ahead of the consumer."""
        workers = default_workers() if workers is None else workers
        if workers <= 1 or len(images) <= 1:
            for path in images:
                try:
                    yield path, self.prepare(path), None
                except InputError as exc:
                    yield path, None, exc
            return
        from concurrent.futures import ThreadPoolExecutor

        ahead = 2 * workers
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="edgekit-decode") as pool:
            pending: deque = deque()
            feed = iter(images)
            for path in feed:
                pending.append((path, pool.submit(self.prepare, path)))
                if len(pending) >= ahead:
                    break
            while pending:
                path, future = pending.popleft()
                nxt = next(feed, None)
                if nxt is not None:
                    pending.append((nxt, pool.submit(self.prepare, nxt)))
                try:
                    yield path, future.result(), None
                except InputError as exc:
                    yield path, None, exc

    def run(self, images: list[str], k: int | None = 5, threshold: float = float("-inf"), workers: int | None = None,
            on_image: Callable[[str], None] | None = None) -> ClassifyReport:
        """Classify every image; one that cannot be read is reported in ``errors`` and the rest go on."""
        report = ClassifyReport(self.opened.model_path, self.opened.device, self.opened.backend.name)
        for path, tensor, error in self.prepared(images, workers):
            if error is not None:
                report.errors.append({"image": path, "error": str(error)})
            else:
                top, ms = self.classify_tensor(tensor, k, threshold)
                report.results.append(ImageResult(path, round(ms, 3), top))
            if on_image:
                on_image(path)
        report.first_inference_ms = None if self.first_inference_ms is None else round(self.first_inference_ms, 3)
        return report


def default_workers() -> int:
    """Decode threads: one per core, at most 4 (inference runs in the calling thread)."""
    return max(1, min(4, os.cpu_count() or 1))


def classify(images: Iterable[str], model: str | os.PathLike, *, device: str = "auto",
             labels: str | os.PathLike | None = None, k: int | None = 5, threshold: float = float("-inf"),
             mean: tuple[float, ...] | None = None, std: tuple[float, ...] | None = None,
             workers: int | None = None, num_threads: int | None = None,
             on_start: Callable[[int], None] | None = None,
             on_image: Callable[[str], None] | None = None, notes: list[str] | None = None) -> ClassifyReport:
    """Expand ``images`` (files, folders, globs), classify them all, and return the report.

    ``notes`` (when given) receives the one-line messages for the user: where the model runs and
    why, and label-count warnings. ``on_start(n)`` and ``on_image(path)`` drive a progress bar.
    """
    paths, errors = expand_images(images)
    classifier = Classifier(model, device, labels, mean, std, num_threads=num_threads)
    if notes is not None:
        notes.extend(classifier.notes)
    if on_start:
        on_start(len(paths))
    report = classifier.run(paths, k, threshold, workers, on_image)
    report.errors = errors + report.errors
    return report
