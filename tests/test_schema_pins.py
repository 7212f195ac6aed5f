"""The TFLite schema slots and names edgekit types by hand, pinned to TensorFlow Lite's generated schema.

edgekit reads .tflite files with its own bounds-checked flatbuffer reader (edgekit/board/flatbuffer.py), which
names a field by its vtable slot: ``t.table(4, "quantization")`` is ``Tensor.quantization`` because schema.fbs
declares it fifth. The generated schema (ai_edge_litert's schema_py_generated, the same file as TensorFlow's
tensorflow/lite/python/schema_py_generated.py) writes each slot in its builder function,
``TensorAddQuantization(builder, q): builder.PrependUOffsetTRelativeSlot(4, ...)``, with the field's type and
default. This test finds every call with a literal slot in the package (AST), requires each to be pinned below to
a schema field, and compares slot, type and default to the generated code; so a slot typed wrong, or a new one
nobody pinned, fails here. The op and tensor-type names (edgekit/tflite/schema_names.py, the builtin options
table of edgekit/tflite/model.py, the op words of the check engine) are compared to the generated enums.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import re
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "edgekit"
ACCESSORS = {"scalar", "table", "string", "raw_vector", "scalars", "tables"}  # edgekit.board.flatbuffer._Table's

# (module under edgekit/, receiver as written, accessor, slot) -> the schema field (schema.fbs spelling).
PINS: dict[tuple[str, str, str, int], str] = {
    ("board/quant_params.py", "model", "tables", 2): "Model.subgraphs",
    ("board/quant_params.py", "g", "tables", 0): "SubGraph.tensors",
    ("board/quant_params.py", "t", "string", 3): "Tensor.name",
    ("board/quant_params.py", "t", "scalar", 1): "Tensor.type",
    ("board/quant_params.py", "t", "table", 4): "Tensor.quantization",
    ("board/quant_params.py", "q", "scalars", 2): "QuantizationParameters.scale",
    ("board/quant_params.py", "q", "scalars", 3): "QuantizationParameters.zero_point",
    ("edgetpu/fidelity.py", "model", "tables", 2): "Model.subgraphs",
    ("edgetpu/fidelity.py", "g", "tables", 0): "SubGraph.tensors",
    ("edgetpu/fidelity.py", "t", "raw_vector", 3): "Tensor.name",
    ("edgetpu/fidelity.py", "t", "table", 4): "Tensor.quantization",
    ("detection/layout.py", "model", "tables", 7): "Model.signature_defs",
    ("detection/layout.py", "defs[0]", "tables", 1): "SignatureDef.outputs",
    ("detection/layout.py", "m", "string", 0): "TensorMap.name",
    ("detection/layout.py", "m", "scalar", 1): "TensorMap.tensor_index",
    ("tflite/model.py", "model", "scalar", 0): "Model.version",
    ("tflite/model.py", "model", "tables", 1): "Model.operator_codes",
    ("tflite/model.py", "model", "tables", 2): "Model.subgraphs",
    ("tflite/model.py", "model", "string", 3): "Model.description",
    ("tflite/model.py", "model", "tables", 4): "Model.buffers",
    ("tflite/model.py", "model", "tables", 6): "Model.metadata",
    ("tflite/model.py", "b", "raw_vector", 0): "Buffer.data",
    ("tflite/model.py", "b", "scalar", 1): "Buffer.offset",
    ("tflite/model.py", "b", "scalar", 2): "Buffer.size",
    ("tflite/model.py", "oc", "scalar", 0): "OperatorCode.deprecated_builtin_code",
    ("tflite/model.py", "oc", "string", 1): "OperatorCode.custom_code",
    ("tflite/model.py", "oc", "scalar", 2): "OperatorCode.version",
    ("tflite/model.py", "oc", "scalar", 3): "OperatorCode.builtin_code",
    ("tflite/model.py", "m", "string", 0): "Metadata.name",
    ("tflite/model.py", "m", "scalar", 1): "Metadata.buffer",
    ("tflite/model.py", "g", "tables", 0): "SubGraph.tensors",
    ("tflite/model.py", "g", "scalars", 1): "SubGraph.inputs",
    ("tflite/model.py", "g", "scalars", 2): "SubGraph.outputs",
    ("tflite/model.py", "g", "tables", 3): "SubGraph.operators",
    ("tflite/model.py", "g", "string", 4): "SubGraph.name",
    ("tflite/model.py", "t", "scalars", 0): "Tensor.shape",
    ("tflite/model.py", "t", "scalar", 1): "Tensor.type",
    ("tflite/model.py", "t", "scalar", 2): "Tensor.buffer",
    ("tflite/model.py", "t", "string", 3): "Tensor.name",
    ("tflite/model.py", "t", "table", 4): "Tensor.quantization",
    ("tflite/model.py", "t", "scalar", 5): "Tensor.is_variable",
    ("tflite/model.py", "t", "scalars", 7): "Tensor.shape_signature",
    ("tflite/model.py", "q", "scalars", 2): "QuantizationParameters.scale",
    ("tflite/model.py", "q", "scalars", 3): "QuantizationParameters.zero_point",
    ("tflite/model.py", "q", "scalar", 6): "QuantizationParameters.quantized_dimension",
    ("tflite/model.py", "o", "scalar", 0): "Operator.opcode_index",
    ("tflite/model.py", "o", "scalars", 1): "Operator.inputs",
    ("tflite/model.py", "o", "scalars", 2): "Operator.outputs",
    ("tflite/model.py", "o", "table", 4): "Operator.builtin_options",
    ("tflite/model.py", "op", "raw_vector", 5): "Operator.custom_options",
    ("tflite/model.py", "op", "scalar", 9): "Operator.large_custom_options_offset",
    ("tflite/model.py", "op", "scalar", 10): "Operator.large_custom_options_size",
}
# Conversion metadata (TensorFlow's conversion_metadata.fbs, generated beside schema_py_generated in TensorFlow).
CONVERSION_PINS: dict[tuple[str, str, str, int], str] = {
    (
        "tflite/exporter_metadata.py",
        "r.table(r.deref(0, 'conversion metadata root'), 'conversion metadata')",
        "table",
        0,
    ): "ConversionMetadata.environment",
    ("tflite/exporter_metadata.py", "env", "string", 0): "Environment.tensorflow_version",
    ("tflite/exporter_metadata.py", "env", "scalar", 1): "Environment.api_version",
}
# Slots of schemas no generated Python here covers: the TFLite Support metadata schema (tflite-support is not a
# dependency) and the Edge TPU compiler's executable.fbs (not public). Listed so that a new slot must be placed.
UNPINNED: dict[tuple[str, str, str, int], str] = {
    ("detection/layout.py", "root", "tables", 3): "ModelMetadata.subgraph_metadata (metadata_schema.fbs)",
    ("detection/layout.py", "subgraphs[0]", "tables", 3): "SubGraphMetadata.output_tensor_metadata",
    ("detection/layout.py", "t", "string", 0): "TensorMetadata.name (metadata_schema.fbs)",
    ("tflite/edgetpu_package.py", "multi", "raw_vector", 0): "MultiExecutable.serialized_executables",
}
# Ops whose builtin options edgekit reads (edgekit.tflite.model._OPTIONS), and their options table in schema.fbs.
OPTIONS_TABLES = {
    "CONV_2D": "Conv2DOptions",
    "DEPTHWISE_CONV_2D": "DepthwiseConv2DOptions",
    "FULLY_CONNECTED": "FullyConnectedOptions",
    "CONCATENATION": "ConcatenationOptions",
    "STRIDED_SLICE": "StridedSliceOptions",
    "PACK": "PackOptions",
    "UNPACK": "UnpackOptions",
    "SOFTMAX": "SoftmaxOptions",
    "RESIZE_BILINEAR": "ResizeBilinearOptions",
    "RESIZE_NEAREST_NEIGHBOR": "ResizeNearestNeighborOptions",
    "ADD": "AddOptions",
    "SUB": "SubOptions",
    "MUL": "MulOptions",
    "SPLIT": "SplitOptions",
    "TRANSPOSE_CONV": "TransposeConvOptions",
    "AVERAGE_POOL_2D": "Pool2DOptions",
    "MAX_POOL_2D": "Pool2DOptions",
    "L2_POOL_2D": "Pool2DOptions",
    "MEAN": "ReducerOptions",
    "SUM": "ReducerOptions",
    "REDUCE_MAX": "ReducerOptions",
    "REDUCE_MIN": "ReducerOptions",
    "REDUCE_PROD": "ReducerOptions",
    "REDUCE_ANY": "ReducerOptions",
    "UNIDIRECTIONAL_SEQUENCE_LSTM": "UnidirectionalSequenceLSTMOptions",
}
# struct formats of the reader -> the generated builder's scalar types.
FORMATS = {
    "b": "Int8",
    "B": "Uint8",
    "?": "Bool",
    "h": "Int16",
    "H": "Uint16",
    "i": "Int32",
    "I": "Uint32",
    "q": "Int64",
    "Q": "Uint64",
    "f": "Float32",
    "d": "Float64",
}
SIZES = {
    "Int8": 1,
    "Uint8": 1,
    "Bool": 1,
    "Int16": 2,
    "Uint16": 2,
    "Int32": 4,
    "Uint32": 4,
    "Int64": 8,
    "Uint64": 8,
    "Float32": 4,
    "Float64": 8,
}
_SLOT = re.compile(r"builder\.Prepend(\w+?)Slot\((\d+), .*, ([^,]+)\)\s*$", re.M)


def _load(package: str, relative: str) -> ModuleType:
    """A generated schema module, loaded from its file without importing its package (TensorFlow's is slow)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f"{package} is not installed: no generated TFLite schema to compare with")
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    if not path.is_file():
        pytest.skip(f"{path} not found: no generated TFLite schema to compare with")
    module_spec = importlib.util.spec_from_file_location(f"_generated_{path.stem}", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def schema() -> ModuleType:
    if importlib.util.find_spec("ai_edge_litert"):
        return _load("ai_edge_litert", "schema_py_generated.py")
    return _load("tensorflow", "lite/python/schema_py_generated.py")


@pytest.fixture(scope="module")
def conversion_schema() -> ModuleType:
    return _load("tensorflow", "lite/python/conversion_metadata_schema_py_generated.py")


def camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


def generated_slot(module: ModuleType, field: str) -> tuple[int, str, str]:
    """(slot, builder type, default as written) of ``Table.field`` from its generated ``TableAddField``."""
    table, name = field.split(".")
    builder = getattr(module, f"{table}Add{camel(name)}", None)
    assert builder is not None, f"{field}: the generated schema has no {table}Add{camel(name)}"
    found = _SLOT.search(inspect.getsource(builder))
    assert found, f"{field}: no Prepend...Slot in {builder.__name__}"
    return int(found[2]), found[1], found[3]


def vector_item(module: ModuleType, field: str) -> str | None:
    """The scalar type of a vector field's items (its generated ``Table.Field(self, j)``), None for tables/strings."""
    table, name = field.split(".")
    found = re.search(
        r"number_types\.(\w+)Flags, a \+", inspect.getsource(getattr(getattr(module, table), camel(name)))
    )
    return found[1] if found else None


def sites() -> dict[tuple[str, str, str, int], list[ast.Call]]:
    """Every call of a table accessor with a literal slot in edgekit/, by (module, receiver, accessor, slot)."""
    found: dict[tuple[str, str, str, int], list[ast.Call]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ACCESSORS
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and type(node.args[0].value) is int
            ):
                key = (
                    path.relative_to(PACKAGE).as_posix(),
                    ast.unparse(node.func.value),
                    node.func.attr,
                    node.args[0].value,
                )
                found.setdefault(key, []).append(node)
    return found


def check(module: ModuleType, key: tuple[str, str, str, int], field: str, calls: list[ast.Call]) -> list[str]:
    """What differs between the hand-typed calls at ``key`` and the generated field."""
    where, _, accessor, slot = key
    want, kind, default = generated_slot(module, field)
    wrong = [] if slot == want else [f"{where}: {field} is slot {want} in the schema, edgekit reads slot {slot}"]
    for call in calls:
        fmt = call.args[1].value if len(call.args) > 1 and isinstance(call.args[1], ast.Constant) else None
        if accessor == "scalar" and FORMATS.get(fmt) != kind:
            wrong.append(f"{where}: {field} is {kind} in the schema, edgekit reads format {fmt!r}")
        if accessor == "scalar" and len(call.args) > 2 and ast.literal_eval(call.args[2]) != ast.literal_eval(default):
            wrong.append(
                f"{where}: {field} defaults to {default} in the schema, edgekit to {ast.unparse(call.args[2])}"
            )
        if accessor in ("scalars", "raw_vector") and kind == "UOffsetTRelative":
            item = vector_item(module, field)
            size = SIZES.get(item or "", 1)
            if (accessor == "scalars" and FORMATS.get(fmt) != item) or (accessor == "raw_vector" and fmt != size):
                wrong.append(f"{where}: {field} holds {item or 'bytes'} items, edgekit reads {fmt!r}")
        elif accessor != "scalar" and kind != "UOffsetTRelative":
            wrong.append(f"{where}: {field} is a {kind} scalar, edgekit reads it with .{accessor}()")
    return wrong


def test_every_hand_typed_slot_is_pinned():
    found = set(sites())
    known = set(PINS) | set(CONVERSION_PINS) | set(UNPINNED)
    assert not found - known, f"slots read in edgekit but not pinned in {__file__}: {sorted(found - known)}"
    assert not known - found, f"pinned slots no longer read (remove them here): {sorted(known - found)}"


def test_hand_typed_slots_equal_the_generated_schema(schema):
    found = sites()
    wrong = [line for key, field in PINS.items() for line in check(schema, key, field, found.get(key, []))]
    assert not wrong, "\n".join(wrong)


def test_conversion_metadata_slots_equal_the_generated_schema(conversion_schema):
    found = sites()
    wrong = [
        line
        for key, field in CONVERSION_PINS.items()
        for line in check(conversion_schema, key, field, found.get(key, []))
    ]
    assert not wrong, "\n".join(wrong)


def test_the_builtin_options_table_equals_the_generated_schema(schema):
    from edgekit.tflite.model import _OPTIONS

    assert set(_OPTIONS) == set(OPTIONS_TABLES), "pin the options table of each op model.py reads"
    wrong = []
    for op, fields in _OPTIONS.items():
        for name, slot, fmt, default in fields:
            want, kind, written = generated_slot(schema, f"{OPTIONS_TABLES[op]}.{name}")
            if (slot, FORMATS[fmt]) != (want, kind) or default != ast.literal_eval(written):
                wrong.append(
                    f"{op}.{name}: schema slot {want} {kind} default {written}, edgekit {slot} {fmt!r} {default!r}"
                )
    assert not wrong, "\n".join(wrong)


def test_fidelitys_quantization_vectors_equal_the_generated_schema(schema):
    """edgetpu/fidelity.py blanks QuantizationParameters' min, max, scale, zero_point by (slot, item size)."""
    tree = ast.parse((PACKAGE / "edgetpu" / "fidelity.py").read_text(encoding="utf-8"))
    loops = [
        ast.literal_eval(n.iter)
        for n in ast.walk(tree)
        if isinstance(n, ast.For) and ast.unparse(n.target) == "(slot, size)"
    ]
    assert len(loops) == 1, "the (slot, size) loop of fidelity.py moved: pin it again here"
    for (slot, size), name in zip(loops[0], ("min", "max", "scale", "zero_point"), strict=True):
        field = f"QuantizationParameters.{name}"
        assert (slot, size) == (generated_slot(schema, field)[0], SIZES[vector_item(schema, field)]), field


def test_op_and_tensor_type_names_equal_the_generated_enums(schema):
    from edgekit.tflite.schema_names import BUILTIN_OPS, TENSOR_TYPES

    ops = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    types = {v: k.lower() for k, v in vars(schema.TensorType).items() if not k.startswith("_")}
    assert {code: ops.get(code) for code in BUILTIN_OPS} == BUILTIN_OPS
    assert {code: types.get(code) for code in TENSOR_TYPES} == TENSOR_TYPES


# Upper-case words of the check engine and the TFLite readers that are not op names (a new one goes here; an op
# name misspelt lands here too, where a reviewer sees it).
NOT_OPS = {
    "ALWAYS_DYNAMIC",
    "COMMON",
    "COMPILER_DEFAULT_MIN_RUNTIME",
    "CONFIRMED",
    "CONVERSION_METADATA",
    "CPU",
    "CUSTOM_UNRESOLVED",
    "CUT_OFF",
    "CUT_OFF_FED_BY_CPU",
    "DATA_TYPE",
    "DOCS",
    "DYNAMIC",
    "EDGETPU_COMPILER",
    "FATAL",
    "FIX_MOVE_TO_END",
    "FIX_QUANTIZE",
    "KNOWN_CUSTOM_OPS",
    "MAPPED",
    "MEAN_POSITIONS_LIMIT",
    "MODEL_RULES",
    "MORE_THAN_ONE_SUBGRAPH",
    "NOT_CONSTANT",
    "NOT_SUPPORTED",
    "OP_CASES",
    "PARAMETER_CACHE_BYTES",
    "PARSE_FAILED",
    "PATH",
    "RESHAPES",
    "RESHAPE_LIMIT",
    "RESIZE_LIMIT",
    "ROWS",
    "ROW_LIMIT",
    "ROW_REFUSED",
    "RULES",
    "SEEN_MAPPED",
    "SETTLE",
    "SHAPE_INPUTS",
    "SIZE_LIMITS",
    "STATUS_WORDS",
    "STRIDES",
    "SUPPORTED_MIN_RUNTIMES",
    "TESTED",
    "TFLITE_METADATA",
    "TPU",
    "TRANSPOSES",
    "TRANSPOSE_LIMIT",
    "TRANSPOSE_REFUSED",
    "UNCERTAIN",
    "UNSPECIFIED",
    "VERSION",
}
_WORD = re.compile(r"[A-Z][A-Z0-9]*(_[A-Z0-9]+)+|[A-Z]{3,}[0-9]*")


def test_op_names_in_the_check_engine_and_readers_are_schema_ops(schema):
    """Every upper-case word in edgetpu/, tflite/ and detection/ is a BuiltinOperator name or a known other word."""
    ops = {k for k in vars(schema.BuiltinOperator) if not k.startswith("_")}
    words: dict[str, set[str]] = {}
    for folder in ("edgetpu", "tflite", "detection"):
        for path in (PACKAGE / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and _WORD.fullmatch(node.value):
                    words.setdefault(node.value, set()).add(path.relative_to(PACKAGE).as_posix())
    unknown = {w: sorted(p) for w, p in words.items() if w not in ops and w not in NOT_OPS and not w.startswith("EV_")}
    assert not unknown, f"not a BuiltinOperator name (a typo? else add it to NOT_OPS): {unknown}"
    assert words.keys() & ops, "the walk found no op name at all"


def test_the_pins_cover_the_slots_the_issue_counted():
    """Issue 33 counted 57 hand-typed slots; every one read against TFLite's schema is now pinned."""
    from edgekit.tflite.model import _OPTIONS

    options = {(OPTIONS_TABLES[op], name) for op, fields in _OPTIONS.items() for name, *_ in fields}
    pinned = set(PINS.values()) | set(CONVERSION_PINS.values()) | {f"{t}.{n}" for t, n in options}
    pinned |= {f"QuantizationParameters.{n}" for n in ("min", "max")}  # fidelity.py's (slot, size) loop
    print(f"{len(pinned)} schema fields pinned; {len(UNPINNED)} call sites of other schemas left unpinned")
    assert len(pinned) >= 57
