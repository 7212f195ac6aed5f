"""The compiler's status words, check's confidence words, and the constants every rule module shares."""

from __future__ import annotations

from edgekit.compiler_locator import COMPILER_MIN_RUNTIME

# ---------------------------------------------------------------------------------- status words
MAPPED = "Mapped to Edge TPU"
MORE_THAN_ONE_SUBGRAPH = "More than one subgraph is not supported"
UNSPECIFIED = "Operation is otherwise supported, but not mapped due to some unspecified limitation"
NOT_SUPPORTED = "Operation not supported"
DATA_TYPE = "Operation is working on an unsupported data type"
VERSION = "Operation version not supported"
NOT_CONSTANT = "Filter, bias, or other param is not constant at compile-time"
RANK = "Tensor has unsupported rank (up to 3 innermost dimensions mapped)"
STRIDES = "Only Strided-Slice with unitary strides supported"
# Whole-model failures: the compiler refuses the model, nothing is mapped.
PARSE_FAILED = "Model could not be parsed"
DYNAMIC = "Model has dynamic-sized tensors"
CUSTOM_UNRESOLVED = "Encountered unresolved custom op"

CONFIRMED = "confirmed"  # a real compile shows it
UNCERTAIN = "uncertain"  # no real compile shows it either way (documentation or inference only)

COMPILER_DEFAULT_MIN_RUNTIME = COMPILER_MIN_RUNTIME[16]  # the compiler whose rules these are
SUPPORTED_MIN_RUNTIMES = range(10, 15)
#: On-chip parameter cache of the Edge TPU (~8 MB, coral.ai pipeline and multiple-edgetpu docs).
#: Real compiles cache up to ~6-7.6 MiB of it (the compiler keeps some for itself), so the
#: on-chip estimate is an upper bound near the limit.
PARAMETER_CACHE_BYTES = 8 * 1024 * 1024

_QUANT_TYPES = {"int8", "uint8"}
_CONST_OK_TYPES = {"int8", "uint8", "int32"}

#: Custom ops the compiler's TensorFlow Lite resolves (they stay on the CPU as "Operation is
#: working on an unsupported data type": tensorflow/models#10695 and other public logs).
KNOWN_CUSTOM_OPS = {"TFLite_Detection_PostProcess"}

#: The detail of a mappable op left outside the Edge TPU subgraph(s).
CUT_OFF = "mappable, but outside the one Edge TPU subgraph"

# What to change, by rule.
FIX_QUANTIZE = ("quantize the whole model to int8 (full-integer post-training quantization with integer I/O): "
                "`edgekit quantize`")
FIX_MOVE_TO_END = "replace it with a supported op, or move it after the last op that should run on the Edge TPU"
