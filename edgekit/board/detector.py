"""Object detection through an opened model: the one detector for the host and the Dev Board.

The layout (what the outputs mean) comes in decided (:class:`edgekit.results.detect.DetectionLayout`,
found on the host from the model file by :mod:`edgekit.detection.layout`); this module feeds each
image through the same geometry the model was fed (letterbox or plain resize) and edgekit's one
preprocessing, invokes, and hands every raw output to :func:`edgekit.board.decode.postprocess`. Invoke
time and host post-processing time are measured apart. It returns the command's record
(:class:`edgekit.results.detect.DetectResult`, shipped too): the board runner prints its document, and the
host reads that back into the same type.

Shipped to boards (``board_runner.SHIPPED_MODULES``): Python 3.7, numpy, Pillow and the shipped
edgekit modules only.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from edgekit.board import decode as detection
from edgekit.board.classes import read_labels
from edgekit.board.classifier import Classifier, LoadedModel
from edgekit.board.decode import Geometry
from edgekit.errors import Caution, InputError
from edgekit.results.classify import ImageError
from edgekit.results.detect import DetectionLayout, DetectResult, ImageObjects, Layout, Object


class Detector:
    """Images through a loaded detector: image files in, objects out (in each image's own pixels)."""

    prepared = Classifier.prepared  # the same read-ahead of decoded images as classify's

    def __init__(
        self,
        loaded: LoadedModel,
        layout: DetectionLayout,
        labels: Optional[str] = None,
        mean: Optional[Tuple[float, ...]] = None,
        std: Optional[Tuple[float, ...]] = None,
        name: Optional[str] = None,
    ):
        from edgekit.board import preprocess

        self.loaded, self.layout = loaded, layout
        self.opened = opened = loaded.opened
        name = self.name = str(name or opened.requested_path)
        self.notes = list(loaded.notes)  # type: List[str]
        inp = opened.input
        self.input_dtype = np.dtype(inp["dtype"]).name
        self.input_scale = float(inp["quantization"][0]) or None
        self.input_zero_point = int(inp["quantization"][1])
        shape = [int(d) for d in inp["shape"]]
        signature = [int(d) for d in inp.get("shape_signature", shape)]
        if len(shape) == 4 and any(d < 0 for d in signature[1:]):  # the interpreter shows 1 for such a dimension
            raise InputError(
                f"{name}: the input size is not fixed (shape signature {signature})",
                "export the detector with a fixed input size (e.g. imgsz=640); the Edge TPU needs one",
            )
        self.image_input = preprocess.image_input(shape, name, "edgekit detect runs image detectors")
        height, width, channels = self.image_input.height, self.image_input.width, self.image_input.channels
        self._input_shape = tuple(shape)
        recorded = loaded.spec
        source = loaded.spec_source
        if recorded is None and layout.pixel_scaling is not None:
            recorded = preprocess.PreprocessSpec.with_scaling(
                width, height, layout.pixel_scaling, channels="RGB" if channels == 3 else "L", resize="bilinear"
            )
            source = f"pixels scaled {layout.pixel_scaling} (the model's metadata)"
        self.spec, self.spec_source, warnings = preprocess.spec_for_model(
            recorded,
            source,
            width,
            height,
            channels,
            self.input_dtype,
            self.input_scale,
            self.input_zero_point,
            mean,
            std,
            name=name,
        )
        self.notes += warnings
        self.outputs = opened.interpreter.get_output_details()
        self.quant = [(float(o["quantization"][0]), int(o["quantization"][1])) for o in self.outputs]
        if layout.kind in (Layout.YOLO, Layout.YOLOV5, Layout.END2END) and layout.boxes_normalized is False:
            scale = self.quant[layout.role("output")][0]
            if scale and scale > 1.0 / 32:
                self.notes.append(
                    Caution(
                        f"{name}: pixel-scale boxes and 0..1 scores share one int8 output (scale {scale:.3g}): scores have only "
                        f"{int(1.0 / scale)} steps between 0 and 1; export with normalized boxes (Ultralytics' TFLite exports do) or "
                        "with boxes and scores as separate outputs"
                    )
                )
        if labels is not None:
            self.labels: Dict[int, str] = read_labels(labels)
        elif layout.labels:
            self.labels = dict(enumerate(layout.labels))
        else:
            self.labels = dict(loaded.labels or {})
        if self.labels and layout.num_classes and len(self.labels) != layout.num_classes:
            self.notes.append(Caution(f"{len(self.labels)} labels but the model has {layout.num_classes} classes"))

    @property
    def first_inference_ms(self) -> Optional[float]:
        return self.opened.first_inference_ms

    def geometry(self, size: Tuple[int, int]) -> Geometry:
        input_wh = (self.image_input.width, self.image_input.height)
        return Geometry.letterboxed(size, input_wh) if self.layout.letterbox else Geometry.resize(size, input_wh)

    def prepare(self, image_path: str) -> Tuple[np.ndarray, Geometry]:
        """Image file → (the model's input tensor, how the image was fitted to it); InputError when unreadable."""
        from edgekit.board.preprocess import open_image

        return self.prepare_image(open_image(image_path), image_path)

    def prepare_image(self, image: Any, name: str = "image") -> Tuple[np.ndarray, Geometry]:
        """A decoded PIL image → (the model's input tensor, how the image was fitted to it)."""
        from edgekit.board.preprocess import prepare

        geometry = self.geometry(image.size)
        try:
            if self.spec.channels != "L" and image.mode != "RGB":
                image = image.convert("RGB")
            tensor = prepare(
                geometry.apply(image), self.spec, self.input_dtype, self.input_scale, self.input_zero_point
            )
        except InputError:
            raise
        except Exception as exc:  # Pillow plugins raise many types on hostile files
            raise InputError(
                f"{name}: cannot decode image ({type(exc).__name__})",
                "the file is damaged or not an image: save or copy it again",
            ) from None
        return self.image_input.from_hwc(tensor), geometry

    def infer(self, tensor: np.ndarray) -> Tuple[List[np.ndarray], float]:
        """Run one input: every output as the model gives it (quantized), and the invoke time in ms."""
        interp = self.opened._live()
        interp.set_tensor(self.opened.input["index"], tensor)
        start = time.perf_counter()
        self.opened.invoke()
        ms = (time.perf_counter() - start) * 1000.0
        if self.opened.first_inference_ms is None:
            self.opened.first_inference_ms = ms
        return [interp.get_tensor(o["index"]) for o in self.outputs], ms

    def detect_tensor(
        self, tensor: np.ndarray, geometry: Geometry, conf: float, iou: float, max_det: int, multi_label: bool = False
    ) -> Tuple[List[Object], float, float, List[str]]:
        """(objects, invoke ms, post-processing ms, notes) for one prepared input."""
        outputs, ms = self.infer(tensor)
        start = time.perf_counter()
        try:
            objects, notes = detection.postprocess(
                outputs, self.quant, self.layout, geometry, conf, iou, max_det, self.labels, multi_label
            )
        except ValueError as exc:  # the outputs do not fit the layout (a split head's rows, shapes)
            raise InputError(
                f"{self.name}: its outputs do not fit the {self.layout.kind.value} layout: {exc}",
                "the model is damaged or not the detector it claims; name another with --layout if it fits one",
            ) from None
        return objects, ms, (time.perf_counter() - start) * 1000.0, notes

    def run(
        self,
        images: List[str],
        conf: float = detection.DEFAULT_CONF,
        iou: float = detection.DEFAULT_IOU,
        max_det: int = detection.DEFAULT_MAX_DET,
        workers: Optional[int] = None,
        on_image: Optional[Callable[[str], None]] = None,
        multi_label: bool = False,
    ) -> DetectResult:
        """Detect in every image; one that cannot be read is reported in ``errors`` and the rest go on
        (``multi_label``: every class of a box above ``conf`` is a candidate, as Ultralytics' val scores)."""
        results, errors, notes = [], [], []  # type: List[ImageObjects], List[ImageError], List[str]
        dropped = []  # type: List[detection.Dropped]
        for path, prepared, error in self.prepared(images, workers):
            if error is not None:
                errors.append(ImageError(path, str(error)))
            else:
                assert prepared is not None  # prepared yields the input whenever it yields no error
                tensor, geometry = prepared
                objects, ms, post_ms, decided = self.detect_tensor(tensor, geometry, conf, iou, max_det, multi_label)
                for n in decided:
                    if isinstance(n, detection.Dropped):
                        dropped.append(n)
                    elif n not in notes:
                        notes.append(n)
                results.append(
                    ImageObjects(
                        path,
                        geometry.image_wh[0],
                        geometry.image_wh[1],
                        round(ms, 3),
                        round(post_ms, 3),
                        tuple(objects),
                    )
                )
            if on_image:
                on_image(path)
        if dropped:
            notes.append(str(detection.Dropped.total(dropped)))
        first = self.first_inference_ms
        return DetectResult(
            self.opened.model_path,
            self.opened.device,
            self.opened.backend.name,
            self.layout,
            conf,
            iou,
            max_det,
            None if first is None else round(first, 3),
            tuple(results),
            tuple(errors),
            tuple(notes),
        )
