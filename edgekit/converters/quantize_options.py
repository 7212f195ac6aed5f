"""quantize's options (and build's, which quantizes first): one frozen dataclass, one field per option.

What ``edgekit quantize`` takes, as :func:`edgekit.converters.quantize.quantize` runs on it: made by the Python API
(``edgekit.quantize``, ``edgekit.build``: :func:`edgekit.pipeline.options.quantize_options`), which the
command line calls. Each default is the option's in :data:`edgekit.flags.QUANTIZE`, where it is written once
(``--help`` and the docs tables read it there). The dataclass is its own module, made only where quantize's
options are: making a frozen dataclass of 29 fields costs about 15M instructions, which a one-image ``edgekit
classify`` (whose command line is read from edgekit.flags) must not pay (benchmarks/startup.md).
tests/test_flags.py checks that the fields, the flags of quantize and build and the API's keywords agree, name
and default.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple

from edgekit.flags import default
from edgekit.report import SILENT, Reporter


def _flag(name: str) -> Any:
    """The default of quantize's option ``name`` (edgekit.flags)."""
    return default("quantize", name)


@dataclass(frozen=True)
class QuantizeOptions:
    """``model`` (and how messages name it: ``model_shown``, the API's onnx.ModelProto), one field per option of
    ``edgekit quantize`` (``output`` is build's int8 model in its work folder), and how the run talks
    (``show_progress``, ``report``). ``mean``, ``std`` and ``input_size`` hold the values as read."""

    model: str
    output: Optional[str] = _flag("output")
    model_shown: Optional[str] = None
    calib: Optional[str] = _flag("calib")
    samples: int = _flag("samples")
    holdout: int = _flag("holdout")
    seed: int = _flag("seed")
    tfrecord_key: str = _flag("tfrecord_key")
    arch: Optional[str] = _flag("arch")
    custom_objects: Optional[str] = _flag("custom_objects")
    trust_model: bool = _flag("trust_model")
    output_name: Optional[str] = _flag("output_name")        # which output of a model with several (name or index)
    scaling: Optional[str] = _flag("scaling")
    mean: Optional[Tuple[float, ...]] = _flag("mean")
    std: Optional[Tuple[float, ...]] = _flag("std")
    resize: Optional[str] = _flag("resize")
    channels: Optional[str] = _flag("channels")
    input_size: Optional[Tuple[int, int]] = _flag("input_size")   # (width, height) for models of any input size
    io: str = _flag("io")
    labels: Optional[str] = _flag("labels")
    eval: Optional[str] = _flag("eval")                      # labelled data verification uses besides calibration's
    min_agreement: float = _flag("min_agreement")
    max_accuracy_drop: float = _flag("max_accuracy_drop")    # points of top-1 the int8 model may lose against float
    strict: bool = _flag("strict")                           # an uncertain verdict past its limit fails too
    no_verify: bool = _flag("no_verify")
    layout: Optional[str] = _flag("layout")                  # a detector's output layout, when its outputs fit several
    verbose: bool = _flag("verbose")
    show_progress: bool = True
    report: Reporter = SILENT  # told each warning as it arises and notes (e.g. "created output folder ...")

    @property
    def verify(self) -> bool:
        """Whether the int8 model is compared with the float one (not ``--no-verify``)."""
        return not self.no_verify
