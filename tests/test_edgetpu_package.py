"""What the compiler wrote inside a compiled model: the DarwiNN package of each edgetpu-custom-op.

Read from the real compiled models in ../shared/testdata (Coral's and the public pairs); a damaged
package must be reported as unreadable, never raise.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgekit.cli.app import cli
from edgekit.tflite import edgetpu_package
from edgekit.tflite import model as tflite_model
from tests.conftest import TESTDATA, shared_file, shared_models

COMPILED = shared_models("*_edgetpu.tflite") + shared_models("pairs/*_edgetpu.tflite")


@pytest.mark.parametrize("path", COMPILED, ids=lambda p: p.name)
def test_every_compiled_model_has_one_readable_package_per_edge_tpu_subgraph(path):
    info = tflite_model.load(path)
    packages = info.edgetpu_packages
    edgetpu_ops = [op for g in info.subgraphs for op in g.ops if op.custom_code == tflite_model.EDGETPU_CUSTOM_OP]
    assert len(packages) == len(edgetpu_ops) >= 1
    for p in packages:
        assert p.error is None, p.error
        kinds = sorted(e.type for e in p.executables)
        # compilers 14 to 16 cache parameters: one caching and one execution-only executable, sharing a token
        assert kinds == ["execution_only", "parameter_caching"], kinds
        assert len({e.caching_token for e in p.executables}) == 1
        assert {e.chip for e in p.executables} == {"beagle"}  # the Edge TPU's chip name
        assert p.min_runtime_version in (10, 11, 12, 13, 14)
    s = edgetpu_package.summary(packages)
    # the parameters are part of the custom ops' bytes, never more
    assert 0 < s.cached_parameter_bytes + s.streamed_parameter_bytes <= info.edgetpu_bytes


def test_the_figures_of_coral_models_match_their_cpu_twins():
    """Parameters the compiler keeps for a fully mapped model are the CPU model's, re-laid out for the chip:
    MobileNet v1 0.25's 478,812 bytes of weights become 566,912 cached on chip, none streamed."""
    compiled = tflite_model.load(shared_file("mobilenet_v1_0.25_128_quant_edgetpu.tflite"))
    cpu = tflite_model.load(shared_file("mobilenet_v1_0.25_128_quant.tflite"))
    s = edgetpu_package.summary(compiled.edgetpu_packages)
    assert s.streamed_parameter_bytes == 0 and s.cached_parameter_bytes == 566912
    assert cpu.param_bytes <= s.cached_parameter_bytes <= 1.25 * cpu.param_bytes
    assert s.subgraphs == 1 and s.executables == 2 and s.min_runtime_version == 12


def test_a_model_too_large_for_the_chip_streams_part_of_its_parameters():
    path = TESTDATA / "pairs" / "demo-manufacturing__classifier_edgetpu.tflite"
    if not path.is_file():
        pytest.skip(f"not found: {path}")
    s = edgetpu_package.summary(tflite_model.load(path).edgetpu_packages)
    assert s.cached_parameter_bytes == 2496832 and s.streamed_parameter_bytes == 598080
    assert s.estimated_cycles == 480054  # this compiler stored its cycle estimate


def test_inspect_and_check_say_what_the_compiler_wrote():
    path = shared_file("mobilenet_v1_0.25_128_quant_edgetpu.tflite")
    doc = json.loads(CliRunner().invoke(cli, ["inspect", str(path), "--json"]).stdout)
    assert doc["edgetpu"]["cached_parameter_bytes"] == 566912 and doc["edgetpu"]["packages"][0]["op"] == 0
    out = CliRunner().invoke(cli, ["inspect", str(path)]).stdout
    assert "Edge TPU: 1 subgraph(s), 2 executable(s); parameters cached on chip 0.54 MiB" in out
    check = CliRunner().invoke(cli, ["check", str(path), "--json"])
    assert json.loads(check.stdout)["edgetpu"]["subgraphs"] == 1
    cpu = CliRunner().invoke(cli, ["inspect", str(shared_file("mobilenet_v1_0.25_128_quant.tflite")), "--json"])
    assert json.loads(cpu.stdout)["edgetpu"] is None


@settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_damaged_package_is_unreadable_never_an_exception(data):
    compiled = tflite_model.load(shared_file("mobilenet_v1_0.25_128_quant_edgetpu.tflite"))
    op = compiled.ops[0]
    raw = bytearray(compiled._data[op.custom_options_offset : op.custom_options_offset + op.custom_options_bytes])
    start = raw.find(b"DWN1") - 4
    for _ in range(data.draw(st.integers(1, 8))):
        at = data.draw(st.integers(start, min(len(raw) - 1, start + 4096)))
        raw[at] = data.draw(st.integers(0, 255))
    package = edgetpu_package.read(bytes(raw))
    assert package.error is None or package.error.startswith(("unreadable package", "no DWN1"))
    edgetpu_package.summary([package])  # and the summary of it still renders


def test_options_without_a_package_say_so():
    assert edgetpu_package.read(b"no package here").error == "no DWN1 package in the custom op's options"
