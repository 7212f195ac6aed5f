"""edgekit check: the offline prediction against the real compiler's results.

Ground truth: the compiled pairs in ../shared/testdata (mapped = CPU-model ops minus the builtin
ops left in the _edgetpu file, by type) and the real compiler logs in tests/fixtures/compiler.
Rule-by-rule cases use small models synthesized with tests/tflite_builder.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from edgekit.cli.app import cli
from edgekit.edgetpu import compatibility as C
from edgekit.edgetpu.compatibility import check_model
from edgekit.edgetpu.compiler import parse_operation_log
from edgekit.edgetpu.fidelity import find_pairs, format_rows, score_pair, summarize
from edgekit.results.check import CheckProblem, CheckResult
from edgekit.results.quantize import GateChecks
from edgekit.results.words import format_table
from edgekit.tflite import model as tflite_model
from tests.conftest import TESTDATA, shared_file
from tests.tflite_builder import GraphBuilder, S, conv_chain

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "compiler"
PAIRS = find_pairs([TESTDATA, TESTDATA / "pairs"])
NO_PAIRS = f"no compiled pairs (X.tflite beside X_edgetpu.tflite) in {TESTDATA} or its pairs/ folder"
#: Pairs no evidence-supported rule reproduces, with the reason (asserted to still differ, so that
#: a pair that starts to agree is taken off the list). None today.
UNMATCHED: dict[str, str] = {}


def _info(data: bytes) -> tflite_model.ModelInfo:
    return tflite_model.ModelInfo.from_bytes(data, "synthetic.tflite")


# ------------------------------------------------------------------------------ the compiled pairs
@pytest.mark.skipif(not PAIRS, reason=NO_PAIRS)
def test_regression_table_over_every_compiled_pair():
    """Check's CPU split (per op type) and verdict against the real compiler, on every pair.

    A pair shows where each op ran, not why: status words are asserted only where a log exists.
    """
    rows = [score_pair(cpu, compiled) for cpu, compiled in PAIRS]
    print("\n" + format_rows(rows))
    wrong = [r for r in rows if (r["predicted_cpu"], r["verdict"]) != (r["actual_cpu"], r["actual_verdict"])]
    assert {r["pair"] for r in wrong} == set(UNMATCHED), format_rows(wrong)
    assert summarize(rows)["verdicts_right"] >= len(rows) - len(UNMATCHED)


@pytest.mark.skipif(not PAIRS, reason=NO_PAIRS)
def test_the_pairs_the_rules_rest_on_are_there():
    names = {cpu.stem for cpu, _ in PAIRS}
    assert names >= {
        "mobilenet_v1_0.25_128_quant",
        "keras_lstm_mnist_ptq",
        "split_concat",
        "deeplabv3_mnv2_dm05_pascal_quant",
    }
    if (TESTDATA / "pairs").is_dir():
        assert len([n for n in names if "__" in n]) >= 10


@pytest.mark.skipif(not PAIRS, reason=NO_PAIRS)
@pytest.mark.parametrize(
    "cpu_path", [c for c, e in PAIRS if (c.parent / f"{e.stem}.log").exists()], ids=lambda p: p.stem
)
def test_status_words_equal_the_log_beside_the_pair(cpu_path):
    """Where the compiler's .log sits beside a pair, check's operation table equals it row for row."""
    _, _, _, rows = parse_operation_log((cpu_path.parent / f"{cpu_path.stem}_edgetpu.log").read_text())
    ours = check_model(tflite_model.load(cpu_path)).table()
    assert sorted(ours) == sorted((r.operator, r.count, r.status) for r in rows)


def test_yolov8n_refused_ops_are_the_large_tail_tensors():
    """The yolov8n log's 13 "unspecified limitation" ops: TRANSPOSE over the limit and tensors whose two
    innermost dimensions exceed the row limit; softmax on 1x4x8400x16 is mappable (cut off). Sizes a real
    compile refused are certain; the ones between the largest mapped and the smallest refused are not."""
    report = check_model(
        tflite_model.load(shared_file("pairs/coral_wifi_webserver__yolov8n_full_integer_quant.tflite"))
    )
    refused = Counter(o.name for o in report.ops if o.reason == C.UNSPECIFIED)
    assert refused == Counter(
        {"TRANSPOSE": 4, "RESHAPE": 3, "CONCATENATION": 2, "STRIDED_SLICE": 2, "LOGISTIC": 1, "QUANTIZE": 1}
    )
    softmax = next(o for o in report.ops if o.name == "SOFTMAX")
    assert softmax.reason == C.MORE_THAN_ONE_SUBGRAPH
    sure = Counter(o.name for o in report.ops if o.reason == C.UNSPECIFIED and o.confidence == C.CONFIRMED)
    assert sure["TRANSPOSE"] == 4 and sure["RESHAPE"] >= 1
    assert "real compiles refuse" in next(
        o.detail for o in report.ops if o.name == "TRANSPOSE" and o.reason == C.UNSPECIFIED
    )


def test_srgan_with_a_dynamic_batch_compiles_into_three_subgraphs_with_a():
    """-1 batches with constant shapes compile; its 5-D RESHAPE/TRANSPOSE split the model (rank rule)."""
    info = tflite_model.load(shared_file("pairs/srgan__srgan_quant_2.tflite"))
    assert info.has_dynamic_shapes  # -1 in every shape_signature
    multi = check_model(info, multiple_subgraphs=True)
    assert multi.verdict == "partial" and multi.summary.subgraphs == 3 and not any(p.fatal for p in multi.problems)
    assert {o.subgraph for o in multi.ops if o.target == "edgetpu"} == {0, 1, 2}
    assert Counter(o.name for o in multi.ops if o.target == "cpu") == Counter({"RESHAPE": 4, "TRANSPOSE": 2})
    assert {o.reason for o in multi.ops if o.target == "cpu"} == {C.RANK}
    single = check_model(info)
    assert single.summary.subgraphs == 1 and single.ops[73].reason == C.MORE_THAN_ONE_SUBGRAPH


def test_a_decoder_custom_op_stays_on_the_cpu_and_warns_the_compile_may_fail():
    report = check_model(
        tflite_model.load(shared_file("pairs/posenet__posenet_mobilenet_v1_075_353_481_quant_decoder.tflite"))
    )
    assert report.verdict == "partial" and report.summary.cpu_ops == 1
    last = report.ops[-1]
    assert (last.name, last.target, last.confidence) == ("CUSTOM", "cpu", C.CONFIRMED)  # where it runs is sure
    p = next(p for p in report.problems if p.code == "custom_op")
    assert not p.fatal and p.confidence == C.UNCERTAIN and "PosenetDecoderOp" in p.message


def test_deeplab_eight_cpu_ops_and_the_op_that_breaks_the_graph():
    """What the compiled pairs show: which ops stayed on the CPU (#64 onwards). The rule that puts #64 there
    (align_corners from a size of 1) is confirmed by these very pairs; its words are a guess (no log)."""
    report = check_model(tflite_model.load(shared_file("deeplabv3_mnv2_dm05_pascal_quant.tflite")))
    cpu = [o for o in report.ops if o.target == "cpu"]
    assert Counter(o.name for o in cpu) == Counter(
        {"RESIZE_BILINEAR": 3, "CONV_2D": 2, "CONCATENATION": 1, "QUANTIZE": 1, "ARG_MAX": 1}
    )
    assert [o.index for o in cpu] == list(range(64, 72))
    first = cpu[0]
    assert (first.name, first.confidence) == ("RESIZE_BILINEAR", C.CONFIRMED)
    # ops 62/63 feed the CPU part but do not depend on #64: mapped, as in the compiled file
    assert report.ops[62].target == report.ops[63].target == "edgetpu"
    assert report.verdict == "partial" and report.summary.subgraphs == 1
    assert any("#64 RESIZE_BILINEAR breaks the graph" in a for a in report.advice)


def test_the_compiled_file_keeps_the_ops_check_puts_on_the_cpu():
    cpu = tflite_model.load(shared_file("deeplabv3_mnv2_dm05_pascal_quant.tflite"))
    compiled = tflite_model.load(shared_file("deeplabv3_mnv2_dm05_pascal_quant_edgetpu.tflite"))
    predicted_cpu = [o.name for o in check_model(cpu).ops if o.target == "cpu"]
    assert predicted_cpu == [op.name for op in compiled.ops if op.name != "CUSTOM"]  # same order too


def test_already_compiled_model_says_so_and_lists_what_stays_on_the_cpu():
    report = check_model(tflite_model.load(shared_file("deeplabv3_mnv2_dm05_pascal_quant_edgetpu.tflite")))
    assert report.compiled and report.verdict == "partial"
    assert report.problems[0].code == "already_compiled"
    assert "3 x RESIZE_BILINEAR" in report.problems[0].message
    full = check_model(tflite_model.load(shared_file("mobilenet_v1_0.25_128_quant_edgetpu.tflite")))
    assert full.compiled and full.verdict == "full" and "nothing is left on the CPU" in full.problems[0].message


# --------------------------------------------------------------- the one-subgraph rule, in detail
def _float_io_model() -> bytes:
    """float in -> QUANTIZE -> CONV -> CONV -> DEQUANTIZE -> float out: the first op is unmappable."""
    gb = GraphBuilder()
    x = gb.tensor([1, 8, 8, 4], "float32", scale=None)
    q = gb.tensor([1, 8, 8, 4], "int8")
    gb.op("QUANTIZE", [x], [q])
    h = q
    for _ in range(2):
        w = gb.tensor([4, 1, 1, 4], "int8", data=np.ones((4, 1, 1, 4)))
        b = gb.tensor([4], "int32", data=np.zeros(4), scale=0.001)
        y = gb.tensor([1, 8, 8, 4], "int8")
        gb.op("CONV_2D", [h, w, b], [y], version=3, strideW=1, strideH=1, dilationWFactor=1, dilationHFactor=1)
        h = y
    out = gb.tensor([1, 8, 8, 4], "float32", scale=None)
    gb.op("DEQUANTIZE", [h], [out], version=2)
    return gb.build([x], [out])


def test_unmappable_first_op_does_not_push_the_rest_to_the_cpu():
    """Float I/O: the real compiler maps everything between the edge QUANTIZE/DEQUANTIZE (fixture logs)."""
    report = check_model(_info(_float_io_model()))
    assert [(o.name, o.target) for o in report.ops] == [
        ("QUANTIZE", "cpu"),
        ("CONV_2D", "edgetpu"),
        ("CONV_2D", "edgetpu"),
        ("DEQUANTIZE", "cpu"),
    ]
    # the status words for these two are the ones the real compiler used in the float-I/O log
    for log in ("v16_float_io_yolov8s_160_CPU.log",):
        _, _, _, rows = parse_operation_log((FIXTURES / log).read_text())
        real = {(r.operator, r.status) for r in rows if r.operator in ("QUANTIZE", "DEQUANTIZE") and not r.mapped}
        ours = {(o.name, o.reason) for o in report.ops if o.target == "cpu"}
        assert real == ours, log


def _two_branches(unmappable_first: bool) -> bytes:
    """input -> [branch A: ARG_MAX-like unsupported op | branch B: conv] in execution order A then B."""
    gb = GraphBuilder()
    x = gb.tensor([1, 4, 4, 8], "int8")
    a = gb.tensor([1, 4, 4, 8], "int8")
    gb.op(
        "CONV_2D",
        [
            x,
            gb.tensor([8, 1, 1, 8], "int8", data=np.ones((8, 1, 1, 8))),
            gb.tensor([8], "int32", data=np.zeros(8), scale=0.001),
        ],
        [a],
        strideW=1,
        strideH=1,
        dilationWFactor=1,
        dilationHFactor=1,
    )
    if unmappable_first:
        bad = gb.tensor([1, 4, 4, 8], "int8")
        gb.op("FLOOR", [a], [bad])  # not an Edge TPU op
    b = gb.tensor([1, 4, 4, 8], "int8")
    gb.op("ADD", [a, a], [b])  # independent of the unmappable op
    return gb.build([x], [b] + ([bad] if unmappable_first else []))


def test_later_op_that_does_not_depend_on_the_unmappable_one_stays_mapped():
    report = check_model(_info(_two_branches(True)))
    assert [(o.name, o.target) for o in report.ops] == [("CONV_2D", "edgetpu"), ("FLOOR", "cpu"), ("ADD", "edgetpu")]
    assert report.ops[1].reason == C.NOT_SUPPORTED
    assert report.advice[0].startswith("Only #1 FLOOR run(s) on the CPU; no op the Edge TPU could run is cut off")


def test_ops_that_depend_on_the_unmappable_one_are_cut_off():
    gb = GraphBuilder()
    x = gb.tensor([1, 4, 4, 8], "int8")
    a = gb.tensor([1, 4, 4, 8], "int8")
    gb.op("ADD", [x, x], [a])  # starts the first (Edge TPU) run
    h = gb.tensor([1, 4, 4, 8], "int8")
    gb.op("FLOOR", [a], [h])  # unmappable
    y = gb.tensor([1, 4, 4, 8], "int8")
    gb.op("ADD", [a, a], [y])  # later, independent of FLOOR: joins the first run
    z = gb.tensor([1, 4, 4, 8], "int8")
    gb.op("ADD", [h, y], [z])  # depends on FLOOR: a second mappable run
    q = gb.tensor([1, 4, 4, 8], "uint8")
    gb.op("QUANTIZE", [z], [q])
    report = check_model(_info(gb.build([x], [q])))
    assert [(o.name, o.target, o.reason) for o in report.ops] == [
        ("ADD", "edgetpu", C.MAPPED),
        ("FLOOR", "cpu", C.NOT_SUPPORTED),
        ("ADD", "edgetpu", C.MAPPED),
        ("ADD", "cpu", C.MORE_THAN_ONE_SUBGRAPH),
        ("QUANTIZE", "cpu", C.MORE_THAN_ONE_SUBGRAPH),
    ]
    assert any("#1 FLOOR breaks the graph" in a for a in report.advice)


def test_an_unmappable_op_before_any_mappable_one_cuts_nothing():
    """Like float I/O: the first run is a CPU run, the Edge TPU subgraph is the run after it."""
    gb = GraphBuilder()
    x = gb.tensor([1, 4, 4, 8], "int8")
    h = gb.tensor([1, 4, 4, 8], "int8")
    gb.op("FLOOR", [x], [h])
    z = gb.tensor([1, 4, 4, 8], "int8")
    gb.op("ADD", [h, x], [z])
    report = check_model(_info(gb.build([x], [z])))
    assert [o.target for o in report.ops] == ["cpu", "edgetpu"]


def test_partition_runs_alternate_like_tflite():
    report_runs = C.partition(_info(_float_io_model()).main, [False, True, True, False])
    assert report_runs == [(False, [0]), (True, [1, 2]), (False, [3])]


# ------------------------------------------------------------------------------ whole-model problems
def test_float_model_is_not_quantized_and_says_how_to_fix_it():
    gb = GraphBuilder()
    x = gb.tensor([1, 4], "float32", scale=None)
    w = gb.tensor([3, 4], "float32", data=np.ones((3, 4)), scale=None)
    y = gb.tensor([1, 3], "float32", scale=None)
    gb.op("FULLY_CONNECTED", [x, w, -1], [y])
    report = check_model(_info(gb.build([x], [y])))
    assert report.verdict == "none"
    assert report.ops[0].reason == C.DATA_TYPE
    p = next(p for p in report.problems if p.code == "not_quantized")
    assert "not quantized" in p.message and "edgekit quantize" in p.hint


def test_float_model_with_a_dynamic_batch_is_told_to_quantize_not_to_fix_the_batch():
    """What a plain TFLiteConverter gives for a Keras model: float ops and a batch of -1 (constant shapes)."""
    gb = GraphBuilder()
    x = gb.tensor([1, 4], "float32", scale=None, signature=[-1, 4])
    w = gb.tensor([3, 4], "float32", data=np.ones((3, 4)), scale=None)
    y = gb.tensor([1, 3], "float32", scale=None, signature=[-1, 3])
    gb.op("FULLY_CONNECTED", [x, w, -1], [y])
    report = check_model(_info(gb.build([x], [y])))
    assert [p.code for p in report.problems] == ["not_quantized", "data_type"]
    assert any("not quantized" in a and "edgekit quantize" in a for a in report.advice)


def test_a_minus_one_batch_alone_is_not_fatal():
    """srgan's pair: -1 in every shape_signature, constant shapes, compiled (TFLite allocates the stored shape)."""
    gb = GraphBuilder()
    x = gb.tensor([1, 4, 4, 8], "int8", signature=[-1, 4, 4, 8])
    y = gb.tensor([1, 4, 4, 8], "int8", signature=[-1, 4, 4, 8])
    gb.op("ADD", [x, x], [y])
    report = check_model(_info(gb.build([x], [y])))
    assert report.verdict == "full" and not any(p.fatal for p in report.problems)


def test_a_shape_computed_at_run_time_is_fatal():
    """A Keras Reshape in a -1-batch model: SHAPE -> ... -> RESHAPE with a computed shape (edgetpu#829)."""
    gb = GraphBuilder()
    x = gb.tensor([1, 4, 4, 8], "int8", signature=[-1, 4, 4, 8])
    shape = gb.tensor([2], "int32", scale=None)
    gb.op("SHAPE", [x], [shape])
    y = gb.tensor([1, 128], "int8", signature=[-1, 128])
    gb.op("RESHAPE", [x, shape], [y])
    report = check_model(_info(gb.build([x], [y])))
    assert report.verdict == "none" and report.ops[1].reason == C.DYNAMIC
    p = report.problems[0]
    assert p.fatal and p.code == "dynamic_shapes" and "batch_size=1" in p.hint and "op #1" in p.message


def test_op_version_beyond_the_compiler_is_fatal():
    gb = GraphBuilder()
    x = gb.tensor([1, 4, 4, 8], "int8")
    y = gb.tensor([1, 4, 4, 8], "int8")
    gb.op(
        "CONV_2D",
        [
            x,
            gb.tensor([8, 1, 1, 8], "int8", data=np.ones((8, 1, 1, 8))),
            gb.tensor([8], "int32", data=np.zeros(8), scale=0.001),
        ],
        [y],
        version=6,
        strideW=1,
        strideH=1,
        dilationWFactor=1,
        dilationHFactor=1,
    )
    report = check_model(_info(gb.build([x], [y])))
    assert report.verdict == "none" and report.ops[0].reason == C.PARSE_FAILED
    assert "CONV_2D v6 needs TensorFlow Lite 2.9.0" in report.problems[0].message
    assert report.ops[0].detail == f"otherwise: {C.MAPPED}"


def test_custom_ops_stay_on_the_cpu_and_only_unknown_ones_warn():
    for code, warned in (("Atan", True), ("TFLite_Detection_PostProcess", False)):
        gb = GraphBuilder()
        x = gb.tensor([1, 8], "int8")
        y = gb.tensor([1, 8], "int8")
        gb.op("CUSTOM", [x], [y], custom_code=code)
        report = check_model(_info(gb.build([x], [y])))
        assert not any(p.fatal for p in report.problems), code
        assert any(p.code == "custom_op" for p in report.problems) == warned, code
        assert report.ops[0].target == "cpu" and report.ops[0].confidence == C.CONFIRMED  # where is sure
        assert [p.confidence for p in report.problems if p.code == "custom_op"] == ([C.UNCERTAIN] if warned else [])


# ------------------------------------------------------------------------------------ op rules
def _checked(name, in_shape, out_shape, extra_inputs=(), dtype="int8", **options):
    """check's result on a model of one op ``name``."""
    gb = GraphBuilder()
    x = gb.tensor(in_shape, dtype)
    y = gb.tensor(out_shape, dtype)
    ins = [x] + [f(gb) for f in extra_inputs]
    gb.op(name, ins, [y], **options)
    return check_model(_info(gb.build([x], [y])))


def _single(name, in_shape, out_shape, extra_inputs=(), dtype="int8", **options):
    return _checked(name, in_shape, out_shape, extra_inputs, dtype, **options).ops[0]


def test_softmax_limits():
    assert _single("SOFTMAX", [1, 1001], [1, 1001], beta=1.0).target == "edgetpu"
    big = _single("SOFTMAX", [1, 20000], [1, 20000], beta=1.0)
    assert big.target == "cpu" and "16,000" in big.detail
    # Coral documents 1-D only; the yolov8n log shows SOFTMAX on 1x4x8400x16 otherwise mappable
    assert _single("SOFTMAX", [1, 4, 4, 10], [1, 4, 4, 10], beta=1.0).target == "edgetpu"


def test_strided_slice_needs_unit_strides():
    args = [lambda g: g.const([0, 0, 0, 0]), lambda g: g.const([1, 4, 4, 8])]
    ok = _single("STRIDED_SLICE", [1, 4, 4, 8], [1, 4, 4, 8], args + [lambda g: g.const([1, 1, 1, 1])])
    bad = _single("STRIDED_SLICE", [1, 4, 4, 8], [1, 2, 2, 8], args + [lambda g: g.const([1, 2, 2, 1])])
    assert ok.target == "edgetpu" and bad.target == "cpu" and "strides" in bad.detail


def test_fully_connected_rules():
    def w(per_channel):
        def make(g):
            return g.tensor(
                [3, 8],
                "int8",
                data=np.ones((3, 8)),
                scale=[0.1, 0.2, 0.3] if per_channel else 0.1,
                zero_point=[0, 0, 0] if per_channel else 0,
            )

        return make

    bias = lambda g: g.tensor([3], "int32", data=np.zeros(3), scale=0.001)
    assert _single("FULLY_CONNECTED", [1, 8], [1, 3], [w(False), bias], version=4).target == "edgetpu"
    # Per-channel weights map (compiler 16 on LibrEdgeTPU's dense templates: C.EV_PER_CHANNEL_FC).
    assert _single("FULLY_CONNECTED", [1, 8], [1, 3], [w(True), bias], version=4).target == "edgetpu"
    # keep_num_dims: the compiler-16 logs of KeondoPark/votenet_tf's voting layers say "unspecified limitation".
    checked = _checked("FULLY_CONNECTED", [1, 8], [1, 3], [w(False), bias], version=5, keepNumDims=True)
    [keep], [problem] = checked.ops, checked.problems
    assert keep.target == "cpu" and keep.reason == C.UNSPECIFIED and "Flatten" in problem.hint and problem.ops == (0,)
    assert keep.confidence == C.CONFIRMED


def test_rank_rule_only_three_innermost_dims_may_exceed_one():
    assert _single("ADD", [1, 4, 4, 8], [1, 4, 4, 8], [lambda g: g.tensor([1, 4, 4, 8], "int8")]).target == "edgetpu"
    bad = _single("ADD", [2, 4, 4, 8], [2, 4, 4, 8], [lambda g: g.tensor([2, 4, 4, 8], "int8")])
    assert bad.reason == C.RANK


def test_concatenation_with_a_constant_must_be_two_inputs_of_zeros():
    zeros = lambda g: g.tensor([1, 4, 4, 2], "int8", data=np.zeros((1, 4, 4, 2)))
    ones = lambda g: g.tensor([1, 4, 4, 2], "int8", data=np.ones((1, 4, 4, 2)))
    assert _single("CONCATENATION", [1, 4, 4, 8], [1, 4, 4, 10], [zeros], axis=3).target == "edgetpu"
    assert _single("CONCATENATION", [1, 4, 4, 8], [1, 4, 4, 10], [ones], axis=3).target == "cpu"


def test_pool_with_fused_activation_and_runtime_too_old():
    relu = _single(
        "MAX_POOL_2D",
        [1, 4, 4, 8],
        [1, 2, 2, 8],
        strideW=2,
        strideH=2,
        filterWidth=2,
        filterHeight=2,
        fusedActivationFunction=S.ActivationFunctionType.RELU,
    )
    assert relu.target == "cpu" and "fused activation" in relu.detail
    gb = GraphBuilder()
    x = gb.tensor([1, 4, 8], "int8")
    y = gb.tensor([1, 8, 4], "int8")
    gb.op("TRANSPOSE", [x, gb.const([0, 2, 1])], [y])
    info = _info(gb.build([x], [y]))
    assert check_model(info).ops[0].target == "edgetpu"
    old_runtime = check_model(info, min_runtime=13)
    [old], [problem] = old_runtime.ops, old_runtime.problems
    assert old.reason == C.NOT_SUPPORTED and "needs Edge TPU runtime 14" in old.detail
    assert "--min-runtime 14" in problem.hint and problem.ops == (0,)


def test_min_runtime_out_of_range_is_a_usage_error():
    from edgekit.errors import UsageError

    with pytest.raises(UsageError):
        check_model(_info(conv_chain(1)), min_runtime=15)


def test_parameters_beyond_the_cache_are_estimated_off_chip():
    gb = GraphBuilder()
    x = gb.tensor([1, 4096], "int8")
    w = gb.tensor([2500, 4096], "int8", data=np.zeros((2500, 4096), np.int8))  # ~9.8 MiB
    y = gb.tensor([1, 2500], "int8")
    gb.op("FULLY_CONNECTED", [x, w, -1], [y], version=4)
    report = check_model(_info(gb.build([x], [y])))
    assert report.summary.on_chip_bytes_estimate == C.PARAMETER_CACHE_BYTES
    assert report.summary.off_chip_bytes_estimate == 2500 * 4096 - C.PARAMETER_CACHE_BYTES
    assert any(p.code == "off_chip" for p in report.problems)


# ----------------------------------------------------------------------------------- the report
def test_json_schema():
    report = check_model(tflite_model.load(shared_file("deeplabv3_mnv2_dm05_pascal_quant.tflite")))
    d = report.to_dict()
    assert {"model", "verdict", "ops", "summary", "problems"} <= set(d)
    assert set(d["ops"][0]) == {"index", "name", "version", "target", "reason", "detail", "confidence", "subgraph"}
    assert set(d["summary"]) == {
        "edgetpu_ops",
        "cpu_ops",
        "subgraphs",
        "uncertain_ops",
        "param_bytes",
        "on_chip_bytes_estimate",
        "off_chip_bytes_estimate",
    }
    assert d["multiple_subgraphs"] is False and {o["confidence"] for o in d["ops"]} <= {"confirmed", "uncertain"}
    assert {o["subgraph"] for o in d["ops"] if o["target"] == "edgetpu"} == {0}
    assert d["summary"]["edgetpu_ops"] == 64 and d["summary"]["cpu_ops"] == 8
    json.dumps(d)


def test_table_looks_like_the_compilers_operation_log():
    text = format_table([("CONV_2D", 36, C.MAPPED)])
    real = (FIXTURES / "v16_full_yolov5s_160.log").read_text().splitlines()
    assert text.splitlines()[0] == real[4]  # "Operator                       Count      Status"
    assert text.splitlines()[2] == "CONV_2D                        36         Mapped to Edge TPU"


def test_check_imports_no_tensorflow():
    code = (
        "import sys; from edgekit.edgetpu import compatibility, compiler as edgetpu_compiler; import edgekit.cli.commands; "
        "assert 'tensorflow' not in sys.modules, 'tensorflow imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[2])


# ------------------------------------------------------------------------------------------- CLI
def test_cli_check_text_json_and_strict():
    path = str(shared_file("deeplabv3_mnv2_dm05_pascal_quant.tflite"))
    r = CliRunner().invoke(cli, ["check", path])
    assert r.exit_code == 0, r.output
    assert "Operator                       Count      Status" in r.output
    assert "More than one subgraph is not supported" in r.output
    assert "Verdict: PARTIAL: 64 of 72 ops on the Edge TPU" in r.output
    assert "Op #64 RESIZE_BILINEAR breaks the graph" in r.output
    r = CliRunner().invoke(cli, ["check", path, "--json"])
    assert json.loads(r.output)["verdict"] == "partial"
    r = CliRunner().invoke(cli, ["check", path, "--strict"])
    assert r.exit_code == 7
    r = CliRunner().invoke(cli, ["check", str(shared_file("mobilenet_v1_0.25_128_quant.tflite")), "--strict"])
    assert r.exit_code == 0 and "Verdict: FULL" in r.output


def test_cli_check_on_compiled_model_and_bad_input(tmp_path):
    r = CliRunner().invoke(cli, ["check", str(shared_file("mobilenet_v1_0.25_128_quant_edgetpu.tflite"))])
    assert r.exit_code == 0 and "ALREADY COMPILED" in r.output
    # its parameters live in the Edge TPU program, not in "0 bytes" of parameters
    assert "bytes of Edge TPU program and parameters" in r.output and "Parameters of the CPU ops: 0 bytes" in r.output
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(b"not a model")
    r = CliRunner().invoke(cli, ["check", str(bad)])
    assert r.exit_code == 3
    r = CliRunner().invoke(cli, ["check", str(bad), "--min-runtime", "9"])
    assert r.exit_code == 2


@pytest.mark.tf
def test_a_model_made_by_edgekit_quantize_is_fully_mappable(digits_int8):
    report = check_model(tflite_model.load(digits_int8.output))
    assert report.verdict == "full", [(o.name, o.reason, o.detail) for o in report.ops if o.target == "cpu"]


def test_squeeze_only_of_leading_ones():
    assert _single("SQUEEZE", [1, 1, 10], [10]).target == "edgetpu"
    # Coral documents leading 1s only; no compile tests it, and documented layout rules were mostly contradicted
    # once tested (compatibility.guess): the best guess maps it, uncertain, and says why it may not.
    inner = _single("SQUEEZE", [1, 5, 1, 10], [1, 5, 10])
    assert (inner.target, inner.confidence) == ("edgetpu", C.UNCERTAIN)
    assert C.best_guess(C.Kind.LAYOUT) == "edgetpu"


def test_unsupported_op_on_integers_is_not_supported_and_dequantize_is_a_data_type_problem():
    assert _single("FLOOR_MOD", [1, 8], [1, 8], [lambda g: g.tensor([1, 8], "int8")]).reason == C.NOT_SUPPORTED
    gb = GraphBuilder()
    x = gb.tensor([1, 8], "int8")
    y = gb.tensor([1, 8], "float32", scale=None)
    gb.op("DEQUANTIZE", [x], [y], version=2)
    assert check_model(_info(gb.build([x], [y]))).ops[0].reason == C.DATA_TYPE


def test_an_op_without_its_tensors_is_a_bad_model_not_a_crash(tmp_path):
    gb = GraphBuilder()
    x = gb.tensor([1, 10], "int8")
    gb.op("SOFTMAX", [x], [], beta=1.0)
    path = tmp_path / "broken.tflite"
    path.write_bytes(gb.build([x], [x]))
    r = CliRunner().invoke(cli, ["check", str(path)])
    assert r.exit_code == 3
    assert r.stderr.startswith("error: not a valid TFLite model: op #0 SOFTMAX has no input or no output tensor")


def test_cli_check_on_a_float_model_says_not_quantized(tmp_path):
    gb = GraphBuilder()
    x = gb.tensor([1, 4], "float32", scale=None)
    w = gb.tensor([3, 4], "float32", data=np.ones((3, 4)), scale=None)
    y = gb.tensor([1, 3], "float32", scale=None)
    gb.op("FULLY_CONNECTED", [x, w, -1], [y])
    path = tmp_path / "float.tflite"
    path.write_bytes(gb.build([x], [y]))
    r = CliRunner().invoke(cli, ["check", str(path)])
    assert r.exit_code == 0
    assert "not quantized" in r.output and "edgekit quantize" in r.output and "Verdict: NONE" in r.output


def test_mean_over_many_positions_stays_on_the_cpu():
    """google-coral/edgetpu#461: MEAN on 1x256x128x3 not mapped; on 1x64x128x3 pieces it mapped."""
    big = _single("MEAN", [1, 256, 128, 3], [1, 1, 1, 3], [lambda g: g.const([1, 2])], keepDims=True)
    small = _single("MEAN", [1, 64, 128, 3], [1, 1, 1, 3], [lambda g: g.const([1, 2])], keepDims=True)
    assert (big.target, big.reason, big.confidence) == ("cpu", C.UNSPECIFIED, C.UNCERTAIN) and "32,768" in big.detail
    assert small.target == "edgetpu"


def test_row_size_limit_applies_to_any_op_on_a_wide_tensor():
    """yolov8n: LOGISTIC on 1x80x8400 refused; ADD on 1x2x8400 mappable (the two innermost dims count)."""
    wide = _single("LOGISTIC", [1, 80, 8400], [1, 80, 8400])
    narrow = _single("LOGISTIC", [1, 2, 8400], [1, 2, 8400])
    assert wide.reason == C.UNSPECIFIED and "672,000" in wide.detail and narrow.target == "edgetpu"


def test_quantize_gate_and_its_checks_come_from_the_same_report():
    """What quantize rejects its output for, and its `checks` JSON, computed from check's report."""
    gb = GraphBuilder()
    x = gb.tensor([1, 8], "uint8")
    w = gb.tensor([3, 8], "int8", data=np.ones((3, 8)), scale=[0.1, 0.2, 0.3], zero_point=[0, 0, 0])
    y = gb.tensor([1, 3], "uint8")
    gb.op("FULLY_CONNECTED", [x, w, -1], [y], version=4)
    info = _info(gb.build([x], [y]))
    report = check_model(info)
    # Per-channel Dense weights are no reason to refuse: compiler 16 maps them (C.EV_PER_CHANNEL_FC).
    assert C.quantize_gate(report, "uint8", info) == [] and report.verdict == "full"
    assert GateChecks.from_check(report).to_dict() == {
        "full_int8": True,
        "static_shapes": True,
        "op_versions_within_compiler": True,
        "edgetpu_verdict": "full",
    }
    assert [p.code for p in C.quantize_gate(report, "int8", info)] == ["io_type", "io_type"]
    ok = check_model(_info(conv_chain(2)))
    assert GateChecks.from_check(ok) == GateChecks(True, True, True, "full")


def test_transpose_limit_sits_between_the_yolov8_192_log_and_a_yolov8_pair():
    """Compiler 16 mapped TRANSPOSE on 1x24x24x144 (82,944 values, yolov8n 192 log) and refused 1x40x40x65
    (104,000, the ledger's G-aad-a/ddu-eksamen pair)."""
    perm = [lambda g: g.const([0, 3, 1, 2])]
    mapped = _single("TRANSPOSE", [1, 24, 24, 144], [1, 144, 24, 24], perm)
    refused = _single("TRANSPOSE", [1, 40, 40, 65], [1, 65, 40, 40], perm)
    in_gap = _single("TRANSPOSE", [1, 40, 40, 62], [1, 62, 40, 40], perm)  # 99,200: neither seen
    assert mapped.target == "edgetpu"
    assert (refused.target, refused.reason, refused.confidence) == ("cpu", C.UNSPECIFIED, C.CONFIRMED)
    assert "104,000" in refused.detail and "real compiles refuse it" in refused.detail
    assert (in_gap.target, in_gap.confidence) == ("cpu", C.UNCERTAIN) and "heuristic" in in_gap.detail


def test_reshape_limit_sits_between_yolov5_640s_p4_and_p3_head_reshapes():
    """yolov5 at 640 (compiler 16 logs): 1x40x40x255 -> 1x1600x3x85 mapped, 1x80x80x255 -> 1x6400x3x85 refused,
    although no tensor of either has wide rows."""

    def reshape(h):
        return _single("RESHAPE", [1, h, h, 255], [1, h * h, 3, 85], [lambda g: g.const([1, h * h, 3, 85])])

    assert reshape(40).target == "edgetpu"
    big = reshape(80)
    assert (big.target, big.reason, big.confidence) == ("cpu", C.UNSPECIFIED, C.UNCERTAIN)
    assert "1,632,000" in big.detail


def test_nearest_neighbour_resizes_by_any_factor_bilinear_by_integer_factors():
    """EfficientDet-Lite0 at 320 (compiler 16 log): all 12 RESIZE_NEAREST_NEIGHBOR mapped, its BiFPN's
    3x3 -> 5x5 among them; bilinear keeps the integer-factor heuristic (deeplab's 1 -> 33 on the CPU)."""
    size = [lambda g: g.const([5, 5])]
    assert _single("RESIZE_NEAREST_NEIGHBOR", [1, 3, 3, 64], [1, 5, 5, 64], size).target == "edgetpu"
    # The integer-factor heuristic is edgekit's reading of the documentation; such readings were contradicted once
    # tested (the nearest-neighbour one by that log): the best guess maps it, uncertain.
    odd = _single("RESIZE_BILINEAR", [1, 3, 3, 64], [1, 5, 5, 64], size)
    assert (odd.target, odd.reason, odd.confidence) == ("edgetpu", C.MAPPED, C.UNCERTAIN)
    assert _single("RESIZE_BILINEAR", [1, 5, 5, 64], [1, 10, 10, 64], [lambda g: g.const([10, 10])]).target == "edgetpu"
    flat = _single("RESIZE_NEAREST_NEIGHBOR", [1, 3, 64], [1, 5, 64], [lambda g: g.const([5])])
    assert (flat.target, flat.confidence) == ("edgetpu", C.UNCERTAIN)  # documented layout rule: best guess maps


def test_strict_fails_on_certain_cpu_ops_only_and_the_verdict_counts_the_uncertain(tmp_path):
    """An op put on the CPU by a rule no real compile shows is reported as uncertain (text, --json, the
    verdict line); --strict holds only ops certain to stay on the CPU against the model."""

    def model(op: str, out_shape: list[int], extra) -> str:
        gb = GraphBuilder()
        x, y = gb.tensor([1, 8, 8, 4], "int8"), gb.tensor(out_shape, "int8")
        gb.op(op, [x, extra(gb)], [y])
        path = tmp_path / f"{op.lower()}.tflite"
        path.write_bytes(gb.build([x], [y]))
        return str(path)

    unsure = model("EXPAND_DIMS", [1, 1, 8, 8, 4], lambda g: g.const([1]))  # uncertain rule, nothing certain
    r = CliRunner().invoke(cli, ["check", unsure, "--strict"])
    assert r.exit_code == 0, r.output
    assert "[uncertain]" in r.output and "1 of these placements uncertain" in r.output
    d = json.loads(CliRunner().invoke(cli, ["check", unsure, "--json"]).output)
    assert d["summary"]["uncertain_ops"] == 1 and d["ops"][0]["confidence"] == "uncertain"
    certain = model("ARG_MAX", [1, 8, 8], lambda g: g.const([3]))  # not an Edge TPU op at all
    r = CliRunner().invoke(cli, ["check", certain, "--strict"])
    assert r.exit_code == 7 and "1 of 1 ops would run on the CPU" in r.output


def test_strict_fails_a_model_the_compiler_refuses_and_one_with_a_custom_op():
    """A refusal the evidence shows (a shape computed at run time) fails --strict, and so does a custom op,
    certain to run on the CPU whether or not the compiler accepts the model (that part is uncertain)."""
    gb = GraphBuilder()
    x = gb.tensor([1, 8, 8, 4], "int8")
    shape = gb.tensor([4], "int32")
    y = gb.tensor([1, 256], "int8")
    gb.op("SHAPE", [x], [shape])
    gb.op("RESHAPE", [x, shape], [y])
    report = check_model(_info(gb.build([x], [y])))
    assert any(p.fatal for p in report.problems) and report.strict_error() is not None
    assert "refuse" in report.strict_error().message
    gb = GraphBuilder()
    x, y, z = gb.tensor([1, 8], "int8"), gb.tensor([1, 8], "int8"), gb.tensor([1, 8], "int8")
    gb.op("ADD", [x, x], [y])
    gb.op("CUSTOM", [y], [z], custom_code="MyDecoder")
    report = check_model(_info(gb.build([x], [z])))
    assert report.ops[-1].confidence == C.CONFIRMED and report.strict_error() is not None


def test_an_op_mapped_as_a_best_guess_is_an_uncertain_problem_and_never_fails_strict():
    gb = GraphBuilder()
    x, y = gb.tensor([1, 5, 1, 10], "int8"), gb.tensor([1, 5, 10], "int8")
    gb.op("SQUEEZE", [x], [y])
    report = check_model(_info(gb.build([x], [y])))
    assert report.verdict == "full" and report.summary.uncertain_ops == 1 and report.strict_error() is None
    [p] = report.problems
    assert (p.code, p.confidence, p.ops) == ("uncertain_rule", C.UNCERTAIN, (0,)) and "squeeze" in p.message
    assert json.loads(json.dumps(report.to_dict()))["ops"][0]["target"] == "edgetpu"


def test_every_rule_has_an_explicit_unique_id_and_the_page_lists_it():
    from edgekit.cli import docs as cli_docs

    ids = [rule_id for rule_id, _, _ in C.all_rules()]
    assert len(ids) == len(set(ids)) and all(ids)
    page = cli_docs.RULES_PAGE.read_text(encoding="utf-8")
    assert all(f"`{rule_id}`" in page for rule_id in ids), [i for i in ids if f"`{i}`" not in page]
    assert all(f"`{z.id}`" in page for z in C.SIZE_LIMITS)


def test_judge_has_no_op_name_branch_and_no_rule_takes_its_identity_from_a_function_name():
    import inspect
    import re

    from edgekit.edgetpu.compatibility import op_judge as judge_module

    source = inspect.getsource(judge_module.judge)
    assert not re.search(r"name\s*==", source), "judge decides by the tables, not by op name"
    package = Path(C.__file__).parent
    assert not [p.name for p in package.glob("*.py") if "__name__" in p.read_text()]
    # each module small: at most 300 statements (the line budget's measure, which ruff format's wrapping does not
    # move; 300 is what the old limit of 500 physical lines held before the tree was formatted)
    from tests.line_budget import code_lines

    assert {p.name: code_lines(p.read_text()) for p in package.glob("*.py") if code_lines(p.read_text()) > 300} == {}


def test_check_has_one_type_from_the_engine_to_its_json():
    """The engine returns the document itself (no report type of its own and no adapters beside it), and
    results/check.py imports nothing of the engine, not even for a type checker (the type-only circle it had)."""
    import ast
    import inspect

    from edgekit.results import check as document

    report = check_model(_info(conv_chain(2)))
    assert type(report) is CheckResult and {type(o).__name__ for o in report.ops} == {"OpPlacement"}
    tree = ast.parse(inspect.getsource(document))
    modules = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    modules |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    below = ("edgekit.results", "edgekit.records", "edgekit.errors")
    assert [m for m in modules if m and m.startswith("edgekit") and not m.startswith(below)] == []
    records = [v for v in vars(document).values() if isinstance(v, type) and v.__module__ == document.__name__]
    assert [f"{c.__name__}.{n}" for c in records for n in vars(c) if n.startswith("of_")] == []


def test_verdicts_targets_and_confidence_are_str_enums_equal_to_the_json_words():
    assert [v.value for v in C.Verdict] == ["full", "partial", "none"]
    assert [t.value for t in C.Target] == ["edgetpu", "cpu"] and [c.value for c in C.Confidence] == [
        "confirmed",
        "uncertain",
    ]
    report = check_model(_info(conv_chain(2)))
    d = report.to_dict()
    assert json.loads(json.dumps(d)) == d and d["verdict"] == "full" and isinstance(report.verdict, C.Verdict)
    back = CheckResult.from_dict(json.loads(json.dumps(d)))  # the document read back renders and judges alike
    assert back == report and back.ops[0].target is C.Target.EDGETPU and back.strict_error() is None
    assert back.render_text() == report.render_text() and back.table() == report.table()
    problem = CheckProblem("x", "y", None, (), False, C.UNCERTAIN)
    assert CheckProblem.from_dict(json.loads(json.dumps(problem.to_dict()))).confidence is C.UNCERTAIN
