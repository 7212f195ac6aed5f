"""The click-free parse of plain runtime command lines (edgekit.cli_base.parse, issue 25 start-up): it gives the
keywords click gives, or leaves the command line to click."""

from __future__ import annotations

import subprocess
import sys

import pytest

from edgekit import cli_base
from edgekit.cli import cli
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
    "classify IMG -m MODEL --help", "classify -m MODEL", "classify IMG", "classify IMG -m MODEL -k 0",
    "classify IMG -m MODEL -k1", "classify IMG -m MODEL -k 1 -k 2", "classify IMG -m MODEL --threshold -1",
    "classify IMG -m MODEL --threshold nan", "classify IMG -m MODEL -k 1.5", "classify IMG -m MODEL --bogus",
    "classify IMG -m MODEL -- -x", "classify IMG -m MODEL -l DIR", "classify IMG -m MODEL --json=1",
    "classify IMG -m MODEL -qk 1", "classify IMG -m MODEL --connect-timeout 0", "classify IMG -m MODEL -p 70000",
    "detect IMG -m MODEL --layout nope", "inspect MODEL MODEL", "inspect DIR", "check MODEL", "--debug inspect MODEL",
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
    code = ("import sys\nfrom edgekit.cli import main\ntry:\n    main(sys.argv[1:])\nfinally:\n"
            "    sys.stderr.write('click imported: %s\\n' % ('click' in sys.modules))\n")
    runs = {}
    for how, pre in (("fast", []), ("click", ["--debug"])):
        proc = subprocess.run([sys.executable, "-c", code, *pre, "classify", str(image), "-m", str(model), "-k", "2",
                               "--quiet"], capture_output=True, text=True, timeout=120)
        runs[how] = proc
    fast, slow = runs["fast"], runs["click"]
    assert fast.returncode == slow.returncode == 0, (fast.stderr, slow.stderr)
    assert "click imported: False" in fast.stderr and "click imported: True" in slow.stderr
    strip = [line for line in fast.stdout.splitlines()]
    assert [_no_ms(x) for x in strip] == [_no_ms(x) for x in slow.stdout.splitlines()]
    assert fast.stderr.replace("False", "") == slow.stderr.replace("True", "")


def _no_ms(line: str) -> str:
    import re

    return re.sub(r"[0-9.]+ ms", "ms", line)


def test_a_bad_image_is_the_same_error_line_and_exit_code_without_click(tmp_path):
    model = shared_file("mobilenet_v1_0.25_128_quant.tflite")
    runs = [subprocess.run([sys.executable, "-m", "edgekit", *pre, "classify", str(tmp_path / "none.jpg"), "-m",
                            str(model), "--quiet"], capture_output=True, text=True, timeout=120)
            for pre in ([], ["--debug"])]
    assert runs[0].returncode == runs[1].returncode == 3
    assert runs[0].stderr.splitlines()[-1] == runs[1].stderr.splitlines()[-1]
    assert runs[0].stderr.splitlines()[-1].startswith("error: ")
