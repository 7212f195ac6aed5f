"""What the Edge TPU compiler wrote inside a compiled model: the package in each ``edgetpu-custom-op``.

The custom op's options hold a DarwiNN package (flatbuffer identifier ``DWN1``, schema
``executable/executable.fbs`` of google-coral/libedgetpu): ``Package`` → ``serialized_multi_executable``
(a ``MultiExecutable``) → ``serialized_executables``, each an ``Executable`` flatbuffer. A compiler
that caches parameters on the chip writes two executables per Edge TPU subgraph: PARAMETER_CACHING,
whose ``parameters`` are the parameter data cached on the chip, and EXECUTION_ONLY, whose
``parameters`` are streamed for every inference ("Off-chip memory used for streaming uncached model
parameters"); older ones wrote one STAND_ALONE executable. The compiler's printed "On-chip memory
used for caching model parameters" counts the data as laid out on the chip, which is larger: 3.86
MiB printed for 2.99 MiB of cached parameters in the one public pair whose compile output was
published (ledger pair mathieugalle/edgetpu-compiler-pad-fail; tests/converters/test_evidence.py).
Some compilers also stored an ``estimated_cycles`` count.

Read with :mod:`edgekit.tflite.model`'s bounds-checked reader: a damaged package is reported as
unreadable (its ``error``), never an exception, and nothing here imports TensorFlow.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from edgekit.board.flatbuffer import Reader
from edgekit.errors import InvalidModelError
from edgekit.results.inspect import EdgeTpuSummary, ExecutableSummary, PackageSummary

IDENTIFIER = b"DWN1"
EXECUTABLE_TYPES = {0: "stand_alone", 1: "parameter_caching", 2: "execution_only"}

# Slots in executable.fbs (field order).
_PACKAGE_MIN_RUNTIME, _PACKAGE_MULTI_EXECUTABLE, _PACKAGE_COMPILER_VERSION = 0, 1, 4
_EXE_PARAMETERS, _EXE_CHIP, _EXE_CYCLES, _EXE_TYPE, _EXE_TOKEN, _EXE_CYCLES_64 = 6, 10, 11, 13, 14, 16


@dataclass(frozen=True)
class Executable:
    type: str  # stand_alone | parameter_caching | execution_only (or type_N)
    parameter_bytes: int
    estimated_cycles: int | None  # None where the compiler stored none
    chip: str | None
    caching_token: int

    def summary(self) -> ExecutableSummary:
        return ExecutableSummary(self.type, self.parameter_bytes, self.estimated_cycles, self.chip)


@dataclass(frozen=True)
class Package:
    """One Edge TPU subgraph: the package of one ``edgetpu-custom-op``."""

    subgraph: int
    op: int
    min_runtime_version: int | None = None
    compiler_version: str | None = None
    executables: tuple[Executable, ...] = ()
    error: str | None = None  # why the package could not be read (the rest of the model still can)

    @property
    def cached_parameter_bytes(self) -> int:
        return sum(e.parameter_bytes for e in self.executables if e.type == "parameter_caching")

    @property
    def streamed_parameter_bytes(self) -> int:
        return sum(e.parameter_bytes for e in self.executables if e.type != "parameter_caching")

    @property
    def estimated_cycles(self) -> int | None:
        cycles = [e.estimated_cycles for e in self.executables if e.estimated_cycles]
        return sum(cycles) if cycles else None

    def summary(self) -> PackageSummary:
        return PackageSummary(
            self.subgraph,
            self.op,
            self.min_runtime_version,
            self.compiler_version,
            self.cached_parameter_bytes,
            self.streamed_parameter_bytes,
            self.estimated_cycles,
            tuple(e.summary() for e in self.executables),
            self.error,
        )


def read(options: Any, subgraph: int = 0, op: int = 0) -> Package:
    """The package in one custom op's options bytes (an unreadable one carries its ``error``)."""
    at = bytes(options).find(IDENTIFIER)
    if at < 4:
        return Package(subgraph, op, error="no DWN1 package in the custom op's options")
    try:
        r = Reader(options)
        package = r.table(r.deref(at - 4, "package root"), "package")
        start, n = package.raw_vector(_PACKAGE_MULTI_EXECUTABLE, 1, "serialized multi-executable")
        executables: list[Executable] = []
        if n:
            inner = Reader(memoryview(options)[start : start + n])
            multi = inner.table(inner.deref(0, "multi-executable root"), "multi-executable")
            vec, count = multi.raw_vector(0, 4, "serialized executables")
            for i in range(count):
                s, size = inner.vector(inner.deref(vec + 4 * i, f"executable {i}"), 1, f"executable {i}")
                er = Reader(inner.buf[s : s + size])
                exe = er.table(er.deref(0, f"executable {i} root"), f"executable {i}")
                kind = exe.scalar(_EXE_TYPE, "h", 0)
                cycles = exe.scalar(_EXE_CYCLES_64, "q", 0) or exe.scalar(_EXE_CYCLES, "i", 0)
                executables.append(
                    Executable(
                        EXECUTABLE_TYPES.get(kind, f"type_{kind}"),
                        exe.raw_vector(_EXE_PARAMETERS, 1, "parameters")[1],
                        cycles if cycles > 0 else None,
                        exe.string(_EXE_CHIP, "chip"),
                        exe.scalar(_EXE_TOKEN, "Q", 0),
                    )
                )
        version = package.string(_PACKAGE_COMPILER_VERSION, "compiler version")
        return Package(
            subgraph,
            op,
            package.scalar(_PACKAGE_MIN_RUNTIME, "i", 0) or None,
            version if version and version.strip("cl/ ") else None,
            tuple(executables),
        )
    except (InvalidModelError, ValueError) as exc:
        return Package(subgraph, op, error=f"unreadable package: {exc}")


def summary(packages: list[Package]) -> EdgeTpuSummary | None:
    """What ``inspect --json`` and ``check --json`` say of a compiled model's Edge TPU side (None: not compiled)."""
    if not packages:
        return None
    readable = [p for p in packages if p.error is None]
    cycles = [p.estimated_cycles for p in readable if p.estimated_cycles]
    runtimes = [p.min_runtime_version for p in readable if p.min_runtime_version]
    return EdgeTpuSummary(
        len(packages),
        sum(len(p.executables) for p in readable),
        sum(p.cached_parameter_bytes for p in readable),
        sum(p.streamed_parameter_bytes for p in readable),
        sum(cycles) if cycles else None,
        max(runtimes) if runtimes else None,
        len(packages) - len(readable),
        tuple(p.summary() for p in packages),
    )
