"""Add a named metadata entry to a .tflite flatbuffer (how edgekit stores its record inside a model).

Uses the object API of TensorFlow Lite's generated schema (shipped by TensorFlow and by
ai-edge-litert) with ``flatbuffers``: unpack, append a buffer and a ``Metadata`` entry, pack again.
An entry of the same name is replaced. Read it back with ``edgekit.tflite.model`` (``.metadata``).
"""

from __future__ import annotations

from typing import Any

FILE_IDENTIFIER = b"TFL3"


def metadata_schema() -> Any:
    try:
        from ai_edge_litert import schema_py_generated as schema
    except ImportError:  # pragma: no cover - TensorFlow ships the same module
        from tensorflow.lite.python import schema_py_generated as schema
    return schema


def _name(entry: Any) -> str:
    n = entry.name
    return n.decode() if isinstance(n, bytes) else str(n)


def set_metadata(model: bytes, name: str, data: bytes) -> bytes:
    """``model`` with metadata entry ``name`` set to ``data`` (replacing an existing one)."""
    import flatbuffers
    import numpy as np

    schema = metadata_schema()
    m = schema.ModelT.InitFromPackedBuf(bytearray(model), 0)
    m.buffers = list(m.buffers or [])
    m.metadata = list(m.metadata or [])
    entry = next((e for e in m.metadata if _name(e) == name), None)
    if entry is None:  # a new buffer and entry; an existing entry's buffer is reused, not left behind
        m.buffers.append(schema.BufferT())
        entry = schema.MetadataT()
        entry.name = name
        entry.buffer = len(m.buffers) - 1
        m.metadata.append(entry)
    m.buffers[entry.buffer].data = np.frombuffer(data, dtype=np.uint8)
    builder = flatbuffers.Builder(len(model) + len(data) + 1024)
    builder.Finish(m.Pack(builder), file_identifier=FILE_IDENTIFIER)
    return bytes(builder.Output())
