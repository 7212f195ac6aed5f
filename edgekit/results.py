"""The typed results of edgekit's Python API (:mod:`edgekit.api`) and their text renderings.

Each is a frozen dataclass (:class:`~edgekit.records.Record`) whose ``to_dict()`` is the command's
``--json`` document (schemas in docs/commands/) and whose ``render_text()`` is what the command
prints without ``--json``. Verdicts, targets and confidences are ``str`` Enums, so ``result.verdict
== "full"`` holds as well as ``result.verdict is Verdict.FULL``. Sub-documents that only a person
reads (a quantize run's calibration, a bundle's manifest) are kept read-only as they are.

Nothing here imports TensorFlow, click or numpy: rendering needs only the standard library.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Tuple

from edgekit.records import Record


# ------------------------------------------------------------------------------------ enums
class Verdict(str, enum.Enum):
    """How much of a model the Edge TPU runs: every op, some, or none (``edgekit check``)."""

    FULL = "full"
    PARTIAL = "partial"
    NONE = "none"

    def __str__(self) -> str:
        return self.value


class Target(str, enum.Enum):
    """Where one op runs."""

    EDGETPU = "edgetpu"
    CPU = "cpu"

    def __str__(self) -> str:
        return self.value


class Confidence(str, enum.Enum):
    """How sure a placement is: ``confirmed`` (a real compile shows the rule) or ``uncertain``."""

    CONFIRMED = "confirmed"
    UNCERTAIN = "uncertain"

    def __str__(self) -> str:
        return self.value


class Decision(str, enum.Enum):
    """A measurement against a limit at 95%: passed, failed (beyond doubt) or uncertain (the interval spans it)."""

    PASSED = "passed"
    FAILED = "failed"
    UNCERTAIN = "uncertain"

    def __str__(self) -> str:
        return self.value


# ------------------------------------------------------------------------------------ classify
@dataclass(frozen=True)
class Class(Record):
    """One class of a classification, like pycoral's ``classify.Class`` (with the label beside the id)."""

    id: int
    score: float
    label: Optional[str] = None


@dataclass(frozen=True)
class ImageClasses(Record):
    image: str
    ms: float
    top: Tuple[Class, ...]

    def to_dict(self) -> dict[str, Any]:  # the document's key order: id, label, score
        return {"image": self.image, "ms": self.ms,
                "top": [{"id": c.id, "label": c.label, "score": c.score} for c in self.top]}


@dataclass(frozen=True)
class ImageError(Record):
    image: str
    error: str


@dataclass(frozen=True)
class ClassifyResult(Record):
    """``edgekit classify --json``: the top classes of each image, and the images that could not be read."""

    model: str
    device: str
    backend: str
    first_inference_ms: Optional[float]
    results: Tuple[ImageClasses, ...]
    errors: Tuple[ImageError, ...]

    @classmethod
    def of_report(cls, report: Any) -> "ClassifyResult":
        """From the runtime core's :class:`~edgekit.devices.classifier.ClassifyReport`."""
        return cls.from_dict(report.to_dict())

    def render_text(self) -> str:
        first = "" if self.first_inference_ms is None else f", first inference {self.first_inference_ms:.1f} ms"
        lines = [f"{self.model} on {self.device} ({self.backend}){first}"]
        for r in self.results:
            lines.append(f"{r.image}  ({r.ms:.1f} ms)")
            lines += [f"  {t.score:8.5f}  {t.id:>5}  {t.label if t.label is not None else ''}".rstrip()
                      for t in r.top] or ["  (no class at or above the threshold)"]
        return "\n".join(lines)


# ------------------------------------------------------------------------------------ check
@dataclass(frozen=True)
class OpPlacement(Record):
    """Where one op runs and why (``reason``: the compiler's status words where known)."""

    index: int
    name: str
    version: int
    target: Target
    reason: str
    detail: Optional[str]
    confidence: Confidence
    subgraph: Optional[int]


@dataclass(frozen=True)
class CheckSummary(Record):
    edgetpu_ops: int
    cpu_ops: int
    subgraphs: int
    uncertain_ops: int
    param_bytes: int
    on_chip_bytes_estimate: Optional[int]
    off_chip_bytes_estimate: Optional[int]


@dataclass(frozen=True)
class CheckProblem(Record):
    code: str
    message: str
    hint: Optional[str]
    ops: Tuple[int, ...]
    fatal: bool
    confidence: Confidence


@dataclass(frozen=True)
class CheckResult(Record):
    """``edgekit check --json``: which ops edgetpu_compiler 16 maps to the Edge TPU, and why not.

    ``edgetpu``: what the compiler wrote in a compiled model (None for a CPU model).
    """

    model: Optional[str]
    verdict: Verdict
    compiled: bool
    min_runtime: int
    multiple_subgraphs: bool
    ops: Tuple[OpPlacement, ...]
    summary: CheckSummary
    problems: Tuple[CheckProblem, ...]
    advice: Tuple[str, ...]
    edgetpu: Optional[Mapping[str, Any]] = None

    @property
    def fully_mappable(self) -> bool:
        return self.verdict is Verdict.FULL

    def _report(self) -> Any:
        """The converters' CheckReport of this result (its text rendering and --strict live there)."""
        from edgekit.converters import compatibility as c

        ops = [c.OpVerdict(o.index, o.name, o.version, o.target.value, o.reason, o.detail,
                           confidence=o.confidence.value, subgraph=o.subgraph) for o in self.ops]
        problems = [c.Problem(p.code, p.message, p.hint, tuple(p.ops), p.fatal, confidence=p.confidence.value)
                    for p in self.problems]
        s = self.summary
        return c.CheckReport(self.model, self.verdict.value, ops, s.subgraphs, s.param_bytes,
                             s.on_chip_bytes_estimate, s.off_chip_bytes_estimate, problems, list(self.advice),
                             self.min_runtime, self.compiled, self.multiple_subgraphs)

    def strict_error(self) -> Any:
        """What ``check --strict`` raises (a CompatibilityError, exit 7), or None."""
        return self._report().strict_error()

    def render_text(self) -> str:
        from edgekit import edgetpu_package
        from edgekit.converters import compatibility

        text = compatibility.render(self._report())
        return text + (f"\n{edgetpu_package.describe(self.to_dict()['edgetpu'])}" if self.edgetpu else "")


# ------------------------------------------------------------------------------------ benchmark
class LatencyVerdict(str, enum.Enum):
    """``benchmark --compare``: ``regression`` beyond doubt, ``ok``, ``uncertain`` (the 95% interval spans the
    limit), or ``point`` (a saved run without its latencies: the two p50 values alone decide)."""

    OK = "ok"
    REGRESSION = "regression"
    UNCERTAIN = "uncertain"
    POINT = "point"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Comparison(Record):
    """``benchmark --compare``: this run's p50 against a saved one (``change``: relative, with its interval)."""

    saved: str
    metric: str
    baseline_ms: float
    current_ms: float
    change: float
    max_slowdown: float
    change_interval: Optional[Tuple[float, ...]]
    confidence: Optional[float]
    verdict: LatencyVerdict
    regression: bool


@dataclass(frozen=True)
class BenchmarkResult(Record):
    """``edgekit benchmark --json``: load time, first inference, latency percentiles, throughput."""

    model: str
    device: str
    backend: str
    threads: Optional[int]
    load_ms: float
    first_inference_ms: Optional[float]
    iterations: int
    warmup: int
    latencies_ms: Tuple[float, ...]
    count: int
    min_ms: float
    max_ms: float
    mean_ms: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    throughput_per_s: float
    machine: Mapping[str, Any]
    notes: Tuple[str, ...]
    warnings: Tuple[str, ...]
    comparison: Optional[Comparison] = None

    def render_text(self) -> str:
        threads = f", {self.threads} threads" if self.threads else ""
        first = "n/a" if self.first_inference_ms is None else f"{self.first_inference_ms:.2f} ms"
        lines = [f"{self.model} on {self.device} ({self.backend}{threads})",
                 f"Load {self.load_ms:.1f} ms; first inference {first}",
                 f"{self.iterations} inferences after {self.warmup} warm-up: min {self.min_ms:.3f}  p50 "
                 f"{self.p50_ms:.3f}  p90 {self.p90_ms:.3f}  p99 {self.p99_ms:.3f}  max {self.max_ms:.3f}  mean "
                 f"{self.mean_ms:.3f} ms",
                 f"Throughput {self.throughput_per_s:.1f} inferences/s"]
        c = self.comparison
        if c:
            span = (f", 95% interval {c.change_interval[0]:+.1%} to {c.change_interval[1]:+.1%}"
                    if c.change_interval else "")
            lines.append(f"Against {c.saved}: p50 {c.baseline_ms:.3f} -> {c.current_ms:.3f} ms "
                         f"({c.change:+.1%}{span}; more than +{c.max_slowdown:.0%} is a regression: p50 moves a "
                         "few percent between runs on an idle machine, a busy CPU or ops off the Edge TPU far more)"
                         + (": REGRESSION" if c.regression else f": {c.verdict}"))
        return "\n".join(lines)


# ------------------------------------------------------------------------------------ evaluate
@dataclass(frozen=True)
class ClassAccuracy(Record):
    id: int
    label: Optional[str]
    samples: int
    top1: float


@dataclass(frozen=True)
class EvaluateResult(Record):
    """``edgekit evaluate --json``: top-1/top-5 accuracy on labelled data (``reference``: against float)."""

    model: str
    device: str
    backend: str
    preprocess: Mapping[str, Any]
    labels_from: str
    samples: int
    classes: int
    top1: Optional[float]
    top5: Optional[float]
    per_class: Tuple[ClassAccuracy, ...]
    errors: Tuple[ImageError, ...]
    reference: Optional[Mapping[str, Any]] = None

    def render_text(self) -> str:
        def pct(v: float | None) -> str:
            return "n/a" if v is None else f"{v:.1%}"

        lines = [f"{self.model} on {self.device} ({self.backend}): {self.samples} samples, {self.classes} classes",
                 f"Preprocessing: {self.preprocess['source']}; labels: {self.labels_from}",
                 f"int8 top-1 {pct(self.top1)}, top-5 {pct(self.top5)}"]
        r = self.reference
        if r:
            lines += [f"float ({r['model']}) top-1 {pct(r['top1'])}, top-5 {pct(r['top5'])}",
                      f"Agreement (top-1) {pct(r['top1_agreement'])}; score difference mean "
                      f"{r['mean_abs_diff']:.4f}, max {r['max_abs_diff']:.4f}"]
            changed = [c for c in r["class_changes"] if c["change"]]
            lines.append("Classes that changed most (float -> int8 top-1):" if changed else
                         "No class's top-1 accuracy changed from float to int8")
            lines += [f"  {c['id']:>4} {c['label'] or '':<16} {pct(c['float_top1'])} -> {pct(c['int8_top1'])} "
                      f"({c['samples']} samples)" for c in changed]
            if r["layers"]:
                lines.append("Layers with the largest int8 error (RMS error / RMS of the float output, each layer "
                             "on the same input):")
                lines += [f"  {x['relative_rms_error']:8.4f}  {x['op']:<18} {x['tensor'][:90]}"
                          for x in r["layers"][:5]]
            elif r["layers_error"]:
                lines.append(f"Per-layer report unavailable: {r['layers_error']}")
        return "\n".join(lines)


# ------------------------------------------------------------------------------------ compile
@dataclass(frozen=True)
class CompileResult(Record):
    """``edgekit compile --json``: what edgetpu_compiler said, parsed; ``check_disagreements``: where the
    offline check predicted otherwise (None when not compared)."""

    compiler_version: Optional[str]
    succeeded: bool
    compile_ms: Optional[int]
    returncode: Optional[int]
    command: Tuple[str, ...]
    input_model: Optional[str]
    input_size_bytes: Optional[int]
    output_model: Optional[str]
    output_size_bytes: Optional[int]
    on_chip_used_bytes: Optional[int]
    on_chip_remaining_bytes: Optional[int]
    off_chip_used_bytes: Optional[int]
    subgraphs: Optional[int]
    total_ops: Optional[int]
    edgetpu_ops: Optional[int]
    cpu_ops: Optional[int]
    ops_per_status: Mapping[str, int]
    ops: Tuple[Mapping[str, Any], ...]
    segments: Tuple[Mapping[str, Any], ...]
    outputs: Tuple[str, ...]
    errors: Tuple[str, ...]
    check_disagreements: Optional[Tuple[str, ...]] = None

    def render_text(self) -> str:
        from edgekit.converters.compatibility import format_table, mib

        def size(n: int | None) -> str:
            return "?" if n is None else mib(n)

        lines = [f"edgetpu_compiler {self.compiler_version}: compiled {self.input_model}"
                 + (f" in {self.compile_ms} ms" if self.compile_ms is not None else "")]
        if self.segments:
            for s in self.segments:
                lines.append(f"  segment {s['output_model']}: {s['total_ops']} ops, "
                             f"on-chip {size(s['on_chip_used_bytes'])}, off-chip {size(s['off_chip_used_bytes'])}")
        else:
            lines.append(f"Output: {self.output_model} ({size(self.output_size_bytes)}); "
                         f"Edge TPU subgraphs: {self.subgraphs}")
            lines.append(f"Parameters on-chip {size(self.on_chip_used_bytes)}, off-chip (streamed) "
                         f"{size(self.off_chip_used_bytes)}, on-chip remaining {size(self.on_chip_remaining_bytes)}")
        if self.ops:
            lines += ["", format_table((r["operator"], r["count"], r["status"]) for r in self.ops), ""]
        per = self.ops_per_status
        if per:
            mapped = per.get("Mapped to Edge TPU", 0)
            lines.append(f"Ops: {mapped} on the Edge TPU, {sum(per.values()) - mapped} on the CPU")
        elif self.edgetpu_ops is not None:  # no op table, only the compiler's summary lines
            lines.append(f"Ops: {self.edgetpu_ops} on the Edge TPU, {self.cpu_ops} on the CPU")
        lines.append("Files: " + ", ".join(self.outputs))
        dis = self.check_disagreements
        if dis is not None:
            lines.append("edgekit check agreed with the compiler on every op type" if not dis else
                         "edgekit check disagreed with the compiler:\n  " + "\n  ".join(dis))
        return "\n".join(lines)


# ------------------------------------------------------------------------------------ quantize
@dataclass(frozen=True)
class Verification(Record):
    """int8 against float on paired samples, each measure decided on its 95% interval (quantize)."""

    samples: int
    top1_agreement: Optional[float]
    agreement_interval: Tuple[float, ...]
    mean_abs_diff: Optional[float]
    max_abs_diff: Optional[float]
    min_agreement: float
    sources: Mapping[str, int]
    held_back: bool
    labelled: bool
    confidence: float
    float_top1: Optional[float]
    int8_top1: Optional[float]
    accuracy_drop: Optional[float]
    accuracy_drop_interval: Optional[Tuple[float, ...]]
    max_accuracy_drop: float
    flips: Optional[Mapping[str, int]]
    mcnemar_p: Optional[float]
    float_near_chance: Optional[bool]
    chance: Optional[Mapping[str, Any]]
    class_order: Any
    agreement_verdict: Decision
    accuracy_verdict: Optional[Decision]   # None without labels
    passed: bool
    failures: Tuple[str, ...]
    warnings: Tuple[str, ...]

    def lines(self) -> list[str]:
        """Agreement and accuracy of int8 against float, each with its 95% interval and verdict."""
        sources = ", ".join(f"{n} {name.replace('_', '-')}" for name, n in self.sources.items() if n)
        lo, hi = self.agreement_interval
        lines = [f"Verification on {self.samples} samples ({sources}): top-1 agreement {self.top1_agreement:.1%} "
                 f"(95% interval {lo:.1%} to {hi:.1%}; minimum {self.min_agreement:g}: {self.agreement_verdict}), "
                 f"mean |score diff| {self.mean_abs_diff:.4f}" + ("" if self.passed else ": FAILED")]
        if self.float_top1 is not None:
            lo, hi = self.accuracy_drop_interval or (0.0, 0.0)
            lines.append(f"Accuracy on the labels: float {self.float_top1:.1%}, int8 {self.int8_top1:.1%}: "
                         f"{self.accuracy_drop:+.1f} points lost (95% interval {lo:+.1f} to {hi:+.1f}; at most "
                         f"{self.max_accuracy_drop:g} allowed: {self.accuracy_verdict})")
        return lines


def render_search(search: Mapping[str, Any]) -> str:
    """The accuracy of each preprocessing convention quantize tried, best first."""
    lines = [f"Preprocessing tried on {search['samples']} labelled calibration samples ({search['classes']} classes, "
             f"chance {search['chance']:.1%}):"]
    for row in search["table"]:
        mark = "  <- chosen" if row["convention"] == search["chosen"] else ""
        lines.append(f"  {row['convention']:<6} {row['accuracy']:6.1%}   {row['flags']}{mark}")
    return "\n".join(lines)


@dataclass(frozen=True)
class QuantizeResult(Record):
    """``edgekit quantize --json``: the full-int8 model written, how it was calibrated, and its verification
    (None with ``verify=False``)."""

    output: str
    record: str
    source: Mapping[str, Any]
    size_bytes: int
    preprocess: Mapping[str, Any]
    labels: Optional[int]
    calibration: Mapping[str, Any]
    io: Mapping[str, Any]
    op_histogram: Tuple[Mapping[str, Any], ...]
    checks: Mapping[str, Any]
    remedy: Optional[str]
    remedies_tried: Tuple[Optional[str], ...]
    verification: Optional[Verification]
    warnings: Tuple[str, ...]

    def render_text(self) -> str:
        src, io, cal = self.source, self.io, self.calibration

        def q(t: Mapping[str, Any]) -> str:
            return (f"{t['dtype']} {'x'.join(map(str, t['shape']))} scale={t['scale']:.6g} "
                    f"zero_point={t['zero_point']}")

        lines = [
            f"{self.output}: full-int8, {self.size_bytes:,} bytes (source {src['format']}, "
            f"{src['size_bytes']:,} bytes)",
            f"Preprocessing: {self.preprocess['description']} (from {self.preprocess['origin']})",
            f"Calibration: {cal['samples']} samples from {cal['source']} ({cal['kind']}"
            + (f", {cal['classes']} classes" if cal["classes"] else "") + f"), {cal['holdout_samples']} held back",
            f"Input:  {q(io['input'])}",
            f"Output: {q(io['output'])}",
            "Ops: " + ", ".join(f"{h['count']}x {h['name']} v{h['version']}" for h in self.op_histogram),
            "Edge TPU checks: integer ops, static batch-1 shapes, op versions within edgetpu_compiler 16: passed"
            + ("" if self.remedy == self.remedies_tried[0] else f" (with {self.remedy})"),
        ]
        search = self.preprocess.get("search")
        if search:
            lines[1:1] = [render_search(search)]
        lines += self.verification.lines() if self.verification else ["Verification: skipped (--no-verify)"]
        lines.append(f"Record: {self.record} and metadata 'edgekit' inside the model"
                     + (f" ({self.labels} labels)" if self.labels else ""))
        return "\n".join(lines)


@dataclass(frozen=True)
class RefusedQuantize(Record):
    """``edgekit quantize --json`` when no preprocessing convention clearly wins: nothing was written; the
    measurements the refusal rests on are in ``preprocess["search"]``."""

    output: None
    error: str
    preprocess: Mapping[str, Any]

    def render_text(self) -> str:
        return render_search(self.preprocess["search"])


# ------------------------------------------------------------------------------------ build
@dataclass(frozen=True)
class BuildResult(Record):
    """``edgekit build --json``: the bundle written, its manifest, the quantize run behind it, and notes."""

    bundle: str
    manifest: Mapping[str, Any]
    quantize: QuantizeResult
    notes: Tuple[str, ...]

    def render_text(self) -> str:
        m = self.manifest
        check = m["reports"]["check"]
        lines = [f"{self.bundle}/: bundle of {len(m['files'])} file(s), sha256 of each in manifest.json"]
        lines += [f"  {e['path']}  {e['size_bytes']:,} bytes" for e in m["files"]]
        lines.append(f"CPU model: {m['models']['cpu']}; Edge TPU model: "
                     f"{m['models']['edgetpu'] or 'none (not compiled)'}")
        lines.append(f"Check: {check['verdict']} ({check['summary']['edgetpu_ops']} ops on the Edge TPU, "
                     f"{check['summary']['cpu_ops']} on the CPU)")
        v = self.quantize.verification
        if v:
            lines.append(f"Verification: top-1 agreement {v.top1_agreement:.1%} on {v.samples} samples")
        acc = m["accuracy"]
        if acc:
            lines.append(f"Accuracy on {acc['data']}: top-1 {acc['top1']:.1%}, top-5 {acc['top5']:.1%} "
                         f"({acc['samples']} samples, the CPU int8 model)")
        lines.append(f"Run it: edgekit classify IMAGES -m {self.bundle}")
        return "\n".join(lines)


# ------------------------------------------------------------------------------------ inspect
@dataclass(frozen=True)
class TensorSummary(Record):
    name: Optional[str]
    dtype: str
    shape: Tuple[int, ...]
    shape_signature: Tuple[int, ...]
    scale: Any          # a number, one per channel (a list), or None
    zero_point: Any

    def line(self) -> str:
        shape = "x".join(map(str, self.shape))
        sig = "" if self.shape_signature == self.shape else f" (signature {list(self.shape_signature)})"
        q = "" if self.scale is None else (
            f"  scale={self.scale:.6g} zero_point={self.zero_point}" if not isinstance(self.scale, tuple)
            else f"  per-channel ({len(self.scale)} scales)")
        return f"  {self.name or '<unnamed>'}: {self.dtype} [{shape}]{sig}{q}"


@dataclass(frozen=True)
class InspectResult(Record):
    """``edgekit inspect --json``: a .tflite model's I/O, quantization, ops and shapes, read without TensorFlow."""

    path: str
    size_bytes: int
    edgetpu_compiled: bool
    subgraphs: int
    schema_version: Optional[int]
    description: Optional[str]
    min_runtime_version: Optional[str]
    quantization: str
    dynamic_shapes: bool
    param_bytes: int
    edgetpu_bytes: int
    edgetpu: Optional[Mapping[str, Any]]
    inputs: Tuple[TensorSummary, ...]
    outputs: Tuple[TensorSummary, ...]
    ops: Tuple[Mapping[str, Any], ...]
    op_histogram: Tuple[Mapping[str, Any], ...]
    metadata: Tuple[str, ...]

    def render_text(self) -> str:
        lines = [
            f"{self.path}: {self.size_bytes:,} bytes, {self.subgraphs} subgraph(s), {len(self.ops)} ops",
            f"Edge TPU compiled: {'yes' if self.edgetpu_compiled else 'no'}",
            f"Quantization: {self.quantization}",
            f"Shapes: {'DYNAMIC (some dimension is -1 in shape_signature)' if self.dynamic_shapes else 'static'}",
            f"Parameters: {self.param_bytes:,} bytes"
            + (f" on the CPU, {self.edgetpu_bytes:,} bytes of compiled Edge TPU program" if self.edgetpu_compiled
               else ""),
        ]
        if self.min_runtime_version:
            lines.append(f"Min TFLite runtime: {self.min_runtime_version}")
        if self.edgetpu:
            from edgekit.edgetpu_package import describe

            lines.append(describe(self.edgetpu))
        lines.append("Inputs:")
        lines += [t.line() for t in self.inputs]
        lines.append("Outputs:")
        lines += [t.line() for t in self.outputs]
        lines.append("Ops:")
        lines += [f"  {h['count']:>4} x {h['name']} v{h['version']}" for h in self.op_histogram]
        if self.metadata:
            lines.append(f"Metadata: {', '.join(self.metadata)}")
        return "\n".join(lines)


# ------------------------------------------------------------------------------------ devices
@dataclass(frozen=True)
class Device(Record):
    """One Edge TPU: ``device`` is what to pass as ``device=`` / ``--device`` (``usb:0``, ``pci:1``)."""

    type: str
    path: str
    device: str
    state: str
    usb_id: Optional[str] = None
    temperature_c: Optional[float] = None
    source: str = "sysfs"


@dataclass(frozen=True)
class DevicesResult(Record):
    """``edgekit devices --json``: the Edge TPUs on this machine."""

    devices: Tuple[Device, ...]

    def render_text(self) -> str:
        if not self.devices:
            return "no Edge TPU found (USB 1a6e:089a / 18d1:9302, PCIe /dev/apex_N); `edgekit doctor` says why"
        lines = []
        for x in self.devices:
            extra = [f"id {x.usb_id}"] if x.usb_id else []
            if x.temperature_c is not None:
                extra.append(f"{x.temperature_c:.1f} C")
            lines.append(f"{x.device:<7} {x.path}  {x.state}" + (f" ({', '.join(extra)})" if extra else ""))
        return "\n".join(lines)


# ------------------------------------------------------------------------------------ doctor
class Status(str, enum.Enum):
    """A doctor check's outcome."""

    OK = "ok"
    INFO = "info"
    WARN = "warn"
    FAIL = "fail"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class DoctorCheck(Record):
    name: str
    status: Status
    detail: str
    fix: Optional[str] = None


@dataclass(frozen=True)
class DoctorResult(Record):
    """``edgekit doctor --json``: this machine checked for running and compiling Edge TPU models."""

    edgekit: str
    ok: bool
    checks: Tuple[DoctorCheck, ...]

    def render_text(self) -> str:
        tags = {Status.OK: " ok ", Status.INFO: "info", Status.WARN: "WARN", Status.FAIL: "FAIL"}
        lines = [f"edgekit {self.edgekit} doctor (paste this into a bug report)"]
        for c in self.checks:
            lines.append(f"[{tags[c.status]}] {c.name}: {c.detail}")
            if c.fix and c.status in (Status.WARN, Status.FAIL):
                lines.append(f"       fix: {c.fix}")
        fails = sum(c.status is Status.FAIL for c in self.checks)
        warns = sum(c.status is Status.WARN for c in self.checks)
        lines.append(f"{fails} problem(s), {warns} warning(s)")
        return "\n".join(lines)


# ------------------------------------------------------------------------------------ deploy
@dataclass(frozen=True)
class DeployResult(Record):
    """``edgekit deploy --json``: what was copied to the board, and what it runs with."""

    target: str
    path: str
    bundle: str
    python: str
    interpreter: str
    uploaded: Tuple[str, ...]
    deleted: Tuple[str, ...]
    unchanged: int
    bytes_sent: int

    def render_text(self) -> str:
        from edgekit.devices.remote import deploy_summary  # the line classify/benchmark --on also say

        return deploy_summary(self.to_dict())


# ------------------------------------------------------------------------------------ train
@dataclass(frozen=True)
class TrainResult(Record):
    """``edgekit train --json``: the model trained (``output`` None on a worker that is not the chief)."""

    output: Optional[str]
    record: Optional[str]
    arch: str
    labels: Tuple[str, ...]
    data: Mapping[str, Any]
    preprocess: Mapping[str, Any]
    strategy: Mapping[str, Any]
    batch_per_replica: int
    global_batch: int
    steps_per_execution: int
    advice: Tuple[str, ...]
    epochs: Tuple[Mapping[str, Any], ...]
    validation_accuracy: Optional[float]
    seconds: float

    def render_text(self) -> str:
        data, s = self.data, self.strategy
        val = self.validation_accuracy
        written = self.output is not None
        return "\n".join([
            f"{self.output if written else 'this worker (the chief writes the model)'}: {self.arch} trained "
            f"{len(self.epochs)} epoch(s) in {self.seconds:.1f} s"
            + (f", validation accuracy {val:.1%}" if val is not None else ""),
            f"Data: {data['source']} ({data['kind']}, {data['classes']} classes, {data['train_samples']} training, "
            f"{data['validation_samples']} validation examples)",
            f"Strategy: {s['kind']} ({s['reason']}), {s['replicas']} replica(s), global batch {self.global_batch}",
            f"Preprocessing: {self.preprocess['description']}",
        ] + ([f"Record: {self.record} (preprocessing, labels, data): `edgekit quantize {self.output}` needs no flags"]
             if written else []))
