"""docs/python-api.md runs: each example block, and the user's CI test file, in a folder of real models.

Blocks marked ``<!-- test: runtime -->`` (and the user's pytest file) run in a child process where
TensorFlow cannot be imported, as on a CI runner with only the runtime packages; blocks marked
``<!-- test: tensorflow -->`` run on the digits model the session builds.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, shared_file
from tests.devices.test_runtime_no_tensorflow import BLOCKER

PAGE = REPO / "docs" / "python-api.md"
BLOCK = re.compile(
    r"<!-- test: (?P<kind>runtime|detection|tensorflow|pytest (?P<file>\S+)) -->\n```python\n(?P<code>.*?)```", re.S
)
RUNTIME_FILES = (
    "mobilenet_v1_0.25_128_quant.tflite",
    "mobilenet_v1_0.25_128_quant_edgetpu.tflite",
    "imagenet_labels.txt",
    "cat.bmp",
    "grace_hopper.bmp",
    "deeplabv3_mnv2_dm05_pascal_quant.tflite",
)
DETECTION_FILES = ("detection/ppe_yolov8n_full_integer_quant.tflite", "grace_hopper.bmp")  # a real YOLOv8n export


def blocks(kind: str) -> list[tuple[str, str | None, str]]:
    return [
        (m["kind"], m["file"], m["code"])
        for m in BLOCK.finditer(PAGE.read_text(encoding="utf-8"))
        if m["kind"].split()[0] == kind
    ]


def test_every_python_block_of_the_page_is_tested():
    """A ```python block without a test marker would go unrun."""
    text = PAGE.read_text(encoding="utf-8")
    assert text.count("```python") == len(list(BLOCK.finditer(text)))
    assert len(blocks("runtime")) >= 6 and len(blocks("pytest")) == 1 and len(blocks("tensorflow")) == 3
    assert len(blocks("detection")) == 2  # Model.detect; frames from OpenCV, float frames, batches, timing


def _workdir(tmp_path: Path) -> Path:
    for name in RUNTIME_FILES:
        (tmp_path / name).symlink_to(shared_file(name).resolve())
    (tmp_path / "sitecustomize.py").write_text(BLOCKER)
    return tmp_path


def _run(argv: list[str], cwd: Path, block_tensorflow: bool) -> subprocess.CompletedProcess:
    paths = ([str(cwd)] if block_tensorflow else []) + [str(REPO)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "EDGEKIT_DELEGATE_PROBE": "0"}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_the_runtime_examples_run_without_tensorflow(tmp_path):
    work = _workdir(tmp_path)
    script = "import sys\nassert 'tensorflow' not in sys.modules\n" + "\n".join(
        f"# --- block {i}\n{code}\nassert 'tensorflow' not in sys.modules, 'block {i} imported TensorFlow'\n"
        for i, (_, _, code) in enumerate(blocks("runtime"))
    )
    script += "try:\n    import tensorflow\nexcept ImportError:\n    print('TENSORFLOW BLOCKED')\n"
    (work / "examples.py").write_text(script)
    done = _run([sys.executable, "examples.py"], work, block_tensorflow=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "TENSORFLOW BLOCKED" in done.stdout
    assert "academic gown" in done.stdout and "Verdict: FULL" in done.stdout


def test_the_detection_example_runs_without_tensorflow(tmp_path):
    """``Model.detect`` on the real YOLOv8n export in ../shared/testdata/detection (skipped where it is absent)."""
    for name in DETECTION_FILES:
        (tmp_path / Path(name).name).symlink_to(shared_file(name).resolve())
    (tmp_path / "sitecustomize.py").write_text(BLOCKER)
    code = "\n".join(code for _, _, code in blocks("detection"))  # Model.detect, then frames/batches/timing
    (tmp_path / "detect_example.py").write_text(code + "\nimport sys\nassert 'tensorflow' not in sys.modules\n")
    done = _run([sys.executable, "detect_example.py"], tmp_path, block_tensorflow=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("pessoa 0.")
    assert "does not say its range" in done.stdout and "ms per frame: preprocess" in done.stdout


def test_the_users_ci_test_file_passes_without_tensorflow(tmp_path):
    work = _workdir(tmp_path)
    ((kind, name, code),) = blocks("pytest")
    (work / name).write_text(code)
    done = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", name], work, block_tensorflow=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout


@pytest.mark.tf
@pytest.mark.slow
def test_the_tensorflow_examples_run(tmp_path, digits_keras, digits_folders):
    work = tmp_path
    shutil.copy(digits_keras.path, work / "digits.h5")
    for sidecar in digits_keras.path.parent.glob(digits_keras.path.stem + ".*.json"):
        shutil.copy(sidecar, work / sidecar.name.replace(digits_keras.path.stem, "digits", 1))
    (work / "digits").mkdir()
    for part in ("train", "test"):
        (work / "digits" / part).symlink_to(Path(getattr(digits_folders, part)).resolve())
    script = "\n".join(code for _, _, code in blocks("tensorflow"))
    (work / "examples.py").write_text(script)
    done = _run([sys.executable, "examples.py"], work, block_tensorflow=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (work / "digits_int8.tflite").is_file() and (work / "digits_bundle" / "manifest.json").is_file()
