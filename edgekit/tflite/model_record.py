"""What edgekit records with a model it made: preprocessing, labels and provenance.

The record is JSON, stored twice so that it survives every tool in the chain:
- inside the .tflite as a metadata entry named ``edgekit`` (TFLite keeps unknown metadata);
- as a sidecar file ``<model stem>.edgekit.json`` beside the model, for tools that drop metadata.
  Whether edgetpu_compiler keeps our entry is unverified (Coral's compiled test models kept
  ``TFLITE_METADATA`` but lost ``min_runtime_version``), so for ``x_edgetpu.tflite`` the record of
  its CPU twin ``x.tflite`` is used too.

``classify`` finds it with :func:`find_record` and needs no preprocessing flags for such a model.
This module is pure (no TensorFlow), so the runtime half can read records on a board.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgekit.board.preprocess import PreprocessSpec
from edgekit.errors import InputError, parse_json

METADATA_NAME = "edgekit"
SIDECAR_SUFFIX = ".edgekit.json"
RECORD_VERSION = 1
RECORD_HINT = "fix or delete that file (edgekit quantize writes it again)"


@dataclass
class ModelRecord:
    preprocess: PreprocessSpec | None = None
    labels: list[str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # provenance: source model, versions, agreement...

    def to_json(self) -> str:
        return json.dumps(
            {
                "record_version": RECORD_VERSION,
                "preprocess": self.preprocess.to_dict() if self.preprocess else None,
                "labels": self.labels,
                **self.extra,
            },
            indent=2,
        )

    @classmethod
    def from_json(cls, text: str | bytes, source: str = "record") -> ModelRecord:
        d = parse_json(text, f"{source}: edgekit record", RECORD_HINT)
        if not isinstance(d, dict):
            raise InputError(f"{source}: edgekit record is not valid JSON (not a JSON object)", RECORD_HINT)
        spec = d.pop("preprocess", None)
        labels = d.pop("labels", None)
        d.pop("record_version", None)
        if labels is not None and not (isinstance(labels, list) and all(isinstance(x, str) for x in labels)):
            raise InputError(f"{source}: edgekit record has malformed labels", RECORD_HINT)
        try:
            return cls(PreprocessSpec.read(spec) if spec else None, labels, d)
        except InputError as exc:
            raise InputError(f"{source}: {exc.message}", exc.hint or RECORD_HINT) from None


def sidecar_path(model_path: str | os.PathLike) -> Path:
    p = Path(model_path)
    return p.with_name(p.stem + SIDECAR_SUFFIX)


def cpu_model_path(model_path: str | os.PathLike) -> Path:
    """``x_edgetpu.tflite`` → ``x.tflite`` (the CPU model the compiler started from).

    (edgekit.board.backends.cpu_twin is its twin in the runtime core, which this shared module sits
    below: tests/test_structure.py checks they agree.)
    """
    p = Path(model_path)
    return p.with_name(p.stem[: -len("_edgetpu")] + p.suffix) if p.stem.endswith("_edgetpu") else p


def find_record(model_path: str | os.PathLike, metadata: dict[str, bytes]) -> tuple[ModelRecord, str] | None:
    """The record for a model and where it came from: its metadata, its sidecar, or its CPU twin's sidecar."""
    if METADATA_NAME in metadata:
        return ModelRecord.from_json(metadata[METADATA_NAME], f"{model_path} metadata"), "model metadata"
    for candidate in dict.fromkeys([sidecar_path(model_path), sidecar_path(cpu_model_path(model_path))]):
        if candidate.is_file():  # a regular file (is_file follows no FIFO or device)
            return ModelRecord.from_json(candidate.read_bytes(), str(candidate)), str(candidate)
    return None
