"""``edgekit build``: the bundle written, and its manifest.json as a typed document.

:class:`BundleManifest` is what :func:`edgekit.pipeline.build.write_bundle` writes (its ``to_dict()`` is
manifest.json) and what a :class:`BuildResult` carries. On the board a manifest is read as raw JSON
and checked by :mod:`edgekit.board.manifest` (Python 3.7, standard library only), which knows none of these types.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from edgekit.records import Record
from edgekit.results.check import CheckDigest, CheckResult
from edgekit.results.compile import CompileResult
from edgekit.results.evaluate import DetectionEvaluateResult, EvaluateResult
from edgekit.results.preprocess import PreprocessSpec
from edgekit.results.quantize import DetectionVerification, ModelOutput, QuantizeResult, edgetpu_lines

#: manifest.json's format and its version: the values :mod:`edgekit.board.manifest` (which cannot import this module
#: on a Python 3.7 board) checks, kept equal to its own by tests/test_structure.py.
FORMAT = "edgekit-bundle"
FORMAT_VERSION = 1


def utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class BundleFile(Record):
    """A file of the bundle: its relative POSIX path, sha256 and size (what :class:`edgekit.board.manifest.FileEntry`
    reads on the board)."""

    path: str
    sha256: str
    size_bytes: int


@dataclass(frozen=True)
class BundleModels(Record):
    """The bundle's models: the CPU int8 model, and its compiled twin (``x.tflite``, ``x_edgetpu.tflite``)."""

    cpu: str
    edgetpu: str | None


@dataclass(frozen=True)
class BundleInput(Record):
    """The model's input tensor: shape, dtype and quantization (None where it has none)."""

    shape: tuple[int, ...]
    dtype: str
    scale: float | None
    zero_point: int | None


@dataclass(frozen=True)
class BundleVersions(Record):
    """What made the bundle (None: it played no part, or is not installed)."""

    edgekit: str
    tensorflow: str | None
    edgetpu_compiler: str | None


@dataclass(frozen=True)
class BundleSource(Record):
    """The model the bundle was built from: its file name, its format, and the output chosen of several or None."""

    model: str
    format: str
    output: ModelOutput | None


@dataclass(frozen=True)
class BundleReports(Record):
    """check's result on the CPU model (its document without ``edgetpu``: a CPU model has none) and what the
    compiler said (None: not compiled here; no comparison with check)."""

    check: CheckResult | None
    compile: CompileResult | None

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        if d["check"] is not None:
            del d["check"]["edgetpu"]
        return d


@dataclass(frozen=True)
class ClassifierAccuracy(EvaluateResult):
    """evaluate's result for the CPU model on ``--eval`` data (``data``: that data), without a float reference."""

    data: str | None = None

    document_omits = frozenset({"reference", "against", "plots"})  # evaluate's comparisons: not in a manifest


@dataclass(frozen=True)
class DetectorAccuracy(DetectionEvaluateResult):
    """A detector's COCO mAP on ``--eval`` data, of the CPU model (``model``: its file name in the bundle)."""

    model: str | None = None

    document_omits = frozenset({"plots"})  # evaluate --plots' files: not in a manifest


@dataclass(frozen=True)
class BundleDetection(Record):
    """A detector's bundle: its outputs as edgekit read them from the model (the layout document of
    :class:`edgekit.results.detect.DetectionLayout`) and the exporter's metadata packed in the model (Ultralytics'
    metadata.json), or None."""

    layout: Mapping[str, Any]
    metadata: Mapping[str, Any] | None


@dataclass(frozen=True)
class BundleManifest(Record):
    """manifest.json (format ``edgekit-bundle``; the schema in :mod:`edgekit.board.manifest`)."""

    format: str
    format_version: int
    created: str
    source: BundleSource | None
    models: BundleModels
    labels: str | None
    files: tuple[BundleFile, ...]
    preprocess: PreprocessSpec  # what the board reads back (PreprocessSpec.read)
    input: BundleInput
    versions: BundleVersions
    reports: BundleReports
    accuracy: ClassifierAccuracy | DetectorAccuracy | None
    detection: BundleDetection | None = None  # a detector built from a given .tflite; absent before it existed

    @classmethod
    def new(
        cls,
        *,
        models: BundleModels,
        labels: str | None,
        preprocess: PreprocessSpec,
        input: BundleInput,
        versions: BundleVersions,
        reports: BundleReports,
        accuracy: ClassifierAccuracy | DetectorAccuracy | None = None,
        source: BundleSource | None = None,
        detection: BundleDetection | None = None,
    ) -> BundleManifest:
        """A manifest made now, its ``files`` left to :func:`edgekit.pipeline.build.write_bundle` (which fills them in
        from what it writes, and refuses what :func:`edgekit.board.manifest.check_manifest` would: a compiled model
        not named after the CPU model, a file not listed)."""
        return cls(
            FORMAT,
            FORMAT_VERSION,
            utc_now(),
            source,
            models,
            labels,
            (),
            preprocess,
            input,
            versions,
            reports,
            accuracy,
            detection,
        )


@dataclass(frozen=True)
class BuildResult(Record):
    """``edgekit build --json``: the bundle written, its manifest, the quantize run behind it, and notes."""

    bundle: str
    manifest: BundleManifest
    quantize: QuantizeResult | None  # None: built from an existing .tflite (the manifest's source says so)
    notes: tuple[str, ...]

    def render_text(self) -> str:
        m = self.manifest
        lines = [f"{self.bundle}/: bundle of {len(m.files)} file(s), sha256 of each in manifest.json"]
        lines += [f"  {e.path}  {e.size_bytes:,} bytes" for e in m.files]
        lines.append(f"CPU model: {m.models.cpu}; Edge TPU model: {m.models.edgetpu or 'none (not compiled)'}")
        if m.reports.check is not None:
            lines += CheckDigest.from_check(m.reports.check).lines()
        lines += edgetpu_lines(None, self.quantize.advice) if self.quantize else []
        lines += self._verification_lines()
        lines += self._accuracy_lines()
        detector = isinstance(m.accuracy, DetectorAccuracy) or self._verified_detector or m.detection is not None
        lines.append(f"Run it: edgekit {'detect' if detector else 'classify'} IMAGES -m {self.bundle}")
        return "\n".join(lines)

    @property
    def _verified_detector(self) -> bool:
        v = self.quantize.verification if self.quantize else None
        return isinstance(v, DetectionVerification)  # built (and read back) with kind "detection" only

    def _verification_lines(self) -> list[str]:
        v = self.quantize.verification if self.quantize else None
        if isinstance(v, DetectionVerification):
            return (
                [f"Verification: int8 keeps {v.kept:.1%} of the float model's detections on {v.samples} samples"]
                if v.kept is not None
                else []
            )
        return [f"Verification: top-1 agreement {v.top1_agreement:.1%} on {v.samples} samples"] if v else []

    def _accuracy_lines(self) -> list[str]:
        acc = self.manifest.accuracy
        if isinstance(acc, DetectorAccuracy):  # a detector's COCO mAP (pycocotools)
            r = acc.models[0]

            def pct(x: float | None) -> str:
                return "n/a" if x is None else f"{x:.1%}"

            return [
                f"Accuracy on {acc.data}: mAP {pct(r.map)}, mAP50 {pct(r.map50)} "
                f"({acc.images} images, the CPU int8 model)"
            ]
        if acc is not None:
            return [
                f"Accuracy on {acc.data}: top-1 {acc.top1:.1%}, top-5 {acc.top5:.1%} "
                f"({acc.samples} samples, the CPU int8 model)"
            ]
        return []
