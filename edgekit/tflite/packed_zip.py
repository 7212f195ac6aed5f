"""The small files a model carries in a ZIP appended after its flatbuffer, read with caps (no zipfile).

Ultralytics' TFLite exports pack ``metadata.json`` that way, TFLite metadata its label maps. A model is
what strangers send, so only the members a caller names are read, and every size is capped before
anything is allocated: the end-of-directory record is looked for in the last 64 KiB + 22 bytes, at most
:data:`MAX_ENTRIES` directory entries in at most :data:`MAX_DIRECTORY` bytes are read, a member over
:data:`MAX_MEMBER` bytes (stored, or once inflated) is skipped, and ZIP64, split, encrypted or otherwise
compressed archives count as none. Whatever was left unread is said in ``skipped`` (one line), never raised.
Shared by detection's layout reader and ``cut`` (host; no TensorFlow).
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import IO

MAX_ENTRIES = 64
MAX_DIRECTORY = 64 << 10
MAX_MEMBER = 1 << 20
_EOCD, _CENTRAL, _LOCAL = b"PK\x05\x06", b"PK\x01\x02", b"PK\x03\x04"
_EOCD_SIZE, _CENTRAL_SIZE, _LOCAL_SIZE = 22, 46, 30
_ZIP64 = (0xFFFF, 0xFFFFFFFF)


@dataclass
class Packed:
    """The members read ({name: bytes}), every name the directory listed (up to the caps), and one line on
    what was not read (None when nothing was left out)."""

    files: dict[str, bytes] = field(default_factory=dict)
    names: list[str] = field(default_factory=list)
    skipped: str | None = None


@dataclass(frozen=True)
class _Entry:
    name: str
    flags: int
    method: int
    crc: int
    compressed: int
    size: int
    local: int


def read_packed(source: str | os.PathLike[str] | bytes, want: Callable[[Sequence[str]], Sequence[str]]) -> Packed:
    """The members ``want`` picks (given every listed name) of the ZIP appended to ``source`` (a path, or a
    model's bytes); an empty :class:`Packed` when there is none or the file cannot be read."""
    try:
        if isinstance(source, (bytes, bytearray)):
            import io

            return _read(io.BytesIO(source), len(source), want)
        with open(source, "rb") as f:
            return _read(f, os.fstat(f.fileno()).st_size, want)
    except OSError:
        return Packed()


def _read(f: IO[bytes], size: int, want: Callable[[Sequence[str]], Sequence[str]]) -> Packed:
    found = _directory(f, size)
    if isinstance(found, str):
        return Packed(skipped=found)
    if found is None:
        return Packed()
    entries, skipped = found
    out = Packed(names=[e.name for e in entries], skipped=skipped)
    chosen = set(want(out.names))
    for e in entries:
        if e.name in chosen and e.name not in out.files:
            content = _member(f, e)
            if isinstance(content, str):
                out.skipped = "; ".join(s for s in (out.skipped, content) if s)
            else:
                out.files[e.name] = content
    return out


def _directory(f: IO[bytes], size: int) -> None | str | tuple[list[_Entry], str | None]:
    """The directory's first entries (and a line on those left unread); None without a ZIP; a line when the
    archive is one edgekit does not read."""
    tail_len = min(size, _EOCD_SIZE + 0xFFFF)
    f.seek(size - tail_len)
    tail = f.read(tail_len)
    at = tail.rfind(_EOCD)
    if at < 0 or len(tail) - at < _EOCD_SIZE:
        return None
    disk, cd_disk, n_disk, n_total, cd_size, cd_offset, comment = struct.unpack_from("<HHHHIIH", tail, at + 4)
    if at + _EOCD_SIZE + comment != len(tail):  # the record and its comment end the file, or it is no archive
        return None
    if n_total in _ZIP64 or cd_size in _ZIP64 or cd_offset in _ZIP64 or disk or cd_disk or n_disk != n_total:
        return "a ZIP64 or split archive, not read"
    cd_start = size - tail_len + at - cd_size
    prefix = cd_start - cd_offset  # the model's own bytes before the archive
    if cd_start < 0 or prefix < 0:
        return None
    f.seek(cd_start)
    raw = f.read(min(cd_size, MAX_DIRECTORY))
    entries: list[_Entry] = []
    pos = 0
    while len(entries) < min(n_total, MAX_ENTRIES) and pos + _CENTRAL_SIZE <= len(raw):
        (sig, _, _, flags, method, _, _, crc, csize, usize, n_name, n_extra, n_comment, _, _, _, local) = (
            struct.unpack_from("<4sHHHHHHIIIHHHHHII", raw, pos)
        )
        end = pos + _CENTRAL_SIZE + n_name
        if sig != _CENTRAL or end > len(raw):
            break
        name = raw[pos + _CENTRAL_SIZE : end].decode("utf-8" if flags & 0x800 else "cp437", "replace")
        entries.append(_Entry(name, flags, method, crc, csize, usize, prefix + local))
        pos = end + n_extra + n_comment
    if not entries:  # the bytes only looked like an end record: no archive
        return None
    left = n_total - len(entries)
    return entries, (
        f"{left} of its {n_total} entries not read (edgekit reads at most {MAX_ENTRIES} in {MAX_DIRECTORY >> 10} KiB)"
        if left > 0
        else None
    )


def _member(f: IO[bytes], e: _Entry) -> bytes | str:
    """One member's bytes, or a line saying why it was not read."""
    why = f"{e.name}: "
    if e.flags & 1 or e.method not in (0, 8):
        return why + f"encrypted or compressed with method {e.method}, not read"
    if e.size > MAX_MEMBER or e.compressed > MAX_MEMBER + 1024:
        return why + f"over {MAX_MEMBER >> 20} MiB, not read"
    f.seek(e.local)
    head = f.read(_LOCAL_SIZE)
    if len(head) < _LOCAL_SIZE or head[:4] != _LOCAL:
        return why + "damaged, not read"
    n_name, n_extra = struct.unpack_from("<HH", head, 26)
    f.seek(e.local + _LOCAL_SIZE + n_name + n_extra)
    data = f.read(e.compressed)
    if e.method == 8:
        try:
            inflater = zlib.decompressobj(-15)
            data = inflater.decompress(data, MAX_MEMBER + 1)
        except zlib.error:
            return why + "damaged, not read"
    if len(data) != e.size or zlib.crc32(data) & 0xFFFFFFFF != e.crc:
        return why + "damaged (size or CRC differ from the directory), not read"
    return data


# ------------------------------------------------------------------- the files edgekit reads of a packed ZIP
def packed_files(model: str | os.PathLike | bytes) -> Packed:
    """The small files packed after a model's flatbuffer (a path, or its bytes) as a ZIP that edgekit reads
    (Ultralytics' metadata.json, TFLite metadata's label map): only those, with this module's caps
    on the number and size of what is read."""
    return read_packed(model, _members_read)


def _members_read(names: Sequence[str]) -> list[str]:
    texts = [n for n in names if n.lower().endswith(".txt")]
    return ["metadata.json", "labelmap.txt", "labels.txt"] + (texts if len(texts) == 1 else [])


def appended_zip(model: str | os.PathLike | bytes) -> dict[str, bytes]:
    """{name: bytes} of :func:`packed_files`; {} when there is none."""
    return packed_files(model).files


@dataclass(frozen=True)
class UltralyticsMetadata:
    """What edgekit reads of Ultralytics' ``metadata.json``: the task, the version that exported the model, and the
    class names (None unless they are a list, or a {index: name} map over 0..n-1)."""

    task: str | None
    version: str
    names: tuple[str, ...] | None


def ultralytics_metadata(files: dict[str, bytes]) -> UltralyticsMetadata | None:
    """Ultralytics' ``metadata.json`` among the packed files, read; None without it or when it is no JSON object."""
    raw = files.get("metadata.json")
    if raw is None:
        return None
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):  # a deeply nested document: no metadata
        return None
    if not isinstance(doc, dict):
        return None
    task = doc.get("task")
    return UltralyticsMetadata(
        None if task is None else str(task), str(doc.get("version", "?")), _ultralytics_names(doc.get("names"))
    )


def ultralytics_names(meta: UltralyticsMetadata) -> tuple[str, ...] | None:
    return meta.names


def _ultralytics_names(names: object) -> tuple[str, ...] | None:
    """``names`` as the JSON holds it: a list, or a map of class index (as a string) to name."""
    if isinstance(names, dict):
        try:
            ordered = sorted((int(k), str(v)) for k, v in names.items())
        except (TypeError, ValueError):
            return None
        if [k for k, _ in ordered] == list(range(len(ordered))):
            return tuple(v for _, v in ordered)
        return None
    if isinstance(names, list):
        return tuple(str(v) for v in names)
    return None
