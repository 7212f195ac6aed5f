"""The README as a new user reads it: its quick start, run line by line, and every exit code in its table.

The commands are taken from the README itself, so the README and the code cannot drift apart. The
runtime half (check, compile, classify, inspect, ...) runs with the light install (`pip install .`:
TensorFlow, h5py and Keras unimportable, see tests/test_light_install.py); quantize with the full one.
"""

from __future__ import annotations

import ctypes.util
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, shared_file
from tests.helpers import default_stop_signals
from tests.test_cli import one_error_line_with_its_fix
from tests.test_light_install import light  # noqa: F401  (a fixture)

README = (REPO / "README.md").read_text()
STANDIN = REPO / "tests" / "fixtures" / "compiler" / "standin_edgetpu_compiler.py"


def quick_start_commands() -> list[list[str]]:
    """The `edgekit ...` lines of the README's quick-start block, as argument lists (comments dropped)."""
    section = README.split("## Quick start", 1)[1]
    block = section.split("```sh", 1)[1].split("```", 1)[0]
    return [shlex.split(line, comments=True)[1:] for line in block.strip().splitlines() if line.startswith("edgekit ")]


def full(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """`python -m edgekit ARGS` with everything installed (TensorFlow too)."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("EDGEKIT_")},
        "PYTHONPATH": str(REPO),
        **(env or {}),
    }
    return subprocess.run(
        [sys.executable, "-m", "edgekit", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


@pytest.mark.tf
def test_the_quick_start_runs_as_written(digits_keras, digits_folders, tmp_path, light):
    from PIL import Image

    commands = quick_start_commands()
    assert [c[0] for c in commands] == ["quantize", "check", "compile", "classify"], commands
    shutil.copy(digits_keras.path, tmp_path / "model.h5")  # a Keras model, no record beside it
    shutil.copytree(digits_folders.train, tmp_path / "images")  # class folders of images
    digit = sorted((Path(digits_folders.test) / "3").iterdir())[0]
    Image.open(digit).convert("RGB").save(tmp_path / "cat.jpg", quality=95)  # the image to classify
    compiler = shutil.which(os.environ.get("EDGETPU_COMPILER", "edgetpu_compiler"))
    for argv in commands:
        r = full(*argv, cwd=tmp_path) if argv[0] == "quantize" else light(*argv)
        if argv[0] == "compile" and not compiler:  # README: x86-64 Linux only; elsewhere check's prediction
            assert r.returncode == 4 and "offline prediction" in r.stdout, r.stderr
            continue
        if argv[0] == "classify" and not compiler:  # no compiled model: the error names both ways on
            twin = argv[argv.index("-m") + 1].replace("_edgetpu", "")
            assert r.returncode == 3 and f"or run the CPU model: -m {twin})" in one_error_line_with_its_fix(r.stderr)
            argv = [a if a != argv[argv.index("-m") + 1] else twin for a in argv]
            r = light(*argv)
        assert r.returncode == 0, (argv, r.stdout, r.stderr)
    assert (tmp_path / "model_int8.tflite").is_file() and (tmp_path / "model_int8.edgekit.json").is_file()
    assert "cat.jpg" in r.stdout and re.search(r"^\s+\d\.\d+\s+\d+\s+\d$", r.stdout, re.M), r.stdout  # labels 0..9


# ------------------------------------------------------------------------------------------ exit codes
def documented_exit_codes() -> list[int]:
    table = README.split("### Exit codes", 1)[1].split("\n\n", 2)[1]
    return [int(c) for row in re.findall(r"^\| ([\d, ]+) \|", table, re.M) for c in row.split(",")]


def _stand_in_compiler(folder: Path, **behaviour: str) -> dict:
    exe = folder / "edgetpu_compiler"
    exe.write_text(
        f"#!{sys.executable}\nimport runpy, sys\nsys.exit(runpy.run_path({str(STANDIN)!r}, "
        "run_name='standin')['main'](sys.argv[1:]))\n"
    )
    exe.chmod(0o755)
    return {"EDGETPU_COMPILER": str(exe), **{f"STANDIN_{k}": str(v) for k, v in behaviour.items()}}


def _scenario(code: int, tmp: Path, light_run, request) -> subprocess.CompletedProcess:
    model, cat = str(shared_file("mobilenet_v1_0.25_128_quant.tflite")), str(shared_file("cat.bmp"))
    if code == 0:
        return light_run("inspect", model)
    if code == 1:
        return full("doctor", cwd=tmp, env={"EDGETPU_COMPILER": str(tmp / "no_such_compiler")})
    if code == 2:
        return light_run("classify", cat, "-m", model, "--device", "usb:x")
    if code == 3:
        return light_run("inspect", str(tmp / "missing.tflite"))
    if code == 4:
        (tmp / "images").mkdir()
        (tmp / "model.h5").write_bytes(b"\x89HDF\r\n\x1a\n" + bytes(600))
        return light_run("quantize", "model.h5", "--calib", "images/")
    if code in (5, 6):
        pytest.importorskip("tensorflow", reason="quantize needs TensorFlow")
        import keras

        from edgekit.training import digits

        if code == 5:  # not a one-input image model
            a, b = keras.Input((8, 8, 3)), keras.Input((8, 8, 3))
            m = keras.Model([a, b], keras.layers.Dense(2)(keras.layers.Flatten()(keras.layers.Add()([a, b]))))
        else:  # an untrained model on labelled data: every preprocessing is near chance
            m = digits.build_cnn(seed=1)
        m.save(tmp / "m.keras")
        folders = request.getfixturevalue("digits_folders")
        return full("quantize", "m.keras", "--calib", str(folders.train), "--samples", "60", cwd=tmp)
    if code == 7:
        return light_run("check", str(shared_file("deeplabv3_mnv2_dm05_pascal_quant.tflite")), "--strict")
    if code == 8:
        shutil.copy(shared_file("split_concat.tflite"), tmp / "m.tflite")
        env = _stand_in_compiler(tmp, STDOUT="v16_op_version_quantize.txt", EXIT=1, WRITE=0)
        return full("compile", "m.tflite", cwd=tmp, env=env)
    if code == 9:
        if ctypes.util.find_library("edgetpu"):
            pytest.skip("libedgetpu is installed here: -d usb may really run")
        return light_run(
            "classify", cat, "-m", str(shared_file("mobilenet_v1_0.25_128_quant_edgetpu.tflite")), "-d", "usb"
        )
    if code == 10:  # benchmark --compare against a saved run made to look 1000 times faster
        import json

        # -n 10: each side needs 8 latencies for an interval of its median (fewer is 'cannot tell', exit 0)
        base = light_run("benchmark", "-m", model, "-n", "10", "--warmup", "1", "--save", str(tmp / "base.json"))
        assert base.returncode == 0, base.stderr
        doc = json.loads((tmp / "base.json").read_text())
        for key in [k for k in doc if k.endswith("_ms")]:
            if isinstance(doc[key], (int, float)):
                doc[key] = doc[key] / 1000
            elif isinstance(doc[key], list):
                doc[key] = [v / 1000 for v in doc[key]]
        (tmp / "base.json").write_text(json.dumps(doc))
        return light_run("benchmark", "-m", model, "-n", "10", "--warmup", "1", "--compare", str(tmp / "base.json"))
    if code == 70:  # a bug in edgekit, simulated: the model reader raises an unexpected exception
        script = (
            "import sys, edgekit.tflite.model as t\nt.load = lambda p: 1 / 0\n"
            "from edgekit.cli import main\nmain(['inspect', sys.argv[1]])\n"
        )
        return subprocess.run(
            [sys.executable, "-c", script, model],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
    if code in (129, 130, 143):  # stopped while the compiler runs
        shutil.copy(shared_file("split_concat.tflite"), tmp / "m.tflite")
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            **_stand_in_compiler(tmp, SLEEP=30, CHILD_PID_FILE=tmp / "child.pid"),
        }
        p = subprocess.Popen(
            [sys.executable, "-m", "edgekit", "compile", "m.tflite"],
            cwd=tmp,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=default_stop_signals,
        )
        for _ in range(600):
            if (tmp / "child.pid").exists() and (tmp / "child.pid").read_text():
                break
            time.sleep(0.05)
        p.send_signal({129: signal.SIGHUP, 130: signal.SIGINT, 143: signal.SIGTERM}[code])
        out, err = p.communicate(timeout=60)
        return subprocess.CompletedProcess(p.args, p.returncode, out, err)
    raise AssertionError(f"exit code {code} is documented in the README but has no scenario here")


@pytest.mark.parametrize("code", documented_exit_codes())
def test_each_documented_exit_code_happens_as_documented(code, tmp_path, light, request):
    r = _scenario(code, tmp_path, light, request)
    assert r.returncode == code, (r.stdout, r.stderr)
    if code in (0, 1):
        assert "error:" not in r.stderr
    elif code >= 129:
        assert r.stderr.strip() in ("interrupted", f"stopped by {signal.Signals(code - 128).name}")
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # nothing half-written
    else:
        line = one_error_line_with_its_fix(r.stderr)
        if code == 70:
            assert "internal error: ZeroDivisionError" in line and "rerun with --debug" in line


def test_the_table_lists_the_codes_edgekit_uses():
    from edgekit.errors import EXIT_CODES

    assert set(EXIT_CODES) <= set(documented_exit_codes())
