"""The op-version ceiling of ``edgetpu_compiler`` 16: which builtin op versions it can parse.

Provenance
----------
``edgetpu_compiler`` 16.0.384591198 (June 2021, the last release) embeds TensorFlow Lite 2.5: it
was built with libedgetpu 16 against TensorFlow 2.5, and every op version reported as rejected by
it (CONV_2D v6, EXP v2, QUANTIZE v3, TRANSPOSE_CONV v4, FULLY_CONNECTED v12; google-coral/edgetpu
#631, #845, #879, #862, google-coral/libedgetpu#71) first appeared in a TensorFlow release after
2.5.0. An op version that TFLite 2.5 does not know makes the compiler refuse the whole model::

    ERROR: Didn't find op for builtin opcode 'CONV_2D' version '6'. An older version of this
    builtin might be supported. Are you using an old TFLite binary with a newer model?

TensorFlow records, for every (builtin op, version) pair, the first release whose runtime executes
it, in ``tensorflow/lite/tools/versioning/runtime_version.cc`` (``FindMinimumRuntimeVersionForOp``).
:data:`FIRST_RELEASE` below is that map transcribed from repository tensorflow/tensorflow at commit
f3ddd831d6e108d9a79f7bc37ce9439f91b58d7b (the file as of TensorFlow ~2.13: its newest entries are
TRANSPOSE_CONV v4 -> 2.13.0 and CAST v5 / TILE v4 / SIGN v2 -> 2.12.0). The ceiling of compiler 16
is, per op, the highest version whose first release is 2.5.0 or earlier (:data:`COMPILER_TFLITE`).

Limits of the derivation:

* A version absent from the map (e.g. EXP v2, FULLY_CONNECTED v11/v12) is newer than the
  transcribed file and therefore also newer than 2.5.0: it is rejected, with its release unknown.
* An op none of whose versions is 2.5.0 or earlier (GELU, VAR_HANDLE, ...) is unknown to the
  compiler's TFLite: :func:`max_compiler_version` returns None.
* Parsing is not mapping: a version the compiler parses may still be left on the CPU (e.g.
  FULLY_CONNECTED with ``keep_num_dims``, v5 and up, gets "Operation version not supported"). That is
  :mod:`edgekit.converters.compatibility`'s business, not this module's.
"""

from __future__ import annotations

from functools import lru_cache

COMPILER_VERSION = "16.0.384591198"
COMPILER_TFLITE = "2.5.0"
SOURCE = ("tensorflow/tensorflow tensorflow/lite/tools/versioning/runtime_version.cc "
          "@ f3ddd831d6e108d9a79f7bc37ce9439f91b58d7b")

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
    "FULLY_CONNECTED": ("1.5.0", "1.10.0", "1.14.0", "1.14.0", "2.0.0", "2.1.0", "2.3.0", "2.3.0", "2.3.0",
                        "2.11.0"),
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


_CEILING_KEY = _release_key(COMPILER_TFLITE)


@lru_cache(maxsize=None)
def max_compiler_version(op_name: str) -> int | None:
    """Highest version of builtin ``op_name`` that edgetpu_compiler 16 (TFLite 2.5) knows, or None.

    None means the compiler's TFLite does not know the op at all (or it is not a builtin op).
    """
    known = [v for (op, v), rel in FIRST_RELEASE.items() if op == op_name and _release_key(rel) <= _CEILING_KEY]
    return max(known) if known else None


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
            return (f"{op_name} needs TensorFlow Lite {first} or newer; edgetpu_compiler 16 "
                    f"(TFLite {COMPILER_TFLITE[:3]}) does not know this op")
        return f"{op_name} is not a builtin op that edgetpu_compiler 16 (TFLite {COMPILER_TFLITE[:3]}) knows"
    if version <= ceiling:
        return None
    needs = (f"needs TensorFlow Lite {release}" if release
             else f"needs a TensorFlow Lite release newer than {COMPILER_TFLITE}")
    return (f"{op_name} v{version} {needs}; edgetpu_compiler 16 knows versions up to {ceiling} "
            f"(TFLite {COMPILER_TFLITE[:3]})")
