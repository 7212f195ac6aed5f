"""The preprocessing block of edgekit's results: a :class:`~edgekit.board.preprocess.PreprocessSpec`'s document.

quantize, train and evaluate each say which preprocessing they used: the spec's fields as
:meth:`PreprocessSpec.to_dict` writes them (``version`` first), then where it came from, in words each
command has its own (evaluate: ``source``; train: ``description``; quantize: ``origin``, ``description`` and
the search that settled it). :class:`SpecRecord` is those shared fields; each command's block subclasses
it with its own, so the documents stay as they are and every block gives back its spec with :meth:`spec`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

from edgekit.records import Record

if TYPE_CHECKING:  # edgekit.board.preprocess imports numpy: a result's document and text need only the standard library
    from edgekit.board.preprocess import PreprocessSpec

S = TypeVar("S", bound="SpecRecord")


@dataclass(frozen=True)
class SpecRecord(Record):
    """:meth:`edgekit.board.preprocess.PreprocessSpec.to_dict` as a record: the document's version, the input size,
    the channel order, the resize filter and ``(pixels - mean) / std``."""

    version: int
    width: int
    height: int
    channels: str
    resize: str
    mean: tuple[float, ...]
    std: tuple[float, ...]

    @classmethod
    def of_spec(cls: type[S], spec: PreprocessSpec, *more: Any) -> S:
        """The block of ``spec``, ``more`` being the subclass's own fields in order."""
        return cls(
            int(cast(int, spec.to_dict()["version"])),  # SPEC_VERSION, an int
            spec.width,
            spec.height,
            spec.channels,
            spec.resize,
            tuple(spec.mean),
            tuple(spec.std),
            *more,
        )
