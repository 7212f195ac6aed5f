"""The preprocessing document: :class:`PreprocessSpec`, how an image becomes a model input.

One type from where it is decided to the board and back: quantize records it with the model, build writes it into
a bundle's manifest, the board reads it back (this module ships to the Python 3.7 board), and quantize, train and
evaluate each say which preprocessing they used with a block that subclasses it and adds where it came from, in
words each command has its own (evaluate: ``source``; train: ``description``; quantize: ``origin``,
``description`` and the search that settled it). Its document is the spec's fields with ``version`` first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Tuple

from edgekit.errors import InputError, UsageError
from edgekit.records import Record, shown

SPEC_VERSION = 1
# Pillow's filters, and "keras": the resize Keras pipelines train with (image_dataset_from_directory,
# keras.ops.image.resize, tf.image.resize): bilinear, half-pixel centres, no antialias (see resize_like_keras).
RESIZE_FILTERS = ("nearest", "bilinear", "bicubic", "lanczos", "box", "hamming", "keras")
CHANNEL_ORDERS = ("RGB", "BGR", "L")
# Named scalings: (mean, std) applied to 0..255 pixels.
SCALINGS: dict[str, tuple[float, float]] = {
    "raw": (0.0, 1.0),  # 0..255
    "0..1": (0.0, 255.0),
    "-1..1": (127.5, 127.5),
}
MIN_STD = 1e-6  # smaller (or negative) divisors make pixel values overflow float32 or flip them
MAX_MEAN_STD = 1e30  # float32 stays finite


@dataclass(frozen=True)
class PreprocessSpec(Record):
    """How an image becomes a model input: resize to (width, height) with a filter, convert to RGB/BGR/grayscale,
    then ``(pixels - mean) / std``. ``mean``/``std`` have one value or one per channel, numbers with a point."""

    width: int
    height: int
    channels: str = "RGB"
    resize: str = "lanczos"
    mean: Tuple[float, ...] = (0.0,)
    std: Tuple[float, ...] = (1.0,)

    def __post_init__(self) -> None:
        object.__setattr__(self, "mean", tuple(float(v) for v in self.mean))
        object.__setattr__(self, "std", tuple(float(v) for v in self.std))
        if self.width < 1 or self.height < 1:
            raise UsageError(
                f"input size must be positive, got {self.width}x{self.height}", "e.g. --input-size 224x224"
            )
        if self.channels not in CHANNEL_ORDERS:
            raise UsageError(f"unknown channel order {self.channels!r}", f"use one of {', '.join(CHANNEL_ORDERS)}")
        if self.resize not in RESIZE_FILTERS:
            raise UsageError(f"unknown resize filter {self.resize!r}", f"use one of {', '.join(RESIZE_FILTERS)}")
        n = 1 if self.channels == "L" else 3
        for name, values in (("mean", self.mean), ("std", self.std)):
            if len(values) not in (1, n):
                expected = "1 value" if n == 1 else f"1 or {n} values"
                raise UsageError(
                    f"--{name} needs {expected} for {self.channels} input, got {len(values)}",
                    "one value for all channels" + ("" if n == 1 else ", or R,G,B"),
                )
        if not all(math.isfinite(v) and abs(v) <= MAX_MEAN_STD for v in self.mean + self.std):
            raise UsageError(
                f"--mean and --std must be finite numbers, got mean={list(self.mean)} std={list(self.std)}",
                "pass values on 0..255 pixels, e.g. --mean 127.5 --std 127.5",
            )
        if any(s == 0 for s in self.std):
            raise UsageError("--std must not be zero", "pass the divisor on 0..255 pixels, e.g. --std 255 for 0..1")
        if any(s < MIN_STD for s in self.std):
            raise UsageError(
                f"--std must be at least {MIN_STD:g}, got {list(self.std)}",
                "pass the divisor on 0..255 pixels, e.g. --std 255 for 0..1",
            )

    @property
    def num_channels(self) -> int:
        return 1 if self.channels == "L" else 3

    @classmethod
    def with_scaling(cls, width: int, height: int, scaling: str, **kw: Any) -> PreprocessSpec:
        if scaling not in SCALINGS:
            raise UsageError(f"unknown scaling {scaling!r}", f"use one of {', '.join(SCALINGS)} or --mean/--std")
        mean, std = SCALINGS[scaling]
        return cls(width, height, mean=(mean,), std=(std,), **kw)

    @property
    def scaling_name(self) -> Optional[str]:
        """The named scaling this spec's mean/std equal, if any."""
        for name, (m, s) in SCALINGS.items():
            if set(self.mean) == {m} and set(self.std) == {s}:
                return name
        return None

    def describe(self) -> str:
        scale = self.scaling_name or f"mean={list(self.mean)} std={list(self.std)}"
        return f"{self.width}x{self.height} {self.channels}, {self.resize} resize, scaling {scale}"

    @property
    def version(self) -> int:
        """The document's format version (its first key)."""
        return SPEC_VERSION

    def to_dict(self) -> Dict[str, Any]:
        return {"version": SPEC_VERSION, **super().to_dict()}

    @classmethod
    def from_dict(cls, document: Mapping[str, Any], where: Optional[str] = None) -> Any:
        """A record's reading of the document (this edgekit's ``version`` first; a value the spec refuses is a
        ValueError, as any record's). A spec recorded with a model or a bundle is read by :meth:`read`."""
        where = where or cls.__name__
        if not isinstance(document, Mapping):
            raise ValueError(f"{where}: expected an object, got {type(document).__name__}")
        version = document.get("version")
        if type(version) is not int or version != SPEC_VERSION:
            raise ValueError(f"{where}.version: expected {SPEC_VERSION}, got {shown(version)}")
        try:
            return super().from_dict({k: v for k, v in document.items() if k != "version"}, where)
        except UsageError as exc:
            raise ValueError(f"{where}: {exc.message}") from None

    @classmethod
    def read(cls, d: Mapping[str, Any]) -> PreprocessSpec:
        """The spec recorded with a model or in a bundle's manifest (raw JSON, untrusted: checked here, its defaults
        where a key is left out, an InputError saying what is wrong)."""
        try:
            return cls(
                int(d["width"]),
                int(d["height"]),
                str(d.get("channels", "RGB")),
                str(d.get("resize", "lanczos")),
                tuple(float(v) for v in d.get("mean", (0.0,))),
                tuple(float(v) for v in d.get("std", (1.0,))),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(
                f"recorded preprocessing is malformed: {exc}",
                "quantize the model again, or delete the broken record and pass --mean/--std",
            ) from None
        except UsageError as exc:  # a value __post_init__ refuses: the record is at fault, not a flag
            raise InputError(
                f"recorded preprocessing is malformed: {exc.message.replace('--', '')}",
                "re-create the model with edgekit quantize, or pass --mean/--std",
            ) from None
