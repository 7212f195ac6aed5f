"""The TFLiteConverter edgekit quantizes with: full-int8 builtins, static batch-1 input, per-tensor Dense weights.

Used by quantize (:mod:`edgekit.converters.quantize`) and by the per-layer error of
``evaluate --reference`` (:mod:`edgekit.converters.reference`), so both quantize the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from edgekit.board.preprocess import PreprocessSpec
from edgekit.converters import keras_io
from edgekit.converters.tf_quiet import import_tensorflow


def make_converter(
    loaded: keras_io.LoadedSource,
    spec: PreprocessSpec,
    representative: Callable[[], Any],
    io_type: str | None = "uint8",
    settings: dict[str, bool] | None = None,
) -> Any:
    """The TFLiteConverter quantize uses (``io_type`` None keeps float I/O, as the quantization debugger needs)."""
    tf = import_tensorflow()
    cf = loaded.concrete_function(spec.height, spec.width)
    # from_concrete_functions([cf]) without the trackable: passing the model fails (toolchain.md, 3).
    conv = tf.lite.TFLiteConverter.from_concrete_functions([cf])
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = representative
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    if io_type:
        conv.inference_input_type = conv.inference_output_type = {"uint8": tf.uint8, "int8": tf.int8}[io_type]
    # TF >= 2.16 quantizes Dense weights per channel; Coral's toolchain documents one scale. Compiler
    # 16 maps per-channel Dense weights too (compatibility.EV_PER_CHANNEL_FC), so this is the documented
    # form, not a gate: if TensorFlow drops the setting, Dense weights come out per channel and still map.
    apply_settings(conv, {DENSE_PER_TENSOR: True})
    missing = apply_settings(conv, settings or {})
    if missing:
        raise SettingMissing(missing)
    return conv


DENSE_PER_TENSOR = "_experimental_disable_per_channel_quantization_for_dense_layers"


class SettingMissing(Exception):
    """The converter has no attribute of that name (TensorFlow renamed or removed it): setting it would do nothing."""

    def __init__(self, names: list[str]):
        super().__init__(", ".join(names))
        self.names = names


def apply_settings(conv: Any, settings: dict[str, bool]) -> list[str]:
    """Set each private converter attribute that exists; return the names that do not (nothing is set for them).

    ``setattr`` on a renamed attribute would silently add a new one that TensorFlow never reads.
    """
    missing = [k for k in settings if not hasattr(conv, k)]
    for key, value in settings.items():
        if key not in missing:
            setattr(conv, key, value)
    return missing
