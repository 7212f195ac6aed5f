"""Architecture-aware advice for the commonest Edge TPU failures, from a table with evidence.

Generic advice ("replace it with a supported op", "check your calibration data") was what quantize
said for a Keras MobileNetV3 (hard-swish on the CPU, where ``minimalistic=True`` is the known fix)
and for an EfficientNet that lost accuracy in int8 (issue 24). Like the rules of
:mod:`edgekit.edgetpu.compatibility`, each entry of :data:`ARCH_RULES` says what it recognises,
what to do, and the public evidence it rests on (``report:<key>`` in
tests/fixtures/evidence/REPORTS.tsv, checked by tests/converters/test_evidence.py).

An architecture is recognised from the Keras model (model and layer names, layer classes, activation
names) or, for a model without one, from the .tflite (op types, tensor names, which keep Keras's layer
names). For an int8 accuracy loss the advice names the layers int8 loses most in (each op's own error,
:func:`edgekit.converters.reference.layer_errors`) and the converter settings that were tried.

Advice is for the source the model came from (:func:`model_source`: Ultralytics' packed metadata, the
tensor names litert-torch, onnx2tf and Keras leave): a PyTorch model gets PyTorch's words, not Keras's
(:func:`for_source`), and no advice names a command that cannot take the model (``edgekit quantize`` takes
a Keras model, or an ONNX model where this edgekit has the ONNX route; never a .tflite).
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from edgekit.results.advice import Advice, AdviceKind
from edgekit.results.evaluate import LayerError

# Evidence (report keys in tests/fixtures/evidence/REPORTS.tsv).
EV_MNV3_MINIMALISTIC = ("report:google-coral/edgetpu#353", "report:coral-supported-ops")
EV_HARD_SWISH_LEAKY = ("report:google-coral/edgetpu#272", "report:coral-supported-ops")
EV_LEAKY = ("report:google-coral/edgetpu#272", "report:google-coral/edgetpu#597")
EV_EFFICIENTNET_LITE = ("report:efficientnet-lite",)
# BATCH_MATMUL and TILE are not in Coral's supported-operations table (so never on the Edge TPU); what
# TensorFlow 2.21 lowers UpSampling2D and Resizing to was seen by converting them (tests/converters/
# test_source_advice.py converts each and checks it).
EV_NOT_SUPPORTED = ("report:coral-supported-ops",)
# A TRANSPOSE larger than the size limit check draws from real compiles stays on the CPU (compatibility.common).
EV_INPUT_TRANSPOSE = ("report:jveitchmichaelis/edgetpu-yolo",)


class Source(str, Enum):
    """Where a .tflite came from, as its file shows it (:func:`model_source`)."""

    KERAS = "keras"  # Keras layer names in the tensors, or edgekit's record
    ULTRALYTICS = "ultralytics"  # Ultralytics' metadata.json packed after the model
    LITERT_TORCH = "litert-torch"  # PyTorch module paths in the tensor names (litert-torch / ai-edge-torch)
    ONNX2TF = "onnx2tf"  # onnx2tf's tf.* op layers in the tensor names
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class ModelFacts:
    """What the advice table looks at: lower-case names (model, layers, tensors), layer classes, activations, ops."""

    names: frozenset[str] = frozenset()
    classes: frozenset[str] = frozenset()
    activations: frozenset[str] = frozenset()
    ops: frozenset[str] = frozenset()  # TFLite op types in the converted model
    cpu_ops: frozenset[str] = frozenset()  # of those, the ones check puts on the CPU
    source: Source = Source.UNKNOWN  # where the .tflite came from (:func:`model_source`)
    found: tuple[tuple[str, str], ...] = ()  # (pattern, where): lowering patterns seen in the .tflite's graph

    def named(self, *fragments: str) -> bool:
        return any(f in n for n in self.names for f in fragments)

    def where(self, pattern: str) -> list[str]:
        """Where the graph shows ``pattern`` (``attention``, ``tile``, ``input_transpose``), in graph order."""
        return [w for p, w in self.found if p == pattern]

    def merged(self, other: ModelFacts) -> ModelFacts:
        return ModelFacts(
            self.names | other.names,
            self.classes | other.classes,
            self.activations | other.activations,
            self.ops | other.ops,
            self.cpu_ops | other.cpu_ops,
            self.source if self.source != Source.UNKNOWN else other.source,
            self.found + tuple(x for x in other.found if x not in self.found),
        )


@dataclass(frozen=True)
class ArchRule:
    """One entry of the advice table: when it applies, what to do, and the evidence."""

    key: str
    kind: AdviceKind
    applies: Any  # Callable[[ModelFacts], str | None]: what was recognised, or None
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


def _attention(f: ModelFacts) -> str | None:
    hits = f.where("attention")
    if not hits:
        return None
    what = (
        "YOLO11/YOLO26's C2PSA attention block (an Ultralytics model)"
        if f.source == Source.ULTRALYTICS
        else "an attention block"
    )
    return f"BATCH_MATMUL of two activations ({_listed(hits)}): {what}"


def _upsampling_tile(f: ModelFacts) -> str | None:
    hits = f.where("tile")
    return (
        f"TILE from UpSampling2D {_listed(hits)} (TensorFlow lowers its nearest repeat to RESHAPE + TILE)"
        if hits
        else None
    )


def _input_transpose(f: ModelFacts) -> str | None:
    hits = f.where("input_transpose")
    if not hits:
        return None
    by = {
        Source.LITERT_TORCH: " (litert-torch keeps PyTorch's NCHW input)",
        Source.ULTRALYTICS: " (Ultralytics' LiteRT export keeps PyTorch's NCHW input)",
    }.get(f.source, "")
    return f"a TRANSPOSE of the channels-first input {_listed(hits)} on the CPU{by}"


def _listed(items: list[str], most: int = 4) -> str:
    return ", ".join(items[:most]) + (f" and {len(items) - most} more" if len(items) > most else "")


#: The table, most specific first: an entry whose advice another already gave for the same model is
#: skipped (MobileNetV3's includes hard-swish's).
ARCH_RULES: tuple[ArchRule, ...] = (
    ArchRule(
        "mobilenet_v3",
        AdviceKind.PLACEMENT,
        _mobilenet_v3,
        "build it with keras.applications.MobileNetV3Small/Large(..., minimalistic=True) and fine-tune again: "
        "the minimalistic variants use ReLU instead of hard-swish (HARD_SWISH stays on the CPU and cuts the "
        "Edge TPU graph) and no squeeze-excite; Coral answered exactly this for a Keras MobileNetV3",
        EV_MNV3_MINIMALISTIC,
    ),
    ArchRule(
        "hard_swish",
        AdviceKind.PLACEMENT,
        _hard_swish,
        "replace hard-swish with ReLU6 (or ReLU) and retrain: the Edge TPU has no HARD_SWISH, which runs on "
        "the CPU and cuts the Edge TPU graph at each use",
        EV_HARD_SWISH_LEAKY,
    ),
    ArchRule(
        "leaky_relu",
        AdviceKind.PLACEMENT,
        _leaky_relu,
        "replace LeakyReLU with ReLU and retrain (Coral's advice): the Edge TPU has no LEAKY_RELU, which runs "
        "on the CPU and cuts the Edge TPU graph at each use",
        EV_LEAKY,
    ),
    ArchRule(
        "attention",
        AdviceKind.PLACEMENT,
        _attention,
        "the Edge TPU has no BATCH_MATMUL: the graph is cut at the block's first product, and every op that "
        "depends on it (the neck and the detection head, for a YOLO) runs on the CPU. On a Coral use a "
        "detector without the attention block: YOLOv8 or YOLOv5u (all convolution; Ultralytics exports them the "
        "same way), or a model trained without C2PSA; for another model, replace the attention with "
        "convolutions",
        EV_NOT_SUPPORTED,
    ),
    ArchRule(
        "upsampling_tile",
        AdviceKind.PLACEMENT,
        _upsampling_tile,
        'replace each UpSampling2D(size=s) with keras.layers.Resizing(s*H, s*W, interpolation="nearest"), '
        "which TensorFlow lowers to RESIZE_NEAREST_NEIGHBOR (mapped to the Edge TPU) and computes the same "
        'nearest repeat, so the trained weights still fit; UpSampling2D(interpolation="nearest") is the '
        'default and lowers to TILE too (TensorFlow 2.21), while UpSampling2D(interpolation="bilinear") '
        "becomes RESIZE_BILINEAR (mapped, but another operation: retrain with it)",
        EV_NOT_SUPPORTED,
    ),
    ArchRule(
        "input_transpose",
        AdviceKind.PLACEMENT,
        _input_transpose,
        "export the model with a channels-last input [1, H, W, C], so that no TRANSPOSE precedes the first "
        "convolution: onnx2tf's conversions of a PyTorch model take NHWC",
        EV_INPUT_TRANSPOSE,
    ),
    ArchRule(
        "efficientnet",
        AdviceKind.ACCURACY,
        _efficientnet,
        "use EfficientNet-Lite (lite0-lite4) instead: Google made it for post-training quantization and the "
        "Edge TPU by removing squeeze-excite and replacing every swish with ReLU6, the parts of EfficientNet "
        "int8 handles worst",
        EV_EFFICIENTNET_LITE,
    ),
    ArchRule(
        "silu",
        AdviceKind.ACCURACY,
        _silu,
        "SiLU/swish activations widen the int8 ranges of the layers they feed; ReLU6 (as EfficientNet-Lite "
        "did) is the quantization-friendly replacement",
        EV_EFFICIENTNET_LITE,
    ),
)


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


def tflite_facts(info: Any, check: Any = None, cpu_indices: frozenset[int] | None = None) -> ModelFacts:
    """Op types and tensor names of a .tflite (:class:`edgekit.tflite.model.ModelInfo`), the op types a check
    report (or ``cpu_indices``, the ops check puts on the CPU) places on the CPU, where the model came from,
    and the lowering patterns its graph shows."""
    ops = frozenset(op.name for op in info.main.ops)
    names = frozenset(str(t.name).lower() for t in info.main.tensors)
    if check is not None:
        cpu_indices = frozenset(o.index for o in check.ops if o.target == "cpu")
    cpu = frozenset(op.name for op in info.main.ops if op.index in cpu_indices) if cpu_indices else frozenset()
    return ModelFacts(
        names=names,
        ops=ops,
        cpu_ops=cpu,
        source=model_source(info)[0],
        found=_patterns(info, cpu_indices or frozenset()),
    )


# Keras's UpSampling2D repeats with ops.repeat: its TILE's tensor is named MODEL/LAYER/Repeat[_1]/Tile. Keras 3
# traces each layer under its name plus a counter (layer 'up_sampling2d' in model 'functional' becomes
# 'functional_1/up_sampling2d_1/...', 'up_sampling2d_1' becomes 'up_sampling2d_1_2': seen converting with TF 2.21).
_REPEAT = re.compile(r"^(?:(?P<model>[^/]+)/)?(?:[^/]+/)*?(?P<layer>[^/]+)/Repeat(?:_\d+)?/")


def _repeat_layer(tensor_name: str) -> str | None:
    """The Keras layer whose repeat (UpSampling2D's nearest) made a TILE with this output, by its tensor name."""
    m = _REPEAT.match(tensor_name)
    if not m:
        return None
    layer = m.group("layer")
    if m.group("model") and re.search(r"_\d+$", m.group("model")):  # Keras 3's traced names: drop the counter
        layer = re.sub(r"_\d+$", "", layer)
    return layer


def _patterns(info: Any, cpu_indices: frozenset[int]) -> tuple[tuple[str, str], ...]:
    """(pattern, where) of what the graph shows: BATCH_MATMUL of two activations (``attention``), TILE under an
    UpSampling2D layer (``tile``: the layer's name, from its tensor names), a TRANSPOSE on the CPU of a
    channels-first image input (``input_transpose``)."""
    g = info.main
    out: list[tuple[str, str]] = []
    for op in g.ops:
        ins = [g.tensors[i] for i in op.inputs if i >= 0]
        names = [str(g.tensors[i].name) for i in op.outputs if i >= 0]
        if op.name == "BATCH_MATMUL" and len(ins) >= 2 and not any(t.is_constant for t in ins[:2]):
            out.append(("attention", f"#{op.index}"))
        elif op.name == "TILE":
            layer = next((found for n in names for found in [_repeat_layer(n)] if found), None)
            if layer and ("tile", repr(layer)) not in out:
                out.append(("tile", repr(layer)))
        elif (
            op.name == "TRANSPOSE"
            and op.index in cpu_indices
            and ins
            and ins[0].index in g.inputs
            and len(ins[0].shape) == 4
            and ins[0].shape[1] in (1, 3)
            and ins[0].shape[3] not in (1, 3)
        ):
            out.append(("input_transpose", f"#{op.index} {list(ins[0].shape)}"))
    return tuple(out)


def model_source(info: Any) -> tuple[Source, str]:
    """(where the .tflite came from, what in the file says so): Ultralytics' packed metadata.json, edgekit's
    record, then the tensor names each converter leaves (litert-torch: PyTorch module paths; onnx2tf: its
    ``tf.nn.*``/``tf.math.*`` op layers; Keras: its layer names)."""
    from edgekit.tflite.packed_zip import appended_zip, ultralytics_metadata

    packed = appended_zip(info.path) if getattr(info, "path", None) else {}
    meta = ultralytics_metadata(packed)
    if meta is not None:
        return Source.ULTRALYTICS, f"Ultralytics {meta.version}'s metadata packed in the model"
    if any(k.startswith("edgekit") for k in getattr(info, "metadata", {}) or {}):
        return Source.KERAS, "edgekit quantize's record in the model"
    names = [str(t.name) for t in info.main.tensors]
    if any("torch.nn.modules." in n or "torch.nn.functional." in n for n in names):
        return Source.LITERT_TORCH, "PyTorch module paths in its tensor names (litert-torch)"
    if any(re.search(r"(?:^|/)tf\.(?:nn|math|compat\.v1)\.", n) for n in names):
        return Source.ONNX2TF, "onnx2tf's tf.nn/tf.math op layers in its tensor names"
    if any(
        re.search(
            r"(?:^|/)(?:conv2d|dense|depthwise_conv2d|batch_normalization|up_sampling2d|sequential|"
            r"functional)(?:_\d+)?(?:/|$)",
            n.lower(),
        )
        for n in names
    ):
        return Source.KERAS, "Keras layer names in its tensor names"
    return Source.UNKNOWN, "no exporter's metadata or naming recognised"


def _onnx_route() -> bool:
    """Whether this edgekit's quantize takes an ONNX model (the ONNX route's module is installed)."""
    return importlib.util.find_spec("edgekit.converters.onnx_io") is not None


def quantize_remedy(source: Source) -> str | None:
    """What to run instead of ``edgekit quantize`` (which takes the model's source, never a .tflite) to get a
    full-int8 model with integer I/O, for a model from ``source``; None for a Keras model (quantize takes it)."""
    onnx = " or `edgekit quantize model.onnx` on its ONNX export" if _onnx_route() else ""
    return {
        Source.ULTRALYTICS: "re-export it with Ultralytics' format=edgetpu (`yolo export model=best.pt "
        "format=edgetpu`: a full-int8 model with int8 I/O, and its compiled twin)"
        + (", or export format=onnx and run `edgekit quantize model.onnx`" if onnx else ""),
        Source.LITERT_TORCH: "export the PyTorch model to ONNX and convert it with `onnx2tf -oiqt`, taking its "
        "*_full_integer_quant.tflite (int8 I/O, NHWC)" + onnx,
        Source.ONNX2TF: "take onnx2tf's *_full_integer_quant.tflite (int8 I/O), which `onnx2tf -oiqt` writes beside "
        "its float-I/O *_integer_quant.tflite" + onnx,
        Source.UNKNOWN: "re-convert its source model full-int8 with integer I/O (a Keras model: `edgekit quantize "
        "model.keras`; quantize does not take a .tflite)",
    }.get(source)


_QUANTIZE_CLAUSE = re.compile(r"(?:\(\s*)?`edgekit quantize`(?: (?:makes them|does this|checks them))?(?:\s*\))?")
_FLATTEN = "Flatten (or Reshape to 2-D) before the Dense layer"
_DENSE_ND = "a Dense layer applied to a 3-D or 4-D input"
_PYTORCH = (Source.LITERT_TORCH, Source.ONNX2TF, Source.ULTRALYTICS)


def for_source(text: str | None, source: Source) -> str | None:
    """``text`` (a fix, a hint, a line of advice written for a Keras user) in the words of the model's ``source``:
    no ``edgekit quantize`` for a model quantize cannot take, and PyTorch's layers for a PyTorch model."""
    if not text or source == Source.KERAS:
        return text
    remedy = quantize_remedy(source)
    if remedy and "`edgekit quantize`" in text and remedy not in text:
        text = _QUANTIZE_CLAUSE.sub(lambda _m: remedy, text)
    if source in _PYTORCH:
        text = text.replace(
            _FLATTEN,
            "flatten to 2-D before the nn.Linear in PyTorch (torch.flatten(x, 1)): the "
            "converter keeps the input's dimensions (keep_num_dims) for an nn.Linear on a 3-D or "
            "4-D tensor",
        ).replace(_DENSE_ND, "a PyTorch nn.Linear applied to a 3-D or 4-D tensor")
    return text


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


def accuracy_advice(
    facts: ModelFacts, layers: list[LayerError] | None, layers_error: str | None, remedies_tried: list[str]
) -> list[Advice]:
    """Advice for an int8 accuracy loss: the architecture's known remedy, the layers int8 loses most in
    (rows of :func:`edgekit.converters.reference.layer_errors`, worst first) and the converter settings tried."""
    out = architecture_advice(facts, [AdviceKind.ACCURACY])
    if layers:
        worst = "; ".join(
            f"{r.op} {r.tensor!r} (error {r.relative_rms_error:.0%} of its signal)" for r in layers[:WORST_LAYERS]
        )
        out.append(
            Advice(
                AdviceKind.ACCURACY,
                "worst_layers",
                f"the layers int8 loses most in: {worst}",
                "a layer whose int8 error is a large share of its signal has outlier weights or "
                "activations: retrain it with a bounded activation (ReLU6) or BatchNorm after it, or "
                "calibrate on images that cover its range; `edgekit evaluate MODEL --reference "
                "KERAS_MODEL` shows the full table",
            )
        )
    elif layers_error:
        out.append(
            Advice(
                AdviceKind.ACCURACY,
                "worst_layers",
                "per-layer errors unavailable",
                f"TensorFlow's quantization debugger failed ({layers_error})",
            )
        )
    if remedies_tried:
        out.append(
            Advice(
                AdviceKind.ACCURACY,
                "remedies",
                "converter settings tried: " + ", ".join(remedies_tried),
                "the first setting that passed the Edge TPU checks was kept (the others are tried only "
                "when a check fails, not for accuracy); beyond the architecture and the calibration data, "
                "quantization-aware training is the remedy",
            )
        )
    return out
