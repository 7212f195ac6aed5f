"""Offline Edge TPU compatibility: the one engine that knows what ``edgetpu_compiler`` 15/16 maps.

Pure rules over :class:`edgekit.tflite.model.ModelInfo`; no TensorFlow, no subprocess, any OS.
Everything edgekit knows about the compiler lives here, as data:

* :data:`RULES`: per supported op, the minimum Edge TPU runtime and its constraints. A
  :class:`Constraint` is a small predicate with the compiler's status words, the fix, the evidence
  it rests on and a confidence: ``confirmed`` (a real compile shows it: a compiled pair in
  ``../shared/testdata``, a compiler log in ``tests/fixtures/compiler``, or compiler output pasted
  in a public issue) or ``uncertain`` (no real compile shows it either way: Coral's documentation or
  an inference only; each such constraint says in ``looked_for`` what evidence was searched for).
  ``check`` reports the placements such rules decide as uncertain. Constraints in
  :data:`COMMON` apply to every supported op.
* :func:`judge` gives one op's :class:`Judgement` (a value, never raised).
* :func:`fatal_problems` lists what makes the compiler refuse the whole model.
* :func:`place` is the partitioning: which mappable ops land in which Edge TPU subgraph.
* :func:`check_model` puts them together into ``edgekit check``'s document, a
  :class:`~edgekit.results.check.CheckResult`; ``quantize`` gates its output with :func:`quantize_gate`, built
  from the same result.

**Partitioning.** The compiler runs as a TensorFlow Lite delegate ("Restored original execution
plan after delegate application failure" is TFLite's message), and TFLite groups a delegate's
graph, in execution order, into alternating runs of mappable and unmappable ops, a run absorbing
every op of its kind whose inputs are ready. Without ``-a`` the first mappable run is the one Edge
TPU subgraph and every other mappable op stays on the CPU as "More than one subgraph is not
supported" (a QUANTIZE fed by an unmappable op reads "Operation is otherwise supported, but not
mapped due to some unspecified limitation", google-coral/edgetpu#342). With ``-a`` (``--enable_multiple_subgraphs``)
every mappable run becomes an Edge TPU subgraph. Evidence:

* deeplabv3 (both pairs): everything that depends on the first unmappable op (#64
  RESIZE_BILINEAR) stays on the CPU; ops #62/#63, which feed the CPU part but do not depend on it,
  are mapped;
* float I/O (``v16_float_io_yolov8s_160_CPU.log``, pair
  ``coralmicro__yamnet_spectra_in``): an unmappable *first* op cuts nothing off;
* google-coral/edgetpu#342: the first mappable run is kept even when later ones are larger;
* pair ``srgan__srgan_quant_2`` (three ``edgetpu-custom-op`` in the compiled file, so compiled with
  ``-a``): the runs between its two 5-D RESHAPE/TRANSPOSE/RESHAPE groups became three Edge TPU
  subgraphs, exactly the mappable runs;
* pair ``coral_wifi_webserver__yolov8n_full_integer_quant`` and its log: the ops that depend on
  the refused TRANSPOSEs are "More than one subgraph is not supported", the rest mapped.
"""

from edgekit.edgetpu.compatibility.cases import OP_CASES
from edgekit.edgetpu.compatibility.catalogue import all_rules
from edgekit.edgetpu.compatibility.check import check_model, quantize_gate
from edgekit.edgetpu.compatibility.common import (
    COMMON,
    RESHAPE_LIMIT,
    RESHAPES,
    ROW_LIMIT,
    ROW_REFUSED,
    ROWS,
    TRANSPOSE_LIMIT,
    TRANSPOSE_REFUSED,
    TRANSPOSES,
)
from edgekit.edgetpu.compatibility.evidence import (
    DOCS,
    EV_DECODERS,
    EV_DEEPLAB,
    EV_DYNAMIC,
    EV_FLOAT_IO,
    EV_MULTIPLE_SUBGRAPHS,
    EV_SRGAN,
    EV_UNRESOLVED,
    EV_YOLOV8N,
    SEEN_MAPPED,
    STATUS_WORDS,
    Refs,
)
from edgekit.edgetpu.compatibility.guess import TESTED, best_guess, record
from edgekit.edgetpu.compatibility.model_rules import (
    ALWAYS_DYNAMIC,
    MODEL_RULES,
    SHAPE_INPUTS,
    dynamic_ops,
    fatal_problems,
    model_problems,
)
from edgekit.edgetpu.compatibility.op_constraints import (
    EV_FC_2D,
    EV_PER_CHANNEL_FC,
    MEAN_POSITIONS_LIMIT,
    RESIZE_LIMIT,
    SIZE_LIMITS,
)
from edgekit.edgetpu.compatibility.op_judge import judge
from edgekit.edgetpu.compatibility.open_rules import SETTLE, documentation_only, rule_refs
from edgekit.edgetpu.compatibility.partition import partition, place
from edgekit.edgetpu.compatibility.rules import RULES
from edgekit.edgetpu.compatibility.values import (
    Constraint,
    Judgement,
    ModelRule,
    OpCase,
    OpContext,
    OpRule,
    SizeLimit,
)
from edgekit.edgetpu.compatibility.words import (
    COMPILER_DEFAULT_MIN_RUNTIME,
    CONFIRMED,
    CUSTOM_UNRESOLVED,
    CUT_OFF,
    CUT_OFF_FED_BY_CPU,
    DATA_TYPE,
    DYNAMIC,
    FIX_MOVE_TO_END,
    FIX_QUANTIZE,
    KNOWN_CUSTOM_OPS,
    MAPPED,
    MORE_THAN_ONE_SUBGRAPH,
    NOT_CONSTANT,
    NOT_SUPPORTED,
    PARAMETER_CACHE_BYTES,
    PARSE_FAILED,
    RANK,
    STRIDES,
    SUPPORTED_MIN_RUNTIMES,
    UNCERTAIN,
    UNSPECIFIED,
    VERSION,
    Confidence,
    Kind,
    Target,
    Verdict,
)

__all__ = [
    "ALWAYS_DYNAMIC",
    "COMMON",
    "COMPILER_DEFAULT_MIN_RUNTIME",
    "CONFIRMED",
    "CUSTOM_UNRESOLVED",
    "CUT_OFF",
    "CUT_OFF_FED_BY_CPU",
    "Confidence",
    "Constraint",
    "DATA_TYPE",
    "DOCS",
    "DYNAMIC",
    "EV_DECODERS",
    "EV_DEEPLAB",
    "EV_DYNAMIC",
    "EV_FC_2D",
    "EV_FLOAT_IO",
    "EV_MULTIPLE_SUBGRAPHS",
    "EV_PER_CHANNEL_FC",
    "EV_SRGAN",
    "EV_UNRESOLVED",
    "EV_YOLOV8N",
    "FIX_MOVE_TO_END",
    "FIX_QUANTIZE",
    "Judgement",
    "KNOWN_CUSTOM_OPS",
    "Kind",
    "MAPPED",
    "MEAN_POSITIONS_LIMIT",
    "MODEL_RULES",
    "MORE_THAN_ONE_SUBGRAPH",
    "ModelRule",
    "NOT_CONSTANT",
    "NOT_SUPPORTED",
    "OP_CASES",
    "OpCase",
    "OpContext",
    "OpRule",
    "PARAMETER_CACHE_BYTES",
    "PARSE_FAILED",
    "RANK",
    "RESHAPES",
    "RESHAPE_LIMIT",
    "RESIZE_LIMIT",
    "ROWS",
    "ROW_LIMIT",
    "ROW_REFUSED",
    "RULES",
    "Refs",
    "SEEN_MAPPED",
    "SETTLE",
    "SHAPE_INPUTS",
    "SIZE_LIMITS",
    "STATUS_WORDS",
    "STRIDES",
    "SUPPORTED_MIN_RUNTIMES",
    "SizeLimit",
    "TESTED",
    "TRANSPOSES",
    "TRANSPOSE_LIMIT",
    "TRANSPOSE_REFUSED",
    "Target",
    "UNCERTAIN",
    "UNSPECIFIED",
    "VERSION",
    "Verdict",
    "all_rules",
    "best_guess",
    "cases",
    "check",
    "check_model",
    "common",
    "documentation_only",
    "dynamic_ops",
    "evidence",
    "fatal_problems",
    "guess",
    "judge",
    "model_problems",
    "model_rules",
    "op_constraints",
    "open_rules",
    "partition",
    "place",
    "quantize_gate",
    "record",
    "rule_refs",
    "rules",
    "values",
    "words",
]
