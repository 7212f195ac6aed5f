"""Architecture-aware advice for the commonest Edge TPU failures, from a table with evidence.

Generic advice ("replace it with a supported op", "check your calibration data") was what quantize
said for a Keras MobileNetV3 (hard-swish on the CPU, where ``minimalistic=True`` is the known fix)
and for an EfficientNet that lost accuracy in int8 (issue 24). Like the rules of
:mod:`edgekit.converters.compatibility`, each entry of :data:`ARCH_RULES` says what it recognises,
what to do, and the public evidence it rests on (``report:<key>`` in
tests/fixtures/evidence/REPORTS.tsv, checked by tests/converters/test_evidence.py).

An architecture is recognised from the Keras model (model and layer names, layer classes, activation
names) or, for a model without one, from the .tflite (op types, tensor names, which keep Keras's layer
names). For an int8 accuracy loss the advice names the layers int8 loses most in (each op's own error,
:func:`edgekit.converters.reference.layer_errors`) and the converter settings that were tried.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Iterable

from edgekit.records import Record
from edgekit.results.evaluate import LayerError

# Evidence (report keys in tests/fixtures/evidence/REPORTS.tsv).
EV_MNV3_MINIMALISTIC = ("report:google-coral/edgetpu#353", "report:coral-supported-ops")
EV_HARD_SWISH_LEAKY = ("report:google-coral/edgetpu#272", "report:coral-supported-ops")
EV_LEAKY = ("report:google-coral/edgetpu#272", "report:google-coral/edgetpu#597")
EV_EFFICIENTNET_LITE = ("report:efficientnet-lite",)


class AdviceKind(str, Enum):
    """What the advice is about."""

    PLACEMENT = "placement"   # ops that keep the model (partly) off the Edge TPU
    ACCURACY = "accuracy"     # the int8 model losing accuracy against the float one


@dataclass(frozen=True)
class ModelFacts:
    """What the advice table looks at: lower-case names (model, layers, tensors), layer classes, activations, ops."""

    names: frozenset[str] = frozenset()
    classes: frozenset[str] = frozenset()
    activations: frozenset[str] = frozenset()
    ops: frozenset[str] = frozenset()          # TFLite op types in the converted model
    cpu_ops: frozenset[str] = frozenset()      # of those, the ones check puts on the CPU

    def named(self, *fragments: str) -> bool:
        return any(f in n for n in self.names for f in fragments)

    def merged(self, other: "ModelFacts") -> "ModelFacts":
        return ModelFacts(self.names | other.names, self.classes | other.classes,
                          self.activations | other.activations, self.ops | other.ops, self.cpu_ops | other.cpu_ops)


@dataclass(frozen=True)
class ArchRule:
    """One entry of the advice table: when it applies, what to do, and the evidence."""

    key: str
    kind: AdviceKind
    applies: Any          # Callable[[ModelFacts], str | None]: what was recognised, or None
    advice: str
    evidence: tuple[str, ...]


def _mobilenet_v3(f: ModelFacts) -> str | None:
    if f.named("mobilenetv3", "mobilenet_v3"):
        return "a MobileNetV3 (by its name)"
    if ("HARD_SWISH" in f.ops or "hard_swish" in f.activations) and f.named("expanded_conv"):
        return "a MobileNetV3 (hard-swish in expanded_conv blocks)"
    return None


def _hard_swish(f: ModelFacts) -> str | None:
    if "HARD_SWISH" in f.cpu_ops:
        return "HARD_SWISH ops on the CPU"
    return "hard-swish activations" if {"hard_swish", "hard_silu"} & f.activations else None


def _leaky_relu(f: ModelFacts) -> str | None:
    if "LEAKY_RELU" in f.cpu_ops:
        return "LEAKY_RELU ops on the CPU"
    return "LeakyReLU layers" if "LeakyReLU" in f.classes or "leaky_relu" in f.activations else None


def _efficientnet(f: ModelFacts) -> str | None:
    if f.named("efficientnet") and not f.named("lite", "edgetpu"):
        return "an EfficientNet (by its name)"
    if f.named("block1a_se_") and f.named("stem_conv"):
        return "an EfficientNet (squeeze-excite blocks, stem_conv)"
    return None


def _silu(f: ModelFacts) -> str | None:
    return "SiLU/swish activations" if {"swish", "silu"} & f.activations else None


#: The table, most specific first: an entry whose advice another already gave for the same model is
#: skipped (MobileNetV3's includes hard-swish's).
ARCH_RULES: tuple[ArchRule, ...] = (
    ArchRule("mobilenet_v3", AdviceKind.PLACEMENT, _mobilenet_v3,
             "build it with keras.applications.MobileNetV3Small/Large(..., minimalistic=True) and fine-tune again: "
             "the minimalistic variants use ReLU instead of hard-swish (HARD_SWISH stays on the CPU and cuts the "
             "Edge TPU graph) and no squeeze-excite; Coral answered exactly this for a Keras MobileNetV3",
             EV_MNV3_MINIMALISTIC),
    ArchRule("hard_swish", AdviceKind.PLACEMENT, _hard_swish,
             "replace hard-swish with ReLU6 (or ReLU) and retrain: the Edge TPU has no HARD_SWISH, which runs on "
             "the CPU and cuts the Edge TPU graph at each use", EV_HARD_SWISH_LEAKY),
    ArchRule("leaky_relu", AdviceKind.PLACEMENT, _leaky_relu,
             "replace LeakyReLU with ReLU and retrain (Coral's advice): the Edge TPU has no LEAKY_RELU, which runs "
             "on the CPU and cuts the Edge TPU graph at each use", EV_LEAKY),
    ArchRule("efficientnet", AdviceKind.ACCURACY, _efficientnet,
             "use EfficientNet-Lite (lite0-lite4) instead: Google made it for post-training quantization and the "
             "Edge TPU by removing squeeze-excite and replacing every swish with ReLU6, the parts of EfficientNet "
             "int8 handles worst", EV_EFFICIENTNET_LITE),
    ArchRule("silu", AdviceKind.ACCURACY, _silu,
             "SiLU/swish activations widen the int8 ranges of the layers they feed; ReLU6 (as EfficientNet-Lite "
             "did) is the quantization-friendly replacement", EV_EFFICIENTNET_LITE),
)


@dataclass(frozen=True)
class Advice(Record):
    """One piece of advice: what it is about, what was found, what to do, and why it can be trusted."""

    kind: AdviceKind
    key: str
    found: str
    text: str
    evidence: tuple[str, ...] = ()

    def line(self) -> str:
        cited = f" [evidence: {', '.join(e.split(':', 1)[1] for e in self.evidence)}]" if self.evidence else ""
        return f"Advice ({self.kind.value}): {self.found}: {self.text}{cited}"


# ------------------------------------------------------------------------------------------ facts
def keras_facts(model: Any) -> ModelFacts:
    """Names, layer classes and activation names of a Keras model, nested models included (any other object:
    nothing)."""
    names: set[str] = set()
    classes: set[str] = set()
    activations: set[str] = set()
    seen: set[int] = set()

    def walk(m: Any) -> None:
        if id(m) in seen:
            return
        seen.add(id(m))
        names.add(str(getattr(m, "name", "")).lower())
        classes.add(type(m).__name__)
        act = getattr(m, "activation", None)
        act_name = getattr(act, "__name__", None) or (act if isinstance(act, str) else None)
        if act_name:
            activations.add(str(act_name).lower())
        for layer in getattr(m, "layers", None) or ():
            walk(layer)

    if hasattr(model, "layers"):
        walk(model)
    names.discard("")
    return ModelFacts(frozenset(names), frozenset(classes), frozenset(activations))


def tflite_facts(info: Any, check: Any = None) -> ModelFacts:
    """Op types and tensor names of a .tflite (:class:`edgekit.tflite_model.ModelInfo`), and the op types a
    check report puts on the CPU."""
    ops = frozenset(op.name for op in info.main.ops)
    names = frozenset(str(t.name).lower() for t in info.main.tensors)
    cpu = frozenset(o.name for o in check.ops if o.target == "cpu") if check is not None else frozenset()
    return ModelFacts(names=names, ops=ops, cpu_ops=cpu)


# ------------------------------------------------------------------------------------------ advice
def architecture_advice(facts: ModelFacts, kinds: Iterable[AdviceKind] = tuple(AdviceKind)) -> list[Advice]:
    """The table's advice that applies to ``facts`` (of the ``kinds`` asked for), most specific first."""
    wanted = set(kinds)
    out: list[Advice] = []
    for rule in ARCH_RULES:
        if rule.kind not in wanted:
            continue
        found = rule.applies(facts)
        if not found:
            continue
        if rule.key == "hard_swish" and any(a.key == "mobilenet_v3" for a in out):
            continue  # MobileNetV3's advice already says it
        if rule.key == "silu" and any(a.key == "efficientnet" for a in out):
            continue  # EfficientNet's advice already says it
        out.append(Advice(rule.kind, rule.key, found, rule.advice, rule.evidence))
    return out


def placement_advice(facts: ModelFacts, verdict: str) -> list[Advice]:
    """Advice for a model check does not rate FULL (nothing for a fully mapped one)."""
    return [] if verdict == "full" else architecture_advice(facts, [AdviceKind.PLACEMENT])


WORST_LAYERS = 3


def accuracy_advice(facts: ModelFacts, layers: list[LayerError] | None, layers_error: str | None,
                    remedies_tried: list[str]) -> list[Advice]:
    """Advice for an int8 accuracy loss: the architecture's known remedy, the layers int8 loses most in
    (rows of :func:`edgekit.converters.reference.layer_errors`, worst first) and the converter settings tried."""
    out = architecture_advice(facts, [AdviceKind.ACCURACY])
    if layers:
        worst = "; ".join(f"{r.op} {r.tensor!r} (error {r.relative_rms_error:.0%} of its signal)"
                          for r in layers[:WORST_LAYERS])
        out.append(Advice(AdviceKind.ACCURACY, "worst_layers", f"the layers int8 loses most in: {worst}",
                          "a layer whose int8 error is a large share of its signal has outlier weights or "
                          "activations: retrain it with a bounded activation (ReLU6) or BatchNorm after it, or "
                          "calibrate on images that cover its range; `edgekit evaluate MODEL --reference "
                          "KERAS_MODEL` shows the full table"))
    elif layers_error:
        out.append(Advice(AdviceKind.ACCURACY, "worst_layers", "per-layer errors unavailable",
                          f"TensorFlow's quantization debugger failed ({layers_error})"))
    if remedies_tried:
        out.append(Advice(AdviceKind.ACCURACY, "remedies", "converter settings tried: " + ", ".join(remedies_tried),
                          "the first setting that passed the Edge TPU checks was kept (the others are tried only "
                          "when a check fails, not for accuracy); beyond the architecture and the calibration data, "
                          "quantization-aware training is the remedy"))
    return out
