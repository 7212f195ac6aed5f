"""The op-version ceiling of ``edgetpu_compiler`` 16: which builtin op versions it can parse.

Provenance
----------
``edgetpu_compiler`` 16.0.384591198 (June 2021, the last release) embeds TensorFlow Lite 2.5: every
op version reported as rejected by it (CONV_2D v6, EXP v2, QUANTIZE v3, TRANSPOSE_CONV v4,
FULLY_CONNECTED v12; google-coral/edgetpu #631, #845, #879, #862, google-coral/libedgetpu#71)
first appeared in a TensorFlow release after 2.5.0. The compiler reads a model with TFLite's
``InterpreterBuilder`` and its ``BuiltinOpResolver``; an op version the resolver has no
registration for makes it refuse the whole model::

    ERROR: Didn't find op for builtin opcode 'CONV_2D' version '6'. An older version of this
    builtin might be supported. Are you using an old TFLite binary with a newer model?

So the ceiling is the parser's own table: :data:`REGISTERED`, the ``AddBuiltin(op, kernel,
min_version, max_version)`` calls of ``tensorflow/lite/kernels/register.cc`` at tag v2.5.0
(:data:`REGISTERED_SOURCE` says where it was read), one entry per builtin op, ``AddBuiltin``
without versions registering version 1 only. Where a compile we hold shows the compiler parsing
more (or less) than those registrations, the evidence wins: :data:`PARSE_OVERRIDES`, each with its
evidence, listed in docs/edgetpu-compatibility.md; ``tests/converters/test_op_versions.py`` proves
the ceiling equals the registrations except there, and that no pair of the evidence ledger the
compiler compiled is predicted unparseable.

TensorFlow also records, for every (op, version), the first release whose runtime executes it, in
``tensorflow/lite/tools/versioning/runtime_version.cc``; :data:`FIRST_RELEASE` is that map
(transcribed at commit f3ddd831d6e108d9a79f7bc37ce9439f91b58d7b, TensorFlow ~2.13). It names the
release a refused version needs, and it agrees with the registrations on every op (the test
checks that too): a version it gives as 2.5.0 or earlier is registered, a later one is not.

How sure a refusal is
---------------------
Versions first released after 2.6.0 are refused for sure (the reports above, all 2.7.0 or later).
Versions first released in 2.6.0 itself (:data:`UNSURE_RELEASES`) are refused by the v2.5.0
registrations, but compiler 16 was built in June 2021, after the 2.6 development line had added
them, and no compile we hold shows one either way: check reports such a version as an uncertain
problem and, as its best guess, judges the model as parsed (a wrong "cannot parse" tells a user to
give up on a model that compiles).

Only a CPU model proves what the compiler parsed: in its output, the compiler writes every op it
leaves on the CPU as version 1 (testdata pair coral_wifi_webserver__yolov8n_full_integer_quant: ADD v2,
CONV_2D v3 and MUL v2 in the CPU model, all v1 in the compiled one), so a compiled file alone cannot
show a version beyond the registrations.

Parsing is not mapping: a version the compiler parses may still be left on the CPU (e.g.
FULLY_CONNECTED with ``keep_num_dims``, v5 and up, stays on the CPU: "unspecified limitation" in
compiler-16 logs). That is
:mod:`edgekit.edgetpu.compatibility`'s business, not this module's.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

COMPILER_VERSION = "16.0.384591198"
COMPILER_TFLITE = "2.5.0"
SOURCE = (
    "tensorflow/tensorflow tensorflow/lite/tools/versioning/runtime_version.cc "
    "@ f3ddd831d6e108d9a79f7bc37ce9439f91b58d7b"
)
#: Where :data:`REGISTERED` was read. tensorflow/tensorflow's own v2.5.0 tag is not among the stored
#: snapshots; barbolo/tflite_runtime_build builds tflite_runtime 2.5.0 from ``git clone -b v2.5.0`` and
#: keeps the file with three MediaPipe ``AddCustom`` lines added (custom ops: no builtin changes).
REGISTERED_SOURCE = (
    "tensorflow/tensorflow tensorflow/lite/kernels/register.cc @ v2.5.0, as kept in "
    "barbolo/tflite_runtime_build tensorflow/lite/kernels/register.cc "
    "@ d9597285d1091c6c0a2b7dd546ca0f8d5a66c582"
)

#: ``BuiltinOpResolver``'s registrations at v2.5.0: op -> (min_version, max_version).
REGISTERED: dict[str, tuple[int, int]] = {
    "ABS": (1, 3),
    "HARD_SWISH": (1, 1),
    "RELU": (1, 3),
    "RELU_N1_TO_1": (1, 1),
    "RELU6": (1, 3),
    "TANH": (1, 3),
    "LOGISTIC": (1, 3),
    "AVERAGE_POOL_2D": (1, 3),
    "MAX_POOL_2D": (1, 3),
    "L2_POOL_2D": (1, 1),
    "CONV_2D": (1, 5),
    "DEPTHWISE_CONV_2D": (1, 6),
    "SVDF": (1, 4),
    "RNN": (1, 3),
    "BIDIRECTIONAL_SEQUENCE_RNN": (1, 3),
    "UNIDIRECTIONAL_SEQUENCE_RNN": (1, 3),
    "EMBEDDING_LOOKUP": (1, 3),
    "EMBEDDING_LOOKUP_SPARSE": (1, 1),
    "FULLY_CONNECTED": (1, 9),
    "LSH_PROJECTION": (1, 1),
    "HASHTABLE_LOOKUP": (1, 1),
    "SOFTMAX": (1, 3),
    "CONCATENATION": (1, 3),
    "ADD": (1, 3),
    "SPACE_TO_BATCH_ND": (1, 3),
    "BATCH_TO_SPACE_ND": (1, 3),
    "MUL": (1, 4),
    "L2_NORMALIZATION": (1, 2),
    "LOCAL_RESPONSE_NORMALIZATION": (1, 1),
    "LSTM": (1, 4),
    "BIDIRECTIONAL_SEQUENCE_LSTM": (1, 3),
    "UNIDIRECTIONAL_SEQUENCE_LSTM": (1, 3),
    "PAD": (1, 3),
    "PADV2": (1, 3),
    "RESHAPE": (1, 1),
    "RESIZE_BILINEAR": (1, 4),
    "RESIZE_NEAREST_NEIGHBOR": (1, 4),
    "SKIP_GRAM": (1, 1),
    "SPACE_TO_DEPTH": (1, 2),
    "DEPTH_TO_SPACE": (1, 2),
    "GATHER": (1, 5),
    "TRANSPOSE": (1, 5),
    "MEAN": (1, 3),
    "DIV": (1, 2),
    "SUB": (1, 5),
    "SPLIT": (1, 4),
    "SPLIT_V": (1, 2),
    "SQUEEZE": (1, 2),
    "STRIDED_SLICE": (1, 5),
    "EXP": (1, 1),
    "TOPK_V2": (1, 2),
    "LOG": (1, 1),
    "LOG_SOFTMAX": (1, 2),
    "CAST": (1, 1),
    "DEQUANTIZE": (1, 4),
    "PRELU": (1, 1),
    "MAXIMUM": (1, 4),
    "MINIMUM": (1, 4),
    "ARG_MAX": (1, 2),
    "ARG_MIN": (1, 2),
    "GREATER": (1, 2),
    "GREATER_EQUAL": (1, 2),
    "LESS": (1, 2),
    "LESS_EQUAL": (1, 2),
    "FLOOR": (1, 1),
    "CEIL": (1, 1),
    "ROUND": (1, 1),
    "NEG": (1, 1),
    "SELECT": (1, 2),
    "SELECT_V2": (1, 1),
    "SLICE": (1, 5),
    "SIN": (1, 1),
    "COS": (1, 1),
    "TRANSPOSE_CONV": (1, 3),
    "TILE": (1, 2),
    "SUM": (1, 2),
    "REDUCE_PROD": (1, 1),
    "REDUCE_MAX": (1, 3),
    "REDUCE_MIN": (1, 3),
    "REDUCE_ANY": (1, 1),
    "EXPAND_DIMS": (1, 1),
    "SPARSE_TO_DENSE": (1, 3),
    "EQUAL": (1, 3),
    "NOT_EQUAL": (1, 3),
    "SQRT": (1, 1),
    "RSQRT": (1, 2),
    "SHAPE": (1, 1),
    "RANK": (1, 1),
    "POW": (1, 1),
    "FAKE_QUANT": (1, 2),
    "PACK": (1, 3),
    "ONE_HOT": (1, 1),
    "LOGICAL_OR": (1, 1),
    "LOGICAL_AND": (1, 1),
    "LOGICAL_NOT": (1, 1),
    "UNPACK": (1, 4),
    "FLOOR_DIV": (1, 2),
    "SQUARE": (1, 1),
    "ZEROS_LIKE": (1, 1),
    "FLOOR_MOD": (1, 1),
    "RANGE": (1, 1),
    "LEAKY_RELU": (1, 2),
    "SQUARED_DIFFERENCE": (1, 2),
    "FILL": (1, 3),
    "MIRROR_PAD": (1, 2),
    "UNIQUE": (1, 1),
    "REVERSE_V2": (1, 3),
    "ADD_N": (1, 1),
    "GATHER_ND": (1, 3),
    "WHERE": (1, 1),
    "ELU": (1, 1),
    "REVERSE_SEQUENCE": (1, 1),
    "MATRIX_DIAG": (1, 1),
    "QUANTIZE": (1, 2),
    "MATRIX_SET_DIAG": (1, 1),
    "IF": (1, 1),
    "WHILE": (1, 1),
    "NON_MAX_SUPPRESSION_V4": (1, 1),
    "NON_MAX_SUPPRESSION_V5": (1, 1),
    "SCATTER_ND": (1, 1),
    "DENSIFY": (1, 1),
    "SEGMENT_SUM": (1, 1),
    "BATCH_MATMUL": (1, 4),
    "CUMSUM": (1, 1),
    "BROADCAST_TO": (2, 3),
    "CALL_ONCE": (1, 1),
    "RFFT2D": (1, 1),
    "CONV_3D": (1, 1),
    "IMAG": (1, 1),
    "REAL": (1, 1),
    "COMPLEX_ABS": (1, 1),
    "HASHTABLE": (1, 1),
    "HASHTABLE_FIND": (1, 1),
    "HASHTABLE_IMPORT": (1, 1),
    "HASHTABLE_SIZE": (1, 1),
}


@dataclass(frozen=True)
class ParseOverride:
    """Evidence that compiler 16 parses versions of an op up to ``max_version``, unlike the registrations."""

    max_version: int
    evidence: tuple[str, ...]  # references as in edgekit.edgetpu.compatibility (pair:, log:, report:)
    why: str


#: Evidence against the registrations (none so far: every compiled pair we hold is within them).
PARSE_OVERRIDES: dict[str, ParseOverride] = {}

#: op -> (lowest, highest) version compiler 16 parses: the registrations, overridden by evidence.
CEILING: dict[str, tuple[int, int]] = {
    op: (lo, PARSE_OVERRIDES[op].max_version if op in PARSE_OVERRIDES else hi) for op, (lo, hi) in REGISTERED.items()
} | {op: (1, o.max_version) for op, o in PARSE_OVERRIDES.items() if op not in REGISTERED}

#: Releases whose new versions compiler 16 may have parsed after all (see the module docstring).
UNSURE_RELEASES = frozenset({"2.6.0"})

# op -> first TensorFlow Lite release for versions 1, 2, ... (None: no such version in the map).
_RELEASES: dict[str, tuple[str | None, ...]] = {
    "AVERAGE_POOL_2D": ("1.5.0", "1.14.0", "2.3.0"),
    "BATCH_MATMUL": ("2.3.0", "2.3.0", "2.4.0", "2.5.0"),
    # v1 was rolled back and its op code reassigned ("builtin op code shortage"): starts at v2.
    "BROADCAST_TO": (None, "2.5.0", "2.5.0"),
    "CONV_2D": ("1.5.0", "1.14.0", "1.14.0", "2.3.0", "2.4.0", "2.9.0", "2.11.0"),
    "DEPTHWISE_CONV_2D": ("1.5.0", "1.12.0", "1.14.0", "2.2.0", "2.3.0", "2.3.0", "2.11.0"),
    "ADD": ("1.5.0", "1.14.0", "2.4.0", "2.6.0"),
    "ADD_N": ("1.14.0",),
    "SPACE_TO_BATCH_ND": ("1.6.0", "1.14.0", "2.3.0"),
    "SUB": ("1.6.0", "1.14.0", "2.3.0", "2.4.0", "2.4.0"),
    "DENSIFY": ("2.2.0",),
    "DIV": ("1.6.0", "2.3.0"),
    "BATCH_TO_SPACE_ND": ("1.6.0", "1.14.0", "2.3.0"),
    "CAST": ("1.5.0", "2.7.0", "2.8.0", "2.9.0", "2.12.0"),
    "CONCATENATION": ("1.5.0", "1.14.0", "2.3.0"),
    "DEPTH_TO_SPACE": ("2.1.0", "2.5.0"),
    "EMBEDDING_LOOKUP": ("1.13.0", "1.14.0", "1.14.0"),
    "EMBEDDING_LOOKUP_SPARSE": ("1.5.0",),
    "FAKE_QUANT": ("1.5.0", "1.10.0"),
    "FULLY_CONNECTED": ("1.5.0", "1.10.0", "1.14.0", "1.14.0", "2.0.0", "2.1.0", "2.3.0", "2.3.0", "2.3.0", "2.11.0"),
    "GATHER": ("1.6.0", "1.14.0", "1.15.0", "2.4.0", "2.5.0"),
    "GATHER_ND": ("1.14.0", "2.3.0", "2.5.0"),
    "HASHTABLE_LOOKUP": ("1.5.0",),
    "SVDF": ("1.5.0", "1.14.0", "2.2.0", "2.3.0"),
    "L2_NORMALIZATION": ("1.5.0", "1.14.0"),
    "L2_POOL_2D": ("1.5.0",),
    "LOCAL_RESPONSE_NORMALIZATION": ("1.5.0",),
    "MAX_POOL_2D": ("1.5.0", "1.14.0", "2.3.0"),
    "MAXIMUM": ("1.14.0", "1.14.0", "2.3.0", "2.3.0"),
    "MINIMUM": ("1.14.0", "1.14.0", "2.3.0", "2.3.0"),
    "MUL": ("1.5.0", "1.14.0", "1.15.0", "2.3.0", "2.6.0", "2.11.0"),
    "NON_MAX_SUPPRESSION_V4": ("2.1.0",),
    "NON_MAX_SUPPRESSION_V5": ("2.1.0",),
    "PAD": ("1.5.0", "1.14.0", "2.4.0", "2.6.0"),
    "TILE": ("1.10.1", "2.2.0", "2.8.0", "2.12.0"),
    "PADV2": ("1.9.0", "1.14.0", "2.4.0", "2.6.0"),
    "RESHAPE": ("1.5.0",),
    "SOFTMAX": ("1.5.0", "1.14.0", "2.3.0"),
    "SPACE_TO_DEPTH": ("1.5.0", "1.14.0"),
    "TRANSPOSE": ("1.6.0", "1.14.0", "1.15.0", "2.3.0", "2.4.0", "2.12.0"),
    "LSTM": ("1.7.0", "1.10.0", "1.14.0", "2.3.0"),
    "UNIDIRECTIONAL_SEQUENCE_LSTM": ("1.13.1", "1.14.0", "2.3.0", "2.12.0"),
    "BIDIRECTIONAL_SEQUENCE_LSTM": ("1.14.0", "1.14.0", "1.14.0"),
    "BIDIRECTIONAL_SEQUENCE_RNN": ("1.14.0", "1.14.0", "2.3.0"),
    "MEAN": ("1.6.0", "1.14.0", "2.4.0"),
    "SUM": ("1.10.0", "1.15.0"),
    "REDUCE_MAX": ("1.11.0", "1.14.0", "2.5.0"),
    "REDUCE_MIN": ("1.11.0", "1.14.0", "2.5.0"),
    "REDUCE_PROD": ("1.11.0", "2.6.0"),
    "REDUCE_ANY": ("1.11.0",),
    "RELU6": ("1.5.0", "1.14.0", "2.5.0"),
    "RESIZE_BILINEAR": ("1.7.0", "1.14.0", "2.2.0", "2.5.0"),
    "RESIZE_NEAREST_NEIGHBOR": ("1.13.1", "1.14.0", "2.3.0", "2.4.0"),
    "RNN": ("1.5.0", "1.14.0", "2.3.0"),
    "SKIP_GRAM": ("1.5.0",),
    "SQUEEZE": ("1.6.0", "2.5.0"),
    "SPLIT": ("1.5.0", "1.14.0", "1.14.0", "2.3.0"),
    "SPLIT_V": ("1.13.1", "2.3.0"),
    "STRIDED_SLICE": ("1.6.0", "1.14.0", "2.1.0", "2.2.0", "2.5.0", "2.6.0"),
    "TOPK_V2": ("1.7.0", "1.14.0"),
    "ARG_MAX": ("1.9.0", "1.14.0", "2.9.0"),
    "ARG_MIN": ("1.9.0", "1.14.0", "2.9.0"),
    "TRANSPOSE_CONV": ("1.9.0", "2.2.0", "2.3.0", "2.13.0"),
    "SPARSE_TO_DENSE": ("1.9.0", "1.14.0", "1.15.0"),
    "EXPAND_DIMS": ("1.10.0",),
    "PACK": ("1.11.0", "1.14.0", "2.3.0"),
    "SHAPE": ("1.10.0",),
    "SLICE": ("1.14.0", "1.14.0", "1.14.0", "2.4.0", "2.5.0"),
    "TANH": ("1.14.0", "1.14.0", "2.3.0"),
    "ONE_HOT": ("1.11.0",),
    "UNPACK": ("1.11.0", "1.14.0", "2.2.0", "2.3.0"),
    "LEAKY_RELU": ("1.13.1", "2.3.0"),
    "LOGISTIC": ("1.14.0", "1.14.0", "2.3.0"),
    "LOG_SOFTMAX": ("1.14.0", "1.14.0"),
    "LSH_PROJECTION": ("1.5.0",),
    "SQUARED_DIFFERENCE": ("1.13.1", "2.5.0"),
    "MIRROR_PAD": ("1.13.1", "2.3.0", "2.12.0"),
    "UNIQUE": ("1.14.0",),
    "UNIDIRECTIONAL_SEQUENCE_RNN": ("1.14.0", "1.14.0", "2.3.0"),
    "WHERE": ("1.14.0", "2.8.0"),
    "DEQUANTIZE": ("1.13.1", "1.14.0", "1.15.0", "2.2.0", "2.7.0"),
    "REVERSE_SEQUENCE": ("1.14.0",),
    "EQUAL": ("1.14.0", "1.14.0", "2.3.0"),
    "NOT_EQUAL": ("1.14.0", "1.14.0", "2.3.0"),
    "GREATER": ("1.14.0", "1.14.0"),
    "GREATER_EQUAL": ("1.14.0", "1.14.0"),
    "LESS": ("1.14.0", "1.14.0"),
    "LESS_EQUAL": ("1.14.0", "1.14.0"),
    "SCATTER_ND": ("2.1.0",),
    "SEGMENT_SUM": ("2.2.0",),
    "SELECT": ("1.14.0", "1.14.0", "2.12.0"),
    "SELECT_V2": ("2.2.0",),
    "IF": ("1.15.0",),
    "FLOOR_DIV": ("1.14.0", "1.14.0"),
    "FLOOR": ("1.9.0",),
    "CEIL": ("1.14.0",),
    "MATRIX_DIAG": ("1.14.0",),
    "MATRIX_SET_DIAG": ("1.14.0",),
    "ELU": ("1.14.0",),
    "QUANTIZE": ("1.14.0", "1.15.0", "2.7.0"),
    "ROUND": ("1.14.0",),
    "RELU": ("1.5.0", "2.1.0", "2.5.0"),
    "RELU_N1_TO_1": ("1.5.0",),
    "RELU_0_TO_1": ("2.10.0",),
    "PRELU": ("1.8.0",),
    "EXP": ("1.7.0",),
    "COS": ("1.14.0",),
    "NEG": ("1.9.0",),
    "POW": ("1.10.0",),
    "LOGICAL_OR": ("1.11.0",),
    "LOGICAL_AND": ("1.11.0",),
    "LOGICAL_NOT": ("1.11.0",),
    "FLOOR_MOD": ("1.13.0",),
    "RANGE": ("1.13.0",),
    "SIN": ("1.9.0",),
    "LOG": ("1.14.0",),
    "SQRT": ("1.10.0",),
    "RSQRT": ("1.10.0", "2.5.0"),
    "SQUARE": ("1.12.0",),
    "ZEROS_LIKE": ("1.12.0",),
    "ABS": ("1.13.0", "2.4.0", "2.5.0", "2.6.0", "2.12.0"),
    "HARD_SWISH": ("1.15.0",),
    "FILL": ("1.13.0", "2.3.0", "2.5.0", "2.12.0"),
    "REVERSE_V2": ("1.14.0", "2.2.0", "2.5.0"),
    "RANK": ("1.14.0",),
    "WHILE": ("1.15.0",),
    "CUMSUM": ("2.4.0",),
    "CALL_ONCE": ("2.5.0",),
    "RFFT2D": ("2.5.0",),
    "CONV_3D": ("2.5.0",),
    "IMAG": ("2.5.0",),
    "REAL": ("2.5.0",),
    "COMPLEX_ABS": ("2.5.0",),
    "HASHTABLE": ("2.5.0",),
    "HASHTABLE_FIND": ("2.5.0",),
    "HASHTABLE_IMPORT": ("2.5.0",),
    "HASHTABLE_SIZE": ("2.5.0",),
    "REDUCE_ALL": ("2.6.0",),
    "CONV_3D_TRANSPOSE": ("2.6.0",),
    "VAR_HANDLE": ("2.6.0",),
    "READ_VARIABLE": ("2.6.0",),
    "ASSIGN_VARIABLE": ("2.6.0",),
    "BROADCAST_ARGS": ("2.6.0",),
    "RANDOM_STANDARD_NORMAL": ("2.8.0",),
    "BUCKETIZE": ("2.8.0",),
    "RANDOM_UNIFORM": ("2.8.0",),
    "MULTINOMIAL": ("2.8.0",),
    "GELU": ("2.9.0", "2.9.0"),
    "DYNAMIC_UPDATE_SLICE": ("2.9.0",),
    "UNSORTED_SEGMENT_PROD": ("2.10.0",),
    "UNSORTED_SEGMENT_MAX": ("2.10.0",),
    "UNSORTED_SEGMENT_MIN": ("2.11.0",),
    "UNSORTED_SEGMENT_SUM": ("2.10.0",),
    "ATAN2": ("2.10.0",),
    "SIGN": ("2.11.0", "2.12.0"),
}

#: (op, version) -> first TensorFlow Lite release that runs it, as in runtime_version.cc.
FIRST_RELEASE: dict[tuple[str, int], str] = {
    (op, v): rel for op, rels in _RELEASES.items() for v, rel in enumerate(rels, start=1) if rel is not None
}


def _release_key(release: str) -> tuple[int, ...]:
    return tuple(int(p) for p in release.split("."))


def max_compiler_version(op_name: str) -> int | None:
    """Highest version of builtin ``op_name`` that edgetpu_compiler 16 (TFLite 2.5) parses, or None.

    None means the compiler's TFLite does not know the op at all (or it is not a builtin op).
    """
    known = CEILING.get(op_name)
    return known[1] if known else None


@cache
def released_by(op_name: str, release: str) -> int | None:
    """Highest version of ``op_name`` that runtime_version.cc gives a first release of ``release`` or earlier."""
    key = _release_key(release)
    known = [v for (op, v), rel in FIRST_RELEASE.items() if op == op_name and _release_key(rel) <= key]
    return max(known) if known else None


def refusal_is_sure(op_name: str, version: int) -> bool:
    """Whether compiler 16 surely refuses ``op_name`` v``version`` (given :func:`version_problem` says it does)."""
    return first_release(op_name, version) not in UNSURE_RELEASES


def first_release(op_name: str, version: int) -> str | None:
    """First TensorFlow Lite release that runs ``op_name`` v``version`` (None: not in the transcribed map)."""
    return FIRST_RELEASE.get((op_name, version))


def version_problem(op_name: str, version: int) -> str | None:
    """One line saying why edgetpu_compiler 16 cannot parse ``op_name`` v``version``, or None when it can.

    Custom ops (``CUSTOM``) are not judged here: they have no builtin version.
    """
    if op_name == "CUSTOM":
        return None
    ceiling = max_compiler_version(op_name)
    release = first_release(op_name, version)
    if ceiling is None:
        if op_name in _RELEASES:
            first = next(r for r in _RELEASES[op_name] if r)
            return (
                f"{op_name} needs TensorFlow Lite {first} or newer; edgetpu_compiler 16 "
                f"(TFLite {COMPILER_TFLITE[:3]}) does not know this op"
            )
        return f"{op_name} is not a builtin op that edgetpu_compiler 16 (TFLite {COMPILER_TFLITE[:3]}) knows"
    if CEILING[op_name][0] <= version <= ceiling:
        return None
    if version < CEILING[op_name][0]:
        return (
            f"{op_name} v{version} is not a version edgetpu_compiler 16 (TFLite {COMPILER_TFLITE[:3]}) "
            f"registers (it parses v{CEILING[op_name][0]} to v{ceiling})"
        )
    needs = (
        f"needs TensorFlow Lite {release}"
        if release
        else f"needs a TensorFlow Lite release newer than {COMPILER_TFLITE}"
    )
    return (
        f"{op_name} v{version} {needs}; edgetpu_compiler 16 knows versions up to {ceiling} "
        f"(TFLite {COMPILER_TFLITE[:3]})"
    )
