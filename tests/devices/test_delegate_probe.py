"""A libedgetpu that crashes the process it is loaded into must not take edgekit's process with it.

The stand-ins are real shared libraries compiled here with the system C compiler, loaded through the
interpreter package's own external-delegate entry point (``tflite_plugin_create_delegate``), as
libedgetpu is: one dereferences NULL there (the segfault a mismatched libedgetpu/TFLite pair gives),
one returns a delegate that claims no op. They test edgekit's plumbing, not the Edge TPU.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys

import pytest

from edgekit.devices import backends as B
from edgekit.devices import delegate_probe
from edgekit.errors import DeviceError
from tests.conftest import REPO, shared_file

CRASHING = r"""
#include <stddef.h>
void* tflite_plugin_create_delegate(char** keys, char** values, size_t n, void (*report)(const char*)) {
  volatile int* p = NULL; *p = 42; return NULL;
}
void tflite_plugin_destroy_delegate(void* d) {}
"""
# A TfLiteDelegate whose Prepare (the second pointer) claims nothing: the model runs on the CPU kernels.
NO_OP = r"""
#include <stdlib.h>
#include <stddef.h>
static int prepare(void* context, void* delegate) { return 0; }
void* tflite_plugin_create_delegate(char** keys, char** values, size_t n, void (*report)(const char*)) {
  void** d = calloc(1, 256); d[1] = (void*)prepare; return d;
}
void tflite_plugin_destroy_delegate(void* d) { free(d); }
"""


@pytest.fixture(scope="module")
def libraries(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler to build the stand-in libedgetpu libraries (apt-get install gcc)")
    folder = tmp_path_factory.mktemp("libs")
    built = {}
    for name, source in (("crashing", CRASHING), ("no_op", NO_OP)):
        (folder / f"{name}.c").write_text(source)
        subprocess.run([cc, "-shared", "-fPIC", "-o", str(folder / f"lib{name}.so"), str(folder / f"{name}.c")],
                       check=True)
        built[name] = str(folder / f"lib{name}.so")
    return built


@pytest.fixture()
def pair(tmp_path, monkeypatch):
    """A compiled model beside its CPU twin, and a cache of pair verdicts of this test's own."""
    for name in ("mobilenet_v1_0.25_128_quant_edgetpu.tflite", "mobilenet_v1_0.25_128_quant.tflite"):
        shutil.copy(shared_file(name), tmp_path / name)
    monkeypatch.setenv(delegate_probe.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(delegate_probe.PROBE_ENV, raising=False)
    return tmp_path / "mobilenet_v1_0.25_128_quant_edgetpu.tflite"


def _use(monkeypatch, library):
    monkeypatch.setattr(B, "edgetpu_library", lambda system=None: library)


def test_without_the_probe_the_crashing_library_kills_the_process(libraries, pair):
    """What users of a mismatched pair see today: the process dies (no error line, no exit code of ours)."""
    script = ("import sys\nfrom edgekit.devices import backends as B\n"
              f"B.edgetpu_library = lambda system=None: {libraries['crashing']!r}\n"
              "B.open_model(sys.argv[1], 'auto')\n")
    env = {"PYTHONPATH": str(REPO), delegate_probe.PROBE_ENV: "0", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", script, str(pair)], capture_output=True, env=env, timeout=120)
    assert done.returncode == -signal.SIGSEGV


def test_a_crashing_pair_falls_back_to_the_cpu_twin_with_one_line_and_is_remembered(libraries, pair, monkeypatch):
    _use(monkeypatch, libraries["crashing"])
    opened = B.open_model(pair, "auto")
    assert opened.device == "cpu" and opened.model_path.endswith("mobilenet_v1_0.25_128_quant.tflite")
    note = opened.notes[-1]
    assert f"{libraries['crashing']} crashes with {opened.backend.name}" in note and "SIGSEGV" in note
    assert "edgekit doctor" in note
    cache = json.loads((pair.parent / "cache" / delegate_probe.CACHE_FILE).read_text())
    assert [v["state"] for v in cache.values()] == ["crashed"]

    def no_child(*args, **kwargs):
        raise AssertionError("a remembered pair is not probed again")

    monkeypatch.setattr(delegate_probe.subprocess, "run", no_child)
    again = B.open_model(pair, "auto")
    assert again.device == "cpu" and "remembered from an earlier run" in again.notes[-1]


def test_an_explicit_edge_tpu_with_a_crashing_pair_is_a_device_error(libraries, pair, monkeypatch):
    _use(monkeypatch, libraries["crashing"])
    with pytest.raises(DeviceError) as caught:
        B.open_model(pair, "usb")
    assert "crashes with" in caught.value.message and "--device cpu" in caught.value.hint
    assert "feranick/libedgetpu" in caught.value.hint and caught.value.exit_code == 9


def test_an_ordinary_failure_is_not_remembered_and_gives_its_own_error(libraries, pair, monkeypatch):
    _use(monkeypatch, libraries["no_op"])   # loads, but cannot run the Edge TPU custom op
    opened = B.open_model(pair, "auto")
    assert opened.device == "cpu" and "compiled for the Edge TPU and cannot run on the CPU" in opened.notes[-1]
    assert not (pair.parent / "cache" / delegate_probe.CACHE_FILE).exists()


def test_a_working_pair_is_proven_once_then_trusted(libraries, pair, monkeypatch):
    cpu_model = str(pair.parent / "mobilenet_v1_0.25_128_quant.tflite")
    backend = B.select_backend()
    first = delegate_probe.prove(backend.name, backend.version, libraries["no_op"], libraries["no_op"], cpu_model, None)
    assert (first.state, first.cached) == ("ok", False)
    second = delegate_probe.prove(backend.name, backend.version, libraries["no_op"], libraries["no_op"], cpu_model, None)
    assert (second.state, second.cached) == ("ok", True)
    # another version of the package (or a replaced library) is another pair: proven again
    third = delegate_probe.prove(backend.name, backend.version + "+other", libraries["no_op"], libraries["no_op"],
                                 cpu_model, None)
    assert third.cached is False


def test_the_probe_is_off_with_its_variable(libraries, pair, monkeypatch):
    _use(monkeypatch, libraries["no_op"])
    monkeypatch.setenv(delegate_probe.PROBE_ENV, "0")

    def no_child(*args, **kwargs):
        raise AssertionError("EDGEKIT_DELEGATE_PROBE=0 starts no test process")

    monkeypatch.setattr(delegate_probe.subprocess, "run", no_child)
    opened = B.open_model(pair, "auto")   # loaded in-process straight away (and fails as it does here)
    assert opened.device == "cpu" and "cannot run on the CPU" in opened.notes[-1]
