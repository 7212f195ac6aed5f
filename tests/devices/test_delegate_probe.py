"""A libedgetpu that crashes the process it is loaded into must not take edgekit's process with it.

The stand-ins are real shared libraries compiled here with the system C compiler, loaded through the
interpreter package's own external-delegate entry point (``tflite_plugin_create_delegate``), as
libedgetpu is: one dereferences NULL there (the segfault a mismatched libedgetpu/TFLite pair gives),
one returns a delegate that claims no op. They test edgekit's plumbing, not the Edge TPU.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from edgekit.board import backends as B
from edgekit.board import delegate_probe
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
# A libedgetpu whose delegate never comes back (a wedged USB transfer, a deadlock in the runtime).
HANGING = r"""
#include <stddef.h>
#include <unistd.h>
void* tflite_plugin_create_delegate(char** keys, char** values, size_t n, void (*report)(const char*)) {
  for (;;) pause();
  return NULL;
}
void tflite_plugin_destroy_delegate(void* d) {}
"""
# A library that answers doctor's question as libedgetpu does.
VERSIONED = r"""
const char* edgetpu_version(void) { return "BuildLabel(stand-in), RuntimeVersion(14)"; }
"""


@pytest.fixture(scope="module")
def libraries(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler to build the stand-in libedgetpu libraries (apt-get install gcc)")
    folder = tmp_path_factory.mktemp("libs")
    built = {}
    for name, source in (("crashing", CRASHING), ("no_op", NO_OP), ("hanging", HANGING), ("versioned", VERSIONED)):
        (folder / f"{name}.c").write_text(source)
        subprocess.run(
            [cc, "-shared", "-fPIC", "-o", str(folder / f"lib{name}.so"), str(folder / f"{name}.c")], check=True
        )
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
    script = (
        "import sys\nfrom edgekit.board import backends as B\n"
        f"B.edgetpu_library = lambda system=None: {libraries['crashing']!r}\n"
        "B.open_model(sys.argv[1], 'auto')\n"
    )
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

    monkeypatch.setattr(delegate_probe.subprocess, "Popen", no_child)
    again = B.open_model(pair, "auto")
    assert again.device == "cpu" and "remembered from an earlier run" in again.notes[-1]


def test_an_explicit_edge_tpu_with_a_crashing_pair_is_a_device_error(libraries, pair, monkeypatch):
    _use(monkeypatch, libraries["crashing"])
    with pytest.raises(DeviceError) as caught:
        B.open_model(pair, "usb")
    assert "crashes with" in caught.value.message and "--device cpu" in caught.value.hint
    assert "feranick/libedgetpu" in caught.value.hint and caught.value.exit_code == 9


def test_an_ordinary_failure_is_not_remembered_and_gives_its_own_error(libraries, pair, monkeypatch):
    _use(monkeypatch, libraries["no_op"])  # loads, but cannot run the Edge TPU custom op
    opened = B.open_model(pair, "auto")
    assert opened.device == "cpu" and "compiled for the Edge TPU and cannot run on the CPU" in opened.notes[-1]
    assert not (pair.parent / "cache" / delegate_probe.CACHE_FILE).exists()


def test_a_working_pair_is_proven_once_then_trusted(libraries, pair, monkeypatch):
    cpu_model = str(pair.parent / "mobilenet_v1_0.25_128_quant.tflite")
    backend = B.select_backend()
    first = delegate_probe.prove(backend.name, backend.version, libraries["no_op"], libraries["no_op"], cpu_model, None)
    assert (first.state, first.cached) == ("ok", False)
    second = delegate_probe.prove(
        backend.name, backend.version, libraries["no_op"], libraries["no_op"], cpu_model, None
    )
    assert (second.state, second.cached) == ("ok", True)
    # another version of the package (or a replaced library) is another pair: proven again
    third = delegate_probe.prove(
        backend.name, backend.version + "+other", libraries["no_op"], libraries["no_op"], cpu_model, None
    )
    assert third.cached is False


def test_the_probe_is_off_with_its_variable(libraries, pair, monkeypatch):
    _use(monkeypatch, libraries["no_op"])
    monkeypatch.setenv(delegate_probe.PROBE_ENV, "0")

    def no_child(*args, **kwargs):
        raise AssertionError("EDGEKIT_DELEGATE_PROBE=0 starts no test process")

    monkeypatch.setattr(delegate_probe.subprocess, "Popen", no_child)
    opened = B.open_model(pair, "auto")  # loaded in-process straight away (and fails as it does here)
    assert opened.device == "cpu" and "cannot run on the CPU" in opened.notes[-1]


# ----------------------------------------------------------------- issue 23: children, files, cache, hangs
def _plant(folder, marker):
    """Modules a downloaded dataset or repository could hold: each leaves a mark, and would forge "ok"."""
    folder.mkdir(exist_ok=True)
    forge = f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\nimport sys\nsys.exit(0)\n"
    for name in ("json.py", "ctypes.py", "subprocess.py", "signal.py", "tempfile.py", "hashlib.py"):
        (folder / name).write_text(forge)
    for package in ("edgekit", "edgekit/devices"):
        (folder / package).mkdir(parents=True, exist_ok=True)
        (folder / package / "__init__.py").write_text(forge)
    (folder / "edgekit" / "devices" / "delegate_probe.py").write_text(forge)
    return folder


def test_the_probe_child_imports_nothing_from_the_current_folder(libraries, pair, tmp_path, monkeypatch):
    """Issue 23, security 1: a json.py (or an edgekit/ package) where the user stands must not forge "ok"."""
    marker = tmp_path / "ran"
    monkeypatch.chdir(_plant(tmp_path / "downloaded", marker))
    backend = B.select_backend()
    verdict = delegate_probe.prove(
        backend.name, backend.version, libraries["crashing"], libraries["crashing"], str(pair), None
    )
    assert not marker.exists(), marker.read_text()
    assert verdict.state == "crashed", verdict.detail


def test_the_probe_child_still_finds_what_pythonpath_names(libraries, pair, tmp_path, monkeypatch):
    """A relative PYTHONPATH entry the user relies on still works from the child's own folder (a
    sitecustomize there proves the child saw it)."""
    extra = tmp_path / "extra"
    extra.mkdir()
    seen = tmp_path / "seen"
    (extra / "sitecustomize.py").write_text(f"open({str(seen)!r}, 'w').write('yes')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", "extra")
    backend = B.select_backend()
    verdict = delegate_probe.prove(
        backend.name,
        backend.version,
        libraries["no_op"],
        libraries["no_op"],
        str(pair.parent / "mobilenet_v1_0.25_128_quant.tflite"),
        None,
    )
    assert verdict.state == "ok" and seen.read_text() == "yes"


def test_doctor_reads_the_runtime_version_without_code_from_the_current_folder(libraries, tmp_path, monkeypatch):
    from edgekit.doctor import diagnose as doctor

    marker = tmp_path / "ran"
    monkeypatch.chdir(_plant(tmp_path / "downloaded", marker))
    version = doctor.libedgetpu_version(libraries["versioned"])
    assert not marker.exists(), marker.read_text()
    assert version == "BuildLabel(stand-in), RuntimeVersion(14)"


def _linker_choice(env):
    """The file the real dynamic linker loads for libedgetpu.so.1 under ``env`` (read from /proc/self/maps)."""
    code = (
        "import ctypes\nctypes.CDLL('libedgetpu.so.1')\n"
        "print(next(l.split()[-1] for l in open('/proc/self/maps') if 'libedgetpu' in l or 'no_op' in l))\n"
    )
    done = subprocess.run([sys.executable, "-I", "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps (Linux)")
def test_the_library_resolved_is_the_one_the_dynamic_linker_loads(libraries, tmp_path):
    """Issue 23, security 2: LD_LIBRARY_PATH first, its order kept, symlinks followed to the real file."""
    first, second, real = tmp_path / "first", tmp_path / "second", tmp_path / "real"
    for folder in (first, second, real):
        folder.mkdir()
    shutil.copy(libraries["no_op"], real / "libno_op.so.1.0")
    os.symlink(real / "libno_op.so.1.0", second / "libedgetpu.so.1")
    cases = [f"{first}:{second}", f"{second};{first}", f"{first}::{second}"]
    for value in cases:
        env = {"LD_LIBRARY_PATH": value, "PATH": "/usr/bin:/bin"}
        resolved = delegate_probe.resolve_library("libedgetpu.so.1", "Linux", env)
        assert resolved == str(real / "libno_op.so.1.0") == _linker_choice(env), value
    # an empty entry (a slip: "$LD_LIBRARY_PATH:/opt/x" with the variable unset) names the current folder for
    # the linker; a libedgetpu.so.1 planted there is not taken through it
    planted = tmp_path / "downloaded"
    planted.mkdir()
    shutil.copy(libraries["crashing"], planted / "libedgetpu.so.1")
    cwd = os.getcwd()
    os.chdir(planted)
    try:
        resolved = delegate_probe.resolve_library("libedgetpu.so.1", "Linux", {"LD_LIBRARY_PATH": f":{second}"})
    finally:
        os.chdir(cwd)
    assert resolved == str(real / "libno_op.so.1.0")
    shutil.copy(libraries["no_op"], first / "libedgetpu.so.1")
    env = {"LD_LIBRARY_PATH": f"{first}:{second}", "PATH": "/usr/bin:/bin"}
    assert delegate_probe.resolve_library("libedgetpu.so.1", "Linux", env) == str(first / "libedgetpu.so.1")
    assert _linker_choice(env) == str(first / "libedgetpu.so.1")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="LD_LIBRARY_PATH is the Linux linker's")
def test_a_library_on_ld_library_path_is_proven_not_one_in_a_known_folder(libraries, pair, tmp_path, monkeypatch):
    """The verdict is filed under, and the note names, the file the linker would load: the crashing one on
    LD_LIBRARY_PATH, not the working one in a known folder."""
    known, path_dir = tmp_path / "known", tmp_path / "ld_path"
    known.mkdir()
    path_dir.mkdir()
    shutil.copy(libraries["no_op"], known / "libedgetpu.so.1")
    shutil.copy(libraries["crashing"], path_dir / "libedgetpu.so.1")
    monkeypatch.setitem(delegate_probe.KNOWN_LIBRARY_DIRS, "Linux", [str(known)])
    monkeypatch.setenv("LD_LIBRARY_PATH", str(path_dir))
    _use(monkeypatch, "libedgetpu.so.1")
    opened = B.open_model(pair, "auto")
    assert opened.device == "cpu"
    assert f"{path_dir / 'libedgetpu.so.1'} crashes with" in opened.notes[-1], opened.notes
    cache = json.loads((pair.parent / "cache" / delegate_probe.CACHE_FILE).read_text())
    assert [k for k in cache if str(path_dir / "libedgetpu.so.1") in k] == list(cache)


def test_a_verdict_is_not_reused_for_another_build_at_the_same_path(libraries, pair, tmp_path):
    """Same path, same size, same mtime, other bytes: another pair, proven again (and found crashing)."""
    working, crashing = Path(libraries["no_op"]).read_bytes(), Path(libraries["crashing"]).read_bytes()
    size = max(len(working), len(crashing))
    library = tmp_path / "lib" / "libedgetpu.so.1"
    library.parent.mkdir()
    cpu_model = str(pair.parent / "mobilenet_v1_0.25_128_quant.tflite")
    backend = B.select_backend()
    library.write_bytes(working.ljust(size, b"\0"))
    os.utime(library, ns=(1_600_000_000 * 10**9, 1_600_000_000 * 10**9))
    first = delegate_probe.prove(backend.name, backend.version, str(library), str(library), cpu_model, None)
    assert first.state == "ok"
    library.write_bytes(crashing.ljust(size, b"\0"))
    os.utime(library, ns=(1_600_000_000 * 10**9, 1_600_000_000 * 10**9))
    second = delegate_probe.prove(backend.name, backend.version, str(library), str(library), cpu_model, None)
    assert (second.state, second.cached) == ("crashed", False)


def _forge_ok(cache_dir, library, backend):
    """A cache file saying the crashing pair is proven: what another user could plant."""
    cache_dir.mkdir(exist_ok=True)
    key = delegate_probe.pair_key(backend.name, backend.version, library)
    (cache_dir / delegate_probe.CACHE_FILE).write_text(json.dumps({key: {"state": "ok", "detail": "forged"}}))
    return cache_dir / delegate_probe.CACHE_FILE


@pytest.mark.parametrize(
    "how",
    [
        "file world-writable",
        "file group-writable",
        "folder world-writable",
        "file of another user",
        "folder of another user",
    ],
)
def test_a_cache_the_user_does_not_own_alone_is_not_trusted(libraries, pair, tmp_path, monkeypatch, how):
    """Issue 23, security 3: a planted verdict must not make edgekit load a crashing library."""
    if "another user" in how and os.geteuid() != 0:
        pytest.skip("making a file of another user needs root")
    backend = B.select_backend()
    folder = tmp_path / "shared-cache"
    folder.mkdir(mode=0o700)
    forged = _forge_ok(folder, libraries["crashing"], backend)
    forged.chmod(0o600)
    if how == "file world-writable":
        forged.chmod(0o666)
    elif how == "file group-writable":
        forged.chmod(0o660)
        shared = [g for g in ([65534] if os.geteuid() == 0 else os.getgroups()) if not delegate_probe._only_mine(g)]
        if not shared:
            pytest.skip("no group but the user's own to give the file to")
        os.chown(forged, -1, shared[0])
    elif how == "folder world-writable":
        folder.chmod(0o777)
    elif how == "file of another user":
        os.chown(forged, 65534, 65534)
    else:
        os.chown(folder, 65534, 65534)
    monkeypatch.setenv(delegate_probe.CACHE_ENV, str(folder))
    assert delegate_probe.read_cache() == {}
    verdict = delegate_probe.prove(
        backend.name, backend.version, libraries["crashing"], libraries["crashing"], str(pair), None
    )
    assert (verdict.state, verdict.cached) == ("crashed", False)


def test_a_symlinked_cache_folder_is_neither_read_nor_written_through(libraries, pair, tmp_path, monkeypatch):
    backend = B.select_backend()
    real = tmp_path / "elsewhere"
    real.mkdir(mode=0o700)
    _forge_ok(real, libraries["crashing"], backend).chmod(0o600)
    before = sorted(p.name for p in real.iterdir())
    link = tmp_path / "cache-link"
    link.symlink_to(real)
    monkeypatch.setenv(delegate_probe.CACHE_ENV, str(link))
    assert delegate_probe.read_cache() == {}
    verdict = delegate_probe.prove(
        backend.name, backend.version, libraries["crashing"], libraries["crashing"], str(pair), None
    )
    assert (verdict.state, verdict.cached) == ("crashed", False)
    assert sorted(p.name for p in real.iterdir()) == before
    assert "forged" in (real / delegate_probe.CACHE_FILE).read_text()


def test_the_cache_is_written_privately_and_atomically(libraries, pair, tmp_path):
    backend = B.select_backend()
    verdict = delegate_probe.prove(
        backend.name, backend.version, libraries["crashing"], libraries["crashing"], str(pair), None
    )
    assert verdict.state == "crashed"
    folder = pair.parent / "cache"
    assert [p.name for p in folder.iterdir()] == [delegate_probe.CACHE_FILE]
    assert folder.stat().st_mode & 0o777 == 0o700
    assert (folder / delegate_probe.CACHE_FILE).stat().st_mode & 0o777 == 0o600
    again = delegate_probe.prove(
        backend.name, backend.version, libraries["crashing"], libraries["crashing"], str(pair), None
    )
    assert (again.state, again.cached) == ("crashed", True)


def _limit_memory():  # runs in the child: a cache that is endless must not take the machine's memory
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


@pytest.mark.parametrize("what", ["fifo", "symlink to /dev/zero", "folder", "huge file", "deep JSON"])
def test_a_hostile_cache_file_neither_hangs_nor_crashes_nor_leaves_files(tmp_path, what):
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    target = folder / delegate_probe.CACHE_FILE
    if what == "fifo":
        os.mkfifo(target, 0o600)
    elif what == "symlink to /dev/zero":
        target.symlink_to("/dev/zero")
    elif what == "folder":
        target.mkdir(mode=0o700)
    elif what == "huge file":
        with open(target, "wb") as f:
            f.truncate(64 << 20)
        target.chmod(0o600)
    else:
        target.write_text("[" * 200000 + "]" * 200000)
        target.chmod(0o600)
    before = sorted(p.name for p in folder.iterdir())
    code = (
        "from edgekit.board import delegate_probe as d\n"
        "d._write_cache('k', d.PairVerdict('ok', '', False))\nprint(sorted(d.read_cache()))\n"
    )
    env = {**os.environ, delegate_probe.CACHE_ENV: str(folder), "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, preexec_fn=_limit_memory
    )
    assert done.returncode == 0, done.stderr
    after = sorted(p.name for p in folder.iterdir())
    assert after == before  # no temporary file left behind
    if what == "folder":  # cannot be replaced: no cache, and nothing else
        assert done.stdout.strip() == "[]" and target.is_dir()
    else:  # an entry in the user's own folder that is no cache: replaced by one, atomically
        assert done.stdout.strip() == "['k']" and target.is_file() and not target.is_symlink()


def test_a_probe_that_hangs_is_a_failed_pair_never_loaded_here(libraries, pair, monkeypatch):
    """Issue 23, robustness: the child is killed after the time limit, the pair refused and remembered."""
    import time

    monkeypatch.setattr(delegate_probe, "PROBE_TIMEOUT", 3.0)
    _use(monkeypatch, libraries["hanging"])
    start = time.monotonic()
    opened = B.open_model(pair, "auto")
    assert time.monotonic() - start < 30
    assert opened.device == "cpu" and "hangs with" in opened.notes[-1] and "no answer within 3 s" in opened.notes[-1]
    with pytest.raises(DeviceError) as caught:  # remembered: refused at once, no second wait
        start = time.monotonic()
        B.open_model(pair, "usb")
    assert time.monotonic() - start < 10 and "remembered from an earlier run" in caught.value.message
    assert caught.value.exit_code == 9


def test_pycoral_gets_the_resolved_file_not_its_bare_name_lookup(libraries, pair, tmp_path, monkeypatch):
    """pycoral's make_interpreter would load libedgetpu by its bare name, wherever the linker finds it: with a
    file resolved, its tflite_runtime load_delegate gets that very file instead."""
    link = tmp_path / "libedgetpu.so.1"
    link.symlink_to(libraries["no_op"])
    _use(monkeypatch, str(link))
    monkeypatch.setenv(delegate_probe.PROBE_ENV, "0")  # a stand-in backend cannot be proven in a child
    loaded = []

    class Interpreter:
        def __init__(self, **kwargs):
            self.kwargs = kwargs

        def allocate_tensors(self):
            pass

    def make_interpreter(*args, **kwargs):
        raise AssertionError("the bare-name factory is not used when the file is known")

    backend = B.Backend(
        "pycoral",
        "2.0.0",
        Interpreter,
        lambda library, options=None: loaded.append(library) or "d",
        make_edgetpu_interpreter=make_interpreter,
    )
    opened = B.open_model(pair, "usb", backend=backend)
    assert loaded == [libraries["no_op"]] and opened.interpreter.kwargs["experimental_delegates"] == ["d"]


def test_a_child_looks_for_modules_as_its_parent_does(tmp_path):
    """A parent started with -I (or -E/-s) gives its children the same flags; the child never has '' first."""
    code = (
        "import sys\nsys.path.insert(0, sys.argv[1])\nfrom edgekit.board import delegate_probe as d\n"
        "r = d.run_python('print(sys.flags.isolated, sys.flags.ignore_environment, \"\" in sys.path)', [], 30)\n"
        "print(r.stdout.decode().strip())\n"
    )
    for flags, expected in (([], "0 0 False"), (["-I"], "1 1 False"), (["-E"], "0 1 False")):
        done = subprocess.run(
            [sys.executable, *flags, "-c", code, str(REPO)], capture_output=True, text=True, cwd=tmp_path, timeout=60
        )
        assert done.stdout.strip() == expected, (flags, done.stdout, done.stderr)
