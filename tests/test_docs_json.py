"""The JSON examples of docs/commands/*.md are documents of the result types: each parses and round-trips."""

from __future__ import annotations

import json
import re

import pytest

from edgekit import results
from tests.conftest import REPO

TYPES = {
    "benchmark": results.BenchmarkResult,
    "check": results.CheckResult,
    "classify": results.ClassifyResult,
    "devices": results.DevicesResult,
    "doctor": results.DoctorResult,
    "evaluate": results.EvaluateResult,
    "inspect": results.InspectResult,
    "quantize": results.QuantizeResult,
    "train": results.TrainResult,
    "compile": results.CompileResult,
    "build": results.BuildResult,
    "deploy": results.DeployResult,
    "cut": results.CutResult,
    "detect": results.DetectResult,
}


def result_type(command: str, document: dict) -> type:
    """evaluate writes a detector's document (``task: detection``) with its own type."""
    if command == "evaluate" and document.get("task") == "detection":
        return results.DetectionEvaluateResult
    return TYPES[command]


def examples(command: str) -> list[str]:
    text = (REPO / "docs" / "commands" / f"{command}.md").read_text(encoding="utf-8")
    return re.findall(r"```json\n(.*?)```", text, re.S)


def test_every_page_with_a_json_example_has_a_type():
    pages = {p.stem for p in (REPO / "docs" / "commands").glob("*.md") if examples(p.stem)}
    assert pages <= set(TYPES), pages - set(TYPES)


@pytest.mark.parametrize("command", sorted(TYPES))
def test_the_json_example_round_trips_through_its_type(command):
    for example in examples(command):
        document = json.loads(example)
        result = result_type(command, document).from_dict(document)  # refuses a field the type does not know
        assert result.to_dict() == document, "the example lacks fields the command writes (or orders them apart)"
        assert result.render_text()
