"""The one preprocessing function, shared by calibration and inference."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from PIL import Image

from edgekit.board.preprocess import PreprocessSpec, open_image, prepare, spec_from_input_quantization, to_float
from edgekit.errors import InputError, UsageError
from tests.devices.test_classify import _png_header_only


@pytest.mark.parametrize(
    "width, height",
    [(9_000, 9_000), (9_500, 9_500), (30_000, 30_000)],
    ids=["over-our-limit", "over-pillow-warning", "over-pillow-error"],
)
def test_decompression_bombs_are_refused_quietly(tmp_path, width, height):
    bomb = tmp_path / "bomb.png"
    _png_header_only(bomb, width, height)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no Pillow warning may leak to the user either
        with pytest.raises(InputError, match="too large") as exc:
            open_image(bomb)
    assert "decompression bomb" in str(exc.value)


def test_exif_orientation_is_applied(tmp_path):
    img = Image.new("RGB", (40, 20), (255, 0, 0))
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90° clockwise when shown
    img.save(tmp_path / "rotated.jpg", exif=exif)
    assert open_image(tmp_path / "rotated.jpg").size == (20, 40)


@pytest.mark.parametrize(
    "dtype, scale, zero_point, shift",
    [("uint8", 1 / 128, 128, 0), ("uint8", 1 / 255, 0, 0), ("int8", 1 / 255, -128, 128), ("uint8", 1.0, 0, 0)],
)
def test_default_spec_feeds_raw_pixels(dtype, scale, zero_point, shift):
    """Without a record, the input's own quantization decides: raw pixels (uint8), pixels - 128 (int8)."""
    rgb = np.random.default_rng(0).integers(0, 256, (8, 8, 3), dtype=np.uint8)
    spec = spec_from_input_quantization(8, 8, 3, dtype, scale, zero_point)
    q = prepare(rgb, spec, dtype, scale, zero_point)
    assert q.dtype == np.dtype(dtype) and q.shape == (1, 8, 8, 3)
    np.testing.assert_array_equal(q[0].astype(int), rgb.astype(int) - shift)


def test_recorded_scaling_then_quantization_matches_the_float_model_input():
    rgb = np.random.default_rng(1).integers(0, 256, (4, 4, 3), dtype=np.uint8)
    spec = PreprocessSpec.with_scaling(4, 4, "-1..1")
    x = to_float(rgb, spec)
    np.testing.assert_allclose(x, rgb / 127.5 - 1, atol=1e-6)
    q = prepare(rgb, spec, "int8", 2 / 255, 0)  # a -1..1 range quantized symmetrically
    np.testing.assert_allclose(q[0] * (2 / 255), x, atol=1 / 255 + 1e-6)


def test_spec_round_trips_and_refuses_nonsense():
    spec = PreprocessSpec(32, 24, "BGR", "bilinear", (1.0, 2.0, 3.0), (4.0, 5.0, 6.0))
    assert PreprocessSpec.read(spec.to_dict()) == spec == PreprocessSpec.from_dict(spec.to_dict())
    assert PreprocessSpec(8, 8, mean=(127,), std=(1,)).to_dict()["mean"] == [127.0]  # numbers with a point
    with pytest.raises(UsageError, match="--std must not be zero"):
        PreprocessSpec(8, 8, std=(0.0,))
    with pytest.raises(UsageError, match="1 or 3 values"):
        PreprocessSpec(8, 8, mean=(1.0, 2.0))
    with pytest.raises(UsageError, match="--std needs 1 value for L input, got 3"):
        PreprocessSpec(8, 8, "L", std=(1.0, 2.0, 3.0))
    with pytest.raises(InputError, match="malformed"):
        PreprocessSpec.read({"height": 3})
    with pytest.raises(InputError, match="recorded preprocessing is malformed: std must not be zero"):
        PreprocessSpec.read({**spec.to_dict(), "std": [0.0]})
    # a result's document is read as any record's: its version, and a refused value, are ValueErrors
    with pytest.raises(ValueError, match=r"PreprocessSpec.version: expected 1, got 2"):
        PreprocessSpec.from_dict({**spec.to_dict(), "version": 2})
    with pytest.raises(ValueError, match="PreprocessSpec: --std must not be zero"):
        PreprocessSpec.from_dict({**spec.to_dict(), "std": [0.0]})


# ------------------------------------------------------------------ high-bit-depth images (issue 9, item 0)
def _gradient16() -> np.ndarray:
    return (np.arange(48 * 40).reshape(40, 48) * 34 % 65536).astype(np.uint16)


@pytest.mark.parametrize(
    "suffix, dtype, full",
    [(".png", np.uint16, 65535), (".tif", np.uint16, 65535), (".tif", np.int32, 65535), (".tif", np.float32, 1.0)],
    ids=["16-bit-png", "16-bit-tiff", "32-bit-int-tiff", "float-tiff-0..1"],
)
def test_high_bit_depth_images_are_scaled_to_8_bits_not_clipped(tmp_path, suffix, dtype, full):
    """Pillow's own convert() clips a 16-bit pixel at 255 (a grey image turns white): scale instead."""
    g16 = _gradient16()
    values = g16.astype(np.float64) / 65535 * full
    path = tmp_path / f"grey{suffix}"
    Image.fromarray(values.astype(dtype)).save(path)
    assert Image.open(path).mode in ("I;16", "I", "F")  # really a high-bit-depth file
    expected = np.rint(g16 / 257.0).astype(np.uint8)
    spec = PreprocessSpec(48, 40, "L")
    np.testing.assert_allclose(
        prepare(open_image(path), spec, "uint8", 1.0, 0)[0, ..., 0].astype(int), expected.astype(int), atol=1
    )
    rgb = PreprocessSpec(48, 40, "RGB")
    px = prepare(open_image(path), rgb, "uint8", 1.0, 0)[0]
    np.testing.assert_allclose(px[..., 1].astype(int), expected.astype(int), atol=1)


def test_a_16bit_array_is_scaled_too():
    g16 = _gradient16()
    px = prepare(g16, PreprocessSpec(48, 40, "L"), "uint8", 1.0, 0)[0, ..., 0]
    np.testing.assert_array_equal(px, np.rint(g16 / 257.0).astype(np.uint8))


def test_float_pixels_outside_every_usual_range_are_refused(tmp_path):
    path = tmp_path / "weird.tif"
    Image.fromarray(np.full((4, 4), -3.5, np.float32)).save(path)
    with pytest.raises(InputError, match=r"weird.tif: F pixels range from -3.5 to -3.5") as exc:
        open_image(path)
    assert "8- or 16-bit" in exc.value.hint


def test_keras_resize_is_bilinear_with_half_pixel_centres_and_no_antialias():
    """8x8 -> 2x2: each output pixel is the mean of the two middle rows/columns of its 4x4 block (what
    tf.image.resize computes), not the mean of the whole block (what an antialiased filter approaches)."""
    from edgekit.board.preprocess import pixels, resize_like_keras

    x = np.arange(64, dtype=np.uint8).reshape(8, 8) * 3
    out = resize_like_keras(x, 2, 2)
    expected = [[x[1:3, 1:3].mean(), x[1:3, 5:7].mean()], [x[5:7, 1:3].mean(), x[5:7, 5:7].mean()]]
    assert out.tolist() == np.round(expected).astype(int).tolist()
    spec = PreprocessSpec(2, 2, "L", "keras")
    assert pixels(x, spec)[..., 0].tolist() == out.tolist()  # the one preprocessing uses it
    assert PreprocessSpec.read(spec.to_dict()).resize == "keras"  # and records it


@pytest.mark.tf
def test_keras_resize_matches_keras_ops_image_resize():
    import keras

    from edgekit.board.preprocess import resize_like_keras

    rng = np.random.default_rng(0)
    for shape, size in (((427, 640, 3), (32, 32)), ((90, 100, 3), (224, 224)), ((37, 53, 1), (16, 20))):
        x = rng.integers(0, 256, shape, dtype=np.uint8)
        ref = np.asarray(keras.ops.image.resize(x.astype(np.float32), size, interpolation="bilinear", antialias=False))
        assert np.abs(resize_like_keras(x, *size).astype(np.float32) - ref).max() <= 0.501  # uint8 rounding only
