"""edgekit benchmark: statistics against a fake clock, the Dev Board contract, and real Coral models."""

from __future__ import annotations

import ast
import json

import numpy as np
import pytest
from click.testing import CliRunner

from edgekit.board import latency
from edgekit.cli.app import cli
from tests.conftest import shared_file


class FakeClock:
    """Advances by the next planned duration at each call's end: call k of run() takes durations[k] seconds."""

    def __init__(self, durations):
        self.now, self.durations, self.reads = 0.0, list(durations), 0

    def __call__(self):
        self.reads += 1
        return self.now

    def run(self):
        self.now += self.durations.pop(0)


def test_measure_times_the_first_call_apart_and_skips_the_warmup():
    first, warm, timed = [0.5], [9.0, 9.0], [0.001 * (i + 1) for i in range(10)]  # 1..10 ms
    clock = FakeClock(first + warm + timed)
    result = latency.measure(clock.run, n=10, warmup=2, clock=clock)
    assert result["first_ms"] == pytest.approx(500.0)
    assert result["latencies_ms"] == pytest.approx([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    assert (result["min_ms"], result["max_ms"], result["mean_ms"]) == pytest.approx((1, 10, 5.5))
    values = np.arange(1, 11, dtype=float)
    for q in (50, 90, 99):
        assert result[f"p{q}_ms"] == pytest.approx(np.percentile(values, q))
    assert result["throughput_per_s"] == pytest.approx(1000 / 5.5)
    assert clock.durations == [] and result["count"] == 10


def test_percentiles_match_numpy_on_uneven_data():
    rng = np.random.default_rng(0)
    values = rng.exponential(3.0, 37)
    stats = latency.summarize(values.tolist())
    for q in (50, 90, 99):
        assert stats[f"p{q}_ms"] == pytest.approx(np.percentile(values, q))
    assert latency.summarize([4.0])["p99_ms"] == 4.0


def test_compare_flags_only_a_slowdown_beyond_the_allowance():
    base = {"p50_ms": 10.0}
    assert not latency.compare({"p50_ms": 11.9}, base)["regression"]
    slower = latency.compare({"p50_ms": 12.5}, base)
    assert slower["regression"] and slower["change"] == pytest.approx(0.25)
    assert not latency.compare({"p50_ms": 12.5}, base, max_slowdown=0.3)["regression"]
    assert not latency.compare({"p50_ms": 5.0}, base)["regression"]  # faster is never a regression


def test_governors_are_read_from_sysfs(tmp_path):
    for cpu, gov in (("cpu0", "performance"), ("cpu1", "powersave")):
        (tmp_path / cpu / "cpufreq").mkdir(parents=True)
        (tmp_path / cpu / "cpufreq" / "scaling_governor").write_text(gov + "\n")
    assert latency.cpu_governors(str(tmp_path)) == ["performance", "powersave"]
    assert latency.cpu_governors(str(tmp_path / "none")) is None


def test_the_statistics_module_runs_on_a_dev_board():
    """Python 3.7 syntax and nothing but the standard library, so the board's runner can use the file."""
    source = open(latency.__file__).read()
    tree = ast.parse(source, feature_version=(3, 7))
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported <= {"__future__", "math", "time", "typing", "glob", "os", "platform"}, imported


@pytest.mark.parametrize("name", ["mobilenet_v1_0.25_128_quant.tflite", "mobilenet_v1_0.25_128_quant_edgetpu.tflite"])
def test_benchmark_runs_on_the_real_coral_models(name, tmp_path):
    model = shared_file(name)
    result = CliRunner().invoke(
        cli,
        [
            "benchmark",
            "-m",
            str(model),
            "-n",
            "20",
            "--warmup",
            "2",
            "--threads",
            "2",
            "--json",
            "--save",
            str(tmp_path / "run.json"),
        ],
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["iterations"] == 20 and len(doc["latencies_ms"]) == 20 and doc["load_ms"] > 0
    assert 0 < doc["min_ms"] <= doc["p50_ms"] <= doc["p90_ms"] <= doc["p99_ms"] <= doc["max_ms"]
    assert doc["first_inference_ms"] > 0 and doc["throughput_per_s"] == pytest.approx(1000 / doc["mean_ms"])
    if name.endswith("_edgetpu.tflite") and doc["device"] == "cpu":  # no Edge TPU here: the CPU twin
        assert doc["model"].endswith("mobilenet_v1_0.25_128_quant.tflite") and doc["threads"] == 2
    assert json.loads((tmp_path / "run.json").read_text())["p50_ms"] == doc["p50_ms"]


def test_compare_exits_10_on_a_regression_and_says_what_it_allows(tmp_path):
    model = shared_file("mobilenet_v1_0.25_128_quant.tflite")
    saved = tmp_path / "fast.json"
    saved.write_text(json.dumps({"model": str(model), "device": "cpu", "p50_ms": 1e-4}))  # an impossible baseline
    result = CliRunner().invoke(cli, ["benchmark", "-m", str(model), "-n", "5", "--compare", str(saved), "--quiet"])
    assert result.exit_code == 10, result.output
    assert (
        "more than +20% is a regression: p50 moves a few percent" in result.stdout and ": REGRESSION" in result.stdout
    )
    assert "more than --max-slowdown 20%" in result.stderr
    saved.write_text(json.dumps({"model": str(model), "device": "cpu", "p50_ms": 1e6}))
    result = CliRunner().invoke(cli, ["benchmark", "-m", str(model), "-n", "5", "--compare", str(saved), "--quiet"])
    assert result.exit_code == 0, result.output
    (tmp_path / "junk.json").write_text("{}")
    result = CliRunner().invoke(cli, ["benchmark", "-m", str(model), "--compare", str(tmp_path / "junk.json")])
    assert result.exit_code == 3 and "not a saved benchmark" in result.stderr


def test_save_creates_its_folder_and_says_so_and_an_unwritable_one_names_save(tmp_path, monkeypatch):
    """Was: --save made a missing folder silently, and an unwritable one said "choose another -o" (no such flag)."""
    model = str(shared_file("mobilenet_v1_0.25_128_quant.tflite"))
    target = tmp_path / "runs" / "base.json"
    result = CliRunner().invoke(cli, ["benchmark", "-m", model, "-n", "2", "--warmup", "0", "--save", str(target)])
    assert result.exit_code == 0, result.output
    assert f"note: created output folder {target.parent}" in result.stderr and target.is_file()
    from edgekit import fileio

    def denied(**_kw):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(fileio.tempfile, "TemporaryFile", denied)  # root may write anywhere: simulated
    result = CliRunner().invoke(cli, ["benchmark", "-m", model, "-n", "2", "--save", str(target)])
    assert result.exit_code == 3
    assert result.stderr.strip().endswith("(choose another --save)") and result.stdout == ""  # before the run


def test_detector_postprocessing_is_timed_on_a_frame_with_objects(tmp_path):
    """issue 35: the real YOLOv8n export finds nothing on the fixed random input, so NMS was never timed; the
    synthetic scene gives it objects, the same ones detect finds on that scene written to a file, and the frame
    is named."""
    from edgekit.detection.data import shapes_scene
    from edgekit.devices.benchmark import postprocess_timing
    from edgekit.devices.detect import detect

    model = shared_file("detection/ppe_yolov8n_full_integer_quant.tflite")
    post = postprocess_timing(model, "cpu", 5, threads=1)
    assert post.objects > 0 and post.input.startswith("a synthetic scene of 12 shapes"), post
    assert post.iterations == 5 and 0 < post.p50_ms <= post.max_ms
    scene = shapes_scene(_input_size(model), seed=0, count=12)  # at the input size: no resize between the two
    scene.save(tmp_path / "scene.png")
    found = detect([str(tmp_path / "scene.png")], model, device="cpu")
    assert len(found.results[0].objects) == post.objects


def _input_size(model) -> tuple:
    from edgekit.tflite import model as tflite_model

    shape = tflite_model.load(model).inputs[0].shape  # NHWC
    return int(shape[2]), int(shape[1])
