"""The real exports in tests/fixtures/exports (made once by make_exports.py there) are the files the manifest
describes: every committed file is listed with its sha256 and size, nothing listed is missing, the whole set stays
within its 5 MB budget, and the synthetic val set the figures were measured on regenerates bit for bit from
edgekit's own writer (so the tests can score the exports on it without committing images)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

EXPORTS = Path(__file__).resolve().parent / "fixtures" / "exports"
MANIFEST = json.loads((EXPORTS / "manifest.json").read_text())
BUDGET = 5 * 1024 * 1024  # 4 MB before YOLO11/YOLO26 were exported by both routes at 256 and 640
NOT_LISTED = {"manifest.json", "make_exports.py"}


def test_every_committed_file_is_in_the_manifest_and_every_listed_file_is_there():
    on_disk = {p.name for p in EXPORTS.iterdir() if p.is_file() and p.name not in NOT_LISTED}
    assert on_disk == set(MANIFEST["files"])


@pytest.mark.parametrize("name", sorted(MANIFEST["files"]))
def test_sha256_and_size_match_the_manifest(name):
    data = (EXPORTS / name).read_bytes()
    entry = MANIFEST["files"][name]
    assert len(data) == entry["bytes"]
    assert hashlib.sha256(data).hexdigest() == entry["sha256"]


def test_total_size_within_budget():
    assert sum(p.stat().st_size for p in EXPORTS.rglob("*") if p.is_file()) <= BUDGET


def test_manifest_names_the_versions_and_the_figures():
    versions = MANIFEST["versions"]
    for tool in ("python", "torch", "ultralytics", "onnx2tf", "litert-torch", "ai-edge-quantizer", "tensorflow"):
        assert versions.get(tool), tool
    for name, entry in MANIFEST["files"].items():
        if "architecture" in entry:  # a detector: yolo val's figures on the val set
            assert 0 <= entry["yolo_val"]["mAP50-95"] <= entry["yolo_val"]["mAP50"] <= 1, name
        elif "exporter" in entry:  # a classifier: top-1 on the held-out digits
            assert 0 <= entry["top1_heldout"] <= 1, name


def regenerate_val(folder: Path) -> Path:
    """The val set the detectors were scored on, regenerated with the manifest's parameters."""
    from edgekit.detection.data import make_shapes

    s, v = MANIFEST["shapes"], MANIFEST["shapes"]["val"]
    make_shapes(
        folder,
        n_images=v["n_images"],
        size=tuple(s["size"]),
        seed=v["seed"],
        min_side=s["min_side"],
        max_objects=s["max_objects"],
        empty_every=s["empty_every"],
    )
    return folder


def val_digest(folder: Path) -> dict:
    import numpy as np
    from PIL import Image

    labels, pixels = hashlib.sha256(), hashlib.sha256()
    for f in sorted((folder / "labels").glob("*.txt")):
        labels.update(f.name.encode() + b"\0" + f.read_bytes())
    for f in sorted((folder / "images").glob("*.png")):
        pixels.update(np.asarray(Image.open(f).convert("RGB")).tobytes())
    return {"labels_sha256": labels.hexdigest(), "pixels_sha256": pixels.hexdigest()}


def test_val_set_regenerates_bit_for_bit(tmp_path):
    got = val_digest(regenerate_val(tmp_path / "val"))
    want = MANIFEST["shapes"]["val"]
    assert got == {"labels_sha256": want["labels_sha256"], "pixels_sha256": want["pixels_sha256"]}
