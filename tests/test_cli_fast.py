"""The click-free parse of plain runtime command lines (edgekit.cli.base.parse, issue 25 start-up): it gives the
keywords click gives, or leaves the command line to click."""

from __future__ import annotations

import subprocess
import sys

import pytest

from edgekit.cli import base as cli_base
from edgekit.cli.app import cli
from tests.conftest import shared_file


@pytest.fixture()
def files(tmp_path):
    image = tmp_path / "a.jpg"
    image.write_bytes(b"not really a jpeg")
    labels = tmp_path / "labels.txt"
    labels.write_text("0 cat\n1 dog\n")
    return {"IMG": str(image), "DIR": str(tmp_path), "LABELS": str(labels), "MODEL": str(tmp_path / "m.tflite")}


TAKEN = [
    "classify IMG -m MODEL",
    "classify IMG DIR -m MODEL -k 1 --quiet -l LABELS",
    "classify --model=MODEL IMG --top-k=3 --threshold 0.5 --json -d cpu --threads 2",
    "classify IMG -m MODEL --mean 127.5 --std 128 --connect-timeout 20 --timeout 1e3 -p 2222 --path x",
    "detect IMG -m MODEL --conf 0.4 --iou .5 --max-det 10 --layout yolo --save DIR",
    "benchmark -m MODEL -n 5 --warmup 0 --max-slowdown 5",
    "inspect MODEL --json",
]
DECLINED = [
    "classify IMG -m MODEL --help",
    "classify -m MODEL",
    "classify IMG",
    "classify IMG -m MODEL -k 0",
    "classify IMG -m MODEL -k1",
    "classify IMG -m MODEL -k 1 -k 2",
    "classify IMG -m MODEL --threshold -1",
    "classify IMG -m MODEL --threshold nan",
    "classify IMG -m MODEL -k 1.5",
    "classify IMG -m MODEL --bogus",
    "classify IMG -m MODEL -- -x",
    "classify IMG -m MODEL -l DIR",
    "classify IMG -m MODEL --json=1",
    "classify IMG -m MODEL -qk 1",
    "classify IMG -m MODEL --connect-timeout 0",
    "classify IMG -m MODEL -p 70000",
    "detect IMG -m MODEL --layout nope",
    "inspect MODEL MODEL",
    "inspect DIR",
    "check MODEL",
    "--debug inspect MODEL",
    "classify IMG -m",
]


def _argv(line: str, files: dict) -> list:
    return [files.get(t, t) for t in line.split()]


@pytest.mark.parametrize("line", TAKEN)
def test_a_plain_command_line_gets_the_keywords_click_gives(line, files):
    argv = _argv(line, files)
    if argv[0] == "inspect":  # its model must exist (type file)
        argv[1] = files["LABELS"]
    parsed = cli_base.parse(argv)
    assert parsed is not None, line
    name, keywords = parsed
    ctx = cli.commands[name].make_context(name, argv[1:])
    assert name == argv[0]
    assert keywords == ctx.params
    assert {k: type(v) for k, v in keywords.items()} == {k: type(v) for k, v in ctx.params.items()}


@pytest.mark.parametrize("line", DECLINED)
def test_anything_else_is_left_to_click(line, files):
    assert cli_base.parse(_argv(line, files)) is None, line


def test_a_one_image_classify_runs_without_click_and_prints_what_click_s_run_prints(tmp_path):
    """The same stdout, stderr and exit code with and without click (--debug at the group makes click parse)."""
    model = shared_file("mobilenet_v1_0.25_128_quant.tflite")
    image = shared_file("cat.bmp")
    code = (
        "import sys\nfrom edgekit.cli import main\ntry:\n    main(sys.argv[1:])\nfinally:\n"
        "    sys.stderr.write('click imported: %s\\n' % ('click' in sys.modules))\n"
    )
    runs = {}
    for how, pre in (("fast", []), ("click", ["--debug"])):
        proc = subprocess.run(
            [sys.executable, "-c", code, *pre, "classify", str(image), "-m", str(model), "-k", "2", "--quiet"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        runs[how] = proc
    fast, slow = runs["fast"], runs["click"]
    assert fast.returncode == slow.returncode == 0, (fast.stderr, slow.stderr)
    assert "click imported: False" in fast.stderr and "click imported: True" in slow.stderr
    strip = fast.stdout.splitlines()
    assert [_no_ms(x) for x in strip] == [_no_ms(x) for x in slow.stdout.splitlines()]
    assert fast.stderr.replace("False", "") == slow.stderr.replace("True", "")


def _no_ms(line: str) -> str:
    import re

    return re.sub(r"[0-9.]+ ms", "ms", line)


def test_a_bad_image_is_the_same_error_line_and_exit_code_without_click(tmp_path):
    model = shared_file("mobilenet_v1_0.25_128_quant.tflite")
    runs = [
        subprocess.run(
            [
                sys.executable,
                "-m",
                "edgekit",
                *pre,
                "classify",
                str(tmp_path / "none.jpg"),
                "-m",
                str(model),
                "--quiet",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        for pre in ([], ["--debug"])
    ]
    assert runs[0].returncode == runs[1].returncode == 3
    assert runs[0].stderr.splitlines()[-1] == runs[1].stderr.splitlines()[-1]
    assert runs[0].stderr.splitlines()[-1].startswith("error: ")


# ------------------------------------------------------------------- generated parity (issue 31)
#: Odd values of each declared type: huge integers (past Python's 4,300-digit limit for int()), inf/nan and
#: overflowing floats, negatives, empty strings, underscores and non-ASCII digits, unicode and undecodable bytes.
ODD_VALUES = {
    "int": [
        "0",
        "1",
        "-1",
        "7",
        "007",
        "+3",
        "65535",
        "65536",
        "1" * 4301,
        "9" * 5000,
        "1" * 400,
        "1e3",
        "1.0",
        " 5",
        "\u0663",
        "0x10",
        "1_0",
        "",
    ],
    "float": [
        "0",
        "1",
        "-1",
        "-0",
        "0.5",
        ".5",
        "1.",
        "5",
        "1e3",
        "1e999",
        "-1e999",
        "1e-400",
        "1" * 400,
        "1" * 4301,
        "inf",
        "-inf",
        "nan",
        "NaN",
        "Infinity",
        " 1",
        "+1",
        "1_0",
        "\u0663",
        "",
    ],
    "text": ["", "x", "-x", "--json", "\u00e9t\u00e9", "\udcff", "a b", "auto", "cpu", "usb:0", "=", "1e999"],
    "path": ["MODEL", "IMG", "DIR", "LABELS", "", "missing.tflite", "-", "\u00e9.tflite", "\udcff.tflite", "x" * 5000],
}
ODD_VALUES["file"] = ODD_VALUES["path"]
JUNK = [
    "--",
    "-",
    "--bogus",
    "-x",
    "--json=1",
    "--quiet=yes",
    "-qk",
    "-k1",
    "-m",
    "--top-k",
    "--=",
    "---json",
    "IMG",
    "\u2014json",
    "--JSON",
    "-h",
]


def _odd_option(p, rng) -> list:
    """One declared option with an odd value, in one of the forms click takes (or almost takes)."""
    if p.type == "flag":
        return [rng.choice(p.flags)] if rng.random() < 0.8 else [f"{p.flags[0]}={rng.choice(['1', ''])}"]
    values = ODD_VALUES.get(p.type, ODD_VALUES["text"]) if p.type != "choice" else [*p.choices, "", "YOLO", "nope"]
    value, flag = rng.choice(values), rng.choice(p.flags)
    if flag.startswith("--") and rng.random() < 0.4:
        return [f"{flag}={value}"]
    return [flag, value] if rng.random() < 0.95 else [flag]  # now and then the value is missing


#: A value of each declared type that both parsers take as it is (within every declared bound).
PLAIN_VALUES = {"int": "1", "float": "1.5", "text": "x", "path": "MODEL", "file": "LABELS"}


def _base(name: str, model: tuple = ("-m", "MODEL")) -> list:
    """The arguments every line of ``name`` has (``model``: how -m is given)."""
    return ["LABELS"] if name == "inspect" else [*model] + ([] if name == "benchmark" else ["IMG"])


def plain_lines(name: str) -> list:
    """For each option of the fast command ``name`` (edgekit.flags' table), a plain line giving it alone, once per
    spelling: each of its flags, and ``--flag=value`` for a long one (a switch: the flag alone)."""
    from edgekit import flags

    lines = []
    for p in flags.COMMANDS[name]:
        if not isinstance(p, flags.Option):
            continue
        value = p.choices[0] if p.type == "choice" else PLAIN_VALUES.get(p.type, "")
        for flag in p.flags:
            spellings = (
                [[flag]]
                if p.type == "flag"
                else [[flag, value]] + ([[f"{flag}={value}"]] if flag.startswith("--") else [])
            )
            if p.required:  # -m: this spelling instead of the base's
                lines += [[name, *_base(name, tuple(spelling))] for spelling in spellings]
            else:
                lines += [[name, *_base(name), *spelling] for spelling in spellings]
    return lines


def generated_lines(seed: int = 31, per_command: int = 320) -> list:
    """Command lines of each fast command, from edgekit.flags' table: each option alone in each spelling
    (:func:`plain_lines`), then odd ones: a plain line with one to three odd options (some repeated), junk tokens
    or extra arguments at random places."""
    import random

    from edgekit import flags

    rng = random.Random(seed)
    lines = []
    for name in sorted(cli_base.FAST_COMMANDS):
        declared = flags.COMMANDS[name]
        options = [p for p in declared if isinstance(p, flags.Option)]
        lines += plain_lines(name)
        for _ in range(per_command):
            argv = _base(name)
            for _ in range(rng.choice((1, 1, 2, 3))):
                piece = rng.choice(["option", "option", "option", "repeat", "junk", "argument"])
                if piece == "junk":
                    part = [rng.choice(JUNK)]
                elif piece == "argument":
                    part = [rng.choice(ODD_VALUES["path"] + ODD_VALUES["text"])]
                else:
                    p = rng.choice(options)
                    part = _odd_option(p, rng) * (2 if piece == "repeat" else 1)
                at = rng.randrange(len(argv) + 1)
                argv[at:at] = part
            lines.append([name, *argv])
    return lines


def _click_answer(name: str, args: list):
    """What click makes of a command line: ("ok", keywords), or ("exit", code, message) for an error."""
    import click

    try:
        return ("ok", cli.commands[name].make_context(name, list(args)).params)
    except click.exceptions.Exit as exc:  # --help
        return ("exit", exc.exit_code, "")
    except click.ClickException as exc:
        return ("exit", exc.exit_code, exc.format_message())


def test_both_parsers_give_one_answer_for_every_generated_command_line(files, capsys):
    """Where the fast parser takes a line (no click), click takes it with the same keywords of the same types;
    where click would refuse it (exit 2 or 3 and its message), the fast parser leaves it to click; the fast
    parser never raises (a 4,301-digit integer was a traceback, ``--max-slowdown 1e999`` infinity)."""
    lines = generated_lines()
    assert len(lines) >= 1000
    taken = refused = 0
    for line in lines:
        argv = [files.get(t, t) for t in line]
        fast = cli_base.parse(argv)  # never raises
        answer = _click_answer(argv[0], argv[1:])
        if fast is None:
            refused += answer[0] == "exit"
            continue
        taken += 1
        assert answer[0] == "ok", (line, answer)  # click refuses what the fast parser took
        name, keywords = fast
        assert (name, keywords) == (argv[0], answer[1]), line
        assert {k: type(v) for k, v in keywords.items()} == {k: type(v) for k, v in answer[1].items()}, line
    capsys.readouterr()  # --help's text
    # the lines exercise both ways: some are plain enough for the fast parser, many are click's to refuse
    assert taken > 100 and refused > 300, (taken, refused)


def test_the_generated_lines_give_every_option_of_every_fast_command_in_every_spelling(files):
    """Every option edgekit.flags declares for classify, detect, benchmark and inspect, in each of its flags, is in
    a line the fast parser takes (so the parity test above compares its keywords with click's) and in odd lines
    (before, the random lines never had the fast parser take benchmark's --warmup or -q, nor detect's -p)."""
    from edgekit import flags

    lines = generated_lines()
    for name in sorted(cli_base.FAST_COMMANDS):
        ours = [line for line in lines if line[0] == name]
        taken = [line for line in ours if cli_base.parse([files.get(t, t) for t in line]) is not None]
        for p in flags.COMMANDS[name]:
            if not isinstance(p, flags.Option):
                continue
            for flag in p.flags:
                assert any(_has(line, flag) for line in taken), (name, flag)
                assert sum(_has(line, flag) for line in ours) > sum(_has(line, flag) for line in taken), (name, flag)


@pytest.mark.parametrize(
    "line",
    [
        "classify IMG -m MODEL -k " + "1" * 4301,
        "benchmark -m MODEL -n " + "9" * 5000,
        "benchmark -m MODEL --max-slowdown 1e999",
        "benchmark -m MODEL --max-slowdown=1" + "0" * 400,
        "classify IMG -m MODEL --timeout 1e999",
    ],
)
def test_what_click_refuses_is_left_to_click(line, files):
    """Python's int() limit (a traceback before) and an overflowing float (taken as infinity before): click
    refuses both (exit 2), so the fast parser does not take them."""
    argv = _argv(line, files)
    assert _click_answer(argv[0], argv[1:])[:2] == ("exit", 2)
    assert cli_base.parse(argv) is None


def test_a_4301_digit_integer_is_click_s_usage_error_not_a_traceback(tmp_path):
    """The whole command, as a user runs it: exit 2 and click's one line (it was a ValueError traceback)."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "edgekit",
            "classify",
            str(tmp_path / "a.jpg"),
            "-m",
            str(tmp_path / "m.tflite"),
            "-k",
            "1" * 4301,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "is not a valid integer" in done.stderr


# ------------------------------------------------------------------------ start-up guard (issue 33)
#: Modules a one-image classify of a plain model must not import: each cost the start-up measured in
#: benchmarks/startup.md (callgrind instructions) and none is needed for it. click (the parser for anything but a
#: plain command line), tempfile (12M instructions with shutil and random), pathlib (16M with urllib.parse and
#: ipaddress: os.path does for a plain model and image file), glob (only for a pattern), the TFLite reader and the
#: record reader (only for a compiled model or one with a record), and everything of quantize and build.
NOT_ON_A_ONE_IMAGE_CLASSIFY = (
    "click",
    "tempfile",
    "pathlib",
    "urllib.parse",
    "ipaddress",
    "random",
    "glob",
    "edgekit.tflite.model",
    "edgekit.tflite.model_record",
    "edgekit.pipeline.build",
    "edgekit.converters",
    "tensorflow",
    "edgekit.devices.remote",
    "edgekit.ssh",
)


@pytest.mark.parametrize("as_json", [False, True])
def test_a_one_image_classify_imports_nothing_it_does_not_use(as_json):
    """The start-up budget (benchmarks/startup.md: at most 1.13x the bare LiteRT script's instructions) is held by
    what is not imported; this fails the moment a module-level import brings one of them back."""
    model = shared_file("mobilenet_v1_0.25_128_quant.tflite")
    image, labels = shared_file("cat.bmp"), shared_file("imagenet_labels.txt")
    code = (
        "import atexit, runpy, sys\n"
        "atexit.register(lambda: sys.stderr.write('imported: %s\\n' % ' '.join(sorted(sys.modules))))\n"
        "sys.argv[0] = 'edgekit'\nrunpy.run_module('edgekit', run_name='__main__')\n"
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            "classify",
            str(image),
            "-m",
            str(model),
            "-k",
            "1",
            "--quiet",
            "-l",
            str(labels),
            *(["--json"] if as_json else []),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    imported = proc.stderr.rsplit("imported: ", 1)[1].split()
    assert "edgekit.devices.classify" in imported  # it did run edgekit's classify
    unwanted = [
        m
        for m in imported
        if m in NOT_ON_A_ONE_IMAGE_CLASSIFY or m.startswith(tuple(n + "." for n in NOT_ON_A_ONE_IMAGE_CLASSIFY))
    ]
    assert not unwanted, f"a one-image classify imported {unwanted} (see benchmarks/startup.md)"


def _has(line: list, flag: str) -> bool:
    """The command line ``line`` (its command first) gives ``flag``, alone or as ``flag=value``."""
    return any(t == flag or t.startswith(flag + "=") for t in line[1:])
