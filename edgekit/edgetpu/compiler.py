"""Drive the real ``edgetpu_compiler`` and read what it says.

Three parts, kept apart:

* pure parsers over text (:func:`parse_compiler_output`, :func:`parse_operation_log`,
  :func:`parse_size`, :func:`diagnose`), tested on real compiler outputs copied into
  ``tests/fixtures/compiler``;
* one narrow seam that runs a subprocess (:func:`run_subprocess`, an argument list, never a
  shell, under a timeout), replaceable in tests;
* :func:`compile_model`, which finds the compiler, runs it into a private folder inside the output
  folder, checks its exit code *and* its output (it can exit 0 after "Compilation failed!"), parses
  stdout and the ``.log``, and only then renames the outputs into place.

``edgetpu_compiler`` exists only for x86-64 Linux (Debian/Ubuntu packages from Coral's apt
repository); elsewhere :func:`find_compiler` returns None and the CLI falls back to ``check``.
"""

from __future__ import annotations

import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgekit.edgetpu.compiler_locator import (  # noqa: F401  (part of this module's API)
    ENV_VAR,
    INSTALL_HINT,
    NOT_COMPILER_HINT,
    OTHER_PLATFORM_HINT,
    VERSION_TIMEOUT_S,
    find_compiler,
    parse_version,
    platform_supported,
    version_from_output,
    version_major,
)
from edgekit.errors import RUNTIME_MISMATCH, CompilerError, InputError, MissingDependencyError, UsageError
from edgekit.fileio import publish, refuse_folders, require_output_folder
from edgekit.records import freeze
from edgekit.report import SILENT, Reporter
from edgekit.results.compile import NO_SEGMENT, CompileOp, CompileResult, CompileSegment
from edgekit.tflite import model as tflite_model
from edgekit.tflite.model import EDGETPU_CUSTOM_OP, ModelInfo

if TYPE_CHECKING:
    from edgekit.results.check import CheckResult

DEFAULT_TIMEOUT_S = 180
_UNITS = {"B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(B|KiB|MiB|GiB)\s*$")
_ROW = re.compile(r"^(\S+)\s+(\d+)\s+(\S.*?)\s*$")
_HEADER = re.compile(r"^Operator\s+Count\s+Status\s*$")


# ------------------------------------------------------------------------------------ parsers
def parse_size(text: str) -> int:
    """``"1.30MiB"`` -> bytes (rounded). Raises ValueError on anything else."""
    m = _SIZE.match(text)
    if not m:
        raise ValueError(f"not a compiler size: {text!r}")
    return int(round(float(m.group(1)) * _UNITS[m.group(2)]))


def _parse_table(lines: list[str], start: int) -> tuple[list[CompileOp], int]:
    """Rows after the header at ``start``; returns (rows, index of the first line after the table)."""
    rows = []
    i = start + 1
    while i < len(lines) and not lines[i].strip():
        i += 1
    while i < len(lines):
        m = _ROW.match(lines[i])
        if not m:
            break
        rows.append(CompileOp(m.group(1), int(m.group(2)), m.group(3)))
        i += 1
    return rows, i


def parse_operation_log(text: str) -> tuple[str | None, str | None, str | None, list[CompileOp]]:
    """(compiler version, input, output, rows) of a ``*_edgetpu.log`` file (first model in it)."""
    lines = text.splitlines()
    version = parse_version(text)
    inp = out = None
    rows: list[CompileOp] = []
    for i, line in enumerate(lines):
        if line.startswith("Input: ") and inp is None:
            inp = line[len("Input: ") :].strip()
        elif line.startswith("Output: ") and out is None:
            out = line[len("Output: ") :].strip()
        elif _HEADER.match(line):
            rows, _ = _parse_table(lines, i)
            break
    return version, inp, out, rows


_FIELDS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "Input model": ("input_model", str),
    "Input size": ("input_size_bytes", parse_size),
    "Output model": ("output_model", str),
    "Output size": ("output_size_bytes", parse_size),
    "On-chip memory used for caching model parameters": ("on_chip_used_bytes", parse_size),
    "On-chip memory remaining for caching model parameters": ("on_chip_remaining_bytes", parse_size),
    "Off-chip memory used for streaming uncached model parameters": ("off_chip_used_bytes", parse_size),
    "Number of Edge TPU subgraphs": ("subgraphs", int),
    "Total number of operations": ("total_ops", int),
    "Operation log": ("operation_log", str),
    "Number of operations that will run on Edge TPU": ("edgetpu_ops", int),
    "Number of operations that will run on CPU": ("cpu_ops", int),
}
_COMPILED_IN = re.compile(r"^Models? compiled successfully in (\d+) ms\.")


def parse_compiler_output(text: str, returncode: int | None = None, logs: Mapping[str, str] = {}) -> CompileResult:
    """Parse the console output of one ``edgetpu_compiler`` run (versions 2.x, 14, 15, 16).

    ``succeeded`` needs both a zero exit code (when given) and the compiler's own word: v16 ends
    with "Compilation succeeded!"; older versions print "Model compiled successfully" and no
    failure line. ``logs``: the ``.log`` files the compiler wrote (name -> text), whose op tables stand in
    for the one stdout did not print.
    """
    lines = text.splitlines()
    sections: list[CompileSegment] = []  # one per model the compiler printed figures about
    errors: list[str] = []
    compile_ms: int | None = None
    saw_success_line = saw_failure_line = False
    final_word: str | None = None
    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        m = _COMPILED_IN.match(stripped)
        if m:
            compile_ms = int(m.group(1))
            saw_success_line = True
        elif stripped.startswith("Compilation succeeded!"):
            final_word = "succeeded"
        elif stripped.startswith("Compilation failed!"):
            final_word = "failed"
        elif (
            stripped.startswith(("ERROR:", "Compilation failed:", "Invalid model", "Failed"))
            or stripped in ("Model could not be parsed", "Model not quantized")
            or "Internal compiler error" in stripped
        ):
            errors.append(stripped)
            saw_failure_line = True
        elif _HEADER.match(stripped):
            rows, i = _parse_table(lines, i)
            _add_ops(sections, -1, rows)
            continue
        elif ":" in stripped and stripped.partition(":")[0] in _FIELDS:
            key, _, value = stripped.partition(":")
            attr, conv = _FIELDS[key]
            if key == "Input model" or not sections:
                sections.append(NO_SEGMENT)
            try:
                sections[-1] = replace(sections[-1], **{attr: conv(value.strip())})
            except ValueError:
                errors.append(f"unparsed compiler line: {stripped}")
        i += 1
    if not any(s.ops for s in sections):
        _log_tables(sections, logs)
    ok_exit = returncode in (None, 0)
    if final_word is not None:  # v16 always ends with its verdict
        succeeded = ok_exit and final_word == "succeeded"
    else:
        succeeded = ok_exit and saw_success_line and not saw_failure_line
    return _result(parse_version(text), succeeded, compile_ms, returncode, sections, errors)


def _add_ops(sections: list[CompileSegment], at: int, rows: list[CompileOp]) -> None:
    """``rows`` added to the op table of ``sections[at]`` (a first section made where there is none)."""
    if not sections:
        sections.append(NO_SEGMENT)
    sections[at] = replace(sections[at], ops=sections[at].ops + tuple(rows))


def _log_tables(sections: list[CompileSegment], logs: Mapping[str, str]) -> None:
    """The op tables of the ``.log`` files, each into the section naming it as its operation log (else the first)."""
    for name, text in logs.items():
        _, _, _, rows = parse_operation_log(text)
        logged = [k for k, s in enumerate(sections) if s.operation_log and Path(s.operation_log).name == name]
        _add_ops(sections, logged[0] if logged else 0, rows)


def _result(
    version: str | None,
    succeeded: bool,
    compile_ms: int | None,
    returncode: int | None,
    sections: list[CompileSegment],
    errors: list[str],
) -> CompileResult:
    """The document of what the compiler said: the last (or only) model's figures, every op row, the segments
    when there are several (its command and outputs are filled in by :func:`compile_model`)."""
    m = sections[-1] if sections else NO_SEGMENT
    ops = tuple(r for s in sections for r in s.ops)
    per_status: dict[str, int] = {}
    for r in ops:
        per_status[r.status] = per_status.get(r.status, 0) + r.count
    return CompileResult(
        version,
        succeeded,
        compile_ms,
        returncode,
        (),
        m.input_model,
        m.input_size_bytes,
        m.output_model,
        m.output_size_bytes,
        m.on_chip_used_bytes,
        m.on_chip_remaining_bytes,
        m.off_chip_used_bytes,
        m.subgraphs,
        m.total_ops,
        m.edgetpu_ops,
        m.cpu_ops,
        freeze(per_status),
        ops,
        tuple(sections) if len(sections) > 1 else (),
        (),
        tuple(errors),
    )


# ------------------------------------------------------------------------------- known failures
@dataclass(frozen=True)
class Failure:
    """A compiler or runtime failure edgekit recognizes: the text it matches, what is wrong and what to do.

    ``what`` and ``fix`` are formatted with the pattern's named groups; ``refs`` name the evidence:
    real compiler output in ``tests/fixtures/compiler`` (``log:``) or a public report listed in
    ``tests/fixtures/evidence/REPORTS.tsv`` (``report:``).
    """

    pattern: re.Pattern
    what: str
    fix: str
    refs: tuple[str, ...]


def _known(pattern: str | re.Pattern, what: str, fix: str, *refs: str) -> Failure:
    return Failure(re.compile(pattern) if isinstance(pattern, str) else pattern, what, fix, refs)


#: The known failures, first match wins (the op-version one also names the TensorFlow that made the op).
FAILURES: tuple[Failure, ...] = (
    _known(
        r"Didn't find op for builtin opcode '(?P<op>\w+)' version '(?P<version>\d+)'",
        "edgetpu_compiler cannot parse the model: {why}",
        "re-convert the model so that its op versions are ones TensorFlow Lite 2.5 knows "
        "(`edgekit quantize` checks this; `edgekit check` lists every op version problem)",
        "log:v16_op_version_exp.txt",
        "log:v16_op_version_quantize.txt",
        "log:v16_op_version_transpose_conv.txt",
    ),
    _known(
        r"builtin_code out of range",
        "edgetpu_compiler cannot parse the model: an op is newer than its TensorFlow Lite 2.5",
        "use only classic TFLite builtin ops; `edgekit check` names the op",
        "report:google-coral/edgetpu#862",
    ),
    _known(
        RUNTIME_MISMATCH,
        "the model was compiled for Edge TPU runtime {need}, but this runtime is version {have}",
        "recompile with `edgekit compile --min-runtime {have}` (edgetpu_compiler -m {have}), "
        "or update libedgetpu on the device",
        "log:runtime_mismatch.txt",
    ),
    _known(
        r"Model not quantized",
        "edgetpu_compiler refused the model: 'Model not quantized' (some ops compute in float)",
        "quantize the whole model to int8 with integer I/O: `edgekit quantize`",
        "log:v14_not_quantized.txt",
    ),
    _known(
        r"dynamic-sized tensors",
        "edgetpu_compiler refused the model: it has dynamic-sized tensors (e.g. a batch dimension of -1)",
        "convert with a fixed batch of 1: keras.Input(shape, batch_size=1), or a tf.function with "
        "TensorSpec([1, H, W, C]); `edgekit quantize` does this",
        "log:v16_dynamic_tensors.txt",
    ),
    _known(
        r"large activation tensors",
        "edgetpu_compiler failed: 'Compilation failed due to large activation tensors in model'",
        "reduce the input resolution or the widest layers, or retry with --search-delegate "
        "(maps the largest part that compiles) or --segments N",
        "log:v16_large_activations.txt",
    ),
    _known(
        r"Encountered unresolved custom op: (?P<op>[^.\s]+)",
        "edgetpu_compiler failed: the model contains the custom op {op!r}, unknown to its TensorFlow Lite",
        "remove the custom op and run that step on the CPU after the Edge TPU model",
        "report:coral-unresolved-custom-op",
    ),
    _known(
        r"Internal compiler error",
        "edgetpu_compiler crashed ('Internal compiler error. Aborting!')",
        "retry with --search-delegate, or without -a style options, or simplify the model around the ops "
        "`edgekit check` flags; report it to google-coral/edgetpu with the model if it persists",
        "log:v15_internal_error.txt",
        "log:v14_internal_error.txt",
    ),
    _known(
        r"Model could not be parsed|Invalid model",
        "edgetpu_compiler could not parse the model",
        "check that it loads in TensorFlow Lite and that `edgekit check` reports no op-version problem",
        "log:v16_op_version_exp.txt",
    ),
    _known(
        r"Model failed in Tflite interpreter",
        "edgetpu_compiler could not run the model in its TensorFlow Lite interpreter",
        "make sure the model loads and runs with TensorFlow Lite 2.5-era ops (`edgekit check`)",
        "log:v16_dynamic_tensors.txt",
    ),
)


def diagnose(text: str) -> tuple[str, str] | None:
    """(what is wrong, what to do) for a known compiler or runtime failure in ``text``, else None."""
    for f in FAILURES:
        m = f.pattern.search(text)
        if m is None:
            continue
        values = m.groupdict()
        if "version" in values:
            from edgekit.edgetpu.op_versions import version_problem

            op, v = values["op"], int(values["version"])
            values["why"] = version_problem(op, v) or f"{op} v{v} is newer than the compiler's TensorFlow Lite"
        return f.what.format(**values), f.fix.format(**values)
    return None


# ------------------------------------------------------------------------------------ the seam
TIMEOUT_HINT = "raise --timeout, or compile a smaller part with --search-delegate or --segments N"


class CompilerTimeout(CompilerError):
    """The compiler ran past its time and was stopped."""


@dataclass
class RunResult:
    returncode: int
    stdout: str
    stderr: str
    command: list[str] | None = None  # what ran, when not the argument list given (a compiler elsewhere)


#: The seam that starts the compiler: ``runner(argv, timeout)``. A runner elsewhere (:mod:`edgekit.edgetpu.compile_via`)
#: takes the same list, the model last and the private folder after ``--out_dir``: it carries the model there and
#: the files the compiler wrote back into that folder, so that everything after it is the local compile's.
Runner = Callable[[list[str], float], RunResult]


def run_subprocess(argv: list[str], timeout: float) -> RunResult:
    """Run ``argv`` (no shell) with a timeout; the one place edgekit starts the compiler.

    The compiler compiles in a child process of its own ("Compilation child process completed
    within timeout period"), so it runs in a new session and a timeout or Ctrl-C stops the whole
    process group, not just the parent.
    """
    try:
        p = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            start_new_session=True,
        )
    except FileNotFoundError:
        raise MissingDependencyError(f"cannot run {argv[0]}: no such file", INSTALL_HINT) from None
    except PermissionError:
        raise MissingDependencyError(f"cannot run {argv[0]}: not executable", f"chmod +x {argv[0]}") from None
    try:
        stdout, stderr = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop(p)
        raise CompilerTimeout(
            f"{Path(argv[0]).name} did not finish within {timeout:g} s and was stopped", TIMEOUT_HINT
        ) from None
    except BaseException:  # Ctrl-C does not reach a process in another session: stop it here
        _stop(p)
        raise
    return RunResult(p.returncode, stdout or "", stderr or "")


def _stop(p: subprocess.Popen) -> None:
    """Kill ``p`` and every process of its group, then reap it."""
    try:
        if hasattr(os, "killpg"):
            os.killpg(p.pid, signal.SIGKILL)
        else:
            p.kill()
    except (ProcessLookupError, PermissionError):
        pass
    try:
        p.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        pass


# --------------------------------------------------------------------------------- find and run
def missing_compiler_error() -> MissingDependencyError:
    """The error for "no compiler here", saying exactly why."""
    system, machine = platform.system(), platform.machine()
    if not platform_supported():
        return MissingDependencyError(
            f"edgetpu_compiler does not exist for {system} {machine}: it is built only for x86-64 Linux",
            f"{OTHER_PLATFORM_HINT}; to install it there, {INSTALL_HINT}",
        )
    return MissingDependencyError(
        "edgetpu_compiler is not installed (not on PATH, EDGETPU_COMPILER unset)", INSTALL_HINT
    )


def compiler_version(compiler: str, runner: Runner = run_subprocess, timeout: float = VERSION_TIMEOUT_S) -> str:
    """``compiler --version`` through the runner seam, read as :func:`compiler_locator.probe_version` reads it.

    Anything that gives no version is no usable compiler (MissingDependencyError: ``compile`` then
    shows ``check``'s prediction), and a hang costs ``timeout`` (10 s), not the compile's ``--timeout``.
    """
    try:
        res = runner([compiler, "--version"], timeout)
    except CompilerTimeout:
        raise MissingDependencyError(
            f"{compiler} --version did not answer within {timeout:g} s", NOT_COMPILER_HINT
        ) from None
    return version_from_output(compiler, res.returncode, res.stdout + res.stderr)


def output_names(model: Path, segments: int | None = None) -> list[str]:
    """The files the compiler writes for ``model`` (plus their .log files)."""
    stem = model.stem
    if segments and segments > 1:
        names = [f"{stem}_segment_{i}_of_{segments}_edgetpu" for i in range(segments)]
    else:
        names = [f"{stem}_edgetpu"]
    return [n + ext for n in names for ext in (".tflite", ".log")]


def compile_model(
    model: str | os.PathLike,
    out_dir: str | os.PathLike | None = None,
    *,
    min_runtime: int | None = None,
    segments: int | None = None,
    search_delegate: bool = False,
    timeout: float = DEFAULT_TIMEOUT_S,
    compiler: str | None = None,
    runner: Runner = run_subprocess,
    report: Reporter = SILENT,
    multiple_subgraphs: bool = False,
) -> CompileResult:
    """Compile ``model`` with the real edgetpu_compiler; outputs land in ``out_dir`` only on success.

    ``min_runtime`` None leaves the Edge TPU runtime to target at the compiler's default.
    ``multiple_subgraphs``: the compiler's ``-a`` (``--enable_multiple_subgraphs``, compiler 16).
    ``compiler`` and ``runner``: the compiler and the seam that starts it (a compiler elsewhere:
    :mod:`edgekit.edgetpu.compile_via`).
    ``report`` gets the status line of what runs just before the (possibly long) compile starts, and
    a note for what the user should know (a missing output folder was created).
    Raises MissingDependencyError (no compiler), CompilerError (a failure, with its fix),
    InputError/UsageError for bad arguments.

    The stages: check the arguments, find the compiler and its version, run it into a private folder
    inside the output folder, read what it said (and its .log files), then move the outputs into place.
    """
    model = Path(model)
    out = _check_arguments(model, out_dir, segments, timeout, report)
    job = _find_compiler(compiler, runner, search_delegate, multiple_subgraphs)
    try:
        work = Path(tempfile.mkdtemp(prefix=".edgekit-compile-", dir=out))
    except OSError as e:
        raise InputError(
            f"cannot write into the output folder {out}: {e.strerror}", "choose a writable folder with -o"
        ) from None
    try:
        argv = job.argv(work, model, min_runtime, segments, search_delegate, timeout, multiple_subgraphs)
        result, produced = _run(job, argv, model, work, segments, timeout, report)
        publish([work / n for n in produced], [out / n for n in produced])  # all or none
        return replace(result, outputs=tuple(str(out / n) for n in produced))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _check_arguments(
    model: Path, out_dir: str | os.PathLike | None, segments: int | None, timeout: float, report: Reporter
) -> Path:
    """The output folder (made when missing) once the arguments are fit to compile; else the error saying why."""
    if not model.is_file():
        raise InputError(f"no such file: {model}", "check the path")
    out = require_output_folder(Path(model.parent if out_dir is None else out_dir) / output_names(model)[0], report)
    refuse_folders([out / n for n in output_names(model, segments)])
    if segments is not None and segments < 1:
        raise UsageError("--segments must be at least 1", "e.g. --segments 2, or leave it out")
    if timeout <= 0:
        raise UsageError("--timeout must be positive", "e.g. --timeout 180 (seconds)")
    if tflite_model.load(model).is_compiled:
        raise InputError(
            f"{model} is already compiled for the Edge TPU (it contains {EDGETPU_CUSTOM_OP})",
            "compile the model from before edgetpu_compiler (the file without _edgetpu)",
        )
    return out


@dataclass(frozen=True)
class _Compiler:
    """The compiler a compile runs: its path, the version it says, and the runner seam that starts it."""

    path: str
    version: str
    runner: Runner

    @property
    def major(self) -> int:
        return version_major(self.version) or 0

    def argv(
        self,
        work: Path,
        model: Path,
        min_runtime: int | None,
        segments: int | None,
        search_delegate: bool,
        timeout: float,
        multiple_subgraphs: bool = False,
    ) -> list[str]:
        """The compiler's command line: write into ``work``, print the op table, and the options asked for."""
        argv = [self.path, "--out_dir", str(work), "--show_operations"]
        if min_runtime is not None:  # else the compiler's own default (14 for compiler 16, 13 for 14/15)
            argv += ["--min_runtime_version", str(min_runtime)]
        if self.major >= 16:
            argv += ["--timeout_sec", str(max(1, int(timeout)))]
        if segments and segments > 1:
            argv += ["--num_segments", str(segments)]
        if search_delegate:
            argv += ["--search_delegate"]
        if multiple_subgraphs:
            argv += ["--enable_multiple_subgraphs"]
        argv.append(str(model.resolve()))
        return argv


def _find_compiler(
    compiler: str | None, runner: Runner, search_delegate: bool, multiple_subgraphs: bool = False
) -> _Compiler:
    """The compiler given or found, with its version; MissingDependencyError when there is none that works."""
    compiler = compiler or find_compiler()
    if not compiler:
        raise missing_compiler_error()
    found = _Compiler(compiler, compiler_version(compiler, runner, VERSION_TIMEOUT_S), runner)
    for flag, asked in (("--search-delegate", search_delegate), ("-a", multiple_subgraphs)):
        if asked and found.major < 16:
            raise UsageError(
                f"{flag} needs edgetpu_compiler 16 (found {found.version})",
                f"install compiler 16 (apt-get install edgetpu-compiler), or leave {flag} out",
            )
    return found


def _run(
    job: _Compiler, argv: list[str], model: Path, work: Path, segments: int | None, timeout: float, report: Reporter
) -> tuple[CompileResult, list[str]]:
    """Run the compiler and read what it said (and the op tables of its .log files, when stdout had none): (the
    result, the files it wrote into ``work``); a CompilerError (with what it said) when it failed or wrote no model."""
    report.status(f"running edgetpu_compiler {job.version} on {model.name} (stopped after {timeout:g} s)...")
    # The compiler enforces its own timeout (v16); ours is the backstop, a little later.
    try:
        res = job.runner(argv, timeout + min(30.0, timeout))
    except CompilerTimeout:
        raise CompilerTimeout(
            f"edgetpu_compiler did not finish within --timeout {timeout:g} s and was stopped", TIMEOUT_HINT
        ) from None
    text = res.stdout + ("\n" + res.stderr if res.stderr else "")
    said = parse_compiler_output(text, res.returncode)
    said = replace(said, command=tuple(res.command or argv), compiler_version=said.compiler_version or job.version)
    produced = [n for n in output_names(model, segments) if (work / n).is_file()]
    if not said.succeeded or not any(n.endswith(".tflite") for n in produced):
        raise _failure(said, text, res.returncode, job.path, model)
    if not said.ops:
        logs = {n: (work / n).read_text(errors="replace") for n in produced if n.endswith(".log")}
        said = replace(
            parse_compiler_output(text, res.returncode, logs),
            command=said.command,
            compiler_version=said.compiler_version,
        )
    return said, produced


def _failure(said: CompileResult, text: str, returncode: int, compiler: str, model: Path) -> CompilerError:
    """Why a compile failed or wrote no model: a known failure and its fix, else the compiler's own words; the
    error carries what the compiler ``said`` as its ``report`` (``compile --json`` shows it)."""
    known = diagnose(text)
    if known:
        return CompilerError(*known, report=said)
    if "timeout period" in text and "completed within timeout period" not in text:
        return CompilerTimeout("edgetpu_compiler stopped at its own timeout", TIMEOUT_HINT, report=said)
    if returncode != 0:
        last = list(said.errors[-3:]) or text.strip().splitlines()[-1:] or ["no output"]
        return CompilerError(
            f"edgetpu_compiler failed (exit {returncode}): {' | '.join(last)}",
            "run `edgekit check` on the model to see what the compiler cannot take",
            report=said,
        )
    return CompilerError(
        "edgetpu_compiler reported success but wrote no model"
        if said.succeeded
        else "edgetpu_compiler did not succeed: " + (" | ".join(said.errors[-3:]) or "no reason given"),
        f"run `edgekit check` on the model; `{shlex.quote(compiler)} -s {shlex.quote(str(model))}` shows the "
        "compiler's full output",
        report=said,
    )


def compiled_split(cpu_model: ModelInfo, compiled_model: ModelInfo) -> dict[str, Counter]:
    """Per-op-type split of a real compile: mapped = CPU-model ops minus builtin ops left in the compiled model."""
    before = Counter(op.name for op in cpu_model.ops)
    after = Counter(op.name for op in compiled_model.ops if op.custom_code != EDGETPU_CUSTOM_OP)
    return {"edgetpu": before - after, "cpu": after}


def disagreements(predicted: dict[str, Counter], actual: dict[str, Counter]) -> list[str]:
    """Lines naming every op type whose Edge TPU/CPU split differs between check and the compiler."""
    out = []
    names = sorted(set(predicted["edgetpu"]) | set(predicted["cpu"]) | set(actual["edgetpu"]) | set(actual["cpu"]))
    for n in names:
        p = (predicted["edgetpu"][n], predicted["cpu"][n])
        a = (actual["edgetpu"][n], actual["cpu"][n])
        if p != a:
            out.append(
                f"{n}: check predicted {p[0]} on the Edge TPU / {p[1]} on the CPU, the compiler mapped {a[0]} / {a[1]}"
            )
    return out


def check_disagreements(
    cpu_model: ModelInfo, prediction: CheckResult, report: CompileResult, segments: int | None = None
) -> list[str]:
    """Where ``edgekit check``'s prediction differed from what the compiler did with ``cpu_model``.

    The compiled model is read when there is one (its ops are the truth); a segmented compile's
    report stands in for it.
    """
    from edgekit.tflite import model as tflite_model

    compiled = [Path(p) for p in report.outputs if p.endswith("_edgetpu.tflite")]
    if len(compiled) == 1 and not (segments and segments > 1):
        actual = compiled_split(cpu_model, tflite_model.load(compiled[0]))
    else:
        actual = report.split_by_type()
    return disagreements(prediction.split_by_type(), actual)
