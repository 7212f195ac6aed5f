"""How often ``edgekit check`` agrees with the real edgetpu_compiler, scored on compiled pairs.

A compiled pair is ``X.tflite`` beside ``X_edgetpu.tflite`` made from it by the real compiler. For
each pair, check predicts the CPU model; the compiled model shows which ops the compiler left on
the CPU (every builtin op still in it) and how many Edge TPU subgraphs it made. Scores:

* op placement: per op type, the ops check puts on the CPU against the ops the compiler left there;
  a pair scores (ops - sum over types of |predicted - actual|) / ops, the total weights pairs by ops;
* verdict: ``full`` (nothing left on the CPU), ``none`` (no Edge TPU subgraph) or ``partial``.

A compiled file with several ``edgetpu-custom-op`` was compiled with ``-a`` (a default compile
makes one Edge TPU subgraph), so that pair is checked with ``multiple_subgraphs=True``; a compiler
log beside the pair (``X_edgetpu.log``) naming compiler 15 or older means that compiler's default
runtime, 13 (coral.ai compiler/runtime table), so that pair is checked with ``min_runtime=13``.
Used by ``benchmarks/check_fidelity.py`` and the regression table in the tests.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from edgekit import tflite_model
from edgekit.converters.compatibility import COMPILER_DEFAULT_MIN_RUNTIME, check_model
from edgekit.converters.edgetpu_compiler import compiled_split
from edgekit.errors import EdgekitError
from edgekit.tflite_model import EDGETPU_CUSTOM_OP


def find_pairs(folders: list[Path]) -> list[tuple[Path, Path]]:
    """(CPU model, compiled model) for every ``*_edgetpu.tflite`` whose source model sits beside it."""
    pairs = []
    for folder in folders:
        for compiled in sorted(Path(folder).glob("*_edgetpu.tflite")):
            cpu = compiled.with_name(compiled.name[: -len("_edgetpu.tflite")] + ".tflite")
            if cpu.is_file():
                pairs.append((cpu, compiled))
    return pairs


def compiler_major(compiled_path: Path) -> int | None:
    """The compiler's major version from the log beside a compiled model, if there is one."""
    log = compiled_path.with_suffix(".log")
    if not log.is_file():
        return None
    m = re.search(r"Edge TPU Compiler version (\d+)\.", log.read_text(errors="replace"))
    return int(m.group(1)) if m else None


def score_pair(cpu_path: Path, compiled_path: Path, infer_flags: bool = True) -> dict:
    """Check's prediction for one pair against what the compiler did."""
    cpu, compiled = tflite_model.load(cpu_path), tflite_model.load(compiled_path)
    subgraphs = sum(1 for op in compiled.ops if op.custom_code == EDGETPU_CUSTOM_OP)
    multiple = infer_flags and subgraphs > 1
    major = compiler_major(compiled_path) if infer_flags else None
    runtime = 13 if major is not None and major < 16 else COMPILER_DEFAULT_MIN_RUNTIME
    actual = compiled_split(cpu, compiled)
    actual_verdict = "none" if not subgraphs else ("full" if not +actual["cpu"] else "partial")
    try:
        report = check_model(cpu, runtime, multiple_subgraphs=multiple)
        predicted, verdict = report.split_by_type()["cpu"], report.verdict
    except EdgekitError as exc:  # a model check refuses: every op counts as wrong
        predicted, verdict = Counter({"<error>": len(cpu.ops)}), f"error: {exc.message}"
    types = set(predicted) | set(actual["cpu"])
    wrong = sum(abs(predicted[t] - actual["cpu"][t]) for t in types)
    n = len(cpu.ops)
    return {"pair": cpu_path.stem, "ops": n, "agreeing_ops": max(n - wrong, 0), "multiple_subgraphs": multiple,
            "min_runtime": runtime, "compiler": major,
            "verdict": verdict, "actual_verdict": actual_verdict,
            "predicted_cpu": dict(sorted((+predicted).items())), "actual_cpu": dict(sorted((+actual["cpu"]).items()))}


def summarize(rows: list[dict]) -> dict:
    ops = sum(r["ops"] for r in rows)
    return {"pairs": len(rows), "ops": ops,
            "op_agreement": sum(r["agreeing_ops"] for r in rows) / ops if ops else 0.0,
            "exact_pairs": sum(r["agreeing_ops"] == r["ops"] for r in rows),
            "verdicts_right": sum(r["verdict"] == r["actual_verdict"] for r in rows)}


def format_rows(rows: list[dict]) -> str:
    lines = [f"{'pair':<64} {'ops':>4} {'agree':>6}  verdict (check / compiler)"]
    for r in rows:
        flag = (" -a" if r["multiple_subgraphs"] else "") + (f" -m {r['min_runtime']}" if r["compiler"] else "")
        lines.append(f"{r['pair'][:64]:<64} {r['ops']:>4} {r['agreeing_ops'] / r['ops']:>6.1%}  "
                     f"{r['verdict']} / {r['actual_verdict']}{flag}")
        if r["predicted_cpu"] != r["actual_cpu"]:
            lines.append(f"    CPU ops: check {r['predicted_cpu']}, compiler {r['actual_cpu']}")
    s = summarize(rows)
    lines.append(f"op placement agreement {s['op_agreement']:.1%} over {s['ops']} ops in {s['pairs']} pairs; "
                 f"{s['exact_pairs']} pairs exact; verdicts right {s['verdicts_right']}/{s['pairs']}")
    return "\n".join(lines)
