"""edgekit: Keras image classifiers onto Google's Coral Edge TPU, with a CPU fallback.

The Python API (docs/python-api.md) is re-exported here lazily: ``import edgekit`` stays cheap (no
TensorFlow, click or converters) and ``edgekit.open``, ``edgekit.check``... load their module on first use.
"""

__version__ = "0.1.0"

# name -> the module that defines it (loaded on first access: PEP 562)
_LAZY = {
    "open": "edgekit.api",
    "classify": "edgekit.api",
    "detect": "edgekit.api",
    "check": "edgekit.api",
    "compile": "edgekit.api",
    "evaluate": "edgekit.api",
    "evaluate_detector": "edgekit.api",
    "benchmark": "edgekit.api",
    "quantize": "edgekit.api",
    "inspect": "edgekit.api",
    "deploy": "edgekit.api",
    "train": "edgekit.api",
    "cut": "edgekit.api",
    # the API's build is a plain function: edgekit/pipeline/build.py's build_bundle ("module:name" where they differ)
    "build": "edgekit.pipeline.build:build_bundle",
    "Model": "edgekit.api",
    # the small records a user handles: a class score (classify) and a detected object with its box (detect)
    "Class": "edgekit.results",
    "Object": "edgekit.results",
    "BBox": "edgekit.results",
    "Verdict": "edgekit.results",
    "Target": "edgekit.results",
    "Confidence": "edgekit.results",
    "Decision": "edgekit.results",
    "CheckResult": "edgekit.results",
    "CompileResult": "edgekit.results",
    "ClassifyResult": "edgekit.results",
    "EvaluateResult": "edgekit.results",
    "BenchmarkResult": "edgekit.results",
    "QuantizeResult": "edgekit.results",
    "BuildResult": "edgekit.results",
    "InspectResult": "edgekit.results",
    "DevicesResult": "edgekit.results",
    "DoctorResult": "edgekit.results",
    "DeployResult": "edgekit.results",
    "TrainResult": "edgekit.results",
    "CutResult": "edgekit.results",
    "DetectResult": "edgekit.results",
    "DetectionEvaluateResult": "edgekit.results",
    "EdgekitError": "edgekit.errors",
    "UsageError": "edgekit.errors",
    "InputError": "edgekit.errors",
    "MissingDependencyError": "edgekit.errors",
    "ConversionError": "edgekit.errors",
    "VerificationError": "edgekit.errors",
    "CompatibilityError": "edgekit.errors",
    "CompilerError": "edgekit.errors",
    "DeviceError": "edgekit.errors",
    "RegressionError": "edgekit.errors",
    "Reporter": "edgekit.report",
    "ConsoleReporter": "edgekit.report",
    "Collector": "edgekit.report",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError(f"module 'edgekit' has no attribute {name!r}")
    import importlib

    module, _, attribute = _LAZY[name].partition(":")
    value = getattr(importlib.import_module(module), attribute or name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
