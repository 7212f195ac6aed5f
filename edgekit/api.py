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

import os
from typing import TYPE_CHECKING, Any, Iterable, Optional, Tuple, Union

from edgekit.flags import default as _cli
from edgekit.options import Floats, PathLike
from edgekit.options import floats as _floats, quantize_options as _quantize_options, size as _size
from edgekit.report import SILENT, Reporter
if TYPE_CHECKING:  # pragma: no cover - each function imports its own result type (a command pays for its own)
    import numpy as np

    from edgekit.detection import Object
    from edgekit.results import (BenchmarkResult, CheckResult, Class, ClassifyResult, CompileResult,
                                 DeployResult, DetectionEvaluateResult, DetectResult, DevicesResult, DoctorResult,
                                 EvaluateResult, InspectResult, QuantizeResult, Timing, TrainResult)

# build: edgekit.build (the module edgekit/build.py, callable: its build_bundle) takes the same keywords.
__all__ = ["Model", "open", "classify", "detect", "check", "compile", "evaluate", "benchmark", "quantize", "inspect",
           "devices",
           "doctor", "deploy", "train", "cut"]


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
    def notes(self) -> Tuple[str, ...]:
        return tuple(self._clf.notes)

    @property
    def labels(self) -> dict:
        """Class id -> label (recorded with the model, or from ``labels=``); empty when there are none."""
        return dict(self._clf.labels)

    @property
    def preprocess(self) -> Any:
        """The :class:`edgekit.preprocess.PreprocessSpec` images go through (size, filter, mean/std, channels)."""
        return self._clf.spec

    @property
    def input_details(self) -> dict:
        return dict(self._clf.opened.input)

    @property
    def output_details(self) -> list:
        """Every output's details (name, shape, dtype, quantization), in the interpreter's order."""
        return list(self._clf.opened._live().get_output_details())

    # -- running ----------------------------------------------------------------------------
    def input_tensor(self, image: Any) -> "np.ndarray":
        """An image file path, a PIL image or an HxWxC (HxW) uint8 array -> the model's input tensor.

        An array that already has the input's shape and dtype is taken as the input tensor itself.
        """
        import numpy as np

        from edgekit import preprocess

        clf = self._clf
        if isinstance(image, (str, bytes, os.PathLike)):
            return clf.prepare(os.fsdecode(image))
        if isinstance(image, np.ndarray) and image.shape == clf._input_shape and image.dtype == clf.input_dtype:
            return image
        tensor = preprocess.prepare(image, clf.spec, clf.input_dtype, clf.input_scale, clf.input_zero_point)
        return tensor.reshape(clf._input_shape) if tensor.shape != clf._input_shape else tensor

    def infer(self, tensor: "np.ndarray") -> Tuple["np.ndarray", ...]:
        """Run one input tensor; every output, dequantized (float32), in the interpreter's order."""
        from edgekit.preprocess import dequantize

        opened = self._clf.opened
        interp = opened._live()
        interp.set_tensor(opened.input["index"], tensor)
        opened.invoke()
        return tuple(dequantize(interp.get_tensor(d["index"]), float(d["quantization"][0]) or None,
                                int(d["quantization"][1])) for d in interp.get_output_details())

    @property
    def outputs(self) -> Tuple["np.ndarray", ...]:
        """The outputs of the last run, dequantized (what a task layer such as detection decodes)."""
        from edgekit.preprocess import dequantize

        interp = self._clf.opened._live()
        return tuple(dequantize(interp.get_tensor(d["index"]), float(d["quantization"][0]) or None,
                                int(d["quantization"][1])) for d in interp.get_output_details())

    def classify(self, image: Any, top_k: Optional[int] = _cli("classify", "top_k"),
                 threshold: float = _cli("classify", "threshold")) -> list[Class]:
        """The ``top_k`` best classes with ``score >= threshold``, best first, as :class:`Class` records."""
        from edgekit.results import Class

        top, _ms = self._clf.classify_tensor(self.input_tensor(image), top_k, threshold)
        return [Class(t["id"], float(t["score"]), t["label"]) for t in top]

    def detect(self, image: Any, conf: float = _cli("detect", "conf"), iou: float = _cli("detect", "iou"),
               max_det: int = _cli("detect", "max_det"),
               layout: Optional[str] = None) -> list[Object]:
        """The objects in one image, best first, as :class:`~edgekit.detection.Object` records (``id``, ``score``,
        ``label``, ``bbox`` in the image's own pixels), like pycoral's ``detect.get_objects``.

        ``image``: a file path, a PIL image or an HxWxC (HxW) uint8 array. ``conf``, ``iou`` and ``max_det`` are
        ``edgekit detect``'s (same defaults); ``layout`` names the output layout where the model's is ambiguous
        (``yolo``, ``postprocess``...). The layout is read from the model once, on the first call.
        """
        import numpy as np

        from edgekit.devices.detect import check_thresholds

        check_thresholds(conf, iou, max_det)
        detector = self._detector(layout)
        if isinstance(image, (str, bytes, os.PathLike)):
            tensor, geometry = detector.prepare(os.fsdecode(image))
        else:
            from PIL import Image

            tensor, geometry = detector.prepare_image(Image.fromarray(image) if isinstance(image, np.ndarray)
                                                      else image)
        objects, _ms, _post_ms, _notes = detector.detect_tensor(tensor, geometry, conf, iou, max_det)
        return objects

    def _detector(self, layout: Optional[str]) -> Any:
        """The detection task layer over this open model (one per ``layout`` asked, made on first use)."""
        if layout not in self._detectors:
            from edgekit.devices.detect import detector_for

            clf = self._clf
            self._detectors[layout] = detector_for(clf.loaded, clf.model, labels=clf.labels_file, layout=layout,
                                                   mean=clf.mean, std=clf.std)
        return self._detectors[layout]

    def classify_files(self, images: Iterable[PathLike], top_k: Optional[int] = _cli("classify", "top_k"),
                       threshold: float = _cli("classify", "threshold"), workers: Optional[int] = None) -> ClassifyResult:
        """Many image files, decoded ahead of inference; unreadable ones go to ``errors`` (classify's document)."""
        from edgekit.results import ClassifyResult

        return ClassifyResult.of_report(self._clf.run([os.fsdecode(p) for p in images], top_k, threshold, workers))

    def time(self, n: int = 100, warmup: int = 10) -> Timing:
        """The benchmark loop on this open model: ``invoke`` timed ``n`` times on a fixed input after the first
        call and ``warmup`` untimed ones; a :class:`~edgekit.results.Timing` (``p50_ms``, ``throughput_per_s``...)."""
        from edgekit.results import Timing

        return Timing.from_dict(self._clf.opened.time(n, warmup))

    def close(self) -> None:
        """Free the interpreter and its Edge TPU delegate (the device is free for another process)."""
        self._clf.opened.close()

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<edgekit.Model {self.model_path} on {self.device} ({self.backend})>"


def open(model: PathLike, *, device: str = _cli("classify", "device"), labels: Optional[PathLike] = None,
         mean: Floats = None, std: Floats = None, threads: Optional[int] = None, report: Reporter = SILENT) -> Model:
    """Open a .tflite model (``*_edgetpu.tflite``: on the Edge TPU, else its CPU twin) or a bundle folder.

    ``device``: ``auto``, ``cpu``, ``usb``, ``usb:N``, ``pci``, ``pci:N`` or ``:N``. ``labels``,
    ``mean`` and ``std`` override what was recorded with the model. Where it runs and why, and any
    warning, go to ``report`` and stay in ``Model.notes``.
    """
    from edgekit.devices.classify import Classifier

    clf = Classifier(model, device, labels, _floats(mean), _floats(std), num_threads=threads, any_output=True)
    for note in clf.notes:
        report.tell(note)
    return Model(clf)


def classify(images: Iterable[PathLike], *, model: PathLike, labels: Optional[PathLike] = None,
             top_k: int = _cli("classify", "top_k"), threshold: float = _cli("classify", "threshold"),
             device: str = _cli("classify", "device"), mean: Floats = None, std: Floats = None,
             threads: Optional[int] = None, on: Any = None, remote_path: Optional[str] = None,
             report: Reporter = SILENT) -> ClassifyResult:
    """``edgekit classify``: image files, folders and globs through a model; unreadable images in ``errors``.

    ``on``: an :class:`edgekit.devices.remote.SshTarget` (a board over SSH; ``model`` a bundle).
    """
    import math

    from edgekit.devices import classify as classify_mod
    from edgekit.errors import UsageError
    from edgekit.results import ClassifyResult

    if math.isnan(threshold):
        raise UsageError("-t/--threshold nan keeps no score", "pass a number such as -t 0.1, or leave -t out")
    report_ = classify_mod.classify([os.fsdecode(i) for i in images], model, device=device, labels=labels, k=top_k,
                                    threshold=threshold, mean=_floats(mean), std=_floats(std), num_threads=threads,
                                    report=report, on=on, remote_path=remote_path)
    return ClassifyResult.of_report(report_)


def detect(images: Iterable[PathLike], *, model: PathLike, labels: Optional[PathLike] = None,
           conf: float = _cli("detect", "conf"), iou: float = _cli("detect", "iou"),
           max_det: int = _cli("detect", "max_det"), layout: Optional[str] = None, save: Optional[PathLike] = None,
           device: str = _cli("detect", "device"), mean: Floats = None, std: Floats = None,
           threads: Optional[int] = None, on: Any = None, remote_path: Optional[str] = None,
           report: Reporter = SILENT) -> DetectResult:
    """``edgekit detect``: objects in image files, folders and globs (boxes in each image's pixels, after
    class-wise NMS); unreadable images in ``errors``. ``layout`` (``postprocess``, ``yolo``, ``yolov5``,
    ``split-dfl``, ``end2end``) settles a model whose outputs fit several; ``save``: a folder for the images
    with their boxes drawn. ``on``: an :class:`edgekit.devices.remote.SshTarget` (``model`` a bundle).
    """
    from edgekit.devices import detect as detect_mod
    from edgekit.results import DetectResult

    report_ = detect_mod.detect([os.fsdecode(i) for i in images], model, device=device, labels=labels, conf=conf,
                                iou=iou, max_det=max_det, layout=layout, save=save, mean=_floats(mean),
                                std=_floats(std), num_threads=threads, report=report, on=on,
                                remote_path=remote_path)
    return DetectResult.of_report(report_)


# ------------------------------------------------------------------------------------ check / compile
def check(model: PathLike, *, min_runtime: int = _cli("check", "min_runtime"), allow_multiple_subgraphs: bool = False,
          strict: bool = False) -> CheckResult:
    """``edgekit check``: which ops edgetpu_compiler 16 maps to the Edge TPU, predicted offline (no TensorFlow).

    ``strict``: raise :class:`~edgekit.errors.CompatibilityError` (exit 7) when an op is certain to stay
    on the CPU or the compiler would certainly refuse the model (an op an uncertain rule places does not).
    """

    from edgekit.results import CheckResult
    from edgekit import edgetpu_package, tflite_model
    from edgekit.converters import compatibility

    info = tflite_model.load(model)
    report = compatibility.check_model(info, min_runtime, allow_multiple_subgraphs)
    result = CheckResult.of_report(report, edgetpu_package.summary(info.edgetpu_packages))
    failure = report.strict_error() if strict else None
    if failure:
        failure.result = result
        raise failure
    return result


def compile(model: PathLike, *, output_dir: Optional[PathLike] = None, min_runtime: Optional[int] = None,
            segments: Optional[int] = None, search_delegate: bool = False, timeout: float = _cli("compile", "timeout"),
            report: Reporter = SILENT) -> CompileResult:
    """``edgekit compile``: run edgetpu_compiler (x86-64 Linux) and parse what it said.

    Raises :class:`~edgekit.errors.MissingDependencyError` (exit 4) where there is no compiler, with the
    offline prediction as ``.check`` (a :class:`CheckResult`); :class:`~edgekit.errors.CompilerError`
    (exit 8) when it fails, with what it said as ``.report``.
    """

    from edgekit.results import CheckResult, CompileResult, CompilerOutput
    from edgekit import tflite_model
    from edgekit.converters import compatibility, edgetpu_compiler as etc
    from edgekit.errors import CompilerError, MissingDependencyError

    info = tflite_model.load(model)
    prediction = compatibility.check_model(info, min_runtime or compatibility.COMPILER_DEFAULT_MIN_RUNTIME)
    try:
        compiled = etc.compile_model(model, output_dir, min_runtime=min_runtime, segments=segments,
                                     search_delegate=search_delegate, timeout=timeout, report=report)
    except MissingDependencyError as err:
        err.check = CheckResult.of_report(prediction)
        raise
    except CompilerError as err:  # what the compiler said, as its document
        if getattr(err, "report", None) is not None:
            err.report = CompilerOutput.of_report(err.report)
        raise
    return CompileResult.of_report(compiled, etc.check_disagreements(info, prediction, compiled, segments))


# ------------------------------------------------------------------------------------ evaluate / benchmark
def evaluate(model: PathLike, data: PathLike, *, reference: Optional[PathLike] = None, no_layers: bool = False,
             labels: Optional[PathLike] = None, arch: Optional[str] = None,
             custom_objects: Optional[PathLike] = None, trust_model: bool = False,
             device: str = _cli("evaluate", "device"), mean: Floats = None, std: Floats = None,
             threads: Optional[int] = None, verbose: bool = False,
             images: Optional[PathLike] = None, against: Optional[Iterable[PathLike]] = None,
             conf: Optional[float] = None, iou: Optional[float] = None, max_det: Optional[int] = None, layout: Optional[str] = None,
             report: Reporter = SILENT) -> Union[EvaluateResult, DetectionEvaluateResult]:
    """``edgekit evaluate``: top-1/top-5 accuracy on labelled data (class folders or an .npz with x and y).

    ``reference``: the float Keras model to compare with (needs TensorFlow). Samples that cannot be
    read are in ``errors``; the rest are scored.

    Given detection data (a COCO .json or a YOLO folder: images/ + labels/), a detector's COCO mAP scored
    by pycocotools instead (a :class:`~edgekit.results.DetectionEvaluateResult`): ``images`` (a COCO
    file's image folder), ``against`` (other .tflite models scored on the same images, with the paired
    change), ``conf``, ``iou``, ``max_det`` (default COCO's protocol) and ``layout`` apply to it alone.
    """
    from edgekit.detection_data import is_detection_data
    from edgekit.errors import UsageError

    against = tuple(os.fsdecode(a) for a in against or ())
    if is_detection_data(data):
        if reference:
            raise UsageError("--reference compares classifiers", "for a detector, pass the float .tflite with "
                             "--against")
        from edgekit import detection_eval

        return detection_eval.evaluate_detector(
            model, data, images=images, against=against,
            conf=detection_eval.STANDARD_CONF if conf is None else conf,
            iou=detection_eval.DEFAULT_EVAL_IOU if iou is None else iou,
            max_det=detection_eval.STANDARD_MAX_DET if max_det is None else max_det, layout=layout, device=device,
            mean=_floats(mean), std=_floats(std), num_threads=threads, labels=labels, report=report)
    detection_only = {"--images": images, "--against": against or None, "--conf": conf, "--iou": iou,
                      "--max-det": max_det, "--layout": layout}
    given = [flag for flag, value in detection_only.items() if value is not None]
    if given:
        raise UsageError(f"{', '.join(given)} apply to detectors only",
                         "pass detection data with --data: a COCO .json or a YOLO folder (images/ + labels/)")
    from edgekit.devices import evaluate as evaluate_mod

    labelled = evaluate_mod.read_set(data)
    ev = evaluate_mod.evaluate(model, labelled, device, _floats(mean), _floats(std), num_threads=threads,
                               labels=labels, report=report)
    if not reference:
        return ev.result()
    from edgekit.converters import reference as reference_mod

    return ev.result(reference_mod.compare(ev, labelled, reference, arch, custom_objects, trust_model,
                                           layers=not no_layers, verbose=verbose))


def benchmark(model: PathLike, *, device: str = _cli("benchmark", "device"), n: int = _cli("benchmark", "n"),
              warmup: int = _cli("benchmark", "warmup"), threads: Optional[int] = None,
              compare: Optional[PathLike] = None, max_slowdown: float = _cli("benchmark", "max_slowdown"),
              on: Any = None, remote_path: Optional[str] = None, report: Reporter = SILENT) -> BenchmarkResult:
    """``edgekit benchmark``: load time, first inference, latency percentiles and throughput.

    ``compare``: a document saved from an earlier run (``edgekit benchmark --save``, or
    ``json.dump(result.to_dict(), f)``): :class:`~edgekit.errors.RegressionError` (exit 10, the result
    as ``.result``) when p50 grew by more than ``max_slowdown`` percent beyond doubt.
    """
    from edgekit.devices import benchmark as benchmark_mod

    saved = benchmark_mod.read_saved(compare) if compare else None
    result = benchmark_mod.benchmark(model, device, n, warmup, threads, report=report, on=on, remote_path=remote_path)
    if saved is not None:
        result, warnings, notes = benchmark_mod.compare_to_saved(result, saved, os.fsdecode(compare), max_slowdown)
        for warning in warnings:
            report.warn(warning)
        for note in notes:
            report.note(note)
    regression = benchmark_mod.regression_error(result, os.fsdecode(compare) if compare else None)
    if regression is not None:
        regression.result = result
        raise regression
    return result


# ------------------------------------------------------------------------------------ quantize / build
def _with_numbers(exc: Any, verification: Any) -> Any:
    """A quantize verification failure with the numbers it rests on: the first measure that failed, its
    value, the limit and the 95% interval (attributes of the VerificationError)."""
    v = verification
    if v is None:
        return exc
    if getattr(v, "kind", None) == "detection":  # a detector's: the mAP50 drop, else the detections kept
        gate = v.map50
        if gate and gate.verdict == "failed":
            exc.measure, exc.value, exc.limit, exc.interval = ("map50_drop", gate.drop, gate.max_drop_points,
                                                               gate.drop_interval)
        elif v.agreement_verdict == "failed":
            exc.measure, exc.value, exc.limit, exc.interval = ("detections_kept", v.kept, v.min_agreement,
                                                               v.kept_interval)
        return exc
    if v.accuracy_verdict == "failed":
        exc.measure, exc.value, exc.limit, exc.interval = ("accuracy_drop", v.accuracy_drop, v.max_accuracy_drop,
                                                           v.accuracy_drop_interval)
    elif v.agreement_verdict == "failed":
        exc.measure, exc.value, exc.limit, exc.interval = ("top1_agreement", v.top1_agreement, v.min_agreement,
                                                           v.agreement_interval)
    elif v.class_order:
        exc.measure = "class_order"
    elif v.float_near_chance:
        exc.measure, exc.value, exc.limit = "float_top1", v.float_top1, v.chance.chance if v.chance else None
    return exc


def quantize(model: PathLike, *, output: Optional[PathLike] = None, calib: Optional[str] = None,
             samples: int = _cli("quantize", "samples"), holdout: int = _cli("quantize", "holdout"),
             seed: int = _cli("quantize", "seed"), tfrecord_key: str = _cli("quantize", "tfrecord_key"),
             arch: Optional[str] = None,
             custom_objects: Optional[PathLike] = None, trust_model: bool = False,
             output_name: Optional[str] = None, scaling: Optional[str] = None,
             mean: Floats = None, std: Floats = None, resize: Optional[str] = None, channels: Optional[str] = None,
             input_size: Union[str, Tuple[int, int], None] = None, io: str = _cli("quantize", "io"),
             labels: Optional[PathLike] = None, eval: Optional[PathLike] = None,
             min_agreement: float = _cli("quantize", "min_agreement"),
             max_accuracy_drop: float = _cli("quantize", "max_accuracy_drop"), no_verify: bool = False,
             layout: Optional[str] = None,
             verbose: bool = False, show_progress: bool = False, report: Reporter = SILENT) -> QuantizeResult:
    """``edgekit quantize``: a Keras or ONNX model (a path, or an ``onnx.ModelProto`` with ``output``) to a
    verified full-int8 .tflite (needs TensorFlow; ONNX needs the ``onnx`` extra).

    A failed verification raises :class:`~edgekit.errors.VerificationError` (exit 6) with ``.measure``,
    ``.value``, ``.limit`` and ``.interval``, and the kept output described by ``.result`` (a
    :class:`QuantizeResult`).
    """
    from edgekit.converters.preprocess_search import PreprocessingRefused
    from edgekit.converters.quantize import AgreementError, quantize as run_quantize
    from edgekit.results import RefusedQuantize
    from edgekit.results.quantize import RefusedPreprocess

    from edgekit.options import model_file

    options = dict(locals())
    try:
        with model_file(model) as (path, shown):   # an onnx.ModelProto: a temporary .onnx, named as the ModelProto
            done = run_quantize(_quantize_options(path, output, options, report, shown))
    except AgreementError as exc:
        exc.result = exc.result.summary
        raise _with_numbers(exc, exc.result.verification)
    except PreprocessingRefused as exc:  # nothing written: the measurements the refusal rests on
        exc.search = exc.result
        exc.result = RefusedQuantize(None, str(exc), RefusedPreprocess(None, exc.search.record()))
        raise
    return done.summary


# ------------------------------------------------------------------------------------ tools
def inspect(model: PathLike) -> InspectResult:
    """``edgekit inspect``: a .tflite model's I/O, quantization, ops and shapes (no TensorFlow)."""
    from edgekit import tflite_model

    return tflite_model.summary(tflite_model.load(model))


def devices() -> DevicesResult:
    """``edgekit devices``: the Edge TPUs on this machine (USB Accelerators, PCIe/M.2, Dev Board)."""
    from edgekit.devices.discovery import list_devices
    from edgekit.results import DevicesResult

    return DevicesResult(tuple(list_devices()))


def doctor() -> DoctorResult:
    """``edgekit doctor``: this machine checked for running and compiling Edge TPU models (``ok``: none failed)."""
    from edgekit import doctor as doctor_mod

    return doctor_mod.report(doctor_mod.run_checks())


def deploy(bundle: PathLike, *, to: Any, path: str = _cli("deploy", "remote_path")) -> DeployResult:
    """``edgekit deploy``: copy a bundle and the runner to a board (``to``: an :class:`edgekit.devices.remote.SshTarget`
    or ``"user@host"``), only the files whose sha256 differs there."""
    from edgekit.devices import remote

    target = remote.SshTarget(to) if isinstance(to, str) else to
    return remote.deploy(bundle, target, path)


def train(data: PathLike, *, output: PathLike, arch: str = _cli("train", "arch"), width: float = _cli("train", "width"),
          epochs: int = _cli("train", "epochs"), batch_size: int = _cli("train", "batch_size"),
          input_size: Union[str, Tuple[int, int], None] = None, scaling: str = _cli("train", "scaling"),
          channels: str = _cli("train", "channels"), validation_split: float = _cli("train", "validation_split"),
          learning_rate: float = _cli("train", "learning_rate"), seed: int = _cli("train", "seed"),
          tfrecord_key: str = _cli("train", "tfrecord_key"), worker_timeout: float = _cli("train", "worker_timeout"),
          show_progress: bool = False,
          report: Reporter = SILENT) -> TrainResult:
    """``edgekit train``: a Keras classifier on class folders or TFRecords (TPU, TF_CONFIG workers, GPUs or one
    device), written with its record (needs TensorFlow)."""
    from edgekit.training.train import TrainOptions, train as run_train

    return run_train(TrainOptions(
        data=os.fsdecode(data), output=os.fsdecode(output), arch=arch, width=width, epochs=epochs,
        batch_size=batch_size, input_size=_size(input_size), scaling=scaling, channels=channels,
        validation_split=validation_split, learning_rate=learning_rate, seed=seed, tfrecord_key=tfrecord_key,
        worker_timeout=worker_timeout, show_progress=show_progress, report=report))


def cut(model: PathLike, *, output: Optional[PathLike] = None, report: Reporter = SILENT) -> Any:
    """``edgekit cut``: a YOLO detector (.tflite) cut before its decode, so that all of it maps to the Edge TPU
    (default output ``<model>_cut.tflite``); a :class:`edgekit.results.CutResult`."""
    from edgekit.converters.detector_cut import cut as cut_model
    from edgekit.results import CutResult

    return CutResult.of_cut(cut_model(model, output, report=report))
