"""quantize's and build's summaries carry check's real verdict, and advice comes from a table with evidence
(issue 24 items 5 and 6).

Was: "Edge TPU checks: ... passed" printed as a fixed string for a MobileNetV3Small that check rates
PARTIAL, and generic advice ("replace it with a supported op") where minimalistic=True is the known fix.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as S
from click.testing import CliRunner

from edgekit.edgetpu import advice, compatibility
from edgekit.edgetpu.advice import AdviceKind, ModelFacts
from edgekit.edgetpu.compatibility.words import Verdict
from edgekit.results.build import BundleReports
from edgekit.results.check import CheckDigest
from edgekit.tflite import model as tflite_model
from tests.conftest import TESTDATA

DEEPLAB = TESTDATA / "deeplabv3_mnv2_dm05_pascal_quant.tflite"


# ------------------------------------------------------------------------------------------ pure parts
@pytest.mark.skipif(not DEEPLAB.is_file(), reason=f"{DEEPLAB} not found (set EDGEKIT_TESTDATA)")
def test_the_summary_is_checks_own_verdict_with_the_cpu_ops_by_type():
    report = compatibility.check_model(tflite_model.load(DEEPLAB))
    summary = CheckDigest.from_check(report)
    in_manifest = json.loads(json.dumps(BundleReports(report, None).to_dict()))
    assert "edgetpu" not in in_manifest["check"]  # a CPU model has no Edge TPU block: the manifest leaves it out
    manifests = BundleReports.from_dict(in_manifest).check
    assert summary == CheckDigest.from_check(manifests)  # build's manifest, read back
    assert summary == CheckDigest.from_dict(json.loads(json.dumps(summary.to_dict())))
    assert summary.verdict == Verdict(report.verdict) == Verdict.PARTIAL
    assert (summary.edgetpu_ops, summary.total_ops) == (report.summary.edgetpu_ops, len(report.ops))
    by_type = {c.op: c.count for c in summary.cpu_ops_by_type}
    assert sum(by_type.values()) == report.summary.cpu_ops and by_type.get("RESIZE_BILINEAR")
    assert summary.uncertain_ops == report.summary.uncertain_ops
    first = summary.lines()[0]
    assert f"PARTIAL: {report.summary.edgetpu_ops} of {len(report.ops)} ops on the Edge TPU" in first
    assert "RESIZE_BILINEAR" in first and "passed" not in first


def test_off_chip_parameters_are_said_when_the_estimate_has_them():
    d = {
        "verdict": "full",
        "edgetpu_ops": 3,
        "total_ops": 3,
        "cpu_ops_by_type": [],
        "uncertain_ops": 0,
        "subgraphs": 1,
        "min_runtime": 14,
        "edgetpu_param_bytes": 12 * 1024 * 1024,
        "off_chip_bytes_estimate": 4 * 1024 * 1024,
    }
    lines = CheckDigest.from_dict(d).lines()
    assert lines[0].endswith("FULL: 3 of 3 ops on the Edge TPU")
    assert "~12.00 MiB, ~4.00 MiB of them off-chip" in lines[1]
    assert "all within" in CheckDigest.from_dict(dict(d, off_chip_bytes_estimate=0)).lines()[1]


def test_the_advice_table_names_the_known_fix_for_each_architecture():
    mnv3 = ModelFacts(
        names=frozenset({"mobilenetv3small", "expanded_conv_1_project"}),
        activations=frozenset({"hard_swish"}),
        ops=frozenset({"HARD_SWISH", "CONV_2D"}),
        cpu_ops=frozenset({"HARD_SWISH"}),
    )
    got = advice.placement_advice(mnv3, "partial")
    assert [a.key for a in got] == ["mobilenet_v3"]  # hard-swish's own advice is included in it
    assert "minimalistic=True" in got[0].text and "google-coral/edgetpu#353" in got[0].line()
    assert advice.placement_advice(mnv3, "full") == []
    # a MobileNetV3 seen only in the .tflite (tensor names keep Keras's layer names)
    tflite_only = ModelFacts(
        names=frozenset({"expanded_conv_2/depthwise"}), ops=frozenset({"HARD_SWISH"}), cpu_ops=frozenset({"HARD_SWISH"})
    )
    assert [a.key for a in advice.placement_advice(tflite_only, "partial")] == ["mobilenet_v3"]
    leaky = ModelFacts(classes=frozenset({"LeakyReLU"}), cpu_ops=frozenset({"LEAKY_RELU"}))
    got = advice.placement_advice(leaky, "partial")
    assert [a.key for a in got] == ["leaky_relu"] and "ReLU" in got[0].text
    swish = ModelFacts(names=frozenset({"hard"}), cpu_ops=frozenset({"HARD_SWISH"}))
    assert [a.key for a in advice.placement_advice(swish, "none")] == ["hard_swish"]
    effnet = ModelFacts(
        names=frozenset({"efficientnetb0", "block1a_se_squeeze", "stem_conv"}), activations=frozenset({"swish"})
    )
    got = advice.architecture_advice(effnet, [AdviceKind.ACCURACY])
    assert [a.key for a in got] == ["efficientnet"] and "EfficientNet-Lite" in got[0].text
    assert advice.architecture_advice(ModelFacts(names=frozenset({"efficientnet-lite0"})), [AdviceKind.ACCURACY]) == []
    silu = ModelFacts(activations=frozenset({"silu"}))
    assert [a.key for a in advice.architecture_advice(silu, [AdviceKind.ACCURACY])] == ["silu"]
    for a in got:
        assert advice.Advice.from_dict(json.loads(json.dumps(a.to_dict()))) == a


def test_accuracy_advice_names_the_worst_layers_and_the_settings_tried():
    from edgekit.results.evaluate import LayerError

    layers = [LayerError("FULLY_CONNECTED", "dense_1", 0.8, 0.4, 1.0), LayerError("CONV_2D", "conv", 0.05, 0.01, 0.1)]
    got = advice.accuracy_advice(ModelFacts(), layers, None, ["per-tensor Dense weights"])
    assert [a.key for a in got] == ["worst_layers", "remedies"]
    assert "FULLY_CONNECTED 'dense_1' (error 80% of its signal)" in got[0].found
    assert "per-tensor Dense weights" in got[1].found
    got = advice.accuracy_advice(ModelFacts(), None, "RuntimeError: no", [])
    assert [a.key for a in got] == ["worst_layers"] and "RuntimeError" in got[0].text


def test_check_gives_the_table_advice_from_the_tflite_alone():
    """A .tflite from elsewhere: the architecture is recognised from its ops and tensor names."""
    from tests.tflite_builder import GraphBuilder

    g = GraphBuilder()
    x = g.tensor([1, 8, 8, 4], name="input")
    w = g.tensor([4, 3, 3, 4], data=np.ones((4, 3, 3, 4)), name="expanded_conv_1/expand/kernel")
    b = g.tensor([4], "int32", data=np.zeros(4), scale=0.0025, name="expanded_conv_1/expand/bias")
    y = g.tensor([1, 8, 8, 4], name="expanded_conv_1/expand/conv")
    z = g.tensor([1, 8, 8, 4], name="expanded_conv_1/expand_activation/hard_swish")
    g.op("CONV_2D", [x, w, b], [y], version=1, padding=S.Padding.SAME, strideW=1, strideH=1)
    g.op("HARD_SWISH", [y], [z])
    report = compatibility.check_model(tflite_model.ModelInfo.from_bytes(g.build([x], [z])))
    assert report.verdict == "partial" and [o.name for o in report.ops if o.target == "cpu"] == ["HARD_SWISH"]
    table = [a for a in report.advice if "minimalistic=True" in a]
    assert len(table) == 1 and table[0].startswith("a MobileNetV3 (hard-swish in expanded_conv blocks)")
    assert "google-coral/edgetpu#353" in table[0]
    assert "minimalistic=True" in report.render_text()


# ------------------------------------------------------------------------------------------ real models
@pytest.mark.tf
def test_keras_facts_see_nested_layers_and_activations():
    import keras

    inner = keras.Sequential(
        [keras.Input((8, 8, 3)), keras.layers.Conv2D(4, 3, activation="swish"), keras.layers.LeakyReLU()],
        name="efficientnetb0",
    )
    outer = keras.Sequential([keras.Input((8, 8, 3)), inner, keras.layers.Flatten(), keras.layers.Dense(2)])
    facts = advice.keras_facts(outer)
    assert "efficientnetb0" in facts.names and "LeakyReLU" in facts.classes
    assert {"swish", "silu"} & facts.activations  # Keras 3 names swish silu
    assert advice.keras_facts(object()) == ModelFacts()


@pytest.mark.tf
@pytest.mark.slow
def test_a_mobilenet_v3_summary_says_partial_with_hard_swish_on_the_cpu_and_minimalistic(tmp_path):
    import keras

    from edgekit.cli.app import cli
    from edgekit.converters.tf_quiet import import_tensorflow, silenced

    import_tensorflow()
    with silenced():
        model = keras.applications.MobileNetV3Small(input_shape=(32, 32, 3), weights=None, classes=4, alpha=0.75)
        path = tmp_path / "mnv3.keras"
        model.save(path)
    args = ["quantize", str(path), "--calib", "random", "--samples", "16", "--no-verify", "--quiet"]
    result = CliRunner().invoke(cli, args + ["--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    edgetpu = doc["edgetpu"]
    assert edgetpu["verdict"] == "partial" and edgetpu["edgetpu_ops"] < edgetpu["total_ops"], edgetpu
    assert {"op": "HARD_SWISH", "count": edgetpu["cpu_ops_by_type"][0]["count"]} in edgetpu["cpu_ops_by_type"] or any(
        r["op"] == "HARD_SWISH" for r in edgetpu["cpu_ops_by_type"]
    )
    assert doc["checks"]["edgetpu_verdict"] == "partial"
    assert [a["key"] for a in doc["advice"]] == ["mobilenet_v3"]
    text = CliRunner().invoke(cli, args + ["-o", str(tmp_path / "t.tflite")])
    assert text.exit_code == 0, text.output
    assert "Edge TPU checks" not in text.stdout and "PARTIAL" in text.stdout and "HARD_SWISH" in text.stdout
    assert "minimalistic=True" in text.stdout
