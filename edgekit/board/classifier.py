"""Image classification through an opened model: the one classifier for the host and the Dev Board.

Scoring follows pycoral's ``adapters/classify.py``: scores are the first output, flattened and
dequantized (``scale * (q - zero_point)``); :func:`edgekit.board.classes.top_k` keeps the ``k`` best with
``score >= threshold``. Preprocessing is edgekit's one function (:mod:`edgekit.board.preprocess`) with the
spec recorded by ``edgekit quantize`` (or a bundle) when there is one, else the spec derived from
the input's own quantization.

Decoding and resizing run in a small thread pool ahead of inference (Pillow releases the GIL), so
a folder of images keeps the interpreter busy; results still come back in input order.

Shipped to boards (``board_runner.SHIPPED_MODULES``): Python 3.7, numpy, Pillow and the shipped
edgekit modules only. It returns the command's record (:class:`edgekit.results.classify.ClassifyResult`,
shipped too): the board runner prints its document, and the host reads that back into the same type. The
host's ``edgekit.devices.classify`` adds image expansion and models with records around it; the board
runner adds its protocol.
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Tuple, Union

import numpy as np

from edgekit.board.classes import read_labels, top_k
from edgekit.errors import Caution, InputError
from edgekit.results.classify import Class, ClassifyResult, ImageClasses, ImageError

if TYPE_CHECKING:  # for type checkers only: typing.Protocol is Python 3.8, a board runs 3.7
    from typing import Protocol, TypeVar  # novermin

    Prepared = TypeVar("Prepared")
    Prepared_co = TypeVar("Prepared_co", covariant=True)

    class Prepares(Protocol[Prepared_co]):
        """What :meth:`Classifier.prepared` needs of ``self`` (a Classifier's or a Detector's ``prepare``)."""

        def prepare(self, image_path: str) -> Prepared_co: ...


@dataclass
class LoadedModel:
    """An opened model with what was recorded about it (preprocessing, labels) and notes for the user."""

    opened: Any  # backends.OpenedModel
    spec: Any = None  # the recorded PreprocessSpec, None when there is none
    spec_source: Optional[str] = None  # where it was recorded ("model metadata", a sidecar, a bundle)
    labels: Optional[Dict[int, str]] = None  # the recorded labels
    notes: List[str] = field(default_factory=list)
    bundle: Any = None  # manifest.Bundle when the model came from a bundle folder


def load_bundle(
    path: str,
    device: str = "auto",
    backend: Any = None,
    num_threads: Optional[int] = None,
    find_devices: Optional[Callable[[], list]] = None,
) -> LoadedModel:
    """A bundle written by ``edgekit build``: its compiled model unless ``device`` is ``cpu`` (or there is
    none), with its CPU model as the fallback; the sha256 of every file it may load (the model, its CPU
    twin, the labels) is verified before anything is opened."""
    from edgekit.board import manifest
    from edgekit.board.backends import open_model, parse_device

    bundle = manifest.load(path)
    spec = bundle.preprocess
    compiled = bundle.edgetpu_model is not None and parse_device(device).kind != "cpu"
    # compiled already means edgetpu_model is not None; said again so a type checker sees it
    chosen = bundle.edgetpu_model if compiled and bundle.edgetpu_model is not None else bundle.cpu_model
    for rel in dict.fromkeys([chosen, bundle.cpu_model] + ([bundle.labels] if bundle.labels else [])):
        bundle.verified(rel)  # before anything is opened: a changed file is refused, not loaded
    labels = read_labels(bundle.path(bundle.labels)) if bundle.labels else None
    opened = open_model(
        bundle.path(chosen),
        device,
        backend=backend,
        num_threads=num_threads,
        is_compiled=compiled,
        find_devices=find_devices if compiled else None,
        cpu_model=bundle.path(bundle.cpu_model),
    )
    return LoadedModel(opened, spec, f"recorded (bundle {path})", labels, list(opened.notes), bundle)


PASS_THROUGH = ("RESHAPE", "SQUEEZE", "QUANTIZE", "DEQUANTIZE")  # ops that keep what a tensor means


def _ends_in(interpreter: Any, tensor: int) -> Optional[str]:
    """The op that computes ``tensor`` (looking through reshapes and (de)quantization), by the interpreter's op
    list; None where that list is not available (older interpreters, an Edge TPU custom op)."""
    try:
        ops = [o for o in interpreter._get_ops_details() if o["op_name"] != "DELEGATE"]
    except Exception:
        return None
    for _ in range(8):
        producer = next((o for o in ops if tensor in [int(t) for t in o["outputs"]]), None)
        if producer is None:
            return None
        name = str(producer["op_name"])
        if name == "CUSTOM" or "edgetpu" in name.lower():  # compiled: what it computes is hidden
            return None
        if name not in PASS_THROUGH or not len(producer["inputs"]):
            return name
        tensor = int(producer["inputs"][0])
    return None


def default_workers() -> int:
    """Decode threads: one per core, at most 4 (inference runs in the calling thread)."""
    return max(1, min(4, os.cpu_count() or 1))


class Classifier:
    """Images through a loaded model, with its preprocessing and labels: image files in, top-k classes out."""

    def __init__(
        self,
        loaded: LoadedModel,
        labels: Optional[Union[str, os.PathLike]] = None,
        mean: Optional[Tuple[float, ...]] = None,
        std: Optional[Tuple[float, ...]] = None,
        name: Optional[str] = None,
        any_output: bool = False,
    ):
        """``any_output``: open a model whose output is not one score per class (a detector) too; classifying
        with it then raises the InputError that opening it as a classifier would have raised."""
        from edgekit.board import preprocess

        self.loaded = loaded
        self.not_a_classifier = None  # type: Optional[InputError]
        self.opened = opened = loaded.opened
        name = name or opened.requested_path
        self.notes: List[str] = list(loaded.notes)
        inp, out = opened.input, opened.output
        self.input_dtype = np.dtype(inp["dtype"]).name
        self.input_scale, self.input_zero_point = float(inp["quantization"][0]) or None, int(inp["quantization"][1])
        self.num_classes = int(np.prod(out["shape"]))
        out_shape = [int(d) for d in out["shape"]]
        if sum(d > 1 for d in out_shape) > 1:
            self.not_a_classifier = InputError(
                f"{name}: not a classifier: its output has shape {out_shape}, not one score per class",
                "edgekit classify needs an output of shape [1, classes]",
            )
            if not any_output:
                raise self.not_a_classifier
        shape = [int(d) for d in inp["shape"]]
        self._input_shape = tuple(shape)
        signature = [int(d) for d in inp.get("shape_signature", shape)]
        if any(d < 0 for d in signature[1:]):  # the interpreter shows 1 for such a dimension: 1x1 images otherwise
            raise InputError(
                f"{name}: the input size is not fixed (shape signature {signature})",
                "convert the model with a fixed input size (edgekit quantize --input-size WxH); "
                "the Edge TPU needs one too",
            )
        self.image_input = preprocess.image_input(
            shape, str(name), "classify runs image classifiers; other models need their own code"
        )
        height, width, channels = self.image_input.height, self.image_input.width, self.image_input.channels
        self.spec, self.spec_source, warnings = preprocess.spec_for_model(
            loaded.spec,
            loaded.spec_source,
            width,
            height,
            channels,
            self.input_dtype,
            self.input_scale,
            self.input_zero_point,
            mean,
            std,
            name=str(name),
        )
        self.notes += warnings

        if self.not_a_classifier is None and _ends_in(opened.interpreter, int(out["index"])) not in (
            None,
            "SOFTMAX",
            "LOGISTIC",
        ):
            self.notes.append(
                f"{name}: the output is logits (the model ends in "
                f"{_ends_in(opened.interpreter, int(out['index']))}, no softmax): scores are not "
                "probabilities, and --threshold applies to logits"
            )
        if labels is not None:
            self.labels: Dict[int, str] = read_labels(labels)
            recorded = dict(loaded.labels or {})
            differ = [i for i in sorted(set(recorded) | set(self.labels)) if recorded.get(i) != self.labels.get(i)]
            if recorded and differ:  # the file wins, as asked; but a wrong file gives wrong names to every answer
                first = differ[0]
                self.notes.append(
                    Caution(
                        f"--labels {labels} differs from the labels recorded with the model in {len(differ)} of "
                        f"{max(len(recorded), len(self.labels))} classes (class {first}: {self.labels.get(first)!r} here, "
                        f"{recorded.get(first)!r} recorded); using --labels"
                    )
                )
        else:
            self.labels = dict(loaded.labels or {})
        if (
            (self.labels or labels is not None)
            and len(self.labels) != self.num_classes
            and self.not_a_classifier is None
        ):  # an empty file too
            self.notes.append(
                Caution(
                    f"{len(self.labels)} labels but the model has {self.num_classes} classes; "
                    "labels may be shifted (e.g. a missing 'background' line)"
                )
            )

    @property
    def first_inference_ms(self) -> Optional[float]:
        return self.opened.first_inference_ms

    # -- steps ----------------------------------------------------------------------------------
    def prepare(self, image_path: str) -> np.ndarray:
        """Image file → the model's input tensor (InputError for an unreadable or refused image)."""
        from edgekit.board.preprocess import prepare_file

        return prepare_file(
            image_path, self.spec, self.input_dtype, self.input_scale, self.input_zero_point, self.image_input
        )

    def infer(self, tensor: np.ndarray) -> Tuple[np.ndarray, float]:
        """Run one input; the dequantized scores and the invoke time in milliseconds."""
        return self.opened.run(tensor)

    def label(self, class_id: int) -> Optional[str]:
        return self.labels.get(class_id)

    def classify_tensor(
        self, tensor: np.ndarray, k: Optional[int], threshold: float
    ) -> Tuple[Tuple[Class, ...], float]:
        if self.not_a_classifier is not None:
            raise self.not_a_classifier
        scores, ms = self.infer(tensor)
        return tuple(Class(i, s, self.label(i)) for i, s in top_k(scores, k, threshold)), ms

    def prepared(
        self: Prepares[Prepared], images: List[str], workers: Optional[int] = None
    ) -> Iterator[Tuple[str, Optional[Prepared], Optional[InputError]]]:
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

    def run(
        self,
        images: List[str],
        k: Optional[int] = 5,
        threshold: float = float("-inf"),
        workers: Optional[int] = None,
        on_image: Optional[Callable[[str], None]] = None,
    ) -> ClassifyResult:
        """Classify every image; one that cannot be read is reported in ``errors`` and the rest go on."""
        if self.not_a_classifier is not None:
            raise self.not_a_classifier
        results, errors = [], []  # type: List[ImageClasses], List[ImageError]
        for path, tensor, error in self.prepared(images, workers):
            if error is not None:
                errors.append(ImageError(path, str(error)))
            else:
                assert tensor is not None  # prepared yields a tensor whenever it yields no error
                top, ms = self.classify_tensor(tensor, k, threshold)
                results.append(ImageClasses(path, round(ms, 3), top))
            if on_image:
                on_image(path)
        first = self.first_inference_ms
        return ClassifyResult(
            self.opened.model_path,
            self.opened.device,
            self.opened.backend.name,
            None if first is None else round(first, 3),
            tuple(results),
            tuple(errors),
        )
