"""The light install (`pip install .`: no TensorFlow, h5py or Keras), as a new user has it.

A ``sitecustomize`` first on PYTHONPATH makes those packages unimportable in a child process running
``python -m edgekit``, so what the README promises for that install is checked on the real CLI.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("tensorflow", "h5py", "keras", "tf_keras")
BLOCKER = """
import importlib.abc, sys

class _Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ImportError("No module named " + repr(name))
        return None

sys.meta_path.insert(0, _Blocked())
"""


@pytest.fixture()
def light(tmp_path):
    """run(*args) → CompletedProcess of `python -m edgekit ARGS` without TensorFlow, h5py or Keras."""
    site = tmp_path / "light_site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCKER.format(blocked=set(HEAVY)))
    env = {k: v for k, v in os.environ.items() if not k.startswith("EDGEKIT_")}
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(REPO)])

    def run(*args: str, cwd: Path = tmp_path) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "edgekit", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
        )

    return run


@pytest.mark.parametrize("model", ["model.h5", "model.weights.h5", "model.keras"])
def test_quantize_without_tensorflow_names_the_install_command(light, tmp_path, model):
    """Exit 4 with the install command (not PyPI's unrelated 'edgekit'), also for .h5 (h5py was imported first: exit 70)."""
    (tmp_path / "imgs").mkdir()
    if model.endswith(".keras"):
        import zipfile

        with zipfile.ZipFile(tmp_path / model, "w") as z:
            z.writestr("config.json", "{}")
    else:
        (tmp_path / model).write_bytes(b"\x89HDF\r\n\x1a\n" + bytes(504))
    r = light("quantize", model, "--calib", "imgs")
    assert r.returncode == 4, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: TensorFlow is needed"), r.stderr
    assert "(pip install 'tensorflow-cpu==2.21.*', or pip install '.[convert]' in an edgekit checkout" in lines[0]


def test_calibration_and_quantize_do_not_import_the_devices_half():
    """Shared things sit below their users (DESIGN.md): image decoding and labels live in preprocess.py and
    classes.py, so converters/ reads images without importing devices/ sideways."""
    code = (
        "import sys, edgekit.converters.calibration, edgekit.converters.quantize, edgekit.data.labelled\n"
        "print(sorted(m for m in sys.modules if m.startswith('edgekit.devices')))"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"
