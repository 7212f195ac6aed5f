"""The interpreter factory: device grammar, backend choice, and the real delegate-loading failure."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import types

import pytest

from edgekit.board import backends as B
from edgekit.errors import DeviceError, MissingDependencyError, UsageError
from tests.conftest import shared_file
from tests.devices.conftest import ABSENT_EDGETPU_LIBRARY


@pytest.fixture(autouse=True)
def _no_delegate_probe(monkeypatch):
    """These tests drive stand-in backends that a child process cannot import: the crash guard, which proves
    a real package with a real library file in a child, has its own tests (test_delegate_probe.py). The library
    name then reaches the stand-ins as it is, on a machine with libedgetpu installed too."""
    from edgekit.board import delegate_probe

    monkeypatch.setenv("EDGEKIT_DELEGATE_PROBE", "0")
    monkeypatch.setattr(delegate_probe, "resolve_library", lambda *args, **kwargs: None)


# ------------------------------------------------------------------------------ device grammar
@pytest.mark.parametrize(
    "text, kind, index, option",
    [
        ("auto", "auto", None, None),
        ("cpu", "cpu", None, None),
        ("usb", "usb", None, "usb"),
        ("usb:1", "usb", 1, "usb:1"),
        ("pci", "pci", None, "pci"),
        ("pci:0", "pci", 0, "pci:0"),
        (":2", "any", 2, ":2"),
        (" USB:0 ", "usb", 0, "usb:0"),
        (None, "auto", None, None),
    ],
)
def test_device_grammar(text, kind, index, option):
    spec = B.parse_device(text)
    assert (spec.kind, spec.index, spec.delegate_option) == (kind, index, option)
    assert B.parse_device(str(spec)) == spec  # one grammar both ways


@pytest.mark.parametrize("text", ["tpu", "usb:", "usb:x", "pci:-1", "gpu", "usb0", "auto:1", "cpu:0", ":"])
def test_device_grammar_refuses_everything_else(text):
    with pytest.raises(UsageError, match="usb:N"):
        B.parse_device(text)


@pytest.mark.parametrize(
    "system, library", [("Linux", "libedgetpu.so.1"), ("Darwin", "libedgetpu.1.dylib"), ("Windows", "edgetpu.dll")]
)
def test_delegate_library_per_os(system, library):
    assert B.edgetpu_library(system) == library


def test_no_delegate_library_on_other_systems():
    with pytest.raises(DeviceError, match="--device cpu"):
        B.edgetpu_library("FreeBSD")


# ------------------------------------------------------------------------------ backend choice
def test_backend_follows_the_environment_and_preference_order():
    backend = B.select_backend()
    forced = os.environ.get(B.BACKEND_ENV)
    if forced:  # the tflite-runtime leg of `make test` sets EDGEKIT_BACKEND=tflite_runtime
        assert backend.name == forced
    elif importlib.util.find_spec("ai_edge_litert"):
        assert backend.name == "ai_edge_litert"
    assert backend.version != "unknown"


@pytest.mark.tf
def test_tensorflow_as_the_last_resort_warns_even_with_quiet(monkeypatch):
    """Only TensorFlow installed (the other packages hidden): it runs, and --quiet does not hide why it is slow."""
    from click.testing import CliRunner

    from edgekit.cli.app import cli

    if "tflite_runtime" in sys.modules:
        pytest.skip("importing tensorflow after tflite_runtime breaks tflite_runtime (toolchain.md pitfall 4)")
    monkeypatch.delenv(B.BACKEND_ENV, raising=False)
    monkeypatch.setattr(B, "_CACHE", {})
    monkeypatch.setattr(B, "module_available", lambda name: name == "tensorflow")
    monkeypatch.setattr(B, "google_pycoral_available", lambda: False)
    result = CliRunner().invoke(
        cli,
        [
            "classify",
            str(shared_file("cat.bmp")),
            "-k",
            "1",
            "--quiet",
            "--json",
            "-m",
            str(shared_file("mobilenet_v1_0.25_128_quant.tflite")),
        ],
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["backend"] == "tensorflow"
    assert "warning: no TFLite interpreter package found" in result.stderr
    assert "pip install ai-edge-litert" in result.stderr
    monkeypatch.setattr(B, "_CACHE", {})
    assert B.select_backend("tensorflow").warning is None  # asked for by name: no warning


def test_unknown_backend_name_is_refused():
    with pytest.raises(UsageError, match="EDGEKIT_BACKEND"):
        B.select_backend("onnxruntime")


def test_forced_backend_that_is_missing_says_so(monkeypatch):
    missing = next((n for n in ("tflite_runtime", "ai_edge_litert") if importlib.util.find_spec(n) is None), None)
    if missing is None:
        pytest.skip("both interpreter packages are installed here")
    monkeypatch.setattr(B, "_CACHE", {})
    with pytest.raises(MissingDependencyError, match=missing):
        B.select_backend(missing)


def test_tflite_runtime_with_numpy_2_is_one_error_with_the_fix(monkeypatch):
    """A stand-in tflite_runtime 2.14.0 (its native interpreter would print numpy's page of warning and
    traceback before failing): refused before it is touched, forced or chosen, exit 4 with the fix."""
    import numpy
    from click.testing import CliRunner

    from edgekit.cli.app import cli

    if int(numpy.__version__.split(".")[0]) < 2:
        pytest.skip("numpy 1 here: tflite-runtime runs")
    fake = types.ModuleType("tflite_runtime")  # no tflite_runtime.interpreter: importing it would fail the test
    fake.__version__ = "2.14.0"
    monkeypatch.setitem(sys.modules, "tflite_runtime", fake)
    monkeypatch.setattr(B, "_CACHE", {})
    with pytest.raises(MissingDependencyError, match="tflite-runtime 2.14.0 cannot run with numpy") as info:
        B.select_backend("tflite_runtime")
    assert "numpy<2" in info.value.hint
    monkeypatch.setattr(B, "module_available", lambda name: name == "tflite_runtime")  # the only package here
    monkeypatch.delenv(B.BACKEND_ENV, raising=False)
    result = CliRunner().invoke(
        cli, ["classify", str(shared_file("cat.bmp")), "-m", str(shared_file("mobilenet_v1_0.25_128_quant.tflite"))]
    )
    assert result.exit_code == MissingDependencyError.exit_code
    assert result.stderr.startswith("error: tflite-runtime 2.14.0 cannot run with numpy") and "numpy<2" in result.stderr
    assert result.stderr.count("\n") == 1


def test_pypi_pycoral_gis_tool_is_not_mistaken_for_googles(tmp_path, monkeypatch):
    """A stand-in for PyPI's unrelated 'pycoral' (one pycoral/pycoral.py): it must not count as Coral's."""
    fake = tmp_path / "pycoral"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise RuntimeError('must not be imported')\n")
    (fake / "pycoral.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert B.google_pycoral_available() is False
    (fake / "utils").mkdir()
    (fake / "utils" / "edgetpu.py").write_text("")
    assert B.google_pycoral_available() is True


# ------------------------------------------------------------------------------ delegate loading
INTERPRETER_PACKAGES = [
    pytest.param("ai_edge_litert", id="ai_edge_litert"),
    pytest.param("tflite_runtime", id="tflite_runtime"),
    pytest.param("tensorflow", id="tensorflow", marks=pytest.mark.tf),
]


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the raw call's Delegate.__del__
@pytest.mark.parametrize("name", INTERPRETER_PACKAGES)
def test_real_load_delegate_error_becomes_an_actionable_device_error(name):
    if importlib.util.find_spec(name) is None:
        pytest.skip(f"{name} is not installed in this environment")
    if name == "tensorflow" and "tflite_runtime" in sys.modules:
        pytest.skip("importing tensorflow after tflite_runtime breaks tflite_runtime (toolchain.md pitfall 4)")
    backend = B._load_backend(name)
    missing = ABSENT_EDGETPU_LIBRARY  # a name no machine has: libedgetpu may well be installed here
    with pytest.raises(OSError, match=f"{missing}: cannot open shared object file"):
        backend.load_delegate(missing, {"device": "usb"})  # what the package itself raises
    with pytest.raises(DeviceError) as info:
        B.load_edgetpu_delegate(backend, B.parse_device("usb:0"), missing)
    err = info.value
    assert f"{missing} is not installed" in err.message and "cannot open shared object file" in err.message
    assert "sudo apt-get install libedgetpu1-std" in err.hint and "--device cpu" in err.hint


def test_failed_delegate_leaves_no_noise_on_stderr():
    """The packages' Delegate.__del__ prints 'Exception ignored ... _library' after a failed load; we hide it."""
    code = (
        "import gc\nfrom edgekit.board import backends as B\n"
        f"B.edgetpu_library = lambda system=None: {ABSENT_EDGETPU_LIBRARY!r}\n"
        "try:\n    B.load_edgetpu_delegate(B.select_backend(), B.parse_device('usb'))\n"
        "except Exception as e:\n    print(type(e).__name__)\ngc.collect()\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "DeviceError"
    assert "Exception ignored" not in proc.stderr and "_library" not in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    "exc, system, says, fix",
    [
        # pycoral#108 / edgetpu#694: the library loads but finds no usable device.
        (
            ValueError("Failed to load delegate from libedgetpu.so.1\n"),
            "Linux",
            "installed but found no usable Edge TPU",
            "plugdev",
        ),
        (
            ValueError("Failed to load delegate from edgetpu.dll"),
            "Windows",
            "installed but found no usable Edge TPU",
            "edgekit devices",
        ),
        (
            OSError("libedgetpu.so.1: cannot open shared object file: No such file or directory"),
            "Linux",
            "not installed",
            "libedgetpu1-std",
        ),
        (
            OSError("Could not find module 'edgetpu.dll' (or one of its dependencies)."),
            "Windows",
            "not installed",
            "install.bat",
        ),
        (OSError("dlopen(libedgetpu.1.dylib, 6): image not found"), "Darwin", "not installed", "libedgetpu.1.dylib"),
    ],
)
def test_delegate_errors_name_the_cause_and_the_fix(exc, system, says, fix):
    err = B.explain_delegate_error(exc, B.edgetpu_library(system), B.parse_device("usb"), system)
    assert says in err.message and fix in err.hint
    assert err.exit_code == 9


# ------------------------------------------------------------------------------ open_model
def test_auto_on_a_cpu_model_runs_on_the_cpu_with_a_reason():
    opened = B.open_model(shared_file("mobilenet_v1_0.25_128_quant.tflite"), "auto")
    assert opened.device == "cpu"
    assert any("not compiled for the Edge TPU" in n and "_edgetpu.tflite" in n for n in opened.notes)


def test_cpu_on_a_compiled_model_runs_its_twin():
    compiled = shared_file("mobilenet_v1_0.25_128_quant_edgetpu.tflite")
    opened = B.open_model(compiled, "cpu")
    assert opened.model_path == str(shared_file("mobilenet_v1_0.25_128_quant.tflite")) and opened.device == "cpu"


def test_auto_with_a_device_but_no_runtime_falls_back_naming_the_runtime(no_edgetpu):
    """A device is listed (a stand-in list: there is none here) but libedgetpu is missing: say that, not 'no device'."""
    opened = B.open_model(
        shared_file("mobilenet_v1_0.25_128_quant_edgetpu.tflite"), "auto", find_devices=lambda: ["stand-in usb:0"]
    )
    assert opened.device == "cpu" and opened.model_path.endswith("mobilenet_v1_0.25_128_quant.tflite")
    assert f"{B.edgetpu_library()} is not installed" in opened.notes[-1] and "edgekit doctor" in opened.notes[-1]


def test_explicit_edgetpu_on_a_cpu_model_is_refused():
    with pytest.raises(UsageError, match="not compiled"):
        B.open_model(shared_file("mobilenet_v1_0.25_128_quant.tflite"), "pci:0")


def test_explicit_edgetpu_without_runtime_does_not_fall_back(no_edgetpu):
    with pytest.raises(DeviceError, match="libedgetpu"):
        B.open_model(shared_file("mobilenet_v1_0.25_128_quant_edgetpu.tflite"), "usb")


def test_compiled_model_on_a_plain_interpreter_explains_itself():
    backend = B.select_backend()
    with pytest.raises(DeviceError, match="compiled for the Edge TPU"):
        backend.interpreter(str(shared_file("mobilenet_v1_0.25_128_quant_edgetpu.tflite")))


# ------------------------------------------------------------------------------ Edge TPU plumbing
class _StandInInterpreter:
    """A stand-in for an interpreter with the Edge TPU delegate (no Edge TPU here): records its arguments."""

    made: list[dict] = []

    def __init__(self, **kwargs):
        _StandInInterpreter.made.append(kwargs)

    def allocate_tensors(self) -> None:
        pass


def _stand_in_backend(calls: list) -> B.Backend:
    def load_delegate(library, options=None):
        calls.append((library, options))
        return "delegate"

    _StandInInterpreter.made = []
    return B.Backend("stand-in", "0", _StandInInterpreter, load_delegate)


@pytest.mark.parametrize(
    "device, option, label",
    [
        ("usb:1", {"device": "usb:1"}, "usb:1"),
        ("auto", {}, "edgetpu"),
        (":0", {"device": ":0"}, ":0"),
        ("pci", {"device": "pci"}, "pci"),
    ],
)
def test_edgetpu_path_passes_pycorals_device_option_to_the_delegate(device, option, label):
    """Plumbing only: which library and options reach load_delegate, and what the run reports."""
    calls: list = []
    opened = B.open_model(
        shared_file("mobilenet_v1_0.25_128_quant_edgetpu.tflite"), device, backend=_stand_in_backend(calls)
    )
    assert calls == [(B.edgetpu_library(), option)]
    assert _StandInInterpreter.made[0]["experimental_delegates"] == ["delegate"]
    assert opened.device == label and opened.model_path.endswith("_edgetpu.tflite") and opened.notes == []


RUNTIME_MISMATCH = (
    "Failed to prepare for TPU. Failed precondition: Package requires runtime version (14), which "
    "is newer than this runtime version (13).Node number 2 (EdgeTpuDelegateForCustomOp) failed to "
    "prepare."
)


class _StandInOldRuntime(_StandInInterpreter):
    """A stand-in for an interpreter whose libedgetpu (runtime 13) is older than the model's compiler wanted."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.on_edgetpu = "experimental_delegates" in kwargs

    def allocate_tensors(self) -> None:
        if self.on_edgetpu:  # the real message (edgetpu.md §3; google-coral/edgetpu#435)
            raise RuntimeError(RUNTIME_MISMATCH)


@pytest.mark.parametrize("pycoral", [False, True], ids=["load_delegate", "pycoral"])
def test_a_model_compiled_for_a_newer_runtime_says_which_and_how_to_recompile(pycoral):
    compiled = shared_file("mobilenet_v1_0.25_128_quant_edgetpu.tflite")

    def make_interpreter(path, device=None):  # pycoral's: the delegate is already in
        return _StandInOldRuntime(experimental_delegates=["edgetpu"])

    backend = B.Backend(
        "stand-in",
        "0",
        _StandInOldRuntime,
        lambda library, options=None: "delegate",
        make_edgetpu_interpreter=make_interpreter if pycoral else None,
    )
    with pytest.raises(DeviceError) as info:
        B.open_model(compiled, "usb", backend=backend)
    assert info.value.message == f"{compiled.name} needs Edge TPU runtime 14 but the libedgetpu here is runtime 13"
    assert "edgekit compile --min-runtime 13" in info.value.hint and info.value.exit_code == 9
    opened = B.open_model(compiled, "auto", backend=backend)  # auto: the CPU model beside it, and why
    assert opened.device == "cpu" and "needs Edge TPU runtime 14" in opened.notes[-1]


def test_pycoral_backend_goes_through_its_make_interpreter():
    seen: list = []

    def make_interpreter(path, device=None):
        seen.append((path, device))
        return _StandInInterpreter()

    backend = B.Backend(
        "pycoral", "2.0.0", _StandInInterpreter, lambda *a: None, make_edgetpu_interpreter=make_interpreter
    )
    opened = B.open_model(shared_file("mobilenet_v1_0.25_128_quant_edgetpu.tflite"), "usb:0", backend=backend)
    assert seen == [(str(shared_file("mobilenet_v1_0.25_128_quant_edgetpu.tflite")), "usb:0")]
    assert opened.device == "usb:0"


@pytest.mark.edgetpu
def test_on_a_real_edgetpu_the_compiled_model_agrees_with_the_cpu_model():
    from edgekit.devices.classify import classify

    images = [str(shared_file("cat.bmp")), str(shared_file("grace_hopper.bmp"))]
    tpu = classify(images, shared_file("mobilenet_v1_0.25_128_quant_edgetpu.tflite"), k=1)
    cpu = classify(images, shared_file("mobilenet_v1_0.25_128_quant.tflite"), k=1)
    assert tpu.device != "cpu"
    for a, b in zip(tpu.results, cpu.results):
        assert abs(a.top[0]["score"] - b.top[0]["score"]) <= 2 / 256


def test_cpu_interpreters_use_the_cores_unless_told(monkeypatch):
    """LiteRT runs one thread by default; edgekit asks for one per core (at most 4), or --threads."""
    import os

    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    model = shared_file("mobilenet_v1_0.25_128_quant.tflite")
    B.open_model(model, "cpu", backend=_stand_in_backend([]))
    assert _StandInInterpreter.made[-1]["num_threads"] == 4
    B.open_model(model, "cpu", backend=_stand_in_backend([]), num_threads=1)
    assert _StandInInterpreter.made[-1]["num_threads"] == 1
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert B.default_threads() == 1


#: Paths whose text pathlib rewrites (``./``, ``//``, a trailing ``/``, ``.`` parts) or whose name has no stem or
#: suffix as os.path would split it: the plain-model route (no pathlib, for start-up) must answer as pathlib does.
ODD_PATHS = [
    "m.tflite",
    "dir/m.tflite",
    "/abs/m.tflite",
    "./m.tflite",
    "dir//m.tflite",
    "dir/./m.tflite",
    "dir/m.tflite/",
    "//m.tflite",
    "m",
    "m.",
    ".tflite",
    "..tflite",
    "a.b.tflite",
    "../m.tflite",
    "m_edgetpu.tflite",
    "_edgetpu.tflite",
    "dir/x_edgetpu",
    "a b/é.tflite",
    ".",
    "",
    "/",
]


@pytest.mark.parametrize("text", ODD_PATHS)
def test_a_model_path_without_pathlib_names_what_pathlib_names(text):
    from pathlib import Path

    from edgekit.board.backends import _compiled_twin, _plain_path

    plain = _plain_path(text)
    if plain is None:
        return  # pathlib then opens it, as before
    path = Path(text)
    assert str(path) == plain
    twin = path.with_name(path.stem + "_edgetpu" + path.suffix)
    assert _compiled_twin(plain) == (path.name, twin.name, twin.is_file()) == _compiled_twin(path)


@pytest.mark.parametrize("text", [t for t in ODD_PATHS if t not in (".", "", "/", "dir/m.tflite/")])  # no file's name
def test_the_sidecars_looked_for_without_pathlib_are_pathlib_s(text):
    import os
    from pathlib import Path

    from edgekit.board.backends import cpu_twin
    from edgekit.devices.classify import _SIDECAR_SUFFIX, _sidecars

    expected = {os.path.normpath(p.with_name(p.stem + _SIDECAR_SUFFIX)) for p in (Path(text), cpu_twin(text))}
    assert {os.path.normpath(p) for p in _sidecars(text)} == expected
