"""``edgekit build``: one command from a Keras model to a deployable bundle.

quantize → check → compile (when edgetpu_compiler is here) → evaluate (``--eval``) → bundle
(:mod:`edgekit.board.manifest`). Every step writes into a temporary folder beside the bundle; the bundle
itself appears all at once at the end, or not at all when a step fails (quantize's verification
included: no bundle of a bad model). It drives both halves (converters/ to make the models,
devices/ to measure them), so it sits above them, beside the CLI.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any

from edgekit import __version__
from edgekit.board import manifest
from edgekit.board.manifest import BundleError
from edgekit.board.preprocess import PreprocessSpec
from edgekit.converters.quantize_options import QuantizeOptions
from edgekit.errors import EdgekitError, InputError, MissingDependencyError, UsageError, printable
from edgekit.fileio import folder_mode, renames_together, require_output_folder
from edgekit.flags import QUANTIZE
from edgekit.flags import default as _cli
from edgekit.pipeline.options import PathLike
from edgekit.report import SILENT, Reporter
from edgekit.results.build import (
    BuildResult,
    BundleDetection,
    BundleFile,
    BundleInput,
    BundleManifest,
    BundleModels,
    BundleReports,
    BundleSource,
    BundleVersions,
    ClassifierAccuracy,
    DetectorAccuracy,
)
from edgekit.results.compile import CompileResult
from edgekit.results.quantize import QuantizeResult
from edgekit.tflite import model as tflite_model


@dataclass
class BuildOptions:
    """``edgekit build``: quantize's options (its ``output`` is set by build) plus the bundle's."""

    quantize: QuantizeOptions  # the model, calibration, preprocessing and verification, as for quantize
    output: str
    min_runtime: int | None = None  # edgetpu_compiler -m; None: the compiler's default (14 for compiler 16)
    timeout: float = 180.0
    compile: bool = True  # False: a CPU-only bundle even where the compiler exists
    via: Any = None  # a compiler elsewhere (edgekit.edgetpu.compile_via.Elsewhere); None: here
    layout: str | None = None  # a detector .tflite's layout (--layout) where its outputs fit several
    float_for_cpu: bool = False  # a float .tflite bundled for a CPU (--on, deploy), not refused
    show_progress: bool = True
    report: Reporter = SILENT  # notes and warnings, as they arise


class _WarningsOnly(Reporter):
    """quantize's warnings and progress go to the user; its notes (about the work folder it writes in) do not."""

    def __init__(self, report: Reporter):
        self.warn, self.progress = report.warn, report.progress  # type: ignore[method-assign]


@dataclass
class _Plan:
    """What build was asked to do, checked before any slow work: the bundle folder, the model given as a .tflite
    (its CPU model and compiled twin) or None for a Keras model, and the ``--eval`` data of either kind."""

    target: Path
    given: tuple[Path, Path | None] | None
    eval_set: Any = None  # a classifier's labelled set (devices.evaluate.read_set)
    detection_eval: str | None = None  # a detector's COCO JSON or YOLO folder
    notes: list[str] = field(default_factory=list)  # what build chose before any work (a compiled twin taken)


@dataclass
class _Made:
    """What the work folder holds so far: the int8 model, its compiled twin, quantize's summary, and notes."""

    cpu: Path
    compiled: Path | None
    quantized: QuantizeResult | None  # quantize's result (None: a .tflite was given)
    source: BundleSource
    notes: list[str] = field(default_factory=list)


def build(opts: BuildOptions) -> BuildResult:
    """Build the bundle; return what ``edgekit build`` reports (``--json``: its document).

    ``MODEL`` is a Keras model (quantized first) or an int8 ``.tflite`` (a compiled ``x_edgetpu.tflite``
    with its CPU twin ``x.tflite`` beside it): then it is checked, compiled where possible, evaluated
    and bundled as it is.
    """
    plan = _plan(opts)
    work = Path(tempfile.mkdtemp(prefix=f".{plan.target.name}.", suffix=".work", dir=plan.target.parent))
    try:
        made = (
            _copy_given(plan.given, work, Path(opts.quantize.model).name)
            if plan.given is not None
            else _quantize_into(opts, work)
        )
        made.notes[:0] = plan.notes
        doc, sources = _bundle_contents(opts, plan, made, work)
        write_bundle(plan.target, sources, doc)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return _result(plan.target, made, work)


def _plan(opts: BuildOptions) -> _Plan:
    """Every refusal that needs no slow work, first: an -o that holds an input or may not be replaced, a .tflite
    that is not a full-int8 model, --eval data that cannot be read."""
    from edgekit.detection.data import is_detection_data, read_detection_set
    from edgekit.devices import evaluate as evaluate_mod

    target = Path(opts.output)
    refuse_inputs_inside(target, opts.quantize)  # first: nothing is touched for an -o that holds an input
    require_output_folder(target, opts.report)  # before minutes of work: a wrong -o
    check_target(target)  # fails now
    evaluating = opts.quantize.eval
    from_tflite = Path(opts.quantize.model.rstrip("/\\")).suffix.lower() == ".tflite"
    given = tflite_sources(opts.quantize, opts.float_for_cpu) if from_tflite else None  # a wrong one fails now
    notes: list[str] = _float_note(given[0]) if given is not None else []
    if given is not None and given[1] is None and opts.compile and opts.via is None:
        given = (given[0], compiled_twin(given[0], notes))
    if evaluating and is_detection_data(evaluating):  # COCO JSON / YOLO folder: every entry checked now
        read_detection_set(evaluating, flag="--eval")
        return _Plan(target, given, detection_eval=evaluating, notes=notes)
    return _Plan(
        target,
        given,
        evaluate_mod.read_set(evaluating, "--eval") if evaluating else None,  # fails now
        notes=notes,
    )


def _bundle_contents(
    opts: BuildOptions, plan: _Plan, made: _Made, work: Path
) -> tuple[BundleManifest, dict[str, Path | bytes]]:
    """check, compile, evaluate the models in ``work``: the manifest and the files of the bundle."""
    from edgekit.edgetpu import compatibility

    info = tflite_model.load(made.cpu)
    check = compatibility.check_model(info, opts.min_runtime or compatibility.COMPILER_DEFAULT_MIN_RUNTIME)
    compile_report = _compile(opts, made, work)
    for n in made.notes:
        opts.report.note(n)
    shown = plan.given[0] if plan.given is not None else made.cpu  # the same bytes; errors name the user's file
    detector = _given_detector(shown, opts.quantize, opts.layout) if plan.given is not None else None
    if detector is not None:
        spec, labels = detector.spec, detector.labels
        for n in detector.notes:
            opts.report.note(n)
    else:
        spec, labels = _spec_and_labels(shown, opts.quantize, opts.report if plan.given is not None else SILENT)
    sources: dict[str, Path | bytes] = {made.cpu.name: made.cpu}
    if made.compiled is not None:
        sources[made.compiled.name] = made.compiled
    if labels:
        sources[manifest.LABELS_NAME] = ("\n".join(printable(x) for x in labels) + "\n").encode()
    doc = BundleManifest.new(
        models=BundleModels(made.cpu.name, made.compiled.name if made.compiled else None),
        labels=manifest.LABELS_NAME if labels else None,
        preprocess=spec,
        input=_input(info.inputs[0]),
        versions=BundleVersions(
            __version__,
            _tensorflow_version(plan.given is None),
            compile_report.compiler_version if compile_report else None,
        ),
        reports=BundleReports(check, compile_report),
        accuracy=_accuracy(opts, plan, shown),
        source=made.source,
        detection=detector.entry if detector is not None else None,
    )
    return BundleManifest.from_dict(in_bundle(doc.to_dict(), work, "")), sources  # never the work folder's names


def _compile(opts: BuildOptions, made: _Made, work: Path) -> CompileResult | None:
    """Compile the CPU model where the compiler is here and asked for (``made.compiled`` then names the result);
    why it was not, in ``made.notes``."""
    from edgekit.edgetpu.compiler import compile_model, run_subprocess
    from edgekit.edgetpu.compiler_locator import find_compiler

    if made.compiled is not None:
        made.notes.append(f"compiled model as given ({made.compiled.name}): not compiled again")
    elif made.quantized is None and float_model(tflite_model.load(made.cpu)):
        pass  # a float model: said in the plan's notes
    elif not opts.compile:
        made.notes.append("not compiled (--no-compile): the bundle holds the CPU model only")
    elif opts.via is None and not find_compiler():
        made.notes.append(
            "no edgetpu_compiler here (x86-64 Linux only): the bundle holds the CPU model only; "
            "build with --via ssh://USER@HOST or --via docker, or on a machine with the compiler, "
            "to add the Edge TPU model"
        )
    else:
        try:
            report = compile_model(
                made.cpu,
                work,
                min_runtime=opts.min_runtime,
                timeout=opts.timeout,
                report=opts.report,
                compiler=opts.via.compiler if opts.via else None,
                runner=opts.via.runner if opts.via else run_subprocess,
            )
        except MissingDependencyError as exc:  # found but unusable (e.g. a wrong EDGETPU_COMPILER)
            if opts.via is not None:  # asked for by name: its absence is an error, not a CPU-only bundle
                raise
            made.notes.append(f"not compiled: {exc.message}; the bundle holds the CPU model only")
        else:
            made.compiled = work / f"{made.cpu.stem}_edgetpu.tflite"
            return report
    return None


def _accuracy(opts: BuildOptions, plan: _Plan, cpu: Path) -> ClassifierAccuracy | DetectorAccuracy | None:
    """The CPU model's accuracy on ``--eval`` data: the same int8 arithmetic the Edge TPU runs, on any machine."""
    from edgekit.devices import evaluate as evaluate_mod

    evaluating = opts.quantize.eval
    if plan.eval_set is not None:
        ev = evaluate_mod.evaluate(
            cpu, plan.eval_set, "cpu", opts.quantize.mean, opts.quantize.std, labels=opts.quantize.labels
        )
        if ev.errors:
            raise InputError(
                f"--eval {evaluating}: {len(ev.errors)} sample(s) could not be read (first: {ev.errors[0].error})",
                "fix or remove them, then build again",
            )
        return ClassifierAccuracy.from_dict({**ev.result().to_dict(), "model": cpu.name, "data": str(evaluating)})
    if plan.detection_eval is not None:  # a detector's COCO mAP, by pycocotools, of the CPU model
        from edgekit.devices import evaluate_detector as detection_eval_mod

        dev = detection_eval_mod.evaluate_detector(cpu, plan.detection_eval, device="cpu")
        return DetectorAccuracy.from_dict({**dev.to_dict(), "model": cpu.name, "data": str(evaluating)})
    return None


def _input(t: tflite_model.TensorInfo) -> BundleInput:
    q = t.quantization
    scale, zero_point = (float(q.scales[0]), int(q.zero_points[0])) if q and q.scales else (None, None)
    return BundleInput(tuple(int(d) for d in t.shape), t.dtype, scale, zero_point)


def _result(target: Path, made: _Made, work: Path) -> BuildResult:
    """The bundle as written (its manifest read back) and the quantize run, its paths now the bundle's."""
    written = BundleManifest.from_dict(manifest.load(target).manifest)
    quantized = made.quantized
    if quantized is not None:  # the files quantize wrote in the work folder are in the bundle now
        quantized = QuantizeResult.from_dict(in_bundle(quantized.to_dict(), work, str(target) + os.sep))
        quantized = replace(quantized, record=None)  # the record is inside the model (the sidecar stayed behind)
    return BuildResult(str(target), written, quantized, tuple(made.notes))


def _quantize_into(opts: BuildOptions, work: Path) -> _Made:
    """quantize the Keras model into ``work``: the int8 model, quantize's summary, the manifest's ``source``."""
    from edgekit.converters.quantize import AgreementError, quantize
    from edgekit.errors import VerificationError

    stem = Path(opts.quantize.model.rstrip("/\\")).stem
    stem = stem if stem.endswith("_int8") else stem + "_int8"
    cpu = work / f"{stem}.tflite"
    try:
        q = quantize(
            replace(opts.quantize, output=str(cpu), show_progress=opts.show_progress, report=_WarningsOnly(opts.report))
        )
    except AgreementError as exc:  # quantize keeps its output for a look; build writes no bundle of it
        raise VerificationError(f"{exc.reason}; no bundle was written", exc.hint) from None
    summary = q.summary
    src = summary.source
    source = BundleSource(Path(src.path.rstrip("/\\")).name or src.path, src.format, src.output)
    # quantize's own notes (a preprocessing choice, an interval) come first
    return _Made(cpu, None, summary, source, list(summary.notes))


def _tensorflow_version(used: bool) -> str | None:
    """TensorFlow's version where it made the model (None for a bundle of a given .tflite: it played no part)."""
    if not used:
        return None
    from edgekit.converters.tf_quiet import import_tensorflow

    return import_tensorflow().__version__


# Options that only mean something for a Keras model (a .tflite is quantized already), in the order errors name them.
_KERAS_ONLY = (
    "calib",
    "arch",
    "custom_objects",
    "trust_model",
    "output_name",
    "scaling",
    "resize",
    "channels",
    "input_size",
    "io",
    "samples",
    "holdout",
    "seed",
    "tfrecord_key",
    "min_agreement",
    "max_accuracy_drop",
    "strict",
    "no_verify",
)


def tflite_sources(q: QuantizeOptions, float_for_cpu: bool = False) -> tuple[Path, Path | None]:
    """(the CPU int8 model, its compiled twin or None) for ``build MODEL.tflite``; refusals before any work.

    A compiled ``x_edgetpu.tflite`` needs ``x.tflite`` beside it (the bundle's CPU fallback); given
    ``x.tflite``, a compiled ``x_edgetpu.tflite`` beside it is taken by :func:`compiled_twin` (said in a
    note) when its inputs and outputs are that model's. ``float_for_cpu``: a float model is taken (for a board's
    CPU), not refused.
    """
    from edgekit.board.backends import cpu_twin
    from edgekit.edgetpu import compatibility

    defaults = QuantizeOptions(model=q.model)
    flag = {o.name: o.flags[0] for o in QUANTIZE}
    used = [flag[name] for name in _KERAS_ONLY if getattr(q, name) != getattr(defaults, name)]
    if used:
        raise UsageError(
            f"{', '.join(used)}: for a Keras model; {q.model} is a .tflite, quantized already",
            "leave them out: a .tflite takes --labels, --mean/--std, --eval and the compile options; "
            "or build from the Keras model",
        )
    path = Path(q.model)
    info = tflite_model.load(path)  # InvalidModelError (exit 3) for a file that is no TFLite model
    if info.is_compiled:
        twin = cpu_twin(path)
        if not Path(twin).is_file():
            raise InputError(
                f"{path} is compiled for the Edge TPU and its CPU model {Path(twin).name} is not beside it",
                f"put {Path(twin).name} (the model it was compiled from) beside it, or build from that one",
            )
        return Path(twin), path
    boundary = _float_io_boundary(info)
    problems = [
        p
        for p in compatibility.quantize_gate(
            compatibility.check_model(info), info.inputs[0].dtype if info.inputs else "uint8", info
        )
        if not (p.code == "data_type" and p.ops and set(p.ops) <= boundary)
        and not (p.code == "io_type" and _mixed_io(info))
    ]
    if problems and not (float_for_cpu and float_model(info)):  # said in build's notes
        from edgekit.edgetpu import advice

        remedy = advice.quantize_remedy(advice.model_source(info)[0])  # None: a Keras model's, which build takes
        raise InputError(
            f"{path} is not a full-int8 model the Edge TPU compiler takes: "
            + "; ".join(dict.fromkeys(p.message for p in problems))[:400],
            f"{remedy}, then build from that"
            if remedy
            else "quantize the Keras model instead: edgekit build model.keras --calib DATA -o BUNDLE",
        )
    return path, None


def float_model(info: tflite_model.ModelInfo) -> bool:
    """A float model (litert-torch's default export): float input, no int8/uint8 tensor. It runs on a CPU,
    the board's included, never on the Edge TPU."""
    return (
        bool(info.inputs)
        and info.inputs[0].dtype == "float32"
        and not any(t.dtype in ("int8", "uint8") for t in info.main.tensors)
    )


def _float_note(path: Path) -> list[str]:
    from edgekit.edgetpu import advice

    info = tflite_model.load(path)
    if not float_model(info):
        return []
    remedy = advice.quantize_remedy(advice.model_source(info)[0])
    return [
        f"{path.name} is a float model: bundled for the board's CPU only, not compiled (the "
        f"Edge TPU computes int8 only); for the Edge TPU: {remedy or 'edgekit build model.keras --calib DATA'}"
    ]


def _mixed_io(info: tflite_model.ModelInfo) -> bool:
    """A float input with int8/uint8 outputs (the cut of a float-I/O export: its QUANTIZE kept, its DEQUANTIZE
    cut off): the host (de)quantizes each I/O tensor by its own type and quantization, so they need not agree."""
    types = {t.dtype for t in info.inputs} | {t.dtype for t in info.outputs}
    return types <= {"float32", "int8", "uint8"} and {t.dtype for t in info.inputs} == {"float32"}


def _float_io_boundary(info: tflite_model.ModelInfo) -> set[int]:
    """The ops of a float-I/O int8 model that only convert at its edges: a QUANTIZE of a float model input, a
    DEQUANTIZE into a float model output (Ultralytics' LiteRT int8 export, onnx2tf's integer_quant). The compiler
    leaves those on the CPU and maps what is between (tests/fixtures/compiler/v16_float_io_yolov8s_160_CPU.log:
    first op QUANTIZE and last DEQUANTIZE on the CPU, every other op mapped)."""
    ins = {t.index for t in info.inputs if t.dtype in ("float32", "float16")}
    outs = {t.index for t in info.outputs if t.dtype in ("float32", "float16")}
    return {
        op.index
        for op in info.ops
        if (op.name == "QUANTIZE" and set(op.inputs) <= ins) or (op.name == "DEQUANTIZE" and set(op.outputs) <= outs)
    }


def _copy_given(given: tuple[Path, Path | None], work: Path, passed: str) -> _Made:
    """The given int8 model (and its compiled twin) copied into ``work``, as the bundle names them (``passed``: the
    name of the file the user gave, the manifest's source)."""
    cpu_src, compiled_src = given
    cpu = work / cpu_src.name
    shutil.copyfile(str(cpu_src), str(cpu))
    notes = _per_tensor_fc(cpu)
    compiled = None
    if compiled_src is not None:
        compiled = work / (cpu.stem + "_edgetpu.tflite")  # the manifest's naming rule: x.tflite, x_edgetpu.tflite
        shutil.copyfile(str(compiled_src), str(compiled))
    return _Made(cpu, compiled, None, BundleSource(passed, "tflite", None), notes)


def _per_tensor_fc(cpu: Path) -> list[str]:
    """The bundle's CPU model with its per-channel FULLY_CONNECTED weights made per-tensor, which a Coral board's
    tflite-runtime 2.7 computes wrongly (all outputs the zero point; :mod:`edgekit.tflite.fc_per_tensor`);
    a note saying so, or nothing where there is none."""
    info = tflite_model.load(cpu)
    if not [
        op
        for op in info.ops
        if op.name == "FULLY_CONNECTED"
        and len(op.inputs) > 1
        and (t := info.main.tensor(op.inputs[1])) is not None
        and t.quantization is not None
        and t.quantization.per_channel
    ]:
        return []
    from edgekit.detection.cut import object_model, packed_model
    from edgekit.detection.layout import appended_zip
    from edgekit.tflite import fc_per_tensor

    data = cpu.read_bytes()
    try:
        model, _ = object_model(data)
        ops = fc_per_tensor.requantize(model)
        packed = packed_model(model, len(data), appended_zip(data))
    except ImportError:  # no TFLite schema (ai-edge-litert or TensorFlow) to write with
        return [
            "FULLY_CONNECTED weights quantized per channel, left as they are (no ai-edge-litert here to "
            "rewrite them): tflite-runtime 2.7, a Coral board's, outputs the zero point for such a layer; "
            "pip install ai-edge-litert and build again"
        ]
    if not ops:  # weights outside the flatbuffer: nothing rewritten
        return []
    cpu.write_bytes(packed)
    return [
        f"FULLY_CONNECTED op(s) #{', #'.join(map(str, ops))}: weights quantized per channel, requantized per "
        "tensor in the bundle (tflite-runtime 2.7, a Coral board's, reads one scale there and outputs the zero "
        "point); the bundle's model is no longer byte for byte the given one"
    ]


def compiled_twin(cpu: Path, notes: list[str]) -> Path | None:
    """The compiled ``x_edgetpu.tflite`` beside ``x.tflite`` (Ultralytics' format=edgetpu writes both), taken
    when it is compiled and its inputs and outputs (shapes, types, quantization) are ``x.tflite``'s; what was
    decided, either way, is said in ``notes``. None: no such file, or not taken."""
    twin = cpu.with_name(cpu.stem + manifest.EDGETPU_SUFFIX)
    if not twin.is_file():
        return None

    def signature(info: tflite_model.ModelInfo) -> list[tuple]:
        return [
            (
                tuple(t.shape),
                t.dtype,
                t.quantization.scales if t.quantization else None,
                t.quantization.zero_points if t.quantization else None,
            )
            for t in info.inputs + info.outputs
        ]

    try:
        compiled = tflite_model.load(twin)
        why = None if compiled.is_compiled else "it is not compiled for the Edge TPU"
        why = why or (
            None
            if signature(compiled) == signature(tflite_model.load(cpu))
            else "its inputs and outputs differ from that model's (compiled from another model?)"
        )
    except EdgekitError as exc:
        why = exc.message
    if why:
        notes.append(f"{twin.name} beside {cpu.name} is not taken as its compiled model: {why}")
        return None
    notes.append(
        f"took {twin.name} beside {cpu.name} as its compiled model (same inputs and outputs); "
        "move it away to compile afresh, or build with --no-compile for a CPU-only bundle"
    )
    return twin


@dataclass
class _Detected:
    """A given detector .tflite as detect reads it: preprocessing, labels by class id, notes, the manifest entry."""

    spec: PreprocessSpec
    labels: list[str] | None
    notes: list[str]
    entry: BundleDetection


def _looks_like_classifier(info: tflite_model.ModelInfo) -> bool:
    """One output with one dimension over 1 (scores per class): classify's kind of model, not a detector's."""
    outputs = info.outputs
    return len(outputs) == 1 and sum(1 for d in outputs[0].shape if d > 1) <= 1


def _given_detector(path: Path, q: QuantizeOptions, layout: str | None = None) -> _Detected | None:
    """The given .tflite ``path`` read as ``edgekit detect`` reads it (layout from the model, letterbox, scaling
    and names from the exporter's metadata, ``--labels`` over them); None for a classifier, or for a detector
    edgekit quantized (its record says all: :func:`_spec_and_labels`). Errors name ``path``."""
    from edgekit.detection.layout import appended_zip, ultralytics_metadata
    from edgekit.devices.detect import open_detector
    from edgekit.tflite import model_record

    info = tflite_model.load(path)
    found = model_record.find_record(path, info.metadata)
    if found and isinstance(found[0].extra.get("detection"), dict) and found[0].preprocess is not None:
        return None
    if _looks_like_classifier(info):
        return None
    detector = open_detector(path, device="cpu", labels=q.labels, layout=layout, mean=q.mean, std=q.std)
    try:
        names = detector.labels
        labels = [names.get(i, str(i)) for i in range(max(names) + 1)] if names else None
        found_layout = detector.layout  # what the detector settled on (``layout`` is only the flag's word)
        notes = [str(n) for n in detector.notes]
        notes.append(f"a detector: layout {found_layout.describe()}: " + "; ".join(found_layout.source))
        notes.append(f"preprocessing {detector.spec.describe()} ({detector.spec_source})")
        packed = appended_zip(path)  # Ultralytics' metadata.json, kept whole in the manifest (it read as JSON)
        meta = json.loads(packed["metadata.json"]) if ultralytics_metadata(packed) else None
        return _Detected(detector.spec, labels, notes, BundleDetection(found_layout.to_dict(), meta))
    finally:
        detector.opened.close()


def _spec_and_labels(cpu: Path, q: QuantizeOptions, report: Reporter) -> tuple[PreprocessSpec, list[str] | None]:
    """The preprocessing and labels classify would use for ``cpu`` (record, else its input quantization;
    ``--mean/--std`` and ``--labels`` over them), as a spec and a list by class id."""
    from edgekit.converters.quantize import read_labels
    from edgekit.devices.classify import HostClassifier
    from edgekit.tflite import model_record

    found = model_record.find_record(cpu, tflite_model.load(cpu).metadata)
    if found and isinstance(found[0].extra.get("detection"), dict) and found[0].preprocess is not None:
        labels = list(found[0].labels) if found[0].labels else None  # a detector: what quantize recorded for it
        return found[0].preprocess, (read_labels(q.labels) if q.labels else labels)
    clf = HostClassifier(cpu, "cpu", q.labels, q.mean, q.std)
    try:
        for n in clf.notes:
            report.note(str(n))
        names = dict(clf.labels or {})
    finally:
        clf.opened.close()
    labels = [names.get(i, str(i)) for i in range(max(names) + 1)] if names else None
    return clf.spec, labels


def in_bundle(doc: Any, work: Path, replacement: str) -> Any:
    """``doc`` with every path into the work folder (absolute, or relative as it was named) made ``replacement``
    + the name inside the bundle: a manifest must not record the temporary folder it was made in."""
    prefixes = sorted(
        {str(work) + os.sep, str(work.resolve()) + os.sep, work.name + os.sep, os.path.relpath(work) + os.sep},
        key=len,
        reverse=True,
    )

    def fix(x: Any) -> Any:
        if isinstance(x, str):
            for p in prefixes:
                x = x.replace(p, replacement)
            return x
        if isinstance(x, dict):
            return {k: fix(v) for k, v in x.items()}
        if isinstance(x, list):
            return [fix(v) for v in x]
        return x

    return fix(doc)


def _inputs(q: QuantizeOptions) -> list[tuple[str, str]]:
    """(what, path) of every file or folder build reads: the model, its architecture and custom objects, the
    calibration data (given, or recorded beside the model), --eval data, labels, and the record beside the model."""
    from edgekit.converters.quantize import recorded_beside

    found = [
        ("the model", q.model),
        ("--arch", q.arch),
        ("--custom-objects", q.custom_objects),
        ("--calib", q.calib),
        ("--eval", q.eval),
        ("--labels", q.labels),
    ]
    try:
        beside = recorded_beside(q.model) if Path(q.model).exists() else None
    except (
        EdgekitError,
        OSError,
        RecursionError,
    ):  # an unreadable record is quantize's to report; its file is an input all the same
        beside = None
    if beside is not None:
        record, record_file = beside
        found.append(("the record beside the model", str(record_file)))
        recorded = (record.extra.get("calibration") or {}).get("source")
        if q.calib is None and isinstance(recorded, str) and recorded:
            source = Path(recorded)
            found.append(
                ("the recorded calibration data", str(source if source.is_absolute() else record_file.parent / source))
            )
    return [(what, path) for what, path in found if path and path != "random"]


def _unglobbed(path: str) -> str:
    """A TFRecord glob's fixed leading folders (``data/*/train-*`` -> ``data``): where its files lie."""
    parts = Path(path).parts
    for i, part in enumerate(parts):
        if any(ch in part for ch in "*?["):
            return str(Path(*parts[:i])) if i else "."
    return path


def refuse_inputs_inside(target: str | os.PathLike, q: QuantizeOptions) -> None:
    """UsageError (exit 2) when an input lies inside the bundle folder ``target`` (or is it): replacing the
    bundle would delete it. Checked on the paths as given and as resolved (a link into the bundle counts)."""

    def forms(path: str | os.PathLike) -> set[Path]:
        return {Path(os.path.abspath(path)), Path(os.path.realpath(path))}

    outs = forms(target)
    for what, path in _inputs(q):
        for p in forms(_unglobbed(path)):
            if any(p == out or out in p.parents for out in outs):
                raise UsageError(
                    f"{what} {path} lies inside the output folder {target}, which build replaces as a whole",
                    "keep the inputs outside the bundle: move them, or choose another -o",
                )


# ------------------------------------------------------------------------------ writing a bundle (host only)
def check_target(target: str | os.PathLike) -> None:
    """Refuse an output that may not be replaced, or whose folder is missing (before any slow work).

    A new or empty folder is fine; an existing one only when it is exactly an edgekit bundle: a valid
    manifest that lists every file there and nothing else is there (another file, a folder or link of
    the user's, a web app's manifest.json: refused, never deleted). The folder the command runs in, or
    one that holds it, is never replaced.
    """
    target = Path(target)
    if target.exists() or target.is_symlink():
        why = _why_not_replaceable(target)
        if why:
            raise UsageError(
                f"output {target} exists and is not an edgekit bundle that can be replaced: {why}",
                "choose a new or empty folder with -o (an existing bundle is replaced, nothing else is)",
            )
    if not target.parent.is_dir():
        raise BundleError(f"output folder {target.parent} does not exist", "create it first or choose another -o")


def _why_not_replaceable(target: Path) -> str | None:
    """Why the existing ``target`` may not be replaced by a new bundle (None: it may)."""
    if target.is_symlink() or not target.is_dir():
        return "it is a link or a file"
    here = Path.cwd().resolve()
    if target.resolve() == here or target.resolve() in here.parents:
        return "it is the folder you are in, or holds it"
    present = {p.relative_to(target).as_posix(): p for p in target.rglob("*")}
    if not present:
        return None  # an empty folder: nothing to lose
    try:
        listed = set(manifest.load(target).entries)
    except BundleError as exc:
        return exc.message
    except RecursionError:
        return "its manifest.json is nested too deeply to be an edgekit manifest"
    listed.add(manifest.MANIFEST_NAME)
    folders = {parent.as_posix() for rel in listed for parent in PurePosixPath(rel).parents if parent.name}
    extra = sorted(
        rel
        for rel, p in present.items()
        if rel not in listed and not (rel in folders and p.is_dir() and not p.is_symlink()) or p.is_symlink()
    )
    if extra:
        return (
            f"it holds {len(extra)} file(s) the manifest does not list ({', '.join(extra[:3])}"
            + (", ..." if len(extra) > 3 else "")
            + ")"
        )
    return None


def write_bundle(
    target: str | os.PathLike, sources: Mapping[str, str | os.PathLike | bytes], doc: BundleManifest
) -> Path:
    """Write a bundle folder at ``target`` all at once: ``sources`` maps bundle paths to files or bytes.

    The folder is built in a temporary folder beside ``target`` and renamed into place. An existing
    bundle at ``target`` is replaced; anything else there (a file, a folder that is not a bundle) is
    refused, so a wrong ``-o`` never deletes a user's folder. The swap (old bundle aside, new one in)
    runs with stop signals held and the folder locked (:func:`edgekit.fileio.renames_together`), and
    the old bundle is put back on any failure: it is deleted only once the new one is in place. Files
    and folder get the modes the umask gives.
    """
    target = Path(target)
    check_target(target)
    parent = target.parent
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=str(parent)))
    except OSError as exc:
        raise BundleError(
            f"cannot write in output folder {parent} ({exc.strerror or exc})", "choose another -o"
        ) from None
    old = None
    replaced = False
    try:
        entries = []
        for rel, src in sources.items():
            dest = manifest.inside(tmp, rel, "file")
            dest.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(src, bytes):
                dest.write_bytes(src)
            else:
                shutil.copyfile(str(src), str(dest))  # created under the umask, as write_bytes
            entries.append(BundleFile(rel, manifest.sha256_file(dest), dest.stat().st_size))
        written = replace(doc, files=tuple(sorted(entries, key=lambda e: e.path))).to_dict()
        manifest.check_manifest(tmp, written)  # never write a bundle that load() would refuse
        (tmp / manifest.MANIFEST_NAME).write_text(
            json.dumps(written, indent=2, allow_nan=False) + "\n", encoding="utf-8"
        )
        os.chmod(str(tmp), folder_mode())  # mkdtemp made it 0700
        with renames_together([parent]):
            check_target(target)  # again, under the lock: still nothing but a bundle is replaced
            if target.exists():
                old = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old", dir=str(parent)))
                os.replace(str(target), str(old / "bundle"))
            try:
                os.replace(str(tmp), str(target))
            except BaseException:
                if old is not None:
                    os.replace(str(old / "bundle"), str(target))  # put the previous bundle back
                raise
            replaced = True
    except OSError as exc:
        hint = "choose another -o"
        if old is not None and not replaced and (old / "bundle").exists():  # even putting it back failed
            hint = f"the previous bundle is in {old / 'bundle'}: move it back"
        raise BundleError(f"cannot write bundle {target} ({exc.strerror or exc})", hint) from None
    finally:
        shutil.rmtree(str(tmp), ignore_errors=True)
        if old is not None and (replaced or not (old / "bundle").exists()):
            shutil.rmtree(str(old), ignore_errors=True)  # never the previous bundle while it is all there is
    return target


# ------------------------------------------------------------------------------------ a board's bundle
@contextlib.contextmanager
def board_bundle(
    model: PathLike, report: Reporter, labels: PathLike | None = None, layout: str | None = None
) -> Iterator[str]:
    """``model`` as deploy and ``--on`` take it: a bundle folder as it is; a .tflite (a detector or classifier,
    its compiled twin beside it where there is one) made into a bundle in a temporary folder, as
    ``edgekit build MODEL`` would (said in a note; ``labels``, ``layout``: its flags), deleted afterwards. Errors
    name ``model``, never the temporary folder."""
    given = os.fsdecode(model)
    path = Path(given)
    if path.is_dir() or path.suffix.lower() != ".tflite":
        yield given
        return
    stem = path.stem[: -len("_edgetpu")] if path.stem.endswith("_edgetpu") else path.stem
    folder = Path(tempfile.mkdtemp(prefix="edgekit-bundle-"))
    try:
        options = QuantizeOptions(model=given, labels=os.fsdecode(labels) if labels is not None else None)
        build(
            BuildOptions(
                options,
                output=str(folder / (stem or "model")),
                show_progress=False,
                report=report,
                layout=layout,
                float_for_cpu=True,
            )
        )
        report.note(
            f"{given} is a model, not a bundle: bundled on the fly in a temporary folder, as "
            f"edgekit build {given} -o BUNDLE does (build it once to keep the bundle)"
        )
        yield str(folder / (stem or "model"))
    finally:
        shutil.rmtree(str(folder), ignore_errors=True)


# ------------------------------------------------------------------------------------ Python API
def build_bundle(
    model: PathLike,
    *,
    output: PathLike,
    min_runtime: int | None = None,
    timeout: float = _cli("build", "timeout"),
    no_compile: bool = False,
    via: str | None = None,
    identity: PathLike | None = None,
    known_hosts: PathLike | None = None,
    accept_new_host_key: bool = False,
    connect_timeout: float = _cli("build", "connect_timeout"),
    layout: str | None = None,
    show_progress: bool = False,
    report: Reporter = SILENT,
    **quantize_keywords: Any,
) -> BuildResult:
    """``edgekit.build(model, output=...)``: quantize (``quantize_keywords``: every keyword of
    :func:`edgekit.quantize` but ``output``, by name, with its default; QuantizeOptions refuses another), check,
    compile where edgetpu_compiler exists (or ``via`` another machine's, as :func:`edgekit.compile` takes it), and
    write the bundle folder ``output`` with its manifest.json (needs TensorFlow); a
    :class:`~edgekit.results.BuildResult`. No bundle on failure."""
    from edgekit.edgetpu import compile_via
    from edgekit.pipeline.options import model_file, quantize_options

    if via is not None and no_compile:
        raise UsageError("--via with --no-compile: nothing would be compiled there", "leave one of them out")
    there = compile_via.elsewhere(via, identity, known_hosts, accept_new_host_key, connect_timeout, report)
    with model_file(model) as (path, shown):  # an onnx.ModelProto: a temporary .onnx, named as the ModelProto
        quantize = quantize_options(
            path, shown, layout=layout, show_progress=show_progress, report=report, **quantize_keywords
        )
        return build(
            BuildOptions(
                quantize=quantize,
                output=os.fsdecode(output),
                min_runtime=min_runtime,
                timeout=timeout,
                compile=not no_compile,
                via=there,
                layout=layout,
                show_progress=show_progress,
                report=report,
            )
        )
