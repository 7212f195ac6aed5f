"""The ``edgekit`` command line: each command parses, calls the library and renders text or --json.

No logic lives here, and nothing heavy is imported at module level: ``edgekit --help`` must not
import TensorFlow (each command imports what it needs when it runs).
"""

from __future__ import annotations

import dataclasses
import enum
import math
import os
import signal
import sys
import types
from typing import Any, Callable

import click

from edgekit import __version__
from edgekit.errors import EdgekitError, InputError, InternalError, UsageError, shown


def _debug_requested(ctx: click.Context) -> bool:
    """--debug, or EDGEKIT_DEBUG set to anything but empty, 0, false, no or off."""
    env = os.environ.get("EDGEKIT_DEBUG", "").strip().lower()
    return bool(ctx.find_root().meta.get("edgekit.debug")) or env not in ("", "0", "false", "no", "off")


class _Group(click.Group):
    """Turns every EdgekitError into one line on stderr and its exit code; anything else is a bug."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        """In the order a Coral user works (quantize, check, compile, classify), then the tools."""
        order = ["train", "quantize", "check", "compile", "cut", "build", "classify", "detect", "evaluate", "benchmark",
                 "deploy", "inspect", "devices", "doctor"]
        return sorted(self.commands, key=lambda name: (order.index(name) if name in order else len(order), name))

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except EdgekitError as exc:
            _fail(exc, _debug_requested(ctx))
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM/SIGHUP (_Stopped): cleanups have run
            signum = getattr(exc, "signum", signal.SIGINT)
            _echo("interrupted" if signum == signal.SIGINT else f"stopped by {signal.Signals(signum).name}",
                       err=True)
            sys.exit(128 + signum)
        except Exception as exc:  # a bug: say so, briefly
            from edgekit.errors import first_line

            _fail(InternalError(f"internal error: {type(exc).__name__}: {first_line(exc)}",
                                "this is a bug in edgekit; rerun with --debug and report the traceback"),
                  _debug_requested(ctx))


def _fail(exc: EdgekitError, debug: bool = False) -> None:
    """The one error line and the documented exit code; with debug, the traceback first (same exit code)."""
    if debug:
        import traceback

        traceback.print_exc(file=sys.stderr)
    _echo(f"error: {shown(str(exc))}", err=True)  # one line, whatever names the message holds
    if getattr(exc, "hard_exit", False):  # threads that may never let the interpreter end, or a stdout whose
        for stream in (sys.stdout, sys.stderr):  # buffer would fail again at exit: go now
            try:
                if stream is not None:  # None: the stream was closed when edgekit started
                    stream.flush()
            except OSError:
                pass
        os._exit(exc.exit_code)
    sys.exit(exc.exit_code)


class _BadInputParameter(click.ClickException):
    """A path argument of the wrong kind (a folder for a file, or a file for a folder): bad input, one line, exit 3."""

    exit_code = InputError.exit_code

    def show(self, file: Any = None) -> None:
        _echo(f"error: {shown(self.message)}", err=True)


class _KindPath(click.Path):
    """A click.Path whose wrong kind (``is_wrong``) is one error line and exit 3, not click's usage text."""

    wrong = ""  # what the path is when it is of the wrong kind ("folder" or "file")

    def is_wrong(self, value: str) -> bool:
        raise NotImplementedError

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from edgekit.errors import regular_file

        flag = param.opts[0] if param is not None and param.opts and param.opts[0].startswith("-") else ""
        try:
            regular_file(value, flag)  # a FIFO or a device (/dev/zero) would block or never end
        except InputError as exc:
            raise _BadInputParameter(str(exc)) from None
        if self.is_wrong(value):
            right = "file" if self.wrong == "folder" else "folder"
            flag = param.opts[0] if param is not None and param.opts and param.opts[0].startswith("-") else None
            raise _BadInputParameter(f"{flag + ' ' if flag else ''}{value} is a {self.wrong}, not a {right} "
                                     f"(pass a {right} path)")
        return super().convert(value, param, ctx)


class FilePath(_KindPath):
    """A file path; a folder given instead is one error line and exit 3 (the README's bad input)."""

    wrong = "folder"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(dir_okay=False, **kwargs)

    def is_wrong(self, value: str) -> bool:
        return os.path.isdir(value)


class DirPath(_KindPath):
    """A folder path; a file given instead is one error line and exit 3 (the README's bad input)."""

    wrong = "file"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(file_okay=False, **kwargs)

    def is_wrong(self, value: str) -> bool:
        return os.path.exists(value) and not os.path.isdir(value)


class FloatRange(click.FloatRange):
    """click's FloatRange, refusing nan and infinities (a nan passes every comparison click makes)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        value = super().convert(value, param, ctx)
        if not math.isfinite(value):
            self.fail(f"{value} is not a finite number.", param, ctx)
        return value


#: The longest timeout a flag takes: a week (the compiler's timer and Python's waits overflow far above).
MAX_TIMEOUT = 7 * 24 * 3600.0


def _set_debug(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    if value:
        ctx.find_root().meta["edgekit.debug"] = True
    return value


debug_option = click.option("--debug", is_flag=True, expose_value=False, callback=_set_debug, is_eager=True,
                            help="Show the full traceback on errors.")
json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON document (its schema: the command's page in docs/commands/).")
quiet_option = click.option("--quiet", "-q", is_flag=True, help="No progress bars or informational messages.")


def command(fn: Callable) -> Callable:
    """Register a subcommand with the options every command shares."""
    return cli.command()(debug_option(fn))


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


def _echo(message: Any = "", err: bool = False, **kwargs: Any) -> None:
    """click.echo with every line strict UTF-8 and nothing a terminal obeys but the newline (:func:`shown`): a file
    name that is not UTF-8 prints as \\xNN, never as a lone surrogate the terminal cannot show (or an encoding
    error), and an escape sequence from a model as \\x1b[..., never as a change of the terminal."""
    if not err and sys.stdout is None and kwargs.get("file") is None:  # edgekit started with stdout closed
        from edgekit.errors import OutputError

        raise OutputError("cannot write to standard output (it is closed)",
                          "run edgekit with its standard output open: redirect it to a file or /dev/null")
    try:
        click.echo(shown(message, newlines=True) if isinstance(message, str) else message, err=err, **kwargs)
    except OSError as exc:  # a full disk or device behind > (/dev/full), a closed pipe
        if err:
            raise
        from edgekit.errors import OutputError

        raise OutputError(f"cannot write to standard output ({exc.strerror or exc})",
                          "check where the output goes: the disk may be full, or the reader gone") from None


def emit(as_json: bool, result: Any) -> None:
    """Print a typed result (:mod:`edgekit.results`) as its JSON document (``to_dict()``) or its ``render_text()``."""
    if as_json:
        import json  # here, not at the top: a text run never pays for it (cold start, issue 11)

        _echo(json.dumps(_json_safe(result.to_dict()), indent=2, default=str, allow_nan=False))
    else:
        _echo(_text_safe(result).render_text())


def _emit_json(document: dict[str, Any]) -> None:
    """A document that is no result type (what a failed compile said), as JSON."""
    import json

    _echo(json.dumps(_json_safe(document), indent=2, default=str, allow_nan=False))


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
        return type(x)._make(items) if hasattr(type(x), "_make") else tuple(items)
    if dataclasses.is_dataclass(x) and not isinstance(x, type):  # a typed result and the records inside it
        return dataclasses.replace(x, **{f.name: _text_safe(getattr(x, f.name)) for f in dataclasses.fields(x)
                                         if f.init})
    return x


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", "-V", prog_name="edgekit")
@debug_option
def cli() -> None:
    """Keras image classifiers onto Google's Coral Edge TPU.

    \b
    Typical flow:
      edgekit train images/ -o model.keras           # optional: train an Edge-TPU-friendly model
      edgekit quantize model.h5 --calib images/      # full-int8 .tflite, verified
      edgekit check model_int8.tflite                # offline Edge TPU op mapping
      edgekit compile model_int8.tflite              # runs edgetpu_compiler
      edgekit classify image.jpg -m model_int8_edgetpu.tflite
      edgekit build model.keras -o bundle/           # all of it into one deployable folder
    """


# --------------------------------------------------------------------------------------- inspect
@command
@click.argument("model", type=FilePath())
@json_option
def inspect(model: str, as_json: bool) -> None:
    """Summarize a .tflite model without TensorFlow: I/O, quantization, ops, shapes."""
    from edgekit import api

    emit(as_json, api.inspect(model))


# ----------------------------------------------------------------------------------------- train
@command
@click.argument("data", type=click.Path())
@click.option("--output", "-o", required=True, type=FilePath(), help="The model to write (.keras).")
@click.option("--arch", default="cnn", show_default=True,
              help="cnn, mobilenetv2, or module.py:function / package.module:function called as "
              "function(input_shape, num_classes).")
@click.option("--width", default=1.0, show_default=True, type=FloatRange(min=0.05),
              help="Width multiplier of mobilenetv2.")
@click.option("--epochs", default=10, show_default=True, type=click.IntRange(min=1))
@click.option("--batch-size", default=32, show_default=True, type=click.IntRange(min=1),
              help="Per replica: the global batch is this times the replicas (TPU cores, GPUs).")
@click.option("--input-size", help="WIDTHxHEIGHT images are resized to (default: the first image's size).")
@click.option("--scaling", type=click.Choice(["raw", "0..1", "-1..1"]), default="0..1", show_default=True,
              help="Pixel scaling the model is trained with (recorded for quantize and classify).")
@click.option("--channels", type=click.Choice(["RGB", "BGR", "L"]), default="RGB", show_default=True)
@click.option("--validation-split", default=0.2, show_default=True, type=FloatRange(0.0, 0.9),
              help="Share of each class held out for the per-epoch validation accuracy.")
@click.option("--learning-rate", default=2e-3, show_default=True, type=FloatRange(min=0.0, min_open=True))
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--tfrecord-key", default="image/encoded", show_default=True,
              help="Feature holding the encoded image in TFRecord examples (labels: image/class/label).")
@click.option("--worker-timeout", default=120.0, show_default=True, type=FloatRange(1, MAX_TIMEOUT),
              help="With TF_CONFIG: seconds for every worker to join the cluster, and for each step they share.")
@json_option
@quiet_option
def train(data: str, output: str, arch: str, width: float, epochs: int, batch_size: int, input_size: str | None,
          scaling: str, channels: str, validation_split: float, learning_rate: float, seed: int, tfrecord_key: str,
          worker_timeout: float, as_json: bool, quiet: bool) -> None:
    """Train a Keras classifier on class folders or TFRecords, on a TPU, several workers (TF_CONFIG), several GPUs
    or one device.

    Exit codes: 0 ok, 2 usage (also a malformed TF_CONFIG), 3 bad data, 4 TensorFlow missing, 9 the workers of
    TF_CONFIG did not all join within --worker-timeout, or one stopped answering.
    """
    from edgekit import api

    emit(as_json, api.train(data, output=output, arch=arch, width=width, epochs=epochs, batch_size=batch_size,
                            input_size=_size(input_size), scaling=scaling, channels=channels,
                            validation_split=validation_split, learning_rate=learning_rate, seed=seed,
                            tfrecord_key=tfrecord_key, worker_timeout=worker_timeout, show_progress=not quiet,
                            report=_reporter(quiet)))


# -------------------------------------------------------------------------------------- quantize
def _floats(value: str | None, flag: str) -> tuple[float, ...] | None:
    if value is None:
        return None
    try:
        return tuple(float(v) for v in value.replace(" ", "").split(","))
    except ValueError:
        raise UsageError(f"{flag} expects one number or R,G,B, got {value!r}",
                         f"e.g. {flag} 127.5, or one value per channel: {flag} 123.7,116.3,103.5") from None


def _size(value: str | None) -> tuple[int, int] | None:
    if value is None:
        return None
    parts = value.lower().split("x")
    if len(parts) != 2 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise UsageError(f"--input-size expects WIDTHxHEIGHT, got {value!r}", "e.g. --input-size 224x224")
    return int(parts[0]), int(parts[1])


# The options of quantize, which build takes too (build is quantize plus packaging): defined once here, mapped
# onto QuantizeOptions by _quantize_options. Their defaults are the library's (a test checks both commands).
QUANTIZE_OPTIONS = [
    click.option("--calib", help="Calibration data: an image folder (flat or one subfolder per class), .npy, .npz, "
                 "TFRecord file(s), or 'random' (plumbing tests only). Default: the data recorded beside the model."),
    click.option("--samples", default=300, show_default=True, type=click.IntRange(min=1),
                 help="Calibration samples (seeded, balanced across classes)."),
    click.option("--holdout", default=100, show_default=True, type=click.IntRange(min=0),
                 help="Samples held back from calibration to verify the int8 model on (a quarter of a smaller pool)."),
    click.option("--seed", default=0, show_default=True, type=int, help="Seed for drawing the samples."),
    click.option("--tfrecord-key", default="image/encoded", show_default=True,
                 help="Feature holding the encoded image in TFRecord examples."),
    click.option("--arch", help="For weights-only files: module.py:function or package.module:function that builds "
                 "the model."),
    click.option("--custom-objects", type=FilePath(), help="A .py file defining the model's custom layers/functions."),
    click.option("--trust-model", is_flag=True, help="Allow loading Lambda layers (runs code stored in the file) "
                 "and SavedModels with file or system operations (a SavedModel is a program)."),
    click.option("--output-name", metavar="NAME", help="For a model with several outputs: the one to convert, by "
                 "name (or index); recorded with the model. Without it such a model is refused (exit 5)."),
    click.option("--scaling", type=click.Choice(["raw", "0..1", "-1..1"]),
                 help="Input scaling the model was trained with (default: from the model or its record, else "
                 "measured on labelled calibration data)."),
    click.option("--mean", default=None, help="Mean subtracted from 0..255 pixels (one value or R,G,B); overrides "
                 "--scaling."),
    click.option("--std", default=None, help="Std dividing the pixels after the mean (one value or R,G,B)."),
    click.option("--resize", type=click.Choice(["lanczos", "bilinear", "bicubic", "nearest", "box", "hamming",
                                                "keras"]),
                 help="Resize filter (default lanczos; keras: bilinear without antialias, as Keras pipelines and "
                 "tf.image.resize train with)."),
    click.option("--channels", type=click.Choice(["RGB", "BGR", "L"]),
                 help="Channel order (default RGB, L for 1 channel)."),
    click.option("--input-size", help="WIDTHxHEIGHT, for models that accept any input size."),
    click.option("--io", "io_type", type=click.Choice(["uint8", "int8"]), default="uint8", show_default=True,
                 help="Input/output tensor type."),
    click.option("--labels", type=FilePath(), help="Labels file to record with the model (class folders named "
                 "like its lines are matched by name)."),
    click.option("--eval", "eval_data", type=click.Path(),
                 help="More labelled data (class folders, .npz, TFRecord) to verify the int8 model on, besides the "
                 "held-back and calibration samples (build: its accuracy also goes into manifest.json); for a "
                 "detector, a COCO .json or YOLO folder: the mAP50 drop is gated."),
    click.option("--min-agreement", default=0.9, show_default=True, type=FloatRange(0.0, 1.0),
                 help="Fail (exit 6) when int8 top-1 agrees with float less often than this, beyond doubt (the "
                 "whole 95% interval below it); when the data cannot tell, a warning if the estimate is below, "
                 "else a note."),
    click.option("--max-accuracy-drop", default=1.0, show_default=True, type=FloatRange(0.0, 100.0),
                 help="With labelled data: fail (exit 6) when int8 top-1 accuracy is more than this many points "
                 "below float's, beyond doubt (the whole 95% interval above it); when the data cannot tell, a "
                 "warning if the estimate is above, else a note."),
    click.option("--no-verify", is_flag=True, help="Skip comparing the int8 model with the float model."),
    click.option("--verbose", "-v", is_flag=True, help="Show TensorFlow's own log output."),
]


def quantize_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Apply :data:`QUANTIZE_OPTIONS` (in their order in --help)."""
    for option in reversed(QUANTIZE_OPTIONS):
        f = option(f)
    return f


def _quantize_keywords(quiet: bool, q: dict[str, Any]) -> dict[str, Any]:
    """The API's quantize keywords from the parsed :data:`QUANTIZE_OPTIONS` (``q``: their keyword arguments)."""
    renamed = {"io_type": "io", "eval_data": "eval"}
    keywords = {renamed.get(name, name): value for name, value in q.items()}
    keywords.update(mean=_floats(q["mean"], "--mean"), std=_floats(q["std"], "--std"),
                    input_size=_size(q["input_size"]), show_progress=not quiet, report=_reporter(quiet))
    return keywords


@command
@click.argument("model", type=click.Path())
@quantize_options
@click.option("--output", "-o", type=FilePath(), help="Output .tflite (default <stem>_int8.tflite beside the input).")
@json_option
@quiet_option
def quantize(model: str, output: str | None, as_json: bool, quiet: bool, **q: Any) -> None:
    """Quantize a Keras model (.keras, .h5, weights + --arch, SavedModel) to a verified full-int8 .tflite.

    Exit codes: 0 ok, 2 usage (also: nothing says the preprocessing and the data has no labels),
    3 bad input, 4 TensorFlow missing, 5 conversion failed, 6 verification failed (output kept) or
    the labelled data leaves a preprocessing choice that could change the result (nothing written).
    """
    from edgekit import api
    from edgekit.errors import VerificationError

    try:
        result = api.quantize(model, output=output, **_quantize_keywords(quiet, q))
    except VerificationError as exc:  # the output kept (exit 6), or nothing written and the measurements why
        if exc.result is not None:
            emit(as_json, exc.result)
        raise
    emit(as_json, result)


# ----------------------------------------------------------------------------------------- check
@command
@click.argument("model", type=FilePath())
@click.option("--min-runtime", default=14, show_default=True, type=click.IntRange(10, 14),
              help="Lowest Edge TPU runtime to stay compatible with (edgetpu_compiler -m; compiler 16 defaults to 14).")
@click.option("--allow-multiple-subgraphs", "-a", "multiple_subgraphs", is_flag=True,
              help="Predict a compile with edgetpu_compiler -a (--enable_multiple_subgraphs): every mappable run "
              "of ops becomes its own Edge TPU subgraph.")
@click.option("--strict", is_flag=True, help="Exit 7 when any op is certain to stay on the CPU or the compiler "
              "would certainly refuse the model (a placement only an uncertain rule decides does not fail).")
@json_option
def check(model: str, min_runtime: int, multiple_subgraphs: bool, strict: bool, as_json: bool) -> None:
    """Predict, offline and on any OS, which ops edgetpu_compiler 16 maps to the Edge TPU, and why not.

    Exit codes: 0 (also for a partial mapping), 2 bad option, 3 bad model, 7 with --strict when any op
    is certain to stay on the CPU or the compiler would certainly refuse the model.
    """
    from edgekit import api
    from edgekit.errors import CompatibilityError

    try:
        result = api.check(model, min_runtime=min_runtime, allow_multiple_subgraphs=multiple_subgraphs, strict=strict)
    except CompatibilityError as exc:  # --strict: the report first, then the error line (exit 7)
        emit(as_json, exc.result)
        raise
    emit(as_json, result)


# --------------------------------------------------------------------------------------- compile
@cli.command("compile")
@debug_option
@click.argument("model", type=FilePath())
@click.option("--output-dir", "-o", "out_dir", type=DirPath(),
              help="Folder for the compiled model and its .log (default: beside the input; created if missing).")
@click.option("--min-runtime", type=click.IntRange(10, 14),
              help="Lowest Edge TPU runtime the model must run on (edgetpu_compiler -m; default: the compiler's "
              "own, 14 for compiler 16).")
@click.option("--segments", type=click.IntRange(min=1), help="Split into N pipeline segments (edgetpu_compiler -n).")
@click.option("--search-delegate", is_flag=True,
              help="If the whole model fails, compile the largest leading part that works (edgetpu_compiler -d).")
@click.option("--timeout", default=180.0, show_default=True, type=FloatRange(1, MAX_TIMEOUT),
              help="Seconds before the compile is stopped.")
@json_option
@quiet_option
def compile_command(model: str, out_dir: str | None, min_runtime: int | None, segments: int | None,
                    search_delegate: bool, timeout: float, as_json: bool, quiet: bool) -> None:
    """Run Coral's edgetpu_compiler (x86-64 Linux) and report its mapping; fall back to `check` elsewhere.

    Exit codes: 0 ok, 2 bad option, 3 bad input (model missing, invalid or already compiled; output
    folder that cannot be created or written in), 4 no edgetpu_compiler here (the offline `check` result is printed
    first), 8 the compiler failed or timed out (with the fix when the failure is a known one).
    """
    from edgekit import api
    from edgekit.errors import CompilerError, MissingDependencyError

    try:
        result = api.compile(model, output_dir=out_dir, min_runtime=min_runtime, segments=segments,
                             search_delegate=search_delegate, timeout=timeout, report=_reporter(quiet))
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
@command
@click.argument("model", type=FilePath())
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Where to write the cut model (default: <model>_cut.tflite beside it).")
@json_option
@quiet_option
def cut(model: str, output: str | None, as_json: bool, quiet: bool) -> None:
    """Cut a YOLO detector (.tflite) before its decode, so that all of it maps to the Edge TPU.

    The decode (DFL, anchors, class sigmoid) is what edgetpu_compiler leaves on the CPU; `edgekit detect`
    does it on the host instead. Exit codes: 0 ok, 2 bad option (output over the input), 3 bad input (not a
    .tflite, already compiled, or no YOLO head found).
    """
    from edgekit import api

    emit(as_json, api.cut(model, output=output, report=_reporter(quiet)))


# ------------------------------------------------------------------------------------------ ssh
_SSH_DEFAULTS = {"port": None, "identity": None, "remote_path": "edgekit", "python": "python3", "known_hosts": None,
                 "accept_new_host_key": False, "connect_timeout": 10.0, "timeout": 300.0}


def ssh_options(fn: Callable) -> Callable:
    """The options of every command that reaches a board over SSH (deploy --to, classify --on)."""
    options = [
        click.option("--port", "-p", type=click.IntRange(1, 65535), help="SSH port on the board (default 22)."),
        click.option("--identity", "-i", type=FilePath(),
                     help="Private key to log in with (default: ssh's own keys and agent; never a password)."),
        click.option("--path", "remote_path", default=_SSH_DEFAULTS["remote_path"], show_default=True,
                     help="Folder on the board for bundles and the runner (relative: in the login user's home)."),
        click.option("--python", default=_SSH_DEFAULTS["python"], show_default=True,
                     help="Python on the board (3.7 or newer, with numpy, Pillow and pycoral or tflite_runtime)."),
        click.option("--known-hosts", type=FilePath(),
                     help="known_hosts file to check the board's host key against (default: ssh's own)."),
        click.option("--accept-new-host-key", is_flag=True,
                     help="Trust and record the host key of a board not yet in known_hosts (a CHANGED key is still refused)."),
        click.option("--connect-timeout", default=_SSH_DEFAULTS["connect_timeout"], show_default=True,
                     type=FloatRange(1, MAX_TIMEOUT), help="Seconds to wait for the SSH connection."),
        click.option("--timeout", default=_SSH_DEFAULTS["timeout"], show_default=True,
                     type=FloatRange(1, MAX_TIMEOUT),
                     help="Seconds each remote step (listing, copying, running) may take."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _require_on(on: str | None, ssh: dict[str, Any]) -> None:
    from edgekit.errors import UsageError

    if on is None and any(ssh[name] != default for name, default in _SSH_DEFAULTS.items()):
        raise UsageError("--port, --identity, --path, --python, --known-hosts, --accept-new-host-key and the "
                         "timeouts need --on", "add --on USER@HOST, or leave those options out for a local run")


def _ssh_target(destination: str, ssh: dict[str, Any]) -> Any:
    from edgekit.devices.remote import SshTarget

    return SshTarget(destination, port=ssh["port"], identity=ssh["identity"], known_hosts=ssh["known_hosts"],
                     accept_new_host_key=ssh["accept_new_host_key"], connect_timeout=ssh["connect_timeout"],
                     timeout=ssh["timeout"], python=ssh["python"])


@command
@click.argument("bundle", type=click.Path())
@click.option("--to", "to", required=True, metavar="USER@HOST", help="The board, e.g. mendel@192.168.100.2.")
@ssh_options
@json_option
@quiet_option
def deploy(bundle: str, to: str, as_json: bool, quiet: bool, **ssh: Any) -> None:
    """Copy a bundle and edgekit's runner to a Coral Dev Board over SSH (only files whose sha256 differs there).

    The board needs python3 (3.7 or newer), numpy, Pillow 7 or newer and pycoral or tflite_runtime
    (Coral's apt packages; on Mendel, Pillow from pip: see the README); not edgekit. Then
    `edgekit classify IMAGES --on USER@HOST -m BUNDLE` and `edgekit benchmark --on ...` run there.

    Exit codes: 0 ok, 2 usage, 3 not a bundle (or a file differs from its manifest), 4 no ssh client,
    9 the board cannot be reached, its host key is unknown or changed, the login is refused, it lacks
    python3 or a package, copying failed, or its answer was malformed or past its size bound.
    """
    from edgekit import api

    emit(as_json, api.deploy(bundle, to=_ssh_target(to, ssh), path=ssh["remote_path"]))


# ----------------------------------------------------------------------------------------- build
@command
@click.argument("model", type=click.Path())
@click.option("--output", "-o", required=True, type=click.Path(),
              help="The bundle folder to write (new, empty, or an edgekit bundle to replace: nothing else).")
@quantize_options
@click.option("--min-runtime", type=click.IntRange(10, 14),
              help="Lowest Edge TPU runtime to compile for (default: the compiler's, 14 for compiler 16).")
@click.option("--timeout", default=180.0, show_default=True, type=FloatRange(1, MAX_TIMEOUT),
              help="Seconds before the compile is stopped.")
@click.option("--no-compile", is_flag=True, help="A CPU-only bundle, even where edgetpu_compiler exists.")
@json_option
@quiet_option
def build(model: str, output: str, min_runtime: int | None, timeout: float, no_compile: bool, as_json: bool,
          quiet: bool, **q: Any) -> None:
    """Keras model → deployable bundle: quantize (every quantize option), check, compile (where edgetpu_compiler
    exists), manifest.json. An int8 .tflite (or a compiled x_edgetpu.tflite with x.tflite beside it) is
    checked, compiled, evaluated and bundled as it is.

    Exit codes: 0 ok, 2 usage (also an existing -o that is not an edgekit bundle), 3 bad input, 4 TensorFlow
    missing, 5 conversion failed, 6 verification failed, 8 the compiler failed. No bundle on failure.
    """
    from edgekit.build import build_bundle

    emit(as_json, build_bundle(model, output=output, min_runtime=min_runtime, timeout=timeout, no_compile=no_compile,
                               **_quantize_keywords(quiet, q)))


# -------------------------------------------------------------------------------------- classify
@command
@click.argument("images", nargs=-1, required=True)
@click.option("--model", "-m", required=True, type=click.Path(),
              help="The .tflite model (an *_edgetpu.tflite runs on the Edge TPU, or falls back to its CPU twin), "
              "or a bundle folder from edgekit build (its compiled or CPU model by device, sha256-verified; "
              "with --on, a bundle only).")
@click.option("--labels", "-l", type=FilePath(),
              help="Labels: '0 cat', '0: cat' or one per line (default: the labels recorded with the model).")
@click.option("--top-k", "-k", default=5, show_default=True, type=click.IntRange(min=1), help="Classes per image.")
@click.option("--threshold", "-t", default=float("-inf"), type=float,
              help="Keep only scores >= this (default: keep all; a model without softmax has negative scores).")
@click.option("--device", "-d", default="auto", show_default=True,
              help="auto, cpu, usb, usb:N, pci, pci:N or :N (pycoral's grammar).")
@click.option("--mean", default=None, help="Override the preprocessing mean (one value or R,G,B), on 0..255 pixels.")
@click.option("--std", default=None, help="Override the preprocessing std (one value or R,G,B).")
@click.option("--threads", type=click.IntRange(min=1), help="CPU interpreter threads (default: the cores, at most 4).")
@click.option("--on", "on", metavar="USER@HOST",
              help="Run on a Coral Dev Board (or any board with python3) over SSH: deploys the bundle -m when needed.")
@ssh_options
@json_option
@quiet_option
def classify(images: tuple[str, ...], model: str, labels: str | None, top_k: int, threshold: float, device: str,
             mean: str | None, std: str | None, threads: int | None, on: str | None, as_json: bool, quiet: bool,
             **ssh: Any) -> None:
    """Classify images (files, folders, globs) on an Edge TPU, or on the CPU where there is none.

    With --on USER@HOST, on a board over SSH (the bundle -m is deployed first when it differs there).

    Exit codes: 0 ok, 2 usage, 3 an image failed (the rest are still reported) or a bad model or labels
    file, 4 no interpreter package, 9 the Edge TPU or the interpreter failed, or (--on) the board cannot
    be reached, its host key is unknown or changed, the login is refused, it lacks python3 or packages,
    or its answer was malformed or past its size bound.
    """
    from edgekit import api

    _require_on(on, ssh)
    result = api.classify(images, model=model, labels=labels, top_k=top_k, threshold=threshold, device=device,
                          mean=_floats(mean, "--mean"), std=_floats(std, "--std"), threads=threads,
                          on=_ssh_target(on, ssh) if on else None, remote_path=ssh["remote_path"],
                          report=_reporter(quiet))
    emit(as_json, result)
    _image_errors(result.errors)  # one line per image that failed, with its fix; the rest were classified


# -------------------------------------------------------------------------------------- detect
@command
@click.argument("images", nargs=-1, required=True)
@click.option("--model", "-m", required=True, type=click.Path(),
              help="The detector .tflite (an *_edgetpu.tflite runs on the Edge TPU, or falls back to its CPU twin), "
              "or a bundle folder from edgekit build.")
@click.option("--labels", "-l", type=FilePath(),
              help="Labels: '0 person', '0: person' or one per line (default: the model's metadata or record).")
@click.option("--conf", default=0.25, show_default=True, type=float, help="Keep detections scoring at least this.")
@click.option("--iou", default=0.45, show_default=True, type=float,
              help="Class-wise NMS: a box overlapping a better one of its class by more than this is dropped.")
@click.option("--max-det", default=100, show_default=True, type=int, help="Detections kept per image, best first.")
@click.option("--layout", type=click.Choice(["postprocess", "yolo", "yolov5", "split-dfl", "end2end"]),
              help="The output layout, when the model fits several (default: read from the model; never guessed).")
@click.option("--save", type=click.Path(), metavar="DIR",
              help="Write each image with its boxes drawn into DIR (same file name; never over an input).")
@click.option("--device", "-d", default="auto", show_default=True,
              help="auto, cpu, usb, usb:N, pci, pci:N or :N (pycoral's grammar).")
@click.option("--mean", default=None, help="Override the preprocessing mean (one value or R,G,B), on 0..255 pixels.")
@click.option("--std", default=None, help="Override the preprocessing std (one value or R,G,B).")
@click.option("--threads", type=click.IntRange(min=1), help="CPU interpreter threads (default: the cores, at most 4).")
@click.option("--on", "on", metavar="USER@HOST",
              help="Run on a Coral Dev Board (or any board with python3) over SSH: deploys the bundle -m when needed.")
@ssh_options
@json_option
@quiet_option
def detect(images: tuple[str, ...], model: str, labels: str | None, conf: float, iou: float, max_det: int,
           layout: str | None, save: str | None, device: str, mean: str | None, std: str | None, threads: int | None,
           on: str | None, as_json: bool, quiet: bool, **ssh: Any) -> None:
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

    _require_on(on, ssh)
    result = api.detect(images, model=model, labels=labels, conf=conf, iou=iou, max_det=max_det, layout=layout,
                        save=save, device=device, mean=_floats(mean, "--mean"), std=_floats(std, "--std"),
                        threads=threads, on=_ssh_target(on, ssh) if on else None, remote_path=ssh["remote_path"],
                        report=_reporter(quiet))
    emit(as_json, result)
    _image_errors(result.errors)  # one line per image that failed; the rest were searched


# -------------------------------------------------------------------------------------- evaluate
@command
@click.option("--model", "-m", required=True, type=click.Path(),
              help="The .tflite model (an *_edgetpu.tflite runs on the Edge TPU, or falls back to its CPU twin), "
              "or a bundle folder from edgekit build (its compiled or CPU model by device, sha256-verified).")
@click.option("--data", required=True, type=click.Path(),
              help="Labelled samples: a folder with one subfolder per class, or an .npz with x and y; for a "
              "detector, a COCO annotation file (.json) or a YOLO folder (images/ + labels/*.txt).")
@click.option("--images", type=click.Path(), metavar="DIR",
              help="Detectors: the folder holding a COCO file's images (default: beside it, or its images/).")
@click.option("--against", multiple=True, type=click.Path(), metavar="MODEL",
              help="Detectors: also score this .tflite (e.g. the float one) on the same images; the change of -m "
              "against it, with a paired bootstrap interval. Repeatable.")
@click.option("--conf", type=float, help="Detectors: score threshold (default 0.001, COCO's protocol).")
@click.option("--iou", type=float, help="Detectors: NMS IoU (default 0.7, as Ultralytics' val).")
@click.option("--max-det", type=int, help="Detectors: detections per image (default 100, COCO's protocol).")
@click.option("--layout", type=click.Choice(["postprocess", "yolo", "yolov5", "split-dfl", "end2end"]),
              help="Detectors: the output layout, when the model fits several.")
@click.option("--reference", type=click.Path(),
              help="The float Keras model (.keras, .h5, SavedModel) to compare with; needs TensorFlow.")
@click.option("--no-layers", is_flag=True, help="With --reference: skip the per-layer error report.")
@click.option("--labels", "-l", type=FilePath(),
              help="Labels file (default: recorded with the model); class folders named as labels match by name.")
@click.option("--arch", help="For a weights-only --reference: module.py:function that builds the model.")
@click.option("--custom-objects", type=FilePath(), help="A .py file with the reference's custom layers.")
@click.option("--trust-model", is_flag=True, help="Allow loading Lambda layers, and a SavedModel with file or "
              "system operations, in --reference.")
@click.option("--device", "-d", default="auto", show_default=True, help="auto, cpu, usb, usb:N, pci, pci:N or :N.")
@click.option("--mean", default=None, help="Override the preprocessing mean (one value or R,G,B), on 0..255 pixels.")
@click.option("--std", default=None, help="Override the preprocessing std (one value or R,G,B).")
@click.option("--threads", type=click.IntRange(min=1), help="CPU interpreter threads (default: the cores, at most 4).")
@click.option("--verbose", "-v", is_flag=True, help="Show TensorFlow's own log output (--reference).")
@json_option
@quiet_option
def evaluate(model: str, data: str, images: str | None, against: tuple[str, ...], conf: float | None,
             iou: float | None, max_det: int | None, layout: str | None, reference: str | None, no_layers: bool,
             labels: str | None, arch: str | None, custom_objects: str | None, trust_model: bool, device: str,
             mean: str | None, std: str | None, threads: int | None, verbose: bool, as_json: bool,
             quiet: bool) -> None:
    """Top-1/top-5 accuracy of a .tflite model on labelled data; with --reference, against the float model.

    Given detection data (a COCO .json or a YOLO folder), COCO mAP@[.5:.95], mAP50, mAP75, small/medium/large
    and per-class AP computed by pycocotools, with the protocol printed; --against scores other models on the
    same images and gives the change with a 95% interval.

    Exit codes: 0 ok, 2 usage, 3 bad model, data or labels, 4 no interpreter package (or TensorFlow
    for --reference, or pycocotools for a detector), 9 the Edge TPU or the interpreter failed.
    """
    from edgekit import api

    result = api.evaluate(model, data, reference=reference, no_layers=no_layers, labels=labels, arch=arch,
                          custom_objects=custom_objects, trust_model=trust_model, device=device,
                          mean=_floats(mean, "--mean"), std=_floats(std, "--std"), threads=threads, verbose=verbose,
                          images=images, against=against, conf=conf, iou=iou, max_det=max_det, layout=layout,
                          report=_reporter(quiet))
    emit(as_json, result)
    _image_errors(result.errors)  # one line per image that failed, as classify; the rest were scored


# ------------------------------------------------------------------------------------- benchmark
@command
@click.option("--model", "-m", required=True, type=click.Path(),
              help="The .tflite model (an *_edgetpu.tflite runs on the Edge TPU, or falls back to its CPU twin), "
              "or a bundle folder from edgekit build (its compiled or CPU model by device, sha256-verified; with --on, "
              "a bundle only).")
@click.option("--device", "-d", default="auto", show_default=True, help="auto, cpu, usb, usb:N, pci, pci:N or :N.")
@click.option("-n", "iterations", default=100, show_default=True, type=click.IntRange(min=1),
              help="Timed inferences.")
@click.option("--warmup", default=10, show_default=True, type=click.IntRange(min=0),
              help="Untimed inferences after the first, before timing.")
@click.option("--threads", type=click.IntRange(min=1), help="CPU interpreter threads (default: the cores, at most 4).")
@click.option("--save", type=FilePath(), help="Write this run's JSON document to FILE.")
@click.option("--compare", "compare_with", type=FilePath(),
              help="A file written by --save: exit 10 when p50 latency grew by more than --max-slowdown.")
@click.option("--max-slowdown", default=20.0, show_default=True, type=FloatRange(min=0),
              help="Percent of p50 latency growth --compare allows.")
@click.option("--on", "on", metavar="USER@HOST",
              help="Time it on a Coral Dev Board (or any board with python3) over SSH: deploys the bundle -m when needed.")
@ssh_options
@json_option
@quiet_option
def benchmark(model: str, device: str, iterations: int, warmup: int, threads: int | None, save: str | None,
              compare_with: str | None, max_slowdown: float, on: str | None, as_json: bool, quiet: bool,
              **ssh: Any) -> None:
    """Time loading and inference of a model on the Edge TPU or the CPU: latency percentiles, throughput.

    With --on USER@HOST, on a board over SSH (the bundle -m is deployed first when it differs there).

    Exit codes: 0 ok, 2 usage, 3 bad model or --compare file, 4 no interpreter package, 9 the Edge TPU
    or the interpreter failed (or, with --on, the board cannot be reached, lacks python3 or packages, or
    its answer was malformed or past its size bound),
    10 slower than the --compare run by more than --max-slowdown.
    """
    from edgekit import api
    from edgekit.errors import RegressionError

    _require_on(on, ssh)
    report = _reporter(quiet)
    if save:  # before the run: a wrong --save fails now, and a folder it creates is said
        from edgekit.fileio import require_output_folder

        _refuse_save_over_model(save, model)
        require_output_folder(save, report, "--save")
    regression = None
    try:
        result = api.benchmark(model, device=device, n=iterations, warmup=warmup, threads=threads,
                               compare=compare_with, max_slowdown=max_slowdown, on=_ssh_target(on, ssh) if on else None,
                               remote_path=ssh["remote_path"], report=report)
    except RegressionError as exc:  # the run is still saved and shown, then exit 10
        result, regression = exc.result, exc
    if save:
        import json

        from edgekit.fileio import write_bytes_atomic

        write_bytes_atomic(save, (json.dumps(_json_safe(result.to_dict()), indent=2) + "\n").encode())
    emit(as_json, result)
    if regression is not None:
        raise regression


def _refuse_save_over_model(save: str, model: str) -> None:
    """--save must not overwrite the model file or write into the bundle folder being timed."""
    from pathlib import Path

    target, src = Path(save).resolve(), Path(model).resolve()
    if target == src or (src.is_dir() and src in target.parents) or (
            target.exists() and src.exists() and os.path.samefile(target, src)):
        raise UsageError(f"--save {save} would overwrite the model {model} (or a file of its bundle)",
                         "save the run to a file outside the model and its bundle")


# -------------------------------------------------------------------------------------- devices
@command
@json_option
def devices(as_json: bool) -> None:
    """List the Edge TPUs on this machine (USB Accelerators and PCIe/M.2/Dev Board)."""
    from edgekit import api

    emit(as_json, api.devices())


# --------------------------------------------------------------------------------------- doctor
@command
@json_option
def doctor(as_json: bool) -> None:
    """Check this machine for running and compiling Edge TPU models; each problem comes with its fix.

    Exit code 0 when no check failed (warnings allowed), 1 when any failed.
    """
    from edgekit import api

    result = api.doctor()
    emit(as_json, result)
    if not result.ok:
        sys.exit(1)


class _Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised like Ctrl-C so the same cleanups run (temporary files, the compiler's group)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_stopped(signum: int, _frame: Any) -> None:
    raise _Stopped(signum)


def _stop_like_ctrl_c() -> None:
    """SIGTERM and SIGHUP stop a run as Ctrl-C does (a SIGHUP ignored by nohup stays ignored)."""
    for name in ("SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None and signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, _raise_stopped)


def _fill_closed_std_fds() -> None:
    """A closed standard descriptor (``>&-``) gets /dev/null, as OpenSSH's sanitise_stdfd does: else the next file
    edgekit or a child opens would take its number and receive what is written to standard output or error.
    Python already set ``sys.stdout`` (``sys.stderr``) to None for it, so a write to it still fails (exit 1)."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            try:
                null = os.open(os.devnull, os.O_RDWR)
            except OSError:
                return
            if null != fd:
                os.dup2(null, fd)
                os.close(null)


def main(argv: list[str] | None = None) -> None:
    _fill_closed_std_fds()
    _stop_like_ctrl_c()
    cli.main(args=argv, prog_name="edgekit")


if __name__ == "__main__":
    main()
