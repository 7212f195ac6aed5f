"""The op-version ceiling of edgetpu_compiler 16, checked against facts reported for the real compiler."""

from __future__ import annotations

import pytest

from edgekit import tflite_model
from edgekit.converters import op_versions
from edgekit.converters.op_versions import max_compiler_version, version_problem
from tests.conftest import shared_models


def test_conv_2d_v5_parses_and_v6_is_rejected():
    # google-coral/edgetpu#631: "Didn't find op for builtin opcode 'CONV_2D' version '6'"
    assert max_compiler_version("CONV_2D") == 5
    assert version_problem("CONV_2D", 5) is None
    assert version_problem("CONV_2D", 6) == (
        "CONV_2D v6 needs TensorFlow Lite 2.9.0; edgetpu_compiler 16 knows versions up to 5 (TFLite 2.5)")


def test_fully_connected_v9_parses_v10_and_later_do_not():
    # v9 parses (whether it maps is compatibility's business, e.g. keep_num_dims from v5 on does not).
    assert max_compiler_version("FULLY_CONNECTED") == 9
    assert version_problem("FULLY_CONNECTED", 9) is None
    assert "2.11.0" in version_problem("FULLY_CONNECTED", 10)
    # v12 (TF 2.17) is newer than the transcribed map: still rejected.
    assert "newer than 2.5.0" in version_problem("FULLY_CONNECTED", 12)


@pytest.mark.parametrize("op, version, ceiling", [
    ("EXP", 2, 1),              # TF 2.16, google-coral/libedgetpu#71
    ("QUANTIZE", 3, 2),         # 2.7.0
    ("TRANSPOSE_CONV", 4, 3),   # 2.13.0, google-coral/edgetpu#845
])
def test_versions_reported_as_rejected_are_rejected(op, version, ceiling):
    assert max_compiler_version(op) == ceiling
    assert version_problem(op, ceiling) is None
    problem = version_problem(op, version)
    assert problem and problem.startswith(f"{op} v{version} needs ")
    assert f"knows versions up to {ceiling}" in problem


def test_table_facts_from_runtime_version_cc():
    assert op_versions.first_release("ADD", 4) == "2.6.0"
    assert op_versions.first_release("CAST", 2) == "2.7.0"
    assert op_versions.first_release("FULLY_CONNECTED", 9) == "2.3.0"
    assert max_compiler_version("ADD") == 3
    assert max_compiler_version("RESIZE_BILINEAR") == 4    # v4 is 2.5.0 itself: included
    assert max_compiler_version("BROADCAST_TO") == 3       # the map starts at v2


def test_ops_the_compiler_does_not_know():
    assert max_compiler_version("GELU") is None            # first release 2.9.0
    assert "does not know this op" in version_problem("GELU", 1)
    assert max_compiler_version("STABLEHLO_ADD") is None
    assert "not a builtin op" in version_problem("STABLEHLO_ADD", 1)
    assert version_problem("CUSTOM", 1) is None            # custom ops are judged elsewhere


# The CPU halves of the compiled pairs (model_invoking_error.tflite is a custom-op toy, never compiled).
MODELS = [p for p in shared_models() if (p.parent / f"{p.stem}_edgetpu.tflite").exists()]


@pytest.mark.parametrize("path", MODELS, ids=[p.name for p in MODELS])
def test_every_op_of_the_real_compiled_models_is_within_the_ceiling(path):
    """These models went through the real compiler 16: all their builtin ops must parse."""
    info = tflite_model.load(path)
    for op in info.ops:
        assert version_problem(op.name, op.version) is None, (op.name, op.version)
