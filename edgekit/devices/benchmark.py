"""``edgekit benchmark``: how fast a model loads and runs on this machine's Edge TPU or CPU.

The model is opened the way ``classify`` opens it (:class:`~edgekit.devices.classify.ModelLoader`)
and timed loading; then :meth:`OpenedModel.time <edgekit.board.backends.OpenedModel.time>`, the
benchmark loop the Dev Board runner uses too, times invoke() alone on a fixed input (the first call
apart: the Edge TPU loads the model's parameters then, the CPU allocates), after ``warmup`` untimed
calls.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from edgekit.board import latency
from edgekit.errors import InputError, RegressionError, first_line, parse_json, regular_file
from edgekit.flags import default as _cli
from edgekit.report import SILENT, Reporter
from edgekit.results.benchmark import BenchmarkResult, Comparison, LatencyVerdict, PostprocessTiming

default_threads = latency.default_threads


def benchmark(
    model: str | os.PathLike,
    device: str = _cli("benchmark", "device"),
    n: int = _cli("benchmark", "n"),
    warmup: int = _cli("benchmark", "warmup"),
    threads: int | None = None,
    clock: Callable[[], float] = time.perf_counter,
    report: Reporter = SILENT,
    on: Any = None,
    remote_path: str | None = None,
) -> BenchmarkResult:
    """What ``edgekit benchmark --json`` prints (schema in docs/commands/benchmark.md); its notes and warnings
    also go to ``report``. ``on`` (a :class:`~edgekit.devices.remote.SshTarget`): on that board, ``model``
    being a bundle deployed there first (to ``remote_path``) when it differs."""
    from edgekit.board import backends

    if on is not None:
        from edgekit.devices import remote

        result = remote.benchmark(
            model,
            on,
            path=remote_path or remote.DEFAULT_PATH,
            device=device,
            n=n,
            warmup=warmup,
            threads=threads,
            report=report,
        )  # no postprocess: not timed there
    else:
        from edgekit.devices.classify import ModelLoader

        threads = threads or default_threads()
        result = backends.benchmark(
            lambda: ModelLoader(model, device, num_threads=threads, record_needed=False)(), n, warmup, threads, clock
        )
        result = replace(result, postprocess=postprocess_timing(model, device, n, threads, clock))
    for note in result.notes:
        report.note(note)
    for warning in result.warnings:
        report.warn(warning)
    return result


SCENE = "a synthetic scene of {} shapes (edgekit.detection.data.shapes_scene, seed 0)"
RANDOM = "the benchmark's fixed random input"


def postprocess_timing(
    model: str | os.PathLike,
    device: str,
    n: int,
    threads: int | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> PostprocessTiming | None:
    """For a detector, the host's post-processing (decode + class-wise NMS + mapping to the image) timed apart from
    invoke: ``n`` runs over the outputs of one invoke, at detect's default thresholds, on the frame of
    :func:`_frames` that gives the most objects (NMS costs grow with them: an empty frame times the decode alone),
    named in ``input``. None for a model that is not a detector (or whose layout is ambiguous)."""
    import numpy as np

    from edgekit.board import decode as detection
    from edgekit.detection.layout import find_layout
    from edgekit.devices.detect import open_detector

    try:  # the layout first, from the file: a classifier is not opened a second time
        path = model
        if Path(model).is_dir():
            from edgekit.board import manifest

            bundle = manifest.load(model)
            path = bundle.path(bundle.cpu_model)
        find_layout(path)
        detector = open_detector(model, device=device, num_threads=threads)
    except InputError:
        return None
    with detector.opened:
        runs = []
        for name, tensor, geometry in _frames(detector):
            outputs, _ = detector.infer(tensor)
            objects, _notes = detection.postprocess(outputs, detector.quant, detector.layout, geometry)
            runs.append((name, outputs, geometry, objects))
        name, outputs, geometry, objects = max(runs, key=lambda r: len(r[3]))  # the first with the most objects
        times = []
        for _ in range(max(n, 1)):
            start = clock()
            detection.postprocess(outputs, detector.quant, detector.layout, geometry)
            times.append((clock() - start) * 1000.0)
    if not objects:
        name += (
            f" (no frame tried gave an object at conf {detection.DEFAULT_CONF:g}: an empty frame's time, a lower bound)"
        )
    return PostprocessTiming(
        detector.layout.describe(),
        detection.DEFAULT_CONF,
        detection.DEFAULT_IOU,
        detection.DEFAULT_MAX_DET,
        len(times),
        len(objects),
        float(np.median(times)),
        float(np.mean(times)),
        float(np.max(times)),
        name,
    )


def _frames(detector: Any, count: int = 12) -> list:
    """(name, input tensor, geometry) of the frames post-processing may be timed on: a scene of ``count`` shapes at
    the model's input size (through detect's own preprocessing), then the fixed random input."""
    import numpy as np

    from edgekit.detection.data import shapes_scene

    inp = detector.opened.input
    dtype, shape = np.dtype(inp["dtype"]), [int(d) for d in inp["shape"]]
    width, height = detector.geometry((1, 1)).input_wh  # the image size the model takes, whatever its layout
    frames = []
    scene = shapes_scene((width, height), seed=0, count=count)
    tensor, geometry = detector.prepare_image(scene, "scene")
    frames.append((SCENE.format(count), tensor, geometry))
    rng = np.random.RandomState(0)
    data = (
        rng.randint(np.iinfo(dtype).min, int(np.iinfo(dtype).max) + 1, shape).astype(dtype)
        if dtype.kind in "iu"
        else rng.random_sample(shape).astype(dtype)
    )
    frames.append((RANDOM, data, detector.geometry((width, height))))
    return frames


@dataclass(frozen=True)
class SavedRun:
    """What ``--compare`` reads from a document written by ``--save`` (or by an older edgekit): which model ran
    where, its p50 and, where saved, every latency."""

    model: str | None
    device: str | None
    p50_ms: float
    latencies_ms: tuple[float, ...] | None


def read_saved(path: str | os.PathLike) -> SavedRun:
    """A document written by ``--save`` (InputError, exit 3, when it is not one).

    Every number ``--compare`` uses must be a finite, positive latency: a baseline of NaN, Infinity, 0,
    a negative number or ``true`` would make every run pass (or fail) without measuring anything.
    """
    hint = "pass a file written by edgekit benchmark --save"
    regular_file(path, "--compare")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"--compare {path}: no such file", "save a run first with --save FILE") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"--compare {path}: cannot read it ({first_line(exc)})", hint) from None
    doc = parse_json(text, f"--compare {path}", hint)

    def latency(value: Any) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < float("inf")

    if not isinstance(doc, dict) or not latency(doc.get("p50_ms")):
        raise InputError(
            f"--compare {path}: not a saved benchmark (its p50_ms is {doc.get('p50_ms')!r}, not a "
            "positive number of milliseconds)"
            if isinstance(doc, dict)
            else f"--compare {path}: not a saved benchmark (not a JSON object)",
            hint,
        )
    samples = doc.get("latencies_ms")
    if samples is not None and not (isinstance(samples, list) and all(latency(v) for v in samples)):
        raise InputError(f"--compare {path}: its latencies_ms are not all positive numbers of milliseconds", hint)
    return SavedRun(doc.get("model"), doc.get("device"), doc["p50_ms"], None if samples is None else tuple(samples))


def compare_to_saved(
    result: BenchmarkResult, saved: SavedRun, saved_path: str, max_slowdown: float
) -> tuple[BenchmarkResult, list[str], list[str]]:
    """Judge ``result`` against a saved run (:func:`latency.compare`): the result with its ``comparison`` set and
    what it says added to its ``warnings`` and ``notes`` (so ``--json`` has them), and those warnings and notes for
    the text output. An uncertain change is a warning only when the estimate itself is past ``--max-slowdown``;
    below it, the data points the right way and only cannot be sure yet: a note (as quantize's gate says it)."""
    current = {"p50_ms": result.p50_ms, "latencies_ms": list(result.latencies_ms)}
    baseline = {
        "p50_ms": saved.p50_ms,
        "latencies_ms": None if saved.latencies_ms is None else list(saved.latencies_ms),
    }
    c = Comparison.from_dict({"saved": saved_path, **latency.compare(current, baseline, max_slowdown / 100.0)})
    said = []
    if saved.model != result.model or saved.device != result.device:
        said.append(f"{saved_path} timed {saved.model} on {saved.device}; this run {result.model} on {result.device}")
    notes: list[str] = []
    if c.verdict is LatencyVerdict.UNCERTAIN:
        (said if c.change > max_slowdown / 100.0 else notes).append(
            _uncertain(c, current, baseline, saved_path, max_slowdown)
        )
    elif c.verdict is LatencyVerdict.POINT:
        said.append(
            f"{saved_path} holds no latencies_ms (an older edgekit): judged on the two p50 values "
            "alone, without an interval"
        )
    return (
        replace(result, comparison=c, warnings=result.warnings + tuple(said), notes=result.notes + tuple(notes)),
        said,
        notes,
    )


def _uncertain(c: Comparison, current: dict, baseline: dict, saved_path: str, max_slowdown: float) -> str:
    """The line for an uncertain comparison: why (an interval spanning the limit, or too few latencies for one)
    and what would settle it."""
    n_now, n_base = len(current["latencies_ms"] or []), len(baseline["latencies_ms"] or [])
    if c.change_interval:
        why = f"95% interval {c.change_interval[0]:+.1%} to {c.change_interval[1]:+.1%}"
    else:
        why = (
            f"{n_now} inferences here and {n_base} in {saved_path}: a 95% interval of each median needs "
            f"{latency.MIN_SAMPLES} at least"
        )
    if n_base < latency.MIN_SAMPLES:
        settle = f"save {saved_path} again with -n {latency.MIN_SAMPLES} or more"
    else:
        n = latency.inferences_to_settle(current, baseline, max_slowdown / 100.0)
        settle = (
            f"about -n {n} on a machine as quiet would settle it"
            if n is not None
            else f"the latencies in {saved_path} spread too wide for any -n here to settle it: save it again "
            "with more inferences on a quieter machine"
        )
    return (
        f"cannot tell whether p50 grew by more than --max-slowdown {max_slowdown:g}%: {c.change:+.1%} ({why}); {settle}"
    )


def regression_error(result: BenchmarkResult, saved_path: str | None) -> RegressionError | None:
    """The exit-10 error when the comparison found a regression beyond doubt, carrying ``result`` (None
    otherwise)."""
    c = result.comparison
    if not c or not c.regression:
        return None
    interval = c.change_interval
    sure = f" (95% interval {interval[0]:+.1%} to {interval[1]:+.1%}: beyond doubt)" if interval else ""
    return RegressionError(
        f"p50 latency {c.current_ms:.3f} ms is {c.change:+.1%} against "
        f"{c.baseline_ms:.3f} ms in {saved_path}{sure}, more than --max-slowdown "
        f"{100 * c.max_slowdown:g}%",
        "look for ops that left the Edge TPU, fewer threads, or a busy or throttled CPU",
        result=result,
    )
