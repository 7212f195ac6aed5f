"""quantize's options (and build's, which quantizes first): one frozen dataclass, one field per option.

What ``edgekit quantize`` takes, as :func:`edgekit.converters.quantize.quantize` runs on it: made by the Python API
(``edgekit.quantize``, ``edgekit.build``: :func:`edgekit.pipeline.options.quantize_options`), which the
command line calls. Each default is the option's in :data:`edgekit.flags.QUANTIZE`, where it is written once
(``--help`` and the docs tables read it there). The dataclass is its own module, made only where quantize's
options are: making a frozen dataclass of 29 fields costs about 15M instructions, which a one-image ``edgekit
classify`` (whose command line is read from edgekit.flags) must not pay (benchmarks/startup.md).
edgekit.quantize's keywords are its fields (its signature lists them for help()), and edgekit.build passes its
quantize keywords (``**quantize_keywords``) on to it by name. tests/test_flags.py checks that the fields, the
flags of quantize and build and the API's keywords agree, name and default.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
    output: str | None = _flag("output")
    model_shown: str | None = None
    calib: str | None = _flag("calib")
    samples: int = _flag("samples")
    holdout: int = _flag("holdout")
    seed: int = _flag("seed")
    tfrecord_key: str = _flag("tfrecord_key")
    arch: str | None = _flag("arch")
    custom_objects: str | None = _flag("custom_objects")
    trust_model: bool = _flag("trust_model")
    output_name: str | None = _flag("output_name")  # which output of a model with several (name or index)
    scaling: str | None = _flag("scaling")
    mean: tuple[float, ...] | None = _flag("mean")
    std: tuple[float, ...] | None = _flag("std")
    resize: str | None = _flag("resize")
    channels: str | None = _flag("channels")
    input_size: tuple[int, int] | None = _flag("input_size")  # (width, height) for models of any input size
    io: str = _flag("io")
    labels: str | None = _flag("labels")
    eval: str | None = _flag("eval")  # labelled data verification uses besides calibration's
    min_agreement: float = _flag("min_agreement")
    max_accuracy_drop: float = _flag("max_accuracy_drop")  # points of top-1 the int8 model may lose against float
    strict: bool = _flag("strict")  # an uncertain verdict past its limit fails too
    no_verify: bool = _flag("no_verify")
    layout: str | None = _flag("layout")  # a detector's output layout, when its outputs fit several
    verbose: bool = _flag("verbose")
    show_progress: bool = True
    report: Reporter = SILENT  # told each warning as it arises and notes (e.g. "created output folder ...")

    @property
    def verify(self) -> bool:
        """Whether the int8 model is compared with the float one (not ``--no-verify``)."""
        return not self.no_verify
