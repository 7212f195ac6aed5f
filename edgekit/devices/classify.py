"""``edgekit classify`` on the host: images from files, folders and globs through a model or a bundle.

The classifier itself (preprocessing, inference, top-k) is :mod:`edgekit.board.classifier`, which
the Dev Board runs too; this module adds what only the host has: expanding image arguments, and
opening a model file with what was recorded about it (:class:`ModelLoader`: the record in its
metadata or sidecar, the CPU twin of a compiled model, the Edge TPU devices that can be found).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from edgekit.board import classifier
from edgekit.board.backends import EDGETPU_CUSTOM_OP_BYTES, cpu_twin
from edgekit.board.classes import parse_labels, read_labels, top_k  # noqa: F401 (part of this module's API)
from edgekit.board.classifier import LoadedModel, default_workers, load_bundle  # noqa: F401 (this module's API)
from edgekit.board.preprocess import IMAGE_EXTENSIONS  # noqa: F401 (part of this module's API)
from edgekit.data.images import expand_images
from edgekit.errors import Caution, InputError, UsageError, regular_file
from edgekit.report import SILENT, Reporter
from edgekit.results.classify import ClassifyResult, ImageError

if TYPE_CHECKING:  # pragma: no cover
    from pathlib import Path


# ------------------------------------------------------------------------------------- runner
# edgekit.tflite.model's FILE_IDENTIFIER, repeated so that a plain model does not pay for importing
# the reader (a test checks they agree).
_TFLITE_IDENTIFIER = b"TFL3"
# edgekit.tflite.model_record's METADATA_NAME and SIDECAR_SUFFIX, repeated so that a model without a record does not
# pay for importing it (json, its record type: a few ms of a one-image classify; a test checks they agree).
_RECORD_NAME = "edgekit"
_SIDECAR_SUFFIX = ".edgekit.json"


def model_facts(path: str | os.PathLike) -> tuple[bool, dict[str, bytes]]:
    """(is compiled for the Edge TPU, metadata entries) of a model, parsing it only when that can matter.

    A model whose bytes contain neither the Edge TPU custom op's name nor the record's metadata name
    is a plain CPU model without a record: the full parse (a few ms per start, most of it for
    nothing) is skipped. Anything else, including a file that is not a TFLite model, goes through
    :func:`edgekit.tflite.model.load`, which also gives the precise error.
    """
    import mmap

    regular_file(path)
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            plain = (
                data[4:8] == _TFLITE_IDENTIFIER
                and data.find(EDGETPU_CUSTOM_OP_BYTES) < 0
                and data.find(_RECORD_NAME.encode()) < 0
            )
    except (OSError, ValueError):  # missing, unreadable, empty, a folder: let load() say which
        plain = False
    if plain:
        return False, {}
    from edgekit.errors import InvalidModelError
    from edgekit.tflite import model as tflite_model

    try:
        info = tflite_model.load(path)
        return info.is_compiled, info.metadata
    except InvalidModelError as exc:  # its message does not say which file
        generic = not exc.hint or exc.hint == InvalidModelError.DEFAULT_HINT
        raise InputError(
            f"{path}: {exc.message}", "pass a .tflite model with -m/--model" if generic else exc.hint
        ) from None


def find_record(model: str | os.PathLike, metadata: dict[str, bytes]) -> Any:
    """:func:`edgekit.tflite.model_record.find_record`, importing that module only when the model's metadata or a sidecar
    (its own or its CPU twin's) may hold a record: None, for free, for a model without one."""
    if _RECORD_NAME not in metadata and not any(os.path.isfile(p) for p in _sidecars(model)):
        return None
    from edgekit.tflite import model_record

    return model_record.find_record(model, metadata)


def _sidecars(model: str | os.PathLike) -> list[str | Path]:
    """The sidecar records :func:`find_record` looks for: ``p.with_name(p.stem + ".edgekit.json")`` of the model
    and of its CPU twin. A str without ``_edgetpu`` in its name is its own CPU twin, and its sidecar is found
    without pathlib (16M instructions of a one-image classify; the model is a regular file here)."""
    folder, name = os.path.split(model) if isinstance(model, str) else ("", "_edgetpu")
    if "_edgetpu" not in name and name not in ("", "."):
        dot = name.rfind(".")
        return [os.path.join(folder, (name[:dot] if 0 < dot < len(name) - 1 else name) + _SIDECAR_SUFFIX)]
    from pathlib import Path

    return [p.with_name(p.stem + _SIDECAR_SUFFIX) for p in (Path(model), cpu_twin(model))]


class ModelLoader:
    """Opens a model on a device (Polygraphy's loader half): backend, delegate, fallback to the CPU twin.

    ``model`` is a .tflite file or a bundle folder written by ``edgekit build``. From a bundle it
    picks the compiled model unless ``device`` is ``cpu`` (or there is none), and verifies the
    sha256 of every file it may load (the model, its CPU twin, the labels) before opening anything.
    Calling the loader opens the model and returns a :class:`LoadedModel`.
    """

    def __init__(
        self,
        model: str | os.PathLike,
        device: str = "auto",
        backend: Any = None,
        num_threads: int | None = None,
        record_needed: bool = True,
    ):
        self.model, self.device, self.backend, self.num_threads = model, device, backend, num_threads
        # False where nothing the record says is used (benchmark) or all of it is overridden (--mean and
        # --std): a record that cannot be read is then ignored with a warning instead of stopping the run.
        self.record_needed = record_needed

    def __call__(self) -> LoadedModel:
        if not (isinstance(self.model, str) and os.path.isfile(self.model)):  # a bundle, or no model file
            from pathlib import Path

            if Path(self.model).is_dir():
                return self._load_bundle()
            twin = cpu_twin(self.model)
            if not Path(self.model).exists() and twin != Path(self.model) and twin.is_file():
                # the quick start without edgetpu_compiler: step 3 made no compiled model
                raise InputError(
                    f"no such file: {self.model}",
                    f"compile it first (edgekit compile {twin}), or run the CPU model: -m {twin}",
                )
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
            notes.append(Caution(f"ignoring a record that cannot be read: {exc.message}"))
        rec = record[0] if record else None
        return LoadedModel(
            opened,
            rec.preprocess if rec else None,
            f"recorded ({record[1]})" if record else None,
            dict(enumerate(rec.labels)) if rec is not None and rec.labels else None,
            notes,
        )

    def _open(self, path: str | os.PathLike, is_compiled: bool) -> Any:
        from edgekit.board import backends

        find_devices = None
        if is_compiled:
            from edgekit.devices.discovery import list_devices

            find_devices = list_devices
        return backends.open_model(
            path,
            self.device,
            backend=self.backend,
            num_threads=self.num_threads,
            is_compiled=is_compiled,
            find_devices=find_devices,
        )

    def _load_bundle(self) -> LoadedModel:
        from edgekit.devices.discovery import list_devices

        return load_bundle(str(self.model), self.device, self.backend, self.num_threads, list_devices)


class HostClassifier(classifier.Classifier):
    """:class:`edgekit.board.classifier.Classifier` on a model file or bundle that a :class:`ModelLoader` opens."""

    def __init__(
        self,
        model: str | os.PathLike | ModelLoader,
        device: str = "auto",
        labels: str | os.PathLike | None = None,
        mean: tuple[float, ...] | None = None,
        std: tuple[float, ...] | None = None,
        backend: Any = None,
        num_threads: int | None = None,
        any_output: bool = False,
    ):
        """``any_output``: a model that is not a classifier (a detector) opens too (see the base class)."""
        loader = (
            model
            if isinstance(model, ModelLoader)
            else ModelLoader(model, device, backend, num_threads, record_needed=mean is None or std is None)
        )
        self.model, self.labels_file, self.mean, self.std = loader.model, labels, mean, std  # as asked: for detect
        super().__init__(loader(), labels, mean, std, name=str(loader.model), any_output=any_output)


def classify(
    images: Iterable[str],
    model: str | os.PathLike,
    *,
    device: str = "auto",
    labels: str | os.PathLike | None = None,
    k: int | None = 5,
    threshold: float = float("-inf"),
    mean: tuple[float, ...] | None = None,
    std: tuple[float, ...] | None = None,
    workers: int | None = None,
    num_threads: int | None = None,
    report: Reporter = SILENT,
    on: Any = None,
    remote_path: str | None = None,
) -> ClassifyResult:
    """Expand ``images`` (files, folders, globs), classify them all: ``edgekit classify``'s record.

    ``report`` is told where the model runs and why and the label-count warnings (before the work),
    and draws the progress over the images. ``on`` (a :class:`~edgekit.devices.remote.SshTarget`):
    on that board instead, ``model`` being a bundle deployed there first (to ``remote_path``) when it
    differs.
    """
    if on is not None:
        from edgekit.devices import remote

        if labels is not None:
            raise UsageError("--labels cannot be combined with --on", "the labels come from the bundle")
        if num_threads is not None:
            raise UsageError("--threads cannot be combined with --on", "the board's runner picks its threads")
        return remote.classify(
            list(images),
            model,
            on,
            path=remote_path or remote.DEFAULT_PATH,
            device=device,
            k=k,
            threshold=threshold,
            mean=mean,
            std=std,
            report=report,
        )
    paths, errors = expand_images(images)
    classifier = HostClassifier(model, device, labels, mean, std, num_threads=num_threads)
    for note in classifier.notes:
        report.tell(note)
    with report.progress(len(paths), "classifying") as bar:
        result = classifier.run(paths, k, threshold, workers, lambda _path: bar.update(1))
    return dataclasses.replace(result, errors=tuple(ImageError(e["image"], e["error"]) for e in errors) + result.errors)
