"""Prove an interpreter package and libedgetpu work together, in a child process, before loading them here.

Coral's libedgetpu is built against one TensorFlow Lite; loaded into another it can crash the whole
process (stock libedgetpu works with tflite-runtime up to 2.11.1 and segfaults with 2.12 to 2.15:
google-coral/libedgetpu#53; pycoral#137 and oberluz/pycoral#13 report the same with community wheels
mismatched to their runtime). A segfault is the one failure edgekit cannot turn into an error line, so
the first time a pair is used, a child process opens the model on the Edge TPU and runs it once. A
child killed by a signal marks the pair as crashing, a child that does not answer within
``PROBE_TIMEOUT`` as hanging: either way the caller falls back to the CPU (or stops with one line)
instead of dying or hanging. A child that fails with an ordinary error (no Edge TPU, a bad model)
proves nothing either way: nothing is cached and the in-process load gives its error. A child that
cannot even start its test proves nothing and the library is not loaded.

What is proven is exactly what is loaded: :func:`resolve_library` finds the file the dynamic linker
would load for the bare name (``LD_LIBRARY_PATH`` first, as the linker does), the child loads that
real path, and so does the caller. The verdict is cached per pair (Python, interpreter package and
version, the library's real path, size and sha256), so a proven pair costs nothing after its first
use and another build of libedgetpu is proven again.

The cache is trusted only when it is the user's own: a folder and file owned by this user, writable by
nobody else, neither a symlink, the file regular and small; anything else is ignored (and never
written through). Children never import from the current folder: they run from a private empty
folder, without the ``''`` entry ``python -c`` puts first on ``sys.path``.

Stdlib only and Python 3.7 compatible, like the rest of the runtime half that boards run.
``EDGEKIT_DELEGATE_PROBE=0`` turns the probe off; ``EDGEKIT_CACHE_DIR`` moves the cache.
"""

import hashlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Mapping, Optional

PROBE_ENV = "EDGEKIT_DELEGATE_PROBE"
CACHE_ENV = "EDGEKIT_CACHE_DIR"
CACHE_FILE = "delegate-pairs.json"
CACHE_MAX_BYTES = 1 << 20  # a verdict is ~200 bytes: a bigger file is not ours
PROBE_TIMEOUT = 60.0  # seconds: a first Edge TPU invoke loads the model's parameters; a hang is a failure too

# Verdicts: what a child proved. FAILED ones are cached and refuse the pair.
OK, CRASHED, HUNG, UNPROVEN, UNPROVABLE = "ok", "crashed", "hung", "unproven", "unprovable"
FAILED = (CRASHED, HUNG)

if TYPE_CHECKING:  # for type checkers only: typing.TypedDict is Python 3.8, a board runs 3.7
    from typing import TypedDict  # novermin

    class _PopenSession(TypedDict, total=False):
        """Popen's start_new_session where the platform has sessions (POSIX): subprocess's keyword, not a document."""

        start_new_session: bool


# The child's exit code for an ordinary failure of the test itself (the delegate or the model refused);
# any other non-zero code means the child could not run the test at all.
CHILD_ORDINARY_FAILURE = 3

# Where Coral's packages put libedgetpu (doctor reports from the same list); looked at after the linker's own
# search path.
KNOWN_LIBRARY_DIRS = {
    "Linux": [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib/arm-linux-gnueabihf",
        "/usr/lib",
        "/usr/local/lib",
        "/lib",
    ],
    "Darwin": ["/usr/local/lib", "/opt/homebrew/lib"],
    "Windows": [r"C:\Windows\System32", r"C:\Program Files\EdgeTPU"],
}

# Builds of libedgetpu, tflite-runtime and pycoral for the TFLite and Python versions Coral stopped at
# (Python 3.10+): the pairs the community reports working (google-coral/pycoral#137, libedgetpu#53).
COMMUNITY_BUILDS = (
    "libedgetpu rebuilt for newer TFLite: github.com/feranick/libedgetpu/releases; matching "
    "tflite-runtime wheels for Python 3.10+: github.com/feranick/TFlite-builds/releases; pycoral: "
    "github.com/feranick/pycoral/releases (or oberluz/pycoral); or Coral's own pair: "
    "tflite-runtime 2.5.0.post1 with libedgetpu1-std on Python 3.7-3.9"
)


def enabled() -> bool:
    return os.environ.get(PROBE_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


# --------------------------------------------------------------------------- which file is loaded
# ldconfig -p names each library's ABI; the one of this process (by machine) must match.
_LDCONFIG_ABI = {
    "x86_64": "x86-64",
    "aarch64": "AArch64",
    "armv7l": "hard-float",
    "armv8l": "hard-float",
    "ppc64le": "64bit",
    "s390x": "64bit",
    "riscv64": "64bit",
}


def _search_dirs(variable: str, env: Mapping[str, str]) -> List[str]:
    """The folders of a search-path variable, as the dynamic linker reads them (``:`` or ``;`` between
    entries; a relative entry is relative to the current folder). An empty entry, which the linker takes
    for the current folder, is skipped: it is nearly always a slip (``$LD_LIBRARY_PATH:/opt/x`` with the
    variable unset), and a libedgetpu in a downloaded folder must not be loaded through it."""
    value = env.get(variable) or ""
    return [os.path.abspath(entry) for entry in value.replace(";", ":").split(":") if entry]


def _ldconfig_cache(name: str) -> List[str]:
    """The paths ``/etc/ld.so.cache`` lists for ``name`` with this process's ABI, in the linker's order."""
    import platform

    ldconfig = next((p for p in ("/sbin/ldconfig", "/usr/sbin/ldconfig") if os.access(p, os.X_OK)), None)
    if ldconfig is None:
        return []
    try:
        out = subprocess.run(
            [ldconfig, "-p"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            timeout=10,
            cwd="/",
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    abi = _LDCONFIG_ABI.get(platform.machine())
    found = []
    for line in out.decode("utf-8", "replace").splitlines():
        left, sep, path = line.strip().partition(" => ")
        soname, _, flags = left.partition(" ")
        if not sep or soname != name:
            continue
        if abi is not None and abi not in flags:
            continue
        if abi is None and "," in flags:  # an unknown machine: only plain (libc6) entries
            continue
        found.append(path.strip())
    return found


def _default_dirs() -> List[str]:
    """The linker's trusted folders after its cache (Debian's multiarch ones first)."""
    multiarch = getattr(sys.implementation, "_multiarch", None)
    dirs = ["/lib/" + multiarch, "/usr/lib/" + multiarch] if multiarch else []
    return dirs + ["/lib64", "/usr/lib64", "/lib", "/usr/lib"]


def library_candidates(name: str, system: str, env: Optional[Mapping[str, str]] = None) -> Iterator[str]:
    """Where a ``dlopen``/``LoadLibrary`` of ``name`` looks, in order (the first file found is loaded)."""
    env = os.environ if env is None else env
    if os.sep in name or (os.altsep and os.altsep in name):
        yield os.path.abspath(name)
    elif system == "Linux":
        for folder in _search_dirs("LD_LIBRARY_PATH", env):
            yield os.path.join(folder, name)
        yield from _ldconfig_cache(name)
        for folder in _default_dirs() + KNOWN_LIBRARY_DIRS["Linux"]:
            yield os.path.join(folder, name)
    elif system == "Darwin":  # dyld; not the current folder, which dlopen would also try for a bare name
        fallback = _search_dirs("DYLD_FALLBACK_LIBRARY_PATH", env) or [
            os.path.join(os.path.expanduser("~"), "lib"),
            "/usr/local/lib",
            "/usr/lib",
        ]
        for folder in (
            _search_dirs("DYLD_LIBRARY_PATH", env)
            + _search_dirs("LD_LIBRARY_PATH", env)
            + fallback
            + KNOWN_LIBRARY_DIRS["Darwin"]
        ):
            yield os.path.join(folder, name)
    else:  # Windows: the known folders, then PATH (never the current folder)
        for folder in KNOWN_LIBRARY_DIRS.get(system, []) + (env.get("PATH") or "").split(os.pathsep):
            if folder and os.path.isabs(folder):
                yield os.path.join(folder, name)


def resolve_library(name: str, system: str, env: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The real path of the libedgetpu file a load of ``name`` would find, or None when there is none.

    The caller loads this path (not the bare name), so the file proven in a child is the file loaded.
    """
    for candidate in library_candidates(name, system, env):
        real = os.path.realpath(candidate)
        try:
            if stat.S_ISREG(os.stat(real).st_mode):
                return real
        except (OSError, ValueError):
            continue
    return None


def library_identity(path: str) -> str:
    """The library as it is now: real path, size and sha256 (a rebuilt or replaced file is another pair)."""
    real = os.path.realpath(path)
    digest = hashlib.sha256()
    try:
        fd = os.open(real, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                return f"{real} (not a regular file)"
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
    except OSError as exc:
        return f"{real} (unreadable: {exc.strerror or exc})"
    return f"{real} {st.st_size} sha256:{digest.hexdigest()}"


def pair_key(backend_name: str, backend_version: str, library_file: str) -> str:
    """What identifies a pair: the Python, the package and version, and the library file as it is now."""
    return f"python {sys.version_info[0]}.{sys.version_info[1]}.{sys.version_info[2]} | {backend_name} {backend_version} | {library_identity(library_file)}"


# --------------------------------------------------------------------------------- the verdict cache
def cache_dir() -> str:
    return os.environ.get(CACHE_ENV) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "edgekit"
    )


def cache_path() -> str:
    return os.path.join(cache_dir(), CACHE_FILE)


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRFD = os.open in getattr(os, "supports_dir_fd", set()) and hasattr(os, "O_DIRECTORY") and bool(_NOFOLLOW)


def _only_mine(gid: int) -> bool:
    """A group that is this user's private group (Debian's user-private groups, as OpenSSH's Debian patch
    allows): named after the user, with no other member."""
    try:
        import grp
        import pwd

        user = pwd.getpwuid(os.geteuid()).pw_name
        group = grp.getgrgid(gid)
    except (ImportError, KeyError, OSError):
        return False
    return group.gr_name == user and gid == os.getegid() and set(group.gr_mem) <= {user}


def _writable_by_others(st: "os.stat_result") -> bool:
    if st.st_mode & stat.S_IWOTH:
        return True
    return bool(st.st_mode & stat.S_IWGRP) and not _only_mine(st.st_gid)


def _owned_privately(st: "os.stat_result") -> bool:
    """This user's, and writable by no one else (Windows has no owner here, and its modes mean nothing)."""
    if not hasattr(os, "geteuid"):
        return True
    return st.st_uid == os.geteuid() and not _writable_by_others(st)


def _safe_ancestors(folder: str) -> bool:
    """No one else can swap the cache folder: each folder above it is root's or this user's, and one that
    others may write to has the sticky bit (like /tmp)."""
    if not hasattr(os, "geteuid"):
        return True
    here = os.path.dirname(os.path.abspath(folder))
    while True:
        try:
            st = os.stat(here)
        except OSError:
            return False
        if st.st_uid not in (0, os.geteuid()):
            return False
        if _writable_by_others(st) and not st.st_mode & stat.S_ISVTX:
            return False
        parent = os.path.dirname(here)
        if parent == here:
            return True
        here = parent


def _open_cache_dir(create: bool) -> Optional[int]:
    """A descriptor of the cache folder when it is one this user alone controls, else None (never follows a
    symlink). ``create`` makes a missing one, private."""
    folder = cache_dir()
    if create:
        try:
            os.makedirs(folder, mode=0o700)
        except OSError:
            pass  # there already (checked below), or cannot be made (no cache)
    if not _safe_ancestors(folder):
        return None
    try:
        if _DIRFD:
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW | _CLOEXEC)
            st = os.fstat(fd)
        else:  # Windows: no descriptors for folders; look without following
            st = os.lstat(folder)
            fd = -1
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or not _owned_privately(st):
        if fd >= 0:
            os.close(fd)
        return None
    return fd


def _in_dir(dir_fd: int, name: str) -> Dict[str, int]:
    """Keyword arguments that open ``name`` inside the cache folder (by descriptor where the OS can)."""
    return {"dir_fd": dir_fd} if dir_fd >= 0 else {}


def _read_cache_in(dir_fd: int) -> Dict[str, Any]:
    name = CACHE_FILE if dir_fd >= 0 else cache_path()
    flags = os.O_RDONLY | _NOFOLLOW | _CLOEXEC | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(name, flags, **_in_dir(dir_fd, name))
    except OSError:
        return {}
    try:
        st = os.fstat(fd)
        if (
            not stat.S_ISREG(st.st_mode)
            or not _owned_privately(st)
            or st.st_size > CACHE_MAX_BYTES
            or (dir_fd < 0 and os.path.islink(name))
        ):
            return {}
        chunks, size = [], 0
        while size <= CACHE_MAX_BYTES:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > CACHE_MAX_BYTES:
            return {}
        data = json.loads(b"".join(chunks).decode("utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError, RecursionError):
        return {}
    finally:
        os.close(fd)


def read_cache() -> "Dict[str, PairVerdict]":
    """The cached verdicts (pair key -> its verdict: ``ok``, ``crashed`` or ``hung``), or {} when there are none or
    the cache is not one this user alone controls; an entry that is not such a verdict is left out."""
    dir_fd = _open_cache_dir(create=False)
    if dir_fd is None:
        return {}
    try:
        raw = _read_cache_in(dir_fd)
    finally:
        if dir_fd >= 0:
            os.close(dir_fd)
    return {
        key: PairVerdict(str(entry["state"]), str(entry.get("detail", "")), True)
        for key, entry in raw.items()
        if isinstance(entry, dict) and entry.get("state") in (OK,) + FAILED
    }


def cache_problem() -> Optional[str]:
    """Why the verdict cache is not used (for doctor), or None when it is the user's own or not made yet."""
    folder = cache_dir()
    if not os.path.lexists(folder):
        return None
    if not _safe_ancestors(folder):
        return f"a folder above {folder} is another user's or writable by others"
    try:
        st = os.lstat(folder)
    except OSError as exc:
        return f"{folder} cannot be read ({exc.strerror or exc})"
    if stat.S_ISLNK(st.st_mode):
        return f"{folder} is a symlink"
    if not stat.S_ISDIR(st.st_mode):
        return f"{folder} is not a folder"
    if not _owned_privately(st):
        return f"{folder} is another user's or writable by others"
    try:
        st = os.lstat(cache_path())
    except OSError:
        return None
    if stat.S_ISDIR(st.st_mode):
        return f"{cache_path()} is a folder"
    return None


def _write_cache(key: str, verdict: "PairVerdict") -> None:
    """Record one verdict atomically in the user's own cache folder (its state, detail and this Python, which ran
    the test); a cache that cannot be trusted or written only costs a probe next time (and leaves nothing behind)."""
    dir_fd = _open_cache_dir(create=True)
    if dir_fd is None:
        return
    tmp = f".delegate-pairs.{os.getpid()}.{os.urandom(6).hex()}.tmp"
    target = CACHE_FILE if dir_fd >= 0 else cache_path()
    if dir_fd < 0:
        tmp = os.path.join(cache_dir(), tmp)
    made = False
    try:
        data = _read_cache_in(dir_fd)
        data[key] = {"state": verdict.state, "detail": verdict.detail, "python": sys.executable}
        fd = os.open(
            tmp,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC | getattr(os, "O_BINARY", 0),
            0o600,
            **_in_dir(dir_fd, tmp),
        )
        made = True
        with os.fdopen(fd, "wb") as f:
            f.write(json.dumps(data, indent=1, sort_keys=True).encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
        if dir_fd >= 0:
            os.replace(tmp, target, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        else:
            os.replace(tmp, target)
        made = False
    except (OSError, ValueError):
        pass
    finally:
        if made:
            try:
                os.unlink(tmp, **_in_dir(dir_fd, tmp))
            except OSError:
                pass
        if dir_fd >= 0:
            os.close(dir_fd)


# ------------------------------------------------------------------------------------- children
class ChildResult:
    """How a child ended: ``returncode`` (None when it was killed for running past its time), the start
    of its stdout and the end of its stderr (both bounded: a child cannot fill our memory)."""

    def __init__(self, returncode: Optional[int], stdout: bytes, stderr: bytes, started: bool = True):
        self.returncode, self.stdout, self.stderr, self.started = returncode, stdout, stderr, started


_KEEP = 64 * 1024


def _drain(stream: Any, keep: List[bytes], tail: bool) -> None:
    """Read a child's pipe to its end, holding at most _KEEP bytes of it: the first ones, or the last."""
    held = b""
    try:
        while True:
            chunk = stream.read1(65536)
            if not chunk:
                break
            if tail:
                held = (held + chunk)[-_KEEP:]
            elif len(held) < _KEEP:
                held = (held + chunk)[:_KEEP]
    except (OSError, ValueError):
        pass
    keep.append(held)


def child_env(base: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """The environment of a child: this one, with ``PYTHONPATH`` made absolute against the current folder
    (the child runs elsewhere) and its empty entries (which would name the current folder) dropped."""
    env = dict(os.environ if base is None else base)
    if env.get("PYTHONPATH"):
        entries = [os.path.abspath(e) for e in env["PYTHONPATH"].split(os.pathsep) if e]
        if entries:
            env["PYTHONPATH"] = os.pathsep.join(entries)
        else:
            del env["PYTHONPATH"]
    return env


def _package_root() -> Optional[str]:
    """The folder this edgekit was imported from, for a child that would not find it on its own (a board's
    staging folder, a script's own sys.path), or None when site-packages holds it anyway."""
    import site

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sites = list(getattr(site, "getsitepackages", list)())
    user = getattr(site, "getusersitepackages", lambda: None)()
    sites += [user] if user else []
    return None if any(os.path.abspath(s) == root for s in sites) else root


def _same_flags() -> List[str]:
    """The command-line flags that decide where this Python looks for modules, for its child to look alike."""
    if getattr(sys.flags, "isolated", 0):
        return ["-I"] + (["-S"] if sys.flags.no_site else [])
    return [
        flag
        for flag, on in (
            ("-E", sys.flags.ignore_environment),
            ("-s", sys.flags.no_user_site),
            ("-S", sys.flags.no_site),
        )
        if on
    ]


def run_python(
    code: str, args: List[str], timeout: float, env: Optional[Mapping[str, str]] = None, with_edgekit: bool = False
) -> ChildResult:
    """Run ``code`` in a child of this Python that imports nothing from the current folder.

    The child starts in a private empty folder, drops the ``''`` that ``-c`` puts first on its path (the
    same command works on Python 3.7, which has no ``-P``), and keeps PYTHONPATH, the user site and the
    editable installs the user relies on. With ``with_edgekit`` it finds this very edgekit. Past
    ``timeout`` seconds the child and its own children are killed (``returncode`` None).
    """
    prelude = "import sys\nif sys.path and sys.path[0] == '':\n    del sys.path[0]\n"
    root = _package_root() if with_edgekit else None
    if root:
        prelude += f"sys.path.insert(0, {root!r})\n"
    workdir = tempfile.mkdtemp(prefix="edgekit-child-")
    try:
        popen_extra: _PopenSession = {"start_new_session": True} if os.name == "posix" else {}
        try:
            argv = [sys.executable] + _same_flags() + ["-c", prelude + code] + list(args)
            proc = subprocess.Popen(
                argv,
                cwd=workdir,
                env=child_env(env),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                **popen_extra,
            )
        except (OSError, ValueError) as exc:
            return ChildResult(
                None,
                b"",
                "cannot start {}: {}".format(sys.executable, getattr(exc, "strerror", None) or exc).encode(
                    "utf-8", "replace"
                ),
                started=False,
            )
        out = []  # type: List[bytes]
        err = []  # type: List[bytes]
        readers = [
            threading.Thread(target=_drain, args=(proc.stdout, out, False), daemon=True),
            threading.Thread(target=_drain, args=(proc.stderr, err, True), daemon=True),
        ]
        for t in readers:
            t.start()
        returncode = None  # type: Optional[int]
        try:
            returncode = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill(proc)
        for t in readers:
            t.join(timeout=5)
        for stream in (proc.stdout, proc.stderr):
            assert stream is not None  # both are PIPEs
            try:
                stream.close()
            except OSError:
                pass
        return ChildResult(returncode, out[0] if out else b"", err[0] if err else b"")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _kill(proc: "subprocess.Popen[bytes]") -> None:
    """Kill a child that ran past its time, and whatever it started (its own session)."""
    try:
        if os.name == "posix":
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
    except OSError:
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # stuck in the kernel (a USB call): it dies when that returns
        pass


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


#: The child's exit code when it could not set up its test (its backend or edgekit would not import).
CHILD_SETUP_FAILURE = 4


class PairVerdict:
    """What the probe found: ``ok`` (proven), ``crashed`` (with the signal), ``hung`` (no answer in time),
    ``unproven`` (an ordinary failure of the test) or ``unprovable`` (the test could not run); ``cached``: read
    from the cache file, where the first three are kept (:func:`read_cache`, :func:`_write_cache`)."""

    def __init__(self, state: str, detail: str, cached: bool):
        self.state, self.detail, self.cached = state, detail, cached

    @property
    def failed(self) -> bool:
        return self.state in FAILED


# What the child runs: edgekit.board.delegate_child, which imports the runtime core (this module, which the
# core calls, must not).
_CHILD_CODE = "from edgekit.board.delegate_child import main\nmain(sys.argv[1:])\n"


def prove(
    backend_name: str,
    backend_version: str,
    library: str,
    library_file: str,
    model_path: str,
    device_option: Optional[str],
    timeout: Optional[float] = None,
) -> PairVerdict:
    """Open ``model_path`` on the Edge TPU with ``library_file`` (the resolved real path of ``library``, the
    one the caller then loads) and run it once in a child process, unless the pair's verdict is cached."""
    timeout = PROBE_TIMEOUT if timeout is None else timeout
    key = pair_key(backend_name, backend_version, library_file)
    known = read_cache().get(key)
    if known is not None:
        return known
    env = dict(os.environ)
    env[PROBE_ENV] = "0"  # the child loads in-process: it is the test
    args = [backend_name, os.path.abspath(library_file), os.path.abspath(model_path), device_option or ""]
    done = run_python(_CHILD_CODE, args, timeout, env=env, with_edgekit=True)
    if not done.started:
        return PairVerdict(UNPROVABLE, done.stderr.decode("utf-8", "replace"), False)
    if done.returncode is None:
        verdict = PairVerdict(HUNG, f"no answer within {timeout:g} s", False)
    elif done.returncode < 0:
        verdict = PairVerdict(CRASHED, _signal_name(-done.returncode), False)
    elif done.returncode == 0:
        verdict = PairVerdict(OK, "ran a model on the Edge TPU", False)
    else:
        lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
        last = lines[-1] if lines else f"exit code {done.returncode}"
        state = UNPROVEN if done.returncode == CHILD_ORDINARY_FAILURE else UNPROVABLE
        return PairVerdict(state, last[:300], False)
    _write_cache(key, verdict)
    return verdict
