"""The ``edgekit`` command line: each command parses, calls the library and renders text or --json.

No logic lives here, and nothing heavy is imported at module level: ``edgekit --help`` must not
import TensorFlow (each command imports what it needs when it runs), and a plain command line of a command
that runs a model does not import click either: :func:`edgekit.cli.base.parse` reads it from the declarations
of :mod:`edgekit.flags`, and anything else goes to click (:mod:`edgekit.cli.app`, which builds each command's
click options from the same declarations). The output and the error line are :mod:`edgekit.cli.base`'s.
"""

from __future__ import annotations

import enum
import math
import os
import sys
import types
from typing import Any, NamedTuple

import edgekit.cli.base as cli_base
from edgekit import flags
from edgekit.cli.base import command
from edgekit.cli.base import echo as _echo
from edgekit.errors import InputError, UsageError, shown

_RUNS = cli_base.RUNS  # each subcommand's function, registered by @command


def _json_safe(x: Any) -> Any:
    """NaN and infinities become null: JSON has no such numbers, and strict parsers refuse them.

    A file name that is not UTF-8 reaches Python with lone surrogates (PEP 383), which strict parsers
    refuse too: its undecodable bytes are written as ``\\xNN`` instead.
    """
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, str):
        from edgekit.errors import printable

        return printable(x)
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    return x


def _reporter(quiet: bool) -> Any:
    """The one reporter commands pass down: notes and progress bars on stderr unless --quiet, warnings always."""
    from edgekit.report import ConsoleReporter

    return ConsoleReporter(quiet, lambda line: _echo(shown(line), err=True))  # each note or warning one line


def emit(as_json: bool, result: Any) -> None:
    """Print a typed result (:mod:`edgekit.results`) as its JSON document (``to_dict()``) or its ``render_text()``."""
    if as_json:
        _echo(_json_text(result.to_dict()))
    else:
        _echo(_text_safe(result).render_text())


def _json_text(document: Any) -> str:
    """A JSON value (a result's ``to_dict()``) as strict, indented JSON text: :func:`_json_safe` first."""
    import json  # here, not at the top: a text run never pays for it (cold start, issue 11)

    return json.dumps(_json_safe(document), indent=2, default=str, allow_nan=False)


def _emit_json(document: Any) -> None:
    """A document that is no result type (what a failed compile said), as JSON."""
    _echo(_json_text(document))


def _image_errors(errors: Any) -> None:
    """classify/evaluate: one ``error:`` line per image that could not be read, then exit 3 (the rest were done)."""
    if errors:
        for e in errors:
            _echo(f"error: {shown(e.error)}", err=True)
        sys.exit(InputError.exit_code)


def _text_safe(x: Any) -> Any:
    """Every string in a result (keys too) as :func:`shown` writes it, newlines included: a name from a model (a
    tensor, a label, metadata) is then one line of text output, never a line of its own; ``--json`` keeps them
    exact. A str Enum stays the member it is (its value is edgekit's own word); read-only mappings stay read-only
    and tuples (named ones too) stay tuples; a typed result is copied with :func:`dataclasses.replace`."""
    import dataclasses

    if isinstance(x, enum.Enum):
        return x
    if isinstance(x, str):
        return shown(x)
    if isinstance(x, types.MappingProxyType):
        return types.MappingProxyType({_text_safe(k): _text_safe(v) for k, v in x.items()})
    if isinstance(x, dict):
        return {_text_safe(k): _text_safe(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_text_safe(v) for v in x]
    if isinstance(x, tuple):
        items = [_text_safe(v) for v in x]
        make = getattr(type(x), "_make", None)  # a NamedTuple's
        return make(items) if make is not None else tuple(items)
    if dataclasses.is_dataclass(x) and not isinstance(x, type):  # a typed result and the records inside it
        return dataclasses.replace(
            x, **{f.name: _text_safe(getattr(x, f.name)) for f in dataclasses.fields(x) if f.init}
        )
    return x


# --------------------------------------------------------------------------------------- inspect
@command("inspect")
def inspect(model: str, as_json: bool) -> None:
    """Summarize a .tflite model without TensorFlow: I/O, quantization, ops, shapes."""
    from edgekit import api

    emit(as_json, api.inspect(model))


# ----------------------------------------------------------------------------------------- train
@command("train")
def train(data: str, input_size: str | None, as_json: bool, quiet: bool, **options: Any) -> None:
    """Train a Keras classifier on class folders or TFRecords, on a TPU, several workers (TF_CONFIG), several GPUs
    or one device.

    Exit codes: 0 ok, 2 usage (also a malformed TF_CONFIG), 3 bad data, 4 TensorFlow missing, 9 the workers of
    TF_CONFIG did not all join within --worker-timeout, or one stopped answering.
    """
    from edgekit import api

    emit(
        as_json,
        api.train(data, input_size=_size(input_size), show_progress=not quiet, report=_reporter(quiet), **options),
    )


# -------------------------------------------------------------------------------------- quantize
def _floats(value: str | None, flag: str) -> tuple[float, ...] | None:
    from edgekit.pipeline.options import floats_text

    return None if value is None else floats_text(value, flag)


def _size(value: str | None) -> tuple[int, int] | None:
    if value is None:
        return None
    parts = value.lower().split("x")
    if len(parts) != 2 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise UsageError(f"--input-size expects WIDTHxHEIGHT, got {value!r}", "e.g. --input-size 224x224")
    return int(parts[0]), int(parts[1])


@command("quantize")
def quantize(
    model: str, mean: str | None, std: str | None, input_size: str | None, as_json: bool, quiet: bool, **options: Any
) -> None:
    """Quantize a Keras model (.keras, .h5, weights + --arch, SavedModel) or ONNX model to a verified int8 .tflite.

    Exit codes: 0 ok, 2 usage (also: nothing says the preprocessing and the data has no labels),
    3 bad input, 4 TensorFlow missing, 5 conversion failed, 6 verification failed (output kept) or
    the labelled data leaves a preprocessing choice that could change the result (nothing written).
    """
    from edgekit import api
    from edgekit.errors import VerificationError

    try:
        result = api.quantize(
            model,
            mean=_floats(mean, "--mean"),
            std=_floats(std, "--std"),
            input_size=_size(input_size),
            show_progress=not quiet,
            report=_reporter(quiet),
            **options,
        )
    except VerificationError as exc:  # the output kept (exit 6), or nothing written and the measurements why
        if exc.result is not None:
            emit(as_json, exc.result)
        raise
    emit(as_json, result)


# ----------------------------------------------------------------------------------------- check
@command("check")
def check(model: str, min_runtime: int, allow_multiple_subgraphs: bool, strict: bool, as_json: bool) -> None:
    """Predict, offline and on any OS, which ops edgetpu_compiler 16 maps to the Edge TPU, and why not.

    Exit codes: 0 (also for a partial mapping), 2 bad option, 3 bad model, 7 with --strict when any op
    is certain to stay on the CPU or the compiler would certainly refuse the model.
    """
    from edgekit import api
    from edgekit.errors import CompatibilityError

    try:
        result = api.check(
            model, min_runtime=min_runtime, allow_multiple_subgraphs=allow_multiple_subgraphs, strict=strict
        )
    except CompatibilityError as exc:  # --strict: the report first, then the error line (exit 7)
        emit(as_json, exc.result)
        raise
    emit(as_json, result)


# --------------------------------------------------------------------------------------- compile
@command("compile")
def compile_command(model: str, as_json: bool, quiet: bool, **options: Any) -> None:
    """Run Coral's edgetpu_compiler (x86-64 Linux) and report its mapping; fall back to `check` elsewhere.

    Exit codes: 0 ok, 2 bad option, 3 bad input (model missing, invalid or already compiled; output
    folder that cannot be created or written in), 4 no edgetpu_compiler here (the offline `check` result is printed
    first), 8 the compiler failed or timed out (with the fix when the failure is a known one).
    """
    from edgekit import api
    from edgekit.errors import CompilerError, MissingDependencyError

    try:
        result = api.compile(model, report=_reporter(quiet), **options)
    except MissingDependencyError as err:  # no compiler here: the offline prediction instead
        check = getattr(err, "check", None)
        if check is not None and as_json:
            _emit_json({"compiled": False, "reason": err.message, "check": check.to_dict()})
        elif check is not None:
            _echo(f"{shown(err.message)}; here is the offline prediction (`edgekit check`) instead:\n")
            _echo(_text_safe(check).render_text())
        raise
    except CompilerError as err:  # --json still describes what the compiler said (the error line follows)
        if as_json:
            doc = err.report.to_dict() if err.report is not None else {"succeeded": False}
            _emit_json({**doc, "succeeded": False, "error": str(err)})
        raise
    emit(as_json, result)


# ------------------------------------------------------------------------------------------- cut
@command("cut")
def cut(model: str, output: str | None, as_json: bool, quiet: bool) -> None:
    """Cut a YOLO detector (.tflite) before its decode, so that all of it maps to the Edge TPU.

    The decode (DFL, anchors, class sigmoid) is what edgetpu_compiler leaves on the CPU; `edgekit detect`
    does it on the host instead. Exit codes: 0 ok, 2 bad option (output over the input), 3 bad input (not a
    .tflite, a malformed graph, already compiled, no YOLO detection head, or a segmentation/pose head).
    """
    from edgekit import api

    emit(as_json, api.cut(model, output=output, report=_reporter(quiet)))


# ------------------------------------------------------------------------------------------ ssh
class Ssh(NamedTuple):
    """The SSH options as given (:data:`edgekit.flags.SSH`): how to reach the board of --on or --to."""

    port: int | None
    identity: str | None
    remote_path: str
    python: str
    known_hosts: str | None
    accept_new_host_key: bool
    connect_timeout: float
    timeout: float

    def require(self, on: str | None) -> None:
        """Any of them given without --on is a usage error (a local run would ignore it)."""
        if on is None and any(getattr(self, o.name) != o.default for o in flags.SSH):
            raise UsageError(
                "--port, --identity, --path, --python, --known-hosts, --accept-new-host-key and the timeouts need --on",
                "add --on USER@HOST, or leave those options out for a local run",
            )

    def target(self, destination: str | None) -> Any:
        """The :class:`edgekit.devices.remote.SshTarget` the API takes as ``on`` (None: run here)."""
        if destination is None:
            return None
        from edgekit.devices.remote import SshTarget

        return SshTarget(
            destination,
            port=self.port,
            identity=self.identity,
            known_hosts=self.known_hosts,
            accept_new_host_key=self.accept_new_host_key,
            connect_timeout=self.connect_timeout,
            timeout=self.timeout,
            python=self.python,
        )


@command("deploy")
def deploy(bundle: str, to: str, as_json: bool, quiet: bool, **ssh: Any) -> None:
    """Copy a bundle and edgekit's runner to a Coral Dev Board over SSH (only files whose sha256 differs there).

    A .tflite (with its compiled twin x_edgetpu.tflite beside it, where there is one) is bundled on the fly
    first, as edgekit build would, in a temporary folder; a note says so.

    The board needs python3 (3.7 or newer), numpy, Pillow 7 or newer and pycoral or tflite_runtime
    (Coral's apt packages; on Mendel, Pillow from pip: see the README); not edgekit. Then
    `edgekit classify IMAGES --on USER@HOST -m BUNDLE` and `edgekit benchmark --on ...` run there.

    Exit codes: 0 ok, 2 usage, 3 not a bundle (or a file differs from its manifest), 4 no ssh client,
    9 the board cannot be reached, its host key is unknown or changed, the login is refused, it lacks
    python3 or a package, copying failed, or its answer was malformed or past its size bound.
    """
    from edgekit import api

    board = Ssh(**ssh)
    emit(as_json, api.deploy(bundle, to=board.target(to), path=board.remote_path, report=_reporter(quiet)))


# ----------------------------------------------------------------------------------------- build
@command("build")
def build(
    model: str, mean: str | None, std: str | None, input_size: str | None, as_json: bool, quiet: bool, **options: Any
) -> None:
    """Keras model → deployable bundle: quantize (every quantize option), check, compile (where edgetpu_compiler
    exists), manifest.json. An int8 .tflite (or a compiled x_edgetpu.tflite with x.tflite beside it) is
    checked, compiled, evaluated and bundled as it is; a detector's layout, letterbox and class names are
    read from the model and its exporter's metadata.

    Exit codes: 0 ok, 2 usage (also an existing -o that is not an edgekit bundle), 3 bad input, 4 TensorFlow
    missing, 5 conversion failed, 6 verification failed, 8 the compiler failed. No bundle on failure.
    """
    from edgekit.pipeline.build import build_bundle

    emit(
        as_json,
        build_bundle(
            model,
            mean=_floats(mean, "--mean"),
            std=_floats(std, "--std"),
            input_size=_size(input_size),
            show_progress=not quiet,
            report=_reporter(quiet),
            **options,
        ),
    )


# -------------------------------------------------------------------------------------- classify
@command("classify")
def classify(
    images: tuple[str, ...],
    model: str,
    labels: str | None,
    top_k: int,
    threshold: float,
    device: str,
    mean: str | None,
    std: str | None,
    threads: int | None,
    on: str | None,
    as_json: bool,
    quiet: bool,
    **ssh: Any,
) -> None:
    """Classify images (files, folders, globs) on an Edge TPU, or on the CPU where there is none.

    With --on USER@HOST, on a board over SSH (the bundle -m is deployed first when it differs there).

    Exit codes: 0 ok, 2 usage, 3 an image failed (the rest are still reported) or a bad model or labels
    file, 4 no interpreter package, 9 the Edge TPU or the interpreter failed, or (--on) the board cannot
    be reached, its host key is unknown or changed, the login is refused, it lacks python3 or packages,
    or its answer was malformed or past its size bound.
    """
    from edgekit import api

    board = Ssh(**ssh)
    board.require(on)
    result = api.classify(
        images,
        model=model,
        labels=labels,
        top_k=top_k,
        threshold=threshold,
        device=device,
        mean=_floats(mean, "--mean"),
        std=_floats(std, "--std"),
        threads=threads,
        on=board.target(on),
        remote_path=board.remote_path,
        report=_reporter(quiet),
    )
    emit(as_json, result)
    _image_errors(result.errors)  # one line per image that failed, with its fix; the rest were classified


# -------------------------------------------------------------------------------------- detect
@command("detect")
def detect(
    images: tuple[str, ...],
    model: str,
    labels: str | None,
    conf: float,
    iou: float,
    max_det: int,
    layout: str | None,
    save: str | None,
    device: str,
    mean: str | None,
    std: str | None,
    threads: int | None,
    on: str | None,
    as_json: bool,
    quiet: bool,
    **ssh: Any,
) -> None:
    """Detect objects in images (files, folders, globs) on an Edge TPU, or on the CPU where there is none.

    With --on USER@HOST, on a board over SSH (the bundle -m is deployed first when it differs there).

    The output layout (TFLite_Detection_PostProcess, YOLO [1, 4+nc, N], YOLOv5, split DFL head, end-to-end
    [1, K, 6]) is read from the model; boxes are mapped back through the resize or letterbox the model was
    fed. Invoke and host post-processing (decode + NMS) are timed apart.

    Exit codes: 0 ok, 2 usage, 3 an image failed (the rest are still reported), a bad model or labels file,
    or a model whose outputs fit no layout or several (--layout settles it), 4 no interpreter package,
    9 the Edge TPU or the interpreter failed, or (--on) the board cannot be reached, its host key is unknown
    or changed, the login is refused, or it lacks python3 or packages.
    """
    from edgekit import api

    board = Ssh(**ssh)
    board.require(on)
    result = api.detect(
        images,
        model=model,
        labels=labels,
        conf=conf,
        iou=iou,
        max_det=max_det,
        layout=layout,
        save=save,
        device=device,
        mean=_floats(mean, "--mean"),
        std=_floats(std, "--std"),
        threads=threads,
        on=board.target(on),
        remote_path=board.remote_path,
        report=_reporter(quiet),
    )
    emit(as_json, result)
    _image_errors(result.errors)  # one line per image that failed; the rest were searched


# -------------------------------------------------------------------------------------- evaluate
@command("evaluate")
def evaluate(
    model: str, data: str, mean: str | None, std: str | None, as_json: bool, quiet: bool, **options: Any
) -> None:
    """Top-1/top-5 accuracy of a .tflite model on labelled data; with --reference, against the float model.

    Given detection data (a COCO .json or a YOLO folder), COCO mAP@[.5:.95], mAP50, mAP75, small/medium/large
    and per-class AP computed by pycocotools, with the protocol printed; --against scores other models on the
    same images and gives the change with a 95% interval.

    Exit codes: 0 ok, 2 usage, 3 bad model, data or labels, 4 no interpreter package (or TensorFlow
    for --reference, pycocotools for a detector, matplotlib for --plots), 6 a drop beyond --max-drop for sure,
    9 the Edge TPU or the interpreter failed.
    """
    import inspect as python_inspect

    from edgekit import api
    from edgekit.detection.data import is_detection_data
    from edgekit.errors import VerificationError

    run = api.evaluate
    if is_detection_data(data) and not options.get("reference"):  # (evaluate refuses --reference for a detector)
        run = api.evaluate_detector
        taken = python_inspect.signature(run).parameters
        options = {name: value for name, value in options.items() if name in taken}
    failed = None
    try:
        result = run(
            model, data, mean=_floats(mean, "--mean"), std=_floats(std, "--std"), report=_reporter(quiet), **options
        )
    except VerificationError as exc:  # --max-drop failed: the result is still shown, then exit 6
        if exc.result is None:
            raise
        result, failed = exc.result, exc
    emit(as_json, result)
    _image_errors(result.errors)  # one line per image that failed, as classify; the rest were scored
    if failed is not None:
        raise failed


# ------------------------------------------------------------------------------------- benchmark
@command("benchmark")
def benchmark(
    model: str,
    device: str,
    n: int,
    warmup: int,
    threads: int | None,
    save: str | None,
    compare: str | None,
    max_slowdown: float,
    on: str | None,
    as_json: bool,
    quiet: bool,
    **ssh: Any,
) -> None:
    """Time loading and inference of a model on the Edge TPU or the CPU: latency percentiles, throughput.

    With --on USER@HOST, on a board over SSH (the bundle -m is deployed first when it differs there).

    Exit codes: 0 ok, 2 usage, 3 bad model or --compare file, 4 no interpreter package, 9 the Edge TPU
    or the interpreter failed (or, with --on, the board cannot be reached, lacks python3 or packages, or
    its answer was malformed or past its size bound),
    10 slower than the --compare run by more than --max-slowdown.
    """
    from edgekit import api
    from edgekit.errors import RegressionError

    board = Ssh(**ssh)
    board.require(on)
    report = _reporter(quiet)
    if save:  # before the run: a wrong --save fails now, and a folder it creates is said
        from edgekit.fileio import require_output_folder

        _refuse_save_over_model(save, model)
        require_output_folder(save, report, "--save")
    regression = None
    try:
        result = api.benchmark(
            model,
            device=device,
            n=n,
            warmup=warmup,
            threads=threads,
            compare=compare,
            max_slowdown=max_slowdown,
            on=board.target(on),
            remote_path=board.remote_path,
            report=report,
        )
    except RegressionError as exc:  # the run is still saved and shown, then exit 10
        result, regression = exc.result, exc
    if save:
        from edgekit.fileio import write_bytes_atomic

        write_bytes_atomic(save, (_json_text(result.to_dict()) + "\n").encode())
    emit(as_json, result)
    if regression is not None:
        raise regression


def _refuse_save_over_model(save: str, model: str) -> None:
    """--save must not overwrite the model file or write into the bundle folder being timed."""
    from pathlib import Path

    target, src = Path(save).resolve(), Path(model).resolve()
    if (
        target == src
        or (src.is_dir() and src in target.parents)
        or (target.exists() and src.exists() and os.path.samefile(target, src))
    ):
        raise UsageError(
            f"--save {save} would overwrite the model {model} (or a file of its bundle)",
            "save the run to a file outside the model and its bundle",
        )


# -------------------------------------------------------------------------------------- devices
@command("devices")
def devices(as_json: bool) -> None:
    """List the Edge TPUs on this machine (USB Accelerators and PCIe/M.2/Dev Board)."""
    from edgekit import api

    emit(as_json, api.devices())


# --------------------------------------------------------------------------------------- doctor
@command("doctor")
def doctor(as_json: bool) -> None:
    """Check this machine for running and compiling Edge TPU models; each problem comes with its fix.

    Exit code 0 when no check failed (warnings allowed), 1 when any failed.
    """
    from edgekit import api

    result = api.doctor()
    emit(as_json, result)
    if not result.ok:
        sys.exit(1)
