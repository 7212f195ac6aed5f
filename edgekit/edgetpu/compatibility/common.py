"""Shape helpers, the size limits, and the constraints every supported op must meet (:data:`COMMON`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from edgekit.edgetpu.compatibility.evidence import DOCS, EV_FLOAT_IO, EV_SRGAN, EV_YOLOV8N
from edgekit.edgetpu.compatibility.values import Constraint, OpContext, SizeLimit, Test
from edgekit.edgetpu.compatibility.words import (
    CONFIRMED,
    CONST_OK_TYPES,
    DATA_TYPE,
    FIX_MOVE_TO_END,
    FIX_QUANTIZE,
    NOT_CONSTANT,
    NOT_SUPPORTED,
    QUANT_TYPES,
    RANK,
    UNCERTAIN,
    UNSPECIFIED,
    Kind,
)
from edgekit.tflite.model import FLOAT_DTYPES, TensorInfo

# Row-size limit (yolov8n pair + log, yolov5s and yolov8 logs): a tensor whose two innermost
# dimensions hold more than this many values is refused ("unspecified limitation"), whatever the
# op. Mapped at most 134,400 (yolov8n SOFTMAX/CONV_2D on 1x4x8400x16; the yolov5s 160 concat
# 1x1575x85 = 133,875 in v16_full_yolov5s_160.log); refused from 230,400 (yolov8n RESHAPE
# 1x144x1600) and, inferred from the architecture, 199,920 (yolov5s 224 RESHAPE 1x2352x85 in
# v16_partial_yolov5s_224_stdout.txt). The limit is placed inside that gap. google-coral/edgetpu#490's
# LOGISTIC on 1x19206x9 (172,854) "unspecified" is no counter-example: that model's plain compile
# failed ("large activation tensors") and the table came from a `-d` (search_delegate) compile,
# which cuts the graph at tensors of its choosing.
ROWS = SizeLimit(
    "row_size",
    134_400,
    230_400,
    196_608,
    ("log:v16_full_yolov5s_160.log", "log:v16_partial_yolov5s_224_stdout.txt"),
    EV_YOLOV8N,
)
ROW_LIMIT = ROWS.limit
ROW_REFUSED = ROWS.smallest_refused  # the smallest row a real compile shows refused
FIX_ROWS = (
    "keep detection post-processing (decode, concat over all anchors) on the CPU: cut the model before it, "
    "or export without it"
)
# TRANSPOSE moves data across the whole tensor. Mapped at most 82,944 values (1x24x24x144 in the
# all-mapped yolov8n/yolov8s 192 logs of jveitchmichaelis/edgetpu-yolo @283644dc, compiler 16);
# refused from 104,000 (the 1x40x40x65 head transpose of the yolov8 ledger pair
# G-aad-a/ddu-eksamen, whose 1x20x20x65 one (26,000) mapped) and at 230,400 (the yolov8n pair's
# 1x40x40x144). The limit is placed inside that gap (it was 131,072 until that pair).
TRANSPOSES = SizeLimit(
    "transpose_size",
    82_944,
    104_000,
    98_304,
    ("report:jveitchmichaelis/edgetpu-yolo",),
    ("pair:G-aad-a+ddu-eksamen__best_full_integer_quant",) + EV_YOLOV8N,
)
TRANSPOSE_LIMIT = TRANSPOSES.limit
TRANSPOSE_REFUSED = TRANSPOSES.smallest_refused  # the smallest transpose a real compile shows refused
# RESHAPE ("Certain reshapes might not be mapped for large tensor sizes", Coral's table): yolov5's
# head reshapes 1x80x80x255 -> 1x6400x3x85 (1,632,000 values) is refused at 640 while the same
# reshape of 1x40x40x255 (408,000) maps: the counts of two compiler 16 logs of a 640 COCO export
# (ultralytics/yolov5#10527; Team-Protom/road-signs-recognition-model yolov5s-int8_edgetpu.log
# @78581433) leave no other reading (one level's head chain cut off, 3 of 6 RESHAPEs refused). Its
# rows are small, so the row limit does not cover it. The limit is placed inside that gap.
RESHAPES = SizeLimit(
    "reshape_size",
    408_000,
    1_632_000,
    1_048_576,
    DOCS + ("report:ultralytics/yolov5#10527", "report:Team-Protom/road-signs-recognition-model"),
)
RESHAPE_LIMIT = RESHAPES.limit


# ------------------------------------------------------------------------------------ helpers
def shape_text(t: TensorInfo) -> str:
    return "x".join(map(str, t.shape)) or "scalar"


def normalize_axes(axes: Iterable[int], rank: int) -> set[int]:
    return {a + rank if a < 0 else a for a in axes}


def elements(t: TensorInfo) -> int:
    n = 1
    for d in t.shape:
        n *= d
    return n


# ------------------------------------------------------------------------ common constraints
def _data_types(c: OpContext) -> tuple[str, str] | None:
    bad = [t for t in c.activations if t.dtype not in QUANT_TYPES and not t.is_variable]
    bad += [t for t in c.ins if t is not None and t.is_constant and t.dtype not in CONST_OK_TYPES]
    bad += [t for t in c.ins if t is not None and t.is_variable and t.dtype not in QUANT_TYPES | {"int16"}]
    if not bad:
        return None
    types = sorted({t.dtype for t in bad})
    fix = (
        FIX_QUANTIZE
        if set(types) & FLOAT_DTYPES
        else ("use 8-bit activations (no 16x8 quantization)" if "int16" in types else FIX_MOVE_TO_END)
    )
    return f"works on {', '.join(types)} tensors; the Edge TPU computes on int8/uint8 only", fix


def _runtime(c: OpContext) -> tuple[str, str] | None:
    if c.rule is None:  # COMMON runs only for an op in the table (OP_CASES judged the others)
        return None
    need = c.rule.min_runtime
    if need <= c.min_runtime:
        return None
    return (
        f"{c.op.name} needs Edge TPU runtime {need}; compiling for runtime {c.min_runtime}",
        f"compile with --min-runtime {need} (the device then needs libedgetpu runtime {need} or newer)",
    )


def _constant_params(c: OpContext) -> str | None:
    for pos, what in c.rule.params if c.rule is not None else ():
        t = c.ins[pos] if pos < len(c.ins) else None
        if t is not None and not t.is_constant:
            return f"the {what} (input {pos}) is computed at run time"
    return None


def _rank(c: OpContext) -> str | None:
    for t in c.activations:
        if len(t.shape) > 3 and any(d > 1 for d in t.shape[:-3]):
            return f"tensor {t.name!r} is {shape_text(t)}: only the 3 innermost dimensions may exceed 1"
    return None


def _row_size(limit: int, seen: bool) -> Test:
    """Rows (the two innermost dimensions) over ``limit``; ``seen``: a real compile refused rows this large."""

    def row_size(c: OpContext) -> str | None:
        for t in c.activations:
            row = t.shape[-1] * (t.shape[-2] if len(t.shape) > 1 else 1) if t.shape else 1
            if row > limit:
                why = f"real compiles refuse rows from {ROW_REFUSED:,}" if seen else f"~{ROW_LIMIT:,}; heuristic"
                return (
                    f"tensor {t.name!r} is {shape_text(t)}: its two innermost dimensions hold {row:,} values, more "
                    f"than the Edge TPU maps ({why})"
                )
        return None

    return row_size


def transpose_test(limit: int, seen: bool) -> Test:
    def transpose_size(c: OpContext) -> str | None:
        t = c.ins[0]
        if t is not None and elements(t) > limit:
            why = f"real compiles refuse it from {TRANSPOSE_REFUSED:,}" if seen else f"~{TRANSPOSE_LIMIT:,}; heuristic"
            return (
                f"transposes {elements(t):,} values ({shape_text(t)}); the Edge TPU maps TRANSPOSE only on small "
                f"tensors ({why})"
            )
        return None

    return transpose_size


COMMON: tuple[Constraint, ...] = (
    Constraint(
        _data_types,
        DATA_TYPE,
        None,
        EV_FLOAT_IO + ("log:v14_not_quantized.txt",),
        CONFIRMED,
        id="data_types",
        kind=Kind.TYPE,
    ),
    # Compiler 15 (default runtime 13) calls TRANSPOSE (runtime 14) "Operation not supported"; the
    # other runtime numbers are Coral's table.
    Constraint(
        _runtime,
        NOT_SUPPORTED,
        None,
        DOCS + ("log:v15_partial_yolov5s_stdout.txt",),
        CONFIRMED,
        code="runtime",
        id="runtime",
        kind=Kind.TYPE,
    ),
    Constraint(
        _constant_params,
        NOT_CONSTANT,
        "make weights and shape/axis params constants of the model (freeze the graph)",
        DOCS,
        looked_for="a compiled pair or log with a weight or shape computed at "
        "run time (Keras and the TFLite converter fold them: none seen)",
        id="constant_params",
        kind=Kind.OPTION,
    ),
    Constraint(
        _rank,
        RANK,
        "keep tensors at most 4-D with a batch of 1",
        EV_SRGAN + ("report:google-coral/edgetpu#708",),
        CONFIRMED,
        id="rank",
        kind=Kind.LAYOUT,
    ),
)
# A size limit is confirmed where a real compile refused as large a tensor, uncertain in the gap
# between the largest mapped and the smallest refused (where the limit is placed).


def size_constraints(
    limit: SizeLimit, make: Callable[[int, bool], Test], fix: str, status: str = UNSPECIFIED, measured: str = "values"
) -> tuple[Constraint, ...]:
    """The constraints of one size limit: refused for sure from the smallest size a compile printed refused,
    uncertain above the line drawn in the gap (or at every size above it, when no compile printed a refusal)."""
    gap = (
        f"a compile with {measured} between the largest mapped ({limit.largest_mapped:,}) and the smallest "
        f"refused ({limit.smallest_refused:,}): the limit sits in that gap"
    )
    out = []
    if limit.refused_confirmed:
        out.append(
            Constraint(
                make(limit.smallest_refused - 1, True),
                status,
                fix,
                limit.refused_evidence,
                CONFIRMED,
                id=f"{limit.id}_refused",
                kind=Kind.SIZE,
            )
        )
    out.append(
        Constraint(
            make(limit.limit, False),
            status,
            fix,
            limit.evidence,
            UNCERTAIN,
            looked_for=gap,
            id=limit.id,
            kind=Kind.SIZE,
        )
    )
    return tuple(out)


COMMON += size_constraints(ROWS, _row_size, FIX_ROWS, measured="a row")
