"""Prove an interpreter package and libedgetpu work together, in a child process, before loading them here.

Coral's libedgetpu is built against one TensorFlow Lite; loaded into another it can crash the whole
process (stock libedgetpu works with tflite-runtime up to 2.11.1 and segfaults with 2.12 to 2.15:
google-coral/libedgetpu#53; pycoral#137 and oberluz/pycoral#13 report the same with community wheels
mismatched to their runtime). A segfault is the one failure edgekit cannot turn into an error line, so
the first time a pair is used, a child process opens the model on the Edge TPU and runs it once. A
child killed by a signal marks the pair as crashing: the caller falls back to the CPU (or stops with
one line) instead of dying. The verdict is cached per pair (Python, interpreter package and version,
the library file's path, size and mtime), so a proven pair costs nothing after its first use and a
new libedgetpu or package is proven again. A child that fails with an ordinary error (no Edge TPU,
a bad model) proves nothing either way: nothing is cached and the in-process load gives its error.

Stdlib only and Python 3.7 compatible, like the rest of the runtime half that boards run.
``EDGEKIT_DELEGATE_PROBE=0`` turns the probe off; ``EDGEKIT_CACHE_DIR`` moves the cache.
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Optional

PROBE_ENV = "EDGEKIT_DELEGATE_PROBE"
CACHE_ENV = "EDGEKIT_CACHE_DIR"
CACHE_FILE = "delegate-pairs.json"
PROBE_TIMEOUT = 60.0   # seconds: a first Edge TPU invoke loads the model's parameters; a hang is a failure too

# Where Coral's packages put libedgetpu (doctor reports from the same list).
KNOWN_LIBRARY_DIRS = {
    "Linux": ["/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib/arm-linux-gnueabihf",
              "/usr/lib", "/usr/local/lib", "/lib"],
    "Darwin": ["/usr/local/lib", "/opt/homebrew/lib"],
    "Windows": [r"C:\Windows\System32", r"C:\Program Files\EdgeTPU"],
}

# Builds of libedgetpu, tflite-runtime and pycoral for the TFLite and Python versions Coral stopped at
# (Python 3.10+): the pairs the community reports working (google-coral/pycoral#137, libedgetpu#53).
COMMUNITY_BUILDS = ("libedgetpu rebuilt for newer TFLite: github.com/feranick/libedgetpu/releases; matching "
                    "tflite-runtime wheels for Python 3.10+: github.com/feranick/TFlite-builds/releases; pycoral: "
                    "github.com/feranick/pycoral/releases (or oberluz/pycoral); or Coral's own pair: "
                    "tflite-runtime 2.5.0.post1 with libedgetpu1-std on Python 3.7-3.9")


def enabled() -> bool:
    return os.environ.get(PROBE_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def locate_library(name: str, system: str) -> Optional[str]:
    """The libedgetpu file a dlopen of ``name`` would find (a path as given, a known folder, the linker)."""
    if os.sep in name or (os.altsep and os.altsep in name):
        return name if os.path.isfile(name) else None
    for folder in KNOWN_LIBRARY_DIRS.get(system, []):
        candidate = os.path.join(folder, name)
        if os.path.isfile(candidate):
            return candidate
    import ctypes.util

    return ctypes.util.find_library("edgetpu")


def pair_key(backend_name: str, backend_version: str, library_file: str) -> str:
    """What identifies a pair: the Python, the package and version, and the library file as it is now."""
    try:
        real = os.path.realpath(library_file)
        st = os.stat(real)
        library = "{} {} {}".format(real, st.st_size, int(st.st_mtime))
    except OSError:
        library = library_file
    return "python {}.{}.{} | {} {} | {}".format(sys.version_info[0], sys.version_info[1], sys.version_info[2],
                                                 backend_name, backend_version, library)


def cache_path() -> str:
    root = os.environ.get(CACHE_ENV) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "edgekit")
    return os.path.join(root, CACHE_FILE)


def read_cache() -> Dict[str, Any]:
    try:
        with open(cache_path(), encoding="utf-8") as f:
            data = json.load(f)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError, RecursionError):
        return {}


def _write_cache(key: str, verdict: Dict[str, Any]) -> None:
    """Record one verdict (atomically; a cache that cannot be written only costs a probe next time)."""
    path = cache_path()
    data = read_cache()
    data[key] = verdict
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".delegate-pairs.")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except OSError:
        pass


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "signal {}".format(number)


#: What the child process runs (it imports the runtime core; this module must not, being below it).
CHILD_MODULE = "edgekit.devices.delegate_child"


class PairVerdict:
    """What the probe found: ``ok`` (proven), ``crashed`` (with the signal) or ``unproven`` (an ordinary failure)."""

    def __init__(self, state: str, detail: str, cached: bool):
        self.state, self.detail, self.cached = state, detail, cached


def prove(backend_name: str, backend_version: str, library: str, library_file: str, model_path: str,
          device_option: Optional[str], timeout: float = PROBE_TIMEOUT) -> PairVerdict:
    """Open ``model_path`` on the Edge TPU and run it once in a child process, unless the pair's verdict is cached."""
    key = pair_key(backend_name, backend_version, library_file)
    known = read_cache().get(key)
    if isinstance(known, dict) and known.get("state") in ("ok", "crashed"):
        return PairVerdict(str(known["state"]), str(known.get("detail", "")), True)
    argv = [sys.executable, "-m", CHILD_MODULE, backend_name, library, model_path,
            device_option or ""]
    env = dict(os.environ)
    env[PROBE_ENV] = "0"   # the child loads in-process: it is the test
    try:
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return PairVerdict("unproven", "the Edge TPU did not answer within {:g} s in a test process".format(timeout),
                           False)
    except OSError as exc:
        return PairVerdict("unproven", "could not start a test process ({})".format(exc), False)
    if done.returncode < 0:
        verdict = {"state": "crashed", "detail": _signal_name(-done.returncode)}
    elif done.returncode == 0:
        verdict = {"state": "ok", "detail": "ran a model on the Edge TPU"}
    else:
        lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return PairVerdict("unproven", lines[-1] if lines else "exit code {}".format(done.returncode), False)
    verdict["python"] = sys.executable
    _write_cache(key, verdict)
    return PairVerdict(verdict["state"], verdict["detail"], False)
