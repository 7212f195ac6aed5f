"""The rules that decide an op before the per-op table (:data:`OP_CASES`), each a table entry with its id.

Custom ops (the compiler's TensorFlow Lite knows some, and no custom op but its own runs on the Edge
TPU), ops missing from the supported-op table, and QUANTIZE of float data (a model with float I/O).
:func:`edgekit.edgetpu.compatibility.op_judge.judge` tries them in order; the first that applies decides.
"""

from __future__ import annotations

from edgekit.edgetpu.compatibility.evidence import DOCS, EV_DECODERS, EV_DEEPLAB, EV_FLOAT_IO
from edgekit.edgetpu.compatibility.rules import RULES
from edgekit.edgetpu.compatibility.values import OpCase, OpContext
from edgekit.edgetpu.compatibility.words import (
    CONFIRMED,
    DATA_TYPE,
    FIX_MOVE_TO_END,
    FIX_QUANTIZE,
    KNOWN_CUSTOM_OPS,
    NOT_SUPPORTED,
    QUANT_TYPES,
    UNSPECIFIED,
    Kind,
)
from edgekit.tflite.model import FLOAT_DTYPES


def _is_custom(c: OpContext) -> bool:
    return c.op.name == "CUSTOM"


def _floats(c: OpContext) -> bool:
    return any(t is not None and t.dtype in FLOAT_DTYPES for t in c.ins + c.outs)


def _odd(c: OpContext) -> list[str]:
    """float/int16 activations (index outputs, int32/int64 of ARG_MAX and the like, are not odd)."""
    return sorted({t.dtype for t in c.activations if t.dtype in FLOAT_DTYPES | {"int16"}})


def _custom_detail(c: OpContext) -> str:
    return f"custom op {c.op.custom_code!r} runs on the CPU"


OP_CASES: tuple[OpCase, ...] = (
    # TFLite_Detection_PostProcess and the like stay on the CPU as "working on an unsupported data type".
    OpCase(
        "known_custom_op",
        lambda c: _is_custom(c) and c.op.custom_code in KNOWN_CUSTOM_OPS,
        DATA_TYPE,
        _custom_detail,
        FIX_MOVE_TO_END,
        ("report:tensorflow/models#10695",),
        CONFIRMED,
        Kind.TYPE,
    ),
    # Its place is certain (no custom op but the compiler's own runs on the Edge TPU); whether the compiler
    # accepts the model at all is the uncertain `custom_op` model rule.
    OpCase(
        "custom_op_float",
        lambda c: _is_custom(c) and _floats(c),
        DATA_TYPE,
        _custom_detail,
        FIX_MOVE_TO_END,
        EV_DECODERS,
        CONFIRMED,
        Kind.TYPE,
    ),
    OpCase(
        "custom_op_cpu", _is_custom, NOT_SUPPORTED, _custom_detail, FIX_MOVE_TO_END, EV_DECODERS, CONFIRMED, Kind.TYPE
    ),
    # An op missing from the table on float/int16 data is reported as a data-type problem (DEQUANTIZE in
    # real logs); otherwise "not supported".
    OpCase(
        "unsupported_op_odd_data",
        lambda c: c.op.name not in RULES and bool(_odd(c)),
        DATA_TYPE,
        lambda c: f"{c.op.name} on {', '.join(_odd(c))} data, and {c.op.name} is not an Edge TPU op",
        lambda c: FIX_QUANTIZE if set(_odd(c)) & FLOAT_DTYPES else FIX_MOVE_TO_END,
        EV_FLOAT_IO,
        CONFIRMED,
        Kind.TYPE,
    ),
    OpCase(
        "unsupported_op",
        lambda c: c.op.name not in RULES,
        NOT_SUPPORTED,
        lambda c: f"{c.op.name} is not in the Edge TPU's supported-op table",
        FIX_MOVE_TO_END,
        DOCS + EV_DEEPLAB,
        CONFIRMED,
        Kind.TYPE,
    ),
    # The converter's QUANTIZE of a float model input (float I/O) stays on the CPU.
    OpCase(
        "quantize_float_input",
        lambda c: (
            c.op.name == "QUANTIZE"
            and any(t.dtype in FLOAT_DTYPES for t in c.ins if t is not None)
            and all(t.dtype in QUANT_TYPES for t in c.outs if t is not None)
        ),
        UNSPECIFIED,
        lambda c: f"quantizes a {next(t.dtype for t in c.ins if t is not None)} input: the model has float I/O",
        "use integer (uint8/int8) model inputs: `edgekit quantize` makes them",
        EV_FLOAT_IO,
        CONFIRMED,
        Kind.TYPE,
    ),
)
