"""``edgekit build``: one command from a Keras model to a deployable bundle.

quantize → check → compile (when edgetpu_compiler is here) → evaluate (``--eval``) → bundle
(:mod:`edgekit.manifest`). Every step writes into a temporary folder beside the bundle; the bundle
itself appears all at once at the end, or not at all when a step fails (quantize's verification
included: no bundle of a bad model). It drives both halves (converters/ to make the models,
devices/ to measure them), so it sits above them, beside the CLI.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import types
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any, Optional, Tuple, Union

from edgekit import __version__, manifest, tflite_model
from edgekit.converters.quantize import QuantizeOptions
from edgekit.errors import printable
from edgekit.errors import EdgekitError, InputError, MissingDependencyError, UsageError
from edgekit.fileio import folder_mode, renames_together, require_output_folder
from edgekit.options import Floats, PathLike
from edgekit.report import SILENT, Reporter
from edgekit.manifest import BundleError


@dataclass
class BuildOptions:
    """``edgekit build``: quantize's options (its ``output`` is set by build) plus the bundle's."""

    quantize: QuantizeOptions            # the model, calibration, preprocessing and verification, as for quantize
    output: str
    min_runtime: int | None = None       # edgetpu_compiler -m; None: the compiler's default (14 for compiler 16)
    timeout: float = 180.0
    compile: bool = True                 # False: a CPU-only bundle even where the compiler exists
    show_progress: bool = True
    report: Reporter = SILENT            # notes and warnings, as they arise


class _WarningsOnly(Reporter):
    """quantize's warnings and progress go to the user; its notes (about the work folder it writes in) do not."""

    def __init__(self, report: Reporter):
        self.warn, self.progress = report.warn, report.progress  # type: ignore[method-assign]


def _tensor(t: tflite_model.TensorInfo) -> dict[str, Any]:
    q = t.quantization
    scale, zero_point = (float(q.scales[0]), int(q.zero_points[0])) if q and q.scales else (None, None)
    return {"shape": [int(d) for d in t.shape], "dtype": t.dtype, "scale": scale, "zero_point": zero_point}


def build(opts: BuildOptions) -> dict[str, Any]:
    """Build the bundle; return the document ``edgekit build --json`` prints.

    ``MODEL`` is a Keras model (quantized first) or an int8 ``.tflite`` (a compiled ``x_edgetpu.tflite``
    with its CPU twin ``x.tflite`` beside it): then it is checked, compiled where possible, evaluated
    and bundled as it is.
    """
    from edgekit.compiler_locator import find_compiler
    from edgekit.converters import compatibility
    from edgekit.converters.edgetpu_compiler import compile_model
    from edgekit.devices import evaluate as evaluate_mod

    target = Path(opts.output)
    refuse_inputs_inside(target, opts.quantize)  # first: nothing is touched for an -o that holds an input
    require_output_folder(target, opts.report)  # before minutes of work: a wrong -o
    check_target(target)                                                 # fails now
    evaluating = opts.quantize.eval
    from edgekit.detection_data import is_detection_data

    from_tflite = Path(opts.quantize.model.rstrip("/\\")).suffix.lower() == ".tflite"
    given = tflite_sources(opts.quantize) if from_tflite else None      # a wrong .tflite fails now too
    detection_eval = evaluating if evaluating and is_detection_data(evaluating) else None  # COCO JSON / YOLO folder
    eval_set = evaluate_mod.read_set(evaluating, "--eval") if evaluating and not detection_eval else None  # fails now
    notes: list[str] = []
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".work", dir=target.parent))
    try:
        if given is not None:
            cpu, compiled = _copy_given(given, work)
            q_summary = None
            source = {"model": Path(given[0]).name if given[1] is None else Path(given[1]).name, "format": "tflite",
                      "output": None}
        else:
            cpu, q_summary, source = _quantize_into(opts, work)
            compiled = None
            notes += q_summary.get("notes") or []  # quantize's own notes (a preprocessing choice, an interval)
        info = tflite_model.load(cpu)
        min_runtime = opts.min_runtime or compatibility.COMPILER_DEFAULT_MIN_RUNTIME
        check = compatibility.check_model(info, min_runtime)
        compile_report = None
        if compiled is not None:
            notes.append(f"compiled model as given ({compiled.name}): not compiled again")
        elif not opts.compile:
            notes.append("not compiled (--no-compile): the bundle holds the CPU model only")
        elif not find_compiler():
            notes.append("no edgetpu_compiler here (x86-64 Linux only): the bundle holds the CPU model only; "
                         "build on a machine with the compiler to add the Edge TPU model")
        else:
            try:
                report = compile_model(cpu, work, min_runtime=opts.min_runtime, timeout=opts.timeout,
                                       report=opts.report)
            except MissingDependencyError as exc:  # found but unusable (e.g. a wrong EDGETPU_COMPILER)
                notes.append(f"not compiled: {exc.message}; the bundle holds the CPU model only")
            else:
                compile_report = report.to_dict()
                compiled = work / f"{cpu.stem}_edgetpu.tflite"
        for n in notes:
            opts.report.note(n)
        spec, labels = _spec_and_labels(cpu, opts.quantize, opts.report if given is not None else SILENT)
        sources: dict[str, Any] = {cpu.name: cpu}
        if compiled is not None:
            sources[compiled.name] = compiled
        if labels:
            sources[manifest.LABELS_NAME] = ("\n".join(printable(x) for x in labels) + "\n").encode()
        accuracy = None
        if eval_set is not None:  # the CPU model: the same int8 arithmetic the Edge TPU runs, on any machine
            ev = evaluate_mod.evaluate(cpu, eval_set, "cpu", opts.quantize.mean, opts.quantize.std,
                                       labels=opts.quantize.labels)
            if ev.errors:
                raise InputError(f"--eval {evaluating}: {len(ev.errors)} sample(s) could not be read "
                                 f"(first: {ev.errors[0]['error']})", "fix or remove them, then build again")
            accuracy = {**ev.to_dict(), "model": cpu.name, "data": str(evaluating)}
        elif detection_eval is not None:  # a detector's COCO mAP, by pycocotools, of the CPU model
            from edgekit import detection_eval as detection_eval_mod

            ev = detection_eval_mod.evaluate_detector(cpu, detection_eval, device="cpu")
            accuracy = {**ev.to_dict(), "model": cpu.name, "data": str(evaluating)}
        doc = manifest.make_manifest(
            models={"cpu": cpu.name, "edgetpu": compiled.name if compiled else None},
            labels=manifest.LABELS_NAME if labels else None,
            preprocess=spec.to_dict(),
            input=_tensor(info.inputs[0]),
            versions={"edgekit": __version__, "tensorflow": _tensorflow_version(given is None),
                      "edgetpu_compiler": compile_report["compiler_version"] if compile_report else None},
            reports={"check": check.to_dict(), "compile": compile_report}, accuracy=accuracy, source=source)
        doc = in_bundle(doc, work, "")  # names inside the bundle, never the work folder's
        write_bundle(target, sources, doc)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    written = manifest.load(target).manifest
    if q_summary is not None:  # the files quantize wrote in the work folder are in the bundle now
        q_summary = in_bundle(q_summary, work, str(target) + os.sep)
        q_summary["record"] = None  # the record is inside the model (the sidecar stayed in the work folder)
    return {"bundle": str(target), "manifest": written, "quantize": q_summary, "notes": notes}


def _quantize_into(opts: BuildOptions, work: Path) -> tuple[Path, dict[str, Any], dict[str, Any]]:
    """quantize the Keras model into ``work``: (the int8 model, quantize's summary, the manifest's ``source``)."""
    from edgekit.converters.quantize import AgreementError, quantize
    from edgekit.errors import VerificationError

    stem = Path(opts.quantize.model.rstrip("/\\")).stem
    stem = stem if stem.endswith("_int8") else stem + "_int8"
    cpu = work / f"{stem}.tflite"
    try:
        q = quantize(replace(opts.quantize, output=str(cpu), show_progress=opts.show_progress,
                             report=_WarningsOnly(opts.report)))
    except AgreementError as exc:  # quantize keeps its output for a look; build writes no bundle of it
        raise VerificationError(f"{exc.reason}; no bundle was written", exc.hint) from None
    summary, src = q.summary.to_dict(), q.summary.source
    return cpu, summary, {"model": Path(src.path.rstrip("/\\")).name or src.path, "format": src.format,
                          "output": summary["source"]["output"]}


def _tensorflow_version(used: bool) -> str | None:
    """TensorFlow's version where it made the model (None for a bundle of a given .tflite: it played no part)."""
    if not used:
        return None
    from edgekit.converters.tf_quiet import import_tensorflow

    return import_tensorflow().__version__


# Options that only mean something for a Keras model (a .tflite is quantized already), with the flag named.
_KERAS_ONLY = {"calib": "--calib", "arch": "--arch", "custom_objects": "--custom-objects",
               "trust_model": "--trust-model", "output_name": "--output-name", "scaling": "--scaling",
               "resize": "--resize", "channels": "--channels", "input_size": "--input-size", "io": "--io",
               "samples": "--samples", "holdout": "--holdout", "seed": "--seed", "tfrecord_key": "--tfrecord-key",
               "min_agreement": "--min-agreement", "max_accuracy_drop": "--max-accuracy-drop", "verify": "--no-verify"}


def tflite_sources(q: QuantizeOptions) -> tuple[Path, Path | None]:
    """(the CPU int8 model, its compiled twin or None) for ``build MODEL.tflite``; refusals before any work.

    A compiled ``x_edgetpu.tflite`` needs ``x.tflite`` beside it (the bundle's CPU fallback); given
    ``x.tflite``, a compiled ``x_edgetpu.tflite`` beside it is not taken silently: the model passed is
    compiled (or bundled CPU-only), as for a Keras model.
    """
    from edgekit.converters import compatibility
    from edgekit.devices.backends import cpu_twin

    defaults = QuantizeOptions(model=q.model)
    used = [flag for key, flag in _KERAS_ONLY.items() if getattr(q, key) != getattr(defaults, key)]
    if used:
        raise UsageError(f"{', '.join(used)}: for a Keras model; {q.model} is a .tflite, quantized already",
                         "leave them out: a .tflite takes --labels, --mean/--std, --eval and the compile options; "
                         "or build from the Keras model")
    path = Path(q.model)
    info = tflite_model.load(path)  # InvalidModelError (exit 3) for a file that is no TFLite model
    if info.is_compiled:
        twin = cpu_twin(path)
        if not Path(twin).is_file():
            raise InputError(f"{path} is compiled for the Edge TPU and its CPU model {Path(twin).name} is not beside "
                             "it", f"put {Path(twin).name} (the model it was compiled from) beside it, or build from "
                             "that one")
        return Path(twin), path
    problems = [p for p in compatibility.quantize_gate(compatibility.check_model(info),
                                                       info.inputs[0].dtype if info.inputs else "uint8", info)]
    if problems:
        raise InputError(f"{path} is not a full-int8 model the Edge TPU compiler takes: "
                         + "; ".join(dict.fromkeys(p.message for p in problems))[:400],
                         "quantize the Keras model instead: edgekit build model.keras --calib DATA -o BUNDLE")
    return path, None


def _copy_given(given: tuple[Path, Path | None], work: Path) -> tuple[Path, Path | None]:
    cpu_src, compiled_src = given
    cpu = work / cpu_src.name
    shutil.copyfile(str(cpu_src), str(cpu))
    compiled = None
    if compiled_src is not None:
        compiled = work / (cpu.stem + "_edgetpu.tflite")  # the manifest's naming rule: x.tflite, x_edgetpu.tflite
        shutil.copyfile(str(compiled_src), str(compiled))
    return cpu, compiled


def _spec_and_labels(cpu: Path, q: QuantizeOptions, report: Reporter) -> tuple[Any, list[str] | None]:
    """The preprocessing and labels classify would use for ``cpu`` (record, else its input quantization;
    ``--mean/--std`` and ``--labels`` over them), as a spec and a list by class id."""
    from edgekit import model_record
    from edgekit.converters.quantize import read_labels
    from edgekit.devices.classify import Classifier

    found = model_record.find_record(cpu, tflite_model.load(cpu).metadata)
    if found and isinstance(found[0].extra.get("detection"), dict) and found[0].preprocess is not None:
        labels = list(found[0].labels) if found[0].labels else None  # a detector: what quantize recorded for it
        return found[0].preprocess, (read_labels(q.labels) if q.labels else labels)
    clf = Classifier(cpu, "cpu", q.labels, q.mean, q.std)
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
    prefixes = sorted({str(work) + os.sep, str(work.resolve()) + os.sep, work.name + os.sep,
                       os.path.relpath(work) + os.sep}, key=len, reverse=True)

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

    found = [("the model", q.model), ("--arch", q.arch), ("--custom-objects", q.custom_objects),
             ("--calib", q.calib), ("--eval", q.eval), ("--labels", q.labels)]
    try:
        beside = recorded_beside(q.model) if Path(q.model).exists() else None
    except (EdgekitError, OSError, RecursionError):  # an unreadable record is quantize's to report; its file is an input all the same
        beside = None
    if beside is not None:
        record, record_file = beside
        found.append(("the record beside the model", str(record_file)))
        recorded = (record.extra.get("calibration") or {}).get("source")
        if q.calib is None and isinstance(recorded, str) and recorded:
            source = Path(recorded)
            found.append(("the recorded calibration data", str(source if source.is_absolute()
                                                               else record_file.parent / source)))
    return [(what, path) for what, path in found if path and path != "random"]


def _unglobbed(path: str) -> str:
    """A TFRecord glob's fixed leading folders (``data/*/train-*`` -> ``data``): where its files lie."""
    parts = Path(path).parts
    for i, part in enumerate(parts):
        if any(ch in part for ch in "*?["):
            return str(Path(*parts[:i])) if i else "."
    return path


def refuse_inputs_inside(target: Union[str, os.PathLike], q: QuantizeOptions) -> None:
    """UsageError (exit 2) when an input lies inside the bundle folder ``target`` (or is it): replacing the
    bundle would delete it. Checked on the paths as given and as resolved (a link into the bundle counts)."""
    def forms(path: Union[str, os.PathLike]) -> set[Path]:
        return {Path(os.path.abspath(path)), Path(os.path.realpath(path))}

    outs = forms(target)
    for what, path in _inputs(q):
        for p in forms(_unglobbed(path)):
            if any(p == out or out in p.parents for out in outs):
                raise UsageError(f"{what} {path} lies inside the output folder {target}, which build replaces "
                                 "as a whole", "keep the inputs outside the bundle: move them, or choose another -o")


# ------------------------------------------------------------------------------ writing a bundle (host only)
def check_target(target: Union[str, os.PathLike]) -> None:
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
            raise UsageError(f"output {target} exists and is not an edgekit bundle that can be replaced: {why}",
                             "choose a new or empty folder with -o (an existing bundle is replaced, nothing else is)")
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
    extra = sorted(rel for rel, p in present.items()
                   if rel not in listed and not (rel in folders and p.is_dir() and not p.is_symlink())
                   or p.is_symlink())
    if extra:
        return f"it holds {len(extra)} file(s) the manifest does not list ({', '.join(extra[:3])}" + \
               (", ..." if len(extra) > 3 else "") + ")"
    return None


def write_bundle(target: Union[str, os.PathLike], sources: dict[str, Union[str, os.PathLike, bytes]],
                 doc: dict[str, Any]) -> Path:
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
        raise BundleError(f"cannot write in output folder {parent} ({exc.strerror or exc})",
                          "choose another -o") from None
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
            entries.append({"path": rel, "sha256": manifest.sha256_file(dest), "size_bytes": dest.stat().st_size})
        doc = dict(doc, files=sorted(entries, key=lambda e: e["path"]))
        manifest.check_manifest(tmp, doc)  # never write a bundle that load() would refuse
        (tmp / manifest.MANIFEST_NAME).write_text(json.dumps(doc, indent=2, allow_nan=False) + "\n", encoding="utf-8")
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


# ------------------------------------------------------------------------------------ Python API
def build_bundle(model: PathLike, *, output: PathLike, calib: Optional[str] = None, samples: int = 300,
                 holdout: int = 100, seed: int = 0, tfrecord_key: str = "image/encoded", arch: Optional[str] = None,
                 custom_objects: Optional[PathLike] = None, trust_model: bool = False,
                 output_name: Optional[str] = None, scaling: Optional[str] = None, mean: Floats = None,
                 std: Floats = None, resize: Optional[str] = None,
                 channels: Optional[str] = None, input_size: Union[str, Tuple[int, int], None] = None,
                 io: str = "uint8", labels: Optional[PathLike] = None, eval: Optional[PathLike] = None,
                 min_agreement: float = 0.9, max_accuracy_drop: float = 1.0, no_verify: bool = False,
                 verbose: bool = False, min_runtime: Optional[int] = None, timeout: float = 180.0,
                 no_compile: bool = False, show_progress: bool = False, report: Reporter = SILENT) -> Any:
    """``edgekit.build(model, output=...)``: quantize (every keyword of :func:`edgekit.quantize`), check, compile
    where edgetpu_compiler exists, and write the bundle folder ``output`` with its manifest.json (needs
    TensorFlow); a :class:`~edgekit.results.BuildResult`. No bundle on failure."""
    from edgekit.options import quantize_options
    from edgekit.results import BuildResult

    options = dict(locals())
    doc = build(BuildOptions(quantize=quantize_options(model, None, options, report), output=os.fsdecode(output),
                             min_runtime=min_runtime, timeout=timeout, compile=not no_compile,
                             show_progress=show_progress, report=report))
    return BuildResult.from_dict(doc)


class _CallableModule(types.ModuleType):
    """``edgekit.build(...)`` is the Python API's build (:func:`build_bundle`), while ``from edgekit import build``
    has always been this module: calling the module calls the API, so both hold whichever is imported first."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return build_bundle(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
