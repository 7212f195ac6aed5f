"""Shared fixtures: the real Coral models in ../shared/testdata and marker-based skips."""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TESTDATA = Path(os.environ.get("EDGEKIT_TESTDATA", REPO.parent / "shared" / "testdata"))


def shared_file(name: str) -> Path:
    """A file from ../shared/testdata, or skip the test (with the reason) when it is absent."""
    p = TESTDATA / name
    if not p.exists():
        pytest.skip(f"real Coral test data not found: {p} (set EDGEKIT_TESTDATA)")
    return p


def shared_models(pattern: str = "*.tflite") -> list[Path]:
    return sorted(TESTDATA.glob(pattern)) if TESTDATA.is_dir() else []


@pytest.fixture(scope="session")
def testdata() -> Path:
    if not TESTDATA.is_dir():
        pytest.skip(f"real Coral test data not found: {TESTDATA} (set EDGEKIT_TESTDATA)")
    return TESTDATA


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    has_tf = importlib.util.find_spec("tensorflow") is not None
    has_compiler = bool(shutil.which(os.environ.get("EDGETPU_COMPILER", "edgetpu_compiler")))
    has_edgetpu = bool(os.environ.get("EDGEKIT_EDGETPU"))
    has_remote = bool(os.environ.get("EDGEKIT_REMOTE"))
    reasons = {
        "tf": (has_tf, "TensorFlow is not installed (pip install 'edgekit[convert]')"),
        "compiler": (has_compiler, "no real edgetpu_compiler on PATH (x86-64 Linux only; see README)"),
        "edgetpu": (has_edgetpu, "needs a real Edge TPU: set EDGEKIT_EDGETPU=1 where one is attached"),
        "remote": (has_remote, "needs a Coral board over SSH: set EDGEKIT_REMOTE=user@host"),
    }
    for item in items:
        for marker, (available, reason) in reasons.items():
            if marker in item.keywords and not available:
                item.add_marker(pytest.mark.skip(reason=reason))
