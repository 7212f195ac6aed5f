"""One check, :func:`check_model`: its document (:class:`~edgekit.results.check.CheckResult`), built here; and the
quantize gate built on it (quantize's ``checks`` are :meth:`edgekit.results.quantize.GateChecks.from_check`)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from edgekit.edgetpu.compatibility.model_rules import MODEL_RULES
from edgekit.edgetpu.compatibility.op_judge import judge, model_problems
from edgekit.edgetpu.compatibility.partition import place
from edgekit.edgetpu.compatibility.values import Judgement
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
from edgekit.errors import UsageError
from edgekit.results.check import CheckProblem, CheckResult, CheckSummary, OpPlacement
from edgekit.tflite import edgetpu_package
from edgekit.tflite.model import EDGETPU_CUSTOM_OP, ModelInfo, SubgraphInfo
from edgekit.tflite.yolo_head import decode_tail_advice


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
) -> CheckResult:
    """Predict what ``edgetpu_compiler -m min_runtime [-a]`` (compiler 16) does with ``info``: ``edgekit check``'s
    document.

    The stages: judge each op on its own; the problems of the whole model (a fatal one puts every op on
    the CPU); place the mappable ops into Edge TPU subgraphs; each op's placement; the parameters against
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
    problems = model_problems(info)
    advice = _model_advice(problems)
    fatal = [p for p in problems if p.fatal]
    if fatal:
        refused = _refused_placements(g, judged, fatal[0])
        advice += _architecture_advice(info, refused, Verdict.NONE)
        return _for_source(
            info, _result(info, Verdict.NONE, refused, 0, (0, 0), problems, advice, min_runtime, multiple_subgraphs)
        )

    where = place(g, [j.mappable for j in judged], multiple_subgraphs)
    placed = _placements(g, judged, where, multiple_subgraphs)
    tpu_params = _edgetpu_param_bytes(g, where)
    on_chip = min(tpu_params, PARAMETER_CACHE_BYTES)
    off_chip = tpu_params - on_chip
    tpu_ops = sum(1 for s in where if s is not None)
    verdict = Verdict.FULL if tpu_ops == len(g.ops) and g.ops else Verdict.NONE if not tpu_ops else Verdict.PARTIAL
    problems += _cpu_problems(placed, judged) + _doubt_problems(g, judged, where)
    problems += _cache_problems(tpu_params, off_chip)
    decode = decode_tail_advice(info, {v.index for v in placed if v.target == "cpu"})
    advice += ([decode] if decode else []) + _advice(g, placed, judged, multiple_subgraphs)
    advice += _cache_advice(tpu_params, off_chip) + _architecture_advice(info, placed, verdict)
    n_sub = len({s for s in where if s is not None})
    cache = (on_chip, off_chip)
    return _for_source(
        info, _result(info, verdict, placed, n_sub, cache, problems, advice, min_runtime, multiple_subgraphs)
    )


def _result(
    info: ModelInfo,
    verdict: Verdict,
    ops: list[OpPlacement],
    subgraphs: int,
    cache: tuple[int | None, int | None],
    problems: list[CheckProblem],
    advice: list[str],
    min_runtime: int,
    multiple_subgraphs: bool,
    compiled: bool = False,
) -> CheckResult:
    """The document of one check, its summary counted from ``ops`` (``cache``: the parameters of the Edge TPU ops
    on-chip and off-chip, None where not estimated); a compiled model's with what its compiler wrote."""
    summary = CheckSummary(
        sum(1 for o in ops if o.target == Target.EDGETPU),
        sum(1 for o in ops if o.target == Target.CPU),
        subgraphs,
        sum(1 for o in ops if o.confidence == UNCERTAIN),
        info.param_bytes,
        *cache,
    )
    edgetpu = edgetpu_package.summary(info.edgetpu_packages) if compiled else None
    return CheckResult(
        info.path,
        verdict,
        compiled,
        min_runtime,
        multiple_subgraphs,
        tuple(ops),
        summary,
        tuple(problems),
        tuple(advice),
        edgetpu,
    )


def _for_source(info: ModelInfo, result: CheckResult) -> CheckResult:
    """The result's details, hints and advice in the words of the source the model came from (no `edgekit quantize`
    for a model quantize cannot take; PyTorch's layers for a PyTorch model):
    :func:`edgekit.edgetpu.advice.for_source`."""
    from edgekit.edgetpu import advice as table

    source, _why = table.model_source(info)
    if source == table.Source.KERAS:
        return result

    def said(text: str | None) -> str | None:
        return table.for_source(text, source)

    return replace(
        result,
        ops=tuple(replace(v, detail=said(v.detail)) for v in result.ops),
        problems=tuple(replace(p, hint=said(p.hint), message=said(p.message) or p.message) for p in result.problems),
        advice=tuple(said(a) or a for a in result.advice),
    )


def _model_advice(problems: list[CheckProblem]) -> list[str]:
    """The advice the problems of the whole model give: each fatal one's fix, and quantizing a float model."""
    advice = [f"{p.message}. Fix: {p.hint}" for p in problems if p.fatal and p.hint]
    if any(p.code == "not_quantized" for p in problems):
        advice.append("The model is not quantized: " + FIX_QUANTIZE + ".")
    return advice


def _refused_placements(g: SubgraphInfo, judged: list[Judgement], first: CheckProblem) -> list[OpPlacement]:
    """Every op on the CPU with the words of the first fatal problem (what each would be otherwise in its detail)."""
    words = MODEL_RULES[first.code].status or first.message

    def sure(j: Judgement) -> Confidence:  # on the CPU for sure when the refusal is, or when the op is unmappable
        return CONFIRMED if CONFIRMED in (first.confidence, j.confidence if not j.mappable else None) else UNCERTAIN

    return [
        OpPlacement(
            op.index,
            op.name,
            op.version,
            Target.CPU,
            words,
            f"otherwise: {j.status}" + (f" ({j.detail})" if j.detail else ""),
            sure(j),
            None,
        )
        for op, j in zip(g.ops, judged)
    ]


def _placements(
    g: SubgraphInfo, judged: list[Judgement], where: list[int | None], multiple_subgraphs: bool
) -> list[OpPlacement]:
    """Each op once placed: in an Edge TPU subgraph, cut off from it although mappable, or refused."""
    mappable = [j.mappable for j in judged]
    producer = {t: op.index for op in g.ops for t in op.outputs}
    cut_confidence, cut_off_anyway = _cut_confidence(g, judged, producer)
    placed = []
    for op, j, sub in zip(g.ops, judged, where):
        if sub is not None:
            placed.append(OpPlacement(op.index, op.name, op.version, Target.EDGETPU, MAPPED, None, j.confidence, sub))
        elif j.mappable:
            # The words depend on what feeds it (CUT_OFF_FED_BY_CPU).
            fed = [producer.get(t) for t in op.inputs]
            fed_by_cpu = any(p is not None and not mappable[p] for p in fed)
            words = CUT_OFF_FED_BY_CPU.get(op.name, MORE_THAN_ONE_SUBGRAPH) if fed_by_cpu else MORE_THAN_ONE_SUBGRAPH
            placed.append(
                OpPlacement(op.index, op.name, op.version, Target.CPU, words, CUT_OFF, cut_confidence[op.index], None)
            )
        else:  # an unsure refusal is still a sure CPU placement when the op is cut off anyway
            sure = j.confidence == CONFIRMED or (not multiple_subgraphs and cut_off_anyway[op.index])
            confidence = CONFIRMED if sure else UNCERTAIN
            placed.append(OpPlacement(op.index, op.name, op.version, Target.CPU, j.status, j.detail, confidence, None))
    return placed


def _edgetpu_param_bytes(g: SubgraphInfo, where: list[int | None]) -> int:
    """The bytes of the constant inputs of the Edge TPU ops (each buffer once): what the on-chip cache must hold."""
    tpu_ops = [i for i, s in enumerate(where) if s is not None]
    buffers = {
        t.buffer: t.buffer_bytes for i in tpu_ops for k in g.ops[i].inputs if k >= 0 and (t := g.tensors[k]).is_constant
    }
    return sum(buffers.values())


def _cache_problems(tpu_params: int, off_chip: int) -> list[CheckProblem]:
    """The problem of parameters beyond the ~8 MiB on-chip cache (none when they fit)."""
    if not off_chip:
        return []
    return [
        CheckProblem(
            "off_chip",
            f"about {mib(tpu_params)} of parameters for a ~8 MiB on-chip cache: ~{mib(off_chip)} "
            "would be streamed from host memory at every inference",
            "use a smaller or narrower model, or split it over several Edge TPUs with `edgekit compile --segments N`",
            (),
            False,
            CONFIRMED,
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


def quantize_gate(report: CheckResult, io_type: str, info: ModelInfo) -> list[CheckProblem]:
    """What makes a freshly quantized model unfit for the compiler, from its check.

    The fatal problems, float compute the converter left behind (a data-type problem), and model
    I/O that is not ``io_type``. Empty when the model is fit.
    """
    out = [p for p in report.problems if p.fatal]
    floats = [p for p in report.problems if p.code == "data_type"]
    names = {o.index: o.name for o in report.ops}
    # Name the float op itself, not the DEQUANTIZE/QUANTIZE the converter put around it.
    real = [p for p in floats if any(names.get(i) not in ("QUANTIZE", "DEQUANTIZE") for i in p.ops)]
    out += real or floats
    for t in info.inputs + info.outputs:
        if t.dtype != io_type:
            out.append(
                CheckProblem(
                    "io_type", f"I/O tensor {t.name!r} is {t.dtype}, not {io_type}", None, (), False, CONFIRMED
                )
            )
    return out


_PROBLEM_CODES = {
    NOT_SUPPORTED: "unsupported_op",
    DATA_TYPE: "data_type",
    VERSION: "op_version_not_mapped",
    NOT_CONSTANT: "not_constant",
    RANK: "rank",
    STRIDES: "limitation",
    UNSPECIFIED: "limitation",
}


def _which(idx: list[int]) -> str:
    """'op #3', or '7 ops (#3, #4, #5, #6, #8, ...)'."""
    if len(idx) == 1:
        return f"op #{idx[0]}"
    return f"{len(idx)} ops (#{', #'.join(map(str, idx[:5]))}" + (", ...)" if len(idx) > 5 else ")")


def _cpu_problems(placed: list[OpPlacement], judged: list[Judgement]) -> list[CheckProblem]:
    """One problem per (reason, detail) among the unmappable ops (the ones cut off are no problem of their own)."""
    grouped: dict[tuple[str, str, str | None, Confidence, str | None], list[int]] = {}
    for v, j in zip(placed, judged):
        if v.target == Target.CPU and not j.mappable:
            key = (v.reason, f"{v.name}: {v.detail or v.reason}", j.fix, v.confidence, j.code)
            grouped.setdefault(key, []).append(v.index)
    return [
        CheckProblem(
            code or _PROBLEM_CODES.get(reason, "limitation"),
            f"{_which(idx)} {text}",
            fix,
            tuple(idx),
            False,
            confidence,
        )
        for (reason, text, fix, confidence, code), idx in grouped.items()
    ]


def _doubt_problems(g: SubgraphInfo, judged: list[Judgement], where: list[int | None]) -> list[CheckProblem]:
    """One uncertain problem per rule that would refuse ops check maps as its best guess (the rule is untested,
    and rules of its kind were mostly contradicted once tested: :mod:`edgekit.edgetpu.compatibility.guess`)."""
    grouped: dict[tuple[str, str, str, str | None], list[int]] = {}
    for op, j in zip(g.ops, judged):
        if j.doubt is not None:
            rule_id, status, detail, fix = j.doubt
            grouped.setdefault((rule_id, f"{op.name}: {detail}", status, fix), []).append(op.index)
    out = []
    for (rule_id, text, status, fix), idx in grouped.items():
        placed = "mapped" if any(where[i] is not None for i in idx) else "placed"
        out.append(
            CheckProblem(
                "uncertain_rule",
                f"{_which(idx)} {text}: an untested rule ({rule_id}) says '{status}'; "
                f"{placed} as the best guess, since rules of its kind mostly failed once tested",
                fix,
                tuple(idx),
                False,
                UNCERTAIN,
            )
        )
    return out


def _advice(g: SubgraphInfo, verdicts: list[OpPlacement], judged: list[Judgement], multiple: bool) -> list[str]:
    """Name the op that breaks the graph and what to change."""
    out: list[str] = []
    mappable = [j.mappable for j in judged]
    cut = [v for v in verdicts if v.target == Target.CPU and mappable[v.index]]  # mappable, but cut off
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
            fix = next((v for v in cpu if judged[v.index].fix), None)
            if fix is not None:
                out.append(f"To map #{fix.index} {fix.name} too: {judged[fix.index].fix}.")
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
    if judged[first].fix:
        out.append(f"Change: {judged[first].fix}.")
    others = sorted(b for b in breakers if b != first)
    if others:
        out.append("Also unmappable before CPU-side ops: " + ", ".join(f"#{b} {verdicts[b].name}" for b in others[:5]))
    out.append(
        "Or compile with -a (edgetpu_compiler --enable_multiple_subgraphs, experimental; `edgekit check -a` "
        "predicts it) to map the later ops into further Edge TPU subgraphs; measure latency with and "
        "without it."
    )
    return out


def _check_compiled(info: ModelInfo, min_runtime: int) -> CheckResult:
    g = info.main
    placed = []
    n_sub = 0
    for op in g.ops:
        if op.custom_code == EDGETPU_CUSTOM_OP:
            made = "an Edge TPU subgraph made by edgetpu_compiler"
            placed.append(
                OpPlacement(op.index, EDGETPU_CUSTOM_OP, op.version, Target.EDGETPU, MAPPED, made, CONFIRMED, n_sub)
            )
            n_sub += 1
        else:
            name = op.custom_code if op.name == "CUSTOM" and op.custom_code else op.name
            left = "Left on the CPU by the compiler"
            placed.append(OpPlacement(op.index, name, op.version, Target.CPU, left, None, CONFIRMED, None))
    cpu = [v for v in placed if v.target == Target.CPU]
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
    hint = "check or compile the model from before edgetpu_compiler (the file without _edgetpu)"
    problems = [CheckProblem("already_compiled", msg, hint, (), False, CONFIRMED)]
    advice = [msg[0].upper() + msg[1:] + "."]
    return _result(info, verdict, placed, n_sub, (None, None), problems, advice, min_runtime, n_sub > 1, True)


def _architecture_advice(info: ModelInfo, verdicts: list[OpPlacement], verdict: str) -> list[str]:
    """The advice table's entries (:mod:`edgekit.edgetpu.advice`, each with its evidence) for the architecture
    the .tflite shows: its op types, its tensor names (Keras layer names survive conversion), the ops on the CPU."""
    from edgekit.edgetpu import advice as table

    facts = table.tflite_facts(info, cpu_indices=frozenset(v.index for v in verdicts if v.target == "cpu"))
    return [a.line().split(": ", 1)[1] for a in table.placement_advice(facts, verdict)]
