"""The runtime half runs where TensorFlow cannot be imported (a Coral board): classify, devices, doctor.

A ``sitecustomize`` put first on PYTHONPATH installs an import hook that makes ``tensorflow``
unimportable in the child process, as on a board that never had it.
"""

from __future__ import annotations

import ctypes.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import shared_file

BLOCKER = """
import importlib.abc, sys

class _NoTensorFlow(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "tensorflow" or name.startswith("tensorflow."):
            raise ImportError(f"{name} is made unimportable by the test")
        return None

sys.meta_path.insert(0, _NoTensorFlow())
"""

CHECK = """
import json, sys
try:
    import tensorflow  # noqa: F401
    blocked = False
except ImportError:
    blocked = True
from edgekit.cli import main
codes = []
for argv in (sys.argv[1:], ["devices", "--json"], ["doctor", "--json"]):
    try:
        main(argv)
    except SystemExit as exc:
        codes.append(exc.code)
report = {"blocked": blocked, "codes": codes,
          "tensorflow": sorted(m for m in sys.modules if m.split(".")[0] == "tensorflow"),
          "converters": sorted(m for m in sys.modules if m.startswith("edgekit.converters"))}
print("MODULES " + json.dumps(report), file=sys.stderr)
"""


@pytest.fixture()
def no_tf_env(tmp_path) -> dict:
    (tmp_path / "sitecustomize.py").write_text(BLOCKER)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(Path(__file__).resolve().parents[2])])
    env.pop("EDGEKIT_DEBUG", None)
    return env


def test_classify_devices_doctor_import_no_tensorflow_nor_converters(no_tf_env):
    images = [str(shared_file("cat.bmp")), str(shared_file("grace_hopper.bmp"))]
    model = str(shared_file("mobilenet_v1_0.25_128_quant_edgetpu.tflite"))  # discovery + delegate + fallback
    proc = subprocess.run(
        [sys.executable, "-c", CHECK, "classify", *images, "-m", model, "-k", "1", "--json"],
        capture_output=True,
        text=True,
        timeout=180,
        env=no_tf_env,
    )
    line = next(ln for ln in proc.stderr.splitlines() if ln.startswith("MODULES "))
    report = json.loads(line.removeprefix("MODULES "))
    assert report["blocked"], "the test's import hook did not block tensorflow"
    assert report["tensorflow"] == [] and report["converters"] == []
    classify_code, devices_code, doctor_code = report["codes"]
    assert classify_code in (0, None) and devices_code in (0, None), proc.stderr
    assert doctor_code in (0, 1, None), proc.stderr  # 1: a failed check; never 70 (a crash)
    assert "internal error" not in proc.stderr
    doc = json.JSONDecoder().raw_decode(proc.stdout.lstrip())[0]  # the first of three documents
    assert [r["top"][0]["id"] for r in doc["results"]] == [283, 401]


def test_edgekit_classify_entry_point_without_tensorflow(no_tf_env):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "edgekit",
            "classify",
            str(shared_file("cat.bmp")),
            "-m",
            str(shared_file("mobilenet_v1_0.25_128_quant_edgetpu.tflite")),
            "-k",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        env=no_tf_env,
    )
    assert proc.returncode == 0, proc.stderr
    assert "tiger cat" not in proc.stdout and " 283" in proc.stdout  # no labels given: ids only
    assert "Exception ignored" not in proc.stderr and "Traceback" not in proc.stderr
    assert "XNNPACK" not in proc.stderr  # the runtime's native INFO line is filtered out
    if not ctypes.util.find_library("edgetpu"):  # no Edge TPU runtime here: the fallback says why
        assert "note: running the CPU model mobilenet_v1_0.25_128_quant.tflite" in proc.stderr


def test_classify_from_a_bundle_without_tensorflow(no_tf_env, tmp_path):
    from tests.helpers import make_bundle

    bundle = make_bundle(tmp_path / "bundle")
    proc = subprocess.run(
        [sys.executable, "-m", "edgekit", "classify", str(shared_file("cat.bmp")), "-m", str(bundle), "-k", "1"],
        capture_output=True,
        text=True,
        timeout=180,
        env=no_tf_env,
    )
    assert proc.returncode == 0, proc.stderr
    assert "tiger cat" in proc.stdout  # the labels came from the bundle


def test_evaluate_and_benchmark_without_tensorflow(no_tf_env, tmp_path):
    """Their runtime halves need no TensorFlow (only evaluate --reference does)."""
    import shutil

    (tmp_path / "data" / "Egyptian cat").mkdir(parents=True)
    shutil.copy(shared_file("cat.bmp"), tmp_path / "data" / "Egyptian cat")
    model = str(shared_file("mobilenet_v1_0.25_128_quant_edgetpu.tflite"))
    for argv, key in (
        (
            [
                "evaluate",
                "-m",
                model,
                "--data",
                str(tmp_path / "data"),
                "-l",
                str(shared_file("imagenet_labels.txt")),
                "--json",
            ],
            "top5",
        ),
        (["benchmark", "-m", model, "-n", "3", "--json"], "p50_ms"),
    ):
        proc = subprocess.run(
            [sys.executable, "-c", CHECK, *argv], capture_output=True, text=True, timeout=180, env=no_tf_env
        )
        report = json.loads(
            next(ln for ln in proc.stderr.splitlines() if ln.startswith("MODULES ")).removeprefix("MODULES ")
        )
        assert report["blocked"] and report["tensorflow"] == [] and report["converters"] == [], report
        assert report["codes"][0] in (0, None), proc.stderr
        assert key in json.JSONDecoder().raw_decode(proc.stdout.lstrip())[0]


def test_detect_without_tensorflow(no_tf_env):
    """detect (layout reader, decode, NMS, letterbox) is runtime half: no TensorFlow, nothing from converters."""
    model = str(shared_file("detection/ppe_yolov8n_full_integer_quant_edgetpu.tflite"))
    proc = subprocess.run(
        [sys.executable, "-c", CHECK, "detect", str(shared_file("grace_hopper.bmp")), "-m", model, "--json"],
        capture_output=True,
        text=True,
        timeout=180,
        env=no_tf_env,
    )
    report = json.loads(
        next(ln for ln in proc.stderr.splitlines() if ln.startswith("MODULES ")).removeprefix("MODULES ")
    )
    assert report["blocked"] and report["tensorflow"] == [] and report["converters"] == [], report
    assert report["codes"][0] in (0, None), proc.stderr
    doc = json.JSONDecoder().raw_decode(proc.stdout.lstrip())[0]
    assert "pessoa" in [o["label"] for o in doc["results"][0]["objects"]]
