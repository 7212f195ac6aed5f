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
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

from tests.conftest import REPO, shared_file

MODEL = "mobilenet_v1_0.25_128_quant.tflite"
DOCUMENTED = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 129, 130, 143}


def run(*args: str | bytes, cwd: Path | None = None, timeout: float = 60,
        env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {**{k: v for k, v in os.environ.items() if not k.startswith("EDGEKIT_")},
                "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run([sys.executable, "-m", "edgekit", *args], cwd=cwd, env=full_env, capture_output=True,
                          timeout=timeout)


def assert_clean(proc: subprocess.CompletedProcess, code: int | None = None) -> str:
    """The README's promise for a refused input; returns the one error line (or "")."""
    err = proc.stderr.decode("utf-8")   # strict: every line edgekit prints is UTF-8
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

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00" * 1024)) + chunk(b"IEND", b""))


@pytest.fixture()
def hostile(tmp_path):
    """A folder of hostile inputs next to one good model."""
    model = tmp_path / MODEL
    shutil.copy(shared_file(MODEL), model)
    (tmp_path / "fifo.tflite").parent.mkdir(exist_ok=True)
    os.mkfifo(tmp_path / "fifo.tflite")
    os.mkfifo(tmp_path / "fifo.jpg")
    os.mkfifo(tmp_path / "fifo.json")
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

    from edgekit import preprocess
    from edgekit.errors import InputError

    def refuse(*args, **kwargs):
        raise AssertionError("the EPS plugin was used")

    monkeypatch.setattr(EpsImagePlugin.EpsImageFile, "_open", refuse)
    monkeypatch.setattr(EpsImagePlugin.EpsImageFile, "load", refuse)
    with pytest.raises(InputError, match="not an image edgekit reads"):
        preprocess.open_image(hostile / "eps.jpg")


@pytest.mark.parametrize("argv", [
    ["inspect", "{fifo}"], ["check", "{fifo}"], ["compile", "{fifo}"], ["inspect", "/dev/null"],
    ["classify", "{cat}", "-m", "{fifo}"], ["classify", "{cat}", "-m", "{model}", "-l", "/dev/zero"],
    ["classify", "{cat}", "-m", "{model}", "-l", "{dir}/fifo.json"], ["benchmark", "-m", "{fifo}", "-n", "1"],
    ["benchmark", "-m", "{model}", "-n", "1", "--compare", "{dir}/fifo.json"],
    ["evaluate", "-m", "{model}", "--data", "{dir}/fifo.json"],
    ["quantize", "{dir}/fifo.json", "--calib", "random"], ["inspect", "{dir}"], ["inspect", "{dir}/missing.tflite"],
])
def test_fifos_devices_folders_and_missing_files_never_hang(hostile, argv):
    args = [a.format(fifo=hostile / "fifo.tflite", model=hostile / MODEL, cat=shared_file("cat.bmp"), dir=hostile)
            for a in argv]
    proc = run(*args, cwd=hostile, timeout=120)
    assert proc.returncode in (2, 3), proc.stderr
    assert_clean(proc)


@pytest.mark.parametrize("saved", ['{"p50_ms": NaN}', '{"p50_ms": Infinity}', '{"p50_ms": 0}', '{"p50_ms": -3}',
                                   '{"p50_ms": true}', '{"p50_ms": "12"}', '[1, 2]', '{"p50_ms": 5, "latencies_ms": '
                                   '[1, -1]}', "deep"])
def test_a_benchmark_baseline_that_is_not_a_saved_run_is_exit_3(hostile, saved):
    path = hostile / ("deep.json" if saved == "deep" else "saved.json")
    if saved != "deep":
        path.write_text(saved)
    proc = run("benchmark", "-m", str(hostile / MODEL), "-n", "2", "--warmup", "0", "--compare", str(path))
    assert "--compare" in assert_clean(proc, 3)


def test_deep_json_beside_a_model_or_in_a_bundle_is_exit_3(hostile):
    from tests.helpers import make_bundle

    shutil.copy(hostile / "deep.json", hostile / "mobilenet_v1_0.25_128_quant.edgekit.json")
    assert "nested too deeply" in assert_clean(run("classify", str(shared_file("cat.bmp")), "-m", str(hostile / MODEL)), 3)
    bundle = make_bundle(hostile / "bundle")
    shutil.copy(hostile / "deep.json", bundle / "manifest.json")
    assert "nested too deeply" in assert_clean(run("classify", str(shared_file("cat.bmp")), "-m", str(bundle)), 3)


def test_names_that_are_not_utf8_or_look_like_options(hostile):
    weird = os.fsencode(hostile) + b"/m\xff \xe9-odd.tflite"
    shutil.copy(hostile / MODEL, weird)
    bad_image = os.fsencode(hostile) + b"/bad\xff.jpg"
    Path(os.fsdecode(bad_image)).write_bytes(b"not an image")
    for args in (["classify", bad_image, str(shared_file("cat.bmp")), "-m", weird, "-k", "1"],
                 ["benchmark", "-m", weird, "-n", "2"], ["inspect", weird], ["check", weird]):
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
            proc = subprocess.run([sys.executable, "-m", "edgekit", *args], stdout=full, stderr=subprocess.PIPE,
                                  env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60)
        assert "cannot write to standard output" in assert_clean(proc, 1)


def test_sigterm_stops_a_run_with_its_documented_code(hostile):
    proc = subprocess.Popen([sys.executable, "-m", "edgekit", "benchmark", "-m", str(hostile / MODEL), "-n",
                             "100000000", "--warmup", "0", "-q"], stderr=subprocess.PIPE, stdout=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
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
    from edgekit import doctor

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
    script = ("import sys\nfrom edgekit import preprocess\n"
              "try:\n    preprocess.open_image(sys.argv[1])\nexcept Exception as exc:\n    print(type(exc).__name__)\n"
              "preprocess.open_image(sys.argv[2])\n"
              "print(sorted(m for m in sys.modules if m.startswith('PIL.') and m.endswith('ImagePlugin')))\n")
    proc = subprocess.run([sys.executable, "-c", script, str(hostile / "eps.jpg"), str(shared_file("cat.bmp"))],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60)
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
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("EDGEKIT_") and k != "PYTHONPATH"},
           "LD_LIBRARY_PATH": str(libs), "EDGEKIT_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([str(script), "classify", "-m", "mobilenet_v1_0.25_128_quant_edgetpu.tflite", "cat.bmp"],
                          cwd=here, env=env, capture_output=True, timeout=300)
    assert done.returncode == 0, (done.returncode, done.stderr.decode(errors="replace"))
    assert_clean(done, 0)
    err = done.stderr.decode()
    assert f"{libs / 'libedgetpu.so.1'} crashes with" in err and "SIGSEGV" in err, err
    doctor = subprocess.run([str(script), "doctor"], cwd=here, env=env, capture_output=True, timeout=300)
    assert doctor.returncode in (0, 1), doctor.stderr
    assert f"{libs / 'libedgetpu.so.1'}" in doctor.stdout.decode()
    assert not marker.exists(), marker.read_text()
