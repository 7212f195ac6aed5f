"""The command-line conventions every command shares: one error line, exit codes, --json, --debug, light start."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from edgekit import __version__
from edgekit.cli.app import cli
from edgekit.errors import EXIT_CODES, InputError
from tests.conftest import shared_file


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "edgekit", *args], capture_output=True, text=True, timeout=120)


def test_version_and_help_import_no_tensorflow():
    code = (
        "import sys, time; t=time.perf_counter(); from edgekit.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit: pass\n"
        "assert 'tensorflow' not in sys.modules, 'tensorflow imported'\n"
        "assert not [m for m in sys.modules if m.startswith('edgekit.converters.')], 'converters imported'\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    listed = [line.split()[0] for line in proc.stdout.split("Commands:")[1].strip().splitlines()]
    assert listed == [
        "train",
        "quantize",
        "check",
        "compile",
        "cut",
        "build",
        "classify",
        "detect",
        "evaluate",
        "benchmark",
        "deploy",
        "inspect",
        "devices",
        "doctor",
    ]
    assert run("--version").stdout.strip() == f"edgekit, version {__version__}"


def test_inspect_json_schema():
    path = shared_file("mobilenet_v1_0.25_128_quant.tflite")
    result = CliRunner().invoke(cli, ["inspect", str(path), "--json"])
    assert result.exit_code == 0, result.output
    d = json.loads(result.output)
    assert {"path", "size_bytes", "edgetpu_compiled", "subgraphs", "inputs", "outputs", "ops"} <= set(d)
    assert d["size_bytes"] == path.stat().st_size and d["edgetpu_compiled"] is False and d["subgraphs"] == 1
    assert d["inputs"] == [
        {
            "name": "input",
            "dtype": "uint8",
            "shape": [1, 128, 128, 3],
            "shape_signature": [1, 128, 128, 3],
            "scale": 0.0078125,
            "zero_point": 128,
        }
    ]
    assert d["outputs"][0]["shape"] == [1, 1001]
    assert len(d["ops"]) == 31 and d["ops"][0] == {"index": 0, "name": "CONV_2D", "version": 1, "custom_code": None}
    assert d["quantization"] == "full-int8" and d["dynamic_shapes"] is False


def test_inspect_text_of_compiled_model():
    path = shared_file("mobilenet_v1_0.25_128_quant_edgetpu.tflite")
    result = CliRunner().invoke(cli, ["inspect", str(path)])
    assert result.exit_code == 0
    assert "Edge TPU compiled: yes" in result.output
    assert "edgetpu-custom-op" in result.output


def test_bad_model_is_one_line_with_exit_code(tmp_path):
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(b"\x00" * 64)
    proc = run("inspect", str(bad))
    assert proc.returncode == InputError.exit_code == 3
    assert proc.stderr.strip().splitlines() == [
        "error: not a valid TFLite model: file identifier is b'\\x00\\x00\\x00\\x00', expected b'TFL3' "
        "(pass a .tflite file (a Keras model goes to `edgekit quantize` first); a damaged file must be copied or "
        "exported again)"
    ]
    assert "Traceback" not in proc.stderr


def test_missing_file_gets_a_hint_and_debug_shows_traceback(tmp_path):
    proc = run("inspect", str(tmp_path / "nope.tflite"))
    assert proc.returncode == 3
    assert proc.stderr.strip() == f"error: no such file: {tmp_path / 'nope.tflite'} (check the path)"
    debug = run("--debug", "inspect", str(tmp_path / "nope.tflite"))
    assert debug.returncode == 3, "--debug must keep the documented exit code"
    assert "Traceback" in debug.stderr and "InputError" in debug.stderr
    assert debug.stderr.strip().splitlines()[-1] == proc.stderr.strip()
    per_command = run("inspect", str(tmp_path / "nope.tflite"), "--debug")
    assert "Traceback" in per_command.stderr and per_command.returncode == 3


@pytest.mark.parametrize(
    "value, shown",
    [("1", True), ("yes", True), ("0", False), ("false", False), ("False", False), ("off", False), ("", False)],
)
def test_edgekit_debug_environment_values(tmp_path, monkeypatch, value, shown):
    """EDGEKIT_DEBUG=0 or =false turned tracebacks on; they mean off."""
    monkeypatch.setenv("EDGEKIT_DEBUG", value)
    result = CliRunner().invoke(cli, ["inspect", str(tmp_path / "nope.tflite")])
    assert result.exit_code == 3
    assert ("Traceback" in result.stderr) is shown
    assert result.stderr.strip().splitlines()[-1].startswith("error: no such file:")


def test_exit_codes_are_documented_in_the_readme():
    from tests.conftest import REPO

    readme = (REPO / "README.md").read_text()
    for code in EXIT_CODES:
        assert f"| {code} |" in readme, f"exit code {code} missing from the README table"


def test_json_output_is_strict_json_even_for_non_finite_numbers(capsys):
    from edgekit.cli.commands import _emit_json

    _emit_json({"score": float("nan"), "top": [{"score": float("-inf")}, {"score": 0.5}]})
    assert json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(f"{c} in JSON")) == {
        "score": None,
        "top": [{"score": None}, {"score": 0.5}],
    }


# ------------------------------------------------------- every error line says what to do (issue 9, item 11)
def one_error_line_with_its_fix(stderr: str) -> str:
    """The README's error convention: exactly one line, `error: <what is wrong> (<what to do>)`."""
    lines = [line for line in stderr.strip().splitlines() if not line.startswith(("warning:", "note:"))]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: ") and lines[0].endswith(")") and " (" in lines[0], lines[0]
    return lines[0]


def _bad_runtime_inputs(tmp: Path) -> dict[str, tuple[list[str], int, str]]:
    model, cat = str(shared_file("mobilenet_v1_0.25_128_quant.tflite")), str(shared_file("cat.bmp"))
    (tmp / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    (tmp / "a_folder").mkdir()
    h5 = tmp / "model.h5"
    h5.write_bytes(b"\x89HDF\r\n\x1a\n" + bytes(600))
    stray = tmp / "copy.tflite"
    stray.write_bytes(Path(model).read_bytes())
    (tmp / "copy.edgekit.json").write_text("{not json")
    (tmp / "afile").write_text("x")
    import numpy as np

    np.savez(tmp / "y_nan.npz", x=np.zeros((3, 8, 8, 3), np.uint8), y=np.array([0.0, np.nan, 1.0]))
    np.savez(tmp / "y_frac.npz", x=np.zeros((3, 8, 8, 3), np.uint8), y=np.array([0.0, 1.5, 1.0]))
    np.savez(tmp / "x_nan.npz", x=np.full((2, 8, 8, 3), np.nan, np.float32), y=np.array([0, 1]))
    np.savez(tmp / "y_scalar.npz", x=np.zeros((2, 8, 8, 3), np.uint8), y=np.array(3))
    np.savez(tmp / "y_empty_rows.npz", x=np.zeros((2, 8, 8, 3), np.uint8), y=np.zeros((2, 0)))
    np.savez(tmp / "test_only.npz", x_test=np.zeros((2, 8, 8, 3), np.uint8), y_train=np.array([0, 1, 0]))
    (tmp / "col.edgekit.json").write_text("cat\ndog\n")
    (tmp / "a.edgekit.json").mkdir()
    return {  # name: (argv, exit code, what the line must say)
        "labels missing": (["classify", cat, "-m", model, "-l", str(tmp / "nope.txt")], 3, "does not exist"),
        "labels not UTF-8": (["classify", cat, "-m", model, "-l", str(tmp / "latin1.txt")], 3, "not UTF-8"),
        "--mean not a number": (["classify", cat, "-m", model, "--mean", "grey"], 2, "--mean expects one number"),
        "--std count": (["classify", cat, "-m", model, "--std", "1,2"], 2, "--std needs 1 or 3 values"),
        "not a TFLite model": (["check", str(REPO_README)], 3, "not a valid TFLite model"),
        "a .h5 given to check": (["check", str(h5)], 3, "is a Keras .h5 (HDF5) file (quantize it first"),
        "a .h5 given to inspect": (["inspect", str(h5)], 3, "is a Keras .h5"),
        "a corrupt record beside the model": (["classify", cat, "-m", str(stray)], 3, "fix or delete that file"),
        "a folder as the model": (["inspect", str(tmp / "a_folder")], 3, "is a folder, not a file"),
        "a folder as labels": (
            ["classify", cat, "-m", model, "-l", str(tmp / "a_folder")],
            3,
            "--labels " + str(tmp / "a_folder") + " is a folder",
        ),
        "a folder as an image": (["classify", str(tmp / "a_folder"), "-m", model], 3, "folder holds no images"),
        "a file as compile's output folder": (
            ["compile", model, "-o", str(tmp / "afile")],
            3,
            "is a file, not a folder",
        ),
        "a folder as train's output": (["train", str(tmp), "-o", str(tmp / "a_folder")], 3, "is a folder, not a file"),
        "benchmark --save over the model": (
            ["benchmark", "-m", str(stray), "--save", str(stray)],
            2,
            "would overwrite the model",
        ),
        "evaluate labels with NaN": (["evaluate", "-m", model, "--data", str(tmp / "y_nan.npz")], 3, "NaN"),
        "evaluate labels with fractions": (
            ["evaluate", "-m", model, "--data", str(tmp / "y_frac.npz")],
            3,
            "fractions such as 1.5",
        ),
        "evaluate images with NaN": (["evaluate", "-m", model, "--data", str(tmp / "x_nan.npz")], 3, "x holds NaN"),
        "evaluate a scalar y": (
            ["evaluate", "-m", model, "--data", str(tmp / "y_scalar.npz")],
            3,
            "expected one label per image",
        ),
        "evaluate y rows with no values": (
            ["evaluate", "-m", model, "--data", str(tmp / "y_empty_rows.npz")],
            3,
            "rows with no values",
        ),
        "evaluate x_test beside y_train only": (
            ["evaluate", "-m", model, "--data", str(tmp / "test_only.npz")],
            3,
            "needs an image array and a label array",
        ),
        "quantize's record over --labels": (
            ["quantize", str(h5), "--labels", str(tmp / "col.edgekit.json"), "-o", str(tmp / "col.tflite")],
            2,
            "would overwrite the input",
        ),
        "quantize -o .tflite": (["quantize", str(h5), "-o", str(tmp / ".tflite")], 2, "not a file name ending in"),
        "a folder where quantize's record goes": (
            ["quantize", str(h5), "-o", str(tmp / "a.tflite")],
            3,
            "a folder of that name is in the way",
        ),
    }


REPO_README = Path(__file__).resolve().parents[1] / "README.md"
BAD_RUNTIME_INPUTS = [
    "labels missing",
    "labels not UTF-8",
    "--mean not a number",
    "--std count",
    "not a TFLite model",
    "a .h5 given to check",
    "a .h5 given to inspect",
    "a corrupt record beside the model",
    "a folder as the model",
    "a folder as labels",
    "a folder as an image",
    "a file as compile's output folder",
    "a folder as train's output",
    "benchmark --save over the model",
    "evaluate labels with NaN",
    "evaluate labels with fractions",
    "evaluate images with NaN",
    "evaluate a scalar y",
    "evaluate y rows with no values",
    "evaluate x_test beside y_train only",
    "quantize's record over --labels",
    "quantize -o .tflite",
    "a folder where quantize's record goes",
]


@pytest.mark.parametrize(
    "argv",
    [
        ["compile", "m.tflite", "--timeout", "nan"],
        ["build", "m.keras", "-o", "b", "--timeout", "inf"],
        ["compile", "m.tflite", "--timeout", "1e300"],
        ["train", "d", "-o", "m.keras", "--learning-rate", "nan"],
        ["train", "d", "-o", "m.keras", "--width", "nan"],
        ["benchmark", "-m", "m.tflite", "--max-slowdown", "nan"],
        ["quantize", "m.h5", "--min-agreement", "nan"],
        ["deploy", "b", "--to", "u@h", "--connect-timeout", "inf"],
    ],
    ids=lambda a: " ".join(a[:1] + a[-2:]),
)
def test_non_finite_numbers_are_usage_errors(argv):
    """Was: --timeout nan/inf/1e300 an internal error, --learning-rate nan a NaN model, --max-slowdown nan no gate."""
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 2, result.output
    assert "Invalid value" in result.stderr and "Traceback" not in result.stderr


def test_the_error_line_is_strict_utf8_like_json(tmp_path):
    """A file name that is not UTF-8 appears with \\xNN in the error line, as in --json (was a lone surrogate)."""
    import os

    name = os.fsdecode(b"caf\xe9.tflite")
    result = CliRunner().invoke(cli, ["check", str(tmp_path / name)])
    assert result.exit_code == 3
    assert "caf\\xe9.tflite" in result.stderr
    result.stderr.encode("utf-8")  # strict: no lone surrogate


@pytest.mark.parametrize("case", BAD_RUNTIME_INPUTS)
def test_each_bad_input_is_one_line_with_what_to_do(tmp_path, case):
    argv, code, says = _bad_runtime_inputs(tmp_path)[case]
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == code, result.output
    assert says in one_error_line_with_its_fix(result.stderr)


def test_cli_defaults_are_the_library_constants():
    """edgekit.flags types the defaults as literals (--help must not import converters/): they must stay equal to
    the constants the library uses when called directly."""
    from edgekit.converters import calibration, quantize
    from edgekit.edgetpu import compatibility
    from edgekit.edgetpu import compiler as edgetpu_compiler

    def default(command: str, name: str):
        return next(p.default for p in cli.commands[command].params if p.name == name)

    assert default("quantize", "samples") == calibration.DEFAULT_SAMPLES
    assert default("quantize", "tfrecord_key") == calibration.DEFAULT_TFRECORD_KEY
    assert list(next(p for p in cli.commands["quantize"].params if p.name == "io").type.choices) == list(
        quantize.IO_TYPES
    )
    assert default("compile", "timeout") == edgetpu_compiler.DEFAULT_TIMEOUT_S
    assert default("check", "min_runtime") == compatibility.COMPILER_DEFAULT_MIN_RUNTIME
    from edgekit.pipeline.build import BuildOptions

    built = BuildOptions(quantize=quantize.QuantizeOptions(model="m"), output="o")
    assert default("build", "timeout") == built.timeout == edgetpu_compiler.DEFAULT_TIMEOUT_S


def test_each_command_function_takes_the_options_edgekit_flags_declares_for_it():
    """cli.py's functions and edgekit.flags.COMMANDS name the same arguments and options (a keyword the table
    lacks, or a declared option a function without **keywords cannot take, would fail only when that command
    runs)."""
    import inspect

    from edgekit import flags
    from edgekit.cli import commands as cli_module

    assert sorted(cli_module._RUNS) == sorted(flags.COMMANDS)
    for name, fn in cli_module._RUNS.items():
        declared = {p.name for p in flags.COMMANDS[name]}
        params = inspect.signature(fn).parameters
        named = {p for p, v in params.items() if v.kind is not inspect.Parameter.VAR_KEYWORD}
        assert named <= declared, (name, named - declared)
        if len(named) == len(params):  # no **keywords: every declared option is a parameter
            assert named == declared, (name, declared - named)


def test_a_run_builds_the_click_options_of_its_command_alone():
    """Start-up (issue 25): importing edgekit.cli.commands builds no click command; running one builds that one."""
    code = (
        "from edgekit.cli import main\nfrom edgekit.cli.app import cli\n"
        "assert list(cli.commands._made) == [], cli.commands._made\n"
        "try:\n    main(['check', '--help'])\nexcept SystemExit:\n    pass\n"
        "assert list(cli.commands._made) == ['check'], list(cli.commands._made)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "--min-runtime" in proc.stdout


def test_build_takes_every_quantize_option_with_the_same_name_default_and_help():
    """build is quantize plus packaging: one option set, defined once (only -o differs: a bundle folder)."""

    def options(command: str) -> dict:
        return {
            p.name: (tuple(p.opts), p.default, p.help)
            for p in cli.commands[command].params
            if isinstance(p, click.Option)
        }

    quantize_opts, build_opts = options("quantize"), options("build")
    shared = {name: spec for name, spec in quantize_opts.items() if name != "output"}
    assert {name: build_opts.get(name) for name in shared} == shared
    for flag in (
        "--arch",
        "--custom-objects",
        "--trust-model",
        "--scaling",
        "--mean",
        "--std",
        "--channels",
        "--resize",
        "--input-size",
        "--labels",
        "--max-accuracy-drop",
        "--min-agreement",
        "--no-verify",
        "--io",
        "--eval",
        "--holdout",
    ):
        assert any(flag in spec[0] for spec in build_opts.values()), flag


def test_every_error_edgekit_raises_carries_what_to_do():
    """The README's error convention, checked where errors are made: every EdgekitError built in edgekit/ gets
    a hint (its "(what to do)"), except InvalidModelError, whose hint has a default."""
    import ast

    from tests.conftest import REPO

    errors = {
        "InputError",
        "UsageError",
        "MissingDependencyError",
        "ConversionError",
        "VerificationError",
        "CompatibilityError",
        "CompilerError",
        "DeviceError",
        "RegressionError",
        "BundleError",
        "CompilerTimeout",
        "InternalError",
        "EdgekitError",
    }
    bare = []
    for path in sorted((REPO / "edgekit").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in errors:
                starred = any(isinstance(a, ast.Starred) for a in node.args)
                if len(node.args) + len(node.keywords) < 2 and not starred:
                    bare.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert bare == [], "errors without a hint: " + ", ".join(bare)


def test_strict_utf8_for_error_lines_and_json_imports_no_numpy():
    """printable() serves every error line and --json string: it must not pull numpy into a light command."""
    code = (
        "import sys\nfrom edgekit.cli.commands import _json_safe\n_json_safe({'name': 'caf\\udce9'})\n"
        "assert 'numpy' not in sys.modules, 'numpy imported'\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_the_click_group_holds_every_command_and_the_commands_module_has_no_getattr():
    """Issue 33: edgekit.cli.app's group is imported as it is (it registers the commands itself), and
    edgekit.cli.commands has no compatibility ``__getattr__`` handing out click's objects."""
    code = (
        "from edgekit.cli.app import cli\nfrom edgekit import flags\nfrom edgekit.cli import commands\n"
        "assert sorted(cli.commands) == sorted(flags.COMMANDS), sorted(cli.commands)\n"
        "assert not hasattr(commands, '__getattr__') and not hasattr(commands, 'cli')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
