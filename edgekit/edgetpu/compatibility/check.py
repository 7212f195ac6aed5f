"""The report of one check (:class:`CheckReport`), :func:`check_model` and the quantize gate built on it."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from edgekit.edgetpu.compatibility.op_judge import judge, model_problems
from edgekit.edgetpu.compatibility.partition import place
from edgekit.edgetpu.compatibility.values import Judgement, OpVerdict, Problem
from edgekit.edgetpu.compatibility.words import (
    COMPILER_DEFAULT_MIN_RUNTIME,
    CONFIRMED,
    CUT_OFF,
    CUT_OFF_FED_BY_CPU,
    DATA_TYPE,
    FIX_QUANTIZE,
    MAPPED,
    MORE_THAN_ONE_SUBGRAPH,
    NOT_CONSTANT,
    NOT_SUPPORTED,
    PARAMETER_CACHE_BYTES,
    RANK,
    STRIDES,
    SUPPORTED_MIN_RUNTIMES,
    UNCERTAIN,
    UNSPECIFIED,
    VERSION,
    Confidence,
    Target,
    Verdict,
    mib,
)
from edgekit.errors import CompatibilityError, UsageError
from edgekit.results.check import CheckResult
from edgekit.tflite.model import EDGETPU_CUSTOM_OP, ModelInfo, SubgraphInfo
from edgekit.tflite.yolo_head import decode_tail_advice


@dataclass(frozen=True)
class CheckReport:
    """The offline prediction of one compile; its document (``edgekit check --json``) is
    :class:`edgekit.results.check.CheckResult` (``CheckResult.of_report(report)``)."""

    model: str | None
    verdict: Verdict
    ops: list[OpVerdict]
    subgraphs: int
    param_bytes: int
    on_chip_bytes_estimate: int | None
    off_chip_bytes_estimate: int | None
    problems: list[Problem] = field(default_factory=list)
    advice: list[str] = field(default_factory=list)
    min_runtime: int = COMPILER_DEFAULT_MIN_RUNTIME
    compiled: bool = False
    multiple_subgraphs: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "verdict", Verdict(self.verdict))

    @property
    def edgetpu_ops(self) -> int:
        return sum(1 for o in self.ops if o.target == Target.EDGETPU)

    @property
    def cpu_ops(self) -> int:
        return sum(1 for o in self.ops if o.target == Target.CPU)

    @property
    def fully_mappable(self) -> bool:
        return self.verdict == Verdict.FULL

    @property
    def uncertain_ops(self) -> int:
        """Ops whose placement rests on no real compile (documentation or inference only)."""
        return sum(1 for o in self.ops if o.confidence == UNCERTAIN)

    @property
    def certain_cpu_ops(self) -> list[OpVerdict]:
        return [o for o in self.ops if o.target == Target.CPU and o.confidence != UNCERTAIN]

    @property
    def fatal(self) -> list[Problem]:
        return [p for p in self.problems if p.fatal]

    def strict_error(self) -> CompatibilityError | None:
        """What ``check --strict`` raises (exit 7), or None: :meth:`edgekit.results.check.CheckResult.strict_error`."""
        return CheckResult.of_report(self).strict_error()

    def split_by_type(self) -> dict[str, Counter]:
        """{"edgetpu": Counter(op name -> n), "cpu": Counter(...)}, the way a compiled pair is scored."""
        out: dict[str, Counter[str]] = {Target.EDGETPU.value: Counter(), Target.CPU.value: Counter()}
        for o in self.ops:
            out[o.target][o.name] += 1
        return out

    def table(self) -> list[tuple[str, int, str]]:
        """Rows of the compiler's operation log: (operator, count, status), in first-seen order."""
        return CheckResult.of_report(self).table()


def _cut_confidence(
    g: SubgraphInfo, judged: list[Judgement], producer: dict[int, int]
) -> tuple[list[Confidence], list[bool]]:
    """Per op, how sure its place on the CPU is when it is cut off the one Edge TPU subgraph (sure when it
    depends on an op certain to be unmappable; else as sure as the unmappable ops it depends on, or,
    depending on none, every unmappable op before it, are), and whether it depends on such a sure op."""
    unsure = [not j.mappable and j.confidence == UNCERTAIN for j in judged]
    sure = [not j.mappable and j.confidence == CONFIRMED for j in judged]
    n = len(judged)
    depends, depends_unsure, depends_sure, out = [False] * n, [False] * n, [False] * n, []
    unsure_before = False  # any(unsure[:i]), kept as it goes: a slice per op was quadratic in the op count
    for i, op in enumerate(g.ops):
        parents = [p for p in (producer.get(t) for t in op.inputs) if p is not None]
        depends[i] = any(not judged[p].mappable or depends[p] for p in parents)
        depends_unsure[i] = any(unsure[p] or depends_unsure[p] for p in parents)
        depends_sure[i] = any(sure[p] or depends_sure[p] for p in parents)
        out.append(
            CONFIRMED
            if depends_sure[i]
            else UNCERTAIN
            if (depends_unsure[i] if depends[i] else unsure_before)
            else CONFIRMED
        )
        unsure_before = unsure_before or unsure[i]
    return out, depends_sure


# -------------------------------------------------------------------------------------- check
def check_model(
    info: ModelInfo, min_runtime: int = COMPILER_DEFAULT_MIN_RUNTIME, multiple_subgraphs: bool = False
) -> CheckReport:
    """Predict what ``edgetpu_compiler -m min_runtime [-a]`` (compiler 16) does with ``info``.

    The stages: judge each op on its own; the problems of the whole model (a fatal one puts every op on
    the CPU); place the mappable ops into Edge TPU subgraphs; each op's verdict; the parameters against
    the on-chip cache; the problems and advice that follow.
    """
    if min_runtime not in SUPPORTED_MIN_RUNTIMES:
        raise UsageError(
            f"--min-runtime {min_runtime} is not a runtime edgetpu_compiler 16 targets",
            f"use {SUPPORTED_MIN_RUNTIMES.start}..{SUPPORTED_MIN_RUNTIMES.stop - 1} (default 14)",
        )
    if info.is_compiled:
        return _check_compiled(info, min_runtime)
    g = info.main
    judged = [judge(info, g, op, min_runtime) for op in g.ops]
    problems: list[Problem] = model_problems(info)
    advice = _model_advice(problems)
    fatal = [p for p in problems if p.fatal]
    if fatal:
        refused = _refused_verdicts(g, judged, fatal[0])
        return _for_source(
            info,
            CheckReport(
                info.path,
                Verdict.NONE,
                refused,
                0,
                info.param_bytes,
                0,
                0,
                problems,
                advice + _architecture_advice(info, refused, Verdict.NONE),
                min_runtime,
                multiple_subgraphs=multiple_subgraphs,
            ),
        )

    mappable = [j.mappable for j in judged]
    where = place(g, mappable, multiple_subgraphs)
    verdicts = _placed_verdicts(g, judged, where, multiple_subgraphs)
    tpu_params = _edgetpu_param_bytes(g, where)
    on_chip = min(tpu_params, PARAMETER_CACHE_BYTES)
    off_chip = tpu_params - on_chip
    tpu_ops = sum(1 for s in where if s is not None)
    verdict = Verdict.FULL if tpu_ops == len(g.ops) and g.ops else Verdict.NONE if not tpu_ops else Verdict.PARTIAL
    problems += _cpu_problems(verdicts) + _doubt_problems(g, judged, where) + _cache_problems(tpu_params, off_chip)
    decode = decode_tail_advice(info, {v.index for v in verdicts if v.target == "cpu"})
    advice += ([decode] if decode else []) + _advice(g, verdicts, mappable, multiple_subgraphs)
    advice += _cache_advice(tpu_params, off_chip) + _architecture_advice(info, verdicts, verdict)
    n_sub = len({s for s in where if s is not None})
    return _for_source(
        info,
        CheckReport(
            info.path,
            verdict,
            verdicts,
            n_sub,
            info.param_bytes,
            on_chip,
            off_chip,
            problems,
            advice,
            min_runtime,
            multiple_subgraphs=multiple_subgraphs,
        ),
    )


def _for_source(info: ModelInfo, report: CheckReport) -> CheckReport:
    """The report's fixes, hints and advice in the words of the source the model came from (no `edgekit quantize`
    for a model quantize cannot take; PyTorch's layers for a PyTorch model):
    :func:`edgekit.edgetpu.advice.for_source`."""
    from dataclasses import replace

    from edgekit.edgetpu import advice as table

    source, _why = table.model_source(info)
    if source == table.Source.KERAS:
        return report

    def said(text: str | None) -> str | None:
        return table.for_source(text, source)

    return replace(
        report,
        ops=[replace(v, fix=said(v.fix), detail=said(v.detail)) for v in report.ops],
        problems=[replace(p, hint=said(p.hint), message=said(p.message) or p.message) for p in report.problems],
        advice=[said(a) or a for a in report.advice],
    )


def _model_advice(problems: list[Problem]) -> list[str]:
    """The advice the problems of the whole model give: each fatal one's fix, and quantizing a float model."""
    advice = [f"{p.message}. Fix: {p.hint}" for p in problems if p.fatal and p.hint]
    if any(p.code == "not_quantized" for p in problems):
        advice.append("The model is not quantized: " + FIX_QUANTIZE + ".")
    return advice


def _refused_verdicts(g: SubgraphInfo, judged: list[Judgement], first: Problem) -> list[OpVerdict]:
    """Every op on the CPU with the words of the first fatal problem (what each would be otherwise in its detail)."""

    def sure(j: Judgement) -> Confidence:  # on the CPU for sure when the refusal is, or when the op is unmappable
        return CONFIRMED if CONFIRMED in (first.confidence, j.confidence if not j.mappable else None) else UNCERTAIN

    return [
        OpVerdict(
            op.index,
            op.name,
            op.version,
            Target.CPU,
            first.status or first.message,
            f"otherwise: {j.status}" + (f" ({j.detail})" if j.detail else ""),
            j.fix,
            sure(j),
            rule=first.code,
        )
        for op, j in zip(g.ops, judged)
    ]


def _placed_verdicts(
    g: SubgraphInfo, judged: list[Judgement], where: list[int | None], multiple_subgraphs: bool
) -> list[OpVerdict]:
    """Each op's verdict once placed: in an Edge TPU subgraph, cut off from it although mappable, or refused."""
    mappable = [j.mappable for j in judged]
    producer = {t: op.index for op in g.ops for t in op.outputs}
    cut_confidence, cut_off_anyway = _cut_confidence(g, judged, producer)
    verdicts = []
    for op, j, sub in zip(g.ops, judged, where):
        if sub is not None:
            verdicts.append(
                OpVerdict(
                    op.index, op.name, op.version, Target.EDGETPU, MAPPED, None, None, j.confidence, sub, rule=j.rule
                )
            )
        elif j.mappable:
            # The words depend on what feeds it (CUT_OFF_FED_BY_CPU).
            fed = [producer.get(t) for t in op.inputs]
            fed_by_cpu = any(p is not None and not mappable[p] for p in fed)
            words = CUT_OFF_FED_BY_CPU.get(op.name, MORE_THAN_ONE_SUBGRAPH) if fed_by_cpu else MORE_THAN_ONE_SUBGRAPH
            verdicts.append(
                OpVerdict(
                    op.index,
                    op.name,
                    op.version,
                    Target.CPU,
                    words,
                    CUT_OFF,
                    None,
                    cut_confidence[op.index],
                    cut_off=True,
                    rule="cut_off",
                )
            )
        else:  # an unsure refusal is still a sure CPU placement when the op is cut off anyway
            sure = j.confidence == CONFIRMED or (not multiple_subgraphs and cut_off_anyway[op.index])
            verdicts.append(
                OpVerdict(
                    op.index,
                    op.name,
                    op.version,
                    Target.CPU,
                    j.status,
                    j.detail,
                    j.fix,
                    CONFIRMED if sure else UNCERTAIN,
                    code=j.code,
                    rule=j.rule,
                )
            )
    return verdicts


def _edgetpu_param_bytes(g: SubgraphInfo, where: list[int | None]) -> int:
    """The bytes of the constant inputs of the Edge TPU ops (each buffer once): what the on-chip cache must hold."""
    tpu_ops = [i for i, s in enumerate(where) if s is not None]
    buffers = {
        t.buffer: t.buffer_bytes for i in tpu_ops for k in g.ops[i].inputs if k >= 0 and (t := g.tensors[k]).is_constant
    }
    return sum(buffers.values())


def _cache_problems(tpu_params: int, off_chip: int) -> list[Problem]:
    """The problem of parameters beyond the ~8 MiB on-chip cache (none when they fit)."""
    if not off_chip:
        return []
    return [
        Problem(
            "off_chip",
            f"about {mib(tpu_params)} of parameters for a ~8 MiB on-chip cache: ~{mib(off_chip)} "
            "would be streamed from host memory at every inference",
            "use a smaller or narrower model, or split it over several Edge TPUs with `edgekit compile --segments N`",
        )
    ]


def _cache_advice(tpu_params: int, off_chip: int) -> list[str]:
    """Advice on parameters beyond, or close to, the ~8 MiB on-chip cache."""
    if off_chip:
        return [
            f"Parameters ({mib(tpu_params)}) exceed the Edge TPU's ~8 MiB cache; ~{mib(off_chip)} would "
            "stream from host memory each inference (slower). Shrink the model or pipeline it with --segments."
        ]
    if tpu_params > 6 * 1024 * 1024:
        return [
            f"Parameters ({mib(tpu_params)}) are close to the ~8 MiB cache; the compiler caches ~6-7.6 MiB "
            "in practice, so some may be streamed."
        ]
    return []


def quantize_gate(report: CheckReport, io_type: str, info: ModelInfo) -> list[Problem]:
    """What makes a freshly quantized model unfit for the compiler, from its check report.

    The fatal problems, float compute the converter left behind (a data-type problem), and model
    I/O that is not ``io_type``. Empty when the model is fit.
    """
    out = list(report.fatal)
    floats = [p for p in report.problems if p.code == "data_type"]
    names = {o.index: o.name for o in report.ops}
    # Name the float op itself, not the DEQUANTIZE/QUANTIZE the converter put around it.
    real = [p for p in floats if any(names.get(i) not in ("QUANTIZE", "DEQUANTIZE") for i in p.ops)]
    out += real or floats
    for t in info.inputs + info.outputs:
        if t.dtype != io_type:
            out.append(Problem("io_type", f"I/O tensor {t.name!r} is {t.dtype}, not {io_type}"))
    return out


def gate_checks(report: CheckReport) -> dict[str, Any]:
    """quantize's ``checks`` JSON, computed from the output's check report."""
    codes = {p.code for p in report.problems}
    return {
        "full_int8": not codes & {"data_type", "not_quantized"},
        "static_shapes": "dynamic_shapes" not in codes,
        "op_versions_within_compiler": not codes & {"op_version", "op_version_unsure"},
        "edgetpu_verdict": report.verdict,
    }


_PROBLEM_CODES = {
    NOT_SUPPORTED: "unsupported_op",
    DATA_TYPE: "data_type",
    VERSION: "op_version_not_mapped",
    NOT_CONSTANT: "not_constant",
    RANK: "rank",
    STRIDES: "limitation",
    UNSPECIFIED: "limitation",
}


def _cpu_problems(verdicts: list[OpVerdict]) -> list[Problem]:
    """One problem per (reason, detail) among the unmappable ops."""
    grouped: dict[tuple[str, str, str | None, Confidence, str | None], list[int]] = {}
    for v in verdicts:
        if v.target == Target.CPU and not v.cut_off:
            key = (v.reason, f"{v.name}: {v.detail or v.reason}", v.fix, v.confidence, v.code)
            grouped.setdefault(key, []).append(v.index)
    out = []
    for (reason, text, fix, confidence, code), idx in grouped.items():
        where = (
            f"op #{idx[0]}"
            if len(idx) == 1
            else f"{len(idx)} ops (#{', #'.join(map(str, idx[:5]))}" + (", ...)" if len(idx) > 5 else ")")
        )
        code = code or _PROBLEM_CODES.get(reason, "limitation")
        out.append(Problem(code, f"{where} {text}", fix, tuple(idx), confidence=confidence))
    return out


def _doubt_problems(g: SubgraphInfo, judged: list[Judgement], where: list[int | None]) -> list[Problem]:
    """One uncertain problem per rule that would refuse ops check maps as its best guess (the rule is untested,
    and rules of its kind were mostly contradicted once tested: :mod:`edgekit.edgetpu.compatibility.guess`)."""
    grouped: dict[tuple[str, str, str, str | None], list[int]] = {}
    for op, j in zip(g.ops, judged):
        if j.doubt is not None:
            rule_id, status, detail, fix = j.doubt
            grouped.setdefault((rule_id, f"{op.name}: {detail}", status, fix), []).append(op.index)
    out = []
    for (rule_id, text, status, fix), idx in grouped.items():
        where_ = (
            f"op #{idx[0]}"
            if len(idx) == 1
            else f"{len(idx)} ops (#{', #'.join(map(str, idx[:5]))}" + (", ...)" if len(idx) > 5 else ")")
        )
        placed = "mapped" if any(where[i] is not None for i in idx) else "placed"
        out.append(
            Problem(
                "uncertain_rule",
                f"{where_} {text}: an untested rule ({rule_id}) says '{status}'; "
                f"{placed} as the best guess, since rules of its kind mostly failed once tested",
                fix,
                tuple(idx),
                confidence=UNCERTAIN,
            )
        )
    return out


def _advice(g: SubgraphInfo, verdicts: list[OpVerdict], mappable: list[bool], multiple: bool) -> list[str]:
    """Name the op that breaks the graph and what to change."""
    out: list[str] = []
    cut = [v for v in verdicts if v.cut_off]
    if not cut:
        cpu = [v for v in verdicts if v.target == Target.CPU]
        if cpu and len(cpu) < len(verdicts):
            names = ", ".join(f"#{v.index} {v.name}" for v in cpu[:5]) + (" ..." if len(cpu) > 5 else "")
            whole = (
                "every mappable run is its own Edge TPU subgraph (-a)"
                if multiple
                else "no op the Edge TPU could run is cut off by it, so the Edge TPU subgraph is whole"
            )
            out.append(f"Only {names} run(s) on the CPU; {whole}.")
            for v in cpu:
                if v.fix:
                    out.append(f"To map #{v.index} {v.name} too: {v.fix}.")
                    break
        return out
    # The breaking op: the earliest unmappable op that some cut-off mappable op depends on (through mappable
    # ops only). One walk from all cut-off ops at once, each op visited once: linear in the op count (a walk
    # per cut-off op was quadratic: minutes on a model of 150,000 ops).
    producer = {t: op.index for op in g.ops for t in op.outputs}
    breakers: set[int] = set()
    stack = sorted(v.index for v in cut)
    seen = set(stack)
    while stack:
        j = stack.pop()
        for t in g.ops[j].inputs:
            p = producer.get(t)
            if p is None or p in seen:
                continue
            seen.add(p)
            if not mappable[p]:
                breakers.add(p)
            else:
                stack.append(p)
    if not breakers:
        return out
    first = min(breakers)
    v = verdicts[first]
    after = sum(1 for x in verdicts if x.index > first and x.target == Target.CPU)
    out.append(
        f"Op #{v.index} {v.name} breaks the graph: {v.detail or v.reason}. It and {after} later op(s) run on "
        f'the CPU, {len(cut)} of which the Edge TPU could run ("{MORE_THAN_ONE_SUBGRAPH}").'
    )
    if v.fix:
        out.append(f"Change: {v.fix}.")
    others = sorted(b for b in breakers if b != first)
    if others:
        out.append("Also unmappable before CPU-side ops: " + ", ".join(f"#{b} {verdicts[b].name}" for b in others[:5]))
    out.append(
        "Or compile with -a (edgetpu_compiler --enable_multiple_subgraphs, experimental; `edgekit check -a` "
        "predicts it) to map the later ops into further Edge TPU subgraphs; measure latency with and "
        "without it."
    )
    return out


def _check_compiled(info: ModelInfo, min_runtime: int) -> CheckReport:
    g = info.main
    verdicts = []
    n_sub = 0
    for op in g.ops:
        if op.custom_code == EDGETPU_CUSTOM_OP:
            verdicts.append(
                OpVerdict(
                    op.index,
                    EDGETPU_CUSTOM_OP,
                    op.version,
                    Target.EDGETPU,
                    MAPPED,
                    "an Edge TPU subgraph made by edgetpu_compiler",
                    subgraph=n_sub,
                )
            )
            n_sub += 1
        else:
            name = op.custom_code if op.name == "CUSTOM" and op.custom_code else op.name
            verdicts.append(OpVerdict(op.index, name, op.version, Target.CPU, "Left on the CPU by the compiler"))
    cpu = [v for v in verdicts if v.target == Target.CPU]
    verdict = Verdict.FULL if not cpu else Verdict.PARTIAL
    msg = (
        f"the model is already compiled for the Edge TPU (it contains {EDGETPU_CUSTOM_OP}: "
        f"{info.edgetpu_bytes:,} bytes of Edge TPU program and parameters)"
    )
    if cpu:
        hist = Counter(v.name for v in cpu)
        msg += "; still on the CPU: " + ", ".join(f"{n} x {name}" for name, n in hist.items())
    else:
        msg += "; nothing is left on the CPU"
    problems = [
        Problem(
            "already_compiled",
            msg,
            "check or compile the model from before edgetpu_compiler (the file without _edgetpu)",
        )
    ]
    return CheckReport(
        info.path,
        verdict,
        verdicts,
        n_sub,
        info.param_bytes,
        None,
        None,
        problems,
        [msg[0].upper() + msg[1:] + "."],
        min_runtime,
        compiled=True,
        multiple_subgraphs=n_sub > 1,
    )


def _architecture_advice(info: ModelInfo, verdicts: list[OpVerdict], verdict: str) -> list[str]:
    """The advice table's entries (:mod:`edgekit.edgetpu.advice`, each with its evidence) for the architecture
    the .tflite shows: its op types, its tensor names (Keras layer names survive conversion), the ops on the CPU."""
    from edgekit.edgetpu import advice as table

    facts = table.tflite_facts(info, cpu_indices=frozenset(v.index for v in verdicts if v.target == "cpu"))
    return [a.line().split(": ", 1)[1] for a in table.placement_advice(facts, verdict)]
