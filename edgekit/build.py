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
from edgekit.errors import InputError, MissingDependencyError, UsageError
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
    """Build the bundle; return the document ``edgekit build --json`` prints."""
    from edgekit.compiler_locator import find_compiler
    from edgekit.converters import compatibility
    from edgekit.converters.edgetpu_compiler import compile_model
    from edgekit.converters.quantize import AgreementError, quantize
    from edgekit.errors import VerificationError
    from edgekit.converters.tf_quiet import import_tensorflow
    from edgekit.devices import evaluate as evaluate_mod

    target = Path(opts.output)
    require_output_folder(target, opts.report)  # before minutes of work: a wrong -o
    check_target(target)                                                 # fails now
    evaluating = opts.quantize.eval
    eval_set = evaluate_mod.read_set(evaluating, "--eval") if evaluating else None  # a wrong --eval fails now too
    stem = Path(opts.quantize.model.rstrip("/\\")).stem
    stem = stem if stem.endswith("_int8") else stem + "_int8"
    notes: list[str] = []
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".work", dir=target.parent))
    try:
        cpu = work / f"{stem}.tflite"
        try:
            q = quantize(replace(opts.quantize, output=str(cpu), show_progress=opts.show_progress,
                                 report=_WarningsOnly(opts.report)))
        except AgreementError as exc:  # quantize keeps its output for a look; build writes no bundle of it
            raise VerificationError(f"{exc.reason}; no bundle was written", exc.hint) from None
        info = tflite_model.load(cpu)
        min_runtime = opts.min_runtime or compatibility.COMPILER_DEFAULT_MIN_RUNTIME
        check = compatibility.check_model(info, min_runtime)
        compile_report = compiled = None
        if not opts.compile:
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
                compiled = work / f"{stem}_edgetpu.tflite"
        for n in notes:
            opts.report.note(n)
        record = _record_of(cpu)  # what quantize recorded inside the model: the spec and labels, as recorded
        labels = record.labels
        sources: dict[str, Any] = {cpu.name: cpu}
        if compiled is not None:
            sources[compiled.name] = compiled
        if labels:
            sources[manifest.LABELS_NAME] = ("\n".join(printable(x) for x in labels) + "\n").encode()
        accuracy = None
        if eval_set is not None:  # the CPU model: the same int8 arithmetic the Edge TPU runs, on any machine
            ev = evaluate_mod.evaluate(cpu, eval_set, "cpu")
            if ev.errors:
                raise InputError(f"--eval {evaluating}: {len(ev.errors)} sample(s) could not be read "
                                 f"(first: {ev.errors[0]['error']})", "fix or remove them, then build again")
            accuracy = {**ev.to_dict(), "model": cpu.name, "data": str(evaluating)}
        tf = import_tensorflow()
        doc = manifest.make_manifest(
            models={"cpu": cpu.name, "edgetpu": compiled.name if compiled else None},
            labels=manifest.LABELS_NAME if labels else None,
            preprocess=record.preprocess.to_dict(),
            input=_tensor(info.inputs[0]),
            versions={"edgekit": __version__, "tensorflow": tf.__version__,
                      "edgetpu_compiler": compile_report["compiler_version"] if compile_report else None},
            reports={"check": check.to_dict(), "compile": compile_report}, accuracy=accuracy)
        write_bundle(target, sources, doc)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    written = manifest.load(target).manifest
    return {"bundle": str(target), "manifest": written, "quantize": q.summary, "notes": notes}


def _record_of(model: Path) -> Any:
    from edgekit.model_record import METADATA_NAME, ModelRecord

    return ModelRecord.from_json(tflite_model.load(model).metadata[METADATA_NAME], str(model))


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
                 custom_objects: Optional[PathLike] = None, trust_model: bool = False, scaling: Optional[str] = None,
                 mean: Floats = None, std: Floats = None, resize: Optional[str] = None,
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
