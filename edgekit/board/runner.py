"""The runner ``edgekit deploy`` ships to a Coral Dev Board: classify and benchmark a bundle there.

It runs on the board's own Python (Mendel: Debian 10, Python 3.7) with only numpy, Pillow and an
interpreter package (Google's pycoral or tflite_runtime from Coral's apt repo; ai_edge_litert where
installed), never edgekit's own dependencies. So this file, and every edgekit module it imports
(``SHIPPED_MODULES``: the one preprocessing, labels and scoring, errors), stays Python-3.7-compatible
and imports nothing else; tests check both with vermin and an import allowlist, and run it under a
real Python 3.7. Heavy imports wait until a command needs them: ``probe`` and ``unpack`` run before
anything is installed (sent over stdin by the host) and use the standard library only.

Layout on the board (``--path``, default ``edgekit`` in the login user's home)::

    DIR/runtime/edgekit/...       this runner and the modules it imports
    DIR/bundles/<name>/...        bundles, as ``edgekit build`` wrote them

Commands, each printing one JSON document on stdout (errors: ``error: ...`` on stderr, edgekit's
exit codes, and ``{"error": {"message": ..., "hint": ... or null, "exit_code": N}}`` on stdout)::

    probe DIR SUBDIR...           Python version, usable packages, sha256 of the files under DIR/SUBDIR
    unpack DIR [--delete P]...    a tar on stdin -> files under DIR, each written beside and renamed
    classify --bundle B [--device D] [--top-k K|all] [--threshold=T] [--mean M] [--std S] IMAGES... | --images-tar -
                                  the document of ``edgekit classify --json``
    detect --bundle B --layout-json J [--device D] [--conf C] [--iou I] [--max-det N] IMAGES... | --images-tar -
                                  the document of ``edgekit detect --json`` (the layout read by the host)
    benchmark --bundle B [--device D] [-n N] [--warmup K] [--threads T]
                                  the document of ``edgekit benchmark --json``

On the board itself: ``cd DIR/runtime && python3 -m edgekit.board.runner classify --bundle
../bundles/NAME image.jpg``.

Interrupted, the runner leaves nothing behind: SIGHUP and SIGTERM (a session torn down, a board
shutting down) end it through its clean-up as SIGINT does, and a work folder whose runner was killed
outright (SIGKILL, a power cut) is removed by the next runner that works there (see :func:`remove_stale`).
"""

from __future__ import annotations

import os
import sys

# The modules this runner needs on the board, relative to the package root's parent (tests keep
# this list closed under imports: everything a shipped module imports from edgekit is shipped): edgekit/board/
# whole, the foundations it stands on (the package's face, its errors, the Record base) and the result modules
# whose records the runtime core returns (one type per document, from the board to the host's --json).
SHIPPED_MODULES = (
    "edgekit/__init__.py",
    "edgekit/errors.py",
    "edgekit/records.py",
    "edgekit/results/__init__.py",
    "edgekit/results/classify.py",
    "edgekit/results/benchmark.py",
    "edgekit/results/detect.py",
    "edgekit/results/preprocess.py",
    "edgekit/board/flatbuffer.py",
    "edgekit/board/quant_params.py",
    "edgekit/board/preprocess.py",
    "edgekit/board/classes.py",
    "edgekit/board/manifest.py",
    "edgekit/board/__init__.py",
    "edgekit/board/runner.py",
    "edgekit/board/backends.py",
    "edgekit/board/classifier.py",
    "edgekit/board/decode.py",
    "edgekit/board/detector.py",
    "edgekit/board/delegate_probe.py",
    "edgekit/board/delegate_child.py",
    "edgekit/board/latency.py",
)
MIN_PYTHON = (3, 7)
# edgekit.board.preprocess.open_image uses ImageOps.exif_transpose (Pillow 6.0) and UnidentifiedImageError (7.0);
# Mendel's python3-pil (Debian 10) is 5.4, so a Dev Board needs a pip-installed Pillow.
MIN_PILLOW = (7, 0)
# Exit codes of edgekit/errors.py, for the commands that run before edgekit.errors is installed.
EXIT_INPUT, EXIT_DEVICE = 3, 9
# The folders a runner works in, named with its process id: DIR/.edgekit-tmp-stage-<pid>-XXXX (unpack) and
# <temp>/edgekit-images-<pid>-XXXX (classify --images-tar -).
STAGING_PREFIX = ".edgekit-tmp-stage-"
IMAGES_PREFIX = "edgekit-images-"
# A work folder that no live runner holds (see remove_stale) and is this old is left over whatever its name says.
STALE_AFTER_S = 120


# ------------------------------------------------------------------------------ work folders
def _stop_on_signals() -> None:
    """SIGHUP and SIGTERM end the runner through its ``finally`` blocks (Python's default for them is to die on
    the spot, leaving a staging folder or an images folder behind); a second signal waits for that clean-up."""
    import signal

    def stop(signum, frame):
        for name in ("SIGHUP", "SIGTERM", "SIGINT"):
            if hasattr(signal, name):
                signal.signal(getattr(signal, name), signal.SIG_IGN)
        raise SystemExit(128 + signum)

    for name in ("SIGHUP", "SIGTERM"):
        if hasattr(signal, name):
            try:
                signal.signal(getattr(signal, name), stop)
            except (ValueError, OSError):  # not the main thread (a caller embedding main())
                pass


def _defer_stops():
    """Hold SIGHUP, SIGTERM and SIGINT back (where threads' signal masks exist), so that a stop cannot fall between
    two renames of one copy; returns what :func:`_allow_stops` needs to deliver them."""
    import signal

    if not hasattr(signal, "pthread_sigmask"):
        return None
    stops = {getattr(signal, n) for n in ("SIGHUP", "SIGTERM", "SIGINT") if hasattr(signal, n)}
    return signal.pthread_sigmask(signal.SIG_BLOCK, stops)


def _allow_stops(previous) -> None:
    import signal

    if previous is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def make_work_folder(prefix: str, parent=None):
    """A new folder ``<parent>/<prefix><pid>-XXXX`` held by this process: (path, lock). The lock (``flock`` on the
    folder itself, where there is one) is let go by the kernel however the process ends, so
    :func:`remove_stale` can tell a folder still in use from one left over."""
    import tempfile

    folder = tempfile.mkdtemp(prefix="%s%d-" % (prefix, os.getpid()), dir=parent)
    lock = None
    try:
        import fcntl

        lock = os.open(folder, os.O_RDONLY)
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except ImportError:  # no flock here: remove_stale goes by the process id and the age
        pass
    except OSError:
        if lock is not None:
            os.close(lock)
        lock = None
    return folder, lock


def release_work_folder(folder: str, lock) -> None:
    import shutil

    shutil.rmtree(folder, ignore_errors=True)
    if lock is not None:
        os.close(lock)


def _held(path: str) -> bool:
    """True when a live process holds the folder's lock (made by make_work_folder); False when none does or
    locks cannot be taken here."""
    try:
        import fcntl
    except ImportError:
        return False
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return True  # cannot look: leave it
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing lets go of a lock taken here
    return False


def _process_gone(pid: int) -> bool:
    if os.name != "posix" or pid <= 0:
        return False  # unknown (os.kill would end a process on Windows)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # another user's process
        return False
    try:  # a killed process its parent has not reaped yet (a zombie) still answers os.kill, and holds nothing
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[-1].split()[0] == b"Z"
    except (OSError, IndexError):
        return False


def remove_stale(parent: str, prefix: str, legacy: bool = False, now=None) -> list:
    """Remove the work folders in ``parent`` that runners left when killed outright; their names.

    Only what make_work_folder names (``<prefix><pid>-`` and tempfile's 8 characters; with ``legacy``, also
    ``<prefix>`` and 8 characters, as runners before the process ids named their staging folders), a folder
    (never a link) of this user that no live process holds: left over when the process in its name is gone,
    or when it is older than STALE_AFTER_S (the id reused by another process, or a legacy name). As
    ssh-agent and sshd leave another user's or another session's files alone, a folder in use, not this
    user's, or of any other name is never touched.
    """
    import re
    import shutil
    import stat
    import time

    now = time.time() if now is None else now
    removed = []  # type: list[str]
    named = re.compile(re.escape(prefix) + (r"(?:(\d+)-)?" if legacy else r"(\d+)-") + r"[a-z0-9_]{8}")
    try:
        names = os.listdir(parent)
    except OSError:
        return removed
    for name in names:
        match = named.fullmatch(name)
        if not match:
            continue
        path = os.path.join(parent, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode) or (hasattr(os, "getuid") and st.st_uid != os.getuid()):
            continue
        if _held(path):
            continue
        pid = match.group(1)
        if (pid is not None and _process_gone(int(pid))) or now - st.st_mtime > STALE_AFTER_S:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(name)
    return removed


# ------------------------------------------------------------------------------ probe / unpack
def sha256_file(path: str) -> str:
    """(edgekit.board.manifest has its twin: this one runs in ``probe``, before anything is installed.)"""
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# Twins of edgekit.board.backends' (this file runs alone in ``probe``): tests/test_structure.py keeps them equal.
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


def probe(root: str, subdirs: list[str]) -> dict:
    """What the host needs before it copies anything: this Python, its packages, the files already there."""
    pillow = None
    if module_available("PIL"):
        try:
            import PIL

            pillow = getattr(PIL, "__version__", None) or getattr(PIL, "PILLOW_VERSION", "0")
        except Exception:  # a broken install counts as missing
            pillow = None
    packages = {
        "numpy": module_available("numpy"),
        "pillow": pillow,
        "pycoral": google_pycoral_available(),
        "tflite_runtime": module_available("tflite_runtime"),
        "ai_edge_litert": module_available("ai_edge_litert"),
    }
    files = {}
    root = os.path.expanduser(root)
    remove_stale(root, STAGING_PREFIX, legacy=True)
    for sub in subdirs:
        top = os.path.join(root, sub)
        for folder, dirs, names in os.walk(top):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for name in names:
                path = os.path.join(folder, name)
                if os.path.isfile(path) and not name.startswith(".edgekit-tmp-"):
                    files[os.path.relpath(path, root).replace(os.sep, "/")] = sha256_file(path)
    return {
        "python": "%d.%d.%d" % sys.version_info[:3],
        "executable": sys.executable,
        "packages": packages,
        "files": files,
    }


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


def _safe_relative(name: str) -> str:
    """A relative path inside the target folder, or ValueError (no absolute paths, no '..')."""
    parts = name.replace("\\", "/").split("/")
    if not name or name.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ValueError("refusing the path %r" % name)
    return os.path.join(*parts)


def _write_atomically(path: str, source) -> None:
    import tempfile

    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".edgekit-tmp-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as out:
            for block in iter(lambda: source.read(1 << 20), b""):
                out.write(block)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def unpack(root: str, stream, delete: list) -> dict:
    """Regular files from the tar ``stream`` into ``root``, all or none, then the deletions.

    Every file is first written whole into a staging folder beside them; only once the whole stream
    has arrived are they renamed into place. A transfer cut short, or a member that is not a regular
    file (a link), leaves ``root`` as it was: no half-copied bundle.
    """
    import tarfile

    root = os.path.expanduser(root)
    os.makedirs(root, exist_ok=True)
    remove_stale(root, STAGING_PREFIX, legacy=True)
    staging, lock = make_work_folder(STAGING_PREFIX, root)
    try:
        staged = []
        with tarfile.open(fileobj=stream, mode="r|") as tar:
            for member in tar:
                if not member.isfile():
                    raise ValueError("refusing the tar member %r: not a regular file" % member.name)
                rel = _safe_relative(member.name)
                _write_atomically(os.path.join(staging, rel), tar.extractfile(member))
                staged.append(rel)
        stops = _defer_stops()
        try:
            for rel in staged:  # everything arrived: into place (renames within one file system)
                final = os.path.join(root, rel)
                os.makedirs(os.path.dirname(final), exist_ok=True)
                os.replace(os.path.join(staging, rel), final)
        finally:
            _allow_stops(stops)  # a SIGHUP/SIGTERM/SIGINT that came meanwhile stops the runner now, renames done
    finally:
        release_work_folder(staging, lock)
    for name in delete:
        path = os.path.join(root, _safe_relative(name))
        if os.path.isfile(path):
            os.unlink(path)
    return {"written": len(staged), "deleted": len(delete)}


# ------------------------------------------------------------------------------ classify / benchmark
# The runtime is the host's (edgekit.board.backends: backends, delegate, fallback, errors; and
# edgekit.board.classifier): this runner only speaks the board's protocol around it.
def _classifier(args):
    from edgekit.board import backends
    from edgekit.board.classifier import Classifier, load_bundle

    backends.ON_BOARD = True
    return Classifier(load_bundle(args.bundle, args.device), mean=args.mean, std=args.std, name=args.bundle)


def benchmark(bundle: str, device: str = "auto", n: int = 100, warmup: int = 10, threads=None) -> dict:
    """The document of ``edgekit benchmark --json`` (BenchmarkResult's): the bundle's model loaded, then invoke()
    alone timed."""
    from edgekit.board import backends, latency
    from edgekit.board.classifier import load_bundle

    backends.ON_BOARD = True
    threads = threads or latency.default_threads()
    return backends.benchmark(lambda: load_bundle(bundle, device, num_threads=threads), n, warmup, threads).to_dict()


def _numbers(text):
    return None if text is None else tuple(float(v) for v in text.split(","))


def _top_k(text):
    """``--top-k``: a count, or ``all`` (every class: what ``k=None`` keeps on the host)."""
    return None if text == "all" else int(text)


def _parser():
    import argparse

    parser = argparse.ArgumentParser(prog="board_runner", description="edgekit's runner on a Coral board")
    sub = parser.add_subparsers(dest="command")
    p = sub.add_parser("probe")
    p.add_argument("root")
    p.add_argument("subdirs", nargs="*")
    p = sub.add_parser("unpack")
    p.add_argument("root")
    p.add_argument("--delete", action="append", default=[])
    p = sub.add_parser("classify")
    p.add_argument("--bundle", required=True)
    p.add_argument("--device", default="auto")
    p.add_argument("--top-k", type=_top_k, default=5)
    p.add_argument("--threshold", type=float, default=float("-inf"))
    p.add_argument("--mean", type=_numbers)
    p.add_argument("--std", type=_numbers)
    p.add_argument("--images-tar", help="'-': the images come as a tar on stdin (named as its members)")
    p.add_argument("images", nargs="*")
    p = sub.add_parser("detect")
    p.add_argument("--bundle", required=True)
    p.add_argument("--device", default="auto")
    p.add_argument("--layout-json", required=True, help="the layout the host read from the bundle's model")
    p.add_argument("--conf", type=float, default=0.25)
    p.add_argument("--iou", type=float, default=0.45)
    p.add_argument("--max-det", type=int, default=100)
    p.add_argument("--mean", type=_numbers)
    p.add_argument("--std", type=_numbers)
    p.add_argument("--images-tar", help="'-': the images come as a tar on stdin (named as its members)")
    p.add_argument("images", nargs="*")
    p = sub.add_parser("benchmark")
    p.add_argument("--bundle", required=True)
    p.add_argument("--device", default="auto")
    p.add_argument("-n", type=int, default=100)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--threads", type=int)
    return parser


def _detector(args):
    import json

    from edgekit.board import backends
    from edgekit.board.classifier import load_bundle
    from edgekit.board.detector import Detector
    from edgekit.results.detect import DetectionLayout

    backends.ON_BOARD = True
    layout = DetectionLayout.from_dict(json.loads(args.layout_json))
    return Detector(load_bundle(args.bundle, args.device), layout, mean=args.mean, std=args.std, name=args.bundle)


def _classify(args) -> dict:
    """classify, or detect (the same protocol: notes on stderr, images as a tar on stdin, one JSON document)."""
    detect = args.command == "detect"
    classifier = _detector(args) if detect else _classifier(args)
    from edgekit.errors import Caution

    for note in classifier.notes:  # read back by the host (remote.py) as its own notes and warnings
        sys.stderr.write(("warning: " if isinstance(note, Caution) else "note: ") + note + "\n")

    def run(paths):
        if detect:
            with classifier.opened:
                return classifier.run(paths, args.conf, args.iou, args.max_det, workers=1).to_dict()
        return classifier.run(paths, args.top_k, args.threshold, workers=1).to_dict()

    if args.images_tar != "-":
        return run(args.images)
    import tarfile
    import tempfile

    remove_stale(tempfile.gettempdir(), IMAGES_PREFIX)
    folder, lock = make_work_folder(IMAGES_PREFIX)
    try:
        names = []
        with tarfile.open(fileobj=sys.stdin.buffer, mode="r|") as tar:
            for member in tar:
                name = os.path.basename(_safe_relative(member.name))
                if member.isfile():
                    _write_atomically(os.path.join(folder, name), tar.extractfile(member))
                    names.append(name)
        report = run([os.path.join(folder, n) for n in names])
        prefix = folder + os.sep
        for entry in report["results"] + report["errors"]:  # name images as the host sent them
            entry["image"] = entry["image"][len(prefix) :]
            if "error" in entry:
                entry["error"] = entry["error"].replace(prefix, "")
        return report
    finally:
        release_work_folder(folder, lock)


def main(argv=None) -> int:
    import tarfile

    args = _parser().parse_args(argv)
    try:
        if args.command == "probe":
            doc = probe(args.root, args.subdirs)
        elif args.command == "unpack":
            doc = unpack(args.root, sys.stdin.buffer, args.delete)
        elif args.command in ("classify", "detect"):
            doc = _classify(args)
        elif args.command == "benchmark":
            doc = benchmark(args.bundle, args.device, args.n, args.warmup, args.threads)
        else:
            _parser().print_usage(sys.stderr)
            return 2
    except (ValueError, OSError, tarfile.TarError) as exc:
        if args.command in ("classify", "detect", "benchmark"):  # edgekit.errors is there: everything else is a bug
            raise
        return _fail(
            _first_line(exc), None, EXIT_INPUT if isinstance(exc, (ValueError, tarfile.TarError)) else EXIT_DEVICE
        )
    except Exception as exc:
        code = getattr(exc, "exit_code", None)
        if code is None:
            raise
        return _fail(getattr(exc, "message", str(exc)), getattr(exc, "hint", None), code)
    import json  # here: host commands import this module for two helpers and need no JSON from it

    sys.stdout.write(json.dumps(doc) + "\n")
    return 0


def _fail(message: str, hint, code: int) -> int:
    """An error as people read it (``error: message (hint)`` on stderr) and as the host reads it: the document
    ``{"error": {"message", "hint", "exit_code"}}`` on stdout, in place of the command's own."""
    import json

    sys.stderr.write("error: %s\n" % ("%s (%s)" % (message, hint) if hint else message))
    sys.stdout.write(json.dumps({"error": {"message": message, "hint": hint, "exit_code": code}}) + "\n")
    return code


if __name__ == "__main__":  # also when the host sends this source (probe, unpack): see ssh._BOOTSTRAP
    _stop_on_signals()
    sys.exit(main())
