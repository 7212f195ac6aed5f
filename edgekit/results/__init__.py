"""The typed results of edgekit's Python API (:mod:`edgekit.api`) and their text renderings.

Each is a frozen dataclass (:class:`~edgekit.records.Record`) whose ``to_dict()`` is the command's
``--json`` document (schemas in docs/commands/) and whose ``render_text()`` is what the command
prints without ``--json``. Verdicts, targets and confidences are ``str`` Enums, so ``result.verdict
== "full"`` holds as well as ``result.verdict is Verdict.FULL``. Every block of a document is a record
of its own (a quantize run's calibration is a :class:`Calibration`, its preprocessing a
:class:`Preprocess`), and a block that several commands write is one type: the preprocessing
(:class:`PreprocessSpec` plus where it came from), a detector's layout (:class:`DetectionLayout`, in detect's
result and in quantize's detector verification). Only plain name-to-number maps (a layout's roles, the
counts of a verification's sources) stay mappings, read-only.

Nothing here imports TensorFlow, click or numpy: rendering needs only the standard library.

One module per command (``edgekit.results.check``, ``edgekit.results.classify``...), each imported
only when its names are first used here (PEP 562): a command pays for its own result types only.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> the module of edgekit.results that defines it
_WHERE = {
    # classify
    "Class": "classify",
    "ImageClasses": "classify",
    "ImageError": "classify",
    "ClassifyResult": "classify",
    # detect
    "BBox": "detect",
    "Object": "detect",
    "ImageObjects": "detect",
    "Layout": "detect",
    "DetectionLayout": "detect",
    "DetectResult": "detect",
    # the preprocessing block quantize, train and evaluate share (each adds where it came from)
    "PreprocessSpec": "preprocess",
    # check
    "Verdict": "check",
    "Target": "check",
    "Confidence": "check",
    "OpPlacement": "check",
    "CheckSummary": "check",
    "CheckProblem": "check",
    "CheckResult": "check",
    "CpuOps": "check",
    "CheckDigest": "check",
    # benchmark
    "LatencyVerdict": "benchmark",
    "Comparison": "benchmark",
    "Machine": "benchmark",
    "PostprocessTiming": "benchmark",
    "BenchmarkResult": "benchmark",
    "Timing": "benchmark",
    "CallTiming": "benchmark",
    # evaluate (a classifier's, then a detector's)
    "Preprocessing": "evaluate",
    "ClassAccuracy": "evaluate",
    "ClassChange": "evaluate",
    "LayerError": "evaluate",
    "ReferenceComparison": "evaluate",
    "EvaluateResult": "evaluate",
    "DetectionProtocol": "evaluate",
    "ClassScore": "evaluate",
    "DetectorScore": "evaluate",
    "MapDifference": "evaluate",
    "CutOffer": "evaluate",
    "DetectionEvaluateResult": "evaluate",
    "AccuracyDifference": "evaluate",
    # compile
    "CompileOp": "compile",
    "CompileSegment": "compile",
    "CompileResult": "compile",
    # quantize
    "Decision": "quantize",
    "Misorder": "quantize",
    "Map50Gate": "quantize",
    "Verification": "quantize",
    "DetectionVerification": "quantize",
    "ModelOutput": "quantize",
    "SourceModel": "quantize",
    "ConventionComparison": "quantize",
    "ConventionTrial": "quantize",
    "PreprocessSearch": "quantize",
    "render_search": "quantize",
    "Preprocess": "quantize",
    "RefusedPreprocess": "quantize",
    "Calibration": "quantize",
    "TensorIO": "quantize",
    "ModelIO": "quantize",
    "GateChecks": "quantize",
    "Advice": "advice",
    "Chance": "quantize",
    "QuantizeResult": "quantize",
    "RefusedQuantize": "quantize",
    # build (BundleManifest is manifest.json)
    "BundleModels": "build",
    "BundleInput": "build",
    "BundleVersions": "build",
    "BundleSource": "build",
    "BundleReports": "build",
    "ClassifierAccuracy": "build",
    "DetectorAccuracy": "build",
    "BundleManifest": "build",
    "BuildResult": "build",
    # inspect
    "TensorSummary": "inspect",
    "InspectOp": "inspect",
    "OpCount": "inspect",
    "EdgeTpuSummary": "inspect",
    "InspectResult": "inspect",
    "ExporterMetadata": "inspect",
    "UltralyticsExport": "inspect",
    "TfliteMetadataInfo": "inspect",
    "EdgekitRecordInfo": "inspect",
    "ConverterInfo": "inspect",
    # devices, doctor, deploy
    "Device": "devices",
    "DevicesResult": "devices",
    "Status": "doctor",
    "DoctorCheck": "doctor",
    "DoctorResult": "doctor",
    "DeployResult": "deploy",
    # train
    "TrainData": "train",
    "TrainPreprocess": "train",
    "TrainStrategy": "train",
    "Epoch": "train",
    "TrainResult": "train",
    # cut
    "CutCheck": "cut",
    "CutOutput": "cut",
    "CutResult": "cut",
}

__all__ = sorted(_WHERE)

# the names of second types that went in issue 33 (one type per document): they still import, with a warning, for a
# release
_RENAMED = {
    "DetectedBox": "BBox",
    "DetectedObject": "Object",
    "DetectLayout": "DetectionLayout",
    "SpecRecord": "PreprocessSpec",
    "CalibrationSummary": "Calibration",
    "BundleCheck": "CheckResult",
    "CompilerOutput": "CompileResult",
    "BundleCompile": "CompileResult",
}


def __getattr__(name: str) -> Any:
    if name in _RENAMED:
        import warnings

        new = _RENAMED[name]
        warnings.warn(
            f"edgekit.results.{name} is now edgekit.results.{new} (its fields may differ: make it with keywords)",
            DeprecationWarning,
            stacklevel=2,
        )
        return __getattr__(new)
    if name not in _WHERE:
        raise AttributeError(f"module 'edgekit.results' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"edgekit.results.{_WHERE[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
