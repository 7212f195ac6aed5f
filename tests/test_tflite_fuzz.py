"""Fuzz the .tflite reader with real models mutated by hypothesis: nothing but our error, no hang."""

from __future__ import annotations

import signal
import struct
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgekit import tflite_model
from edgekit.errors import InvalidModelError
from tests.conftest import TESTDATA

SEEDS = ["split_concat.tflite", "keras_lstm_mnist_ptq.tflite", "mobilenet_v1_0.25_128_quant_edgetpu.tflite",
         "mobilenet_v1_0.25_128_quant.tflite"]
SEED_BYTES = {name: (TESTDATA / name).read_bytes() for name in SEEDS if (TESTDATA / name).is_file()}
PER_CASE_SECONDS = 2
INTERESTING_U32 = [0, 1, 4, 0x7F, 0xFF, 0x7FFF, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0xFFFFFFFC]

pytestmark = pytest.mark.skipif(not SEED_BYTES, reason=f"real Coral test data not found in {TESTDATA}")


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


@settings(max_examples=300, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mutated_model())
def test_mutated_models_raise_only_our_error(data):
    parse_everything(data)


@pytest.mark.parametrize("name", [n for n, b in sorted(SEED_BYTES.items()) if len(b) < 20_000])
def test_every_truncation_point_of_a_small_model(name):
    data = SEED_BYTES[name]
    for n in range(len(data)):
        parse_everything(data[:n])
