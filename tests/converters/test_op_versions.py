"""The op-version ceiling of edgetpu_compiler 16, checked against facts reported for the real compiler."""

from __future__ import annotations

import pytest

from edgekit.edgetpu import op_versions
from edgekit.edgetpu.op_versions import max_compiler_version, version_problem
from edgekit.tflite import model as tflite_model
from tests.conftest import shared_models


def test_conv_2d_v5_parses_and_v6_is_rejected():
    # google-coral/edgetpu#631: "Didn't find op for builtin opcode 'CONV_2D' version '6'"
    assert max_compiler_version("CONV_2D") == 5
    assert version_problem("CONV_2D", 5) is None
    assert version_problem("CONV_2D", 6) == (
        "CONV_2D v6 needs TensorFlow Lite 2.9.0; edgetpu_compiler 16 knows versions up to 5 (TFLite 2.5)"
    )


def test_fully_connected_v9_parses_v10_and_later_do_not():
    # v9 parses (whether it maps is compatibility's business, e.g. keep_num_dims from v5 on does not).
    assert max_compiler_version("FULLY_CONNECTED") == 9
    assert version_problem("FULLY_CONNECTED", 9) is None
    assert "2.11.0" in version_problem("FULLY_CONNECTED", 10)
    # v12 (TF 2.17) is newer than the transcribed map: still rejected.
    assert "newer than 2.5.0" in version_problem("FULLY_CONNECTED", 12)


@pytest.mark.parametrize(
    "op, version, ceiling",
    [
        ("EXP", 2, 1),  # TF 2.16, google-coral/libedgetpu#71
        ("QUANTIZE", 3, 2),  # 2.7.0
        ("TRANSPOSE_CONV", 4, 3),  # 2.13.0, google-coral/edgetpu#845
    ],
)
def test_versions_reported_as_rejected_are_rejected(op, version, ceiling):
    assert max_compiler_version(op) == ceiling
    assert version_problem(op, ceiling) is None
    problem = version_problem(op, version)
    assert problem and problem.startswith(f"{op} v{version} needs ")
    assert f"knows versions up to {ceiling}" in problem


def test_table_facts_from_runtime_version_cc():
    assert op_versions.first_release("ADD", 4) == "2.6.0"
    assert op_versions.first_release("CAST", 2) == "2.7.0"
    assert op_versions.first_release("FULLY_CONNECTED", 9) == "2.3.0"
    assert max_compiler_version("ADD") == 3
    assert max_compiler_version("RESIZE_BILINEAR") == 4  # v4 is 2.5.0 itself: included
    assert max_compiler_version("BROADCAST_TO") == 3  # the map starts at v2


def test_ops_the_compiler_does_not_know():
    assert max_compiler_version("GELU") is None  # first release 2.9.0
    assert "does not know this op" in version_problem("GELU", 1)
    assert max_compiler_version("STABLEHLO_ADD") is None
    assert "not a builtin op" in version_problem("STABLEHLO_ADD", 1)
    assert version_problem("CUSTOM", 1) is None  # custom ops are judged elsewhere


# The CPU halves of the compiled pairs (model_invoking_error.tflite is a custom-op toy, never compiled).
MODELS = [p for p in shared_models() if (p.parent / f"{p.stem}_edgetpu.tflite").exists()]


@pytest.mark.parametrize("path", MODELS, ids=[p.name for p in MODELS])
def test_every_op_of_the_real_compiled_models_is_within_the_ceiling(path):
    """These models went through the real compiler 16: all their builtin ops must parse."""
    info = tflite_model.load(path)
    for op in info.ops:
        assert version_problem(op.name, op.version) is None, (op.name, op.version)


# ------------------------------------------------------------------ the parser's own registrations
def test_the_ceiling_is_the_v2_5_0_registrations_except_where_evidence_overrides_them():
    """CEILING equals register.cc's AddBuiltin(min, max) at v2.5.0 for every op, but for the listed overrides,
    each of which cites evidence that resolves (tests/converters/test_evidence.py resolves every reference)."""
    for op, (lo, hi) in op_versions.REGISTERED.items():
        if op in op_versions.PARSE_OVERRIDES:
            continue
        assert op_versions.CEILING[op] == (lo, hi), op
    assert set(op_versions.CEILING) == set(op_versions.REGISTERED) | set(op_versions.PARSE_OVERRIDES)
    for op, override in op_versions.PARSE_OVERRIDES.items():
        assert override.evidence and override.why, op
        assert op_versions.CEILING[op][1] == override.max_version != op_versions.REGISTERED.get(op, (0, 0))[1]
    assert "v2.5.0" in op_versions.REGISTERED_SOURCE


def test_registrations_and_runtime_version_cc_agree():
    """Two sources for one fact: a version runtime_version.cc dates 2.5.0 or earlier is registered at v2.5.0,
    a later one is not (where they disagreed, the registrations, the parser's own table, would decide)."""
    disagree = {
        op: (hi, op_versions.released_by(op, "2.5.0"))
        for op, (lo, hi) in op_versions.REGISTERED.items()
        if op_versions.released_by(op, "2.5.0") != hi
    }
    assert not disagree, disagree
    known = {op for op, _ in op_versions.FIRST_RELEASE}
    assert {op for op in known if op_versions.released_by(op, "2.5.0")} == set(op_versions.REGISTERED)


def test_a_version_below_the_registered_minimum_is_refused():
    assert version_problem("BROADCAST_TO", 1) is not None  # v1 was rolled back; the registration starts at 2
    assert version_problem("BROADCAST_TO", 2) is None


def test_versions_first_released_in_2_6_0_are_unsure_refusals_and_later_ones_sure():
    assert version_problem("ADD", 4) and not op_versions.refusal_is_sure("ADD", 4)
    assert version_problem("STRIDED_SLICE", 6) and not op_versions.refusal_is_sure("STRIDED_SLICE", 6)
    assert op_versions.refusal_is_sure("CONV_2D", 6) and op_versions.refusal_is_sure("EXP", 2)
    assert op_versions.refusal_is_sure("FULLY_CONNECTED", 12)  # not in the transcribed map: newer still


def test_no_ledger_pair_the_compiler_compiled_is_predicted_unparseable():
    """Every compiled pair of the evidence ledger proves its op versions were parsed: check never says
    'cannot parse' (surely or perhaps) for one."""
    from pathlib import Path

    from edgekit.edgetpu.compatibility import check_model
    from edgekit.edgetpu.fidelity import ledger_pairs, pair_id

    ledger = Path(__file__).resolve().parents[1] / "fixtures" / "evidence"
    pairs = ledger_pairs(ledger)
    assert len(pairs) >= 100
    for row, cpu, actual in pairs:
        assert actual.edgetpu_subgraphs >= 1
        refused = {(op.name, op.version) for g in cpu.subgraphs for op in g.ops if version_problem(op.name, op.version)}
        assert not refused, (pair_id(row["repo"], row["model_path"]), refused)
        report = check_model(cpu)
        assert not [p for p in report.problems if p.code in ("op_version", "op_version_unsure")]


def _add_model(version: int) -> tflite_model.ModelInfo:
    from tests.tflite_builder import GraphBuilder

    gb = GraphBuilder()
    a, b, y = gb.tensor([1, 4, 4, 8], "int8"), gb.tensor([1, 4, 4, 8], "int8"), gb.tensor([1, 4, 4, 8], "int8")
    gb.op("ADD", [a, b], [y], version=version)
    return tflite_model.ModelInfo.from_bytes(gb.build([a, b], [y]), "add.tflite")


def test_an_unsure_version_is_reported_uncertain_and_the_model_judged_as_parsed():
    """ADD v4 (TFLite 2.6.0): not registered at v2.5.0, but the best guess is that compiler 16 parses it."""
    from edgekit.edgetpu.compatibility import UNCERTAIN, check_model

    report = check_model(_add_model(4))
    assert report.verdict == "full" and not any(p.fatal for p in report.problems)
    doubts = [p for p in report.problems if p.code == "op_version_unsure"]
    assert len(doubts) == 1 and doubts[0].confidence == UNCERTAIN and "ADD v4" in doubts[0].message
    assert report.strict_error() is None  # uncertainty alone does not fail --strict
    assert check_model(_add_model(3)).problems == ()


def test_a_sure_refusal_stays_fatal():
    from edgekit.edgetpu.compatibility import CONFIRMED, check_model
    from tests.tflite_builder import GraphBuilder

    gb = GraphBuilder()
    a, y = gb.tensor([1, 8], "int8"), gb.tensor([1, 8], "int8")
    gb.op("QUANTIZE", [a], [y], version=3)  # TFLite 2.7.0
    report = check_model(tflite_model.ModelInfo.from_bytes(gb.build([a], [y]), "q.tflite"))
    assert report.verdict == "none" and [p.confidence for p in report.problems if p.fatal] == [CONFIRMED]
    assert report.strict_error() is not None
