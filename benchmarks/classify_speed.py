"""How fast is `edgekit classify` against a bare LiteRT loop written like pycoral's classify_image.py?

All three measured in this run, on the CPU (there is no Edge TPU here), printed as ratios and written
to benchmarks/out/classify_speed.json:

1. warm per-image overhead: edgekit, decoding in the calling thread, over the bare loop (goal <= 1.05);
2. throughput over a folder of 200 generated JPEGs: the bare sequential loop's time over edgekit's
   (decode and resize overlapped with inference; goal >= 1.5);
3. cold start: `edgekit classify` from process start to printed result over a bare script doing the
   same, best of interleaved runs (goal <= 1.2); also the medians, the median of the paired (run-by-run)
   ratios, and the same for the CPU seconds the kernel counted, which other processes move less.

Usage: python benchmarks/classify_speed.py [MODEL] [--images N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DEFAULT_MODEL = REPO.parent / "shared" / "testdata" / "mobilenet_v1_0.25_128_quant.tflite"

BARE_SCRIPT = """
# pycoral examples/classify_image.py (HEAD 46f06c8), one inference, LiteRT's Interpreter in place of
# make_interpreter (there is no Edge TPU here) and pycoral's helpers written inline.
import argparse, re, time
import numpy as np
from PIL import Image
from ai_edge_litert.interpreter import Interpreter


def read_label_file(file_path):
  with open(file_path, 'r', encoding='utf-8') as f:
    lines = f.readlines()
  ret = {}
  for row_number, content in enumerate(lines):
    pair = re.split(r'[:\\s]+', content.strip(), maxsplit=1)
    if len(pair) == 2 and pair[0].strip().isdigit():
      ret[int(pair[0])] = pair[1].strip()
    else:
      ret[row_number] = content.strip()
  return ret


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument('-m', '--model', required=True)
  parser.add_argument('-i', '--input', required=True)
  parser.add_argument('-l', '--labels')
  parser.add_argument('-k', '--top_k', type=int, default=1)
  parser.add_argument('-t', '--threshold', type=float, default=0.0)
  parser.add_argument('-a', '--input_mean', type=float, default=128.0)
  parser.add_argument('-s', '--input_std', type=float, default=128.0)
  args = parser.parse_args()
  labels = read_label_file(args.labels) if args.labels else {}
  interpreter = Interpreter(model_path=args.model)
  interpreter.allocate_tensors()
  d = interpreter.get_input_details()[0]
  if d['dtype'] != np.uint8:
    raise ValueError('Only support uint8 input type.')
  size = (int(d['shape'][2]), int(d['shape'][1]))
  image = Image.open(args.input).convert('RGB').resize(size, Image.LANCZOS)
  params = d['quantization_parameters']
  scale, zero_point = params['scales'], params['zero_points']
  mean, std = args.input_mean, args.input_std
  if abs(scale * std - 1) < 1e-5 and abs(mean - zero_point) < 1e-5:
    data = np.asarray(image)
  else:
    normalized_input = (np.asarray(image) - mean) / (std * scale) + zero_point
    np.clip(normalized_input, 0, 255, out=normalized_input)
    data = normalized_input.astype(np.uint8)
  interpreter.tensor(d['index'])()[0][:, :] = data
  start = time.perf_counter()
  interpreter.invoke()
  inference_time = time.perf_counter() - start
  o = interpreter.get_output_details()[0]
  o_scale, o_zero = o['quantization']
  scores = o_scale * (interpreter.tensor(o['index'])().flatten().astype(np.int64) - o_zero)
  top_k = min(args.top_k, len(scores))
  classes = [c for c in np.argpartition(scores, -top_k)[-top_k:] if scores[c] >= args.threshold]
  print('%.1fms' % (inference_time * 1000))
  for c in sorted(classes, key=lambda c: scores[c], reverse=True):
    print('%s: %.5f' % (labels.get(c, c), scores[c]))


if __name__ == '__main__':
  main()
"""


def make_images(folder: Path, n: int, size: tuple[int, int] = (640, 480)) -> list[str]:
    """Photo-sized JPEGs with smooth structure and noise, so decoding costs what a real photo costs."""
    from PIL import Image

    rng = np.random.default_rng(0)
    w, h = size
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    paths = []
    for i in range(n):
        fx, fy, phase = rng.uniform(0.005, 0.05, 2).tolist() + [rng.uniform(0, 6.28)]
        base = 127 + 100 * np.sin(xx * fx + phase)[..., None] * np.cos(yy * fy)[..., None] * np.array([1, 0.6, -0.8])
        img = np.clip(base + rng.normal(0, 12, (h, w, 3)), 0, 255).astype(np.uint8)
        p = folder / f"img_{i:03d}.jpg"
        Image.fromarray(img).save(p, quality=90)
        paths.append(str(p))
    return paths


def bare_loop(model: str, paths: list[str]) -> float:
    """classify_image.py's steps for each image, in sequence; returns seconds."""
    from ai_edge_litert.interpreter import Interpreter
    from PIL import Image

    interpreter = Interpreter(model_path=model)
    interpreter.allocate_tensors()
    d = interpreter.get_input_details()[0]
    o = interpreter.get_output_details()[0]
    size = (int(d["shape"][2]), int(d["shape"][1]))
    scale, zero = d["quantization"]
    o_scale, o_zero = o["quantization"]
    identity = abs(scale * 128 - 1) < 1e-5 and abs(128 - zero) < 1e-5
    start = time.perf_counter()
    for p in paths:
        image = Image.open(p).convert("RGB").resize(size, Image.LANCZOS)
        if identity:
            data = np.asarray(image)
        else:
            data = np.clip((np.asarray(image) - 128.0) / (128.0 * scale) + zero, 0, 255).astype(np.uint8)
        interpreter.tensor(d["index"])()[0][:, :] = data
        interpreter.invoke()
        scores = o_scale * (interpreter.tensor(o["index"])().flatten().astype(np.int64) - o_zero)
        top = np.argpartition(scores, -5)[-5:]
        sorted(((int(c), float(scores[c])) for c in top), key=lambda c: c[1], reverse=True)
    return time.perf_counter() - start


def edgekit_loop(model: str, paths: list[str], workers: int | None) -> float:
    from edgekit.devices.classify import HostClassifier as Classifier

    clf = Classifier(model, device="cpu")
    start = time.perf_counter()
    report = clf.run(paths, k=5, workers=workers)
    elapsed = time.perf_counter() - start
    assert len(report.results) == len(paths), report.errors[:3]
    return elapsed


def cold_start(cmd: list[str]) -> tuple[float, float]:
    """One run of ``cmd`` from process start to exit: its wall seconds and the CPU seconds (user + system) the
    kernel counted for it (less moved than wall time by other processes on a shared machine)."""
    # As a user runs it: bytecode caches on (this sandbox sets PYTHONDONTWRITEBYTECODE, which would
    # recompile edgekit's own modules from source on every start while site-packages have .pyc files).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    with proc.stderr:  # type: ignore[union-attr]
        stderr = proc.stderr.read()  # type: ignore[union-attr]
    _pid, status, usage = os.wait4(proc.pid, 0)  # reaped here, with its resource usage
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[:3]} failed: {stderr[-500:].decode(errors='replace')}")
    return wall, usage.ru_utime + usage.ru_stime


def paired_median(a: list[float], b: list[float]) -> float:
    """The median of the run-by-run ratios a/b (runs interleaved: a drift of the machine's speed hits both)."""
    return statistics.median(x / y for x, y in zip(a, b))


def measure_loops(model: str, paths: list[str], repeat: int) -> dict[str, float]:
    """1. warm per-image overhead (both sequential); 2. throughput with decode overlapped with inference.
    Interleaved rounds, best of each, so load from other processes hits all alike."""
    bare_loop(model, paths[:20])  # warm caches and the interpreter code
    edgekit_loop(model, paths[:20], 1)
    bare_seq = ek_seq = ek_par = float("inf")
    for _ in range(repeat):
        bare_seq = min(bare_seq, bare_loop(model, paths))
        ek_seq = min(ek_seq, edgekit_loop(model, paths, 1))
        ek_par = min(ek_par, edgekit_loop(model, paths, None))
    n = len(paths)
    return {
        "bare_sequential_ms_per_image": 1000 * bare_seq / n,
        "edgekit_sequential_ms_per_image": 1000 * ek_seq / n,
        "edgekit_prefetch_ms_per_image": 1000 * ek_par / n,
        "overhead_ratio": ek_seq / bare_seq,
        "overhead_goal": 1.05,
        "throughput_ratio": bare_seq / ek_par,
        "throughput_goal": 1.5,
        "bare_sequential_s": bare_seq,
        "edgekit_prefetch_s": ek_par,
    }


def measure_cold_start(model: str, image: str, folder: Path, runs: int) -> dict[str, float]:
    """3. `edgekit classify` of one image against the bare script, interleaved runs (so load from other processes
    hits both alike). The best run is each command's own cost (other processes on a shared machine only add
    time); the medians, the median of the paired ratios and the CPU seconds' are given too."""
    script = folder / "bare_classify.py"
    script.write_text(BARE_SCRIPT)
    labels = Path(model).with_name("imagenet_labels.txt")
    label_args = ["-l", str(labels)] if labels.is_file() else []
    edgekit_cmd = [sys.executable, "-m", "edgekit", "classify", image, "-m", model, "-k", "1", "--quiet", *label_args]
    bare_cmd = [sys.executable, str(script), "-m", model, "-i", image, *label_args]
    cold_start(edgekit_cmd), cold_start(bare_cmd)  # warm the file cache
    ek_runs, bare_runs = [], []
    for _ in range(runs):
        ek_runs.append(cold_start(edgekit_cmd))
        bare_runs.append(cold_start(bare_cmd))
    ek_wall, ek_cpu = [r[0] for r in ek_runs], [r[1] for r in ek_runs]
    bare_wall, bare_cpu = [r[0] for r in bare_runs], [r[1] for r in bare_runs]
    med_ek, med_bare = statistics.median(ek_wall), statistics.median(bare_wall)
    return {
        "cold_start_edgekit_s": min(ek_wall),
        "cold_start_bare_s": min(bare_wall),
        "cold_start_ratio": min(ek_wall) / min(bare_wall),
        "cold_start_goal": 1.2,
        "cold_start_median_edgekit_s": med_ek,
        "cold_start_median_bare_s": med_bare,
        "cold_start_median_ratio": med_ek / med_bare,
        "cold_start_paired_median_ratio": paired_median(ek_wall, bare_wall),
        "cold_start_cpu_median_edgekit_s": statistics.median(ek_cpu),
        "cold_start_cpu_median_bare_s": statistics.median(bare_cpu),
        "cold_start_cpu_paired_median_ratio": paired_median(ek_cpu, bare_cpu),
        "cold_start_runs": runs,
    }


def print_result(r: dict[str, float], model: str, n: int) -> None:
    print(f"model {Path(model).name}, {n} images of 640x480, {os.cpu_count()} cores")
    print(
        f"1. warm per-image overhead: edgekit {r['edgekit_sequential_ms_per_image']:.2f} ms vs bare "
        f"{r['bare_sequential_ms_per_image']:.2f} ms  ->  ratio {r['overhead_ratio']:.3f} (goal <= 1.05)"
    )
    print(
        f"2. throughput over {n} images: bare {r['bare_sequential_s']:.2f} s vs edgekit "
        f"{r['edgekit_prefetch_s']:.2f} s  ->  {r['throughput_ratio']:.2f}x (goal >= 1.5)"
    )
    print(
        f"3. cold start: edgekit {r['cold_start_edgekit_s'] * 1000:.0f} ms vs bare script "
        f"{r['cold_start_bare_s'] * 1000:.0f} ms  ->  ratio {r['cold_start_ratio']:.3f} (goal <= 1.2; best of "
        f"{r['cold_start_runs']} each; medians {r['cold_start_median_edgekit_s'] * 1000:.0f} vs "
        f"{r['cold_start_median_bare_s'] * 1000:.0f} ms, ratio {r['cold_start_median_ratio']:.3f})"
    )
    print(
        f"   paired: median of the run-by-run ratios {r['cold_start_paired_median_ratio']:.3f} (wall), "
        f"{r['cold_start_cpu_paired_median_ratio']:.3f} (CPU seconds: edgekit "
        f"{r['cold_start_cpu_median_edgekit_s'] * 1000:.0f} ms vs bare "
        f"{r['cold_start_cpu_median_bare_s'] * 1000:.0f} ms, medians)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?", default=str(DEFAULT_MODEL))
    ap.add_argument("--images", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    if not Path(args.model).is_file():
        raise SystemExit(f"model not found: {args.model} (pass a uint8 .tflite classifier)")

    with tempfile.TemporaryDirectory() as tmp:
        paths = make_images(Path(tmp), args.images)
        loops = measure_loops(args.model, paths, args.repeat)
        cold = measure_cold_start(args.model, paths[0], Path(tmp), 3 * args.repeat)
    figures = {**loops, **cold}
    print_result(figures, args.model, len(paths))
    result = {"model": args.model, "images": len(paths), "cpu_count": os.cpu_count(), **figures}
    out = REPO / "benchmarks" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "classify_speed.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
