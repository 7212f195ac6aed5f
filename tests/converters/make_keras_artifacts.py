"""Writes Keras-2 (tf_keras) and MirroredStrategy artifacts for test_keras_io.py, in a fresh process.

Run as ``TF_USE_LEGACY_KERAS=1 python make_keras_artifacts.py OUT_DIR`` (OUT_DIR/x.npz holds the
uint8 input images). Two logical CPU devices must be configured before TensorFlow initializes,
and tf.keras must resolve to tf_keras before TensorFlow is imported: hence a subprocess.
"""

import importlib.util
import os
import sys
from pathlib import Path

import numpy as np


def create_model(keras):
    """The tiny architecture shared with the --arch modules the tests write (same layer order)."""
    return keras.Sequential(
        [
            keras.Input((16, 16, 3)),
            keras.layers.Conv2D(8, 3, use_bias=False),
            keras.layers.BatchNormalization(),
            keras.layers.ReLU(),
            keras.layers.Flatten(),
            keras.layers.Dense(3, activation="softmax"),
        ]
    )


def main(out: Path) -> None:
    assert os.environ.get("TF_USE_LEGACY_KERAS") == "1"
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    x = np.load(out / "x.npz")["x"].astype("float32") / 255.0
    y = np.arange(len(x)) % 3

    # Keras 2 (tf_keras): full .h5, weights-only .h5, SavedModel directory.
    if importlib.util.find_spec("tf_keras") is not None:
        k2 = tf.keras
        assert "tf_keras" in k2.__name__ or "tf_keras" in type(k2.Model).__module__, k2
        tf.random.set_seed(1)
        model = create_model(k2)
        model.compile("adam", "sparse_categorical_crossentropy")
        model.fit(x, y, epochs=2, batch_size=8, verbose=0)
        model.save(out / "k2_full.h5")
        model.save_weights(out / "k2_weights.h5")
        model.save(out / "k2_savedmodel")
        np.save(out / "k2_expected.npy", model.predict(x, verbose=0))
        inp = k2.Input((16, 16, 3))  # a Lambda layer: Python bytecode stored in the file
        lam = k2.layers.Dense(3)(k2.layers.Flatten()(k2.layers.Lambda(lambda t: t * 2.0)(inp)))
        k2.Model(inp, lam).save(out / "k2_lambda.h5")

    # Keras 3 under MirroredStrategy over the two logical CPUs.
    import keras

    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    assert strategy.num_replicas_in_sync == 2
    keras.utils.set_random_seed(2)
    with strategy.scope():
        model = create_model(keras)
        model.compile("adam", "sparse_categorical_crossentropy")
    model.fit(x, y, epochs=2, batch_size=8, verbose=0)
    model.save(out / "mirrored.keras")
    model.save_weights(out / "mirrored.weights.h5")
    model.export(out / "mirrored_savedmodel", verbose=False)
    # a direct call, not model.predict: predict would split the batch over both replicas
    np.save(out / "mirrored_expected.npy", np.asarray(model(x, training=False)))
    print("replicas", strategy.num_replicas_in_sync)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
