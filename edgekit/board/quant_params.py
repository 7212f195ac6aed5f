"""Quantization parameters LiteRT cannot take, found before any interpreter is made.

A NaN, infinite, zero, negative or subnormal scale, or a zero point outside the type's range, on an
int8/uint8 tensor makes LiteRT's kernels crash the process (a segfault in ``invoke`` on a QUANTIZE
output; tests/devices/test_quant_params.py runs one in a child process). A model is what strangers
send, so the runtime reads every int8/uint8 tensor's parameters with the bounds-checked flatbuffer
reader (the file memory-mapped; a few microseconds a tensor) and refuses such a model with one line
naming the tensor. Shipped to boards: Python 3.7, standard library only.
"""

from __future__ import annotations

import math
import mmap
import os
import struct
from typing import Any, Optional, Union

from edgekit.board.flatbuffer import Reader
from edgekit.errors import InputError, InvalidModelError, shown

# TensorType codes of TFLite's schema (edgekit/tflite/schema_names.py): the types LiteRT quantizes affinely
_RANGES = {3: ("uint8", 0, 255), 9: ("int8", -128, 127)}
_FLT_MIN = 1.1754943508222875e-38  # the smallest normal float32: a smaller scale is subnormal


def bad_quantization(data: Any) -> Optional[str]:
    """What is wrong with the first int8/uint8 tensor LiteRT would crash on (``data``: the model's bytes or a
    memory map), e.g. ``tensor 5 'out' (int8): scale nan``; None when every one is sound, or when the file is no
    flatbuffer this reader follows (the interpreter then says what is wrong)."""
    try:
        r = Reader(data)
        model = r.table(r.deref(0, "root table"), "model")
        for g in model.tables(2, "subgraphs"):
            for i, t in enumerate(g.tables(0, "tensors")):
                found = _tensor_problem(t)
                if found:
                    return "tensor {} {!r} ({})".format(i, shown(t.string(3, "tensor name") or ""), found)
    except (InvalidModelError, struct.error, ValueError, IndexError, OverflowError, MemoryError):
        return None
    return None


def _tensor_problem(t: Any) -> Optional[str]:
    kind = _RANGES.get(t.scalar(1, "b"))
    q = t.table(4, "quantization") if kind is not None else None
    if q is None or kind is None:
        return None
    name, low, high = kind
    for s in q.scalars(2, "f", "quantization scales"):
        if not (_FLT_MIN <= s < math.inf):  # NaN fails every comparison
            return "{}: scale {!r}{}".format(name, s, " (subnormal)" if 0 < s < _FLT_MIN else "")
    for z in q.scalars(3, "q", "quantization zero points"):
        if not low <= z <= high:
            return f"{name}: zero point {z} outside {low}..{high}"
    return None


def refuse_bad_quantization(model: Union[str, os.PathLike[str], bytes, Any], name: str) -> None:
    """InputError (exit 3) naming the tensor when LiteRT would crash on the model's quantization parameters;
    nothing for a model that cannot be read here (its interpreter explains that)."""
    if not isinstance(model, (str, os.PathLike)):  # the model's bytes, or a memory map of them
        problem = bad_quantization(model)
    else:
        try:
            with open(model, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                problem = bad_quantization(data)
        except (OSError, ValueError):  # missing, unreadable, empty: opening it gives the precise error
            return
    if problem:
        raise InputError(
            f"{name}: {problem}: quantization parameters LiteRT cannot run (it would crash)",
            "quantize or export the model again; the file is damaged or was edited",
        )
