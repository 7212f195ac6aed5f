"""The interpreter factory: which TFLite interpreter package runs a model, on which device.

Backends, in order of preference (``EDGEKIT_BACKEND=<name>`` forces one):

- ``pycoral``: Google's pycoral from Coral's apt repo or wheels (never the unrelated PyPI package
  of the same name, which has no ``pycoral/utils/edgetpu.py``); Edge TPU models go through its
  ``make_interpreter``.
- ``ai_edge_litert``: LiteRT, the maintained successor of tflite-runtime.
- ``tflite_runtime``: the older standalone package (what Coral boards ship).
- ``tensorflow``: ``tensorflow.lite``, with a warning. This is the only place the runtime half may
  import TensorFlow, lazily, as a last resort.

Devices use pycoral's grammar, parsed once by :func:`parse_device`: ``auto``, ``cpu``, ``usb``,
``usb:N``, ``pci``, ``pci:N``, ``:N``. :func:`open_model` decides where a model runs and why.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import sys
import time
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Tuple, Union

from edgekit.board.latency import default_threads
from edgekit.errors import (
    RUNTIME_MISMATCH,
    Caution,
    DeviceError,
    InputError,
    MissingDependencyError,
    UsageError,
    first_line,
    printable,
)

if TYPE_CHECKING:  # shapes for type checkers only: typing.TypedDict is Python 3.8, a board runs 3.7
    from pathlib import Path  # imported where used: a plain model opens without it (benchmarks/startup.md)
    from typing import TypedDict  # novermin

    import numpy as np

    from edgekit.results.benchmark import BenchmarkResult

    class TensorDetails(TypedDict):
        """One entry of the interpreter's ``get_input_details()`` / ``get_output_details()`` (all three packages).

        LiteRT's format, not edgekit's (no document of edgekit's, so no record): this types what the package returns."""

        name: str
        index: int
        shape: np.ndarray
        shape_signature: np.ndarray
        dtype: type
        quantization: Tuple[float, int]  # (scale, zero point); (0.0, 0) when not quantized
        quantization_parameters: Dict[str, np.ndarray]  # scales, zero_points, quantized_dimension
        sparsity_parameters: Dict[str, object]


BACKENDS = ("pycoral", "ai_edge_litert", "tflite_runtime", "tensorflow")
BACKEND_ENV = "EDGEKIT_BACKEND"

# pycoral/utils/edgetpu.py: the Edge TPU delegate library per OS.
EDGETPU_LIBRARIES = {"Linux": "libedgetpu.so.1", "Darwin": "libedgetpu.1.dylib", "Windows": "edgetpu.dll"}

DEVICE_GRAMMAR = "auto, cpu, usb, usb:N, pci, pci:N or :N"
_DEVICE_RE = re.compile(r"^(?:(auto|cpu)|(usb|pci)(?::(\d+))?|:(\d+))$")


# ------------------------------------------------------------------------------------ packages
# The runner deploy ships to a board has their twins (its probe runs before this module is there): the
# board and the host find packages the same way (tests/test_structure.py checks the twins are equal).
def module_available(name: str) -> bool:
    """True when ``name`` is installed, found without importing it (a failing import hook counts as absent)."""
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def google_pycoral_available() -> bool:
    """True for Google's pycoral (has ``pycoral/utils/edgetpu.py``), not the unrelated PyPI package of that
    name; without importing anything."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("pycoral")
    except (ImportError, ValueError):
        return False
    locations = (spec and spec.submodule_search_locations) or []
    return any(os.path.isfile(os.path.join(loc, "utils", "edgetpu.py")) for loc in locations)


# ------------------------------------------------------------------------------------ devices
@dataclass(frozen=True)
class DeviceSpec:
    """A parsed ``--device``: kind is auto, cpu, usb, pci or any (``:N``); index is N or None."""

    kind: str
    index: int | None = None

    @property
    def wants_edgetpu(self) -> bool:
        return self.kind in ("usb", "pci", "any")

    @property
    def delegate_option(self) -> str | None:
        """The ``device`` option of the Edge TPU delegate (None: any Edge TPU)."""
        if self.kind in ("auto", "cpu"):
            return None
        prefix = "" if self.kind == "any" else self.kind
        return prefix if self.index is None else f"{prefix}:{self.index}"

    def __str__(self) -> str:
        return self.kind if self.kind in ("auto", "cpu") else str(self.delegate_option)


def parse_device(text: str | None) -> DeviceSpec:
    """Parse pycoral's device grammar; raise UsageError for anything else."""
    m = _DEVICE_RE.match((text or "auto").strip().lower())
    if not m:
        raise UsageError(f"unknown device {text!r}", f"use one of {DEVICE_GRAMMAR}")
    plain, bus, bus_index, any_index = m.groups()
    if plain:
        return DeviceSpec(plain)
    if bus:
        return DeviceSpec(bus, int(bus_index) if bus_index is not None else None)
    return DeviceSpec("any", int(any_index))


def current_system() -> str:
    """What ``platform.system()`` says, without importing ``platform`` (it costs start-up time)."""
    known = {"linux": "Linux", "darwin": "Darwin", "win32": "Windows", "cygwin": "Windows"}
    if sys.platform in known:
        return known[sys.platform]
    import platform

    return platform.system()


def edgetpu_library(system: str | None = None) -> str:
    """The file name of the Edge TPU delegate library on this OS (the running one by default)."""
    system = system or current_system()
    try:
        return EDGETPU_LIBRARIES[system]
    except KeyError:
        raise DeviceError(
            f"the Edge TPU runtime does not exist for {system}", "run on the CPU with --device cpu"
        ) from None


# ----------------------------------------------------------------------------------- backends
@dataclass
class Backend:
    """One interpreter package: its ``Interpreter`` class and ``load_delegate`` function."""

    name: str
    version: str
    interpreter_cls: Any
    load_delegate: Callable[..., Any]
    make_edgetpu_interpreter: Callable[..., Any] | None = None  # pycoral's make_interpreter
    warning: Caution | None = None  # for the user: tensorflow.lite chosen for lack of better

    def interpreter(
        self,
        model_path: str,
        delegates: list | None = None,
        num_threads: int | None = None,
        content: bytes | None = None,
    ) -> Any:
        """A CPU (or delegated) interpreter with tensors allocated (of the file, or of ``content``, the
        model's bytes, which ``model_path`` then only names); a model that cannot load raises."""
        from edgekit.board.quant_params import refuse_bad_quantization

        refuse_bad_quantization(content if content is not None else model_path, printable(str(model_path)))
        kwargs: Dict[str, Union[str, bytes, int, List[Any]]] = (
            {"model_content": content} if content is not None else dict(_model_source(model_path))
        )
        if delegates:
            kwargs["experimental_delegates"] = delegates
        if num_threads:
            kwargs["num_threads"] = num_threads
        try:
            with _quiet_native_stderr():
                interp = self.interpreter_cls(**kwargs)
                interp.allocate_tensors()
        except (ValueError, RuntimeError, SystemError, AttributeError) as exc:
            raise self._explain_load_error(model_path, exc) from None
        return interp

    def _explain_load_error(self, model_path: str, exc: Exception) -> Exception:
        text = str(exc)
        if "edgetpu-custom-op" in text:
            return DeviceError(
                f"{model_path}: the model is compiled for the Edge TPU and cannot run on the CPU",
                "pass the CPU model it was compiled from instead",
            )
        return InputError(
            f"{model_path}: the {self.name} interpreter cannot load the model ({first_line(exc)})",
            "deploy the bundle again; an interpreter older than the model's ops needs an update"
            if ON_BOARD
            else "check it with `edgekit inspect`; a damaged file must be copied or exported again",
        )


def _model_source(model_path: str | os.PathLike) -> Dict[str, Union[str, bytes]]:
    """``model_path=`` for the interpreter, or ``model_content=`` (the file's bytes) for a path that is not
    UTF-8: the interpreter packages pass the path to C++ as UTF-8 and fail on the undecodable bytes of such
    a name (PEP 383 surrogates)."""
    text = os.fspath(model_path) if not isinstance(model_path, bytes) else os.fsdecode(model_path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        from pathlib import Path

        try:
            return {"model_content": Path(text).read_bytes()}
        except OSError as exc:
            raise InputError(
                f"cannot read {printable(text)}: {exc.strerror or exc}", "check the file's permissions"
            ) from None
    return {"model_path": text}


_NATIVE_NOISE = ("INFO: Created TensorFlow Lite XNNPACK delegate for CPU.",)


@contextlib.contextmanager
def _quiet_native_stderr() -> Iterator[None]:
    """Drop the runtime's "INFO: Created ... XNNPACK delegate" line that its C++ code writes to fd 2.

    Everything else the native code writes is passed on. The pipe's write end is non-blocking,
    so a flood of native output can be cut short but can never hang the interpreter.
    """
    try:
        fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # stderr replaced (tests, notebooks): nothing to filter
        fd = -1
    if fd < 0 or os.name != "posix":  # non-blocking pipes need POSIX (Windows only from Python 3.12)
        yield
        return
    sys.stderr.flush()
    saved = os.dup(fd)
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    os.dup2(write_end, fd)
    os.close(write_end)
    try:
        yield
    finally:
        os.dup2(saved, fd)
        os.close(saved)
        os.set_blocking(read_end, False)
        chunks = []
        try:
            for chunk in iter(lambda: os.read(read_end, 65536), b""):
                chunks.append(chunk)
        except BlockingIOError:
            pass
        os.close(read_end)
        kept = [
            line
            for line in b"".join(chunks).decode(errors="replace").splitlines()
            if line.strip() and line.strip() not in _NATIVE_NOISE
        ]
        if kept:
            sys.stderr.write("\n".join(kept) + "\n")


def _module_version(module: Any, dist: str) -> str:
    version = getattr(module, "__version__", None)
    if version:
        return str(version)
    try:  # importlib.metadata (Python 3.8+) scans site-packages: only when the module does not say
        import importlib.metadata as metadata  # novm

        return metadata.version(dist)
    except Exception:
        return "unknown"


def _require_numpy_1(tflite_runtime_version: str) -> None:
    """Every tflite-runtime wheel is built against numpy 1.x; with numpy 2 its first interpreter fails after
    numpy prints a page of warning and traceback. Refuse before that, with the fix."""
    import numpy

    if int(numpy.__version__.split(".")[0]) >= 2:
        raise MissingDependencyError(
            f"tflite-runtime {tflite_runtime_version} cannot run with numpy {numpy.__version__}",
            "tflite-runtime is built against numpy 1.x: pip install 'numpy<2', or use ai-edge-litert",
        )


def _library_first(load_delegate: Callable[..., Any]) -> Callable[..., Any]:
    """A package's ``load_delegate`` that loads the library itself first: a missing library is then one clear
    OSError (some packages only say "Failed to load delegate"), and no half-made Delegate prints its
    ``__del__`` traceback at exit (Python 3.7 has no hook to silence it)."""

    def load(library: str, options: Optional[Dict[str, str]] = None) -> Any:
        import ctypes

        ctypes.CDLL(library)
        return load_delegate(library, options or {})

    return load


def _load_backend(name: str) -> Backend:
    """Import one backend; ImportError when its package is missing, MissingDependencyError when it cannot run."""
    if name == "pycoral":
        if not google_pycoral_available():
            raise ImportError("Google's pycoral (pycoral.utils.edgetpu) is not installed")
        _require_numpy_1(_module_version(importlib.import_module("tflite_runtime"), "tflite-runtime"))
        edgetpu = importlib.import_module("pycoral.utils.edgetpu")
        tflite = importlib.import_module("tflite_runtime.interpreter")
        pycoral = importlib.import_module("pycoral")
        return Backend(
            name,
            _module_version(pycoral, "pycoral"),
            tflite.Interpreter,
            _library_first(tflite.load_delegate),
            make_edgetpu_interpreter=edgetpu.make_interpreter,
        )
    if name == "ai_edge_litert":
        mod = importlib.import_module("ai_edge_litert.interpreter")
        return Backend(
            name,
            _module_version(importlib.import_module("ai_edge_litert"), "ai-edge-litert"),
            mod.Interpreter,
            _library_first(mod.load_delegate),
        )
    if name == "tflite_runtime":
        version = _module_version(importlib.import_module("tflite_runtime"), "tflite-runtime")
        _require_numpy_1(version)
        mod = importlib.import_module("tflite_runtime.interpreter")
        return Backend(name, version, mod.Interpreter, _library_first(mod.load_delegate))
    if name == "tensorflow":
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # its start-up log lines mean nothing to a classify user
        warnings.filterwarnings("ignore", r".*tf\.lite\.Interpreter is deprecated", UserWarning)  # we warn already
        tf = importlib.import_module("tensorflow")
        return Backend(
            name, str(tf.__version__), tf.lite.Interpreter, _library_first(tf.lite.experimental.load_delegate)
        )
    raise UsageError(f"unknown backend {name!r}", f"{BACKEND_ENV} must be one of {', '.join(BACKENDS)}")


_CACHE: dict[str, Backend] = {}


def select_backend(name: str | None = None) -> Backend:
    """The backend named (or in ``$EDGEKIT_BACKEND``), else the first one installed in preference order."""
    name = name or os.environ.get(BACKEND_ENV) or None
    key = name or "<auto>"
    if key in _CACHE:
        return _CACHE[key]
    if name:
        try:
            backend = _load_backend(name)
        except ImportError as exc:
            raise MissingDependencyError(
                f"backend {name} (from {BACKEND_ENV}) is not usable: {exc}",
                f"install it or choose one of {', '.join(BACKENDS)}",
            ) from None
    else:
        unusable: MissingDependencyError | None = None
        for candidate in BACKENDS:
            # Cheap existence check first: importing a missing TensorFlow must not cost anything.
            top = "tflite_runtime" if candidate == "pycoral" else candidate
            if candidate == "pycoral" and not google_pycoral_available():
                continue
            if not module_available(top):
                continue
            try:
                backend = _load_backend(candidate)
            except ImportError:
                continue
            except MissingDependencyError as exc:  # installed but cannot run here (tflite-runtime with numpy 2)
                unusable = unusable or exc
                continue
            if candidate == "tensorflow":  # chosen, not forced: say that a lighter package is wanted
                backend.warning = Caution(
                    "no TFLite interpreter package found, falling back to tensorflow.lite "
                    "(slow to import, deprecated): pip install ai-edge-litert"
                )
            break
        else:
            if unusable is not None:
                raise unusable
            raise MissingDependencyError(
                "no TFLite interpreter package is installed",
                "pip install ai-edge-litert (or tflite-runtime 'numpy<2'; "
                "on a Coral board: apt-get install python3-pycoral)",
            )
    _CACHE[key] = backend
    return backend


# ------------------------------------------------------------------------------------ delegate
# How to install libedgetpu per OS: for classify's delegate errors and doctor's check alike.
EDGETPU_INSTALL_HINTS = {
    "Linux": "install the Edge TPU runtime from Coral's apt repo: sudo apt-get install libedgetpu1-std "
    "(https://coral.ai/docs/accelerator/get-started/)",
    "Darwin": "install the Edge TPU runtime (Coral's edgetpu_runtime install.sh, or brew) so that "
    "libedgetpu.1.dylib is on the library path",
    "Windows": "install the Edge TPU runtime (Coral's edgetpu_runtime install.bat) so that edgetpu.dll is on PATH",
}
_NOT_INSTALLED = (
    "cannot open shared object file",
    "image not found",
    "library not loaded",
    "no such file",
    "could not find module",
    "error 126",
)


def explain_delegate_error(
    exc: BaseException, library: str, device: DeviceSpec | None = None, system: str | None = None
) -> DeviceError:
    """Turn what ``load_delegate`` raised into a DeviceError that says the likely cause and the fix."""
    system = system or current_system()
    text = str(exc).strip()
    first = first_line(exc)
    where = f" ({device.delegate_option})" if device and device.delegate_option else ""
    lowered = text.lower()
    missing = any(s in lowered for s in _NOT_INSTALLED) and "failed to load delegate" not in lowered
    if isinstance(exc, OSError) or missing:
        if ON_BOARD:
            return DeviceError(
                f"the Edge TPU runtime {library} is not installed ({first})",
                "install the Edge TPU runtime on the board (sudo apt-get install libedgetpu1-std, "
                f"from Coral's apt repo) and check {_board_checks(device)}; or use --device auto to fall "
                "back to the CPU model",
            )
        install = EDGETPU_INSTALL_HINTS.get(system, "install the Edge TPU runtime")
        return DeviceError(
            f"the Edge TPU runtime {library} is not installed or not on the library path ({first})",
            f"{install}; or run on the CPU with --device cpu",
        )
    if ON_BOARD:  # edgekit does not run there: what to check on the board itself
        fixes = (
            f"on the board, check {_board_checks(device)}, and that the Edge TPU runtime is installed "
            "(dpkg -s libedgetpu1-std); or use --device auto to fall back to the CPU model"
        )
    else:
        fixes = (
            "check that the Edge TPU is plugged in and listed by `edgekit devices`; "
            "USB: install Coral's udev rule and add yourself to the plugdev group, then replug; "
            "PCIe/M.2: load the gasket-dkms driver (apex) and join the apex group; "
            "`edgekit doctor` checks each of these"
        )
    return DeviceError(
        f"the Edge TPU runtime {library} is installed but found no usable Edge TPU{where} ({first})", fixes
    )


#: True in the runner on a Coral board (set by ``board_runner.main``): hints name what to check on
#: the board itself, where edgekit's own commands (doctor, devices) do not run.
ON_BOARD = False


def _board_checks(device: DeviceSpec | None) -> str:
    usb = "that lsusb lists the USB Accelerator (1a6e:089a, or 18d1:9302 once its firmware is loaded)"
    pci = "that /dev/apex_0 exists (the Dev Board's or a PCIe/M.2 Edge TPU, its apex driver loaded)"
    kind = device.kind if device else "auto"
    return {"usb": usb, "pci": pci}.get(kind, pci + " or " + usb)


def _quiet_failed_delegate_cleanup() -> None:
    """Silence the ``Delegate.__del__`` AttributeError that every interpreter package prints after a failed load.

    Their ``Delegate.__del__`` reads ``self._library``, which a failed ``__init__`` never set; the
    noise ("Exception ignored in: <function Delegate.__del__ ...>") would follow our one-line error.
    """
    previous = getattr(sys, "unraisablehook", None)  # novm (Python 3.8+; 3.7 prints the noise)
    if previous is None or getattr(previous, "_edgekit_quiet", False):
        return

    def hook(unraisable: Any) -> None:
        exc, obj = unraisable.exc_value, unraisable.object
        if isinstance(exc, AttributeError) and "_library" in str(exc) and "Delegate.__del__" in repr(obj):
            return
        previous(unraisable)

    hook._edgekit_quiet = True  # type: ignore[attr-defined]
    sys.unraisablehook = hook  # novm


def load_edgetpu_delegate(backend: Backend, device: DeviceSpec, library: str | None = None) -> Any:
    """The Edge TPU delegate for ``device``, or a DeviceError explaining why it could not load."""
    library = library or edgetpu_library()
    option = device.delegate_option
    _quiet_failed_delegate_cleanup()
    try:
        return backend.load_delegate(library, {"device": option} if option else {})
    except (OSError, ValueError, RuntimeError) as exc:
        error = explain_delegate_error(exc, library, device)
    raise error  # outside the except block: the failed Delegate is freed now, not with our error


# ------------------------------------------------------------------------------------ open_model
# What to do when an opened model fails to run: one text for the host and the board.
INFERENCE_FAILED_HINT = (
    "the model or the runtime is broken: try --device cpu; an Edge TPU that fails needs replugging or a reboot"
)


@dataclass
class OpenedModel:
    """A model ready to run (the one object host commands and the board runner run models with).

    Opened by :func:`open_model`; ``run`` sets the first input, invokes and returns the dequantized
    first output, ``time`` is the benchmark loop, and ``close`` (or leaving a ``with`` block) frees
    the interpreter and its Edge TPU delegate.
    """

    interpreter: Any
    model_path: str  # the file actually running (the CPU twin when a compiled model fell back)
    requested_path: str
    device: str  # "cpu", or the Edge TPU device string ("usb:0", "pci", ":0", "edgetpu")
    backend: Backend
    notes: List[str] = field(default_factory=list)
    first_inference_ms: Optional[float] = None
    _input: Optional[TensorDetails] = field(default=None, repr=False, compare=False)
    _output: Optional[TensorDetails] = field(default=None, repr=False, compare=False)

    def __enter__(self) -> OpenedModel:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Drop the interpreter (and with it the delegate): the Edge TPU is free for another process."""
        self.interpreter = None

    def _live(self) -> Any:
        if self.interpreter is None:
            raise UsageError(f"{self.model_path} was closed", "open the model again")
        return self.interpreter

    @property
    def input(self) -> TensorDetails:
        """The first input's details (read once: they do not change once the tensors are allocated)."""
        if self._input is None:
            self._input = self._live().get_input_details()[0]
        return self._input

    @property
    def output(self) -> TensorDetails:
        if self._output is None:
            self._output = self._live().get_output_details()[0]
        return self._output

    def invoke(self) -> None:
        try:
            self._live().invoke()
        except (RuntimeError, ValueError) as exc:
            raise DeviceError(
                f"inference failed on {self.device}: {first_line(exc)}",
                INFERENCE_FAILED_HINT + ("" if ON_BOARD else "; `edgekit doctor` tells what else to check"),
            ) from None

    def run(self, tensor: Any) -> Tuple[Any, float]:
        """The dequantized first output for one input tensor, and the invoke time in milliseconds."""
        from edgekit.board.preprocess import dequantize

        interp, out = self._live(), self.output
        interp.set_tensor(self.input["index"], tensor)
        start = time.perf_counter()
        self.invoke()
        ms = (time.perf_counter() - start) * 1000.0
        if self.first_inference_ms is None:
            self.first_inference_ms = ms
        scale, zero_point = out.get("quantization", (0.0, 0))
        return dequantize(interp.get_tensor(out["index"]).ravel(), float(scale) or None, int(zero_point)), ms

    def time(
        self, n: int, warmup: int, clock: Callable[[], float] = time.perf_counter
    ) -> Dict[str, Union[float, List[float]]]:
        """The benchmark loop: ``invoke`` alone timed ``n`` times on a fixed random input after ``warmup``
        untimed calls (the first call apart); statistics from :func:`edgekit.board.latency.measure`."""
        import numpy as np

        from edgekit.board import latency

        inp = self.input
        dtype: np.dtype[Any] = np.dtype(inp["dtype"])
        shape = [int(d) for d in inp["shape"]]
        rng = np.random.RandomState(0)  # numpy 1.16 (a Dev Board's) has no default_rng
        if dtype.kind in "iu":
            data = rng.randint(np.iinfo(dtype).min, int(np.iinfo(dtype).max) + 1, shape).astype(dtype)
        else:
            data = rng.random_sample(shape).astype(dtype)
        self._live().set_tensor(inp["index"], data)
        return latency.measure(self.invoke, n, warmup, clock)


def benchmark(
    load: Callable[[], Any],
    n: int,
    warmup: int,
    threads: int | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> BenchmarkResult:
    """What ``edgekit benchmark --json`` prints, here and on a board (the record, shipped to it): ``load()`` (which
    returns what :func:`open_model` made, or a ``LoadedModel`` holding it as ``opened`` with its ``notes``) timed,
    then :meth:`OpenedModel.time`."""
    from edgekit.board import latency
    from edgekit.results.benchmark import BenchmarkResult

    threads = threads or latency.default_threads()
    start = clock()
    loaded = load()
    load_ms = (clock() - start) * 1000.0
    opened = getattr(loaded, "opened", loaded)
    notes = getattr(loaded, "notes", opened.notes)
    with opened:
        timing = opened.time(n, warmup, clock)
    governors = latency.cpu_governors()
    return BenchmarkResult.from_dict(
        {
            "model": opened.model_path,
            "device": opened.device,
            "backend": opened.backend.name,
            "threads": threads if opened.device == "cpu" else None,
            "load_ms": load_ms,
            "first_inference_ms": timing.pop("first_ms"),
            "iterations": n,
            "warmup": warmup,
            **timing,
            "machine": latency.machine(governors),
            "notes": [str(m) for m in notes if not isinstance(m, Caution)],
            "warnings": [str(m) for m in notes if isinstance(m, Caution)] + latency.governor_warnings(governors),
        }
    )


def open_content(
    content: bytes, name: str = "<model>", num_threads: int | None = None, backend: Backend | None = None
) -> OpenedModel:
    """A model held in memory (e.g. one just converted), opened on the CPU."""
    backend = backend or select_backend()
    interp = backend.interpreter(name, num_threads=num_threads, content=content)
    return OpenedModel(interp, name, name, "cpu", backend, [backend.warning] if backend.warning else [])


def cpu_twin(model_path: Union[str, os.PathLike[str]]) -> Path:
    """``x_edgetpu.tflite`` → ``x.tflite`` (the CPU model the compiler started from)."""
    from pathlib import Path

    p = Path(model_path)
    return p.with_name(p.stem[: -len("_edgetpu")] + p.suffix) if p.stem.endswith("_edgetpu") else p


# edgekit.tflite.model's EDGETPU_CUSTOM_OP (a test checks they agree): found without parsing the model.
EDGETPU_CUSTOM_OP_BYTES = b"edgetpu-custom-op"


def is_compiled_file(path: Union[str, os.PathLike[str]]) -> bool:
    """True when the file holds the Edge TPU custom op's name: a compiled model (no parse, no TensorFlow)."""
    import mmap

    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return data.find(EDGETPU_CUSTOM_OP_BYTES) >= 0
    except (OSError, ValueError):  # missing, unreadable, empty: opening it gives the precise error
        return False


def _cpu_twin_or_fail(model_path: Path, why: str) -> Path:
    twin = cpu_twin(model_path)
    if twin != model_path and twin.is_file():
        return twin
    which = f"{twin}, not found" if twin != model_path else "the edgetpu_compiler's input"
    raise DeviceError(
        f"{model_path} is compiled for the Edge TPU and needs one to run, but {why}",
        f"to run on the CPU, pass the CPU model it was compiled from ({which}); or attach an Edge TPU",
    )


def open_model(
    model_path: str | os.PathLike,
    device: str | DeviceSpec = "auto",
    *,
    backend: Backend | None = None,
    num_threads: int | None = None,
    is_compiled: bool | None = None,
    find_devices: Callable[[], list] | None = None,
    cpu_model: Path | None = None,
) -> OpenedModel:
    """Open ``model_path`` on ``device``.

    ``auto``: the Edge TPU when the model is compiled and a device and the delegate are there, else
    the CPU, with a one-line reason in ``notes``. A compiled model that cannot use an Edge TPU runs
    its CPU twin (``cpu_model``, by default ``x_edgetpu.tflite`` → ``x.tflite``) when there is one,
    else DeviceError. An explicit ``usb``/``pci``/``:N`` never falls back silently: it raises DeviceError.
    """
    spec = device if isinstance(device, DeviceSpec) else parse_device(device)
    if is_compiled is None:
        is_compiled = is_compiled_file(model_path)
    plain = None if is_compiled else _plain_path(model_path)
    path: Path | str
    if plain is None:
        from pathlib import Path

        path = Path(model_path)
    else:
        path = plain
    backend = backend or select_backend()
    notes: List[str] = [backend.warning] if backend.warning else []  # Caution is a str: a warning among notes

    def on_cpu(run_path: Path | str) -> OpenedModel:
        # LiteRT's own default is one thread: mobilenet_v2_1.0_224_quant took 8.0 ms per invoke that way
        # and 3.8 ms with num_threads=2 on a 2-core machine (issue 11). One per core, at most 4:
        threads = num_threads or default_threads()
        return OpenedModel(
            backend.interpreter(str(run_path), num_threads=threads), str(run_path), str(path), "cpu", backend, notes
        )

    if not is_compiled:
        if spec.wants_edgetpu:
            raise UsageError(
                f"{path} is not compiled for the Edge TPU, so it cannot run on {spec}",
                "build the bundle from a compiled model, or use --device cpu"
                if ON_BOARD
                else "compile it first (edgekit compile), pass its _edgetpu.tflite, or use --device cpu",
            )
        if spec.kind == "auto":
            name, twin_name, twin_found = _compiled_twin(path)
            hint = f"; pass {twin_name} to use an Edge TPU" if twin_found else ""
            notes.append(f"running on the CPU: {name} is not compiled for the Edge TPU{hint}")
        return on_cpu(path)

    assert isinstance(path, Path)  # compiled: plain is None, so path is the Path made above
    if spec.kind == "cpu":
        twin = cpu_model or _cpu_twin_or_fail(path, "--device cpu was requested")
        notes.append(f"running the CPU model {twin.name} beside {path.name} (--device cpu)")
        return on_cpu(twin)

    try:
        interp = edgetpu_interpreter(backend, path, spec, num_threads)
    except DeviceError as exc:
        if spec.kind != "auto":
            raise
        reason = exc.message + ("; `edgekit doctor` tells what to fix" if not ON_BOARD else "")
        if isinstance(exc, PairCrashError):
            reason = f"{exc.message}; `edgekit doctor` names builds that match" if not ON_BOARD else exc.message
        elif find_devices is not None and not find_devices():
            reason = "no Edge TPU found"
        twin = cpu_model or _cpu_twin_or_fail(path, reason)
        notes.append(f"running the CPU model {twin.name} instead of {path.name}: {reason}")
        return on_cpu(twin)
    label = spec.delegate_option or "edgetpu"
    return OpenedModel(interp, str(path), str(path), label, backend, notes)


def _plain_path(model_path: Any) -> str | None:
    """``model_path`` where it is its own ``str(pathlib.Path(model_path))`` (a POSIX str with no empty or ``.`` part,
    no trailing ``/``), else None: such a path needs no pathlib, whose import (urllib.parse, ipaddress) cost a
    one-image classify about 16M instructions (benchmarks/startup.md)."""
    if (
        os.name == "nt"
        or not isinstance(model_path, str)
        or model_path in ("", ".")
        or "//" in model_path
        or model_path.startswith("./")
        or "/./" in model_path
        or model_path.endswith(("/", "/."))
    ):
        return None
    return model_path


def _compiled_twin(path: Path | str) -> Tuple[str, str, bool]:
    """(the name of ``path``, the name of its compiled twin ``x_edgetpu.tflite`` beside it, whether that is a
    file), as pathlib's name, stem and suffix say, for a Path or a :func:`_plain_path` text."""
    if not isinstance(path, str):
        twin = path.with_name(path.stem + "_edgetpu" + path.suffix)
        return path.name, twin.name, twin.is_file()
    name = path.rsplit("/", 1)[-1]
    dot = name.rfind(".")
    stem, suffix = (name[:dot], name[dot:]) if 0 < dot < len(name) - 1 else (name, "")
    twin_name = stem + "_edgetpu" + suffix
    return name, twin_name, os.path.isfile(path[: len(path) - len(name)] + twin_name)


def _runtime_mismatch(path: Path, text: str) -> DeviceError | None:
    m = RUNTIME_MISMATCH.search(text)
    if not m:
        return None
    need, have = m.groups()
    return DeviceError(
        f"{path.name} needs Edge TPU runtime {need} but the libedgetpu here is runtime {have}",
        f"recompile it for this runtime: edgekit compile --min-runtime {have} "
        f"(edgetpu_compiler -m {have}); or update libedgetpu",
    )


class PairCrashError(DeviceError):
    """The interpreter package and libedgetpu crashed or hung a test process together (or could not be tested
    there): never loaded in this one."""


def _proven_library(backend: Backend, path: Path, spec: DeviceSpec, library: str) -> str:
    """The libedgetpu file to load: the real path of what the dynamic linker finds for ``library``, proven with
    ``backend`` in a child process first (see :mod:`delegate_probe`); the file proven is the file loaded."""
    from edgekit.board import delegate_probe

    resolved = delegate_probe.resolve_library(library, current_system())
    if not delegate_probe.enabled():
        return resolved or library
    if resolved is None:  # nothing to prove, and nothing edgekit would load untested
        raise explain_delegate_error(OSError(f"{library}: not found on the library path"), library, spec)
    verdict = delegate_probe.prove(backend.name, backend.version, library, resolved, str(path), spec.delegate_option)
    remembered = ", remembered from an earlier run" if verdict.cached else ""
    builds = f"install a libedgetpu built for this TFLite, or a runtime matching it: {delegate_probe.COMMUNITY_BUILDS}"
    if verdict.state == delegate_probe.CRASHED:
        raise PairCrashError(
            f"the Edge TPU runtime {resolved} crashes with {backend.name} {backend.version} "
            f"({verdict.detail} in a test process{remembered}), so it is not loaded",
            f"{builds}; then remove {delegate_probe.cache_path()}; or run on the CPU with --device cpu",
        )
    if verdict.state == delegate_probe.HUNG:
        raise PairCrashError(
            f"the Edge TPU runtime {resolved} hangs with {backend.name} {backend.version} "
            f"({verdict.detail} in a test process{remembered}), so it is not loaded",
            "replug the Edge TPU (or reboot) and remove "
            f"{delegate_probe.cache_path()} to test it again; if it hangs again, {builds}; "
            "or run on the CPU with --device cpu",
        )
    if verdict.state == delegate_probe.UNPROVABLE:
        raise PairCrashError(
            f"the Edge TPU runtime {resolved} could not be tested with {backend.name} {backend.version} in a "
            f"separate process ({verdict.detail}), so it is not loaded",
            f"run on the CPU with --device cpu; or set {delegate_probe.PROBE_ENV}=0 to load it untested",
        )
    return resolved


def edgetpu_interpreter(
    backend: Backend, path: str | Path, spec: DeviceSpec, num_threads: int | None, library: str | None = None
) -> Any:
    """An interpreter running ``path`` (a compiled model) on the Edge TPU ``spec``; DeviceError when it cannot.

    The libedgetpu file is found once (as the dynamic linker would, LD_LIBRARY_PATH first), its pair with the
    backend proven in a child process (PairCrashError), and that very file loaded here by its real path.
    """
    from pathlib import Path

    from edgekit.board.quant_params import refuse_bad_quantization

    path = Path(path)
    refuse_bad_quantization(path, printable(str(path)))  # before the probe runs it: LiteRT would crash on it
    library = _proven_library(backend, path, spec, library or edgetpu_library())
    if backend.make_edgetpu_interpreter is not None and os.sep not in library:
        # Google's pycoral's own factory loads libedgetpu by its bare name: only when no file was resolved
        # (the probe turned off); otherwise its tflite_runtime load_delegate gets the proven file, as
        # make_interpreter would do with the name.
        try:
            source = _model_source(path)
            interp = backend.make_edgetpu_interpreter(
                source.get("model_path") or source["model_content"], device=spec.delegate_option
            )
            interp.allocate_tensors()
            return interp
        except (OSError, ValueError, RuntimeError) as exc:
            raise _runtime_mismatch(path, str(exc)) or explain_delegate_error(exc, library, spec) from None
    delegate = load_edgetpu_delegate(backend, spec, library)
    try:
        return backend.interpreter(str(path), delegates=[delegate], num_threads=num_threads)
    except InputError as exc:
        raise _runtime_mismatch(path, exc.message) or DeviceError(
            f"the Edge TPU could not prepare {path.name}: {exc.message}",
            "update libedgetpu, or recompile the model with edgekit compile",
        ) from None
