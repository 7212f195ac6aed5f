"""Offline Edge TPU compatibility: the one engine that knows what ``edgetpu_compiler`` 15/16 maps.

Pure rules over :class:`edgekit.tflite_model.ModelInfo`; no TensorFlow, no subprocess, any OS.
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
* :func:`check_model` puts them together into a :class:`CheckReport`; ``quantize`` gates its
  output with :func:`quantize_gate`, built from the same report.

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

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from edgekit.compiler_locator import COMPILER_MIN_RUNTIME
from edgekit.converters.op_versions import version_problem
from edgekit.errors import CompatibilityError, InvalidModelError, UsageError
from edgekit.tflite_model import EDGETPU_CUSTOM_OP, FLOAT_DTYPES, ModelInfo, OpInfo, SubgraphInfo, TensorInfo

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

# Evidence references, each checked by tests/converters/test_evidence.py: ``pair:<id>`` a public pair
# of the evidence ledger (tests/fixtures/evidence/SOURCES.tsv), ``testdata:<stem>`` a compiled pair in
# ../shared/testdata, ``log:<file>`` real compiler output in tests/fixtures/compiler, ``report:<key>``
# a public report listed in tests/fixtures/evidence/REPORTS.tsv (Coral's documentation among them).
Refs = tuple  # of str
DOCS: Refs = ("report:coral-supported-ops",)
EV_YOLOV8N: Refs = ("testdata:coral_wifi_webserver__yolov8n_full_integer_quant",)
EV_SRGAN: Refs = ("testdata:srgan__srgan_quant_2",)  # compiled with -a: three edgetpu-custom-op
EV_FLOAT_IO: Refs = ("log:v16_float_io_yolov8s_160_CPU.log", "testdata:coralmicro__yamnet_spectra_in")
EV_DEEPLAB: Refs = ("testdata:deeplabv3_mnv2_dm05_pascal_quant", "testdata:coral-edgetpu__deeplabv3_mnv2_pascal_quant")
# Coral's own decoder models, built by compiling the part before the custom op and joining it back.
EV_DECODERS: Refs = ("testdata:posenet__posenet_mobilenet_v1_075_353_481_quant_decoder",
                     "testdata:bodypix__bodypix_mobilenet_v1_075_640_480_16_quant_decoder")
EV_UNRESOLVED: Refs = ("report:coral-unresolved-custom-op",)
# A Keras EfficientNet converted with a -1 batch, whose Reshape layers get a shape computed at run
# time, fails; srgan compiled despite -1 batches, its shapes being constant.
EV_DYNAMIC: Refs = ("log:v16_dynamic_tensors.txt", "testdata:srgan__srgan_quant_2")

#: The status words check prints, each with the real output that shows them (a log shows them
#: verbatim; edgekit's own words for whole-model failures cite the output they stand for).
STATUS_WORDS: dict[str, Refs] = {
    MAPPED: ("log:v16_full_yolov5s_160.log",),
    MORE_THAN_ONE_SUBGRAPH: ("log:v15_partial_yolov5s_stdout.txt",),
    UNSPECIFIED: ("log:v15_partial_yolov5s_stdout.txt", "log:v16_float_io_yolov8s_160_CPU.log"),
    NOT_SUPPORTED: ("log:v15_partial_yolov5s_stdout.txt",),
    DATA_TYPE: ("log:v16_float_io_yolov8s_160_CPU.log",),
    VERSION: ("log:v15_partial_yolov5s_stdout.txt",),
    NOT_CONSTANT: DOCS,
    RANK: ("report:google-coral/edgetpu#708",),
    STRIDES: ("log:v15_partial_yolov5s_stdout.txt",),
    PARSE_FAILED: ("log:v16_op_version_exp.txt",),
    DYNAMIC: ("log:v16_dynamic_tensors.txt",),
    CUSTOM_UNRESOLVED: EV_UNRESOLVED,
}

#: Op types a real compile shows mapped, each with compiles that show it (tests check every one maps
#: the op); the other supported ops rest on Coral's table alone, so check reports their mapping as
#: uncertain.
SEEN_MAPPED: dict[str, Refs] = {
    "ADD": (
        "testdata:deeplabv3_mnv2_dm05_pascal_quant",
        "pair:amichielsen+EmbeddedAI__mobilenet_v2_1.0_224_quant",
        "pair:anggadharma60+Pi-Demo__models__MobileNetV2",
    ),
    "AVERAGE_POOL_2D": (
        "testdata:mobilenet_v1_0.25_128_quant",
        "pair:EscVM+Edge_TPU_Face_Mask_Detection__models__mobilenet_v2_mask_classification",
        "pair:KeondoPark+coral_mask__train_mask_detector__mask_detector_quant_v2",
    ),
    "CONCATENATION": (
        "testdata:split_concat",
        "pair:atemaguer+drowsy-driver-detection__models__face_detection_front_128_full_integer_quant",
        "pair:eljuguetero+coral_edgetpu__test_data__ultraface__version-slim-320_without_postprocessing_quantized",
    ),
    "CONV_2D": (
        "testdata:mobilenet_v1_0.25_128_quant",
        "pair:amichielsen+EmbeddedAI__mobilenet_v2_1.0_224_quant",
        "pair:anggadharma60+Pi-Demo__models__MobileNetV2",
    ),
    "DEPTHWISE_CONV_2D": (
        "testdata:mobilenet_v1_0.25_128_quant",
        "pair:amichielsen+EmbeddedAI__mobilenet_v2_1.0_224_quant",
        "pair:anggadharma60+Pi-Demo__models__MobileNetV2",
    ),
    "FULLY_CONNECTED": (
        "testdata:keras_lstm_mnist_ptq",
        "pair:amichielsen+EmbeddedAI__mobilenet_v2_1.0_224_quant",
        "pair:anggadharma60+Pi-Demo__models__MobileNetV2",
    ),
    "L2_NORMALIZATION": ("report:jiri-kula/EfficientDet",),
    "LOGISTIC": (
        "testdata:coralmicro__yamnet_spectra_in",
        "pair:anggadharma60+Pi-Demo__models__MobileNetV2",
        "pair:EscVM+Edge_TPU_Face_Mask_Detection__models__mobilenet_v2_mask_classification",
    ),
    "MAXIMUM": ("pair:atemaguer+drowsy-driver-detection__models__face_landmark_192_full_integer_quant",),
    "MAX_POOL_2D": (
        "testdata:coral_wifi_webserver__yolov8n_full_integer_quant",
        "pair:atemaguer+drowsy-driver-detection__models__face_detection_front_128_full_integer_quant",
        "pair:EscVM+RPS_with_Edge_TPU__bin__rps",
    ),
    "MEAN": (
        "testdata:coralmicro__yamnet_spectra_in",
        "pair:amichielsen+EmbeddedAI__mobilenet_v2_1.0_224_quant",
        "pair:anggadharma60+Pi-Demo__models__MobileNetV2",
    ),
    "MUL": (
        "testdata:coral_wifi_webserver__yolov8n_full_integer_quant",
        "pair:atemaguer+drowsy-driver-detection__models__face_landmark_192_full_integer_quant",
        "pair:G-aad-a+ddu-eksamen__best_full_integer_quant",
    ),
    "PACK": ("pair:prbodmann+Coral-TPU__transformer__models__efficient_l3",),
    "PAD": (
        "testdata:bodypix__bodypix_mobilenet_v1_075_640_480_16_quant_decoder",
        "pair:amichielsen+EmbeddedAI__mobilenet_v2_1.0_224_quant",
        "pair:anggadharma60+Pi-Demo__models__MobileNetV2",
    ),
    "PRELU": (
        "testdata:srgan__srgan_quant_2",
        "pair:LEE2020957316+raspberry-pi5-edgetpu-inference__models__facial_expression_recognition_mobilefacenet_2022july_full_integer_quant",
    ),
    "QUANTIZE": (
        "testdata:keras_lstm_mnist_ptq",
        "pair:amichielsen+EmbeddedAI__mobilenet_v2_1.0_224_quant",
        "pair:anggadharma60+Pi-Demo__models__MobileNetV2",
    ),
    "RELU": (
        "report:mathieugalle/edgetpu-compiler-pad-fail",
        "pair:mathieugalle+edgetpu-compiler-pad-fail__mobile_retina_net_not_padded",
    ),
    "RESHAPE": (
        "testdata:mobilenet_v1_0.25_128_quant",
        "pair:atemaguer+drowsy-driver-detection__models__face_detection_front_128_full_integer_quant",
        "pair:ddchung+TSF-2025-Car__lane_nav",
    ),
    "RESIZE_BILINEAR": ("report:eehoeskrap/PaperReview#15",),
    "RESIZE_NEAREST_NEIGHBOR": (
        "testdata:coral_wifi_webserver__yolov8n_full_integer_quant",
        "pair:G-aad-a+ddu-eksamen__best_full_integer_quant",
        "pair:LordSweetPoison+Birdnet-Edge__models__best-int8",
    ),
    "RSQRT": ("pair:prbodmann+Coral-TPU__transformer__models__efficient_l3",),
    "SLICE": ("report:tensorflow/models#10695",),
    "SOFTMAX": (
        "testdata:mobilenet_v1_0.25_128_quant",
        "pair:amichielsen+EmbeddedAI__mobilenet_v2_1.0_224_quant",
        "pair:anggadharma60+Pi-Demo__models__MobileNetV2_V2",
    ),
    "SPLIT": ("testdata:split_concat",),
    "SQUARED_DIFFERENCE": ("pair:prbodmann+Coral-TPU__transformer__models__efficient_l3",),
    "STRIDED_SLICE": (
        "testdata:coral_wifi_webserver__yolov8n_full_integer_quant",
        "pair:G-aad-a+ddu-eksamen__best_full_integer_quant",
        "pair:LordSweetPoison+Birdnet-Edge__models__best-int8",
    ),
    "SUB": (
        "log:v16_float_io_yolov8s_160_CPU.log",
        "pair:mistake0316+Google-Coral-Style-Transfer__model__dark_Encoder",
        "pair:prbodmann+Coral-TPU__transformer__models__efficient_l3",
    ),
    "SUM": ("report:jiri-kula/EfficientDet",),
    "TANH": ("testdata:srgan__srgan_quant_2",),
    "TRANSPOSE": (
        "testdata:coral_wifi_webserver__yolov8n_full_integer_quant",
        "pair:G-aad-a+ddu-eksamen__best_full_integer_quant",
        "pair:nerbivol+edgetpu_lite__yolov8n_full_integer_quant",
    ),
    "UNIDIRECTIONAL_SEQUENCE_LSTM": ("testdata:keras_lstm_mnist_ptq",),
}

#: Custom ops the compiler's TensorFlow Lite resolves (they stay on the CPU as "Operation is
#: working on an unsupported data type": tensorflow/models#10695 and other public logs).
KNOWN_CUSTOM_OPS = {"TFLite_Detection_PostProcess"}

#: The detail of a mappable op left outside the Edge TPU subgraph(s).
CUT_OFF = "mappable, but outside the one Edge TPU subgraph"

# What to change, by rule.
FIX_QUANTIZE = ("quantize the whole model to int8 (full-integer post-training quantization with integer I/O): "
                "`edgekit quantize`")
FIX_MOVE_TO_END = "replace it with a supported op, or move it after the last op that should run on the Edge TPU"

# Row-size limit (yolov8n pair + log, yolov5s and yolov8 logs): a tensor whose two innermost
# dimensions hold more than this many values is refused ("unspecified limitation"), whatever the
# op. Mapped at most 134,400 (yolov8n SOFTMAX/CONV_2D on 1x4x8400x16; the yolov5s 160 concat
# 1x1575x85 = 133,875 in v16_full_yolov5s_160.log); refused from 230,400 (yolov8n RESHAPE
# 1x144x1600) and, inferred from the architecture, 199,920 (yolov5s 224 RESHAPE 1x2352x85 in
# v16_partial_yolov5s_224_stdout.txt). The limit is placed inside that gap. google-coral/edgetpu#490's
# LOGISTIC on 1x19206x9 (172,854) "unspecified" is no counter-example: that model's plain compile
# failed ("large activation tensors") and the table came from a `-d` (search_delegate) compile,
# which cuts the graph at tensors of its choosing.
ROW_LIMIT = 196_608
ROW_REFUSED = 230_400  # the smallest row a real compile shows refused
FIX_ROWS = ("keep detection post-processing (decode, concat over all anchors) on the CPU: cut the model before it, "
            "or export without it")
# TRANSPOSE moves data across the whole tensor. Mapped at most 82,944 values (1x24x24x144 in the
# all-mapped yolov8n/yolov8s 192 logs of jveitchmichaelis/edgetpu-yolo @283644dc, compiler 16);
# refused from 104,000 (the 1x40x40x65 head transpose of the yolov8 ledger pair
# G-aad-a/ddu-eksamen, whose 1x20x20x65 one (26,000) mapped) and at 230,400 (the yolov8n pair's
# 1x40x40x144). The limit is placed inside that gap (it was 131,072 until that pair).
TRANSPOSE_LIMIT = 98_304
TRANSPOSE_REFUSED = 104_000  # the smallest transpose a real compile shows refused
# RESHAPE ("Certain reshapes might not be mapped for large tensor sizes", Coral's table): yolov5's
# head reshapes 1x80x80x255 -> 1x6400x3x85 (1,632,000 values) is refused at 640 while the same
# reshape of 1x40x40x255 (408,000) maps: the counts of two compiler 16 logs of a 640 COCO export
# (ultralytics/yolov5#10527; Team-Protom/road-signs-recognition-model yolov5s-int8_edgetpu.log
# @78581433) leave no other reading (one level's head chain cut off, 3 of 6 RESHAPEs refused). Its
# rows are small, so the row limit does not cover it. The limit is placed inside that gap.
RESHAPE_LIMIT = 1_048_576


# ------------------------------------------------------------------------------------- values
@dataclass(frozen=True)
class Judgement:
    """One op on its own: MAPPED, or the status words of the first rule it fails, and why."""

    status: str
    detail: str | None = None
    fix: str | None = None
    evidence: Refs = ()
    confidence: str = CONFIRMED
    code: str | None = None  # the problem code, when not the one of its status words

    @property
    def mappable(self) -> bool:
        return self.status == MAPPED


@dataclass(frozen=True)
class OpVerdict:
    """Where one op runs and why."""

    index: int
    name: str
    version: int
    target: str  # "edgetpu" | "cpu"
    reason: str  # the compiler's status words where known
    detail: str | None = None
    fix: str | None = None
    confidence: str = CONFIRMED
    subgraph: int | None = None  # which Edge TPU subgraph (0-based), for target "edgetpu"
    code: str | None = field(default=None, compare=False)  # the problem code of the rule that fired

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "name": self.name, "version": self.version, "target": self.target,
                "reason": self.reason, "detail": self.detail, "confidence": self.confidence,
                "subgraph": self.subgraph}


@dataclass(frozen=True)
class Problem:
    """Something that keeps ops (or the whole model) off the Edge TPU, with what to do about it."""

    code: str
    message: str
    hint: str | None = None
    ops: tuple[int, ...] = ()
    fatal: bool = False  # the compiler would refuse the whole model
    status: str | None = None  # for fatal problems: the words every op gets
    confidence: str = CONFIRMED

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "hint": self.hint, "ops": list(self.ops),
                "fatal": self.fatal, "confidence": self.confidence}


@dataclass(frozen=True)
class OpContext:
    """What a constraint looks at: the op, its tensors, the model, the target runtime."""

    info: ModelInfo
    g: SubgraphInfo
    op: OpInfo
    ins: list[TensorInfo | None]
    outs: list[TensorInfo | None]
    min_runtime: int

    @property
    def activations(self) -> list[TensorInfo]:
        return [t for t in self.ins + self.outs if t is not None and not t.is_constant]

    def const_ints(self, pos: int) -> list[int] | None:
        t = self.ins[pos] if pos < len(self.ins) else None
        if t is None or not t.is_constant or t.dtype not in ("int32", "int64"):
            return None
        v = self.info.constant_value(t)
        return None if v is None else [int(x) for x in v.reshape(-1)]


#: A constraint's test: None when the op meets it, else what is wrong (or (what, fix)).
Test = Callable[[OpContext], "str | tuple[str, str] | None"]


@dataclass(frozen=True)
class Constraint:
    """One condition an op must meet to be mapped, with what the compiler says when it is not."""

    test: Test
    status: str
    fix: str | None
    evidence: Refs
    confidence: str = UNCERTAIN
    code: str | None = None  # the problem code, when not the one of its status words
    looked_for: str = ""     # for an uncertain constraint: the evidence searched for and not found


@dataclass(frozen=True)
class OpRule:
    """A supported op: the Edge TPU runtime it needs, its constant params and its constraints."""

    min_runtime: int = 10
    params: tuple[tuple[int, str], ...] = ()  # (input position, what it is): must be constant
    constraints: tuple[Constraint, ...] = ()


# ------------------------------------------------------------------------------------ helpers
def _shape(t: TensorInfo) -> str:
    return "x".join(map(str, t.shape)) or "scalar"


def _normalize_axes(axes: Iterable[int], rank: int) -> set[int]:
    return {a + rank if a < 0 else a for a in axes}


def _elements(t: TensorInfo) -> int:
    n = 1
    for d in t.shape:
        n *= d
    return n


# ------------------------------------------------------------------------ common constraints
def _data_types(c: OpContext) -> tuple[str, str] | None:
    bad = [t for t in c.activations if t.dtype not in _QUANT_TYPES and not t.is_variable]
    bad += [t for t in c.ins if t is not None and t.is_constant and t.dtype not in _CONST_OK_TYPES]
    bad += [t for t in c.ins if t is not None and t.is_variable and t.dtype not in _QUANT_TYPES | {"int16"}]
    if not bad:
        return None
    types = sorted({t.dtype for t in bad})
    fix = FIX_QUANTIZE if set(types) & FLOAT_DTYPES else (
        "use 8-bit activations (no 16x8 quantization)" if "int16" in types else FIX_MOVE_TO_END)
    return f"works on {', '.join(types)} tensors; the Edge TPU computes on int8/uint8 only", fix


def _runtime(c: OpContext) -> tuple[str, str] | None:
    need = RULES[c.op.name].min_runtime
    if need <= c.min_runtime:
        return None
    return (f"{c.op.name} needs Edge TPU runtime {need}; compiling for runtime {c.min_runtime}",
            f"compile with --min-runtime {need} (the device then needs libedgetpu runtime {need} or newer)")


def _constant_params(c: OpContext) -> str | None:
    for pos, what in RULES[c.op.name].params:
        t = c.ins[pos] if pos < len(c.ins) else None
        if t is not None and not t.is_constant:
            return f"the {what} (input {pos}) is computed at run time"
    return None


def _rank(c: OpContext) -> str | None:
    for t in c.activations:
        if len(t.shape) > 3 and any(d > 1 for d in t.shape[:-3]):
            return f"tensor {t.name!r} is {_shape(t)}: only the 3 innermost dimensions may exceed 1"
    return None


def _row_size(limit: int, seen: bool) -> Test:
    """Rows (the two innermost dimensions) over ``limit``; ``seen``: a real compile refused rows this large."""
    def test(c: OpContext) -> str | None:
        for t in c.activations:
            row = t.shape[-1] * (t.shape[-2] if len(t.shape) > 1 else 1) if t.shape else 1
            if row > limit:
                why = (f"real compiles refuse rows from {ROW_REFUSED:,}" if seen
                       else f"~{ROW_LIMIT:,}; heuristic")
                return (f"tensor {t.name!r} is {_shape(t)}: its two innermost dimensions hold {row:,} values, more "
                        f"than the Edge TPU maps ({why})")
        return None

    test.__name__ = "_row_size_refused" if seen else "_row_size"
    return test


def _transpose_size(limit: int, seen: bool) -> Test:
    def test(c: OpContext) -> str | None:
        t = c.ins[0]
        if t is not None and _elements(t) > limit:
            why = f"real compiles refuse it from {TRANSPOSE_REFUSED:,}" if seen else f"~{TRANSPOSE_LIMIT:,}; heuristic"
            return (f"transposes {_elements(t):,} values ({_shape(t)}); the Edge TPU maps TRANSPOSE only on small "
                    f"tensors ({why})")
        return None

    test.__name__ = "_transpose_size_refused" if seen else "_transpose_size"
    return test


COMMON: tuple[Constraint, ...] = (
    Constraint(_data_types, DATA_TYPE, None, EV_FLOAT_IO + ("log:v14_not_quantized.txt",), CONFIRMED),
    # Compiler 15 (default runtime 13) calls TRANSPOSE (runtime 14) "Operation not supported"; the
    # other runtime numbers are Coral's table.
    Constraint(_runtime, NOT_SUPPORTED, None, DOCS + ("log:v15_partial_yolov5s_stdout.txt",), CONFIRMED,
               code="runtime"),
    Constraint(_constant_params, NOT_CONSTANT, "make weights and shape/axis params constants of the model "
               "(freeze the graph)", DOCS, looked_for="a compiled pair or log with a weight or shape computed at "
               "run time (Keras and the TFLite converter fold them: none seen)"),
    Constraint(_rank, RANK, "keep tensors at most 4-D with a batch of 1",
               EV_SRGAN + ("report:google-coral/edgetpu#708",), CONFIRMED),
    # A size limit is confirmed where a real compile refused as large a tensor, uncertain in the gap
    # between the largest mapped and the smallest refused (where the limit is placed).
    Constraint(_row_size(ROW_REFUSED - 1, True), UNSPECIFIED, FIX_ROWS, EV_YOLOV8N, CONFIRMED),
    Constraint(_row_size(ROW_LIMIT, False), UNSPECIFIED, FIX_ROWS,
               ("log:v16_full_yolov5s_160.log", "log:v16_partial_yolov5s_224_stdout.txt"), UNCERTAIN,
               looked_for="a compile with a row between the largest mapped (134,400) and the smallest refused "
               "(230,400; 199,920 inferred): the limit sits in that gap"),
)


# ---------------------------------------------------------------------------- per-op constraints
def _no_fused_activation(c: OpContext) -> str | None:
    if c.op.options.get("fused_activation_function", 0):
        return f"{c.op.name} with a fused activation function"
    return None


NO_FUSED_ACTIVATION = Constraint(_no_fused_activation, UNSPECIFIED,
                                 "apply the activation as a separate layer (ReLU after the pooling/concatenation)",
                                 DOCS, looked_for="a pooling or concatenation with a fused activation in a compiled "
                                 "pair (converters rarely fuse one there)")


def _equal_dilation(c: OpContext) -> str | None:
    o = c.op.options
    if o.get("dilation_w_factor", 1) != o.get("dilation_h_factor", 1):
        return f"dilation {o['dilation_h_factor']}x{o['dilation_w_factor']} differs in x and y"
    return None


CONV = (Constraint(_equal_dilation, UNSPECIFIED, "use the same dilation rate in both spatial dimensions", DOCS,
                   looked_for="a compiled convolution with unequal x/y dilation"),)


def _fc_keep_num_dims(c: OpContext) -> str | None:
    return "keep_num_dims=True (a Dense layer applied to a 3-D or 4-D input)" if c.op.options.get("keep_num_dims") \
        else None


def _fc_weights_format(c: OpContext) -> str | None:
    return "weights are not in the default format" if c.op.options.get("weights_format", 0) != 0 else None


# Per-channel FULLY_CONNECTED weights (TF >= 2.16's default) are mapped: Coral's documentation and
# the TFLM convention expect per-tensor weights, but compiler 16 mapped the per-channel Dense layers
# (256 and 1024 scales) of ricardodeazambuja/LibrEdgeTPU's templates (ledger pairs dense_256, dense_1024).
# The rule that refused them is gone; `edgekit quantize` still writes per-tensor Dense weights.
EV_PER_CHANNEL_FC: Refs = ("pair:ricardodeazambuja+LibrEdgeTPU__libredgetpu__templates__dense_256",
                           "pair:ricardodeazambuja+LibrEdgeTPU__libredgetpu__templates__dense_1024")


FULLY_CONNECTED = (
    Constraint(_fc_keep_num_dims, VERSION, "Flatten (or Reshape to 2-D) before the Dense layer", DOCS,
               looked_for="a compiled FULLY_CONNECTED with keep_num_dims (edgetpu.md: 'GitHub notes' only)"),
    Constraint(_fc_weights_format, UNSPECIFIED, "convert with the default fully-connected weights format", DOCS,
               looked_for="a compiled FULLY_CONNECTED with shuffled weights"),
)
# Coral documents a 1-D FULLY_CONNECTED output and constant weights; compiler 16 mapped all 18 of the
# vision transformer in ledger pair prbodmann/Coral-TPU efficient_l3: 49x128 and 49x512 outputs, and
# the attention products whose "weights" are activations computed at run time (EV_FC_2D).
EV_FC_2D: Refs = ("pair:prbodmann+Coral-TPU__transformer__models__efficient_l3",)


def _softmax_axis(c: OpContext) -> str | None:
    t = c.ins[0]
    if t is not None and t.shape and t.shape[-1] > 16000:
        return f"softmax over {t.shape[-1]:,} values; the Edge TPU softmax takes at most 16,000"
    return None


# Coral documents "1-D input only"; the yolov8n log shows SOFTMAX on 1x4x8400x16 as otherwise
# mappable ("More than one subgraph is not supported"), and the yolov8s 160 log maps it: only the
# documented 16,000-value limit is kept, on the softmax axis.
SOFTMAX = (Constraint(_softmax_axis, UNSPECIFIED, "drop the final softmax (take argmax of the logits) or apply "
                      "it on the CPU", DOCS, looked_for="a compiled softmax over more than 16,000 values"),)


def _strided_slice_strides(c: OpContext) -> str | None:
    strides = c.const_ints(3)
    if strides is not None and any(s != 1 for s in strides):
        return f"strides {strides}; only strides of 1 are supported"
    return None


def _strided_slice_masks(c: OpContext) -> str | None:
    o = c.op.options
    return "uses ellipsis_mask or new_axis_mask" if o.get("ellipsis_mask") or o.get("new_axis_mask") else None


STRIDED_SLICE = (
    Constraint(_strided_slice_strides, STRIDES, "slice with stride 1 (use a pooling or a strided convolution "
               "to subsample)", DOCS + ("log:v15_partial_yolov5s_stdout.txt",), CONFIRMED),
    Constraint(_strided_slice_masks, UNSPECIFIED, "index with plain begin/end ranges", DOCS,
               looked_for="a compiled STRIDED_SLICE with ellipsis_mask or new_axis_mask"),
)


def _reduce_axes(c: OpContext) -> str | None:
    t = c.ins[0]
    axes = c.const_ints(1)
    if t is None or axes is None or len(t.shape) < 4:
        return None
    axes_n = _normalize_axes(axes, len(t.shape))
    if 0 in axes_n:
        return f"reduce over the batch dimension (axis {sorted(axes_n)})"
    if c.op.name == "MEAN" and len(t.shape) - 1 in axes_n and t.shape[-1] % 4:
        return f"mean over the channel dimension of depth {t.shape[-1]} (not a multiple of 4)"
    return None


def _mean_positions(c: OpContext) -> str | None:
    t = c.ins[0]
    positions = 1
    for d in (t.shape[:-1] if t is not None else ()):
        positions *= d
    if positions > MEAN_POSITIONS_LIMIT:
        return (f"mean over a {_shape(t)} input ({positions:,} positions); the Edge TPU maps MEAN only on smaller "
                f"inputs (~{MEAN_POSITIONS_LIMIT:,} positions; heuristic)")
    return None


REDUCE = (Constraint(_reduce_axes, UNSPECIFIED, "reduce over x/y only, never over the batch dimension", DOCS,
                     looked_for="a compiled MEAN/SUM over the batch, or over a channel depth not a multiple of 4"),)
# google-coral/edgetpu#461: Coral's engineer found MEAN on 1x256x128x3 (32,768 positions) not mapped;
# split into 1x64x128x3 pieces (8,192) it mapped. The limit is placed inside that gap.
MEAN_POSITIONS_LIMIT = 16_384
MEAN = REDUCE + (Constraint(_mean_positions, UNSPECIFIED, "split the input (e.g. into horizontal bands) and "
                            "average the parts, or pool first (AVERAGE_POOL_2D) to fewer positions",
                            ("report:google-coral/edgetpu#461",), UNCERTAIN,
                            looked_for="a compile with a MEAN between 8,192 and 32,768 positions"),)


def _pad_batch(c: OpContext) -> str | None:
    pads = c.const_ints(1)
    t = c.ins[0]
    if pads and t is not None and len(t.shape) >= 4 and any(pads[:2]):
        return f"pads the batch dimension by {pads[:2]}"
    return None


def _split_outer(c: OpContext) -> str | None:
    axis = c.const_ints(0)
    t = c.ins[1] if len(c.ins) > 1 else None
    if axis is None or t is None or not t.shape:
        return None
    a = axis[0] + len(t.shape) if axis[0] < 0 else axis[0]
    if a == 0 and t.shape[0] > 1:
        return f"splits {_shape(t)} along its first dimension"
    return None


# The vision transformer of ledger pair prbodmann/Coral-TPU efficient_l3 splits its attention heads
# along the first dimension of 4x49xN tensors: compiler 16 left all 4 of those SPLITs on the CPU and
# mapped everything around them; yamnet's split along a first dimension of 1 and split_concat's
# along channels mapped.
SPLIT = (Constraint(_split_outer, UNSPECIFIED, "split along an inner dimension (keep the leading dimension 1)",
                    EV_FC_2D, UNCERTAIN, looked_for="more compiles splitting along a first dimension larger than "
                    "1 (one model shows it, without a log to give the compiler's words)"),)


def _expand_dims(c: OpContext) -> str | None:
    return "EXPAND_DIMS is left on the CPU by the compiles seen (heuristic)"


# Coral's table lists EXPAND_DIMS (runtime 13), but in the three compiles of ledger repository
# antaramol/ref-signs (a 1-D CNN: EXPAND_DIMS on 1x28x6 with axis -3 before each CONV_2D; packages
# needing runtime 14, so compiler 16) the first EXPAND_DIMS was refused and cut the model after it.
# No compile shows one mapped; the compiler's words for it are unknown.
EXPAND_DIMS = (Constraint(_expand_dims, UNSPECIFIED, "insert the unit dimension with RESHAPE instead (a Keras "
                          "Reshape layer), which maps", ("pair:antaramol+ref-signs__modelos__quantized_model",
                                                          "pair:antaramol+ref-signs__quantized2_model"), UNCERTAIN,
                          looked_for="a compile that maps an EXPAND_DIMS, or a log giving the compiler's words for it "
                          "(one repository's models show it refused)"),)


def _pack_batch(c: OpContext) -> str | None:
    out = c.outs[0]
    axis = c.op.options.get("axis", 0)
    if axis < 0:
        axis += len(out.shape)
    if axis == 0 and len(out.shape) >= 4 and out.shape[0] > 1:
        return "packs along the batch dimension"
    return None


def _concat_constant(c: OpContext) -> str | None:
    consts = [t for t in c.ins if t is not None and t.is_constant]
    if not consts:
        return None
    if len(c.ins) != 2:
        return (f"{len(c.ins)} inputs, {len(consts)} of them constant; with a constant input there must be "
                "exactly 2 inputs")
    v = c.info.constant_value(consts[0])
    q = consts[0].quantization
    zero = q.zero_point if q else 0
    if v is None or bool((v != zero).any()):
        return "a constant input that is not all zeros (only zero-padding is supported)"
    return None


def _resize_rank(c: OpContext) -> str | None:
    t, out = c.ins[0], c.outs[0]
    if len(t.shape) != 4 or len(out.shape) != 4:
        return f"{_shape(t)} -> {_shape(out)}; input and output must be 3-D images (H, W, C, as 1xHxWxC)"
    return None


def _bilinear_from_one(c: OpContext) -> str | None:
    t, out = c.ins[0], c.outs[0]
    if not c.op.options.get("align_corners", False):
        return None
    for axis, label in ((1, "height"), (2, "width")):
        i, o = t.shape[axis], out.shape[axis]
        if i != o and min(i, o) == 1:  # a size 0 is _bilinear_factor's
            return (f"{label} {i} -> {o} with align_corners=True: no integer scale factor (the corner-aligned "
                    "scale is undefined for a size of 1)")
    return None


def _bilinear_factor(c: OpContext) -> str | None:
    t, out = c.ins[0], c.outs[0]
    align = c.op.options.get("align_corners", False)
    for axis, label in ((1, "height"), (2, "width")):
        i, o = t.shape[axis], out.shape[axis]
        if i == o:
            continue
        if min(i, o) <= 0:
            return f"{label} {i} -> {o}: a size 0 has no scale factor"
        if align:
            a, b = i - 1, o - 1
        else:
            a, b = i, o
        if max(a, b) % min(a, b):
            return (f"{label} {i} -> {o}{' (align_corners)' if align else ''}: not an integer scale factor; the "
                    "Edge TPU resizes bilinearly by integer factors only (heuristic)")
    return None


RESIZE_RANK = Constraint(_resize_rank, UNSPECIFIED, "resize images (1, H, W, C) in NHWC layout", DOCS,
                         looked_for="a compiled resize of a tensor that is not 4-D")


# Large resizes are refused ("unspecified limitation"), nearest-neighbour or bilinear. The compiler
# 14.1 log of mistake0316/Google-Coral-Style-Transfer's decoder maps its x2 RESIZE_NEAREST_NEIGHBOR
# to 1x64x64x256 and 1x128x128x128 (2,097,152 values) and refuses the one to 1x256x256x64
# (4,194,304); google-coral/edgetpu#31's bilinear x2 to 512x512x32 (8.4M) was refused where 128x128x32
# mapped. The limit is placed inside that gap, on the output's size.
RESIZE_LIMIT = 3_145_728


def _resize_size(c: OpContext) -> str | None:
    out = c.outs[0]
    if _elements(out) > RESIZE_LIMIT:
        return (f"resizes to {_shape(out)} ({_elements(out):,} values); the Edge TPU maps resizes only to smaller "
                f"outputs (~{RESIZE_LIMIT:,}; heuristic)")
    return None


RESIZE_SIZE = Constraint(
    _resize_size, UNSPECIFIED, "resize to a smaller output (fewer channels or a lower resolution), or move the "
    "last resize to the CPU after the Edge TPU part",
    ("pair:mistake0316+Google-Coral-Style-Transfer__model__dark_Decoder", "report:google-coral/edgetpu#31"),
    UNCERTAIN, looked_for="a compile resizing to between 2,097,152 (mapped) and 4,194,304 (refused) values")
# Coral's table says of both resizes that "depending on input/output size, this operation might not be
# mapped to the Edge TPU to avoid loss in precision", with no numbers. For nearest-neighbour resizing
# the factor does not matter: a Model Maker EfficientDet-Lite0 (320: its BiFPN upsamples 3x3 -> 5x5)
# compiled by compiler 16 maps all 12 of its RESIZE_NEAREST_NEIGHBOR (a published log:
# "RESIZE_NEAREST_NEIGHBOR 12 Mapped to Edge TPU", 2 classes), so the integer-factor heuristic applies
# to RESIZE_BILINEAR only. Large resizes of either kind are refused: RESIZE_SIZE.
FIX_BILINEAR = ("resize by an integer factor (e.g. x2) without align_corners from a size of 1, or move the resize "
                "after the last Edge TPU op")
RESIZE_BILINEAR = (
    RESIZE_RANK, RESIZE_SIZE,
    # deeplab's 1 -> 33 with align_corners (its image pooling branch) stays on the CPU in both pairs.
    Constraint(_bilinear_from_one, UNSPECIFIED, FIX_BILINEAR, EV_DEEPLAB, CONFIRMED),
    Constraint(_bilinear_factor, UNSPECIFIED, FIX_BILINEAR, DOCS, UNCERTAIN,
               looked_for="compiled RESIZE_BILINEAR with non-integer factors (only deeplab's 1 -> 33 with "
               "align_corners is seen refused; x2 maps)"))


def _squeeze(c: OpContext) -> str | None:
    t, out = c.ins[0], c.outs[0]
    leading = 0
    for d in t.shape:
        if d != 1:
            break
        leading += 1
    # Fine when the output is the input minus some of its leading 1s (no relayout needed).
    if not any(tuple(out.shape) == tuple(t.shape[k:]) for k in range(leading + 1)):
        return f"{_shape(t)} -> {_shape(out)} squeezes an inner dimension (needs a relayout)"
    return None


def _prelu(c: OpContext) -> str | None:
    alpha = c.ins[1] if len(c.ins) > 1 else None
    if alpha is not None and sum(1 for d in alpha.shape[:-1] if d > 1):
        return f"alpha is {_shape(alpha)}; it must be 1-D (only the innermost dimension > 1)"
    return None


FIX_TRANSPOSE = "transpose on the CPU after the Edge TPU part, or keep the layout NHWC"
TRANSPOSE = (
    Constraint(_transpose_size(TRANSPOSE_REFUSED - 1, True), UNSPECIFIED, FIX_TRANSPOSE,
               ("pair:G-aad-a+ddu-eksamen__best_full_integer_quant",) + EV_YOLOV8N, CONFIRMED),
    Constraint(_transpose_size(TRANSPOSE_LIMIT, False), UNSPECIFIED, FIX_TRANSPOSE,
               ("report:jveitchmichaelis/edgetpu-yolo",), UNCERTAIN,
               looked_for="a compile transposing between 82,944 (mapped) and 104,000 (refused) values"))


def _reshape_size(c: OpContext) -> str | None:
    t = c.ins[0]
    if _elements(t) > RESHAPE_LIMIT:
        return (f"reshapes {_elements(t):,} values ({_shape(t)} -> {_shape(c.outs[0])}); the Edge TPU maps "
                f"RESHAPE only on smaller tensors (~{RESHAPE_LIMIT:,}; heuristic)")
    return None

_AXIS = ((1, "axis"),)
#: The supported ops (coral.ai supported-operations table), by TFLite builtin name. Runtime numbers
#: for the newer ops come from the coral.ai table as remembered in ../shared/reference/edgetpu.md.
RULES: dict[str, OpRule] = {
    "ADD": OpRule(), "SUB": OpRule(), "MUL": OpRule(), "MAXIMUM": OpRule(), "MINIMUM": OpRule(),
    "AVERAGE_POOL_2D": OpRule(constraints=(NO_FUSED_ACTIVATION,)),
    "MAX_POOL_2D": OpRule(constraints=(NO_FUSED_ACTIVATION,)),
    "CONCATENATION": OpRule(constraints=(NO_FUSED_ACTIVATION, Constraint(
        _concat_constant, UNSPECIFIED, "feed the constant as a model input, or use PAD for zero padding", DOCS,
        looked_for="a compiled CONCATENATION with a constant input"))),
    "CONV_2D": OpRule(params=((1, "filter"), (2, "bias")), constraints=CONV),
    "DEPTHWISE_CONV_2D": OpRule(params=((1, "filter"), (2, "bias")), constraints=CONV),
    "TRANSPOSE_CONV": OpRule(13, ((0, "output shape"), (1, "filter"), (3, "bias"))),
    "FULLY_CONNECTED": OpRule(constraints=FULLY_CONNECTED),  # run-time weights map: EV_FC_2D
    "EXPAND_DIMS": OpRule(13, _AXIS, EXPAND_DIMS), "SQUEEZE": OpRule(constraints=(Constraint(
        _squeeze, UNSPECIFIED, "squeeze only leading dimensions of size 1", DOCS,
        looked_for="a compiled SQUEEZE of an inner dimension"),)),
    "L2_NORMALIZATION": OpRule(), "LOGISTIC": OpRule(), "TANH": OpRule(),
    "RELU": OpRule(), "RELU6": OpRule(), "RELU_N1_TO_1": OpRule(),
    "LSTM": OpRule(14), "UNIDIRECTIONAL_SEQUENCE_LSTM": OpRule(14),
    "MEAN": OpRule(params=_AXIS, constraints=MEAN), "SUM": OpRule(13, _AXIS, REDUCE),
    "REDUCE_MAX": OpRule(14, _AXIS, REDUCE), "REDUCE_MIN": OpRule(14, _AXIS, REDUCE),
    "PACK": OpRule(13, constraints=(Constraint(_pack_batch, UNSPECIFIED, "pack along an inner dimension", DOCS,
                                               looked_for="a compiled PACK along the batch"),)),
    "PAD": OpRule(params=((1, "paddings"),), constraints=(Constraint(
        _pad_batch, UNSPECIFIED, "do not pad the batch dimension", DOCS,
        looked_for="a compiled PAD of the batch dimension"),)),
    "PRELU": OpRule(13, ((1, "alpha"),), (Constraint(_prelu, UNSPECIFIED, "Keras PReLU with shared_axes=[1, 2]",
                                                     DOCS, looked_for="a compiled PRELU with a 2-D or 3-D alpha"),)),
    "QUANTIZE": OpRule(13),
    # A computed shape input makes the whole model dynamic: see fatal_problems.
    "RESHAPE": OpRule(constraints=(Constraint(
        _reshape_size, UNSPECIFIED, "reshape smaller tensors (e.g. reshape each detection level after slicing it), "
        "or leave the reshape to the CPU after the Edge TPU part",
        DOCS + ("report:ultralytics/yolov5#10527", "report:Team-Protom/road-signs-recognition-model"), UNCERTAIN,
        looked_for="a compile reshaping between 408,000 (mapped) and 1,632,000 (refused) values"),)),
    "RESIZE_BILINEAR": OpRule(params=((1, "size"),), constraints=RESIZE_BILINEAR),
    "RESIZE_NEAREST_NEIGHBOR": OpRule(params=((1, "size"),), constraints=(RESIZE_RANK, RESIZE_SIZE)),
    "RSQRT": OpRule(14), "SQUARED_DIFFERENCE": OpRule(14),
    "SLICE": OpRule(params=((1, "begin"), (2, "size"))),
    "SOFTMAX": OpRule(constraints=SOFTMAX),
    "SPACE_TO_DEPTH": OpRule(),
    "SPLIT": OpRule(params=((0, "axis"),), constraints=SPLIT),
    "STRIDED_SLICE": OpRule(params=((1, "begin"), (2, "end"), (3, "strides")), constraints=STRIDED_SLICE),
    "TRANSPOSE": OpRule(14, ((1, "permutation"),), TRANSPOSE),
}


# ------------------------------------------------------------------------------------ one op
def judge(info: ModelInfo, g: SubgraphInfo, op: OpInfo, min_runtime: int = COMPILER_DEFAULT_MIN_RUNTIME
          ) -> Judgement:
    """Whether ``op`` could run on the Edge TPU on its own (before partitioning), and if not why."""
    name = op.name
    ins = [g.tensor(i) for i in op.inputs]
    outs = [g.tensor(i) for i in op.outputs]
    if name == "CUSTOM":
        floats = any(t is not None and t.dtype in FLOAT_DTYPES for t in ins + outs)
        if op.custom_code in KNOWN_CUSTOM_OPS:
            return Judgement(DATA_TYPE, f"custom op {op.custom_code!r} runs on the CPU", FIX_MOVE_TO_END,
                             ("report:tensorflow/models#10695",), CONFIRMED)
        # Its place is certain (no custom op but the compiler's own runs on the Edge TPU); whether the compiler
        # accepts the model at all is the uncertain `custom_op` problem.
        return Judgement(DATA_TYPE if floats else NOT_SUPPORTED, f"custom op {op.custom_code!r} runs on the CPU",
                         FIX_MOVE_TO_END, EV_DECODERS, CONFIRMED)
    rule = RULES.get(name)
    if rule is not None and (not ins or ins[0] is None or not outs or outs[0] is None):
        raise InvalidModelError(f"op #{op.index} {name} has no input or no output tensor",
                                "re-export the model; TensorFlow Lite would not run it either")
    c = OpContext(info, g, op, ins, outs, min_runtime)
    if rule is None:
        # float/int16 data is reported as a data-type problem (DEQUANTIZE in real logs); index
        # outputs (int32/int64 of ARG_MAX and the like) do not change the verdict "not supported".
        odd = sorted({t.dtype for t in c.activations if t.dtype in FLOAT_DTYPES | {"int16"}})
        if odd:
            return Judgement(DATA_TYPE, f"{name} on {', '.join(odd)} data, and {name} is not an Edge TPU op",
                             FIX_QUANTIZE if set(odd) & FLOAT_DTYPES else FIX_MOVE_TO_END, EV_FLOAT_IO, CONFIRMED)
        return Judgement(NOT_SUPPORTED, f"{name} is not in the Edge TPU's supported-op table", FIX_MOVE_TO_END,
                         DOCS + EV_DEEPLAB, CONFIRMED)
    if name == "QUANTIZE" and any(t.dtype in FLOAT_DTYPES for t in ins if t is not None) \
            and all(t.dtype in _QUANT_TYPES for t in outs if t is not None):
        return Judgement(UNSPECIFIED, f"quantizes a {ins[0].dtype} input: the model has float I/O",
                         "use integer (uint8/int8) model inputs: `edgekit quantize` makes them", EV_FLOAT_IO,
                         CONFIRMED)
    for k in COMMON + rule.constraints:
        why = k.test(c)
        if why is not None:
            detail, fix = why if isinstance(why, tuple) else (why, k.fix)
            return Judgement(k.status, detail, fix, k.evidence, k.confidence, k.code)
    seen = SEEN_MAPPED.get(name)
    return Judgement(MAPPED, evidence=seen or DOCS, confidence=CONFIRMED if seen else UNCERTAIN)


# ----------------------------------------------------------------------- whole-model failures
@dataclass(frozen=True)
class ModelRule:
    """A rule about the whole model (a :class:`Problem` code), with its evidence."""

    confidence: str
    evidence: Refs
    looked_for: str = ""


MODEL_RULES: dict[str, ModelRule] = {
    "op_version": ModelRule(CONFIRMED, ("log:v16_op_version_exp.txt", "log:v16_op_version_quantize.txt",
                                        "log:v16_op_version_transpose_conv.txt")),
    # The log shows exactly a RESHAPE whose shape a SHAPE op computes (a Keras model with a -1 batch);
    # the other shape-setting inputs in SHAPE_INPUTS follow TFLite's kernels (SetTensorToDynamic).
    "dynamic_shapes": ModelRule(CONFIRMED, EV_DYNAMIC),
    "custom_op": ModelRule(UNCERTAIN, EV_UNRESOLVED + EV_DECODERS, "a compiler 15/16 log of a model with a custom "
                           "op other than TFLite_Detection_PostProcess"),
    "control_flow": ModelRule(UNCERTAIN, DOCS, "a compiled pair or log of a model with WHILE/IF subgraphs"),
    "not_quantized": ModelRule(CONFIRMED, ("log:v14_not_quantized.txt",)),
}

#: Inputs that set an op's output shape. When one is computed at run time, TensorFlow Lite makes
#: the output a dynamic-sized tensor, and the compiler, a delegate for static-sized tensors only,
#: fails: "Attempting to use a delegate that only supports static-sized tensors with a graph that
#: has dynamic-sized tensors" (TFLite's kernels call SetTensorToDynamic for exactly these; evidence:
#: EV_DYNAMIC). A -1 in ``shape_signature`` alone does not: TFLite allocates the stored shape.
SHAPE_INPUTS: dict[str, tuple[int, ...]] = {
    "RESHAPE": (1,), "RESIZE_BILINEAR": (1,), "RESIZE_NEAREST_NEIGHBOR": (1,), "STRIDED_SLICE": (1, 2, 3),
    "SLICE": (1, 2), "PAD": (1,), "PADV2": (1,), "MIRROR_PAD": (1,), "TILE": (1,), "BROADCAST_TO": (1,),
    "FILL": (0,), "MEAN": (1,), "SUM": (1,), "REDUCE_MAX": (1,), "REDUCE_MIN": (1,), "REDUCE_PROD": (1,),
    "REDUCE_ANY": (1,), "TRANSPOSE": (1,), "EXPAND_DIMS": (1,), "SPLIT": (0,), "SPLIT_V": (1, 2),
    "TRANSPOSE_CONV": (0,), "SPACE_TO_BATCH_ND": (1, 2), "BATCH_TO_SPACE_ND": (1, 2), "ARG_MAX": (1,),
    "ARG_MIN": (1,), "ONE_HOT": (1,), "TOPK_V2": (1,), "RANGE": (0, 1, 2), "WHERE": (0,),
    "NON_MAX_SUPPRESSION_V4": (2,), "NON_MAX_SUPPRESSION_V5": (2,),
}
#: Ops whose output size depends on the data itself: always dynamic.
ALWAYS_DYNAMIC = {"UNIQUE"}


def dynamic_ops(g: SubgraphInfo) -> list[tuple[OpInfo, str]]:
    """Ops whose output shape is only known at run time, with what makes it so."""
    out = []
    for op in g.ops:
        if op.name in ALWAYS_DYNAMIC:
            out.append((op, f"{op.name} output sizes depend on the data"))
            continue
        for pos in SHAPE_INPUTS.get(op.name, ()):
            t = g.tensor(op.inputs[pos]) if pos < len(op.inputs) else None
            if t is not None and not t.is_constant:
                why = f"{op.name}'s input {pos} ({t.name!r}), which sets its output shape, is computed at run time"
                out.append((op, why))
                break
    return out


def fatal_problems(info: ModelInfo) -> list[Problem]:
    """What makes edgetpu_compiler refuse the whole model (each problem says so, and how to fix it)."""
    g = info.main
    out: list[Problem] = []
    # Every op of every subgraph (control-flow bodies too) must parse. One message per (op, version).
    unparsable: dict[tuple[str, int], str] = {}
    main_unparsable: list[int] = []
    for sub in info.subgraphs:
        for op in sub.ops:
            why = version_problem(op.name, op.version)
            if why:
                unparsable.setdefault((op.name, op.version), why)
                if sub is g:
                    main_unparsable.append(op.index)
    if unparsable:
        whys = list(unparsable.values())
        out.append(Problem(
            "op_version", "edgetpu_compiler 16 cannot parse this model ('Didn't find op for builtin opcode'): "
            + "; ".join(whys[:3]) + (f"; and {len(whys) - 3} more" if len(whys) > 3 else ""),
            "convert with op versions TFLite 2.5 knows: `edgekit quantize` checks them; with plain TensorFlow "
            "avoid int16 activations and newer op features", tuple(main_unparsable), True, PARSE_FAILED,
            MODEL_RULES["op_version"].confidence))
    dyn = dynamic_ops(g)
    if dyn:
        first, why = dyn[0]
        out.append(Problem(
            "dynamic_shapes", f"op #{first.index} makes a dynamic-sized tensor ({why}): the compiler fails with "
            "'Attempting to use a delegate that only supports static-sized tensors'",
            "convert with a fixed batch of 1 so that shapes fold to constants: keras.Input(shape, batch_size=1), "
            "or a tf.function with TensorSpec([1, H, W, C]); `edgekit quantize` does this",
            tuple(op.index for op, _ in dyn), True, DYNAMIC, MODEL_RULES["dynamic_shapes"].confidence))
    return out


# ------------------------------------------------------------------------------ partitioning
def partition(g: SubgraphInfo, mappable: list[bool]) -> list[tuple[bool, list[int]]]:
    """TensorFlow Lite's delegate partitioning of ``g``'s ops into alternating runs.

    Each run has one kind (mappable or not); it starts with the lowest-index ready op and absorbs
    every op of its kind whose inputs are ready, transitively. Returns [(kind, op indices)] in run
    order. O((ops + tensor uses) log ops).
    """
    n = len(g.ops)
    producer: dict[int, int] = {}
    for op in g.ops:
        for t in op.outputs:
            if t >= 0:
                producer[t] = op.index
    waiting = [0] * n
    consumers: dict[int, list[int]] = {}
    for op in g.ops:
        deps = {t for t in op.inputs if t >= 0 and t in producer}
        waiting[op.index] = len(deps)
        for t in deps:
            consumers.setdefault(t, []).append(op.index)
    ready: dict[bool, list[int]] = {True: [], False: []}
    for i in range(n):
        if waiting[i] == 0:
            heapq.heappush(ready[mappable[i]], i)
    runs: list[tuple[bool, list[int]]] = []
    done = 0
    while done < n:
        if not ready[True] and not ready[False]:  # a cycle: cannot happen in a valid model
            rest = [i for i in range(n) if waiting[i] > 0]
            runs.append((False, rest))
            break
        kind = mappable[min(h[0] for h in ready.values() if h)]
        run: list[int] = []
        heap = ready[kind]
        while heap:
            i = heapq.heappop(heap)
            run.append(i)
            done += 1
            for t in g.ops[i].outputs:
                for c in consumers.get(t, ()):
                    waiting[c] -= 1
                    if waiting[c] == 0:
                        heapq.heappush(ready[mappable[c]], c)
        runs.append((kind, sorted(run)))
    return runs


def place(g: SubgraphInfo, mappable: list[bool], multiple_subgraphs: bool = False) -> list[int | None]:
    """The Edge TPU subgraph (0, 1, ...) of every op, or None for the CPU.

    Without ``multiple_subgraphs`` (the compiler's default) only the first mappable run is an Edge
    TPU subgraph; with it (``-a``) every mappable run is one.
    """
    where: list[int | None] = [None] * len(g.ops)
    n = 0
    for kind, run in partition(g, mappable):
        if not kind or (n and not multiple_subgraphs):
            continue
        for i in run:
            where[i] = n
        n += 1
    return where


# ------------------------------------------------------------------------------------- report
@dataclass
class CheckReport:
    """The offline prediction of one compile (JSON schema: README, ``edgekit check --json``)."""

    model: str | None
    verdict: str  # "full" | "partial" | "none"
    ops: list[OpVerdict]
    subgraphs: int
    param_bytes: int
    on_chip_bytes_estimate: int | None
    off_chip_bytes_estimate: int | None
    problems: list[Problem] = field(default_factory=list)
    advice: list[str] = field(default_factory=list)
    min_runtime: int = COMPILER_DEFAULT_MIN_RUNTIME
    compiled: bool = False
    multiple_subgraphs: bool = False

    @property
    def edgetpu_ops(self) -> int:
        return sum(1 for o in self.ops if o.target == "edgetpu")

    @property
    def cpu_ops(self) -> int:
        return sum(1 for o in self.ops if o.target == "cpu")

    @property
    def fully_mappable(self) -> bool:
        return self.verdict == "full"

    @property
    def uncertain_ops(self) -> int:
        """Ops whose placement rests on no real compile (documentation or inference only)."""
        return sum(1 for o in self.ops if o.confidence == UNCERTAIN)

    @property
    def certain_cpu_ops(self) -> list[OpVerdict]:
        return [o for o in self.ops if o.target == "cpu" and o.confidence != UNCERTAIN]

    @property
    def fatal(self) -> list[Problem]:
        return [p for p in self.problems if p.fatal]

    def strict_error(self) -> CompatibilityError | None:
        """What ``check --strict`` raises (exit 7): ops certain to stay on the CPU, or None when there are none.

        Uncertainty alone does not fail: ops put on the CPU only by a rule no real compile shows
        are reported, not held against the model.
        """
        refused = [p for p in self.fatal if p.confidence == CONFIRMED]
        if refused:
            return CompatibilityError(f"edgetpu_compiler would refuse the model: {refused[0].message}",
                                      refused[0].hint or "see the problems above (or --json)")
        certain = self.certain_cpu_ops
        if not certain:
            return None
        first = certain[0]
        return CompatibilityError(f"{len(certain)} of {len(self.ops)} ops would run on the CPU"
                                  f" (first: #{first.index} {first.name}: {first.reason})",
                                  "see the advice above (or --json) for what to change")

    def split_by_type(self) -> dict[str, Counter]:
        """{"edgetpu": Counter(op name -> n), "cpu": Counter(...)}, the way a compiled pair is scored."""
        out = {"edgetpu": Counter(), "cpu": Counter()}
        for o in self.ops:
            out[o.target][o.name] += 1
        return out

    def table(self) -> list[tuple[str, int, str]]:
        """Rows of the compiler's operation log: (operator, count, status), in first-seen order."""
        counts: dict[tuple[str, str], int] = {}
        for o in self.ops:
            counts[(o.name, o.reason)] = counts.get((o.name, o.reason), 0) + 1
        return [(name, n, status) for (name, status), n in counts.items()]

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "verdict": self.verdict,
            "compiled": self.compiled,
            "min_runtime": self.min_runtime,
            "multiple_subgraphs": self.multiple_subgraphs,
            "ops": [o.to_dict() for o in self.ops],
            "summary": {
                "edgetpu_ops": self.edgetpu_ops,
                "cpu_ops": self.cpu_ops,
                "subgraphs": self.subgraphs,
                "uncertain_ops": self.uncertain_ops,
                "param_bytes": self.param_bytes,
                "on_chip_bytes_estimate": self.on_chip_bytes_estimate,
                "off_chip_bytes_estimate": self.off_chip_bytes_estimate,
            },
            "problems": [p.to_dict() for p in self.problems],
            "advice": list(self.advice),
        }


def _cut_confidence(g: SubgraphInfo, judged: list[Judgement], producer: dict[int, int]
                    ) -> tuple[list[str], list[bool]]:
    """Per op, how sure its place on the CPU is when it is cut off the one Edge TPU subgraph (sure when it
    depends on an op certain to be unmappable; else as sure as the unmappable ops it depends on, or,
    depending on none, every unmappable op before it, are), and whether it depends on such a sure op."""
    unsure = [not j.mappable and j.confidence == UNCERTAIN for j in judged]
    sure = [not j.mappable and j.confidence == CONFIRMED for j in judged]
    n = len(judged)
    depends, depends_unsure, depends_sure, out = [False] * n, [False] * n, [False] * n, []
    for i, op in enumerate(g.ops):
        parents = [p for p in (producer.get(t) for t in op.inputs) if p is not None]
        depends[i] = any(not judged[p].mappable or depends[p] for p in parents)
        depends_unsure[i] = any(unsure[p] or depends_unsure[p] for p in parents)
        depends_sure[i] = any(sure[p] or depends_sure[p] for p in parents)
        out.append(CONFIRMED if depends_sure[i] else UNCERTAIN if (depends_unsure[i] if depends[i] else any(unsure[:i]))
                   else CONFIRMED)
    return out, depends_sure


# -------------------------------------------------------------------------------------- check
def check_model(info: ModelInfo, min_runtime: int = COMPILER_DEFAULT_MIN_RUNTIME,
                multiple_subgraphs: bool = False) -> CheckReport:
    """Predict what ``edgetpu_compiler -m min_runtime [-a]`` (compiler 16) does with ``info``."""
    if min_runtime not in SUPPORTED_MIN_RUNTIMES:
        raise UsageError(f"--min-runtime {min_runtime} is not a runtime edgetpu_compiler 16 targets",
                         f"use {SUPPORTED_MIN_RUNTIMES.start}..{SUPPORTED_MIN_RUNTIMES.stop - 1} (default 14)")
    if info.is_compiled:
        return _check_compiled(info, min_runtime)
    g = info.main
    judged = [judge(info, g, op, min_runtime) for op in g.ops]
    fatal = fatal_problems(info)
    problems: list[Problem] = list(fatal)
    advice: list[str] = [f"{p.message}. Fix: {p.hint}" for p in fatal if p.hint]

    custom = [op for op in g.ops if op.name == "CUSTOM" and op.custom_code not in KNOWN_CUSTOM_OPS]
    if custom:
        code = custom[0].custom_code
        problems.append(Problem(
            "custom_op", f"custom op {code!r} is not one the compiler's TensorFlow Lite knows: edgetpu_compiler "
            f"may refuse the model ('{CUSTOM_UNRESOLVED}: {code}', as compilers 2.0 and 16 did); the placement "
            "shown is what Coral's own models with such an op got, by compiling the part before it",
            "if the compile fails, compile the model without the custom op (cut it off before the op) and run the "
            "op on the CPU after the Edge TPU part", tuple(op.index for op in custom),
            confidence=MODEL_RULES["custom_op"].confidence))
    if len(info.subgraphs) > 1:
        problems.append(Problem(
            "control_flow", f"the model has {len(info.subgraphs)} subgraphs (control flow such as WHILE/IF); "
            "only the main subgraph is checked and the Edge TPU maps none of the control-flow ops",
            "unroll loops and conditionals (e.g. unroll=True for Keras RNNs)",
            confidence=MODEL_RULES["control_flow"].confidence))
    if info.quantization_state == "float":
        problems.append(Problem(
            "not_quantized", "the model is not quantized (float ops): the Edge TPU runs only fully 8-bit "
            "quantized models, and the compiler refuses it ('Model not quantized') or maps nothing",
            FIX_QUANTIZE, tuple(op.index for op in g.ops), confidence=MODEL_RULES["not_quantized"].confidence))
        advice.append("The model is not quantized: " + FIX_QUANTIZE + ".")

    if fatal:
        first = fatal[0]
        def sure(j: Judgement) -> str:  # on the CPU for sure when the refusal is, or when the op is unmappable
            return CONFIRMED if CONFIRMED in (first.confidence, j.confidence if not j.mappable else None) else UNCERTAIN

        verdicts = [OpVerdict(op.index, op.name, op.version, "cpu", first.status or first.message,
                              f"otherwise: {j.status}" + (f" ({j.detail})" if j.detail else ""), j.fix, sure(j))
                    for op, j in zip(g.ops, judged)]
        return CheckReport(info.path, "none", verdicts, 0, info.param_bytes, 0, 0, problems, advice,
                           min_runtime, multiple_subgraphs=multiple_subgraphs)

    mappable = [j.mappable for j in judged]
    where = place(g, mappable, multiple_subgraphs)
    producer = {t: op.index for op in g.ops for t in op.outputs}
    cut_confidence, cut_off_anyway = _cut_confidence(g, judged, producer)
    verdicts = []
    for op, j, sub in zip(g.ops, judged, where):
        if sub is not None:
            verdicts.append(OpVerdict(op.index, op.name, op.version, "edgetpu", MAPPED, None, None, j.confidence,
                                      sub))
        elif j.mappable:
            # A cut-off QUANTIZE fed by an unmappable op reads "unspecified limitation" (deeplab's #65
            # in google-coral/edgetpu#60, #342, #461); other cut-off QUANTIZEs read "More than one
            # subgraph" (24 of them in a compiler 15 yolov5s log).
            fed = [producer.get(t) for t in op.inputs]
            words = UNSPECIFIED if op.name == "QUANTIZE" and any(p is not None and not mappable[p] for p in fed) \
                else MORE_THAN_ONE_SUBGRAPH
            verdicts.append(OpVerdict(op.index, op.name, op.version, "cpu", words, CUT_OFF, None,
                                      cut_confidence[op.index]))
        else:  # an unsure refusal is still a sure CPU placement when the op is cut off anyway
            sure = j.confidence == CONFIRMED or (not multiple_subgraphs and cut_off_anyway[op.index])
            verdicts.append(OpVerdict(op.index, op.name, op.version, "cpu", j.status, j.detail, j.fix,
                                      CONFIRMED if sure else UNCERTAIN, code=j.code))

    # Parameters of the Edge TPU ops against the on-chip cache.
    tpu_ops = [i for i, s in enumerate(where) if s is not None]
    buffers = {t.buffer: t.buffer_bytes for i in tpu_ops for k in g.ops[i].inputs
               if k >= 0 and (t := g.tensors[k]).is_constant}
    tpu_params = sum(buffers.values())
    on_chip = min(tpu_params, PARAMETER_CACHE_BYTES)
    off_chip = tpu_params - on_chip

    n_sub = len({s for s in where if s is not None})
    verdict = "full" if len(tpu_ops) == len(g.ops) and g.ops else ("none" if not tpu_ops else "partial")
    problems += _cpu_problems(verdicts)
    advice += _advice(g, verdicts, mappable, multiple_subgraphs)
    if off_chip:
        problems.append(Problem(
            "off_chip", f"about {mib(tpu_params)} of parameters for a ~8 MiB on-chip cache: ~{mib(off_chip)} "
            "would be streamed from host memory at every inference",
            "use a smaller or narrower model, or split it over several Edge TPUs with `edgekit compile --segments N`"))
        advice.append(f"Parameters ({mib(tpu_params)}) exceed the Edge TPU's ~8 MiB cache; ~{mib(off_chip)} would "
                      "stream from host memory each inference (slower). Shrink the model or pipeline it with "
                      "--segments.")
    elif tpu_params > 6 * 1024 * 1024:
        advice.append(f"Parameters ({mib(tpu_params)}) are close to the ~8 MiB cache; the compiler caches ~6-7.6 MiB "
                      "in practice, so some may be streamed.")
    advice += _architecture_advice(info, verdicts, verdict)
    return CheckReport(info.path, verdict, verdicts, n_sub, info.param_bytes, on_chip, off_chip,
                       problems, advice, min_runtime, multiple_subgraphs=multiple_subgraphs)


def _architecture_advice(info: ModelInfo, verdicts: list[OpVerdict], verdict: str) -> list[str]:
    """The advice table's entries (:mod:`edgekit.converters.advice`, each with its evidence) for the architecture
    the .tflite shows: its op types, its tensor names (Keras layer names survive conversion), the ops on the CPU."""
    from edgekit.converters import advice as table

    facts = table.tflite_facts(info).merged(
        table.ModelFacts(cpu_ops=frozenset(v.name for v in verdicts if v.target == "cpu")))
    return [a.line().split(": ", 1)[1] for a in table.placement_advice(facts, verdict)]


def quantize_gate(report: CheckReport, io_type: str, info: ModelInfo) -> list[Problem]:
    """What makes a freshly quantized model unfit for the compiler, from its check report.

    The fatal problems, float compute the converter left behind (a data-type problem), and model
    I/O that is not ``io_type``. Empty when the model is fit.
    """
    out = list(report.fatal)
    floats = [p for p in report.problems if p.code == "data_type"]
    names = {o.index: o.name for o in report.ops}
    # Name the float op itself, not the DEQUANTIZE/QUANTIZE the converter put around it.
    real = [p for p in floats if any(names.get(i) not in ("QUANTIZE", "DEQUANTIZE") for i in p.ops)]
    out += real or floats
    for t in info.inputs + info.outputs:
        if t.dtype != io_type:
            out.append(Problem("io_type", f"I/O tensor {t.name!r} is {t.dtype}, not {io_type}"))
    return out


def gate_checks(report: CheckReport) -> dict[str, Any]:
    """quantize's ``checks`` JSON, computed from the output's check report."""
    codes = {p.code for p in report.problems}
    return {"full_int8": not codes & {"data_type", "not_quantized"}, "static_shapes": "dynamic_shapes" not in codes,
            "op_versions_within_compiler": "op_version" not in codes,
            "edgetpu_verdict": report.verdict}


def mib(n: int) -> str:
    """Bytes as MiB with two decimals, as check and compile print sizes."""
    return f"{n / 1024 / 1024:.2f} MiB"


_PROBLEM_CODES = {NOT_SUPPORTED: "unsupported_op", DATA_TYPE: "data_type", VERSION: "op_version_not_mapped",
                  NOT_CONSTANT: "not_constant", RANK: "rank", STRIDES: "limitation", UNSPECIFIED: "limitation"}


def _cpu_problems(verdicts: list[OpVerdict]) -> list[Problem]:
    """One problem per (reason, detail) among the unmappable ops."""
    grouped: dict[tuple[str, str, str | None, str, str | None], list[int]] = {}
    for v in verdicts:
        if v.target == "cpu" and v.detail != CUT_OFF:
            key = (v.reason, f"{v.name}: {v.detail or v.reason}", v.fix, v.confidence, v.code)
            grouped.setdefault(key, []).append(v.index)
    out = []
    for (reason, text, fix, confidence, code), idx in grouped.items():
        where = f"op #{idx[0]}" if len(idx) == 1 else f"{len(idx)} ops (#{', #'.join(map(str, idx[:5]))}" + \
            (", ...)" if len(idx) > 5 else ")")
        code = code or _PROBLEM_CODES.get(reason, "limitation")
        out.append(Problem(code, f"{where} {text}", fix, tuple(idx), confidence=confidence))
    return out


def _advice(g: SubgraphInfo, verdicts: list[OpVerdict], mappable: list[bool], multiple: bool) -> list[str]:
    """Name the op that breaks the graph and what to change."""
    out: list[str] = []
    cut = [v for v in verdicts if v.detail == CUT_OFF]
    if not cut:
        cpu = [v for v in verdicts if v.target == "cpu"]
        if cpu and len(cpu) < len(verdicts):
            names = ", ".join(f"#{v.index} {v.name}" for v in cpu[:5]) + (" ..." if len(cpu) > 5 else "")
            whole = ("every mappable run is its own Edge TPU subgraph (-a)" if multiple else
                     "no op the Edge TPU could run is cut off by it, so the Edge TPU subgraph is whole")
            out.append(f"Only {names} run(s) on the CPU; {whole}.")
            for v in cpu:
                if v.fix:
                    out.append(f"To map #{v.index} {v.name} too: {v.fix}.")
                    break
        return out
    # The breaking op: the earliest unmappable op that some cut-off mappable op depends on.
    producer = {t: op.index for op in g.ops for t in op.outputs}
    breakers: dict[int, int] = {}
    for i in sorted(v.index for v in cut):
        stack, seen = [i], {i}
        while stack:
            j = stack.pop()
            for t in g.ops[j].inputs:
                p = producer.get(t)
                if p is None or p in seen:
                    continue
                seen.add(p)
                if not mappable[p]:
                    breakers[p] = breakers.get(p, 0) + 1
                else:
                    stack.append(p)
    if not breakers:
        return out
    first = min(breakers)
    v = verdicts[first]
    after = sum(1 for x in verdicts if x.index > first and x.target == "cpu")
    out.append(f"Op #{v.index} {v.name} breaks the graph: {v.detail or v.reason}. It and {after} later op(s) run on "
               f"the CPU, {len(cut)} of which the Edge TPU could run (\"{MORE_THAN_ONE_SUBGRAPH}\").")
    if v.fix:
        out.append(f"Change: {v.fix}.")
    others = sorted(b for b in breakers if b != first)
    if others:
        out.append("Also unmappable before CPU-side ops: " + ", ".join(f"#{b} {verdicts[b].name}" for b in others[:5]))
    out.append("Or compile with -a (edgetpu_compiler --enable_multiple_subgraphs, experimental; `edgekit check -a` "
               "predicts it) to map the later ops into further Edge TPU subgraphs; measure latency with and "
               "without it.")
    return out


def _check_compiled(info: ModelInfo, min_runtime: int) -> CheckReport:
    g = info.main
    verdicts = []
    n_sub = 0
    for op in g.ops:
        if op.custom_code == EDGETPU_CUSTOM_OP:
            verdicts.append(OpVerdict(op.index, EDGETPU_CUSTOM_OP, op.version, "edgetpu", MAPPED,
                                      "an Edge TPU subgraph made by edgetpu_compiler", subgraph=n_sub))
            n_sub += 1
        else:
            name = op.custom_code if op.name == "CUSTOM" and op.custom_code else op.name
            verdicts.append(OpVerdict(op.index, name, op.version, "cpu", "Left on the CPU by the compiler"))
    cpu = [v for v in verdicts if v.target == "cpu"]
    verdict = "full" if not cpu else "partial"
    msg = (f"the model is already compiled for the Edge TPU (it contains {EDGETPU_CUSTOM_OP}: "
           f"{info.edgetpu_bytes:,} bytes of Edge TPU program and parameters)")
    if cpu:
        hist = Counter(v.name for v in cpu)
        msg += "; still on the CPU: " + ", ".join(f"{n} x {name}" for name, n in hist.items())
    else:
        msg += "; nothing is left on the CPU"
    problems = [Problem("already_compiled", msg, "check or compile the model from before edgetpu_compiler "
                        "(the file without _edgetpu)")]
    return CheckReport(info.path, verdict, verdicts, n_sub, info.param_bytes, None, None, problems,
                       [msg[0].upper() + msg[1:] + "."], min_runtime, compiled=True, multiple_subgraphs=n_sub > 1)


# ----------------------------------------------------------------------------------- rendering
def format_table(rows: Iterable[tuple[str, int, str]]) -> str:
    """The compiler's operation-log table: ``Operator<pad 31>Count<pad 11>Status``."""
    lines = [f"{'Operator':<31}{'Count':<11}Status", ""]
    lines += [f"{name:<31}{count:<11}{status}" for name, count, status in rows]
    return "\n".join(lines)


def render(report: CheckReport) -> str:
    """Human-readable text for ``edgekit check``."""
    flags = f"--min-runtime {report.min_runtime}" + (", -a" if report.multiple_subgraphs and not report.compiled
                                                      else "")
    lines = [f"Edge TPU check: {report.model or '<model>'} (edgetpu_compiler 16 rules, {flags})"]
    if report.compiled:
        lines.append("This model is ALREADY COMPILED for the Edge TPU.")
    lines += ["", format_table(report.table()), ""]
    lines.append("Ops:")
    many = report.subgraphs > 1
    for v in report.ops:
        mark = "TPU" if v.target == "edgetpu" else "CPU"
        if many and v.subgraph is not None:
            mark += str(v.subgraph)
        extra = "" if v.target == "edgetpu" and not v.detail else f"  {v.reason}" + (
            f" ({v.detail})" if v.detail else "")
        unsure = "  [uncertain]" if v.confidence == UNCERTAIN else ""
        lines.append(f"  #{v.index:<4} {mark:<4} {v.name} v{v.version}{extra}{unsure}")
    if any(v.confidence == UNCERTAIN for v in report.ops):
        lines.append("  [uncertain]: rests on Coral's documentation or an inference; no real compile seen shows it "
                     "either way")
    lines.append("")
    if report.on_chip_bytes_estimate is not None:
        lines.append(f"Parameters: {report.param_bytes:,} bytes; Edge TPU ops ~{mib(report.on_chip_bytes_estimate)} "
                     f"on-chip, ~{mib(report.off_chip_bytes_estimate or 0)} off-chip (streamed), of a ~8 MiB cache")
    else:
        lines.append(f"Parameters{' of the CPU ops' if report.compiled else ''}: {report.param_bytes:,} bytes")
    for p in report.problems:
        if p.code == "already_compiled":
            continue
        tag = "FATAL" if p.fatal else "Problem"
        if p.confidence == UNCERTAIN:
            tag += " (uncertain)"
        lines.append(f"{tag}: {p.message}" + (f"\n  fix: {p.hint}" if p.hint else ""))
    total = len(report.ops)
    word = {"full": "FULL", "partial": "PARTIAL", "none": "NONE"}[report.verdict]
    unsure = (f"; {report.uncertain_ops} of these placements uncertain (no real compile shows their rule)"
              if report.uncertain_ops else "")
    lines.append(f"Verdict: {word}: {report.edgetpu_ops} of {total} ops on the Edge TPU "
                 f"({report.subgraphs} Edge TPU subgraph{'s' if report.subgraphs != 1 else ''}), "
                 f"{report.cpu_ops} on the CPU{unsure}")
    for a in report.advice:
        lines.append(f"Advice: {a}")
    return "\n".join(lines)
