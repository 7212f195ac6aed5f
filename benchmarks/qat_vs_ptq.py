"""Does quantization-aware training beat post-training quantization on the demo's digits CNN?

Measured, not assumed (issue: "optional QAT with tensorflow-model-optimization if it works with
TensorFlow 2.21"). tensorflow-model-optimization's ``quantize_model`` takes only Keras 2 models, so
this script builds edgekit's small CNN (``edgekit train --arch cnn``: Conv(no bias)-BN-ReLU x2,
MaxPool, Dropout, Dense) in tf_keras, and for each seed:

* trains it 8 epochs on the digits' train split (the demo's images, edgekit's preprocessing);
* PTQ: full-int8 conversion as ``edgekit quantize`` does it (uint8 I/O, per-tensor Dense weights);
* QAT: ``quantize_model`` on the trained model, 2 more epochs of fine-tuning, the same conversion;
* control: the float model trained the same 2 more epochs, then PTQ, so QAT is compared with PTQ
  at equal training, not with a model trained less;

and prints the int8 accuracy on the test split of each, the differences, and ``edgekit check``'s
verdict for both int8 models. Writes benchmarks/out/qat_vs_ptq.json.

Needs ``pip install tensorflow-model-optimization`` (not an edgekit dependency) beside
``.[convert]`` and tf-keras (``make test`` installs tf-keras).

    python benchmarks/qat_vs_ptq.py [--seeds N]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

os.environ["TF_USE_LEGACY_KERAS"] = "1"  # tfmot's quantize_model refuses Keras 3 models
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
OUT = REPO / "benchmarks" / "out" / "qat_vs_ptq.json"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    args = ap.parse_args(argv)
    try:
        import tensorflow_model_optimization as tfmot
        import tf_keras as keras
    except ImportError as exc:
        print(
            f"error: {exc.name} is not installed (pip install tensorflow-model-optimization tf-keras)", file=sys.stderr
        )
        return 4
    import numpy as np
    import tensorflow as tf

    from edgekit.edgetpu.compatibility import check_model
    from edgekit.tflite import model as tflite_model
    from edgekit.training.archs import BN_MOMENTUM
    from edgekit.training.digits import load_folder, write_digits

    folders = write_digits(Path(tempfile.gettempdir()) / "edgekit-qat-digits")
    x, y, _ = load_folder(folders.train)
    xt, yt, _ = load_folder(folders.test)
    layers = keras.layers

    def small_cnn() -> keras.Model:  # edgekit.training.archs.small_cnn, in tf_keras
        return keras.Sequential(
            [
                keras.Input((32, 32, 3)),
                layers.Conv2D(16, 3, padding="same", use_bias=False),
                layers.BatchNormalization(momentum=BN_MOMENTUM),
                layers.ReLU(),
                layers.MaxPooling2D(),
                layers.Conv2D(32, 3, padding="same", use_bias=False),
                layers.BatchNormalization(momentum=BN_MOMENTUM),
                layers.ReLU(),
                layers.MaxPooling2D(),
                layers.Dropout(0.2),
                layers.Flatten(),
                layers.Dense(64, activation="relu"),
                layers.Dropout(0.2),
                layers.Dense(10, activation="softmax"),
            ]
        )

    def fit(model: keras.Model, lr: float, epochs: int) -> None:
        model.compile(keras.optimizers.Adam(lr), "sparse_categorical_crossentropy", ["accuracy"])
        model.fit(x, y, batch_size=32, epochs=epochs, verbose=0)

    def int8(model: keras.Model) -> bytes:
        conv = tf.lite.TFLiteConverter.from_keras_model(model)
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = lambda: ([x[i : i + 1]] for i in range(0, 300, 3))
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        conv.inference_input_type = conv.inference_output_type = tf.uint8
        conv._experimental_disable_per_channel_quantization_for_dense_layers = True
        return bytes(conv.convert())

    def accuracy(model: bytes) -> float:
        try:
            from ai_edge_litert.interpreter import Interpreter
        except ImportError:  # tf.lite's interpreter, deprecated but the same kernels
            Interpreter = tf.lite.Interpreter
        it = Interpreter(model_content=model)
        it.allocate_tensors()
        i, o = it.get_input_details()[0], it.get_output_details()[0]
        scale, zero = i["quantization"]
        right = 0
        for xi, yi in zip(xt, yt):
            it.set_tensor(i["index"], np.clip(np.round(xi[None] / scale + zero), 0, 255).astype(np.uint8))
            it.invoke()
            right += int(np.argmax(it.get_tensor(o["index"])) == yi)
        return right / len(yt)

    def verdict(model: bytes) -> str:
        return check_model(tflite_model.ModelInfo.from_bytes(model)).verdict

    rows = []
    for seed in range(args.seeds):
        keras.utils.set_random_seed(seed)
        model = small_cnn()
        fit(model, 2e-3, 8)
        ptq_model = int8(model)
        qat = tfmot.quantization.keras.quantize_model(model)
        fit(qat, 5e-4, 2)
        qat_model = int8(qat)
        fit(model, 5e-4, 2)  # the control: the same 2 more epochs, without fake quantization
        control = int8(model)
        rows.append(
            {
                "seed": seed,
                "ptq_8_epochs": accuracy(ptq_model),
                "qat_8_plus_2": accuracy(qat_model),
                "ptq_8_plus_2": accuracy(control),
                "float_8_plus_2": float(model.evaluate(xt, yt, verbose=0)[1]),
                "check_qat": verdict(qat_model),
                "check_ptq": verdict(control),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    mean = {
        k: float(np.mean([r[k] for r in rows]))
        for k in ("ptq_8_epochs", "qat_8_plus_2", "ptq_8_plus_2", "float_8_plus_2")
    }
    summary = {
        "test_images": len(yt),
        "seeds": args.seeds,
        "mean_int8_accuracy": mean,
        "qat_minus_ptq_same_training_points": 100 * (mean["qat_8_plus_2"] - mean["ptq_8_plus_2"]),
        "ptq_minus_float_points": 100 * (mean["ptq_8_plus_2"] - mean["float_8_plus_2"]),
        "runs": rows,
    }
    print(
        f"int8 accuracy over {args.seeds} seeds, {len(yt)} test images: PTQ {mean['ptq_8_plus_2']:.2%}, "
        f"QAT {mean['qat_8_plus_2']:.2%} (same training), float {mean['float_8_plus_2']:.2%}; "
        f"QAT - PTQ = {summary['qat_minus_ptq_same_training_points']:+.2f} points"
    )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
