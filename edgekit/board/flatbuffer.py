"""A bounds-checked reader of flatbuffer tables, vectors and strings in one byte buffer.

Shared by :mod:`edgekit.tflite.model` (the TFLite schema) and :mod:`edgekit.tflite.edgetpu_package` (the
package the Edge TPU compiler writes in each custom op): every offset, vector length and string is
checked against the buffer before it is followed, and a violation raises
:class:`~edgekit.errors.InvalidModelError`.
"""

from __future__ import annotations

import struct
from typing import Any

from edgekit.errors import InvalidModelError

ITEM_SIZE = {"?": 1, "b": 1, "B": 1, "h": 2, "H": 2, "i": 4, "I": 4, "q": 8, "Q": 8, "f": 4, "d": 8}


class Reader:
    """Bounds-checked access to flatbuffer tables, vectors and strings in one byte buffer."""

    def __init__(self, buf: Any):
        self.buf = buf
        self.size = len(buf)

    def _check(self, pos: int, n: int, what: str) -> None:
        if pos < 0 or n < 0 or pos + n > self.size:
            raise InvalidModelError(f"{what} at offset {pos} (+{n} bytes) lies outside the file ({self.size} bytes)")

    def scalar(self, fmt: str, pos: int, what: str = "value") -> Any:
        self._check(pos, ITEM_SIZE[fmt], what)
        return struct.unpack_from("<" + fmt, self.buf, pos)[0]

    def deref(self, pos: int, what: str) -> int:
        """Follow the uoffset stored at ``pos``."""
        target = pos + self.scalar("I", pos, what)
        self._check(target, 4, what)
        return target

    def table(self, pos: int, what: str) -> Table:
        self._check(pos, 4, what)
        vtable = pos - self.scalar("i", pos, what)
        self._check(vtable, 4, f"{what} vtable")
        vt_size = self.scalar("H", vtable, f"{what} vtable")
        if vt_size < 4 or vt_size % 2:
            raise InvalidModelError(f"{what} has a malformed vtable (size {vt_size})")
        self._check(vtable, vt_size, f"{what} vtable")
        return Table(self, pos, vtable, vt_size, what)

    def vector(self, pos: int, item_size: int, what: str) -> tuple[int, int]:
        """(start, length) of the vector at ``pos``, its whole extent checked."""
        length = self.scalar("I", pos, f"{what} length")
        self._check(pos + 4, length * item_size, what)
        return pos + 4, length


class Table:
    __slots__ = ("r", "pos", "vtable", "vt_size", "what")

    def __init__(self, r: Reader, pos: int, vtable: int, vt_size: int, what: str):
        self.r, self.pos, self.vtable, self.vt_size, self.what = r, pos, vtable, vt_size, what

    def _field(self, slot: int) -> int:
        entry = 4 + 2 * slot
        if entry >= self.vt_size:
            return 0
        off = self.r.scalar("H", self.vtable + entry)
        return self.pos + off if off else 0

    def scalar(self, slot: int, fmt: str, default: Any = 0) -> Any:
        p = self._field(slot)
        return self.r.scalar(fmt, p, self.what) if p else default

    def table(self, slot: int, what: str) -> Table | None:
        p = self._field(slot)
        return self.r.table(self.r.deref(p, what), what) if p else None

    def string(self, slot: int, what: str) -> str | None:
        p = self._field(slot)
        if not p:
            return None
        start, n = self.r.vector(self.r.deref(p, what), 1, what)
        return bytes(self.r.buf[start : start + n]).decode("utf-8", errors="replace")

    def raw_vector(self, slot: int, item_size: int, what: str) -> tuple[int, int]:
        p = self._field(slot)
        if not p:
            return 0, 0
        return self.r.vector(self.r.deref(p, what), item_size, what)

    def scalars(self, slot: int, fmt: str, what: str) -> tuple:
        start, n = self.raw_vector(slot, ITEM_SIZE[fmt], what)
        return struct.unpack_from(f"<{n}{fmt}", self.r.buf, start) if n else ()

    def tables(self, slot: int, what: str) -> list[Table]:
        start, n = self.raw_vector(slot, 4, what)
        return [self.r.table(self.r.deref(start + 4 * i, what), f"{what}[{i}]") for i in range(n)]
