"""Fuzz the .tflite reader with models mutated by hypothesis: nothing but our error, no hang. The seeds are small
models the tests build (always) and the real Coral models of ../shared/testdata (where present)."""

from __future__ import annotations

import signal
import struct
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgekit.errors import InvalidModelError
from edgekit.tflite import model as tflite_model
from tests import detection_models, tflite_builder
from tests.conftest import TESTDATA

SEEDS = [
    "split_concat.tflite",
    "keras_lstm_mnist_ptq.tflite",
    "mobilenet_v1_0.25_128_quant_edgetpu.tflite",
    "mobilenet_v1_0.25_128_quant.tflite",
]


def built_seeds() -> dict[str, bytes]:
    """Small models the tests build themselves (a clone without ../shared/testdata fuzzes these): an int8 CNN,
    a Dense chain, a chain the Edge TPU cuts, sliced detector heads and the TFLite_Detection_PostProcess
    custom op with its flexbuffer options."""
    anchors = np.array([[0.5, 0.5, 0.4, 0.4], [0.2, 0.2, 0.1, 0.1], [0.8, 0.8, 0.2, 0.2]])
    return {
        "built:conv_chain": tflite_builder.conv_chain(2, channels=4, size=8),
        "built:fc_chain": tflite_builder.fc_chain(3, 8),
        "built:cut_chain": tflite_builder.cut_chain(5),
        "built:slice_model": detection_models.slice_model(
            (16, 16), [{"shape": [1, 6, 21]}, {"shape": [1, 21, 4], "float": True}]
        ),
        "built:postprocess": detection_models.postprocess_model((16, 16), anchors, 2),
    }


SEED_BYTES = {
    **built_seeds(),
    **{name: (TESTDATA / name).read_bytes() for name in SEEDS if (TESTDATA / name).is_file()},
}
PER_CASE_SECONDS = 2
INTERESTING_U32 = [0, 1, 4, 0x7F, 0xFF, 0x7FFF, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0xFFFFFFFC]


@contextmanager
def time_limit(seconds: int):
    def on_alarm(signum, frame):
        raise TimeoutError(f"parsing took over {seconds}s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def parse_everything(data: bytes) -> None:
    """Parse and touch everything a command would; only InvalidModelError may escape."""
    with time_limit(PER_CASE_SECONDS):
        try:
            info = tflite_model.ModelInfo.from_bytes(data)
        except InvalidModelError as exc:
            assert str(exc).startswith("not a valid TFLite model: ")
            return
        tflite_model.summary(info)
        for g in info.subgraphs:
            for t in g.tensors:
                info.constant_value(t)


@st.composite
def mutated_model(draw):
    name = draw(st.sampled_from(sorted(SEED_BYTES)))
    data = bytearray(SEED_BYTES[name])
    kind = draw(st.sampled_from(["truncate", "bitflip", "offset"]))
    if kind == "truncate":
        data = data[: draw(st.integers(0, len(data) - 1))]
    elif kind == "bitflip":
        for _ in range(draw(st.integers(1, 16))):
            pos = draw(st.integers(0, len(data) - 1))
            data[pos] ^= 1 << draw(st.integers(0, 7))
    else:  # overwrite aligned 32-bit words (offsets, lengths, vtable entries) with edge values
        for _ in range(draw(st.integers(1, 4))):
            pos = draw(st.integers(0, len(data) // 4 - 1)) * 4
            value = draw(st.one_of(st.sampled_from(INTERESTING_U32), st.integers(0, 2**32 - 1)))
            struct.pack_into("<I", data, pos, value)
    return bytes(data)


@settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(mutated_model())
def test_mutated_models_raise_only_our_error(data):
    parse_everything(data)


def test_the_seeds_are_models_the_reader_reads():
    """Every seed parses whole (a mutation of a model the reader already refuses tests little)."""
    for name, data in SEED_BYTES.items():
        assert tflite_model.ModelInfo.from_bytes(data).subgraphs, name


@pytest.mark.parametrize("name", [n for n, b in sorted(SEED_BYTES.items()) if len(b) < 20_000])
def test_every_truncation_point_of_a_small_model(name):
    data = SEED_BYTES[name]
    for n in range(len(data)):
        parse_everything(data[:n])


def test_a_clone_without_the_shared_test_data_fuzzes_built_models_and_says_what_it_skipped(tmp_path):
    """Issue 31: without ../shared/testdata the fuzzer had no seeds; now it fuzzes the built ones, and the run
    ends with the number of tests skipped for want of the real models."""
    import os
    import subprocess
    import sys

    from tests.conftest import REPO

    here = Path(__file__).resolve()
    tests = [f"{here}::test_every_truncation_point_of_a_small_model", str(REPO / "tests" / "test_tflite_model.py")]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "PYTHONPATH": str(REPO), "EDGEKIT_TESTDATA": str(tmp_path / "none")},
    )
    lines = proc.stdout.strip().splitlines()
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    summary = next(line for line in reversed(lines) if " passed" in line)  # other summary lines may follow it
    assert int(summary.split(" passed")[0].rsplit(" ", 1)[-1]) >= len(built_seeds())  # the built seeds ran
    skipped = int(summary.split(" skipped")[0].rsplit(" ", 1)[-1])
    assert (
        skipped
        and (
            f"{skipped} tests skipped because the real Coral test data is absent: "
            f"{tmp_path / 'none'} (put it at ../shared/testdata or set EDGEKIT_TESTDATA)"
        )
        in lines
    )
