"""Keyword arguments of the Python API turned into the library's options (shared by edgekit.api and edgekit.pipeline.build).

Cheap to import: no converter, no TensorFlow, and quantize's options (:mod:`edgekit.converters.quantize_options`) are
imported only when made (a one-image classify imports this module through edgekit.api).
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Union

from edgekit.errors import UsageError

if TYPE_CHECKING:  # pragma: no cover
    from edgekit.converters.quantize_options import QuantizeOptions

PathLike = Union[str, "os.PathLike[str]"]
Floats = float | Sequence[float] | None


def floats(value: Floats, name: str = "mean/std") -> tuple[float, ...] | None:
    """``mean``/``std`` as the library takes them: one number or one per channel. A string is read as the flag's
    text is (``"255"``, ``"127.5,127.5,127.5"``), never one value per character; anything else that is no number
    or sequence of numbers is refused (UsageError)."""
    if value is None:
        return None
    if isinstance(value, (str, bytes)):
        return floats_text(os.fsdecode(value), name)
    if isinstance(value, float):  # a Real too, said apart so a type checker sees a float is no sequence
        return (float(value),)
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return (float(value),)
    try:
        out = tuple(floats_text(v, name)[0] if isinstance(v, str) else _real(v) for v in value)
    except (TypeError, ValueError):
        out = ()
    if not out:
        raise UsageError(
            f"{name} expects one number or one per channel, got {value!r}",
            f"e.g. {name}=127.5, or {name}=(123.7, 116.3, 103.5)",
        )
    return out


def _real(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(v)
    return float(v)


def floats_text(value: str, flag: str) -> tuple[float, ...]:
    """The text of ``--mean``/``--std`` (one number or R,G,B), as the command line reads it."""
    try:
        return tuple(float(v) for v in value.replace(" ", "").split(","))
    except ValueError:
        raise UsageError(
            f"{flag} expects one number or R,G,B, got {value!r}",
            f"e.g. {flag} 127.5, or one value per channel: {flag} 123.7,116.3,103.5",
        ) from None


def size(value: str | tuple[int, int] | None) -> tuple[int, int] | None:
    """``input_size`` as ``"224x224"`` (the flag's text) or ``(224, 224)``."""
    if value is None or isinstance(value, tuple):
        return value
    from edgekit.errors import UsageError

    parts = str(value).lower().split("x")
    if len(parts) != 2 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise UsageError(f"input_size expects WIDTHxHEIGHT, got {value!r}", "e.g. input_size='224x224'")
    return int(parts[0]), int(parts[1])


def is_onnx_proto(model: Any) -> bool:
    """An ``onnx.ModelProto`` (told by its protobuf shape: onnx need not be imported to ask)."""
    return hasattr(model, "SerializeToString") and hasattr(model, "graph") and hasattr(model, "opset_import")


@contextmanager
def model_file(model: Any) -> Iterator[tuple[PathLike, str | None]]:
    """(path, name to show) for the API's ``model``: a path as it is; an ``onnx.ModelProto`` written to a
    temporary ``.onnx`` for the run, named in every message as the ModelProto, never as the temporary file."""
    if not is_onnx_proto(model):
        yield model, None
        return
    graph = str(model.graph.name or "model")
    stem = "".join(c if c.isalnum() or c in "-_" else "_" for c in graph)[:64] or "model"
    import tempfile  # here: a run without a ModelProto (a one-image classify) never pays for it
    from pathlib import Path

    with tempfile.TemporaryDirectory(prefix="edgekit-onnx-") as tmp:
        path = Path(tmp) / f"{stem}.onnx"
        path.write_bytes(model.SerializeToString())
        yield str(path), f"the onnx.ModelProto {graph!r}"


def quantize_options(
    model: PathLike,
    model_shown: str | None,
    output: PathLike | None = None,
    mean: Floats = None,
    std: Floats = None,
    input_size: str | tuple[int, int] | None = None,
    **options: Any,
) -> QuantizeOptions:
    """The :class:`~edgekit.converters.quantize_options.QuantizeOptions` of a call of edgekit.quantize or
    edgekit.pipeline.build: the model and output as paths, ``mean``, ``std`` and ``input_size`` read as the API
    takes them (a number, a sequence, or the flag's text), every other option as given (``options``: the call's
    keywords by name; one left out keeps QuantizeOptions' default, the flag's)."""
    from edgekit.converters.quantize_options import QuantizeOptions

    return QuantizeOptions(
        model=os.fsdecode(model),
        model_shown=model_shown,
        output=None if output is None else os.fsdecode(output),
        mean=floats(mean, "mean"),
        std=floats(std, "std"),
        input_size=size(input_size),
        **options,
    )
