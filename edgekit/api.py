"""edgekit's Python API: what the CLI does, callable from a user's own code and tests (docs/python-api.md).

``edgekit.open(...)`` opens a model or bundle on the best device (Polygraphy's load half) and returns
a :class:`Model` that classifies images into small :class:`~edgekit.results.Class` records (like
pycoral's ``classify.get_classes``), times itself, and closes (also as a context manager). The other
entry points take keyword arguments named like the command-line flags, with the same defaults (each read
from the option's one declaration in :mod:`edgekit.flags`: ``_cli(command, keyword)``), and
return the typed, immutable results of :mod:`edgekit.results`, whose ``to_dict()`` is the command's
``--json`` document. Failures raise the :mod:`edgekit.errors` family (``exit_code`` on each; a failed
verification carries its numbers).

The runtime part (``open``, ``classify``, ``benchmark``, ``evaluate`` without a reference, ``check``)
imports no TensorFlow; ``quantize``, ``build`` and ``evaluate(reference=...)`` need it. Notes, warnings
and progress go to ``report`` (an :class:`edgekit.report.Reporter`; default: silent).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Optional, Union

from edgekit.errors import InputError, UsageError
from edgekit.flags import default as _cli
from edgekit.pipeline.options import Floats, PathLike
from edgekit.pipeline.options import floats as _floats
from edgekit.pipeline.options import is_onnx_proto as _is_onnx_proto
from edgekit.pipeline.options import quantize_options as _quantize_options
from edgekit.pipeline.options import size as _size
from edgekit.report import SILENT, Reporter

if TYPE_CHECKING:  # pragma: no cover - each function imports its own result type (a command pays for its own)
    import numpy as np
    import onnx

    from edgekit.results import (
        BenchmarkResult,
        CallTiming,
        CheckResult,
        Class,
        ClassifyResult,
        CompileResult,
        DeployResult,
        DetectionEvaluateResult,
        DetectResult,
        DevicesResult,
        DoctorResult,
        EvaluateResult,
        InspectResult,
        Object,
        QuantizeResult,
        Timing,
        TrainResult,
    )

# build: edgekit.build (a plain function: edgekit.pipeline.build.build_bundle, which imports the converters) takes the
# same keywords.
__all__ = [
    "Model",
    "open",
    "classify",
    "detect",
    "check",
    "compile",
    "evaluate",
    "evaluate_detector",
    "benchmark",
    "quantize",
    "inspect",
    "devices",
    "doctor",
    "deploy",
    "train",
    "cut",
]


# ------------------------------------------------------------------------------------ images
def _image_input(image: Any, channels: str, order: str = "RGB", scale: Optional[float] = None) -> Any:
    """An image given to :meth:`Model.classify` / :meth:`Model.detect` as preprocessing takes it (a file path as
    a str, a PIL image, or a uint8 RGB array), or the EdgekitError naming what was passed: UsageError (exit 2) for no
    image at all, InputError (exit 3) for an array or image that is none edgekit can use. ``channels``: the
    model's (``L`` for a 1-channel model, which alone takes a grayscale HxW or HxWx1 array). ``order``: the
    caller's ``channels=`` keyword, the order of an array's channels (``RGB`` or ``BGR``: an array cannot say it);
    ``scale``: the caller's ``scale=``, what a float array is multiplied by to be 0..255 pixels (a float array
    does not say its range, so one without it is refused).

    The one place that says which images the API takes: widen it here.
    """
    import numpy as np

    order, scale = _frame_keywords(order, scale)
    if isinstance(image, np.ndarray):
        return _image_array(image, channels, order, scale)
    if scale is not None:
        raise UsageError(
            f"scale={scale:g} is for float arrays; {_what(image)} has its pixels in 0..255", "leave scale= out"
        )
    if isinstance(image, (str, bytes, os.PathLike)):
        return os.fsdecode(image)
    from PIL import Image

    if isinstance(image, Image.Image):
        if 0 in image.size:
            raise InputError(
                f"the image is empty ({image.size[0]}x{image.size[1]} pixels)", "pass an image with pixels"
            )
        return image
    several = "; several: model.classify_batch / detect_batch" if isinstance(image, (list, tuple)) else ""
    raise UsageError(
        f"image: expected a file path, a PIL image or an HxWxC uint8 array, got {_what(image)}",
        "pass one image (np.asarray(PIL.Image.open(path).convert('RGB')) is an HxWx3 uint8 array)" + several,
    )


def _frame_keywords(channels: Any, scale: Any) -> tuple[str, Optional[float]]:
    """The ``channels=`` and ``scale=`` keywords of the API's image calls, checked: (``RGB`` or ``BGR``, None or a
    positive finite number), else the UsageError naming the keyword."""
    import math
    import numbers

    if not isinstance(channels, str) or channels.upper() not in ("RGB", "BGR"):
        got = repr(channels) if isinstance(channels, str) else _what(channels)
        raise UsageError(
            f"channels: expected 'RGB' or 'BGR', got {got}",
            "channels='BGR' for OpenCV's frames (cv2.imread, VideoCapture.read), 'RGB' (the default) for "
            "PIL's and most others",
        )
    if scale is not None and (
        isinstance(scale, bool) or not isinstance(scale, numbers.Real) or not math.isfinite(scale) or scale <= 0
    ):
        got = repr(scale) if isinstance(scale, str) else _what(scale)
        raise UsageError(
            f"scale: expected a positive number, got {got}",
            "scale=255 for a float frame in 0..1, scale=1 for one in 0..255",
        )
    return channels.upper(), None if scale is None else float(scale)


def _image_array(a: Any, channels: str, order: str = "RGB", scale: Optional[float] = None) -> Any:
    """An array :func:`_image_input` takes, as an RGB(A) uint8 one: HxWx3 (RGB or, ``order="BGR"``, BGR) or HxWx4
    (RGBA/BGRA) uint8, or float with ``scale`` (``a * scale`` in 0..255, rounded); HxW or HxWx1 (uint8, 16-bit or
    float with ``scale``) for a 1-channel model."""
    import numpy as np

    what = f"a {'x'.join(map(str, a.shape)) or '0-D'} {a.dtype} array"
    gray = a.ndim == 2 or (a.ndim == 3 and a.shape[2] == 1)
    if a.ndim not in (2, 3) or (a.ndim == 3 and a.shape[2] not in (1, 3, 4)):
        raise InputError(
            f"{what} is not one image (HxWx3 RGB, HxWx4 RGBA or, for a 1-channel model, HxW)",
            "pass one image; of a batch of one, a[0]; of several, model.classify_batch / detect_batch",
        )
    if 0 in a.shape:
        raise InputError(f"{what} is an empty image", "pass an image with pixels")
    if a.dtype.kind == "f":
        a = _float_pixels(a, what, scale)
    elif scale is not None:
        raise UsageError(f"scale={scale:g} is for float arrays; {what} has its pixels as they are", "leave scale= out")
    elif a.dtype != np.uint8 and not (gray and a.dtype == np.uint16):
        raise InputError(
            f"{what}: the pixels of an image array must be uint8 (0..255) or float with scale=",
            "convert it to uint8, or pass a float frame with its range: scale=255 (0..1), scale=1 (0..255)",
        )
    if gray and channels != "L":
        raise InputError(
            f"{what} is grayscale; the model takes {channels} images",
            "pass an HxWx3 array; of a gray one, if gray is what you mean: np.dstack([a, a, a])",
        )
    if gray:
        return a.reshape(a.shape[:2])
    return a[..., [2, 1, 0, 3][: a.shape[2]]] if order == "BGR" else a


def _float_pixels(a: Any, what: str, scale: Optional[float]) -> Any:
    """A float image array as uint8 pixels: ``a * scale`` rounded, refused (InputError) without ``scale`` (its
    range would be a guess: a dark 0..255 frame is all within 0..1 too), with NaN, or outside 0..255."""
    import numpy as np

    finite = np.isfinite(a)
    if not finite.all():
        raise InputError(f"{what} holds NaN or infinite values", "pass a frame of finite pixel values")
    lo, hi = float(a.min()), float(a.max())
    if scale is None:
        raise InputError(
            f"{what} (values {lo:g}..{hi:g}): a float frame does not say its range",
            "say it: scale=255 for pixels in 0..1, scale=1 for pixels in 0..255",
        )
    pixels = a.astype(np.float64) * scale
    if lo * scale < -0.5 or hi * scale >= 255.5:
        raise InputError(
            f"{what} times scale={scale:g} spans {lo * scale:g}..{hi * scale:g}, not pixels in 0..255",
            "pass the frame before any normalization (edgekit applies the model's own mean/std), with "
            "the scale that makes it 0..255",
        )
    return np.rint(pixels).astype(np.uint8)


def _what(value: Any) -> str:
    """A value passed where an image or a number was expected, for a message: its type, and a short number."""
    if value is None:
        return "None"
    if isinstance(value, (bool, float)) or (isinstance(value, int) and value.bit_length() < 64):
        return f"{type(value).__name__} {value!r}"
    return f"a {type(value).__name__}"


def _checked(fn: Any) -> Any:
    """``fn`` refusing, as a UsageError naming the keyword, a value its declared type does not take, before it runs:
    where a path is declared (``PathLike``), None (unless Optional) or anything but a str, bytes or os.PathLike (an
    int would be taken for a file descriptor); where paths are (``Iterable[PathLike]``), one path or a list holding
    anything else; where an ``int`` is, a bool or a non-integer (``max_det=True`` would be 1). The declarations are
    read on the first call (``import edgekit`` stays cheap)."""
    import functools

    read: list = []  # [the signature, {keyword: its declared type}], on the first call

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        if not read:
            import inspect as python_inspect

            signature = python_inspect.signature(fn)
            read[:] = [
                signature,
                {
                    name: str(p.annotation)
                    for name, p in signature.parameters.items()
                    if "PathLike" in str(p.annotation) or str(p.annotation) in ("int", "Optional[int]")
                },
            ]
        signature, declared = read
        bound = signature.bind(*args, **kwargs)
        for name, value in bound.arguments.items():
            if name in declared:
                bound.arguments[name] = _argument(name, value, declared[name])
        return fn(*bound.args, **bound.kwargs)

    return call


def _argument(name: str, value: Any, declared: str) -> Any:
    """``value`` of the keyword ``name`` if its declared type (``PathLike``, ``Iterable[PathLike]``, ``int``, each
    maybe ``Optional``) takes it (an iterable of paths made a list), else the UsageError that says so."""
    import numbers

    if value is None and declared.startswith("Optional["):
        return None
    if "ModelProto" in declared and _is_onnx_proto(value):  # quantize's model: a path or an onnx.ModelProto
        return value
    path_kinds = (str, bytes, os.PathLike)
    if declared.endswith("int]") or declared == "int":
        if isinstance(value, numbers.Integral) and not isinstance(value, bool):
            return value
        raise UsageError(f"{name}: expected an integer, got {_what(value)}", f"pass a whole number as {name}=")
    if "Iterable[" not in declared:
        if isinstance(value, path_kinds):
            return value
        raise UsageError(
            f"{name}: expected a path (str or os.PathLike), got {_what(value)}",
            f"pass a file or folder path as {name}=",
        )
    if isinstance(value, path_kinds) or not hasattr(value, "__iter__"):
        raise UsageError(
            f"{name}: expected a list of paths, got {_what(value)}", f"pass a list, even of one path: {name}=[path]"
        )
    values = list(value)
    wrong = [v for v in values if not isinstance(v, path_kinds)]
    if wrong:
        raise UsageError(
            f"{name}: expected a list of paths, one of them is {_what(wrong[0])}", "pass str or os.PathLike paths"
        )
    return values


# ------------------------------------------------------------------------------------ open
class Model:
    """A model opened on a device, with its preprocessing and labels: images in, classes (or objects) out.

    Made by :func:`open`. ``device`` is where it runs (``"cpu"``, ``"usb:0"``...), ``notes`` says why
    (and any warning about its labels or preprocessing). A classifier answers :meth:`classify`, a
    detector :meth:`detect` (the other raises the InputError that says what the model is not); a task
    layer of another kind (segmentation) runs ``input_tensor`` then ``infer`` and decodes ``outputs`` itself.
    """

    def __init__(self, classifier: Any):
        self._clf = classifier
        self._detectors: dict = {}  # layout asked -> the detection task layer over this model (made on first use)
        self._parts = (0.0, 0.0, 0.0)  # the last classify/detect call's preprocessing, invoke and whole-call ms

    # -- what was opened --------------------------------------------------------------------
    @property
    def model_path(self) -> str:
        """The file running (the CPU twin when a compiled model fell back to the CPU)."""
        return self._clf.opened.model_path

    @property
    def device(self) -> str:
        return self._clf.opened.device

    @property
    def backend(self) -> str:
        return self._clf.opened.backend.name

    @property
    def notes(self) -> tuple[str, ...]:
        return tuple(self._clf.notes)

    @property
    def labels(self) -> dict:
        """Class id -> label (recorded with the model, or from ``labels=``); empty when there are none."""
        return dict(self._clf.labels)

    @property
    def preprocess(self) -> Any:
        """The :class:`edgekit.board.preprocess.PreprocessSpec` images go through (size, filter, mean/std, channels)."""
        return self._clf.spec

    @property
    def input_details(self) -> dict:
        return dict(self._clf.opened.input)

    @property
    def output_details(self) -> list:
        """Every output's details (name, shape, dtype, quantization), in the interpreter's order."""
        return list(self._clf.opened._live().get_output_details())

    # -- running ----------------------------------------------------------------------------
    def input_tensor(self, image: Any, channels: str = "RGB", scale: Optional[float] = None) -> np.ndarray:
        """An image file path, a PIL image or an HxWx3 uint8 array (HxW for a 1-channel model) -> the model's input
        tensor; any other value is refused (an EdgekitError naming what was passed). ``channels`` and ``scale``: as
        :meth:`classify`'s.

        An array that already has the input's shape and dtype is taken as the input tensor itself; an image is
        prepared channels-last and transposed where the model takes channels first ([1, 3, H, W]).
        """
        import numpy as np

        from edgekit.board import preprocess

        clf = self._clf
        if isinstance(image, np.ndarray) and image.shape == clf._input_shape and image.dtype == clf.input_dtype:
            return image
        image = _image_input(image, clf.spec.channels, channels, scale)
        if isinstance(image, str):
            return clf.prepare(image)
        tensor = preprocess.prepare(image, clf.spec, clf.input_dtype, clf.input_scale, clf.input_zero_point)
        return clf.image_input.from_hwc(tensor)  # channels-first where the model takes them so

    def infer(self, tensor: np.ndarray) -> tuple[np.ndarray, ...]:
        """Run one input tensor; every output, dequantized (float32), in the interpreter's order."""
        from edgekit.board.preprocess import dequantize

        opened = self._clf.opened
        interp = opened._live()
        interp.set_tensor(opened.input["index"], tensor)
        opened.invoke()
        return tuple(
            dequantize(interp.get_tensor(d["index"]), float(d["quantization"][0]) or None, int(d["quantization"][1]))
            for d in interp.get_output_details()
        )

    @property
    def outputs(self) -> tuple[np.ndarray, ...]:
        """The outputs of the last run, dequantized (what a task layer such as detection decodes)."""
        from edgekit.board.preprocess import dequantize

        interp = self._clf.opened._live()
        return tuple(
            dequantize(interp.get_tensor(d["index"]), float(d["quantization"][0]) or None, int(d["quantization"][1]))
            for d in interp.get_output_details()
        )

    @_checked
    def classify(
        self,
        image: Any,
        top_k: Optional[int] = _cli("classify", "top_k"),
        threshold: float = _cli("classify", "threshold"),
        *,
        channels: str = "RGB",
        scale: Optional[float] = None,
    ) -> list[Class]:
        """The ``top_k`` best classes with ``score >= threshold``, best first, as :class:`Class` records.

        ``image``: a file path, a PIL image or an HxWx3 array. An array cannot say the order of its channels:
        ``channels`` is it, ``"RGB"`` by default (PIL's); ``"BGR"`` for OpenCV's frames. A float array cannot say its
        range: ``scale`` is what it is multiplied by to be 0..255 pixels (``255`` for 0..1, ``1`` for 0..255); a float
        array without it is refused.
        """
        return self._call("classify", image, channels, scale, {"top_k": top_k, "threshold": threshold})

    @_checked
    def detect(
        self,
        image: Any,
        conf: float = _cli("detect", "conf"),
        iou: float = _cli("detect", "iou"),
        max_det: int = _cli("detect", "max_det"),
        layout: Optional[str] = None,
        *,
        channels: str = "RGB",
        scale: Optional[float] = None,
    ) -> list[Object]:
        """The objects in one image, best first, as :class:`~edgekit.results.detect.Object` records (``id``, ``score``,
        ``label``, ``bbox`` in the image's own pixels), like pycoral's ``detect.get_objects``.

        ``image``: a file path, a PIL image or an HxWx3 uint8 array (HxW for a 1-channel model; any other value is an
        EdgekitError naming what was passed); ``channels`` (``"RGB"`` by default, ``"BGR"`` for OpenCV's frames) and
        ``scale`` (a float array's) as :meth:`classify`'s. ``conf``, ``iou`` and ``max_det`` are
        ``edgekit detect``'s (same defaults); ``layout`` names the output layout where the model's is ambiguous
        (``yolo``, ``postprocess``...). The layout is read from the model once, on the first call.
        """
        from edgekit.devices.detect import check_thresholds

        check_thresholds(conf, iou, max_det)
        return self._call(
            "detect", image, channels, scale, {"conf": conf, "iou": iou, "max_det": max_det, "layout": layout}
        )

    def _call(self, task: str, image: Any, channels: str, scale: Optional[float], options: dict) -> list:
        """One classify or detect call's records; its preprocessing, invoke and whole-call ms kept in ``_parts``."""
        import time as clock

        start = clock.perf_counter()
        if task == "classify":
            tensor = self.input_tensor(image, channels, scale)
            ready = clock.perf_counter()
            top, invoke_ms = self._clf.classify_tensor(tensor, options["top_k"], options["threshold"])
            found: list = list(top)
        else:
            image = _image_input(image, self._clf.spec.channels, channels, scale)
            detector = self._detector(options["layout"])
            if isinstance(image, str):
                tensor, geometry = detector.prepare(image)
            else:
                from PIL import Image

                tensor, geometry = detector.prepare_image(
                    image if isinstance(image, Image.Image) else Image.fromarray(image)
                )
            ready = clock.perf_counter()
            found, invoke_ms, _post_ms, _notes = detector.detect_tensor(
                tensor, geometry, options["conf"], options["iou"], options["max_det"]
            )
        self._parts = ((ready - start) * 1000.0, invoke_ms, (clock.perf_counter() - start) * 1000.0)
        return found

    @_checked
    def classify_batch(
        self,
        frames: Iterable[Any],
        top_k: Optional[int] = _cli("classify", "top_k"),
        threshold: float = _cli("classify", "threshold"),
        *,
        channels: str = "RGB",
        scale: Optional[float] = None,
    ) -> list[list[Class]]:
        """:meth:`classify` on each of ``frames`` (a list or iterable of images, or an NxHxWx3 array): one list of
        classes per frame, in order. Every frame is checked before any runs; an error names the frame's index."""
        frames = self._frames(frames, channels, scale)
        return [self._at(i, self.classify, frame, top_k, threshold) for i, frame in enumerate(frames)]

    @_checked
    def detect_batch(
        self,
        frames: Iterable[Any],
        conf: float = _cli("detect", "conf"),
        iou: float = _cli("detect", "iou"),
        max_det: int = _cli("detect", "max_det"),
        layout: Optional[str] = None,
        *,
        channels: str = "RGB",
        scale: Optional[float] = None,
    ) -> list[list[Object]]:
        """:meth:`detect` on each of ``frames`` (a list or iterable of images, or an NxHxWx3 array): one list of
        objects per frame, in order. Every frame is checked before any runs; an error names the frame's index."""
        from edgekit.devices.detect import check_thresholds

        check_thresholds(conf, iou, max_det)
        frames = self._frames(frames, channels, scale)
        return [self._at(i, self.detect, frame, conf, iou, max_det, layout) for i, frame in enumerate(frames)]

    def _frames(self, frames: Any, channels: str, scale: Optional[float]) -> list:
        """The frames of a batch call, each checked and made what preprocessing takes (uint8 RGB arrays, paths, PIL
        images), or the EdgekitError naming the first frame that is not one (``frame 3: ...``)."""
        import numpy as np

        _frame_keywords(channels, scale)
        one = isinstance(frames, (str, bytes, os.PathLike)) or (isinstance(frames, np.ndarray) and frames.ndim != 4)
        if one or not hasattr(frames, "__iter__") or type(frames).__module__.startswith("PIL"):
            got = f"a {'x'.join(map(str, frames.shape))} array" if isinstance(frames, np.ndarray) else _what(frames)
            raise UsageError(
                f"frames: expected a list of images or an NxHxWxC array, got {got}",
                "pass a list, even of one frame: [frame]; one frame goes to classify / detect",
            )
        return [
            self._at(i, _image_input, frame, self._clf.spec.channels, channels, scale) for i, frame in enumerate(frames)
        ]

    @staticmethod
    def _at(index: int, call: Any, *args: Any) -> Any:
        """``call(*args)``, an EdgekitError it raises naming the frame ``index`` of a batch."""
        from edgekit.errors import EdgekitError

        try:
            return call(*args)
        except EdgekitError as err:
            err.message = f"frame {index}: {err.message}"
            err.args = (err.message,)
            raise

    def _detector(self, layout: Optional[str]) -> Any:
        """The detection task layer over this open model (one per ``layout`` asked, made on first use)."""
        if layout not in self._detectors:
            from edgekit.devices.detect import detector_for

            clf = self._clf
            self._detectors[layout] = detector_for(
                clf.loaded, clf.model, labels=clf.labels_file, layout=layout, mean=clf.mean, std=clf.std
            )
        return self._detectors[layout]

    @_checked
    def classify_files(
        self,
        images: Iterable[PathLike],
        top_k: Optional[int] = _cli("classify", "top_k"),
        threshold: float = _cli("classify", "threshold"),
        workers: Optional[int] = None,
    ) -> ClassifyResult:
        """Many image files, decoded ahead of inference; unreadable ones go to ``errors`` (classify's document)."""
        return self._clf.run([os.fsdecode(p) for p in images], top_k, threshold, workers)

    @_checked
    def time(
        self,
        n: int = _cli("benchmark", "n"),
        warmup: int = _cli("benchmark", "warmup"),
        image: Any = None,
        *,
        channels: str = "RGB",
        scale: Optional[float] = None,
        **options: Any,
    ) -> Union[Timing, CallTiming]:
        """Timed on this open model: the first run apart, then ``warmup`` untimed runs, then ``n`` timed ones.

        Given ``image``, the whole call a user makes on it, :meth:`classify` for a classifier, :meth:`detect` for a
        detector (``options``: that call's keywords, such as ``conf=``; ``channels``, ``scale`` as its), as a
        :class:`~edgekit.results.CallTiming`: ``preprocess`` (decoding a file, pixel order and range, resizing,
        quantizing the input), ``invoke`` (the interpreter's invoke alone), ``postprocess`` (the rest: setting the
        input, reading and dequantizing the outputs, top-k or the box decode and NMS) and ``total`` (all of it;
        each run's parts add up to it). Without ``image``: ``invoke`` alone on a fixed random input, a
        :class:`~edgekit.results.Timing` (``p50_ms``, ``throughput_per_s``...).
        """
        from edgekit.results import Timing

        if image is None:
            if options or channels != "RGB" or scale is not None:
                raise UsageError(
                    f"{', '.join(sorted(options)) or 'channels, scale'}: keywords of the timed call, "
                    "but no image= to call it on",
                    "pass image=, or leave them out to time invoke alone",
                )
            return Timing.from_dict(self._clf.opened.time(n, warmup))
        if n < 1 or warmup < 0:
            raise UsageError(
                f"n={n}, warmup={warmup}: time needs n >= 1 and warmup >= 0",
                f"pass n={_cli('benchmark', 'n')}, warmup={_cli('benchmark', 'warmup')}",
            )
        return self._time_call(n, warmup, image, channels, scale, options)

    def _time_call(
        self, n: int, warmup: int, image: Any, channels: str, scale: Optional[float], options: dict
    ) -> CallTiming:
        """:meth:`time` given an image: the public call run ``1 + warmup + n`` times, each run's parts read back."""
        import inspect as python_inspect

        from edgekit.board.latency import summarize
        from edgekit.results import CallTiming, Timing

        task = "classify" if self._clf.not_a_classifier is None else "detect"
        call = self.classify if task == "classify" else self.detect
        known = [k for k in python_inspect.signature(call).parameters if k not in ("image", "channels", "scale")]
        unknown = sorted(set(options) - set(known))
        if unknown:
            kind = "classifier" if task == "classify" else "detector"
            raise UsageError(
                f"{', '.join(unknown)}: not a keyword of {task} (this model is a {kind})",
                f"{task} takes {', '.join(known)}",
            )
        runs = []
        for _ in range(1 + warmup + n):
            call(image, channels=channels, scale=scale, **options)
            runs.append(self._parts)
        pre, invoke, total = ([run[k] for run in runs] for k in range(3))

        def timing(values: list) -> Timing:
            timed = values[1 + warmup :]
            return Timing.from_dict({"first_ms": values[0], "latencies_ms": timed, **summarize(timed)})

        return CallTiming(
            task, timing(pre), timing(invoke), timing([t - p - i for p, i, t in zip(pre, invoke, total)]), timing(total)
        )

    def close(self) -> None:
        """Free the interpreter and its Edge TPU delegate (the device is free for another process)."""
        self._clf.opened.close()

    def __enter__(self) -> Model:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<edgekit.Model {self.model_path} on {self.device} ({self.backend})>"


@_checked
def open(
    model: PathLike,
    *,
    device: str = _cli("classify", "device"),
    labels: Optional[PathLike] = None,
    mean: Floats = None,
    std: Floats = None,
    threads: Optional[int] = None,
    report: Reporter = SILENT,
) -> Model:
    """Open a .tflite model (``*_edgetpu.tflite``: on the Edge TPU, else its CPU twin) or a bundle folder.

    ``device``: ``auto``, ``cpu``, ``usb``, ``usb:N``, ``pci``, ``pci:N`` or ``:N``. ``labels``,
    ``mean`` and ``std`` override what was recorded with the model. Where it runs and why, and any
    warning, go to ``report`` and stay in ``Model.notes``.
    """
    from edgekit.devices.classify import HostClassifier

    clf = HostClassifier(
        model, device, labels, _floats(mean, "mean"), _floats(std, "std"), num_threads=threads, any_output=True
    )
    for note in clf.notes:
        report.tell(note)
    return Model(clf)


@_checked
def classify(
    images: Iterable[PathLike],
    *,
    model: PathLike,
    labels: Optional[PathLike] = None,
    top_k: Optional[int] = _cli("classify", "top_k"),
    threshold: float = _cli("classify", "threshold"),
    device: str = _cli("classify", "device"),
    mean: Floats = None,
    std: Floats = None,
    threads: Optional[int] = None,
    on: Any = None,
    remote_path: Optional[str] = None,
    report: Reporter = SILENT,
) -> ClassifyResult:
    """``edgekit classify``: image files, folders and globs through a model; unreadable images in ``errors``;
    ``top_k=None``: every class.

    ``on``: an :class:`edgekit.devices.remote.SshTarget` (a board over SSH; ``model`` a bundle).
    """
    import math

    from edgekit.devices import classify as classify_mod
    from edgekit.errors import UsageError

    if math.isnan(threshold):
        raise UsageError("-t/--threshold nan keeps no score", "pass a number such as -t 0.1, or leave -t out")
    with _for_board(model, on, report, labels) as (model, labels):
        return classify_mod.classify(
            [os.fsdecode(i) for i in images],
            model,
            device=device,
            labels=labels,
            k=top_k,
            threshold=threshold,
            mean=_floats(mean, "mean"),
            std=_floats(std, "std"),
            num_threads=threads,
            report=report,
            on=on,
            remote_path=remote_path,
        )


@_checked
def detect(
    images: Iterable[PathLike],
    *,
    model: PathLike,
    labels: Optional[PathLike] = None,
    conf: float = _cli("detect", "conf"),
    iou: float = _cli("detect", "iou"),
    max_det: int = _cli("detect", "max_det"),
    layout: Optional[str] = None,
    save: Optional[PathLike] = None,
    device: str = _cli("detect", "device"),
    mean: Floats = None,
    std: Floats = None,
    threads: Optional[int] = None,
    on: Any = None,
    remote_path: Optional[str] = None,
    report: Reporter = SILENT,
) -> DetectResult:
    """``edgekit detect``: objects in image files, folders and globs (boxes in each image's pixels, after
    class-wise NMS); unreadable images in ``errors``. ``layout`` (``postprocess``, ``yolo``, ``yolov5``,
    ``split-dfl``, ``end2end``) settles a model whose outputs fit several; ``save``: a folder for the images
    with their boxes drawn. ``on``: an :class:`edgekit.devices.remote.SshTarget` (``model`` a bundle).
    """
    from edgekit.devices import detect as detect_mod

    with _for_board(model, on, report, labels, layout) as (model, labels):
        return detect_mod.detect(
            [os.fsdecode(i) for i in images],
            model,
            device=device,
            labels=labels,
            conf=conf,
            iou=iou,
            max_det=max_det,
            layout=layout,
            save=save,
            mean=_floats(mean, "mean"),
            std=_floats(std, "std"),
            num_threads=threads,
            report=report,
            on=on,
            remote_path=remote_path,
        )


@contextlib.contextmanager
def _for_board(
    model: PathLike, on: Any, report: Reporter, labels: Optional[PathLike] = None, layout: Optional[str] = None
) -> Iterator[tuple]:
    """(model, labels) as a board run takes them: with ``on``, a .tflite is bundled on the fly in a temporary
    folder with its labels (:func:`edgekit.pipeline.build.board_bundle`, said in a note); a bundle, or a run here, as given."""
    if on is None or os.path.isdir(model) or not os.fsdecode(model).lower().endswith(".tflite"):
        yield model, labels
        return
    from edgekit.pipeline.build import board_bundle

    with board_bundle(model, report, labels, layout) as bundle:
        yield bundle, None


# ------------------------------------------------------------------------------------ check / compile
@_checked
def check(
    model: PathLike,
    *,
    min_runtime: int = _cli("check", "min_runtime"),
    allow_multiple_subgraphs: bool = False,
    strict: bool = False,
) -> CheckResult:
    """``edgekit check``: which ops edgetpu_compiler 16 maps to the Edge TPU, predicted offline (no TensorFlow).

    ``strict``: raise :class:`~edgekit.errors.CompatibilityError` (exit 7) when an op is certain to stay
    on the CPU or the compiler would certainly refuse the model (an op an uncertain rule places does not).
    """

    from edgekit.edgetpu import compatibility
    from edgekit.tflite import model as tflite_model

    result = compatibility.check_model(tflite_model.load(model), min_runtime, allow_multiple_subgraphs)
    failure = result.strict_error() if strict else None
    if failure:
        raise failure
    return result


@_checked
def compile(
    model: PathLike,
    *,
    output_dir: Optional[PathLike] = None,
    min_runtime: Optional[int] = None,
    segments: Optional[int] = None,
    search_delegate: bool = False,
    allow_multiple_subgraphs: bool = False,
    timeout: float = _cli("compile", "timeout"),
    via: Optional[str] = None,
    identity: Optional[PathLike] = None,
    known_hosts: Optional[PathLike] = None,
    accept_new_host_key: bool = False,
    connect_timeout: float = _cli("compile", "connect_timeout"),
    report: Reporter = SILENT,
) -> CompileResult:
    """``edgekit compile``: run edgetpu_compiler (x86-64 Linux) and parse what it said.

    ``allow_multiple_subgraphs``: the compiler's ``-a`` (compiler 16), and check's prediction compared with it.
    ``via``: compile with the compiler of another machine, ``ssh://USER@HOST[:PORT]`` (with ``identity``,
    ``known_hosts``, ``accept_new_host_key``, ``connect_timeout`` as for deploy), or ``docker`` / ``podman``
    (edgekit's linux/amd64 compiler image); the result is the same as a local compile's.

    Raises :class:`~edgekit.errors.MissingDependencyError` (exit 4) where there is no compiler, with the
    offline prediction as ``.check`` (a :class:`CheckResult`); :class:`~edgekit.errors.CompilerError`
    (exit 8) when it fails, with what it said as ``.report``; with ``via`` ssh,
    :class:`~edgekit.errors.DeviceError` (exit 9) when the host cannot be reached or its host key is unknown.
    """

    from edgekit.edgetpu import compatibility, compile_via
    from edgekit.edgetpu import compiler as etc
    from edgekit.errors import MissingDependencyError
    from edgekit.tflite import model as tflite_model

    info = tflite_model.load(model)
    prediction = compatibility.check_model(
        info, min_runtime or compatibility.COMPILER_DEFAULT_MIN_RUNTIME, allow_multiple_subgraphs
    )
    there = compile_via.elsewhere(via, identity, known_hosts, accept_new_host_key, connect_timeout, report)
    try:
        compiled = etc.compile_model(
            model,
            output_dir,
            min_runtime=min_runtime,
            segments=segments,
            search_delegate=search_delegate,
            timeout=timeout,
            report=report,
            multiple_subgraphs=allow_multiple_subgraphs,
            compiler=there.compiler if there else None,
            runner=there.runner if there else etc.run_subprocess,
        )
    except MissingDependencyError as err:  # no compiler here: the error carries the offline prediction
        raise MissingDependencyError(err.message, err.hint, check=prediction) from err
    return dataclasses.replace(
        compiled, check_disagreements=tuple(etc.check_disagreements(info, prediction, compiled, segments))
    )


# ------------------------------------------------------------------------------------ evaluate / benchmark
@_checked
def evaluate(
    model: PathLike,
    data: PathLike,
    *,
    reference: Optional[PathLike] = None,
    no_layers: bool = False,
    labels: Optional[PathLike] = None,
    arch: Optional[str] = None,
    custom_objects: Optional[PathLike] = None,
    trust_model: bool = False,
    device: str = _cli("evaluate", "device"),
    mean: Floats = None,
    std: Floats = None,
    threads: Optional[int] = None,
    verbose: bool = False,
    images: Optional[PathLike] = None,
    against: Optional[Iterable[PathLike]] = None,
    max_drop: Optional[float] = None,
    plots: Optional[PathLike] = None,
    conf: Optional[float] = None,
    iou: Optional[float] = None,
    max_det: Optional[int] = None,
    layout: Optional[str] = None,
    try_cut: bool = False,
    report: Reporter = SILENT,
) -> Union[EvaluateResult, DetectionEvaluateResult]:
    """``edgekit evaluate``: top-1/top-5 accuracy on labelled data (class folders or an .npz with x and y).

    ``reference``: the float Keras model to compare with (needs TensorFlow). Samples that cannot be
    read are in ``errors``; the rest are scored. ``against``: other .tflite models (the float one...) run on
    the same samples, with the paired change of top-1 (Tango's score interval, exact McNemar test);
    ``max_drop`` (points): a drop beyond it for sure raises :class:`~edgekit.errors.VerificationError` (exit 6,
    the result in its ``result``), an uncertain one is a warning.

    ``plots``: a folder for the confusion-matrix PNG (needs matplotlib), each ``against`` model beside ``model``.

    A detector's COCO mAP is :func:`evaluate_detector`'s. Given detection data (a COCO .json or a YOLO folder),
    ``evaluate`` still scores it as :func:`evaluate_detector` does (``images``, ``conf``, ``iou``, ``max_det``,
    ``layout`` and ``try_cut`` are its keywords) with a DeprecationWarning: deprecated, to be removed in the next
    release.
    """
    from edgekit.detection.data import is_detection_data
    from edgekit.errors import UsageError

    against = _against(against, max_drop)
    if is_detection_data(data):
        if reference:
            raise UsageError(
                "--reference compares classifiers", "for a detector, pass the float .tflite with --against"
            )
        import warnings

        warnings.warn(
            "edgekit.evaluate() on detection data is deprecated and will be removed in the next release: "
            "call edgekit.evaluate_detector(model, data, ...)",
            DeprecationWarning,
            stacklevel=3,
        )
        return evaluate_detector(
            model,
            data,
            images=images,
            against=against,
            max_drop=max_drop,
            conf=conf,
            iou=iou,
            max_det=max_det,
            layout=layout,
            try_cut=try_cut,
            plots=plots,
            device=device,
            mean=mean,
            std=std,
            threads=threads,
            labels=labels,
            report=report,
        )
    detection_only = {
        "--images": images,
        "--conf": conf,
        "--iou": iou,
        "--max-det": max_det,
        "--layout": layout,
        "--try-cut": try_cut or None,
    }
    given = [flag for flag, value in detection_only.items() if value is not None]
    if given:
        raise UsageError(
            f"{', '.join(given)} apply to detectors only",
            "pass detection data with --data: a COCO .json or a YOLO folder (images/ + labels/)",
        )
    from edgekit.devices import evaluate as evaluate_mod

    plots = None if plots is None else _plots_ready(os.fsdecode(plots), report)
    labelled = evaluate_mod.read_set(data)
    ev = evaluate_mod.evaluate(
        model,
        labelled,
        device,
        _floats(mean, "mean"),
        _floats(std, "std"),
        num_threads=threads,
        labels=labels,
        report=report,
    )
    compared, others = evaluate_mod.compare_against(
        ev, labelled, against, device, _floats(mean, "mean"), _floats(std, "std"), threads, labels, max_drop, report
    )
    compared_with = None
    if reference:
        from edgekit.converters import reference as reference_mod

        compared_with = reference_mod.compare(
            ev,
            labelled,
            os.fsdecode(reference),
            arch,
            None if custom_objects is None else os.fsdecode(custom_objects),
            trust_model,
            layers=not no_layers,
            verbose=verbose,
        )
    written = () if plots is None else tuple(_plots_module().write_classifier_plots(plots, [ev] + others))
    return _drop_gate(ev.result(compared_with, compared, written), report)


@_checked
def evaluate_detector(
    model: PathLike,
    data: PathLike,
    *,
    images: Optional[PathLike] = None,
    against: Optional[Iterable[PathLike]] = None,
    max_drop: Optional[float] = None,
    conf: Optional[float] = None,
    iou: Optional[float] = None,
    max_det: Optional[int] = None,
    layout: Optional[str] = None,
    try_cut: bool = False,
    plots: Optional[PathLike] = None,
    device: str = _cli("evaluate", "device"),
    mean: Floats = None,
    std: Floats = None,
    threads: Optional[int] = None,
    labels: Optional[PathLike] = None,
    report: Reporter = SILENT,
) -> DetectionEvaluateResult:
    """``edgekit evaluate`` given detection data (a COCO .json, a YOLO data.yaml or folder: images/ + labels/): a
    detector's COCO mAP scored by pycocotools (a :class:`~edgekit.results.DetectionEvaluateResult`).

    ``images``: a COCO file's image folder. ``against``: other .tflite models (the float one...) run on the same
    images, with the paired change of mAP50 and mAP50-95, each decided against ``max_drop`` (points): a drop beyond
    it for sure raises :class:`~edgekit.errors.VerificationError` (exit 6, the result in its ``result``).
    ``conf``, ``iou``, ``max_det``: default COCO's protocol; ``layout``: the output layout, where the model does not
    say it. ``plots``: a folder for the confusion matrix and precision-recall curves (needs matplotlib). A YOLO
    detector whose decode runs inside it is offered ``edgekit cut`` (``cut`` in the result); ``try_cut``: cut it in
    memory and score it on the same data too.
    """
    from edgekit.detection.data import is_detection_data
    from edgekit.devices import evaluate_detector as detection_eval

    against = _against(against, max_drop)
    if not is_detection_data(data):
        raise UsageError(
            f"{os.fsdecode(data)}: not detection data (a COCO .json, or a YOLO data.yaml or folder with "
            "images/ and labels/)",
            "a classifier's labelled data goes to edgekit.evaluate",
        )
    return _drop_gate(
        detection_eval.evaluate_detector(
            model,
            data,
            images=images,
            against=against,
            conf=detection_eval.STANDARD_CONF if conf is None else conf,
            iou=detection_eval.DEFAULT_EVAL_IOU if iou is None else iou,
            max_det=detection_eval.STANDARD_MAX_DET if max_det is None else max_det,
            layout=layout,
            device=device,
            mean=_floats(mean, "mean"),
            std=_floats(std, "std"),
            num_threads=threads,
            labels=None if labels is None else os.fsdecode(labels),
            max_drop=max_drop,
            plots=None if plots is None else os.fsdecode(plots),
            try_cut=try_cut,
            report=report,
        ),
        report,
    )


def _against(against: Optional[Iterable[PathLike]], max_drop: Optional[float]) -> tuple[str, ...]:
    """evaluate's ``against`` models as paths, refused (UsageError) where ``max_drop`` has none to compare with."""
    against = tuple(os.fsdecode(a) for a in against or ())
    if max_drop is not None and not against:
        raise UsageError("--max-drop needs --against", "name the model to compare with, e.g. --against float.tflite")
    return against


def _plots_module() -> Any:
    from edgekit.devices import plots

    return plots


def _plots_ready(folder: str, report: Reporter) -> str:
    """--plots checked before any model runs: matplotlib there (exit 4 otherwise), the folder writable."""
    from edgekit.fileio import require_output_folder

    _plots_module().require()
    require_output_folder(os.path.join(folder, "confusion_matrix.png"), report, "--plots")
    return folder


def _drop_gate(result: Any, report: Reporter) -> Any:
    """evaluate's ``--max-drop`` verdicts: the first drop that failed for sure raises VerificationError (exit 6,
    with the result and the numbers); an uncertain one is a warning when its estimate is beyond the limit, else a
    note, each saying how many samples would settle it."""
    from edgekit.errors import VerificationError

    failed = None
    for measure, model, verdict in _verdicts(result):
        if verdict.verdict == "failed" and failed is None:
            failed = (measure, model, verdict)
        elif verdict.verdict == "uncertain":
            settle = (
                f"about {verdict.settle_at} samples in all would likely settle it"
                if verdict.settle_at
                else "no sample size would settle it"
            )
            line = (
                f"cannot tell yet whether the {measure} drop against {model} ({100 * verdict.estimate:+.1f} "
                f"points, 95% interval {100 * verdict.interval[0]:+.1f} to {100 * verdict.interval[1]:+.1f}) "
                f"is within --max-drop {100 * verdict.threshold:g}: {settle}"
            )
            (report.warn if verdict.estimate > verdict.threshold else report.note)(line)
    if failed is None:
        return result
    measure, model, v = failed
    raise VerificationError(
        f"{measure} drops {100 * v.estimate:.1f} points against {model} (95% interval "
        f"{100 * v.interval[0]:+.1f} to {100 * v.interval[1]:+.1f}), more than --max-drop "
        f"{100 * v.threshold:g}",
        "the drop is beyond doubt on these samples",
        measure={"mAP50": "map50_drop", "mAP50-95": "map_drop", "top-1": "accuracy_drop"}[measure],
        value=v.estimate,
        limit=100 * v.threshold,
        interval=v.interval,
        result=result,
    )


def _verdicts(result: Any) -> list:
    """(measure, against model, Decision) of each drop decided against --max-drop in an evaluate result."""
    out = []
    for d in getattr(result, "differences", ()) or getattr(result, "against", ()):
        for measure, verdict in (
            ("mAP50", getattr(d, "map50_verdict", None)),
            ("mAP50-95", getattr(d, "map_verdict", None)),
            ("top-1", getattr(d, "verdict", None)),
        ):
            if verdict is not None:
                out.append((measure, d.against, verdict))
    return out


@_checked
def benchmark(
    model: PathLike,
    *,
    device: str = _cli("benchmark", "device"),
    n: int = _cli("benchmark", "n"),
    warmup: int = _cli("benchmark", "warmup"),
    threads: Optional[int] = None,
    compare: Optional[PathLike] = None,
    max_slowdown: float = _cli("benchmark", "max_slowdown"),
    on: Any = None,
    remote_path: Optional[str] = None,
    report: Reporter = SILENT,
) -> BenchmarkResult:
    """``edgekit benchmark``: load time, first inference, latency percentiles and throughput.

    ``compare``: a document saved from an earlier run (``edgekit benchmark --save``, or
    ``json.dump(result.to_dict(), f)``): :class:`~edgekit.errors.RegressionError` (exit 10, the result
    as ``.result``) when p50 grew by more than ``max_slowdown`` percent beyond doubt.
    """
    from edgekit.devices import benchmark as benchmark_mod

    saved = benchmark_mod.read_saved(compare) if compare else None
    with _for_board(model, on, report) as (model, _labels):
        result = benchmark_mod.benchmark(
            model, device, n, warmup, threads, report=report, on=on, remote_path=remote_path
        )
    if saved is not None and compare:  # saved is read only from compare
        result, warnings, notes = benchmark_mod.compare_to_saved(result, saved, os.fsdecode(compare), max_slowdown)
        for warning in warnings:
            report.warn(warning)
        for note in notes:
            report.note(note)
    regression = benchmark_mod.regression_error(result, os.fsdecode(compare) if compare else None)
    if regression is not None:
        raise regression
    return result


# ------------------------------------------------------------------------------------ quantize / build
@_checked
def quantize(
    model: Union[PathLike, onnx.ModelProto],
    *,
    output: Optional[PathLike] = None,
    calib: Optional[str] = None,
    samples: int = _cli("quantize", "samples"),
    holdout: int = _cli("quantize", "holdout"),
    seed: int = _cli("quantize", "seed"),
    tfrecord_key: str = _cli("quantize", "tfrecord_key"),
    arch: Optional[str] = None,
    custom_objects: Optional[PathLike] = None,
    trust_model: bool = False,
    output_name: Optional[str] = None,
    scaling: Optional[str] = None,
    mean: Floats = None,
    std: Floats = None,
    resize: Optional[str] = None,
    channels: Optional[str] = None,
    input_size: Union[str, tuple[int, int], None] = None,
    io: str = _cli("quantize", "io"),
    labels: Optional[PathLike] = None,
    eval: Optional[PathLike] = None,
    min_agreement: float = _cli("quantize", "min_agreement"),
    max_accuracy_drop: float = _cli("quantize", "max_accuracy_drop"),
    strict: bool = False,
    no_verify: bool = False,
    layout: Optional[str] = None,
    verbose: bool = False,
    show_progress: bool = False,
    report: Reporter = SILENT,
) -> QuantizeResult:
    """``edgekit quantize``: a Keras or ONNX model (a path, or an ``onnx.ModelProto`` with ``output``) to a
    verified full-int8 .tflite (needs TensorFlow; ONNX needs the ``onnx`` extra).

    A failed verification raises :class:`~edgekit.errors.VerificationError` (exit 6) with ``.measure``,
    ``.value``, ``.limit`` and ``.interval``, and the kept output described by ``.result`` (a
    :class:`QuantizeResult`). ``strict``: an uncertain verdict whose estimate is past its limit fails too
    (``--strict``; by default it passes with a warning).
    """
    from edgekit.converters.quantize import quantize as run_quantize
    from edgekit.pipeline.options import model_file

    with model_file(model) as (path, shown):  # an onnx.ModelProto: a temporary .onnx, named as the ModelProto
        return run_quantize(
            _quantize_options(
                path,
                shown,
                output,
                mean,
                std,
                input_size,
                calib=calib,
                samples=samples,
                holdout=holdout,
                seed=seed,
                tfrecord_key=tfrecord_key,
                arch=arch,
                custom_objects=custom_objects,
                trust_model=trust_model,
                output_name=output_name,
                scaling=scaling,
                resize=resize,
                channels=channels,
                io=io,
                labels=labels,
                eval=eval,
                min_agreement=min_agreement,
                max_accuracy_drop=max_accuracy_drop,
                strict=strict,
                no_verify=no_verify,
                layout=layout,
                verbose=verbose,
                show_progress=show_progress,
                report=report,
            )
        ).summary


# ------------------------------------------------------------------------------------ tools
@_checked
def inspect(model: PathLike) -> InspectResult:
    """``edgekit inspect``: a .tflite model's I/O, quantization, ops and shapes (no TensorFlow)."""
    import dataclasses

    from edgekit.tflite import model as tflite_model
    from edgekit.tflite.exporter_metadata import exporter_metadata

    info = tflite_model.load(model)
    return dataclasses.replace(tflite_model.summary(info), exporter=exporter_metadata(os.fsdecode(model), info))


def devices() -> DevicesResult:
    """``edgekit devices``: the Edge TPUs on this machine (USB Accelerators, PCIe/M.2, Dev Board)."""
    from edgekit.devices.discovery import list_devices
    from edgekit.results import DevicesResult

    return DevicesResult(tuple(list_devices()))


def doctor() -> DoctorResult:
    """``edgekit doctor``: this machine checked for running and compiling Edge TPU models (``ok``: none failed)."""
    from edgekit.doctor import diagnose as doctor_mod

    return doctor_mod.report(doctor_mod.run_checks())


@_checked
def deploy(
    bundle: PathLike, *, to: Any, path: str = _cli("deploy", "remote_path"), report: Reporter = SILENT
) -> DeployResult:
    """``edgekit deploy``: copy a bundle and the runner to a board (``to``: an :class:`edgekit.devices.remote.SshTarget`
    or ``"user@host"``), only the files whose sha256 differs there. A .tflite is bundled on the fly first, as
    ``edgekit build`` would, in a temporary folder (said to ``report``)."""
    from edgekit.devices import remote

    target = remote.SshTarget(to) if isinstance(to, str) else to
    with _for_board(bundle, target, report) as (bundle, _labels):
        return remote.deploy(bundle, target, path)


@_checked
def train(
    data: PathLike,
    *,
    output: PathLike,
    arch: str = _cli("train", "arch"),
    width: float = _cli("train", "width"),
    epochs: int = _cli("train", "epochs"),
    batch_size: int = _cli("train", "batch_size"),
    input_size: Union[str, tuple[int, int], None] = None,
    scaling: str = _cli("train", "scaling"),
    channels: str = _cli("train", "channels"),
    validation_split: float = _cli("train", "validation_split"),
    learning_rate: float = _cli("train", "learning_rate"),
    seed: int = _cli("train", "seed"),
    tfrecord_key: str = _cli("train", "tfrecord_key"),
    worker_timeout: float = _cli("train", "worker_timeout"),
    show_progress: bool = False,
    report: Reporter = SILENT,
) -> TrainResult:
    """``edgekit train``: a Keras classifier on class folders or TFRecords (TPU, TF_CONFIG workers, GPUs or one
    device), written with its record (needs TensorFlow)."""
    from edgekit.training.train import TrainOptions
    from edgekit.training.train import train as run_train

    return run_train(
        TrainOptions(
            data=os.fsdecode(data),
            output=os.fsdecode(output),
            arch=arch,
            width=width,
            epochs=epochs,
            batch_size=batch_size,
            input_size=_size(input_size),
            scaling=scaling,
            channels=channels,
            validation_split=validation_split,
            learning_rate=learning_rate,
            seed=seed,
            tfrecord_key=tfrecord_key,
            worker_timeout=worker_timeout,
            show_progress=show_progress,
            report=report,
        )
    )


@_checked
def cut(model: PathLike, *, output: Optional[PathLike] = None, report: Reporter = SILENT) -> Any:
    """``edgekit cut``: a YOLO detector (.tflite) cut before its decode, so that all of it maps to the Edge TPU
    (default output ``<model>_cut.tflite``); a :class:`edgekit.results.CutResult`."""
    from edgekit.detection.cut import cut as cut_model

    return cut_model(os.fsdecode(model), None if output is None else os.fsdecode(output), report=report)
