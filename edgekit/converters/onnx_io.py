"""Load an ONNX image model (PyTorch's ``torch.onnx.export``, Ultralytics' ``format=onnx``) for quantize.

Two models come out of one file: the **reference**, the original ONNX graph run by ONNX Runtime (what the
user trained: the preprocessing search, the agreement and accuracy are measured on it), and the
**translation**, edgekit's own channels-last TensorFlow function of the same graph (:mod:`onnx_translate`),
which TensorFlow's int8 converter quantizes. The translation is checked against the reference on the real
calibration inputs before any int8 work (:func:`check_translation`).

Why a translator of edgekit's own (docs/commands/quantize.md, "ONNX models"): onnx2tf pins TensorFlow and onnx
versions edgekit's TensorFlow cannot live beside and downloads a calibration file at export time; onnx-tf is
unmaintained. ONNX is protobuf: reading it runs no code from the file (a PyTorch ``.pt`` is a pickle, refused).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edgekit.converters import keras_io
from edgekit.errors import ConversionError, InputError, MissingDependencyError, UsageError, first_line, regular_file
from edgekit.results.quantize import ModelOutput

ONNX_SUFFIX = ".onnx"
PYTORCH_SUFFIXES = (".pt", ".pth", ".pt2", ".ckpt")
#: The translation may differ from ONNX Runtime by this much (max |difference| over the calibration samples),
#: relative to the largest |output| of the reference (float32 conv sums in another order differ by ~1e-6).
TRANSLATION_TOLERANCE = 1e-3
TRANSLATION_SAMPLES = 32
ORIGIN_EXPORTER = "the exporter's metadata in the ONNX file"


def require_onnx() -> tuple[Any, Any]:
    """(onnx, onnxruntime), or MissingDependencyError saying which extra to install."""
    try:
        import onnx
        import onnxruntime
    except ImportError as exc:
        text = str(exc)
        missing = exc.name or (text.split("'")[1] if text.count("'") >= 2 else "one of them")
        raise MissingDependencyError(
            f"an ONNX model needs the onnx and onnxruntime packages ({missing} is missing)",
            "pip install onnx onnxruntime, or '.[onnx]' in an edgekit checkout",
        ) from None
    return onnx, onnxruntime


def refuse_pytorch(path: Path, trust_model: bool) -> None:
    """A PyTorch checkpoint is a pickle: loading it runs code from the file. Say what to do instead."""
    why = (
        "loading it (torch.load) unpickles it, which can run any code the file holds"
        if not trust_model
        else "edgekit converts ONNX, not PyTorch modules, even with --trust-model"
    )
    raise InputError(
        f"{path} is a PyTorch file: {why}",
        "export it to ONNX in the Python that trained it: torch.onnx.export(model.eval(), "
        "torch.zeros(1, 3, H, W), 'model.onnx', opset_version=13), then `edgekit quantize model.onnx`",
    )


def read_model(path: Path, shown: str | None = None) -> Any:
    """The ModelProto in ``path`` (external data only from beside it), or InputError naming ``shown``."""
    onnx, _ = require_onnx()
    shown = shown or str(path)
    regular_file(path)
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # DecodeError and friends: not ONNX
        raise InputError(
            f"{shown}: not a valid ONNX model ({first_line(exc, 200)})",
            "export it again (torch.onnx.export), or copy it again",
        ) from None
    if not model.graph.node:
        raise InputError(
            f"{shown}: the ONNX file has no graph (damaged, or not an ONNX model)",
            "export it again with torch.onnx.export",
        )
    from onnx.external_data_helper import load_external_data_for_model, uses_external_data

    external = [t for t in model.graph.initializer if uses_external_data(t)]
    for t in external:
        location = next((e.value for e in t.external_data if e.key == "location"), "")
        target = (path.parent / location).resolve()
        if Path(location).is_absolute() or path.parent.resolve() not in target.parents:
            raise InputError(
                f"{shown}: weight {t.name!r} points outside the model's folder ({location})",
                "keep the external data file beside the .onnx file, or export without external data",
            )
    if external:
        load_external_data_for_model(model, str(path.parent))
    return model


@dataclass
class OnnxInput:
    """The graph's image input: its name, whether it is channels-first, and (height, width, channels)."""

    name: str
    nchw: bool
    hwc: tuple[int, int, int]


def fix_input(model: Any, input_size: tuple[int, int] | None, shown: str) -> tuple[OnnxInput, list[str]]:
    """Fix the image input's batch to 1 (and dynamic height/width to ``input_size``) in ``model``; (input, notes)."""
    initializers = {t.name for t in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in initializers]
    if len(inputs) != 1:
        raise ConversionError(
            f"{shown}: the model has {len(inputs)} inputs; edgekit quantize handles one image input",
            "export the image model alone, with one (1, 3, H, W) input",
        )
    dims = inputs[0].type.tensor_type.shape.dim
    if len(dims) != 4:
        raise ConversionError(
            f"{shown}: input shape of rank {len(dims)} is not an image batch (1, C, H, W)",
            "export the model with one (1, 3, H, W) input",
        )
    values = [d.dim_value if d.HasField("dim_value") else None for d in dims]
    nchw = values[1] in (1, 3) or values[3] not in (1, 3)
    c = values[1] if nchw else values[3]
    if c not in (1, 3):
        raise ConversionError(
            f"{shown}: the input has {c or 'a dynamic number of'} channels; edgekit takes 1 or 3",
            "export the model with a (1, 3, H, W) input",
        )
    notes = []
    if values[0] not in (None, 1):
        raise ConversionError(
            f"{shown}: the input has a fixed batch of {values[0]}; the Edge TPU needs 1",
            "export it again with a batch of 1 (torch.zeros(1, 3, H, W)) or a dynamic batch",
        )
    if values[0] is None:
        notes.append("the ONNX model's batch is dynamic: fixed to 1 (the Edge TPU runs one image at a time)")
    hw_axes = (2, 3) if nchw else (1, 2)
    h, w = (values[a] for a in hw_axes)
    if input_size:
        if (w and w != input_size[0]) or (h and h != input_size[1]):
            raise UsageError(
                f"--input-size {input_size[0]}x{input_size[1]} differs from the model's fixed input {w}x{h}",
                "leave --input-size out for this model",
            )
        w, h = input_size
    elif not (h and w):
        raise UsageError(
            f"{shown}: the ONNX model's input height and width are dynamic",
            "choose the size to compile for: --input-size 224x224 (width x height)",
        )
    for axis, value in zip((0, *hw_axes), (1, h, w)):
        dims[axis].Clear()
        dims[axis].dim_value = value
    return OnnxInput(inputs[0].name, nchw, (int(h), int(w), int(c))), notes


def load(
    path: str | Path,
    input_size: tuple[int, int] | None = None,
    output: str | None = None,
    verbose: bool = False,
    shown: str | None = None,
) -> keras_io.LoadedSource:
    """The ONNX model as a LoadedSource: ``call`` the channels-last translation, ``predict`` ONNX Runtime."""
    from edgekit.converters import onnx_translate

    p = Path(path)
    shown = shown or str(p)
    model = read_model(p, shown)
    image, notes = fix_input(model, input_size, shown)
    names = [o.name for o in model.graph.output]
    head = yolo_head(model)
    index = None if head else keras_io.choose_output(names, output, shown)
    chosen = names[index or 0]
    translation = onnx_translate.Translation(model, image, chosen, shown, head)  # unsupported ops refused here
    reference = Reference(model, image, chosen, shown, head)
    picked = None if index is None else ModelOutput(chosen, index, tuple(names))
    if head:
        notes.append(
            f"a YOLO head ({len(head.boxes)} levels, {head.nc} classes, DFL with {head.reg_max} bins): "
            "converted up to its box and class maps, two int8 outputs with their own scales; the decode "
            "runs on the host (as `edgekit cut` leaves it)"
        )
    scaling = exporter_scaling(model)
    if scaling:
        notes.append(
            f"preprocessing {scaling[0]} from the ONNX metadata ({scaling[1]})"
            + (
                "; its detector takes letterboxed images (recorded: detect and evaluate letterbox; "
                "calibration and verification images are letterboxed too)"
                if head
                else ""
            )
        )
    return OnnxModel(
        p,
        "onnx",
        image.hwc,
        translation,
        None,
        None,
        output=picked,
        notes=notes + translation.notes,
        reference=reference,
        translation=translation,
        shown=shown,
        head=head,
        exporter_scaling=scaling[0] if scaling else None,
        class_names=exporter_names(model),
        letterbox=bool(head and scaling),
    )


def exporter_names(model: Any) -> list[str] | None:
    """The class names an exporter wrote into the metadata (Ultralytics: ``names``, a Python dict literal of
    id → name, read with ast.literal_eval: data, never code); None when absent or unreadable."""
    import ast

    text = next((p.value for p in model.metadata_props if p.key == "names"), None)
    try:
        names = ast.literal_eval(text) if text else None
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if isinstance(names, dict) and names and all(isinstance(k, int) and k >= 0 for k in names):
        return [str(names.get(i, i)) for i in range(max(names) + 1)]
    return [str(n) for n in names] if isinstance(names, list) and names else None


def exporter_scaling(model: Any) -> tuple[str, str] | None:
    """(scaling, why) when the ONNX metadata names an exporter whose preprocessing is known: Ultralytics'
    exporter writes ``author: Ultralytics`` and ``stride``/``names``, and its models take RGB pixels / 255."""
    meta = {p.key: p.value for p in model.metadata_props}
    if "ultralytics" in meta.get("author", "").lower() and "names" in meta:
        return "0..1", "Ultralytics' exporter: RGB pixels / 255"
    return None


def yolo_head(model: Any) -> Any:
    """The graph's Ultralytics YOLO head (:mod:`onnx_yolo`), found by structure; None for any other model."""
    from onnx import shape_inference

    from edgekit.converters import onnx_yolo
    from edgekit.converters.onnx_ops import attrs_of, tensor_of

    try:
        inferred = shape_inference.infer_shapes(model)
    except Exception:  # shapes unknown: no head is read from them (the translation still runs)
        return None
    channels = {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.output):
        dims = vi.type.tensor_type.shape.dim
        if len(dims) == 4 and dims[1].HasField("dim_value"):
            channels[vi.name] = int(dims[1].dim_value)
    consts = {t.name: tensor_of(t) for t in model.graph.initializer}
    consts.update(
        {
            n.output[0]: tensor_of(attrs_of(n)["value"])
            for n in model.graph.node
            if n.op_type == "Constant" and "value" in attrs_of(n)
        }
    )
    return onnx_yolo.find_head(list(model.graph.node), consts, channels)


@dataclass
class OnnxModel(keras_io.LoadedSource):
    """An ONNX model: ``call`` is the channels-last translation (what TensorFlow converts), ``predict`` the
    original graph run by ONNX Runtime (the float reference every measurement is made against)."""

    reference: Any = None
    translation: Any = None
    shown: str = ""  # how messages name the model (a path, or the API's onnx.ModelProto)
    head: Any = None  # onnx_yolo.OnnxYoloHead: converted up to the head's maps, decoded on the host
    exporter_scaling: str | None = None  # the preprocessing the exporter's metadata settles (--scaling's names)
    class_names: list[str] | None = None  # the class names the exporter's metadata holds
    letterbox: bool = False  # a detector whose exporter letterboxes (Ultralytics' predict and val)

    def predict(self, x: np.ndarray, batch_size: int = 64) -> np.ndarray:
        return self.reference.predict(x)

    def translated_predict(self, x: np.ndarray) -> np.ndarray:
        return self.translation.predict(x)

    def concrete_function(self, height: int, width: int) -> Any:
        """The translation at batch 1, traced once (:meth:`onnx_translate.Translation.concrete`)."""
        return self.translation.concrete(height, width)


class Reference:
    """The original ONNX model run by ONNX Runtime (CPU): the float model quantize measures against."""

    def __init__(self, model: Any, image: OnnxInput, output: str, shown: str, head: Any = None):
        _, ort = require_onnx()
        if head is not None:  # the head's maps as outputs too: the float reference stops where the int8 model does
            model = _with_outputs(model, list(head.boxes + head.scores))
        options = ort.SessionOptions()
        options.log_severity_level = 3
        options.intra_op_num_threads = 1
        try:
            self.session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        except Exception as exc:
            raise InputError(
                f"{shown}: ONNX Runtime cannot run the model: {first_line(exc, 300)}",
                "export it again (torch.onnx.export with opset_version 13 to 17)",
            ) from None
        self.image, self.output, self.head = image, output, head

    def run(self, x: np.ndarray, names: list[str]) -> list[np.ndarray]:
        """ONNX Runtime's outputs ``names`` for a preprocessed NHWC float32 batch (one sample per run)."""
        runs = []
        for sample in np.asarray(x, np.float32):
            feed = sample.transpose(2, 0, 1)[None] if self.image.nchw else sample[None]
            runs.append(self.session.run(names, {self.image.name: feed}))
        return [np.concatenate([r[i] for r in runs]) for i in range(len(names))] if runs else []

    def predict(self, x: np.ndarray, batch_size: int = 1) -> Any:
        """Float outputs for a preprocessed NHWC float32 batch: flattened per sample, or a YOLO head's [boxes
        [n, N, 4*reg_max], class scores [n, N, nc]] (its maps joined as the int8 model joins them, sigmoid applied)."""
        return self.predict_and(x, [])[0]

    def predict_and(self, x: np.ndarray, names: list[str]) -> tuple[Any, list[np.ndarray]]:
        """:meth:`predict`, and ONNX Runtime's outputs ``names`` from the same runs (one pass over ``x``)."""
        from edgekit.converters.onnx_yolo import join_levels_nchw

        own = [self.output] if self.head is None else list(self.head.boxes + self.head.scores)
        wanted = list(dict.fromkeys(own + names))
        got = dict(zip(wanted, self.run(x, wanted)))  # empty when x is
        extra = [got[n] for n in names] if got else []
        if self.head is None:
            return (got[self.output].reshape(len(x), -1) if got else np.zeros((0, 0), np.float32)), extra
        maps = [got[n] for n in own] if got else []
        k = len(self.head.boxes)
        return [join_levels_nchw(maps[:k]), 1.0 / (1.0 + np.exp(-join_levels_nchw(maps[k:])))], extra


def _with_outputs(model: Any, names: list[str]) -> Any:
    """A copy of ``model`` that also outputs the tensors ``names``."""
    from onnx import ModelProto, helper

    copy = ModelProto()
    copy.CopyFrom(model)
    known = {o.name for o in copy.graph.output}
    copy.graph.output.extend(helper.make_empty_tensor_value_info(n) for n in names if n not in known)
    return copy


def check_against_reference(loaded: OnnxModel, x: np.ndarray) -> list[str]:
    """The translation (:func:`check_translation`) and a YOLO head's host decode (:func:`check_decode`) against ONNX
    Runtime on the first calibration samples, from one ONNX Runtime pass over them; the notes saying how close."""
    x = np.asarray(x[:TRANSLATION_SAMPLES], np.float32)
    head = loaded.head
    reference, outs = loaded.reference.predict_and(x, [loaded.reference.output, *head.boxes] if head else [])
    return [check_translation(loaded, x, reference)] + ([check_decode(loaded, x, reference, outs)] if head else [])


def check_translation(loaded: OnnxModel, x: np.ndarray, reference: Any = None) -> str:
    """Compare the translation with ONNX Runtime on real inputs; ConversionError with the numbers when they differ.

    Returns the note saying how close they are. ``reference``: ONNX Runtime's outputs on ``x`` when already run.
    """
    x = np.asarray(x[:TRANSLATION_SAMPLES], np.float32)
    reference = loaded.predict(x) if reference is None else reference
    ours = loaded.translated_predict(x)
    pairs = list(zip(reference, ours)) if isinstance(reference, list) else [(reference, ours)]
    scale = max(float(np.abs(r).max()) for r, _ in pairs) or 1.0
    error = max(float(np.abs(o - r).max()) for r, o in pairs)
    where = (
        f"max |difference| {error:.3g} against ONNX Runtime on {len(x)} calibration samples (outputs up to {scale:.3g})"
    )
    if not error <= TRANSLATION_TOLERANCE * max(scale, 1.0):
        raise ConversionError(
            f"{loaded.shown or loaded.path}: edgekit's channels-last translation of the ONNX "
            f"model does not compute the same function: {where}, tolerance "
            f"{TRANSLATION_TOLERANCE:g} relative",
            "this is a bug in edgekit's ONNX translator: report it with the model (--debug shows "
            "more); nothing was written",
        )
    return f"the channels-last translation matches ONNX Runtime: {where}"


def check_decode(loaded: OnnxModel, x: np.ndarray, predicted: Any = None, outs: list[np.ndarray] | None = None) -> str:
    """The host's decode of the head's maps (:func:`edgekit.board.decode.decode_split_dfl`) against the ONNX model's own
    decoded output (``[1, 4+nc, N]``: centre x, y, width, height in pixels, then class scores), by ONNX Runtime;
    ConversionError with the numbers when they differ (then the head is not the one edgekit decodes).
    ``predicted`` and ``outs``: the reference's predict and its outputs [decoded, box maps...] on ``x`` when run."""
    from edgekit.board.decode import decode_split_dfl

    head, x = loaded.head, np.asarray(x[:TRANSLATION_SAMPLES], np.float32)
    if outs is None:
        outs = loaded.reference.run(x, [loaded.reference.output] + list(head.boxes))
    decoded, maps = outs[0], outs[1:]
    h, w, _ = loaded.input_shape
    assert h is not None and w is not None  # an ONNX model's input is static: load gives it image.hwc
    strides = tuple(int(round(h / m.shape[2])) for m in maps)
    boxes, scores = loaded.predict(x) if predicted is None else predicted
    worst, scale = 0.0, float(max(h, w))
    for i in range(len(x)):
        c = decode_split_dfl(boxes[i : i + 1], scores[i : i + 1], (h, w), strides, head.reg_max, False)
        ref = decoded[i]
        if ref.shape[0] != 4 + head.nc:
            raise ConversionError(
                f"{loaded.shown}: the YOLO head's decoded output has shape {decoded.shape[1:]}, not [{4 + head.nc}, N]",
                "export with Ultralytics' format=onnx (nms=False)",
            )
        cx, cy, bw, bh = ref[:4]
        xyxy = np.stack([cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2], axis=1)
        worst = max(worst, float(np.abs(xyxy - c.boxes).max()) / scale, float(np.abs(ref[4:].max(0) - c.scores).max()))
    where = (
        f"max |difference| {worst:.3g} (boxes relative to the input size, and scores) on {len(x)} samples, "
        f"strides {list(strides)}"
    )
    if not worst <= TRANSLATION_TOLERANCE:
        raise ConversionError(
            f"{loaded.shown}: the host's decode of the YOLO head does not reproduce the ONNX "
            f"model's own decode: {where}",
            "this head is not decoded the way edgekit decodes "
            "Ultralytics' DFL head: report it with the model; nothing was written",
        )
    return f"the host's decode of the head matches the ONNX model's own decode: {where}"


def versions(loaded: keras_io.LoadedSource) -> dict[str, str]:
    """The onnx and onnxruntime versions an ONNX model was read and run with (recorded; nothing for Keras)."""
    if not isinstance(loaded, OnnxModel):
        return {}
    onnx, ort = require_onnx()
    return {"onnx": onnx.__version__, "onnxruntime": ort.__version__}
