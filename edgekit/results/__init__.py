"""The typed results of edgekit's Python API (:mod:`edgekit.api`) and their text renderings.

Each is a frozen dataclass (:class:`~edgekit.records.Record`) whose ``to_dict()`` is the command's
``--json`` document (schemas in docs/commands/) and whose ``render_text()`` is what the command
prints without ``--json``. Verdicts, targets and confidences are ``str`` Enums, so ``result.verdict
== "full"`` holds as well as ``result.verdict is Verdict.FULL``. Sub-documents that only a person
reads (a quantize run's calibration) are kept read-only as they are.

Nothing here imports TensorFlow, click or numpy: rendering needs only the standard library.

One module per command (``edgekit.results.check``, ``edgekit.results.classify``...), each imported
only when its names are first used here (PEP 562): a command pays for its own result types only.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> the module of edgekit.results that defines it
_WHERE = {
    "Class": "classify",
    "ImageClasses": "classify",
    "ImageError": "classify",
    "ClassifyResult": "classify",
    "DetectResult": "detect",
    "Verdict": "check",
    "Target": "check",
    "Confidence": "check",
    "OpPlacement": "check",
    "CheckSummary": "check",
    "CheckProblem": "check",
    "CheckResult": "check",
    "LatencyVerdict": "benchmark",
    "Comparison": "benchmark",
    "BenchmarkResult": "benchmark",
    "Timing": "benchmark",
    "ClassAccuracy": "evaluate",
    "EvaluateResult": "evaluate",
    "DetectionEvaluateResult": "evaluate",
    "CompileOp": "compile",
    "CompileSegment": "compile",
    "CompilerOutput": "compile",
    "CompileResult": "compile",
    "Decision": "quantize",
    "Verification": "quantize",
    "DetectionVerification": "quantize",
    "render_search": "quantize",
    "QuantizeResult": "quantize",
    "RefusedQuantize": "quantize",
    "BuildResult": "build",
    "TensorSummary": "inspect",
    "InspectOp": "inspect",
    "OpCount": "inspect",
    "InspectResult": "inspect",
    "Device": "devices",
    "DevicesResult": "devices",
    "Status": "doctor",
    "DoctorCheck": "doctor",
    "DoctorResult": "doctor",
    "DeployResult": "deploy",
    "TrainResult": "train",
    "CutResult": "cut",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'edgekit.results' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"edgekit.results.{_WHERE[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
