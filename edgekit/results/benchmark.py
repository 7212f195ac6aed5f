"""``edgekit benchmark``: latencies, throughput and the comparison with a saved run."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Optional, Tuple

from edgekit.records import Record


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
    change_interval: Optional[Tuple[float, float]]
    confidence: Optional[float]
    verdict: LatencyVerdict
    regression: bool


@dataclass(frozen=True)
class Machine(Record):
    """The machine a benchmark ran on (``governors``: the CPUs' cpufreq governors, None where sysfs does not say)."""

    platform: str
    processor: str
    cpus: Optional[int]
    governors: Optional[Tuple[str, ...]]


@dataclass(frozen=True)
class PostprocessTiming(Record):
    """A detector's host post-processing (decode + class-wise NMS + mapping to the image), timed apart from invoke
    over ``iterations`` runs on the outputs of one invoke, at detect's default thresholds."""

    layout: str
    conf: float
    iou: float
    max_det: int
    iterations: int
    objects: int
    p50_ms: float
    mean_ms: float
    max_ms: float
    input: str


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
    machine: Machine
    notes: Tuple[str, ...]
    warnings: Tuple[str, ...]
    postprocess: Optional[PostprocessTiming] = None  # a detector's host decode + NMS, timed apart (None on a board)
    comparison: Optional[Comparison] = None

    def render_text(self) -> str:
        threads = f", {self.threads} threads" if self.threads else ""
        first = "n/a" if self.first_inference_ms is None else f"{self.first_inference_ms:.2f} ms"
        lines = [
            f"{self.model} on {self.device} ({self.backend}{threads})",
            f"Load {self.load_ms:.1f} ms; first inference {first}",
            f"{self.iterations} inferences after {self.warmup} warm-up: min {self.min_ms:.3f}  p50 "
            f"{self.p50_ms:.3f}  p90 {self.p90_ms:.3f}  p99 {self.p99_ms:.3f}  max {self.max_ms:.3f}  mean "
            f"{self.mean_ms:.3f} ms",
            f"Throughput {self.throughput_per_s:.1f} inferences/s",
        ]
        post = self.postprocess
        if post:
            lines.append(
                f"Host post-processing (decode + NMS, {post.layout}): p50 {post.p50_ms:.3f} ms, mean "
                f"{post.mean_ms:.3f} ms over {post.iterations} runs on the outputs of one invoke on "
                f"{post.input} ({post.objects} objects at conf {post.conf:g}); not included in the invoke "
                "times"
            )
        c = self.comparison
        if c:
            span = (
                f", 95% interval {c.change_interval[0]:+.1%} to {c.change_interval[1]:+.1%}"
                if c.change_interval
                else ""
            )
            lines.append(
                f"Against {c.saved}: p50 {c.baseline_ms:.3f} -> {c.current_ms:.3f} ms "
                f"({c.change:+.1%}{span}; more than +{c.max_slowdown:.0%} is a regression: p50 moves a "
                "few percent between runs on an idle machine, a busy CPU or ops off the Edge TPU far more)"
                + (": REGRESSION" if c.regression else f": {c.verdict}")
            )
        return "\n".join(lines)


@dataclass(frozen=True)
class Timing(Record):
    """:meth:`edgekit.Model.time` without an image: ``invoke`` alone timed on an open model (the first call apart,
    then the warm-up, then ``count`` timed calls), in milliseconds; also each part of a :class:`CallTiming`."""

    first_ms: float
    latencies_ms: Tuple[float, ...]
    count: int
    min_ms: float
    max_ms: float
    mean_ms: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    throughput_per_s: float

    def render_text(self) -> str:
        return (
            f"{self.count} inferences: min {self.min_ms:.3f}  p50 {self.p50_ms:.3f}  p90 {self.p90_ms:.3f}  "
            f"p99 {self.p99_ms:.3f}  max {self.max_ms:.3f}  mean {self.mean_ms:.3f} ms; first {self.first_ms:.2f} "
            f"ms; throughput {self.throughput_per_s:.1f} inferences/s"
        )


@dataclass(frozen=True)
class CallTiming(Record):
    """:meth:`edgekit.Model.time` given an image: the whole ``call`` (``classify`` or ``detect``) timed, and each of
    its parts (ms; each run's parts add up to its ``total``): ``preprocess`` (decoding a file, the pixel order and
    range, resizing, quantizing the input), ``invoke`` (the interpreter's invoke alone), ``postprocess`` (the rest:
    setting the input, reading and dequantizing the outputs, top-k or the box decode and NMS)."""

    call: str
    preprocess: Timing
    invoke: Timing
    postprocess: Timing
    total: Timing

    def render_text(self) -> str:
        lines = [
            f"{self.call}, {self.total.count} whole calls: p50 {self.total.p50_ms:.3f}  mean "
            f"{self.total.mean_ms:.3f} ms; first {self.total.first_ms:.2f} ms; throughput "
            f"{self.total.throughput_per_s:.1f} calls/s"
        ]
        for name in ("preprocess", "invoke", "postprocess"):
            part = getattr(self, name)
            lines.append(f"  {name}: p50 {part.p50_ms:.3f}  mean {part.mean_ms:.3f}  max {part.max_ms:.3f} ms")
        return "\n".join(lines)
