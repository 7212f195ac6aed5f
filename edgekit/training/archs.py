"""Built-in architectures that map fully onto the Edge TPU once quantized by edgekit.

Both order every convolution Conv(use_bias=False) → BatchNorm → ReLU, so the converter folds each
BatchNorm into its convolution and the activation into the op (../shared/reference/toolchain.md,
pitfall 8); every layer they use becomes CONV_2D, DEPTHWISE_CONV_2D, ADD, MAX_POOL_2D, MEAN,
FULLY_CONNECTED or SOFTMAX, all Edge TPU ops (a test quantizes each and asks `edgekit check`).

BatchNorm momentum is 0.9, not Keras's 0.99: after a few epochs the moving statistics must already
describe the data, or validation accuracy collapses while training accuracy looks fine (issue 12:
a MobileNetV2 at 94% training, 10% validation accuracy after 6 epochs at the default momentum).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

BN_MOMENTUM = 0.9


def small_cnn(input_shape: tuple[int, int, int], num_classes: int, momentum: float = BN_MOMENTUM) -> Any:
    """Conv(no bias)-BN-ReLU ×2 with MaxPool and Dropout, then Dense: small and fully int8/Edge TPU mappable."""
    import keras
    from keras import layers

    return keras.Sequential(
        [
            keras.Input(input_shape),
            layers.Conv2D(16, 3, padding="same", use_bias=False),
            layers.BatchNormalization(momentum=momentum),
            layers.ReLU(),
            layers.MaxPooling2D(),
            layers.Conv2D(32, 3, padding="same", use_bias=False),
            layers.BatchNormalization(momentum=momentum),
            layers.ReLU(),
            layers.MaxPooling2D(),
            layers.Dropout(0.2),
            layers.Flatten(),
            layers.Dense(64, activation="relu"),
            layers.Dropout(0.2),
            layers.Dense(num_classes, activation="softmax"),
        ],
        name="small_cnn",
    )


# MobileNetV2's inverted residual blocks (Sandler et al. 2018, table 2): expansion t, channels c, repeats n, stride s.
MOBILENET_V2_BLOCKS = (
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
)


def _divisible(v: float, divisor: int = 8) -> int:
    """Round channels to a multiple of 8, as keras.applications.MobileNetV2 does (never down by more than 10%)."""
    new = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new + divisor if new < 0.9 * v else new


def mobilenet_v2(
    input_shape: tuple[int, int, int], num_classes: int, width: float = 1.0, momentum: float = BN_MOMENTUM
) -> Any:
    """A MobileNetV2 (random weights) of any width multiplier and input size, Conv(no bias)-BN-ReLU6 throughout."""
    import keras
    from keras import layers

    def conv_bn(x: Any, filters: int, kernel: int, stride: int = 1, relu: bool = True, depthwise: bool = False) -> Any:
        if depthwise:
            x = layers.DepthwiseConv2D(kernel, stride, padding="same", use_bias=False)(x)
        else:
            x = layers.Conv2D(filters, kernel, stride, padding="same", use_bias=False)(x)
        x = layers.BatchNormalization(momentum=momentum)(x)
        return layers.ReLU(6.0)(x) if relu else x

    inputs = keras.Input(input_shape)
    x = conv_bn(inputs, _divisible(32 * width), 3, 2)
    for t, c, n, s in MOBILENET_V2_BLOCKS:
        out = _divisible(c * width)
        for i in range(n):
            stride = s if i == 0 else 1
            y = conv_bn(x, x.shape[-1] * t, 1) if t != 1 else x
            y = conv_bn(y, 0, 3, stride, depthwise=True)
            y = conv_bn(y, out, 1, relu=False)
            x = layers.Add()([x, y]) if stride == 1 and x.shape[-1] == out else y
    x = conv_bn(x, _divisible(1280 * width) if width > 1.0 else 1280, 1)
    x = layers.GlobalAveragePooling2D()(x)
    x = layers.Dropout(0.2)(x)
    outputs = layers.Dense(num_classes, activation="softmax")(x)
    return keras.Model(inputs, outputs, name=f"mobilenet_v2_{width:g}")


ARCHS: dict[str, Callable[..., Any]] = {"cnn": small_cnn, "mobilenetv2": mobilenet_v2}
