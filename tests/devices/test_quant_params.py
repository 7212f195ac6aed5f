"""Quantization parameters LiteRT crashes on (a NaN, infinite, zero, negative or subnormal scale, or a zero point
outside the type, on an int8 tensor): the crash proven in a child process with the raw interpreter, and edgekit
refusing such a model with one line (exit 3) before any interpreter is made."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from edgekit.board.quant_params import bad_quantization
from edgekit.errors import InputError
from tests.conftest import REPO
from tests.helpers import with_quantization

pytest.importorskip("flatbuffers")  # the models are built here (tests/tflite_builder.py)

HW = (32, 32)
BAD = {
    "nan": (float("nan"), None),
    "inf": (float("inf"), None),
    "zero": (0.0, None),
    "negative": (-0.1, None),
    "subnormal": (1e-40, None),
    "zero point": (None, 300),
}
RAW_RUN = """
import sys
import numpy as np
from edgekit.board.backends import select_backend
interp = select_backend().interpreter_cls(model_path=sys.argv[1])
interp.allocate_tensors()
d = interp.get_input_details()[0]
interp.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
interp.invoke()
print("ran")
"""


def _model(tmp_path: Path, case: str) -> Path:
    """A small runnable model whose output is a QUANTIZE to (0.1, 3), then damaged as ``case`` says."""
    from tests.detection_models import slice_model

    data = slice_model(HW, [{"shape": [1, 6, 21], "requant": (0.1, 3)}])
    out_tensor = len(_tensors(data)) - 1
    path = tmp_path / "m.tflite"
    path.write_bytes(with_quantization(data, out_tensor, *BAD[case]) if case != "sound" else data)
    return path


def _tensors(data: bytes) -> list:
    from edgekit.tflite.model import ModelInfo

    return list(ModelInfo.from_bytes(data).main.tensors)


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(REPO)}


@pytest.mark.parametrize("case", sorted(BAD))
def test_the_raw_interpreter_crashes_on_it_and_edgekit_refuses_it(tmp_path, case):
    path = _model(tmp_path, case)
    raw = subprocess.run([sys.executable, "-c", RAW_RUN, str(path)], capture_output=True, timeout=120, env=_env())
    assert raw.returncode < 0, (raw.returncode, raw.stdout, raw.stderr[-300:])  # killed by a signal (SIGSEGV)
    cli = subprocess.run(
        [sys.executable, "-m", "edgekit", "benchmark", "-m", str(path), "-n", "2"],
        capture_output=True,
        timeout=120,
        env=_env(),
    )
    err = cli.stderr.decode()
    assert cli.returncode == 3, (cli.returncode, err)
    assert err.count("error: ") == 1 and "Traceback" not in err and "'out0'" in err, err
    assert "scale" in err if case != "zero point" else "zero point 300 outside -128..127" in err


def test_the_python_api_refuses_it_before_opening(tmp_path):
    import edgekit

    with pytest.raises(InputError, match=r"tensor \d+ 'out0' \(int8: scale nan\)"):
        edgekit.open(_model(tmp_path, "nan"))


def test_sound_models_and_tiny_normal_scales_pass(tmp_path):
    from tests.detection_models import slice_model

    assert bad_quantization(_model(tmp_path, "sound").read_bytes()) is None
    tiny = slice_model(HW, [{"shape": [1, 6, 21], "requant": (1e-30, 0)}])  # normal float32: runs
    assert bad_quantization(tiny) is None
    assert bad_quantization(b"not a model") is None  # the interpreter explains that one
    from tests.conftest import shared_models

    for model in shared_models() + shared_models("*/*.tflite"):
        assert bad_quantization(model.read_bytes()) is None, model
