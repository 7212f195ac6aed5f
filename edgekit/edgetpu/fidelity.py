"""How often ``edgekit check`` agrees with the real edgetpu_compiler, scored on compiled pairs.

A compiled pair is a CPU model and the ``*_edgetpu.tflite`` the real compiler made from it. What
the compiler did is its *placement*: the builtin ops still in the compiled model are the ones it
left on the CPU (the rest were mapped), the ``edgetpu-custom-op`` count is its number of Edge TPU
subgraphs, and its log, where there is one, names its version and status words. Scores:

* op placement: op by op where the compiled model's tensor names say which ops it left on the CPU
  (:func:`cpu_op_indices`; every ledger pair), else per op type; a pair scores (ops - ops placed
  differently) / ops, and the total weights pairs by ops;
* verdict: ``full`` (nothing left on the CPU), ``none`` (no Edge TPU subgraph) or ``partial``.

A compiled file with several ``edgetpu-custom-op`` was compiled with ``-a`` (a default compile
makes one Edge TPU subgraph), so that pair is checked with ``multiple_subgraphs=True``; a log
naming an older compiler means that compiler's default runtime
(:data:`edgekit.edgetpu.compiler_locator.COMPILER_MIN_RUNTIME`), so that pair is checked with it.

Pairs come from folders (``X.tflite`` beside ``X_edgetpu.tflite``, the log as ``X_edgetpu.log``) or
from the evidence ledger (``tests/fixtures/evidence``): one ``SOURCES.tsv`` row per public pair,
kept as a weightless copy of the CPU model (:func:`weightless`) and its placement as JSON, so the
tests score every pair without shipping anyone's weights. The ledger is split by a seeded hash of the
repository name (:func:`ledger_part`) into the fitting pairs rules may cite and the validation pairs
none cites; :func:`summarize_parts` scores each part. Used by ``benchmarks/check_fidelity.py``,
``benchmarks/evidence_pairs.py`` (which derives the ledger's files) and the regression tables in the tests.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from edgekit.edgetpu.compatibility import COMPILER_DEFAULT_MIN_RUNTIME, check_model
from edgekit.edgetpu.compiler import compiled_split, parse_compiler_output
from edgekit.edgetpu.compiler_locator import default_min_runtime, version_major
from edgekit.errors import EdgekitError
from edgekit.records import Record, freeze
from edgekit.results.inspect import PackageSummary
from edgekit.tflite import model as tflite_model
from edgekit.tflite.model import EDGETPU_CUSTOM_OP, ModelInfo

LEDGER_COLUMNS = ("repo", "commit", "model_path", "compiled_path", "log", "compiler_version", "license", "kind")
#: The ledger's split into a fitting part (the pairs rules may cite) and a validation part (never cited: it
#: measures check on pairs its rules were not written from). Fixed before any result was looked at: a pair's
#: part is decided by a seeded hash of its repository's name alone, so one repository's pairs stay together
#: and a new pair's part is known before it is scored. The fraction was chosen for at least 30 validation
#: pairs from at least 10 repositories (34 from 15 of the 100 pairs of 2026-11-26).
SPLIT_SEED = "edgekit-ledger-split-2026-11-26"
VALIDATION_FRACTION = 0.35
FITTING, VALIDATION = "fitting", "validation"
#: Constant buffers up to this size survive in a weightless copy: the shapes, axes and paddings the
#: rules read (``OpContext.const_ints``); every larger buffer (weights, biases) is zeroed.
KEEP_BUFFER_BYTES = 1024


def ledger_part(repo: str) -> str:
    """``"validation"`` or ``"fitting"``: the part of the ledger a repository's pairs belong to."""
    digest = hashlib.sha256(f"{SPLIT_SEED}:{repo.lower()}".encode()).digest()
    return VALIDATION if int.from_bytes(digest[:8], "big") / 2**64 < VALIDATION_FRACTION else FITTING


# ------------------------------------------------------------------------------------ placements
@dataclass(frozen=True)
class CompilerPlacement(Record):
    """What the real compiler did with a CPU model: read from the compiled model (and its log, when there is one).

    The ledger keeps it as JSON beside each weightless pair (with the ledger row's columns and the sha256)."""

    edgetpu_subgraphs: int  # edgetpu-custom-ops in the compiled model
    cpu_ops: Mapping[str, int]  # op type -> count left on the CPU
    cpu_op_indices: tuple[int, ...] | None  # which ops, by index (None: the names do not tell)
    edgetpu_ops: Mapping[str, int]  # op type -> count mapped
    compiler_version: str | None
    log_ops: tuple[tuple[str | int, ...], ...]  # the log's table rows: (operator, count, status)
    log_memory: Mapping[str, int | None]  # on_chip_used_bytes, off_chip_used_bytes (the log may not say)
    edgetpu: tuple[PackageSummary, ...]  # each Edge TPU package's summary


def placement(cpu: ModelInfo, compiled: ModelInfo, log_text: str | None = None) -> CompilerPlacement:
    """What the compiler did with ``cpu``: read from the compiled model (and its log, when given)."""
    split = compiled_split(cpu, compiled)
    log = parse_compiler_output(log_text) if log_text else None
    versions = [p.compiler_version for p in compiled.edgetpu_packages if p.compiler_version]
    indices = cpu_op_indices(cpu, compiled)
    return CompilerPlacement(
        edgetpu_subgraphs=sum(1 for op in compiled.ops if op.custom_code == EDGETPU_CUSTOM_OP),
        cpu_ops=freeze(dict(sorted((+split["cpu"]).items()))),
        cpu_op_indices=tuple(indices) if indices is not None else None,
        edgetpu_ops=freeze(dict(sorted((+split["edgetpu"]).items()))),
        compiler_version=(log.compiler_version if log else None) or (versions[0] if versions else None),
        log_ops=tuple((r.operator, r.count, r.status) for r in log.ops) if log else (),
        log_memory=freeze({k: getattr(log, k) for k in ("on_chip_used_bytes", "off_chip_used_bytes")} if log else {}),
        edgetpu=tuple(p.summary() for p in compiled.edgetpu_packages),
    )


def cpu_op_indices(cpu: ModelInfo, compiled: ModelInfo) -> list[int] | None:
    """The CPU model's ops the compiler left on the CPU, by index: matched by their output tensors' names,
    which the compiler keeps. None where names are not unique or do not all match."""
    names = [cpu.tensors[op.outputs[0]].name if op.outputs else None for op in cpu.ops]
    left = [
        compiled.tensors[op.outputs[0]].name
        for op in compiled.ops
        if op.custom_code != EDGETPU_CUSTOM_OP and op.outputs
    ]
    if len(set(names)) != len(names) or None in names:
        return None
    found = [i for i, name in enumerate(names) if name in set(left)]
    return found if len(found) == len(left) else None


def pair_problem(cpu: ModelInfo, compiled: ModelInfo) -> str | None:
    """Why ``compiled`` cannot have been made from ``cpu`` by the compiler, or None when it can be."""
    if not compiled.is_compiled:
        return "the compiled model holds no edgetpu-custom-op"
    if cpu.is_compiled:
        return "the CPU model is itself compiled"
    extra = Counter(op.name for op in compiled.ops if op.custom_code != EDGETPU_CUSTOM_OP) - Counter(
        op.name for op in cpu.ops
    )
    if extra:
        return f"the compiled model has ops the CPU model lacks: {dict(extra)}"

    # shapes, types and quantization: a re-exported model differs in them
    def io(m: ModelInfo) -> tuple[list[tuple], list[tuple]]:
        def one(t: Any) -> tuple:
            q = t.quantization
            return tuple(t.shape), t.dtype, (round(q.scale, 9), q.zero_point) if q else None

        return [one(t) for t in m.inputs], [one(t) for t in m.outputs]

    (cpu_in, cpu_out), (tpu_in, tpu_out) = io(cpu), io(compiled)
    # A detector's TFLite_Detection_PostProcess outputs have no stored shape (``()``) in the CPU model;
    # the compiler's TFLite fills them in (1x10x4, 1x10, ...): such an output matches on type alone.
    same_out = len(cpu_out) == len(tpu_out) and all(
        a == b or (a[0] == () and a[1:] == b[1:]) for a, b in zip(cpu_out, tpu_out)
    )
    if cpu_in != tpu_in or not same_out:
        return f"inputs/outputs differ: {io(cpu)} vs {io(compiled)}"
    return None


# ------------------------------------------------------------------------------------ scoring
def score(name: str, cpu: ModelInfo, actual: CompilerPlacement, infer_flags: bool = True) -> dict:
    """Check's prediction for ``cpu`` against the compiler's placement ``actual``."""
    subgraphs = actual.edgetpu_subgraphs
    multiple = infer_flags and subgraphs > 1
    major = version_major(actual.compiler_version) if infer_flags else None
    runtime = compiler_default_runtime(actual) if infer_flags else COMPILER_DEFAULT_MIN_RUNTIME
    actual_cpu = Counter(actual.cpu_ops)
    actual_verdict = "none" if not subgraphs else ("full" if not +actual_cpu else "partial")
    uncertain = 0
    verdict: str  # the check's verdict, or the error that refused the model
    try:
        report = check_model(cpu, runtime, multiple_subgraphs=multiple)
        predicted, verdict = report.split_by_type()["cpu"], report.verdict
        predicted_ops: list[int] | None = [o.index for o in report.ops if o.target == "cpu"]
        uncertain = report.summary.uncertain_ops
    except EdgekitError as exc:  # a model check refuses: every op counts as wrong
        predicted, verdict = Counter({"<error>": len(cpu.ops)}), f"error: {exc.message}"
        predicted_ops = None
    types = set(predicted) | set(actual_cpu)
    wrong = sum(abs(predicted[t] - actual_cpu[t]) for t in types)
    actual_ops = actual.cpu_op_indices
    if actual_ops is not None and predicted_ops is not None:  # op by op, where the pair says which op ran where
        wrong = len(set(predicted_ops) ^ set(actual_ops))
    n = len(cpu.ops)
    return {
        "pair": name,
        "ops": n,
        "agreeing_ops": max(n - wrong, 0),
        "multiple_subgraphs": multiple,
        "min_runtime": runtime,
        "compiler": major,
        "uncertain_ops": uncertain,
        "verdict": verdict,
        "actual_verdict": actual_verdict,
        "predicted_cpu": dict(sorted((+predicted).items())),
        "actual_cpu": dict(sorted((+actual_cpu).items())),
    }


def find_pairs(folders: list[Path]) -> list[tuple[Path, Path]]:
    """(CPU model, compiled model) for every ``*_edgetpu.tflite`` whose source model sits beside it."""
    pairs = []
    for folder in folders:
        for compiled in sorted(Path(folder).glob("*_edgetpu.tflite")):
            cpu = compiled.with_name(compiled.name[: -len("_edgetpu.tflite")] + ".tflite")
            if cpu.is_file():
                pairs.append((cpu, compiled))
    return pairs


def score_pair(cpu_path: Path, compiled_path: Path, infer_flags: bool = True) -> dict:
    """:func:`score` for a pair of files (the log beside the compiled model read when there is one)."""
    log = compiled_path.with_suffix(".log")
    cpu = tflite_model.load(cpu_path)
    actual = placement(
        cpu, tflite_model.load(compiled_path), log.read_text(errors="replace") if log.is_file() else None
    )
    return score(cpu_path.stem, cpu, actual, infer_flags)


# ------------------------------------------------------------------------------------ the ledger
def weightless(data: bytes, keep: int = KEEP_BUFFER_BYTES) -> bytes:
    """The model with its weights zeroed: same structure, same shapes, compresses to a few KB.

    Zeroed: every constant buffer over ``keep`` bytes and every weight (the constants the rules read
    stay: small int32/int64 shapes, axes and paddings, CONCATENATION's constant inputs), the
    per-channel quantization (min, max, scales, zero points) of constant tensors (their count stays:
    a rule may ask whether weights are per channel); tensor names become underscores of the same length.
    """
    from edgekit.board.flatbuffer import Reader

    info = tflite_model.ModelInfo.from_bytes(data)
    out = bytearray(data)
    weights = {t.buffer for g in info.subgraphs for t in g.tensors if t.is_constant}
    kept = {
        c.buffer
        for g in info.subgraphs
        for op in g.ops
        for i in op.inputs
        if (c := g.tensor(i)) is not None
        and c.is_constant
        and (op.name == "CONCATENATION" or (c.dtype in ("int32", "int64") and c.buffer_bytes <= 256))
    }
    for i, b in enumerate(info._buffers):
        if b.size > keep or (i in weights and i not in kept):
            out[b.start : b.start + b.size] = bytes(b.size)
    r = Reader(data)
    model = r.table(r.deref(0, "root table"), "model")
    for g, sub in zip(model.tables(2, "subgraphs"), info.subgraphs):
        for t, tensor in zip(g.tables(0, "tensors"), sub.tensors):
            start, n = t.raw_vector(3, 1, "tensor name")  # names say nothing the rules read
            out[start : start + n] = b"_" * n
            q = t.table(4, "quantization")
            if q is None or not tensor.is_constant:
                continue
            for slot, size in ((0, 4), (1, 4), (2, 4), (3, 8)):  # min, max, scale (float), zero point (int64)
                start, n = q.raw_vector(slot, size, "quantization")
                if n > 16:
                    out[start : start + n * size] = bytes(n * size)
    return bytes(out)


def pair_id(repo: str, model_path: str) -> str:
    """The file stem of a ledger pair's derived files: ``owner+name__dir__model``."""
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", f"{repo.replace('/', '+')}__{model_path.replace('/', '__')}")[:-7]


def pair_files(folder: Path, row: dict[str, str]) -> tuple[Path, Path]:
    """(weightless CPU model .tflite.gz, placement .json) of a ledger row, under ``folder/pairs``."""
    stem = pair_id(row["repo"], row["model_path"])
    return Path(folder) / "pairs" / f"{stem}.tflite.gz", Path(folder) / "pairs" / f"{stem}.json"


def read_ledger(folder: Path) -> list[dict[str, str]]:
    with open(Path(folder) / "SOURCES.tsv", newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def ledger_pairs(folder: Path) -> list[tuple[dict[str, str], ModelInfo, CompilerPlacement]]:
    """(ledger row, weightless CPU model, placement) for every row of ``folder/SOURCES.tsv``; a pair's JSON file is
    the ledger row's columns, the model's sha256 and the placement's document, of which the placement is read."""
    out = []
    names = {f.name for f in fields(CompilerPlacement)}
    for row in read_ledger(folder):
        gz, placement_json = pair_files(folder, row)
        cpu = tflite_model.ModelInfo.from_bytes(gzip.decompress(gz.read_bytes()), f"{row['repo']}/{row['model_path']}")
        pair = json.loads(placement_json.read_text())
        out.append((row, cpu, CompilerPlacement.from_dict({k: v for k, v in pair.items() if k in names})))
    return out


def score_ledger(folder: Path, infer_flags: bool = True) -> list[dict]:
    """:func:`score` of every ledger pair, each row naming its part (``"fitting"`` or ``"validation"``)."""
    return [
        score(pair_id(row["repo"], row["model_path"]), cpu, actual, infer_flags)
        | {"part": ledger_part(row["repo"]), "repo": row["repo"]}
        for row, cpu, actual in ledger_pairs(folder)
    ]


# ------------------------------------------------------------------------------------ reports
def summarize(rows: list[dict]) -> dict:
    ops = sum(r["ops"] for r in rows)
    return {
        "pairs": len(rows),
        "ops": ops,
        "op_agreement": sum(r["agreeing_ops"] for r in rows) / ops if ops else 0.0,
        "exact_pairs": sum(r["agreeing_ops"] == r["ops"] for r in rows),
        "verdicts_right": sum(r["verdict"] == r["actual_verdict"] for r in rows),
    }


def summarize_parts(rows: list[dict]) -> dict[str, dict]:
    """:func:`summarize` of each part of the ledger (rows from :func:`score_ledger`), with its repositories."""
    out = {}
    for part in (FITTING, VALIDATION):
        mine = [r for r in rows if r.get("part") == part]
        out[part] = summarize(mine) | {"repositories": len({r["repo"] for r in mine})}
    return out


def format_parts(rows: list[dict]) -> str:
    """One line per part of the ledger: pairs, repositories, op agreement, exact pairs, verdicts right."""
    lines = []
    for part, s in summarize_parts(rows).items():
        lines.append(
            f"{part:<10} {s['pairs']:>3} pairs from {s['repositories']:>2} repositories: op placement "
            f"agreement {s['op_agreement']:.1%} over {s['ops']} ops, {s['exact_pairs']} pairs exact, "
            f"verdicts right {s['verdicts_right']}/{s['pairs']}"
        )
    return "\n".join(lines)


def format_rows(rows: list[dict]) -> str:
    lines = [f"{'pair':<64} {'ops':>4} {'agree':>6}  verdict (check / compiler)"]
    for r in rows:
        flag = (" -a" if r["multiple_subgraphs"] else "") + (f" -m {r['min_runtime']}" if r["compiler"] else "")
        lines.append(
            f"{r['pair'][:64]:<64} {r['ops']:>4} {r['agreeing_ops'] / max(r['ops'], 1):>6.1%}  "
            f"{r['verdict']} / {r['actual_verdict']}{flag}"
        )
        if r["predicted_cpu"] != r["actual_cpu"]:
            lines.append(f"    CPU ops: check {r['predicted_cpu']}, compiler {r['actual_cpu']}")
    s = summarize(rows)
    lines.append(
        f"op placement agreement {s['op_agreement']:.1%} over {s['ops']} ops in {s['pairs']} pairs; "
        f"{s['exact_pairs']} pairs exact; verdicts right {s['verdicts_right']}/{s['pairs']}"
    )
    return "\n".join(lines)


# ------------------------------------------------------------------------------------ rule audit
def rule_evidence(pairs: list[tuple[str, ModelInfo, CompilerPlacement]]) -> dict[str, dict[str, list[str]]]:
    """What the pairs say of each rule: ``{rule: {"contradicts": [...], "agrees": [...]}}`` (pair names).

    A rule is a constraint (``OP.id``; ``COMMON.id`` for the ones every op meets) or
    an op type's mapping (``OP.mapped``). A constraint that refuses an op the compiler mapped is
    contradicted there; one that refuses an op the compiler left on the CPU agrees (the pair shows
    where ops ran, not why: a log, where there is one, says why). Op by op where the placement names
    the ops left on the CPU (``cpu_op_indices``), else by op type. An op type with ops mapped agrees
    with its ``mapped`` rule.
    """
    from edgekit.edgetpu.compatibility import COMMON, RULES, OpContext

    out: dict[str, dict[str, list[str]]] = {}

    def note(rule: str, kind: str, name: str) -> None:
        seen = out.setdefault(rule, {"contradicts": [], "agrees": []})[kind]
        if name not in seen:
            seen.append(name)

    for name, cpu, actual in pairs:
        g = cpu.main
        for op in g.ops:
            rule = RULES.get(op.name)
            if rule is None:
                continue
            if actual.edgetpu_ops.get(op.name):
                note(f"{op.name}.mapped", "agrees", name)
            c = OpContext(
                cpu,
                g,
                op,
                [g.tensor(i) for i in op.inputs],
                [g.tensor(i) for i in op.outputs],
                compiler_default_runtime(actual),
                rule,
            )
            if any(t is None for t in c.ins[:1] + c.outs[:1]):
                continue
            for k in COMMON + rule.constraints:
                try:
                    fired = k.test(c) is not None
                except (IndexError, ValueError, TypeError):
                    continue
                if fired:
                    where = "COMMON" if k in COMMON else op.name
                    left = actual.cpu_op_indices
                    on_cpu = op.index in left if left is not None else bool(actual.cpu_ops.get(op.name))
                    note(f"{where}.{k.id}", "agrees" if on_cpu else "contradicts", name)
                    break
    return out


def compiler_default_runtime(actual: CompilerPlacement) -> int:
    """The runtime the pair's compiler targets by default (compiler 16's where the version is unknown)."""
    return default_min_runtime(actual.compiler_version) or COMPILER_DEFAULT_MIN_RUNTIME
