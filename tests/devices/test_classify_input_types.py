"""classify on int8, uint8 and float inputs of models TensorFlow builds here, checked against Keras itself.

The models are normalized x/255 (input scale 1/255), where pycoral's classify_image.py with its fixed
mean/std of 128 goes wrong; edgekit's default (raw pixels into uint8, pixels - 128 into int8) must
reproduce the Keras model on image/255.
"""

from __future__ import annotations

import numpy as np
import pytest

from edgekit.devices import classify as C
from edgekit.tflite import model as tflite_model

pytestmark = [pytest.mark.tf, pytest.mark.filterwarnings("ignore:Statistics for quantized inputs:UserWarning")]

SIZE = 8


@pytest.fixture(scope="session")
def x255_models(tmp_path_factory) -> dict:
    """A tiny Keras classifier trained on nothing (fixed random weights), converted three ways."""
    import tensorflow as tf

    keras = tf.keras
    keras.utils.set_random_seed(3)
    model = keras.Sequential(
        [
            keras.Input((SIZE, SIZE, 3), batch_size=1),
            keras.layers.Conv2D(4, 3, activation="relu"),
            keras.layers.Flatten(),
            keras.layers.Dense(5),
            keras.layers.Softmax(),
        ]
    )
    rng = np.random.default_rng(0)
    calib = rng.uniform(0, 1, (64, SIZE, SIZE, 3)).astype(np.float32)
    folder = tmp_path_factory.mktemp("x255")
    paths = {}
    for kind in ("int8", "uint8", "float32"):
        conv = tf.lite.TFLiteConverter.from_keras_model(model)
        if kind != "float32":
            conv.optimizations = [tf.lite.Optimize.DEFAULT]
            conv.representative_dataset = lambda: ([calib[i : i + 1]] for i in range(len(calib)))
            conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
            conv.inference_input_type = conv.inference_output_type = getattr(tf, kind)
        paths[kind] = folder / f"x255_{kind}.tflite"
        paths[kind].write_bytes(conv.convert())
    images = []
    from PIL import Image

    for i in range(6):
        p = folder / f"img{i}.png"
        Image.fromarray(rng.integers(0, 256, (SIZE, SIZE, 3), dtype=np.uint8)).save(p)
        images.append(p)
    pixels = np.stack([np.asarray(Image.open(p), dtype=np.float32) for p in images])
    expected = model.predict(pixels / 255.0, batch_size=1, verbose=0)
    return {"paths": paths, "images": images, "expected": expected}


@pytest.mark.parametrize("kind", ["int8", "uint8"])
def test_quantized_inputs_reproduce_keras_on_pixels_over_255(x255_models, kind):
    path = x255_models["paths"][kind]
    q = tflite_model.load(path).inputs[0]
    assert q.dtype == kind and abs(q.quantization.scale - 1 / 255) < 1e-4  # the case classify_image.py gets wrong
    clf = C.HostClassifier(path)
    for image, expected in zip(x255_models["images"], x255_models["expected"]):
        scores, _ = clf.infer(clf.prepare(str(image)))
        assert np.max(np.abs(scores - expected)) < 0.02
        assert C.top_k(scores, 1)[0][0] == int(np.argmax(expected))


def test_float_input_without_record_is_fed_0_1_and_said_to_be_a_guess(x255_models):
    """A float input has no quantization to derive the preprocessing from: pixels / 255 is the guess (PyTorch's
    and Ultralytics' range), said in a warning naming the flags; --mean/--std settle it (raw pixels here). Was raw
    0..255 pixels, silently, "derived from the input quantization" the input does not have (issue 35)."""
    path = x255_models["paths"]["float32"]
    guessed = C.HostClassifier(path)
    raw = C.HostClassifier(path, mean=(0.0,), std=(1.0,))
    image, expected = x255_models["images"][0], x255_models["expected"][0]
    assert guessed.spec.std == (255.0,) and guessed.spec.mean == (0.0,)
    assert [n for n in guessed.notes if "a guess" in n and "--mean/--std" in n]
    assert not [n for n in raw.notes if "a guess" in n]
    scores, _ = guessed.infer(guessed.prepare(str(image)))
    np.testing.assert_allclose(scores, expected, atol=1e-5)
    raw_scores, _ = raw.infer(raw.prepare(str(image)))
    assert not np.allclose(raw_scores, expected, atol=1e-3)
