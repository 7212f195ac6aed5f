"""Each option and each default declared once (issue 33, item 4): quantize's options are one dataclass that the API,
build, the CLI table and the docs read; flags of one meaning are one declaration; the defaults that the runtime, the
SSH runner and the Python 3.7 board repeat are read from edgekit.flags or pinned to it here."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

from edgekit import flags
from edgekit.cli.app import cli

FLAGS_SOURCE = Path(flags.__file__)


#: QuantizeOptions' fields that are no option: the model (an argument), how messages name it, how the run talks.
_RUN_FIELDS = {"model", "model_shown", "show_progress", "report"}


def _keywords(fn) -> dict:
    import inspect

    return {n: p.default for n, p in inspect.signature(fn).parameters.items() if p.kind is p.KEYWORD_ONLY}


def test_quantize_s_options_are_one_dataclass_that_the_api_build_and_the_cli_agree_with():
    """edgekit.converters.quantize_options.QuantizeOptions is quantize's option set, one field per option, each default read
    from its one declaration in edgekit.flags: every field is an option
    of ``edgekit quantize`` and a keyword of ``edgekit.quantize`` of the same name and default, and every one but
    ``output`` (build's is the bundle) an option of ``edgekit build`` and a keyword of ``edgekit.build``;
    quantize takes no other option or keyword (before, the API's ``no_verify`` was the library's ``verify``)."""
    import dataclasses

    from edgekit import api
    from edgekit.converters.quantize_options import QuantizeOptions
    from edgekit.pipeline.build import build_bundle

    fields = {f.name: f.default for f in dataclasses.fields(QuantizeOptions) if f.name not in _RUN_FIELDS}
    assert len(fields) == 25 and "no_verify" in fields and "output" in fields

    def table(command: str) -> dict:
        return {
            o.name: o.default
            for o in flags.COMMANDS[command]
            if isinstance(o, flags.Option) and o.name not in ("as_json", "quiet")
        }

    def clicked(command: str, *required: str) -> dict:  # what the command is called with when left out
        given = cli.commands[command].make_context(command, ["model.keras", *required]).params
        return {n: v for n, v in given.items() if n not in ("model", "as_json", "quiet") + required}

    assert table("quantize") == fields
    assert clicked("quantize") == fields
    assert {n: d for n, d in _keywords(api.quantize).items() if n not in _RUN_FIELDS} == fields
    shared = {n: d for n, d in fields.items() if n != "output"}
    for keywords in (table("build"), clicked("build", "-o", "bundle")):
        assert {n: d for n, d in keywords.items() if n in shared} == shared
    # edgekit.build passes quantize's keywords on by name (its **quantize_keywords: QuantizeOptions' fields, their
    # defaults where left out; QuantizeOptions refuses another name), as build's flags are quantize's
    assert {o.name for o in flags.QUANTIZE} == set(shared)
    assert not set(_keywords(build_bundle)) & set(shared) - {"layout"}  # build's own layout goes to quantize too
    with pytest.raises(TypeError, match="unexpected keyword argument 'sample'"):
        build_bundle("model.keras", output="bundle", sample=100)
    # the docs' tables are click's (edgekit.cli.docs), so they show these defaults too
    from edgekit.cli.docs import options_table

    assert "| `--samples` | N (N>=1) | `300` |" in options_table(cli.commands["quantize"])


def _defaults(fn, *names: str) -> dict:
    parameters = inspect.signature(fn).parameters
    return {n: parameters[n].default for n in names}


def test_the_runtime_s_defaults_are_the_flags():
    """remote, benchmark and the API's Model.time read the command line's defaults (they repeated them as literals)."""
    from edgekit import api
    from edgekit.devices import benchmark, remote

    def cli_default(command: str, *names: str) -> dict:
        return {n: flags.default(command, n) for n in names}

    assert flags.default("deploy", "remote_path") == remote.DEFAULT_PATH
    assert _defaults(remote.classify, "device", "k", "threshold") == {
        "device": flags.default("classify", "device"),
        "k": flags.default("classify", "top_k"),
        "threshold": flags.default("classify", "threshold"),
    }
    assert _defaults(remote.detect, "device", "conf", "iou", "max_det") == cli_default(
        "detect", "device", "conf", "iou", "max_det"
    )
    assert _defaults(remote.benchmark, "device", "n", "warmup") == cli_default("benchmark", "device", "n", "warmup")
    assert _defaults(benchmark.benchmark, "device", "n", "warmup") == cli_default("benchmark", "device", "n", "warmup")
    assert _defaults(api.Model.time, "n", "warmup") == cli_default("benchmark", "n", "warmup")


def test_the_board_s_own_defaults_are_pinned_to_the_flags():
    """The board's code is Python 3.7 and ships without edgekit.flags, so it repeats a few defaults: the runner's
    parser (run by hand on a board) and detection's thresholds. They must equal the command line's."""
    from edgekit.board import decode, runner

    parser = runner._parser()
    classify = vars(parser.parse_args(["classify", "--bundle", "b"]))
    detect = vars(parser.parse_args(["detect", "--bundle", "b", "--layout-json", "{}"]))
    timed = vars(parser.parse_args(["benchmark", "--bundle", "b"]))
    assert (classify["device"], classify["top_k"], classify["threshold"]) == tuple(
        flags.default("classify", n) for n in ("device", "top_k", "threshold")
    )
    assert (detect["device"], detect["conf"], detect["iou"], detect["max_det"]) == tuple(
        flags.default("detect", n) for n in ("device", "conf", "iou", "max_det")
    )
    assert (timed["device"], timed["n"], timed["warmup"]) == tuple(
        flags.default("benchmark", n) for n in ("device", "n", "warmup")
    )
    assert _defaults(runner.benchmark, "device", "n", "warmup") == {
        n: flags.default("benchmark", n) for n in ("device", "n", "warmup")
    }
    assert tuple(flags.default("detect", n) for n in ("conf", "iou", "max_det")) == (
        decode.DEFAULT_CONF,
        decode.DEFAULT_IOU,
        decode.DEFAULT_MAX_DET,
    )


def _declarations() -> dict:
    """Each ``option(...)`` call of edgekit/flags.py by its long flag: (its flags, everything but its help)."""
    found: dict = {}
    for node in ast.walk(ast.parse(FLAGS_SOURCE.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "option":
            given = tuple(a.value for a in node.args)
            long = next((f for f in given if f.startswith("--")), given[0])
            rest = tuple(sorted((k.arg, ast.unparse(k.value)) for k in node.keywords if k.arg != "help"))
            found.setdefault(long, []).append((given, rest))
    return found


#: Flags declared more than once, each declaration meaning something else (so a default or type may differ).
DIFFERENT_MEANINGS = {
    "--arch": "train's picks the architecture to train (default cnn); quantize's and evaluate's build a weights-only "
    "model",
    "--channels": "train's trains with them (default RGB); quantize's reads the model's",
    "--conf": "detect's threshold (0.25) and evaluate's (None: COCO's 0.001)",
    "--iou": "detect's NMS (0.45) and evaluate's (None: Ultralytics' val 0.7)",
    "--max-det": "detect's (100) and evaluate's (None: COCO's protocol)",
    "--input-size": "train resizes to it; quantize fixes a model of any input size to it",
    "--labels": "quantize's labels to record (no -l); the runtime's -l labels to show",
    "--min-runtime": "check's (default 14) and compile's (the compiler's own)",
    "--output": "quantize's file, build's bundle folder, cut's file, train's model",
    "--save": "detect's folder of drawn images; benchmark's JSON document",
    "--scaling": "train's (default 0..1) and quantize's (default: from the model or measured)",
    "--seed": "train's seeds training; quantize's draws the calibration samples",
    "--strict": "check's fails on CPU ops; quantize's fails on an uncertain verdict",
    "--timeout": "each SSH step's (300 s) and the compiler's (180 s)",
}


def test_an_option_of_one_meaning_is_declared_once():
    """Two declarations of a flag that differ in nothing but their help are one option written twice: declare it
    once and word its help per command with flags.worded. A flag declared twice must mean two things (listed
    above, why); before, 24 flags were declared more than once, 12 of them with one meaning (-m, -l, --on,
    --layout, --mean, --std, -a, --arch, --custom-objects, --trust-model, --verbose, --tfrecord-key)."""
    found = _declarations()
    twice = {flag for flag, declared in found.items() if len(declared) > 1}
    assert twice == set(DIFFERENT_MEANINGS), twice ^ set(DIFFERENT_MEANINGS)
    repeated = {flag for flag, declared in found.items() if len(set(declared)) < len(declared)}
    assert not repeated - {"--input-size", "--seed", "--strict"}, repeated  # same shape, another meaning (above)


def test_a_one_image_classify_does_not_make_quantize_s_dataclass():
    """Making QuantizeOptions (a frozen dataclass of 29 fields) costs about 15M instructions: the modules a runtime
    command line imports (its parse, the API, the runtime) must not import edgekit.converters.quantize_options."""
    code = (
        "import sys\nimport edgekit.cli.commands, edgekit.cli.base, edgekit.api, edgekit.pipeline.options\n"
        "import edgekit.devices.classify, edgekit.devices.detect, edgekit.devices.benchmark\n"
        "assert 'edgekit.converters.quantize_options' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
