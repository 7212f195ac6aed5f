"""Fixtures shared by the runtime-half tests."""

from __future__ import annotations

import pytest

#: A library name no machine has: loading it fails as a missing libedgetpu does.
ABSENT_EDGETPU_LIBRARY = "libedgetpu-made-absent-by-test.so.1"


@pytest.fixture()
def no_edgetpu(monkeypatch):
    """The Edge TPU runtime made unloadable through the backend's own hook (the library name it loads), so
    the CPU-fallback tests run on every machine, a Coral developer's with libedgetpu installed too."""
    from edgekit.board import backends

    monkeypatch.setattr(backends, "edgetpu_library", lambda system=None: ABSENT_EDGETPU_LIBRARY)
