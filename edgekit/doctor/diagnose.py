"""``edgekit doctor``: what this machine has for running (and compiling) Edge TPU models, and what to fix.

Each check is ok, info, warn or fail; every warn and fail carries the fix. The text output is made
to be pasted into a bug report. Nothing here imports TensorFlow or an interpreter's native code
(only Google's pycoral, when installed, is asked for its ``list_edge_tpus()``): package versions
come from ``importlib.metadata``, the compiler is asked ``--version`` in a subprocess with a
timeout, and libedgetpu's version is read in a child process (a broken library cannot crash the
doctor). Every path the checks read is a field of :class:`Probe`, under one root folder
(:meth:`Probe.for_root`), so tests point them at recorded machine states; the rules for the 2026
matrix (kernel, driver, board, USB link, containers, apt) and their sources are in
:mod:`edgekit.doctor.rules`.
"""

from __future__ import annotations

import os
import platform
import re
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from edgekit import __version__
from edgekit.doctor import rules as R
from edgekit.doctor.rules import FAIL, INFO, KNOWN_LIBEDGETPU_DIRS, OK, WARN, Check, Probe
from edgekit.edgetpu import compiler_locator
from edgekit.errors import MissingDependencyError

if TYPE_CHECKING:  # pragma: no cover
    from edgekit.results.doctor import DoctorResult

__all__ = ["FAIL", "INFO", "OK", "WARN", "Check", "Probe", "report", "run_checks"]

TFLITE_OF_COMPILER_16 = (2, 5)  # compiler 16 / libedgetpu 16 embed TensorFlow Lite 2.5

UDEV_RULES = (
    'SUBSYSTEM=="usb",ATTRS{idVendor}=="1a6e",ATTRS{idProduct}=="089a",GROUP="plugdev"\n'
    'SUBSYSTEM=="usb",ATTRS{idVendor}=="18d1",ATTRS{idProduct}=="9302",GROUP="plugdev"'
)


def _current_groups() -> list[str]:
    try:
        import grp

        return sorted({grp.getgrgid(g).gr_name for g in os.getgroups()})
    except (ImportError, KeyError, OSError):
        return []


def _version_tuple(v: str | None) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v or "")[:3])


# ------------------------------------------------------------------------------------- checks
def check_python(p: Probe) -> Check:
    v = tuple(p.python[:3]) + (0,) * (3 - len(p.python[:3]))
    detail = f"{platform.python_implementation()} {v[0]}.{v[1]}.{v[2]}" + (f" ({p.executable})" if p.executable else "")
    if v[:2] > (3, 9):
        detail += "; Coral's own pycoral/tflite-runtime 2.5 wheels stop at 3.9 (see interpreter wheel)"
    return Check("python", INFO, detail)


def check_platform(p: Probe) -> Check:
    """The OS (Raspberry Pi OS is Debian with /etc/rpi-issue), its kernel or macOS version, the CPU and the board."""
    if p.system == "Darwin":
        version = R.macos_version(p)
        return Check("platform", INFO, f"macOS {version or '(version not readable)'} {p.arch}")
    pretty = R.os_release(p).get("PRETTY_NAME", "")
    if pretty and R.is_raspberry_pi_os(p):
        pretty = f"Raspberry Pi OS, {pretty}"
    kernel = R.kernel_release(p) if p.system == "Linux" else None
    board = R.board_model(p) if p.system == "Linux" else None
    parts = [p.system, kernel or (platform.release() if p.root == "/" else ""), p.arch]
    detail = " ".join(x for x in parts if x) + (f" ({pretty})" if pretty else "") + (f", {board}" if board else "")
    return Check("platform", INFO, detail)


def check_packages(p: Probe) -> Check:
    names = ["ai-edge-litert", "tflite-runtime", "pycoral", "numpy", "pillow", "click", "tensorflow", "tensorflow-cpu"]
    found = {n: p.dist_version(n) for n in names}
    detail = ", ".join(f"{n} {v}" for n, v in found.items() if v) or "none"
    return Check("packages", INFO, detail)


def check_pycoral(p: Probe) -> Check | None:
    version = p.dist_version("pycoral")
    if p.google_pycoral():
        return Check(
            "pycoral", OK, f"Google's pycoral {version or ''} (Edge TPU models go through its make_interpreter)"
        )
    if version:
        return Check(
            "pycoral",
            WARN,
            f"the installed 'pycoral' {version} is not Google's Coral library "
            "(PyPI's pycoral is an unrelated GIS tool)",
            "pip uninstall pycoral; on Debian/Mendel use apt-get install python3-pycoral if you want it "
            "(edgekit works without it)",
        )
    return None


def check_interpreter(p: Probe) -> Check:
    from edgekit.board.backends import BACKEND_ENV

    forced = p.env.get(BACKEND_ENV)
    available = [name for name in ("ai_edge_litert", "tflite_runtime", "tensorflow") if p.module_available(name)]
    if p.google_pycoral() and "tflite_runtime" in available:
        available.insert(0, "pycoral")
    if forced and forced not in available:
        return Check(
            "interpreter",
            FAIL,
            f"{BACKEND_ENV}={forced}, but it is not installed (installed: {', '.join(available) or 'none'})",
            f"install it or unset {BACKEND_ENV}",
        )
    if not available:
        wheels = [w for w in R.wheels_for(p) if w != "Google's pycoral"]
        fix = (
            f"pip install {wheels[0]}" + (" 'numpy<2'" if wheels[0] == "tflite-runtime" else "")
            if wheels
            else R.check_wheels(p).fix or ""
        )
        return Check("interpreter", FAIL, "no TFLite interpreter package is installed", fix)
    chosen = forced or available[0]
    detail = f"edgekit will use {chosen}" + (f" ({BACKEND_ENV}={forced})" if forced else "")
    if chosen == "tensorflow":
        return Check(
            "interpreter", WARN, detail + " (tensorflow.lite: slow to import, deprecated)", "pip install ai-edge-litert"
        )
    return Check("interpreter", OK, detail + f" (installed: {', '.join(available)})")


def check_numpy(p: Probe) -> Check:
    numpy_v = p.dist_version("numpy")
    tflrt = p.dist_version("tflite-runtime")
    if numpy_v is None:
        return Check("numpy", FAIL, "numpy is not installed", "pip install numpy")
    if tflrt and _version_tuple(tflrt) >= (2,) and _version_tuple(numpy_v) >= (2,):
        return Check(
            "numpy",
            FAIL,
            f"tflite-runtime {tflrt} is built against numpy 1.x and fails with numpy {numpy_v} "
            "(AttributeError: _ARRAY_API not found)",
            "pip install 'numpy<2' (or use ai-edge-litert)",
        )
    return Check("numpy", OK, f"numpy {numpy_v}" + (f" works with tflite-runtime {tflrt}" if tflrt else ""))


def find_libedgetpu(p: Probe) -> str | None:
    """The libedgetpu file classify would load: on this machine, the one the dynamic linker finds
    (LD_LIBRARY_PATH first; :func:`edgekit.board.delegate_probe.resolve_library`); in a test's fake tree,
    the first of ``p.lib_dirs`` that holds it."""
    from edgekit.board.backends import EDGETPU_LIBRARIES

    name = EDGETPU_LIBRARIES.get(p.system)
    if not name:
        return None
    if p.lib_dirs is None and p.find_library:
        from edgekit.board.delegate_probe import resolve_library

        return resolve_library(name, p.system, p.env)
    dirs = p.lib_dirs if p.lib_dirs is not None else KNOWN_LIBEDGETPU_DIRS.get(p.system, [])
    for d in dirs:
        candidate = Path(d) / name
        if candidate.is_file():
            return str(candidate)
    return None


def libedgetpu_version(path: str, timeout: float = 10.0) -> str | None:
    """``edgetpu_version()`` from the library, read in a child process so a broken library cannot crash us
    (and, like every child of edgekit, one that imports nothing from the current folder)."""
    from edgekit.board.delegate_probe import run_python

    code = (
        "import ctypes; lib = ctypes.CDLL(sys.argv[1]); f = lib.edgetpu_version; "
        "f.restype = ctypes.c_char_p; print(f().decode())"
    )
    done = run_python(code, [os.path.abspath(path)], timeout)
    if done.returncode != 0:
        return None
    return done.stdout.decode("utf-8", "replace").strip() or None


def check_libedgetpu(p: Probe, devices: list) -> Check:
    from edgekit.board.backends import EDGETPU_LIBRARIES

    name = EDGETPU_LIBRARIES.get(p.system)
    if not name:
        return Check("libedgetpu", WARN, f"there is no Edge TPU runtime for {p.system}", "run on the CPU")
    path = find_libedgetpu(p)
    if path is None:
        from edgekit.board.backends import EDGETPU_INSTALL_HINTS

        fix = EDGETPU_INSTALL_HINTS.get(p.system, "install the Edge TPU runtime")
        status = FAIL if devices else WARN
        why = "an Edge TPU is attached but cannot be used" if devices else "classify runs on the CPU only"
        return Check("libedgetpu", status, f"{name} not found: {why}", fix)
    version = libedgetpu_version(path) if p.read_runtime_version else None
    return Check("libedgetpu", OK, R.on_machine(p, path) + (f" ({version})" if version else " (version not readable)"))


def check_devices(p: Probe, devices: list) -> Check:
    if not devices and p.system == "Darwin":
        return Check(
            "devices",
            INFO,
            "doctor lists Edge TPUs from Linux sysfs (and Google's pycoral): on macOS, "
            "`system_profiler SPUSBDataType` shows the USB Accelerator as Global Unichip (1a6e:089a) before "
            "its firmware loads, Google Inc. (18d1:9302) after",
        )
    cards = R.pci_edgetpus(p) if p.system == "Linux" else []
    if not devices and cards:
        return Check(
            "devices",
            WARN,
            f"PCIe Edge TPU(s) at {', '.join(cards)} (1ac1:089a) without a /dev/apex_N",
            "see kernel driver" if not R.container_kind(p) else "see passthrough",
        )
    if not devices:
        return Check(
            "devices",
            WARN,
            "no Edge TPU found (USB 1a6e:089a / 18d1:9302, /dev/apex_N)",
            "plug in the USB Accelerator (a USB 3 port and cable help); PCIe/M.2 and the Dev Board need "
            "the gasket-dkms driver for /dev/apex_0",
        )
    parts = []
    for d in devices:
        temp = f", {d.temperature_c:.1f} C" if d.temperature_c is not None else ""
        parts.append(f"{d.device} {d.path} ({d.state}{temp})")
    hidden = R.hidden_usb(p, devices)
    if hidden:
        return Check(
            "devices",
            WARN,
            "; ".join(parts) + f"; {', '.join(d.device for d in hidden)} not passed into this container",
            "see passthrough",
        )
    bad = [d for d in devices if d.state != "ready" and d.type == "pci"]
    if bad:
        return Check(
            "devices", WARN, "; ".join(parts), "check the apex udev rule and group, then reload the gasket/apex modules"
        )
    return Check("devices", OK, "; ".join(parts))


def check_udev(p: Probe, devices: list) -> Check | None:
    if p.system != "Linux" or R.container_kind(p):  # in a container, udev is the host's
        return None
    for d in p.udev_dirs:
        try:
            files = sorted(Path(d).glob("*.rules"))
        except OSError:
            continue
        for f in files:
            try:
                text = f.read_text(errors="replace").lower()
            except OSError:
                continue
            if "1a6e" in text and "18d1" in text:
                return Check("udev rule", OK, f"{R.on_machine(p, str(f))} lists the Edge TPU USB ids")
    usb_present = any(d.type == "usb" for d in devices)
    return Check(
        "udev rule",
        FAIL if usb_present and not _is_root(p) else WARN,
        "no udev rule for the USB Edge TPU (1a6e:089a, 18d1:9302): only root can open it",
        "install libedgetpu1-std (it ships the rule), or write these two lines to "
        "/etc/udev/rules.d/99-edgetpu-accelerator.rules: "
        + UDEV_RULES.replace("\n", " ; ")
        + " then: sudo udevadm control --reload-rules && sudo udevadm trigger, and replug",
    )


def _is_root(p: Probe) -> bool:
    if p.is_root is not None:
        return p.is_root
    return hasattr(os, "geteuid") and os.geteuid() == 0


def check_groups(p: Probe, devices: list) -> Check | None:
    if p.system != "Linux":
        return None
    if _is_root(p):
        return Check("groups", OK, "running as root: no group membership needed")
    groups = p.groups if p.groups is not None else _current_groups()
    needed = {
        "plugdev": any(d.type == "usb" for d in devices),
        "apex": any(d.type == "pci" for d in devices) or bool(R.pci_edgetpus(p)),
    }
    wanted = [g for g in needed if needed[g]] or list(needed)  # nothing attached: both, as a warning
    missing = [g for g in wanted if g not in groups]
    if not missing:
        return Check(
            "groups", OK, "member of " + " and ".join(f"{g} ({'USB' if g == 'plugdev' else 'PCIe'})" for g in wanted)
        )
    status = FAIL if any(needed[g] for g in missing) and (devices or not R.pci_edgetpus(p)) else WARN
    return Check(
        "groups",
        status,
        f"not in group(s) {', '.join(missing)} (groups: {', '.join(groups) or 'none'})",
        " ; ".join(f"sudo usermod -aG {g} $USER" for g in missing) + ", then log out and back in",
    )


def check_compiler(p: Probe, timeout: float = compiler_locator.VERSION_TIMEOUT_S) -> Check:
    try:
        exe = compiler_locator.find_compiler(p.env)
    except MissingDependencyError as exc:
        return Check("edgetpu_compiler", FAIL, exc.message, exc.hint)
    if not exe:
        supported = p.system == "Linux" and R.cpu(p) == "x86_64"
        return Check(
            "edgetpu_compiler",
            WARN,
            "not found (only needed for edgekit compile)",
            compiler_locator.INSTALL_HINT if supported else compiler_locator.OTHER_PLATFORM_HINT,
        )
    try:
        version = compiler_locator.probe_version(exe, timeout)
    except MissingDependencyError as exc:  # the same probe and words as `edgekit compile`
        return Check("edgetpu_compiler", FAIL, exc.message, exc.hint)
    runtime = compiler_locator.default_min_runtime(version)
    extra = f"; its models need Edge TPU runtime {runtime} or newer by default (-m to target older)" if runtime else ""
    return Check("edgetpu_compiler", OK, f"{exe}: version {version}{extra}")


def check_tensorflow(p: Probe) -> Check:
    for dist in ("tensorflow", "tensorflow-cpu", "tf-nightly", "tensorflow-macos"):
        version = p.dist_version(dist)
        if version:
            break
    else:
        return Check(
            "tensorflow",
            INFO,
            "not installed (only edgekit quantize needs it: pip install '.[convert]' in edgekit's checkout; "
            "PyPI's 'edgekit' is an unrelated project)",
        )
    if _version_tuple(version)[:2] > TFLITE_OF_COMPILER_16:
        return Check(
            "tensorflow",
            INFO,
            f"{dist} {version}: its converter can write op versions newer than "
            'TFLite 2.5, which edgetpu_compiler 16 refuses ("Didn\'t find op for builtin opcode"); '
            "the ops of a quantized model must stay at versions TFLite 2.5 knows",
        )
    return Check("tensorflow", INFO, f"{dist} {version}: op versions match edgetpu_compiler 16 (TFLite 2.5)")


def check_onnx(p: Probe) -> Check:
    """The extra ``edgekit quantize model.onnx`` needs (docs/commands/quantize.md, ONNX models)."""
    found = {dist: p.dist_version(dist) for dist in ("onnx", "onnxruntime")}
    if all(found.values()):
        return Check(
            "onnx",
            INFO,
            f"onnx {found['onnx']}, onnxruntime {found['onnxruntime']}: edgekit quantize takes ONNX models",
        )
    missing = " and ".join(d for d, v in found.items() if not v)
    return Check(
        "onnx",
        INFO,
        f"{missing} not installed (only edgekit quantize of an ONNX model needs them: "
        "pip install onnx onnxruntime, or '.[onnx]' in an edgekit checkout)",
    )


def check_runtime_pairing(p: Probe, library: str | None) -> Check | None:
    """The interpreter package and libedgetpu as a pair: proven, crashed (from the probe's cache) or at risk.

    Coral's libedgetpu works with tflite-runtime up to 2.11.1 and segfaults with newer TFLite
    (google-coral/libedgetpu#53): edgekit proves each pair in a child process before loading it
    (:mod:`edgekit.board.delegate_probe`); this check reads what it found.
    """
    from edgekit.board import delegate_probe

    if library is None:
        return None
    chosen = _chosen_interpreter(p)
    if chosen is None:
        return None
    name, version = chosen
    verdict = delegate_probe.read_cache().get(delegate_probe.pair_key(name, version, library))
    pair = f"{name} {version} with {R.on_machine(p, library)}"
    if verdict is not None and verdict.failed:
        what = "hung" if verdict.state == delegate_probe.HUNG else "crashed"
        return Check(
            "runtime pairing",
            FAIL,
            f"{pair} {what} a test process ({verdict.detail}): classify runs compiled models on the CPU",
            delegate_probe.COMMUNITY_BUILDS,
        )
    if verdict is not None and verdict.state == delegate_probe.OK:
        return Check("runtime pairing", OK, f"{pair}: proven (a test process ran a model on the Edge TPU)")
    built_for = R.libedgetpu_build(p, library)[2]
    if built_for and built_for[:2] > (2, 5):
        return _community_pairing(pair, name, version, built_for)
    tflite = _version_tuple(version) if name in ("tflite_runtime", "pycoral") else (2, 17)
    if tflite >= (2, 12):  # ai-edge-litert is TFLite 2.17 and newer
        return Check(
            "runtime pairing",
            WARN,
            f"{pair}: Coral's libedgetpu is built for TFLite 2.5 and is reported "
            "to segfault with TFLite 2.12 and newer (google-coral/libedgetpu#53); edgekit proves the pair "
            "in a test process before loading it and falls back to the CPU if it crashes",
            delegate_probe.COMMUNITY_BUILDS,
        )
    return Check(
        "runtime pairing", INFO, f"{pair}: not proven yet (the first run on an Edge TPU proves it in a test process)"
    )


def _community_pairing(pair: str, name: str, version: str, built_for: tuple[int, ...]) -> Check:
    """A community libedgetpu (feranick's 16.0TFx.y): its releases say which tflite_runtime versions it runs with,
    from 2.11.1 to the TensorFlow it was built against."""
    from edgekit.board import delegate_probe

    tf = ".".join(map(str, built_for))
    if name == "ai_edge_litert" or built_for < (2, 11, 1):  # the releases name a range from 16.0tf2.11.1 on
        return Check(
            "runtime pairing",
            INFO,
            f"{pair}: a libedgetpu built against TensorFlow {tf}; its releases name "
            "no range for this interpreter, so edgekit proves this pair in a test process on first use",
        )
    if _version_tuple(version) >= (2, 11, 1) and _version_tuple(version)[:2] <= built_for[:2]:
        return Check(
            "runtime pairing",
            INFO,
            f"{pair}: within what this libedgetpu build is released for "
            f"(tflite_runtime 2.11.1 to {tf}); not proven yet (the first run proves it in a test process)",
        )
    return Check(
        "runtime pairing",
        WARN,
        f"{pair}: this libedgetpu build is released for tflite_runtime 2.11.1 to {tf}, and {version} is outside that",
        delegate_probe.COMMUNITY_BUILDS,
    )


def check_verdict_cache(p: Probe) -> Check | None:
    """The crash guard's cache of pair verdicts, when it cannot be used (each run then proves the pair again)."""
    from edgekit.board import delegate_probe

    problem = delegate_probe.cache_problem()
    if problem is None:
        return None
    return Check(
        "pair cache",
        WARN,
        f"verdicts of the crash guard are not kept: {problem}, so each run of a compiled "
        "model proves its pair again in a test process",
        f"use a folder only you can write to: chmod 700 it (and remove what is in it), or set "
        f"{delegate_probe.CACHE_ENV} to one",
    )


def _chosen_interpreter(p: Probe) -> tuple[str, str] | None:
    """(backend name, version) of the package classify would use, read from the installed distributions."""
    from edgekit.board.backends import BACKEND_ENV

    dists = {"ai_edge_litert": "ai-edge-litert", "tflite_runtime": "tflite-runtime", "pycoral": "pycoral"}
    forced = p.env.get(BACKEND_ENV)
    order = [forced] if forced in dists else ["pycoral", "ai_edge_litert", "tflite_runtime"]
    for name in order:
        version = p.dist_version(dists[name])
        if version:
            return name, version
    return None


# ------------------------------------------------------------------------------------- report
def run_checks(probe: Probe | None = None) -> list[Check]:
    """Every check, in the order a bug report reads best."""
    from edgekit.devices.discovery import list_devices

    p = probe or Probe()
    devices = list_devices(p.sys_root, p.dev_root, use_pycoral=p.use_pycoral)
    lib = check_libedgetpu(p, devices)
    path = find_libedgetpu(p) if lib.status == OK else None
    checks = [
        check_python(p),
        check_platform(p),
        check_packages(p),
        check_pycoral(p),
        check_interpreter(p),
        R.check_wheels(p),
        check_numpy(p),
        lib,
        R.check_libedgetpu_build(p, path) if path else None,
        check_runtime_pairing(p, path),
        check_verdict_cache(p),
        check_devices(p, devices),
        R.check_passthrough(p, devices),
        R.check_usb_firmware(p, devices),
        R.check_usb_link(p, devices),
        R.check_kernel_driver(p, devices),
        R.check_pi5_pcie(p, devices),
        check_udev(p, devices),
        check_groups(p, devices),
        R.check_apt_source(p),
        check_compiler(p),
        check_tensorflow(p),
        check_onnx(p),
    ]
    return [c for c in checks if c is not None]


def report(checks: list[Check]) -> DoctorResult:
    """The result of ``edgekit doctor`` (its ``to_dict()`` is the ``--json`` document)."""
    from edgekit.results.doctor import DoctorResult

    return DoctorResult.from_dict(
        {"edgekit": __version__, "ok": not any(c.status == FAIL for c in checks), "checks": [asdict(c) for c in checks]}
    )
