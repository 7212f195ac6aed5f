"""Keyword arguments of the Python API turned into the library's options (shared by edgekit.api and edgekit.pipeline.build).

Cheap to import: the converters are imported only when quantize options are made.
"""

from __future__ import annotations

import numbers
import os
from contextlib import contextmanager
from typing import Any, Iterator, Optional, Sequence, Tuple, Union

from edgekit.errors import UsageError
from edgekit.report import Reporter

PathLike = Union[str, "os.PathLike[str]"]
Floats = Optional[Union[float, Sequence[float]]]


def floats(value: Floats, name: str = "mean/std") -> Optional[Tuple[float, ...]]:
    """``mean``/``std`` as the library takes them: one number or one per channel. A string is read as the flag's
    text is (``"255"``, ``"127.5,127.5,127.5"``), never one value per character; anything else that is no number
    or sequence of numbers is refused (UsageError)."""
    if value is None:
        return None
    if isinstance(value, (str, bytes)):
        return floats_text(os.fsdecode(value), name)
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return (float(value),)
    try:
        out = tuple(floats_text(v, name)[0] if isinstance(v, str) else _real(v) for v in value)
    except (TypeError, ValueError):
        out = ()
    if not out:
        raise UsageError(f"{name} expects one number or one per channel, got {value!r}",
                         f"e.g. {name}=127.5, or {name}=(123.7, 116.3, 103.5)")
    return out


def _real(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(v)
    return float(v)


def floats_text(value: str, flag: str) -> Tuple[float, ...]:
    """The text of ``--mean``/``--std`` (one number or R,G,B), as the command line reads it."""
    try:
        return tuple(float(v) for v in value.replace(" ", "").split(","))
    except ValueError:
        raise UsageError(f"{flag} expects one number or R,G,B, got {value!r}",
                         f"e.g. {flag} 127.5, or one value per channel: {flag} 123.7,116.3,103.5") from None


def size(value: Union[str, Tuple[int, int], None]) -> Optional[Tuple[int, int]]:
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
def model_file(model: Any) -> Iterator[Tuple[PathLike, Optional[str]]]:
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


def quantize_options(model: PathLike, output: Optional[PathLike], q: dict, report: Reporter,
                     model_shown: Optional[str] = None) -> Any:
    """QuantizeOptions from the keywords of edgekit.quantize / edgekit.pipeline.build (``q``: them by name)."""
    from edgekit.converters.quantize import QuantizeOptions

    return QuantizeOptions(model=os.fsdecode(model), model_shown=model_shown,
                           output=None if output is None else os.fsdecode(output),
                           calib=q["calib"], samples=q["samples"], holdout=q["holdout"], seed=q["seed"],
                           tfrecord_key=q["tfrecord_key"], arch=q["arch"], custom_objects=q["custom_objects"],
                           trust_model=q["trust_model"], output_name=q["output_name"], scaling=q["scaling"],
                           mean=floats(q["mean"], "mean"),
                           std=floats(q["std"], "std"), resize=q["resize"], channels=q["channels"],
                           input_size=size(q["input_size"]), io=q["io"], labels=q["labels"], eval=q["eval"],
                           min_agreement=q["min_agreement"], max_accuracy_drop=q["max_accuracy_drop"],
                           strict=q["strict"], verify=not q["no_verify"], layout=q.get("layout"), verbose=q["verbose"],
                           show_progress=q["show_progress"],
                           report=report)
