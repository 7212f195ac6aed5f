"""Fuzz `check_model` like tests/test_tflite_fuzz.py fuzzes the reader: only clean one-line errors.

Two sources of odd models: real models mutated byte by byte (the reader's strategy; whatever still
parses goes through the whole check), and synthesized graphs of every op the engine has a rule
for, with zero-size and huge dimensions, missing (-1) and out-of-place tensors, odd types and
constants. A check either returns a report that renders and serializes, or raises one of
edgekit's errors whose message is one line; nothing else (no IndexError, ZeroDivisionError, ...).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgekit.edgetpu import compatibility as C
from edgekit.errors import EdgekitError
from edgekit.tflite import model as tflite_model
from tests.test_tflite_fuzz import SEED_BYTES, mutated_model, time_limit

OP_NAMES = sorted(C.RULES) + ["ARG_MAX", "DEQUANTIZE", "GATHER", "SHAPE", "WHERE", "CUSTOM"]
DIMS = st.sampled_from([0, 1, 2, 3, 7, 16, 450, 9000])
DTYPES = st.sampled_from(["int8", "uint8", "int8", "int32", "float32", "int16"])


def check_everything(data: bytes, multiple: bool = False) -> None:
    """Parse, check, render and serialize; only an EdgekitError with a one-line message may escape."""
    with time_limit(5):
        try:
            info = tflite_model.ModelInfo.from_bytes(data, "fuzz.tflite")
            for runtime in (10, 14):
                report = C.check_model(info, runtime, multiple)
                report.render_text()
                json.dumps(report.to_dict())
        except EdgekitError as exc:
            assert "\n" not in str(exc), str(exc)
            assert "Traceback" not in str(exc)


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(mutated_model(), st.booleans())
def test_check_of_mutated_real_models_fails_only_cleanly(data, multiple):
    check_everything(data, multiple)


@st.composite
def odd_graph(draw):
    from tests.tflite_builder import GraphBuilder

    gb = GraphBuilder()
    pool: list[int] = []

    def activation() -> int:
        shape = draw(st.lists(DIMS, min_size=0, max_size=5))
        signature = [-1] + shape[1:] if shape and draw(st.booleans()) else None
        t = gb.tensor(shape, draw(DTYPES), signature=signature)
        pool.append(t)
        return t

    def any_input() -> int:
        kind = draw(st.sampled_from(["new", "old", "old", "missing", "const", "const"]))
        if kind == "old" and pool:
            return draw(st.sampled_from(pool))
        if kind == "missing":
            return -1
        if kind == "const":
            values = draw(st.lists(st.integers(-3, 5), min_size=0, max_size=6))
            return gb.tensor(
                [len(values)],
                draw(st.sampled_from(["int32", "int8", "float32"])),
                data=np.array(values),
                scale=draw(st.sampled_from([None, 0.5, [0.1, 0.2]])),
                zero_point=0 if draw(st.booleans()) else [0, 0],
            )
        return activation()

    first = activation()
    outputs = []
    for _ in range(draw(st.integers(1, 6))):
        name = draw(st.sampled_from(OP_NAMES))
        lead = [draw(st.sampled_from(pool))] if pool and draw(st.integers(0, 9)) else []
        ins = lead + [any_input() for _ in range(draw(st.integers(0, 4)))]
        outs = [activation() for _ in range(draw(st.sampled_from([1, 1, 1, 1, 1, 1, 2, 2, 0])))]
        extra = {}
        if name == "CUSTOM":
            extra["custom_code"] = draw(
                st.sampled_from(["Atan", "TFLite_Detection_PostProcess", "Atan", "edgetpu-custom-op"])
            )
        gb.op(name, ins, outs, version=draw(st.sampled_from([1, 1, 1, 1, 2, 3, 12])), **extra)
        outputs += outs
    return gb.build([first], outputs or [first])


@settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(odd_graph(), st.booleans())
def test_check_of_odd_synthesized_graphs_fails_only_cleanly(data, multiple):
    check_everything(data, multiple)


@pytest.mark.parametrize(
    "shape_in, shape_out", [([1, 0, 4, 8], [1, 0, 8, 8]), ([1, 4, 4, 8], [1, 0, 0, 8]), ([1, 1, 4, 8], [1, 0, 8, 8])]
)
def test_zero_size_resize_is_a_verdict_not_a_crash(shape_in, shape_out):
    from tests.tflite_builder import GraphBuilder

    for align in (False, True):
        gb = GraphBuilder()
        x = gb.tensor(shape_in)
        y = gb.tensor(shape_out)
        gb.op("RESIZE_BILINEAR", [x, gb.const(shape_out[1:3])], [y], alignCorners=align)
        op = C.check_model(tflite_model.ModelInfo.from_bytes(gb.build([x], [y]))).ops[0]
        changed = [(i, o) for i, o in zip(shape_in[1:3], shape_out[1:3]) if i != o]
        if any(0 in pair for pair in changed):
            assert op.target == "cpu" and "size 0" in op.detail


@pytest.mark.skipif(not SEED_BYTES, reason="real Coral test data not found")
def test_cli_check_on_a_truncated_real_model_is_one_clean_line(tmp_path):
    from click.testing import CliRunner

    from edgekit.cli.app import cli

    data = SEED_BYTES[min(SEED_BYTES)]
    bad = tmp_path / "cut.tflite"
    bad.write_bytes(data[: len(data) // 2])
    r = CliRunner().invoke(cli, ["check", str(bad), "--json"])
    assert r.exit_code == 3
    assert r.stderr.startswith("error: not a valid TFLite model") and r.stderr.count("\n") == 1
