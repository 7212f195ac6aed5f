"""What the exporter wrote into a .tflite besides the graph, for ``edgekit inspect``.

Three sources, each read without running anything from the file:
- Ultralytics' ``metadata.json``, packed after the flatbuffer as a ZIP (read by
  :func:`edgekit.tflite.packed_zip.appended_zip`, the one reader of packed files: its caps apply here too;
  names, task and version as :func:`edgekit.tflite.packed_zip.ultralytics_metadata` reads them for ``detect``);
- TFLite metadata (``TFLITE_METADATA``, a ``ModelMetadata`` flatbuffer: Model Maker, MediaPipe, the metadata
  writers): its name, description, version, author and license;
- edgekit's own record (:func:`edgekit.tflite.model_record.find_record`): where it was found and what it holds;
- the converter: the flatbuffer's description and ``CONVERSION_METADATA``'s TensorFlow version.
A part that is absent is None; one that cannot be read says so in its ``error`` (inspect never fails on it).
"""

from __future__ import annotations

import json
import os
from typing import Any

from edgekit.results.inspect import (
    ConverterInfo,
    EdgekitRecordInfo,
    ExporterMetadata,
    TfliteMetadataInfo,
    UltralyticsExport,
)

TFLITE_METADATA_FIELDS = ((0, "name"), (1, "description"), (2, "version"), (4, "author"), (5, "license"))


def exporter_metadata(path: str | os.PathLike, info: Any) -> ExporterMetadata:
    """The three parts for the model at ``path`` (``info``: its :class:`edgekit.tflite.model.ModelInfo`)."""
    return ExporterMetadata(ultralytics(path), tflite_metadata(info), edgekit(path, info), converter(info))


def _of(value: Any, kind: type) -> Any:
    """``value`` when it is a ``kind`` (a bool is no int), else None: the file is untrusted."""
    return value if isinstance(value, kind) and not (kind is int and isinstance(value, bool)) else None


def ultralytics(path: str | os.PathLike) -> UltralyticsExport | None:
    from edgekit.tflite.packed_zip import appended_zip, ultralytics_metadata

    files = appended_zip(path)  # one call: the packed-file reader is swapped in one place
    if "metadata.json" not in files:
        return None
    try:
        doc = json.loads(files["metadata.json"].decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        doc = None
    meta = ultralytics_metadata(files)
    if meta is None or not isinstance(doc, dict):
        return UltralyticsExport(error="metadata.json is not a JSON object")
    imgsz = doc.get("imgsz")
    imgsz = tuple(imgsz) if isinstance(imgsz, list) and all(_of(v, int) is not None for v in imgsz) else None
    return UltralyticsExport(
        meta.task,
        _of(doc.get("version"), str),
        meta.names,
        imgsz,
        _of(doc.get("stride"), int),
        _of(doc.get("batch"), int),
        _of(doc.get("channels"), int),
        _of(doc.get("end2end"), bool),
        *(_of(doc.get(k), str) for k in ("description", "author", "date", "license")),
    )


def converter(info: Any) -> ConverterInfo | None:
    """The flatbuffer's description and ``CONVERSION_METADATA``'s environment (TensorFlow version, API version)."""
    raw = info.metadata.get("CONVERSION_METADATA")
    tf = api = None
    if raw:
        from edgekit.board.flatbuffer import Reader

        try:  # table ConversionMetadata { environment: Environment { tensorflow_version: string; api_version: uint } }
            r = Reader(raw)
            env = r.table(r.deref(0, "conversion metadata root"), "conversion metadata").table(0, "environment")
            tf, api = (
                (env.string(0, "tensorflow version"), int(env.scalar(1, "I"))) if env is not None else (None, None)
            )  # no environment table: nothing to say
        except Exception:  # damaged optional metadata: the description still stands
            tf = api = None
    if info.description is None and tf is None:
        return None
    return ConverterInfo(info.description, tf, api or None)


def tflite_metadata(info: Any) -> TfliteMetadataInfo | None:
    raw = info.metadata.get("TFLITE_METADATA")
    if not raw:
        return None
    from edgekit.board.flatbuffer import Reader

    try:
        r = Reader(raw)
        root = r.table(r.deref(0, "metadata root"), "model metadata")
        return TfliteMetadataInfo(*(root.string(slot, "model metadata " + key) for slot, key in TFLITE_METADATA_FIELDS))
    except Exception:  # damaged optional metadata: said, inspect goes on
        return TfliteMetadataInfo(error="TFLITE_METADATA cannot be read")


def edgekit(path: str | os.PathLike, info: Any) -> EdgekitRecordInfo | None:
    from edgekit.errors import InputError
    from edgekit.tflite.model_record import find_record

    try:
        found = find_record(path, info.metadata)
    except InputError as exc:  # a damaged record: inspect says so, classify would refuse it
        return EdgekitRecordInfo(error=exc.message)
    except OSError as exc:  # a sidecar that cannot be read
        return EdgekitRecordInfo(error=f"cannot read the record ({exc.strerror or exc})")
    if found is None:
        return None
    record, source = found
    return EdgekitRecordInfo(
        source,
        record.preprocess.to_dict() if record.preprocess else None,
        len(record.labels) if record.labels is not None else None,
        record.extra,
    )
