"""A small hostile-input suite over every command: what an attacker, a typo or a broken disk hands edgekit.

Each case runs the real CLI (``python -m edgekit``) with a time limit and asks what the README
promises for bad input: an exit code from its table (never 70, an internal error), at most one
``error:`` line, no Python traceback or raw warning on stderr, and no hang. Future changes keep it green.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

from tests.conftest import REPO, shared_file
from tests.helpers import default_stop_signals

MODEL = "mobilenet_v1_0.25_128_quant.tflite"
DOCUMENTED = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 129, 130, 143}


def run(
    *args: str | bytes, cwd: Path | None = None, timeout: float = 60, env: dict | None = None
) -> subprocess.CompletedProcess:
    full_env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("EDGEKIT_")},
        "PYTHONPATH": str(REPO),
        **(env or {}),
    }
    return subprocess.run(
        [sys.executable, "-m", "edgekit", *args], cwd=cwd, env=full_env, capture_output=True, timeout=timeout
    )


def assert_clean(proc: subprocess.CompletedProcess, code: int | None = None) -> str:
    """The README's promise for a refused input; returns the one error line (or "")."""
    err = proc.stderr.decode("utf-8")  # strict: every line edgekit prints is UTF-8
    assert proc.returncode in DOCUMENTED and proc.returncode != 70, (proc.returncode, err)
    if code is not None:
        assert proc.returncode == code, err
    assert "Traceback" not in err and "Warning:" not in err and "\udcff" not in err, err
    errors = [ln for ln in err.splitlines() if ln.startswith("error: ")]
    assert len(errors) <= 1, err
    return errors[0] if errors else ""


def _png(width: int, height: int) -> bytes:
    """A PNG whose header declares ``width`` x ``height``: a decompression bomb's first bytes."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(b"\x00" * 1024))
        + chunk(b"IEND", b"")
    )


@pytest.fixture()
def hostile(tmp_path):
    """A folder of hostile inputs next to one good model."""
    model = tmp_path / MODEL
    shutil.copy(shared_file(MODEL), model)
    (tmp_path / "fifo.tflite").parent.mkdir(exist_ok=True)
    os.mkfifo(tmp_path / "fifo.tflite")
    os.mkfifo(tmp_path / "fifo.jpg")
    os.mkfifo(tmp_path / "fifo.json")
    (tmp_path / "yolo_fifo" / "images").mkdir(parents=True)  # a YOLO folder whose label file is a FIFO
    (tmp_path / "yolo_fifo" / "labels").mkdir()
    shutil.copy(shared_file("cat.bmp"), tmp_path / "yolo_fifo" / "images" / "cat.bmp")
    os.mkfifo(tmp_path / "yolo_fifo" / "labels" / "cat.txt")
    (tmp_path / "eps.jpg").write_text("%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\nshowpage\n")
    (tmp_path / "bomb.png").write_bytes(_png(30000, 30000))
    (tmp_path / "empty.jpg").write_bytes(b"")
    (tmp_path / "truncated.png").write_bytes(shared_file("cat.bmp").read_bytes()[:100])
    (tmp_path / "deep.json").write_text("[" * 100000 + "]" * 100000)
    os.symlink(shared_file("cat.bmp"), tmp_path / "link.bmp")
    return tmp_path


IMAGE_CASES = ["eps.jpg", "bomb.png", "empty.jpg", "truncated.png", "fifo.jpg"]


@pytest.mark.parametrize("image", IMAGE_CASES)
def test_hostile_images_are_one_line_and_exit_3(hostile, image):
    proc = run("classify", str(hostile / image), "-m", str(hostile / MODEL), cwd=hostile)
    line = assert_clean(proc, 3)
    assert image in line


def test_the_eps_plugin_is_never_asked_to_load(hostile, monkeypatch):
    """In-process: Pillow's EPS plugin (the one that runs Ghostscript) must not even be offered the file."""
    from PIL import EpsImagePlugin

    from edgekit.board import preprocess
    from edgekit.errors import InputError

    def refuse(*args, **kwargs):
        raise AssertionError("the EPS plugin was used")

    monkeypatch.setattr(EpsImagePlugin.EpsImageFile, "_open", refuse)
    monkeypatch.setattr(EpsImagePlugin.EpsImageFile, "load", refuse)
    with pytest.raises(InputError, match="not an image edgekit reads"):
        preprocess.open_image(hostile / "eps.jpg")


@pytest.mark.parametrize(
    "argv",
    [
        ["inspect", "{fifo}"],
        ["check", "{fifo}"],
        ["compile", "{fifo}"],
        ["inspect", "/dev/null"],
        ["classify", "{cat}", "-m", "{fifo}"],
        ["classify", "{cat}", "-m", "{model}", "-l", "/dev/zero"],
        ["classify", "{cat}", "-m", "{model}", "-l", "{dir}/fifo.json"],
        ["benchmark", "-m", "{fifo}", "-n", "1"],
        ["benchmark", "-m", "{model}", "-n", "1", "--compare", "{dir}/fifo.json"],
        ["evaluate", "-m", "{model}", "--data", "{dir}/fifo.json"],
        ["detect", "{cat}", "-m", "{fifo}"],
        ["detect", "{cat}", "-m", "{model}", "-l", "/dev/zero"],
        ["evaluate", "-m", "{model}", "--data", "{dir}/yolo_fifo"],
        ["evaluate", "-m", "{model}", "--data", "{dir}/deep.json"],
        ["quantize", "{dir}/fifo.json", "--calib", "random"],
        ["inspect", "{dir}"],
        ["inspect", "{dir}/missing.tflite"],
    ],
)
def test_fifos_devices_folders_and_missing_files_never_hang(hostile, argv):
    args = [
        a.format(fifo=hostile / "fifo.tflite", model=hostile / MODEL, cat=shared_file("cat.bmp"), dir=hostile)
        for a in argv
    ]
    proc = run(*args, cwd=hostile, timeout=120)
    assert proc.returncode in (2, 3), proc.stderr
    assert_clean(proc)


@pytest.mark.parametrize(
    "saved",
    [
        '{"p50_ms": NaN}',
        '{"p50_ms": Infinity}',
        '{"p50_ms": 0}',
        '{"p50_ms": -3}',
        '{"p50_ms": true}',
        '{"p50_ms": "12"}',
        "[1, 2]",
        '{"p50_ms": 5, "latencies_ms": [1, -1]}',
        "deep",
    ],
)
def test_a_benchmark_baseline_that_is_not_a_saved_run_is_exit_3(hostile, saved):
    path = hostile / ("deep.json" if saved == "deep" else "saved.json")
    if saved != "deep":
        path.write_text(saved)
    proc = run("benchmark", "-m", str(hostile / MODEL), "-n", "2", "--warmup", "0", "--compare", str(path))
    assert "--compare" in assert_clean(proc, 3)


def test_deep_json_beside_a_model_or_in_a_bundle_is_exit_3(hostile):
    from tests.helpers import make_bundle

    shutil.copy(hostile / "deep.json", hostile / "mobilenet_v1_0.25_128_quant.edgekit.json")
    assert "nested too deeply" in assert_clean(
        run("classify", str(shared_file("cat.bmp")), "-m", str(hostile / MODEL)), 3
    )
    bundle = make_bundle(hostile / "bundle")
    shutil.copy(hostile / "deep.json", bundle / "manifest.json")
    assert "nested too deeply" in assert_clean(run("classify", str(shared_file("cat.bmp")), "-m", str(bundle)), 3)


def test_names_that_are_not_utf8_or_look_like_options(hostile):
    weird = os.fsencode(hostile) + b"/m\xff \xe9-odd.tflite"
    shutil.copy(hostile / MODEL, weird)
    bad_image = os.fsencode(hostile) + b"/bad\xff.jpg"
    Path(os.fsdecode(bad_image)).write_bytes(b"not an image")
    for args in (
        ["classify", bad_image, str(shared_file("cat.bmp")), "-m", weird, "-k", "1"],
        ["benchmark", "-m", weird, "-n", "2"],
        ["inspect", weird],
        ["check", weird],
    ):
        proc = run(*args)
        assert_clean(proc)
        assert proc.returncode in (0, 3), proc.stderr
    line = assert_clean(run("classify", bad_image, "-m", weird), 3)
    assert "bad\\xff.jpg" in line
    dash = hostile / "-m.tflite"
    shutil.copy(hostile / MODEL, dash)
    assert_clean(run("inspect", "--", "-m.tflite", cwd=hostile), 0)


@pytest.mark.parametrize("destination", ["-oProxyCommand=touch {marker}@h", "u@-oProxyCommand=x", "a b@h", "u@h;id"])
def test_ssh_destinations_that_could_be_options_are_exit_2(hostile, destination):
    from tests.helpers import make_bundle

    bundle = make_bundle(hostile / "bundle")
    proc = run("deploy", str(bundle), "--to", destination.format(marker=hostile / "marker"), cwd=hostile)
    assert "not an SSH destination" in assert_clean(proc, 2)
    assert not (hostile / "marker").exists()


def test_a_full_stdout_is_one_line_and_exit_1(hostile):
    for args in (["inspect", str(hostile / MODEL)], ["inspect", str(hostile / MODEL), "--json"], ["devices"]):
        with open("/dev/full", "w") as full:
            proc = subprocess.run(
                [sys.executable, "-m", "edgekit", *args],
                stdout=full,
                stderr=subprocess.PIPE,
                env={**os.environ, "PYTHONPATH": str(REPO)},
                timeout=60,
            )
        assert "cannot write to standard output" in assert_clean(proc, 1)


def test_sigterm_stops_a_run_with_its_documented_code(hostile):
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "edgekit",
            "benchmark",
            "-m",
            str(hostile / MODEL),
            "-n",
            "100000000",
            "--warmup",
            "0",
            "-q",
        ],
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        preexec_fn=default_stop_signals,
    )
    time.sleep(3)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "Traceback" not in err.decode()


def test_doctor_leaves_no_child_of_a_hung_compiler(tmp_path):
    """The stand-in (a script, no compiler) answers --version by starting a child and hanging."""
    pid_file = tmp_path / "child.pid"
    exe = tmp_path / "edgetpu_compiler"
    exe.write_text(f"#!/bin/sh\nsleep 300 &\necho $! > {pid_file}\nsleep 300\n")
    exe.chmod(0o755)
    start = time.monotonic()
    from edgekit.doctor import diagnose as doctor

    check = doctor.check_compiler(doctor.Probe(env={"EDGETPU_COMPILER": str(exe), "PATH": "/usr/bin:/bin"}), 2.0)
    assert time.monotonic() - start < 30 and "did not answer" in check.detail + (check.fix or "")
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the compiler's child {child} is still running")


def test_labels_that_contradict_the_recorded_ones_are_warned(hostile):
    from tests.helpers import make_bundle

    bundle = make_bundle(hostile / "bundle")
    wrong = hostile / "wrong.txt"
    wrong.write_text("".join(f"class {i}\n" for i in range(1001)))
    proc = run("classify", str(shared_file("cat.bmp")), "-m", str(bundle), "-l", str(wrong), "--json")
    assert_clean(proc, 0)
    assert "differs from the labels recorded with the model" in proc.stderr.decode()
    assert json.loads(proc.stdout)["results"][0]["top"][0]["label"].startswith("class ")


def test_only_the_plugin_a_file_names_is_loaded(hostile):
    """The format comes from the file's first bytes, among the README's only: Pillow's EPS reader is never
    even imported, and a BMP loads no other plugin (which also keeps classify's start fast)."""
    script = (
        "import sys\nfrom edgekit.board import preprocess\n"
        "try:\n    preprocess.open_image(sys.argv[1])\nexcept Exception as exc:\n    print(type(exc).__name__)\n"
        "preprocess.open_image(sys.argv[2])\n"
        "print(sorted(m for m in sys.modules if m.startswith('PIL.') and m.endswith('ImagePlugin')))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(hostile / "eps.jpg"), str(shared_file("cat.bmp"))],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    refused, plugins = proc.stdout.splitlines()
    assert refused == "InputError" and plugins == "['PIL.BmpImagePlugin']"


# Issue 23: a crashing libedgetpu only the dynamic linker finds (LD_LIBRARY_PATH), run from a downloaded
# folder that holds modules named like the ones edgekit's children import.
CRASHING_LIBEDGETPU = r"""
#include <stddef.h>
void* tflite_plugin_create_delegate(char** keys, char** values, size_t n, void (*report)(const char*)) {
  volatile int* p = NULL; *p = 42; return NULL;
}
void tflite_plugin_destroy_delegate(void* d) {}
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="LD_LIBRARY_PATH and libedgetpu.so.1 are Linux's")
def test_a_crashing_libedgetpu_on_ld_library_path_and_planted_modules_in_the_current_folder(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    script = Path(sys.executable).parent / "edgekit"
    if not cc or not script.is_file():
        pytest.skip("needs a C compiler and the edgekit console script beside this Python")
    libs = tmp_path / "libs"
    libs.mkdir()
    (libs / "crash.c").write_text(CRASHING_LIBEDGETPU)
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(libs / "libedgetpu.so.1"), str(libs / "crash.c")], check=True)
    here = tmp_path / "downloaded-dataset"
    here.mkdir()
    for name in ("mobilenet_v1_0.25_128_quant_edgetpu.tflite", MODEL, "cat.bmp"):
        shutil.copy(shared_file(name), here / name)
    marker = tmp_path / "ran"
    forge = f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\nimport sys\nsys.exit(0)\n"
    for name in ("json.py", "ctypes.py", "subprocess.py", "hashlib.py"):
        (here / name).write_text(forge)
    for package in ("edgekit", "edgekit/devices"):
        (here / package).mkdir()
        (here / package / "__init__.py").write_text(forge)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("EDGEKIT_") and k != "PYTHONPATH"},
        "LD_LIBRARY_PATH": str(libs),
        "EDGEKIT_CACHE_DIR": str(tmp_path / "cache"),
    }
    done = subprocess.run(
        [str(script), "classify", "-m", "mobilenet_v1_0.25_128_quant_edgetpu.tflite", "cat.bmp"],
        cwd=here,
        env=env,
        capture_output=True,
        timeout=300,
    )
    assert done.returncode == 0, (done.returncode, done.stderr.decode(errors="replace"))
    assert_clean(done, 0)
    err = done.stderr.decode()
    assert f"{libs / 'libedgetpu.so.1'} crashes with" in err and "SIGSEGV" in err, err
    doctor = subprocess.run([str(script), "doctor"], cwd=here, env=env, capture_output=True, timeout=300)
    assert doctor.returncode in (0, 1), doctor.stderr
    assert f"{libs / 'libedgetpu.so.1'}" in doctor.stdout.decode()
    assert not marker.exists(), marker.read_text()


def test_a_closed_stdout_is_one_line_and_exit_1(hostile):
    """``edgekit inspect m >&-``: the output cannot go anywhere, so exit 1 as for a full disk (README), not 0."""
    for args in (["inspect", str(hostile / MODEL)], ["inspect", str(hostile / MODEL), "--json"]):
        proc = subprocess.run(
            [sys.executable, "-m", "edgekit", *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            timeout=60,
            preexec_fn=lambda: os.close(1),
        )
        assert "standard output" in assert_clean(proc, 1)


def test_quantize_eval_errors_name_eval_not_calib(hostile):
    """quantize's --eval data is read by the calibration reader; its errors name --eval, the option at fault."""
    from edgekit.board.preprocess import PreprocessSpec
    from edgekit.converters import calibration
    from edgekit.errors import InputError, UsageError

    model = hostile / "model.h5"
    model.write_bytes(b"not read: the --eval check comes first")
    line = assert_clean(run("quantize", str(model), "--calib", "random", "--eval", str(hostile / "gone")), 3)
    assert line.startswith("error: --eval ") and "--calib" not in line, line
    line = assert_clean(run("quantize", str(model), "--calib", "random", "--eval", "random"), 2)
    assert line.startswith("error: --eval random") and "--calib" not in line, line
    (hostile / "junk.npy").write_bytes(b"not an array")
    (hostile / "one.png").write_bytes(b"")
    for source in ("junk.npy", "one.png", "*.tfrecord"):
        with pytest.raises((InputError, UsageError)) as caught:
            calibration.load(str(hostile / source), PreprocessSpec(8, 8), flag="--eval")
        assert str(caught.value).startswith("--eval ") and "--calib" not in str(caught.value), caught.value


def test_check_time_grows_like_reading_the_model_not_quadratically():
    """check of a model whose second half is cut off the Edge TPU: within a small multiple of the time inspect
    takes to read the same model, measured in this process (so a slow or busy machine slows both). A walk back
    per cut-off op made it quadratic: about 6x the reading time at 6,000 ops (and 166 s at 150,000), linear
    about 0.5x."""
    from edgekit.edgetpu.compatibility import CUT_OFF, check_model
    from edgekit.tflite import model as tflite_model
    from tests.tflite_builder import cut_chain

    data = cut_chain(6000)
    read = check = float("inf")
    for _ in range(2):  # best of two: a busy machine adds, never removes, time
        start = time.perf_counter()
        info = tflite_model.ModelInfo.from_bytes(data)
        middle = time.perf_counter()
        report = check_model(info)
        read, check = min(read, middle - start), min(check, time.perf_counter() - middle)
    assert report.verdict == "partial" and sum(o.detail == CUT_OFF for o in report.ops) == 2999
    assert check < 3 * read, f"check {check:.2f} s against {read:.2f} s to read the model"


def _one_op_model(
    op: str, const_shape: list[int], const_values: int, const_bytes: int | None = None, const_first: bool = False
) -> bytes:
    """``op`` over an int8 1x4x4x2 input and an int32 constant of ``const_shape`` holding ``const_values`` ones,
    its buffer cut to ``const_bytes`` when given: what TensorFlow Lite refuses as "invalidly specified"."""
    import numpy as np

    from tests.tflite_builder import GraphBuilder

    gb = GraphBuilder()
    x = gb.tensor([1, 4, 4, 2], "int8", name="input")
    c = gb.tensor(const_shape, "int32", data=np.ones(const_values, np.int32), scale=None, name="axis")
    if const_bytes is not None:
        gb.buffers[-1].data = gb.buffers[-1].data[:const_bytes]
    y = gb.tensor([1, 4, 4, 2], "int8")
    gb.op(op, [c, x] if const_first else [x, c], [y])
    return gb.build([x], [y])


@pytest.mark.parametrize(
    "op,shape,values,cut,first",
    [
        ("SPLIT", [], 1, 2, True),
        ("SPLIT", [1], 1, 2, True),
        ("MEAN", [-1, -1], 1, None, False),
        ("PAD", [-1, -1], 1, None, False),
        ("SPLIT", [-1, -1], 1, None, True),
        ("MEAN", [2], 1, None, False),
    ],
)
def test_check_of_a_constant_tflite_refuses_is_exit_3_not_70(tmp_path, op, shape, values, cut, first):
    """A constant shaped [-1, -1], or an axis whose buffer holds 2 of the 4 bytes of an int32: TensorFlow Lite
    refuses both ("invalidly specified in schema"); check says which op and constant, exit 3."""
    model = tmp_path / "bad.tflite"
    model.write_bytes(_one_op_model(op, shape, values, cut, first))
    line = assert_clean(run("check", str(model)), 3)
    assert f"op #0 {op}'s constant input" in line and "'axis'" in line, line
    assert_clean(run("inspect", str(model)), 0)  # the reader still shows what the file holds


def test_build_refuses_inputs_inside_its_output_before_touching_anything(hostile):
    """A bundle that ships its source model or labels is replaced as a whole by ``build -o`` it: the input would
    be deleted. Any input inside -o (as given, or through a link) is exit 2, and the bundle stays as it was."""
    from edgekit.board import manifest
    from edgekit.pipeline import build
    from edgekit.results.build import BundleManifest
    from tests.helpers import make_bundle

    bundle = make_bundle(hostile / "bundle")
    doc = json.loads((bundle / "manifest.json").read_text())
    sources = {e["path"]: bundle / e["path"] for e in doc["files"]}
    sources["source/model.h5"] = b"the user's source model, shipped in the bundle"
    sources["data/cat/cat.bmp"] = shared_file("cat.bmp")
    bundle = build.write_bundle(hostile / "bundle2", sources, BundleManifest.from_dict(doc))
    before = {p: p.read_bytes() for p in bundle.rglob("*") if p.is_file()}
    (hostile / "labels-link.txt").symlink_to(bundle / manifest.LABELS_NAME)
    outside = hostile / "model.h5"
    outside.write_bytes(b"not read")
    for args, what in (
        ([str(bundle / "source/model.h5")], "the model"),
        ([str(outside), "--labels", str(bundle / manifest.LABELS_NAME)], "--labels"),
        ([str(outside), "--labels", str(hostile / "labels-link.txt")], "--labels"),
        ([str(outside), "--calib", str(bundle / "data")], "--calib"),
        ([str(outside), "--calib", str(bundle / "data" / "*.tfrecord")], "--calib"),
        ([str(outside), "--calib", "random", "--eval", str(bundle)], "--eval"),
        (["bundle2/source/model.h5"], "the model"),
    ):
        line = assert_clean(run("build", *args, "-o", str(bundle), cwd=hostile), 2)
        assert line.startswith(f"error: {what} ") and "inside the output folder" in line, line
    assert {p: p.read_bytes() for p in bundle.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in hostile.iterdir() if p.name.startswith(".bundle2")) == []


SPOOF = "\x1b[2J\x1b[31m\nVerdict: FULL\r\x07\u202e"


def _named_model(spoof: str) -> bytes:
    """A model whose input, output and custom op code and a metadata entry's name carry ``spoof``."""
    from ai_edge_litert import schema_py_generated as S

    from tests.tflite_builder import GraphBuilder

    gb = GraphBuilder()
    x = gb.tensor([1, 4], "int8", name="in" + spoof)
    y = gb.tensor([1, 4], "int8", name="mid" + spoof)
    gb.op("ADD", [x, x], [y])
    z = gb.tensor([1, 4], "int8", name="out" + spoof)
    gb.op("CUSTOM", [y], [z], custom_code="Op" + spoof)
    model = S.ModelT.InitFromPackedBuf(gb.build([x], [z]), 0)
    meta, buf = S.MetadataT(), S.BufferT()
    buf.data = list(b"value")
    model.buffers.append(buf)
    meta.name, meta.buffer = "meta" + spoof, len(model.buffers) - 1
    model.metadata = [meta]
    import flatbuffers

    b = flatbuffers.Builder(1024)
    b.Finish(model.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def _assert_inert(text: str) -> None:
    """Nothing a terminal obeys but newlines, and no line a name made: each spoof is shown escaped, in place."""
    assert not any(ch in text for ch in "\x1b\r\x07\u202e"), repr(text)
    assert not any(line.startswith("Verdict: FULL") for line in text.splitlines()), text
    assert "\\x1b[2J\\x1b[31m\\nVerdict: FULL\\r\\x07\\u202e" in text, text


def test_names_from_a_model_are_escaped_in_text_and_exact_in_json(tmp_path):
    """Tensor names, custom op codes and metadata names with escape sequences and newlines: inert in text (shown
    as \\x1b, \\n, ...), exact in --json."""
    model = tmp_path / "named.tflite"
    model.write_bytes(_named_model(SPOOF))
    for command in ("inspect", "check"):
        proc = run(command, str(model))
        assert_clean(proc, 0)
        _assert_inert(proc.stdout.decode())
    doc = json.loads(run("inspect", str(model), "--json").stdout)
    assert doc["inputs"][0]["name"] == "in" + SPOOF and doc["metadata"] == ["meta" + SPOOF]
    assert json.loads(run("check", str(model), "--json").stdout)["verdict"] == "partial"


def test_labels_and_error_lines_are_escaped(hostile):
    """Labels (a bundle's or a model's, or -l's) are printed with classify's scores: escaped the same way; an error
    line naming what a model holds stays one line."""
    from edgekit.errors import shown

    labels = hostile / "labels.txt"
    labels.write_text("".join(f"class{SPOOF.replace(chr(10), '')}{i}\n" for i in range(1001)))
    proc = run("classify", str(shared_file("cat.bmp")), "-m", str(hostile / MODEL), "-l", str(labels), "-k", "3")
    assert_clean(proc, 0)
    out = proc.stdout.decode()
    assert not any(ch in out for ch in "\x1b\r\x07\u202e") and "class\\x1b[2J\\x1b[31m" in out, out
    assert shown("a" + SPOOF) == "a\\x1b[2J\\x1b[31m\\nVerdict: FULL\\r\\x07\\u202e"
    assert shown("a\nb", newlines=True) == "a\nb" and shown("café 中 x\udcff") == "café 中 x\\xff"
    model = hostile / "named.tflite"
    model.write_bytes(_named_model(SPOOF))
    proc = run("classify", str(shared_file("cat.bmp")), "-m", str(model))  # the input's name is in the error
    err = proc.stderr.decode()
    assert len(err.splitlines()) == 1 and not any(ch in err for ch in "\x1b\r\x07\u202e"), err


def _saved_model(folder: Path, evil: str, marker: Path) -> Path:
    """A tiny image classifier SavedModel whose serving function also does ``evil`` (or nothing more)."""
    from edgekit.converters.tf_quiet import import_tensorflow, silenced

    tf = import_tensorflow()

    class Model(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = tf.Variable(tf.ones([3, 4]))

        @tf.function(input_signature=[tf.TensorSpec([None, 8, 8, 3], tf.float32)])
        def serve(self, x):
            if evil == "write_file":
                tf.io.write_file(str(marker), "written by the model")
            elif evil == "py_function":
                tf.py_function(lambda: marker.write_text("x") and 0.0, [], tf.float32)
            elif evil == "print_to_file":
                tf.print("hello", output_stream=f"file://{marker}")
            elif evil == "save_v2":
                tf.raw_ops.SaveV2(
                    prefix=str(marker), tensor_names=["w"], shape_and_slices=[""], tensors=[self.w.read_value()]
                )
            return tf.nn.softmax(tf.reduce_mean(x, [1, 2]) @ self.w)

    m = Model()
    with silenced():
        tf.saved_model.save(m, str(folder), signatures={"serving_default": m.serve})
    return folder


EVIL_OPS = {"write_file": "WriteFile", "py_function": "EagerPyFunc", "print_to_file": "PrintV2", "save_v2": "SaveV2"}


@pytest.fixture(scope="module")
def saved_models(tmp_path_factory):
    """One plain SavedModel and one per kind of EVIL_OPS, made once (their marker files must never appear)."""
    root = tmp_path_factory.mktemp("saved_models")
    return root, {
        evil: _saved_model(root / (evil or "plain"), evil, root / f"written_{evil}") for evil in ["", *EVIL_OPS]
    }


@pytest.mark.tf
def test_a_savedmodel_with_file_or_system_ops_is_refused_unread(saved_models, tmp_path):
    """tf.io.write_file in a serving function wrote its file during quantize: the graph is now read as data
    first, and refused (exit 3) naming the ops and --trust-model; nothing of it runs (no file is written)."""
    from edgekit.converters import keras_io
    from edgekit.errors import InputError

    root, models = saved_models
    for evil, op in EVIL_OPS.items():
        assert op in keras_io.saved_model_system_ops(models[evil]), evil
        with pytest.raises(InputError, match=f"{op} \\(in __inference_serve") as caught:
            keras_io.load(models[evil])
        assert "--trust-model" in caught.value.hint
    proc = run(
        "quantize", str(models["write_file"]), "--calib", "random", "-o", str(tmp_path / "out.tflite"), timeout=300
    )
    line = assert_clean(proc, 3)
    assert "WriteFile" in line and "--trust-model" in line, line
    assert not list(root.glob("written*")) and not (tmp_path / "out.tflite").exists()


@pytest.mark.tf
def test_a_plain_savedmodel_passes_the_scan_and_is_called_a_program(saved_models, tmp_path):
    from edgekit.converters import keras_io
    from edgekit.converters.quantize import QuantizeOptions, quantize
    from edgekit.report import Collector

    plain = saved_models[1][""]
    assert keras_io.saved_model_system_ops(plain) == {}  # its own checkpoint save/restore functions do not count
    report = Collector()
    quantize(
        QuantizeOptions(
            model=str(plain),
            output=str(tmp_path / "out.tflite"),
            calib="random",
            scaling="0..1",
            no_verify=True,
            show_progress=False,
            report=report,
        )
    )
    assert any("a SavedModel is a program" in n for n in report.notes), report.notes
    trusted = Collector()
    quantize(
        QuantizeOptions(
            model=str(plain),
            output=str(tmp_path / "out2.tflite"),
            calib="random",
            scaling="0..1",
            no_verify=True,
            show_progress=False,
            trust_model=True,
            report=trusted,
        )
    )
    assert any("a SavedModel is a program" in w and "--trust-model" in w for w in trusted.warnings), trusted.warnings


def _train_data(root: Path) -> Path:
    """Two class folders of 6 small PNGs each, and one empty class folder."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    for name in ("a", "b"):
        (root / name).mkdir(parents=True)
        for i in range(6):
            Image.fromarray(rng.integers(0, 255, (8, 8, 3), np.uint8)).save(root / name / f"{i}.png")
    (root / "empty").mkdir()
    return root


@pytest.mark.parametrize(
    "tf_config,says",
    [
        ('{"cluster": {"worker": ["localhost:99999"]}, "task": {"type": "worker", "index": 0}}', "no port in 1..65535"),
        ("[" * 20000 + "]" * 20000, "nested too deeply"),
    ],
)
def test_train_tf_config_with_a_port_out_of_range_or_nested_deeply_is_exit_2(tmp_path, tf_config, says):
    data = _train_data(tmp_path / "data")
    line = assert_clean(run("train", str(data), "-o", str(tmp_path / "m.keras"), env={"TF_CONFIG": tf_config}), 2)
    assert "TF_CONFIG" in line and says in line, line


def test_train_input_size_too_large_is_exit_2_before_any_work(tmp_path):
    data = _train_data(tmp_path / "data")
    for size in ("100000x100000", "99999999999x2"):
        line = assert_clean(run("train", str(data), "-o", str(tmp_path / "m.keras"), "--input-size", size), 2)
        assert f"--input-size {size} is larger than" in line, line
    assert not (tmp_path / "m.keras").exists()


@pytest.mark.tf
def test_train_input_size_too_small_is_exit_2_and_an_empty_class_folder_is_said(tmp_path):
    data = _train_data(tmp_path / "data")
    proc = run(
        "train", str(data), "-o", str(tmp_path / "m.keras"), "--input-size", "2x2", "--batch-size", "2", timeout=300
    )
    line = assert_clean(proc, 2)
    assert "--input-size 2x2 is too small for --arch cnn" in line, line
    warning = [ln for ln in proc.stderr.decode().splitlines() if ln.startswith("warning: ")]
    assert len(warning) == 1 and "left out (empty)" in warning[0] and "learns 2 classes" in warning[0], warning


def _serve(reply: bytes | None) -> tuple[socket.socket, str]:
    """A local TCP server that answers each connection with ``reply`` (None: says nothing) and keeps it open."""
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    kept = []

    def loop() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            kept.append(conn)
            if reply is not None:
                conn.sendall(reply)

    threading.Thread(target=loop, daemon=True).start()
    return server, f"127.0.0.1:{server.getsockname()[1]}"


def test_a_peer_port_that_answers_but_is_no_tensorflow_worker_ends_the_rendezvous_at_once(tmp_path):
    """TF_CONFIG names a port where an SSH or web server answers: TensorFlow would wait for it for ever (train hung
    with no output). The rendezvous knock tells a worker (edgekit's greeting, or a gRPC server's HTTP/2 SETTINGS)
    from anything else, and names it: exit 9 at once, not at --worker-timeout."""
    from edgekit.training import strategy
    from edgekit.training.strategy import Cluster, WorkersUnreachable, knock, rendezvous

    settings = b"\x00\x00\x06\x04\x00\x00\x00\x00\x00\x00\x04\x00@\x00\x00"  # what TensorFlow's server sends first
    servers = {
        kind: _serve(reply)
        for kind, reply in [
            ("ssh", b"SSH-2.0-OpenSSH_9.2p1\r\n"),
            ("grpc", settings),
            ("edgekit", strategy.RENDEZVOUS_GREETING),
            ("silent", None),
        ]
    }
    try:
        assert knock(servers["grpc"][1], 1.0) == (True, None)
        assert knock(servers["edgekit"][1], 1.0) == (True, None)
        answered, why = knock(servers["ssh"][1], 1.0)
        assert answered and "is not a TensorFlow worker" in why and "SSH-2.0" in why
        answered, why = knock(servers["silent"][1], 0.5)
        assert not answered and "says nothing" in why  # maybe a busy worker: knocked at again until the deadline
        me = socket.socket()
        me.bind(("127.0.0.1", 0))
        mine = f"127.0.0.1:{me.getsockname()[1]}"
        me.close()
        start = time.monotonic()
        with pytest.raises(WorkersUnreachable, match="answers but is not a TensorFlow worker"):
            rendezvous(Cluster({"worker": [mine, servers["ssh"][1]]}, "worker", 0), timeout=60)
        assert time.monotonic() - start < 10
        with pytest.raises(WorkersUnreachable, match="says nothing"):
            rendezvous(Cluster({"worker": [mine, servers["silent"][1]]}, "worker", 0), timeout=2)
    finally:
        for server, _ in servers.values():
            server.close()


# ------------------------------------------------------------------------------------ issue 23: boards and bundles
@pytest.fixture()
def board_here(tmp_path):
    """A STAND-IN for ssh on PATH (it runs the remote command, its last argument, in a shell here): the "board" is
    this machine, its Python the test board's unless a test names another. Tests edgekit's side of the protocol
    as a user runs it (the real OpenSSH path is tests/test_remote.py's)."""
    from tests.helpers import make_bundle

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ssh").write_text('#!/bin/sh\nfor last; do :; done\nexec sh -c "$last"\n')
    (bin_dir / "ssh").chmod(0o755)
    return {
        "env": {"PATH": f"{bin_dir}:{os.environ['PATH']}"},
        "bundle": make_bundle(tmp_path / "bundle"),
        "path": str(tmp_path / "board"),
        "dir": tmp_path,
    }


BOARD_ANSWERS = {  # step: (the board's shell action, what the one error line must say)
    "probe {}": ("probe", "echo '{}'", "to listing the target folder is malformed"),
    "probe deep": ("probe", 'python3 -c \'print("[" * 100000 + "]" * 100000)\'', "is malformed: JSON nested"),
    "classify NaN": ("classify", "echo '{\"model\": NaN}'", "to classifying is malformed: not one JSON document"),
    "classify not UTF-8": ("classify", r"printf '{\"model\": \"\377\"}\n'", "to classifying is malformed: not UTF-8"),
    "classify wrong types": ("classify", 'echo \'{"model": 1, "device": [], "backend": {}}\'', "is malformed"),
    "classify endless": ("classify", "exec yes", "the board's answer to classifying went past"),
    "benchmark {}": ("benchmark", "echo '{}'", "to benchmarking is malformed"),
    "benchmark error without hint": ("benchmark", "echo 'error: no' >&2; exit 9", "on u@board: no (check the Edge"),
}


@pytest.mark.parametrize("case", sorted(BOARD_ANSWERS))
def test_a_hostile_board_is_one_line_and_exit_9(board_here, case):
    """Before issue 23's fix, most of these ended in exit 70 (a traceback's KeyError, TypeError, RecursionError),
    the endless one held everything in memory until --timeout, and a board's error line had no hint."""
    from tests.test_remote import board_python

    step, action, said = BOARD_ANSWERS[case]
    python = board_python(board_here["dir"], step, action + "; exit 0")  # answered: the real runner never runs
    common = [
        "--on",
        "u@board",
        "-m",
        str(board_here["bundle"]),
        "--path",
        board_here["path"],
        "--python",
        str(python),
        "--timeout",
        "60",
        "-q",
    ]
    args = (
        ["classify", str(shared_file("cat.bmp")), *common]
        if step == "classify"
        else ["benchmark", "-n", "2", "--warmup", "0", *common]
    )
    started = time.monotonic()
    line = assert_clean(run(*args, env=board_here["env"], timeout=120), 9)
    assert said in line and line.endswith(")"), line
    assert time.monotonic() - started < 50


@pytest.mark.parametrize(
    "change",
    [
        '"format_version": true',
        '"accuracy": NaN',
        '"path": "."',
        '"path": "./manifest.json"',
        '"path": "labels.txt/"',
        '"path": "a folder"',
    ],
)
def test_a_manifest_with_a_loose_value_or_a_second_spelling_is_exit_3(hostile, change):
    from tests.helpers import make_bundle

    bundle = make_bundle(hostile / "bundle")
    doc = (bundle / "manifest.json").read_text()
    if change.startswith('"format_version"'):
        doc = doc.replace('"format_version": 1', change)
    elif change.startswith('"accuracy"'):
        assert '"accuracy": null' in doc
        doc = doc.replace('"accuracy": null', change)
    else:
        (bundle / "a folder").mkdir()
        doc = doc.replace('"files": [', '"files": [{' + change + ', "sha256": "' + "0" * 64 + '", "size_bytes": 0}, ')
    (bundle / "manifest.json").write_text(doc)
    for args in (
        ["classify", str(shared_file("cat.bmp")), "-m", str(bundle)],
        ["deploy", str(bundle), "--to", "nobody@127.0.0.1", "--port", "9"],
    ):
        line = assert_clean(run(*args), 3)
        assert "manifest" in line and "rebuild the bundle with edgekit build" in line


def test_a_multi_page_tiff_is_classified_by_its_first_page(hostile):
    from PIL import Image

    with Image.open(shared_file("cat.bmp")) as cat:
        cat.convert("RGB").save(hostile / "pages.tif", save_all=True, append_images=[Image.new("RGB", (7, 9))])
    proc = run(
        "classify",
        str(hostile / "pages.tif"),
        str(shared_file("cat.bmp")),
        "-m",
        str(hostile / MODEL),
        "-k",
        "1",
        "--json",
    )
    assert_clean(proc, 0)
    tiff, bmp = json.loads(proc.stdout)["results"]
    assert tiff["top"] == bmp["top"]


def test_text_safe_escapes_strings_in_typed_results_and_keeps_their_kinds():
    """emit's text path: every string of a result escaped (in read-only mappings, tuples and nested records too),
    str Enum verdicts kept as the members they are; the result itself (what --json prints) untouched."""
    import types

    from edgekit.cli.commands import _text_safe
    from edgekit.results import DetectResult
    from edgekit.results.quantize import Decision, DetectionVerification

    name = "a\x1b[31m\nb"
    layout = {
        "kind": "yolo",
        "roles": {"output": 0},
        "num_classes": 1,
        "input_hw": [64, 64],
        "boxes_normalized": True,
        "scores_are_logits": None,
        "transposed": True,
        "reg_max": 16,
        "strides": [8, 16, 32],
        "letterbox": False,
        "labels": [name],
        "source": [name],
        "options": {},
        "pixel_scaling": None,
        "description": name,
    }
    v = DetectionVerification.from_dict(
        {
            "kind": "detection",
            "samples": 3,
            "sources": {name: 3},
            "conf": 0.25,
            "match_iou": 0.5,
            "float_detections": 4,
            "int8_detections": 4,
            "matched": 4,
            "min_agreement": 0.9,
            "mean_abs_diff": 0.1,
            "class_order": None,
            "layout": layout,
            "failures": [],
            "warnings": [name],
            "kept": 1.0,
            "kept_interval": [0.9, 1.0],
            "agreement_verdict": "passed",
            "passed": True,
        }
    )
    safe = _text_safe(v)
    assert safe.agreement_verdict is Decision.PASSED
    assert isinstance(safe.sources, types.MappingProxyType) and list(safe.sources) == ["a\\x1b[31m\\nb"]
    assert safe.warnings == ("a\\x1b[31m\\nb",) and safe.kept_interval == (0.9, 1.0)
    assert "\n" not in "".join(safe.lines()) and "\x1b" not in "".join(safe.lines())
    assert v.warnings == (name,)  # the result itself is left exact (--json)
    d = DetectResult.from_dict(
        {
            "model": name,
            "device": "cpu",
            "backend": "litert",
            "layout": layout,
            "conf": 0.25,
            "iou": 0.45,
            "max_det": 100,
            "first_inference_ms": None,
            "results": [],
            "errors": [{"image": name, "error": name}],
            "notes": [],
        }
    )
    assert _text_safe(d).errors[0].image == "a\\x1b[31m\\nb" and d.errors[0].image == name
    assert _text_safe(d).layout.labels == ("a\\x1b[31m\\nb",) and d.layout.labels == (name,)
