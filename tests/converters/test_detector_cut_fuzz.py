"""Structural fuzzing of ``edgekit cut`` (issue 31): seeded mutations of YOLO .tflite models, each of which must end in
a cut model or an EdgekitError with its exit code (nothing written then), never another exception, never a hang.

The mutations edit the model's structure through TensorFlow Lite's schema (tensor shapes, names, types and buffers, op
inputs, outputs and opcodes, quantization, the subgraphs, the graph's inputs and outputs, buffer contents) and
sometimes truncate the file. Seeds: YOLO-style models built here (tests/yolo_heads.py: both Ultralytics heads),
always; a real Ultralytics YOLOv5nu export among the evidence pairs (in the repository); the real Ultralytics YOLOv8n
export in ../shared/testdata/detection where it is present (fewer cases: each repacks 3 MB).
"""

from __future__ import annotations

import random
import signal
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import flatbuffers
import numpy as np
import pytest

from edgekit.api import cut
from edgekit.errors import EdgekitError
from tests.conftest import TESTDATA
from tests.tflite_builder import S
from tests.yolo_heads import tiny_yolo

REAL = TESTDATA / "detection" / "ppe_yolov8n_full_integer_quant.tflite"
ODD_INTS = [-(2**31), -2, -1, 0, 1, 2, 3, 4, 7, 16, 64, 255, 2**16, 2**31 - 1]
ODD_FLOATS = [0.0, -1.0, 1e-45, 1e-30, 1e30, float("inf"), float("-inf"), float("nan")]


@contextmanager
def time_limit(seconds: int):
    def on_alarm(signum, frame):
        raise TimeoutError(f"cut took over {seconds}s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _set(obj: Any, attr: str, value: Any) -> Callable[[], None]:
    """Set ``obj.attr`` and return what undoes it."""
    old = getattr(obj, attr)
    setattr(obj, attr, value)
    return lambda: setattr(obj, attr, old)


def _index(r: random.Random, n: int) -> int:
    return r.choice([r.randrange(max(n, 1)), -1, -2, n, n + 3, 2**31 - 1])


def _mutate(m: Any, g: Any, r: random.Random) -> Callable[[], None]:
    """One structural change to ``m`` (the schema's ModelT; ``g``: its main graph), and what undoes it."""
    t = r.choice(g.tensors)
    op = r.choice(g.operators)
    kind = r.randrange(13)
    if kind == 0:  # a tensor's shape
        return _set(t, "shape", [r.choice(ODD_INTS) for _ in range(r.randrange(6))])
    if kind == 1:  # an op reads another tensor
        ins = list(op.inputs)
        if ins:
            ins[r.randrange(len(ins))] = _index(r, len(g.tensors))
        return _set(op, "inputs", ins if r.random() < 0.8 else ins[: r.randrange(len(ins) + 1)])
    if kind == 2:  # an op writes another tensor
        outs = list(op.outputs)
        outs[r.randrange(len(outs))] = _index(r, len(g.tensors))
        return _set(op, "outputs", outs if r.random() < 0.8 else [])
    if kind == 3:  # a tensor's buffer
        return _set(t, "buffer", _index(r, len(m.buffers)))
    if kind == 4:  # a buffer's bytes
        b = r.choice(m.buffers)
        data = b.data if b.data is not None else np.zeros(0, np.uint8)
        return _set(
            b,
            "data",
            r.choice(
                [None, data[: r.randrange(len(data) + 1)], np.frombuffer(r.randbytes(r.randrange(1, 64)), np.uint8)]
            ),
        )
    if kind == 5:  # quantization
        q = S.QuantizationParametersT()
        q.scale = [r.choice(ODD_FLOATS) for _ in range(r.randrange(3))]
        q.zeroPoint = [r.choice(ODD_INTS) for _ in range(r.randrange(3))]
        q.quantizedDimension = r.choice(ODD_INTS)
        return _set(t, "quantization", r.choice([None, q]))
    if kind == 6:  # the subgraphs
        extra = S.SubGraphT()
        extra.tensors, extra.operators, extra.inputs, extra.outputs = [], [], [], []
        return _set(m, "subgraphs", r.choice([[], [g, g], [g, extra], [extra, g]]))
    if kind == 7:  # an op's opcode
        return _set(op, "opcodeIndex", _index(r, len(m.operatorCodes)))
    if kind == 8:  # a tensor's type
        return _set(t, "type", r.choice([0, 1, 2, 3, 7, 9, 17, 100]))
    if kind == 9:  # the graph's inputs or outputs
        which = r.choice(["inputs", "outputs"])
        return _set(g, which, [_index(r, len(g.tensors)) for _ in range(r.randrange(3))])
    if kind == 11:  # a tensor's name: any bytes (not UTF-8)
        return _set(t, "name", r.randbytes(r.randrange(12)))
    if kind == 10:  # an op's options (a concatenation's axis, a conv's activation...)
        if op.builtinOptions is None:
            return lambda: None
        field = r.choice(sorted(vars(op.builtinOptions)))
        return _set(op.builtinOptions, field, r.choice(ODD_INTS))
    return _set(g, "operators", r.sample(g.operators, len(g.operators)))  # the ops out of order


def _packed(m: Any, size: int) -> bytes:
    b = flatbuffers.Builder(size + 1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def _fuzz(seed_bytes: bytes, cases: int, seed: int, tmp_path) -> dict[str, int]:
    """Run ``cases`` mutations of ``seed_bytes`` through cut; how the runs ended, by outcome."""
    r = random.Random(seed)
    m = S.ModelT.InitFromPackedBuf(bytearray(seed_bytes), 0)
    main = m.subgraphs[0]
    src, out = tmp_path / "m.tflite", tmp_path / "m_cut.tflite"
    outcomes: dict[str, int] = {}
    for case in range(cases):
        undo = [_mutate(m, main, r) for _ in range(r.choice([1, 1, 2, 3]))]
        try:
            data = _packed(m, len(seed_bytes))
        except Exception:
            data = None
        for u in reversed(undo):
            u()
        if data is None:
            continue
        if r.random() < 0.1:
            data = data[: r.randrange(len(data))]
        src.write_bytes(data)
        out.unlink(missing_ok=True)
        try:
            with time_limit(10):
                cut(src, output=out)
            outcomes["cut"] = outcomes.get("cut", 0) + 1
            assert out.is_file()
        except EdgekitError as exc:
            assert exc.exit_code in (2, 3), (case, exc)
            assert not out.exists(), (case, exc)
            outcomes[f"exit {exc.exit_code}"] = outcomes.get(f"exit {exc.exit_code}", 0) + 1
    return outcomes


@pytest.mark.parametrize("head", ["levels", "joined"])
def test_mutated_yolo_models_end_in_a_cut_or_an_edgekit_error(tmp_path, head):
    outcomes = _fuzz(
        tiny_yolo(head=head, size=(32, 32), reg_max=16 if head == "levels" else 1), 150, seed=31, tmp_path=tmp_path
    )
    assert outcomes.get("cut", 0) > 10 and outcomes.get("exit 3", 0) > 10, outcomes  # both ends were reached


@pytest.mark.skipif(not REAL.is_file(), reason=f"real Ultralytics export not found: {REAL} (set EDGEKIT_TESTDATA)")
def test_mutated_real_yolov8n_exports_end_in_a_cut_or_an_edgekit_error(tmp_path):
    outcomes = _fuzz(REAL.read_bytes(), 24, seed=35, tmp_path=tmp_path)
    assert sum(outcomes.values()) >= 20, outcomes


PAIR = (
    Path(__file__).resolve().parents[1]
    / "fixtures"
    / "evidence"
    / "pairs"
    / "muellevin+Studienarbeit___e9927f95__Detection_training__Tensorflow__workspace__models__yolov5nu_saved_model__"
    "export__tfliteexport__saved_model__yolov5nu_full_integer_quant.tflite.gz"
)


@pytest.mark.skipif(not PAIR.is_file(), reason=f"evidence pair not found: {PAIR}")
def test_mutated_real_yolov5nu_exports_end_in_a_cut_or_an_edgekit_error(tmp_path):
    """A real Ultralytics YOLOv5nu export at 320 from the evidence pairs (in the repository: runs without
    ../shared; its weights zeroed, its structure whole)."""
    import gzip

    outcomes = _fuzz(gzip.decompress(PAIR.read_bytes()), 16, seed=5, tmp_path=tmp_path)
    assert sum(outcomes.values()) >= 12, outcomes
