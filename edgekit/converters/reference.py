"""``edgekit evaluate --reference``: the float Keras model beside the int8 one, and where int8 loses it.

The float model gets the same samples through the same spec the int8 model was evaluated with
(:func:`edgekit.board.preprocess.to_float`). The per-layer report uses TensorFlow Lite's
QuantizationDebugger: it quantizes the reference with quantize's own converter settings
(:func:`edgekit.converters.converter.make_converter`) on the evaluation samples, then runs each op
in int8 and in float on the same (dequantized) input, so each layer's error is its own, not
inherited from the layers before it. Error per layer: RMS of (float - dequantized int8), as the
debugger's NumericVerify op measures it, over the RMS of the float output (each averaged over the
samples): 0 is exact, 1 is an error as large as the signal itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from edgekit.board.preprocess import open_image, to_float
from edgekit.converters import keras_io
from edgekit.converters.tf_quiet import silenced
from edgekit.results import metrics
from edgekit.results.evaluate import ClassChange, LayerError, ReferenceComparison

if TYPE_CHECKING:  # annotations only: converters/ imports nothing from devices/
    from edgekit.devices.evaluate import Evaluation, LabelledSet

LAYER_SAMPLES = 32  # samples the per-layer report runs (each runs every op twice)
WORST_SHOWN = 5


def float_inputs(data: LabelledSet, ev: Evaluation) -> np.ndarray:
    """The scored samples preprocessed for the float model with the spec the int8 model used."""
    if data.paths is not None:
        return np.stack([to_float(open_image(data.paths[i]), ev.spec) for i in ev.kept]).astype(np.float32)
    if data.arrays is None:
        raise ValueError("a labelled set holds image paths or arrays; this one holds neither")
    x = data.arrays[ev.kept]
    if x.dtype != np.uint8:
        return x.astype(np.float32)
    return np.stack([to_float(im[..., 0] if im.ndim == 3 and im.shape[-1] == 1 else im, ev.spec) for im in x])


def class_changes(
    float_scores: np.ndarray, int8_scores: np.ndarray, labels: np.ndarray, names: dict[int, str]
) -> list[ClassChange]:
    """Per class: float and int8 top-1 and the change, the largest losses first (then by class id)."""
    rows = []
    f_pred, q_pred = float_scores.argmax(1), int8_scores.argmax(1)
    for c in sorted(set(labels.tolist())):
        mask = labels == c
        f, q = float(np.mean(f_pred[mask] == c)), float(np.mean(q_pred[mask] == c))
        rows.append(ClassChange(int(c), names.get(int(c)), int(mask.sum()), f, q, q - f))
    return sorted(rows, key=lambda r: (r.change, r.id))


def layer_errors(loaded: keras_io.LoadedSource, x: np.ndarray, spec: Any, verbose: bool = False) -> list[LayerError]:
    """Each quantized op's own int8-vs-float error on ``x`` (worst first), from TFLite's QuantizationDebugger."""
    import tensorflow as tf

    from edgekit.converters.converter import make_converter

    sample = x[:LAYER_SAMPLES]

    def dataset() -> Any:
        for s in sample:
            yield [s[None].astype(np.float32)]

    def float_rms(f: np.ndarray, _q: np.ndarray, _scale: float, _zero_point: int) -> float:
        return float(np.sqrt(np.mean(np.square(f.astype(np.float64)))))

    with silenced(verbose):
        converter = make_converter(loaded, spec, dataset, io_type=None)
        options = tf.lite.experimental.QuantizationDebugOptions(layer_direct_compare_metrics={"float_rms": float_rms})
        debugger = tf.lite.experimental.QuantizationDebugger(
            converter=converter, debug_dataset=dataset, debug_options=options
        )
        debugger.run()
    interp = debugger._quant_interpreter
    rows = []
    for name, stats in debugger.layer_statistics.items():
        tensor_name, _ = debugger._get_operand_name_and_index(name)
        tensor_index = debugger._numeric_verify_op_details[name]["inputs"][0]
        op = interp._get_op_details(debugger._defining_op[tensor_index])["op_name"]
        # the error itself is NumericVerify's (float op minus dequantized int8 op, same input)
        rms_error = float(np.sqrt(stats["mean_squared_error"]))
        signal = float(stats["float_rms"])
        rows.append(
            LayerError(
                op, tensor_name, rms_error / signal if signal > 0 else 0.0, rms_error, float(stats["max_abs_error"])
            )
        )
    return sorted(rows, key=lambda r: -r.relative_rms_error)


def compare(
    ev: Evaluation,
    data: LabelledSet,
    reference: str,
    arch: str | None = None,
    custom_objects: str | None = None,
    trust_model: bool = False,
    layers: bool = True,
    verbose: bool = False,
) -> ReferenceComparison:
    """The ``reference`` block of ``evaluate --json``: float accuracy, agreement, class changes, layer errors."""
    loaded = keras_io.load(reference, arch, custom_objects, trust_model, verbose)
    x = float_inputs(data, ev)
    wanted = tuple(loaded.input_shape)
    if any(w and w != got for w, got in zip(wanted, x.shape[1:])) or len(wanted) != x.ndim - 1:
        from edgekit.errors import InputError

        raise InputError(
            f"--reference {reference}: it takes inputs of shape {wanted} (height, width, channels), "
            f"the evaluated model {tuple(x.shape[1:])}",
            "pass the float model this .tflite was made from",
        )
    with silenced(verbose):
        float_scores = loaded.predict(x)
    if float_scores.shape != ev.scores.shape:
        from edgekit.errors import InputError

        raise InputError(
            f"--reference {reference}: it gives {float_scores.shape[1]} scores per sample, "
            f"the evaluated model {ev.scores.shape[1]}",
            "pass the float model this .tflite was made from",
        )
    layer_rows, layers_error = None, None
    if layers:
        try:
            layer_rows = tuple(layer_errors(loaded, x, ev.spec, verbose))
        except Exception as exc:  # an experimental TF API: report why, keep the rest of the evaluation
            from edgekit.errors import first_line

            layers_error = f"{type(exc).__name__}: {first_line(exc)}"
    agreed = metrics.agreement(float_scores, ev.scores)
    return ReferenceComparison(
        str(reference),
        metrics.top_k_accuracy(float_scores, ev.labels, 1),
        metrics.top_k_accuracy(float_scores, ev.labels, 5),
        agreed.samples,
        agreed.top1_agreement,
        agreed.agreement_interval,
        agreed.mean_abs_diff,
        agreed.max_abs_diff,
        tuple(class_changes(float_scores, ev.scores, ev.labels, ev.names)[:WORST_SHOWN]),
        layer_rows,
        layers_error,
    )
