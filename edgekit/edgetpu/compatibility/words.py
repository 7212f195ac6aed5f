"""The compiler's status words, check's confidence words, and the constants every rule module shares."""

from __future__ import annotations

from edgekit.edgetpu.compiler_locator import COMPILER_MIN_RUNTIME
from edgekit.results.words import Confidence, Target, Verdict, Word, mib  # noqa: F401 (shared with the documents)


class Kind(Word):
    """What a rule restricts, or rests on: rules of one kind share a best guess when no compile tests them."""

    TYPE = "type"  # data types and runtime versions (Coral's model requirements, runtime column)
    LAYOUT = "layout"  # documented shape forms: 1-D outputs, batch dimensions, ranks, leading 1s
    OPTION = "option"  # documented op options and parameters: activations, dilation, strides, constants
    SIZE = "size"  # documented "might not be mapped for large sizes", and limits measured on compiles
    HEURISTIC = "heuristic"  # edgekit's own reading of vague documentation (e.g. integer resize factors)
    INFERRED = "inferred"  # read from compiles that show a refusal without the compiler's words
    MODEL = "model"  # about the whole model (parsing, dynamic shapes, custom ops, control flow)


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

CONFIRMED = Confidence.CONFIRMED
UNCERTAIN = Confidence.UNCERTAIN

COMPILER_DEFAULT_MIN_RUNTIME = COMPILER_MIN_RUNTIME[16]  # the compiler whose rules these are
SUPPORTED_MIN_RUNTIMES = range(10, 15)
#: On-chip parameter cache of the Edge TPU (~8 MB, coral.ai pipeline and multiple-edgetpu docs).
#: Real compiles cache up to ~6-7.6 MiB of it (the compiler keeps some for itself), so the
#: on-chip estimate is an upper bound near the limit.
PARAMETER_CACHE_BYTES = 8 * 1024 * 1024

QUANT_TYPES = {"int8", "uint8"}
CONST_OK_TYPES = {"int8", "uint8", "int32"}

#: Custom ops the compiler's TensorFlow Lite resolves (they stay on the CPU as "Operation is
#: working on an unsupported data type": tensorflow/models#10695 and other public logs).
KNOWN_CUSTOM_OPS = {"TFLite_Detection_PostProcess"}

#: The detail of a mappable op left outside the Edge TPU subgraph(s).
CUT_OFF = "mappable, but outside the one Edge TPU subgraph"
#: The words of a cut-off op fed by an op left on the CPU, where they are not "More than one subgraph": a
#: cut-off QUANTIZE so fed reads "unspecified limitation" (deeplab's #65 in google-coral/edgetpu#60, #342,
#: #461); other cut-off QUANTIZEs read "More than one subgraph" (24 of them in a compiler 15 yolov5s log).
CUT_OFF_FED_BY_CPU = {"QUANTIZE": UNSPECIFIED}

# What to change, by rule.
FIX_QUANTIZE = (
    "quantize the whole model to int8 (full-integer post-training quantization with integer I/O): `edgekit quantize`"
)
FIX_MOVE_TO_END = "replace it with a supported op, or move it after the last op that should run on the Edge TPU"
