"""The one preprocessing: image → input tensor, shared by calibration and inference.

A :class:`PreprocessSpec` says how an image becomes the float tensor the Keras model was trained on:
resize to (width, height) with a filter, convert to RGB/BGR/grayscale, then ``(pixels - mean) / std``.
``edgekit quantize`` records the spec with its output; ``edgekit classify`` reads it back and applies
the same function, then quantizes with the model's input scale and zero point.

For a model from elsewhere, :func:`spec_from_input_quantization` derives the spec from the input
tensor's own quantization: post-training quantization sets it from the float range seen during
calibration, so feeding raw pixels to a uint8 input (pixels - 128 to an int8 input) reproduces a
linear normalization over the full pixel range exactly (see ../shared/DESIGN.md, "One preprocessing").
"""

from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np

from edgekit.errors import Caution, EdgekitError, InputError, first_line, printable, regular_file
from edgekit.results.preprocess import PreprocessSpec

if TYPE_CHECKING:  # pragma: no cover - an annotation only: pathlib costs a one-image classify 16M instructions
    from pathlib import Path

IMAGE_EXTENSIONS = frozenset({".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff", ".ppm", ".pgm"})


def is_hidden(relative) -> bool:
    """A dot file or a file in a dot folder (``relative`` to the folder searched): macOS's ``._photo.jpg``
    companions, ``.ipynb_checkpoints``... Skipped wherever a folder's images are listed, as by a glob's ``*``."""
    return any(part.startswith(".") for part in relative.parts)


MAX_IMAGE_PIXELS = 64 * 1024 * 1024  # larger images are refused as decompression bombs
EXIF_ORIENTATION = 0x0112  # the EXIF tag saying how the camera was held


def with_mean_std(
    spec: PreprocessSpec, mean: tuple[float, ...] | None, std: tuple[float, ...] | None
) -> PreprocessSpec:
    """``spec`` with ``--mean``/``--std`` applied: the one rule for quantize and classify alike.

    The flags describe the whole normalization ``(pixel - mean) / std`` on their own: given alone,
    ``--mean`` means std 1 and ``--std`` means mean 0, whatever the spec had (neither given: ``spec``).
    """
    if mean is None and std is None:
        return spec
    return replace(
        spec, mean=tuple(mean) if mean is not None else (0.0,), std=tuple(std) if std is not None else (1.0,)
    )


@dataclass(frozen=True)
class ImageInput:
    """An image model's input tensor as the host fills it: its size and channels, and whether the model takes
    channels first (``[1, C, H, W]``, what PyTorch exporters such as litert-torch and Ultralytics' LiteRT route
    write) or last (``[1, H, W, C]``, or ``[1, H, W]`` for one channel). The host prepares every image channels-last
    and :meth:`from_hwc` puts it in the model's order."""

    shape: tuple[int, ...]
    height: int
    width: int
    channels: int
    channels_first: bool = False

    @property
    def layout(self) -> str:
        return "NCHW" if self.channels_first else "NHWC"

    def from_hwc(self, tensor: np.ndarray) -> np.ndarray:
        """A ``[1, H, W, C]`` (or ``[H, W, C]``) tensor in the model's own shape and axis order."""
        x = tensor.reshape((1, self.height, self.width, self.channels))
        if self.channels_first:
            x = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
        return x.reshape(self.shape)


def image_input(shape: Any, name: str = "model", hint: str = "edgekit runs image models") -> ImageInput:
    """The :class:`ImageInput` of an input ``shape``; InputError for a shape that is no single image, or one whose
    channel axis cannot be told (``[1, 3, 3, 3]``: both axes could be the channels; refused, never guessed)."""
    dims = tuple(int(d) for d in shape)
    if len(dims) == 3 and dims[0] == 1 and min(dims) > 0:  # [1, height, width]: grey without its channel axis
        return ImageInput(dims, dims[1], dims[2], 1)
    if len(dims) != 4 or dims[0] != 1 or min(dims) < 1:
        raise InputError(
            f"{name}: expected an image input [1, height, width, 1 or 3] or [1, 1 or 3, height, width], "
            f"got {list(dims)}",
            hint,
        )
    last, first = dims[3] in (1, 3), dims[1] in (1, 3)
    if last and first:
        raise InputError(
            f"{name}: the input {list(dims)} could be channels-first or channels-last: edgekit cannot "
            "tell which axis holds the colour channels, and will not guess",
            "export it with a height and width other than 1 and 3 pixels",
        )
    if last:
        return ImageInput(dims, dims[1], dims[2], dims[3])
    if first:
        return ImageInput(dims, dims[2], dims[3], dims[1], channels_first=True)
    raise InputError(
        f"{name}: expected an image input [1, height, width, 1 or 3] or [1, 1 or 3, height, width], got {list(dims)}",
        hint,
    )


def spec_from_input_quantization(
    width: int, height: int, channels: int, dtype: str, scale: float | None, zero_point: int | None
) -> PreprocessSpec:
    """The default spec for a model whose recorded preprocessing is unknown.

    uint8 input: mean = zero_point, std = 1/scale, so the quantized input equals the raw pixels.
    int8 input: the same shifted by 128, so the quantized input is pixels - 128.
    Float or unquantized input: raw pixels.
    """
    order = "L" if channels == 1 else "RGB"
    if dtype in ("uint8", "int8") and scale:
        shift = 128 if dtype == "int8" else 0
        return PreprocessSpec(width, height, order, mean=(float(zero_point or 0) + shift,), std=(1.0 / scale,))
    return PreprocessSpec(width, height, order)


def float_input_guess(width: int, height: int, channels: int) -> PreprocessSpec:
    """What a float input without a record is fed: pixels / 255, the 0..1 range PyTorch's and Ultralytics' image
    pipelines (ToTensor, LetterBox) and onnx2tf's calibration give models. Said as a guess wherever used."""
    return PreprocessSpec.with_scaling(width, height, "0..1", channels="L" if channels == 1 else "RGB")


def spec_for_model(
    recorded: PreprocessSpec | None,
    recorded_source: str | None,
    width: int,
    height: int,
    channels: int,
    dtype: str,
    scale: float | None,
    zero_point: int | None,
    mean: tuple[float, ...] | None = None,
    std: tuple[float, ...] | None = None,
    name: str = "model",
) -> tuple[PreprocessSpec, str, list[str]]:
    """(spec, where it came from, warnings): what ``classify`` (here and on a board) applies to a model's input.

    The recorded spec (resized to the model's input with a warning when the sizes differ), else the
    one the input's quantization implies (a float input has none: pixels / 255, a guess said in a warning unless
    ``--mean``/``--std`` settle it); then ``--mean``/``--std`` by :func:`with_mean_std`. InputError when the spec's channels do not match the model's.
    """
    notes = []  # type: list[str]  # a Caution (a str) is a warning among them
    if recorded is not None:
        spec, source = recorded, str(recorded_source or "recorded")
        if (spec.width, spec.height) != (width, height):
            notes.append(
                Caution(
                    f"the recorded input size {spec.width}x{spec.height} differs from the "
                    f"model's {width}x{height}; resizing to the model's"
                )
            )
            spec = replace(spec, width=width, height=height)
    elif dtype in ("uint8", "int8") and scale:
        spec = spec_from_input_quantization(width, height, channels, dtype, scale, zero_point)
        source = "derived from the input quantization"
    else:
        spec, source = float_input_guess(width, height, channels), "a guess: pixels / 255 (float input, no record)"
        if mean is None and std is None:
            notes.append(
                Caution(
                    f"{name}: a float input and no recorded preprocessing: feeding RGB pixels / 255 "
                    "(0..1), a guess; pass --mean/--std to settle it (--mean 0 --std 1 for raw 0..255 "
                    "pixels, --mean 127.5 --std 127.5 for -1..1)"
                )
            )
    if mean is not None or std is not None:
        spec, source = with_mean_std(spec, mean, std), "--mean/--std"
    if spec.num_channels != channels:
        raise InputError(
            f"{name}: the preprocessing ({source}) makes {spec.num_channels}-channel "
            f"images but the model takes {channels} channel(s)",
            f"give {channels} --mean/--std value(s), or quantize the model again",
        )
    return spec, source, notes


# The formats of IMAGE_EXTENSIONS, and only those: Pillow would otherwise identify any of its ~40 plugins'
# formats from a file's first bytes, whatever its name, EPS among them, whose load() runs Ghostscript.
# (DIB: a BMP variant; MPO: what Pillow's JPEG reader calls a JPEG holding several pictures, as cameras write.)
# The formats of IMAGE_EXTENSIONS, and only those, told apart by their first bytes: Pillow would otherwise
# identify any of its ~40 plugins' formats from a file's first bytes, whatever its name, EPS among them,
# whose load() runs Ghostscript. Only the one plugin a file's magic names is imported and offered
# (also the cheapest start: no other plugin loads). MPO is what Pillow's JPEG reader calls a JPEG
# holding several pictures, as cameras write.
_MAGIC = (
    (b"\xff\xd8\xff", "JPEG", "JpegImagePlugin"),
    (b"\x89PNG\r\n\x1a\n", "PNG", "PngImagePlugin"),
    (b"BM", "BMP", "BmpImagePlugin"),
    (b"GIF87a", "GIF", "GifImagePlugin"),
    (b"GIF89a", "GIF", "GifImagePlugin"),
    (b"II*\x00", "TIFF", "TiffImagePlugin"),
    (b"MM\x00*", "TIFF", "TiffImagePlugin"),
)
IMAGE_FORMATS = ("JPEG", "PNG", "BMP", "GIF", "TIFF", "WEBP", "PPM")
READ_AS = IMAGE_FORMATS + ("MPO",)


def _format_of(head: bytes) -> tuple[str, str] | None:
    """(Pillow format, plugin module) a file's first bytes name, among IMAGE_FORMATS only."""
    for magic, name, module in _MAGIC:
        if head.startswith(magic):
            return name, module
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "WEBP", "WebPImagePlugin"
    if len(head) > 2 and head[:1] == b"P" and head[1:2] in b"123456" and head[2:3].isspace():
        return "PPM", "PpmImagePlugin"
    return None


def _open_allowed(path: Any) -> Any:
    """``Image.open`` of one of IMAGE_FORMATS, chosen from the file's first bytes (the header only: nothing
    decoded yet). Raises Pillow's errors, UnidentifiedImageError for anything else."""
    import importlib

    from PIL import Image, UnidentifiedImageError

    if hasattr(path, "read"):
        head = path.read(16)
        path.seek(0)
    else:
        with open(path, "rb") as f:
            head = f.read(16)
    found = _format_of(head)
    if found is None:
        raise UnidentifiedImageError("not one of the image formats edgekit reads")
    name, module = found
    try:
        importlib.import_module("PIL." + module)  # registers that one format
    except ImportError:  # a Pillow built without it (WebP, say)
        raise UnidentifiedImageError(f"this Pillow cannot read {name}") from None
    try:
        im = Image.open(path, formats=[name])
    except TypeError:  # Pillow before 7.2 has no formats=: checked below, before any load()
        im = Image.open(path)
    if im.format not in READ_AS:
        im.close()
        raise UnidentifiedImageError(f"{im.format} images are not read")
    return im


def image_size(path: Any) -> tuple[int, int]:
    """(width, height) from an image's header, through the same checks as :func:`open_image`; InputError."""
    return _with_image_errors(path, lambda: _header(path))


def _header(path: Any) -> tuple[int, int]:
    with _open_allowed(path) as im:
        return im.size


def open_image(path: str | Path | BinaryIO):
    """Open an image (a path, or a binary file such as a TFRecord's bytes in a BytesIO) fully decoded,
    EXIF-rotated, refusing decompression bombs. Raises InputError."""
    return _with_image_errors(path, lambda: _decode(path))


def _decode(path: Any):
    too_large = f"images over {MAX_IMAGE_PIXELS // 2**20} megapixels are refused as possible decompression bombs"
    with _open_allowed(path) as im:
        # A multi-page TIFF, an animated GIF, WebP or PNG and an MPO hold several frames: the first is read, and
        # copied out of the file before it closes. Left as it was, the frame still needed its file afterwards: on
        # Pillow < 10 (the Dev Board's) a TIFF's next load() seeks its closed file ('NoneType' object has no
        # attribute 'seek'), and on newer Pillows some operations raise "Operation on closed image".
        several = bool(getattr(im, "is_animated", False))  # before load(): asking may seek a GIF to frame 1 and back
        if several:
            im.seek(0)
        if im.width * im.height > MAX_IMAGE_PIXELS:
            raise InputError(f"{_shown(path)}: image is too large ({im.width}x{im.height} pixels)", too_large)
        # before load(): Pillow < 10 reads a multi-page TIFF's EXIF through a file its load() has let go of
        orientation = im.getexif().get(EXIF_ORIENTATION, 1)
        im.load()
        upright = im
        if orientation != 1:  # as the camera was held; else no copy, no ImageOps
            from PIL import ImageOps

            upright = ImageOps.exif_transpose(im)
        if several and upright is im:
            upright = im.copy()  # a single frame, its pixels held in memory
        return to_8bit(upright, path, im.format)


def _shown(path: Any) -> str:
    """A file name as error lines print it (undecodable bytes as \\xNN); "image" for an in-memory file."""
    return printable(os.fsdecode(path)) if isinstance(path, (str, bytes, os.PathLike)) else "image"


def _with_image_errors(path: Any, read: Any) -> Any:
    """``read()`` with every way an image file can fail turned into one InputError naming ``path``."""
    from PIL import Image, UnidentifiedImageError

    # Pillow warns on big images before our own, stricter pixel-count check refuses them. A filter,
    # re-added on each call, rather than warnings.catch_warnings(), which is not thread-safe (classify
    # decodes in threads).
    warnings.filterwarnings("ignore", category=Image.DecompressionBombWarning)
    # Pillow's own UserWarnings (palette transparency, corrupt EXIF...) describe conversions it makes and
    # edgekit handles; printed raw they are Python warning lines amid edgekit's one-line output
    warnings.filterwarnings("ignore", category=UserWarning, module=r"PIL(\.|$)")
    shown = _shown(path)
    regular_file(path)
    try:
        return read()
    except InputError:
        raise
    except FileNotFoundError:
        raise InputError(f"{shown}: no such file", "check the path") from None
    except Image.DecompressionBombError:
        raise InputError(
            f"{shown}: image is too large",
            f"images over {MAX_IMAGE_PIXELS // 2**20} megapixels are refused as possible decompression bombs",
        ) from None
    except UnidentifiedImageError:
        raise InputError(
            f"{shown}: not an image edgekit reads", "pass JPEG, PNG, BMP, GIF, WebP, TIFF or PPM images"
        ) from None
    except IsADirectoryError:
        raise InputError(f"{shown}: a folder, not an image", "pass the folder itself, not as a file") from None
    except (OSError, SyntaxError, ValueError) as exc:
        text = str(exc).strip()
        why = text.splitlines()[0][:200] if text else type(exc).__name__
        raise InputError(
            f"{shown}: cannot decode image ({why})", "the file is damaged or truncated: save or copy it again"
        ) from None


def _full_scale(mode: str, image_format: str | None, peak: float) -> float:
    """The value that means full brightness in a high-bit-depth image of ``mode``."""
    if mode.startswith("I;16"):
        return 65535.0
    if mode == "I" and image_format == "PNG":  # older Pillow opens a 16-bit grey PNG as "I"
        return 65535.0
    # "I" (32-bit integers, e.g. TIFF) and "F" (floats) say nothing of their range: take the smallest
    # usual full scale that holds every pixel (floats 0..1, then 8 bits, then 16 bits).
    scales = (1.0, 255.0, 65535.0) if mode == "F" else (255.0, 65535.0)
    for full in scales:
        if peak <= full:
            return full
    return 0.0


def to_8bit(image, path: Any = "image", image_format: str | None = None):
    """A 16-bit, 32-bit integer or float image (Pillow modes I;16*, I, F) → 8-bit grayscale, scaled.

    Pillow's own ``convert("L")``/``convert("RGB")`` clips such pixels at 255 instead of scaling them
    (a 16-bit image turns almost all white), so they are scaled here before any other step: 16-bit
    images by 255/65535, 32-bit integer and float images by the smallest full scale that holds their
    pixels (0..1, 0..255 or 0..65535); other ranges, negative or non-finite pixels are refused.
    Every other mode passes through unchanged.
    """
    from PIL import Image

    mode = image.mode
    if not (mode.startswith("I;16") or mode in ("I", "F")):
        return image
    x = np.asarray(image, dtype=np.float64)
    low = float(x.min()) if x.size else 0.0
    peak = float(x.max()) if x.size else 0.0
    full = _full_scale(mode, image_format, peak) if math.isfinite(peak) and math.isfinite(low) else 0.0
    if low < 0 or full == 0.0:
        raise InputError(
            f"{path}: {mode} pixels range from {low:g} to {peak:g}, not 0..1, 0..255 or 0..65535",
            "save the image with 8- or 16-bit unsigned pixels",
        )
    return Image.fromarray(np.rint(x * (255.0 / full)).astype(np.uint8))


def pixels(image, spec: PreprocessSpec) -> np.ndarray:
    """Image (PIL, or an HxWxC uint8 or HxW uint16 array) → HxWxC uint8 pixel array: mode, size and channel order per ``spec``."""
    from PIL import Image

    if isinstance(image, np.ndarray):
        image = Image.fromarray(image)
    image = to_8bit(image)
    mode = "L" if spec.channels == "L" else "RGB"
    if image.mode != mode:
        image = image.convert(mode)
    if image.size != (spec.width, spec.height) and spec.resize == "keras":
        x = resize_like_keras(np.asarray(image), spec.height, spec.width)
    else:
        if image.size != (spec.width, spec.height):
            # Image.Resampling is Pillow >= 9.1; older Pillows (the Dev Board's python3-pil) name the filters on Image
            filters = getattr(Image, "Resampling", Image)
            image = image.resize((spec.width, spec.height), getattr(filters, spec.resize.upper()))
        x = np.asarray(image)
    if spec.channels == "L":
        x = x[..., None]
    elif spec.channels == "BGR":
        x = x[..., ::-1]
    return x


def _keras_axis(size_in: int, size_out: int):
    """Source rows (or columns) and weights of TensorFlow's ResizeBilinear with half-pixel centres."""
    src = (np.arange(size_out, dtype=np.float64) + 0.5) * (size_in / size_out) - 0.5
    floor = np.floor(src)
    lower = np.clip(floor, 0, size_in - 1).astype(np.intp)
    upper = np.clip(np.ceil(src), 0, size_in - 1).astype(np.intp)
    return lower, upper, (src - floor).astype(np.float32)


def resize_like_keras(x: np.ndarray, height: int, width: int) -> np.ndarray:
    """HxW[xC] uint8 pixels resized as Keras pipelines resize them: bilinear, half-pixel centres, no antialias.

    ``image_dataset_from_directory`` (``keras.ops.image.resize``, ``antialias=False``) and ``tf.image.resize``'s
    default compute this on float pixels; a model trained through them sees aliased images when they are
    shrunk a lot, and Pillow's filters (antialiased) cost it accuracy (benchmarks/resize_filter.py). Rounded
    to uint8 here (at most half a step from Keras's float value).
    """
    img = x.astype(np.float32)
    top, bottom, fy = _keras_axis(img.shape[0], height)
    left, right, fx = _keras_axis(img.shape[1], width)
    extra = (None,) * (img.ndim - 2)
    rows = img[top] + (img[bottom] - img[top]) * fy[(slice(None), None) + extra]
    out = rows[:, left] + (rows[:, right] - rows[:, left]) * fx[(None, slice(None)) + extra]
    return np.clip(np.round(out), 0, 255).astype(np.uint8)


def to_float(image, spec: PreprocessSpec) -> np.ndarray:
    """Image (PIL or HxWxC uint8 array) → float32 HxWxC tensor, normalized per ``spec``."""
    x = pixels(image, spec).astype(np.float32)
    return (x - np.asarray(spec.mean, np.float32)) / np.asarray(spec.std, np.float32)


def normalize_rgb(x: np.ndarray, spec: PreprocessSpec) -> np.ndarray:
    """(..., H, W, C) pixels in RGB (or L) order, already resized → what :func:`to_float` gives for ``spec``.

    Lets one decoded batch be normalized under several specs (quantize tries the conventions on it).
    """
    if spec.channels == "BGR":
        x = x[..., ::-1]
    return (x.astype(np.float32) - np.asarray(spec.mean, np.float32)) / np.asarray(spec.std, np.float32)


def quantize(x: np.ndarray, dtype: str, scale: float | None, zero_point: int | None) -> np.ndarray:
    """Float tensor → the model's input dtype: ``round(x / scale + zero_point)``, clipped."""
    if dtype in ("float32", "float16"):
        return x.astype(dtype)
    info = np.iinfo(dtype)
    q = np.rint(x / scale + (zero_point or 0)) if scale else np.rint(x)
    return np.clip(q, info.min, info.max).astype(dtype)


def dequantize(q: np.ndarray, scale: float | None, zero_point: int | None) -> np.ndarray:
    """Integer tensor → float32 with ``scale * (q - zero_point)``; float tensors pass through."""
    if not scale or q.dtype.kind == "f":
        return q.astype(np.float32)
    return (scale * (q.astype(np.int64) - (zero_point or 0))).astype(np.float32)


def _integer_shift(spec: PreprocessSpec, dtype: str, scale: float | None, zero_point: int | None) -> int | None:
    """The shift s when normalizing then quantizing is just ``pixels - s`` (0 for uint8, 128 for int8), else None.

    Like classify_image.py's shortcut (``|scale*std - 1| < 1e-5`` and ``|mean - zero_point| < 1e-5``):
    within those tolerances the float path rounds every 0..255 pixel to exactly the same integer.
    """
    shift = {"uint8": 0, "int8": 128}.get(dtype)
    if shift is None or not scale:
        return None
    zp = zero_point or 0
    if all(abs(scale * s - 1) < 1e-5 for s in spec.std) and all(abs(m - (zp + shift)) < 1e-5 for m in spec.mean):
        return shift
    return None


def prepare(image, spec: PreprocessSpec, dtype: str, scale: float | None, zero_point: int | None) -> np.ndarray:
    """Image → batch-of-one model input for an input of ``dtype`` with the given quantization."""
    shift = _integer_shift(spec, dtype, scale, zero_point)
    if shift is not None:  # same result as the float path, without the float round trip
        x = pixels(image, spec)
        return (x.astype(np.int16) - shift).astype(dtype)[None, ...] if shift else np.ascontiguousarray(x)[None, ...]
    return quantize(to_float(image, spec), dtype, scale, zero_point)[None, ...]


def prepare_file(
    path: str,
    spec: PreprocessSpec,
    dtype: str,
    scale: float | None,
    zero_point: int | None,
    shape: tuple[int, ...] | ImageInput | None = None,
) -> np.ndarray:
    """Image file → the model's input tensor (reshaped to ``shape`` when given, put channels-first when an
    :class:`ImageInput` says so); InputError when it cannot be read.

    What ``edgekit classify`` and the board runner both do with each image.
    """
    try:
        tensor = prepare(open_image(path), spec, dtype, scale, zero_point)
        if isinstance(shape, ImageInput):
            return shape.from_hwc(tensor)
        return tensor.reshape(shape) if shape is not None and tensor.shape != tuple(shape) else tensor
    except EdgekitError:
        raise
    except Exception as exc:  # Pillow plugins raise many types on hostile files
        raise InputError(
            f"{path}: cannot decode image ({type(exc).__name__}: {first_line(exc)})",
            "the file is damaged or not an image: save or copy it again",
        ) from None
