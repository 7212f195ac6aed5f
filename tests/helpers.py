"""Helpers shared by several test files (one place for each; test files import them from here)."""

from __future__ import annotations

import signal
from pathlib import Path

from edgekit.board.preprocess import spec_from_input_quantization
from tests.conftest import shared_file

MODEL = "mobilenet_v1_0.25_128_quant.tflite"  # Coral's MobileNet and its compiled twin
COMPILED = "mobilenet_v1_0.25_128_quant_edgetpu.tflite"
SPEC = spec_from_input_quantization(128, 128, 3, "uint8", 1 / 128, 128)  # what its input quantization implies


def make_bundle(target: Path, mean: tuple[float, ...] | None = None, std: tuple[float, ...] | None = None) -> Path:
    """A bundle of Coral's MobileNet pair and ImageNet labels, written by edgekit's own writer.

    ``mean``/``std`` record another preprocessing than the one the model's input implies.
    """
    from edgekit.board import manifest
    from edgekit.pipeline import build
    from edgekit.results.build import BundleInput, BundleManifest, BundleModels, BundleReports, BundleVersions

    spec = SPEC if mean is None else type(SPEC)(128, 128, mean=mean, std=std)
    doc = BundleManifest.new(
        models=BundleModels(MODEL, COMPILED),
        labels=manifest.LABELS_NAME,
        preprocess=spec,
        input=BundleInput((1, 128, 128, 3), "uint8", 1 / 128, 128),
        versions=BundleVersions("test", None, None),
        reports=BundleReports(None, None),
    )
    return build.write_bundle(
        target,
        {
            MODEL: shared_file(MODEL),
            COMPILED: shared_file(COMPILED),
            manifest.LABELS_NAME: shared_file("imagenet_labels.txt"),
        },
        doc,
    )


def default_stop_signals() -> None:
    """``preexec_fn`` of a child a test stops with a signal: SIGINT, SIGTERM and SIGHUP at their default action.

    A child inherits ignored signals: a suite started as ``nohup make test &`` (or by a CI runner that ignores
    SIGINT) would start every child with SIGHUP (and SIGINT) ignored, and edgekit rightly leaves an ignored signal
    ignored; a test that stops its child by a signal sets the dispositions it relies on in that child."""
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)


def with_quantization(model: bytes, tensor: int, scale: float | None = None, zero_point: int | None = None) -> bytes:
    """``model`` with the first scale and/or zero point of tensor ``tensor`` (main subgraph) overwritten in place,
    as a damaged or hostile file would hold them."""
    import struct

    from edgekit.board.flatbuffer import Reader

    r = Reader(model)
    root = r.table(r.deref(0, "root table"), "model")
    q = root.tables(2, "subgraphs")[0].tables(0, "tensors")[tensor].table(4, "quantization")
    out = bytearray(model)
    for slot, fmt, value in ((2, "f", scale), (3, "q", zero_point)):
        if value is not None:
            start, n = q.raw_vector(slot, struct.calcsize("<" + fmt), "quantization")
            assert n, "the tensor has no such vector to overwrite"
            struct.pack_into("<" + fmt, out, start, value)
    return bytes(out)
