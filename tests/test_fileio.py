"""Nothing half-written: several outputs appear together or not at all, under the user's umask."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from edgekit import fileio
from edgekit.errors import InputError
from tests.helpers import default_stop_signals

REPO = Path(__file__).resolve().parents[1]


def test_disk_full_on_the_second_output_leaves_neither(tmp_path, monkeypatch):
    """Was: quantize wrote the model, then failed on its record: a model without its record."""
    real = Path.write_bytes
    calls = []

    def full_on_second(self, data):
        calls.append(self)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", full_on_second)
    with pytest.raises(InputError, match="No space left on device"):
        fileio.write_all_atomic({tmp_path / "m.tflite": b"model", tmp_path / "m.edgekit.json": b"{}"})
    assert list(tmp_path.iterdir()) == []


def test_a_failed_rename_takes_back_the_outputs_already_renamed(tmp_path, monkeypatch):
    real = os.replace

    def second_fails(src, dst):
        if str(dst).endswith(".json"):
            raise OSError(errno.EIO, "Input/output error")
        return real(src, dst)

    monkeypatch.setattr(os, "replace", second_fails)
    with pytest.raises(InputError, match="Input/output error"):
        fileio.write_all_atomic({tmp_path / "m.tflite": b"model", tmp_path / "m.edgekit.json": b"{}"})
    assert list(tmp_path.iterdir()) == []


def test_concurrent_writers_of_the_same_outputs_never_mix(tmp_path, monkeypatch):
    """Two runs to one -o: the one that renames second must not slip in between the other's renames."""
    real = os.replace
    first_renamed = threading.Event()

    def slow_for_a(src, dst):
        real(src, dst)
        if threading.current_thread().name == "A" and str(dst).endswith(".tflite"):
            first_renamed.set()
            time.sleep(0.5)  # B runs now; without the lock it renames both of its files here

    monkeypatch.setattr(os, "replace", slow_for_a)
    model, record = tmp_path / "m.tflite", tmp_path / "m.edgekit.json"
    a = threading.Thread(name="A", target=fileio.write_all_atomic, args=({model: b"A", record: b"A"},))
    a.start()
    assert first_renamed.wait(10)
    fileio.write_all_atomic({model: b"B", record: b"B"})
    a.join()
    assert model.read_bytes() == record.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.edgekit.json", "m.tflite"]


@pytest.mark.skipif(os.name != "posix", reason="umask is POSIX")
@pytest.mark.parametrize("umask, mode", [(0o077, 0o600), (0o002, 0o664), (0o022, 0o644)])
def test_written_files_follow_the_umask(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        fileio.write_bytes_atomic(tmp_path / "out.tflite", b"x")
    finally:
        os.umask(old)
    assert (tmp_path / "out.tflite").stat().st_mode & 0o777 == mode


def test_an_output_folder_is_created_and_said(tmp_path):
    from edgekit.report import Collector

    told = Collector()
    folder = fileio.require_output_folder(tmp_path / "a" / "b" / "m.tflite", told)
    assert folder.is_dir() and told.notes == [f"created output folder {tmp_path / 'a' / 'b'}"]
    fileio.require_output_folder(tmp_path / "a" / "b" / "m.tflite", told)
    assert len(told.notes) == 1


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="POSIX signals")
@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP"])
def test_sigterm_and_sighup_while_writing_leave_no_temporary_file(tmp_path, signame):
    """Was: the default action killed the process at once, leaving .out.tflite.XXXX.tmp behind."""
    script = f"""
import sys, time
from pathlib import Path
from edgekit.cli import _stop_like_ctrl_c
from edgekit.fileio import atomic_paths
_stop_like_ctrl_c()
try:
    with atomic_paths(Path({str(tmp_path)!r}) / "out.tflite", Path({str(tmp_path)!r}) / "out.edgekit.json") as tmps:
        tmps[0].write_bytes(b"half")
        print("writing", flush=True)
        time.sleep(30)
except KeyboardInterrupt as exc:
    sys.exit(128 + exc.signum)
"""
    p = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        preexec_fn=default_stop_signals,
    )
    assert p.stdout.readline().strip() == "writing"
    p.send_signal(getattr(signal, signame))
    p.communicate(timeout=30)
    assert p.returncode == 128 + getattr(signal, signame)
    assert list(tmp_path.iterdir()) == []


HELD_WITH_THREADS = r"""
import os, sys, threading, time
from pathlib import Path
from edgekit import fileio
if sys.argv[2] == "edgekit":
    from edgekit.cli import _stop_like_ctrl_c
    _stop_like_ctrl_c()
idle = threading.Event()
for _ in range(4):  # as TensorFlow's threads: the kernel may hand a process-directed signal to any of them
    threading.Thread(target=idle.wait, daemon=True).start()
real = os.replace

def slow_replace(src, dst):
    real(src, dst)
    print("renamed", flush=True)
    time.sleep(1.0)  # the window between the two renames, widened: the signal arrives here

os.replace = slow_replace
out = Path(sys.argv[1])
try:
    fileio.write_all_atomic({out / "m.tflite": b"model", out / "m.edgekit.json": b"{}"})
except KeyboardInterrupt as exc:
    print("stopped after publish", flush=True)
    sys.exit(128 + getattr(exc, "signum", 2))
print("not stopped", flush=True)
"""


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="POSIX signals")
@pytest.mark.parametrize(
    "signame, handlers, code",
    [
        ("SIGINT", "python", 130),  # Python's KeyboardInterrupt
        ("SIGTERM", "edgekit", 143),  # edgekit's stop, as the CLI installs it
        ("SIGHUP", "edgekit", 129),
        ("SIGTERM", "python", -signal.SIGTERM),  # no handler: the default action, once both files are in place
    ],
)
def test_a_stop_signal_in_a_process_with_threads_waits_for_both_renames(tmp_path, signame, handlers, code):
    """Was: pthread_sigmask held the signal in the main thread only; another thread took the process-directed
    signal, Python raised it in the main thread between the renames: a model without its record."""
    p = subprocess.Popen(
        [sys.executable, "-c", HELD_WITH_THREADS, str(tmp_path), handlers],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        preexec_fn=default_stop_signals,
    )
    assert p.stdout.readline().strip() == "renamed"
    os.kill(p.pid, getattr(signal, signame))  # process-directed, as kill, timeout or a terminal's Ctrl-C
    out, err = p.communicate(timeout=30)
    assert p.returncode == code, (out, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.edgekit.json", "m.tflite"]
    assert (tmp_path / "m.tflite").read_bytes() == b"model"


def test_signals_held_gives_back_the_previous_handlers_and_raises_what_arrived():
    # Python's own Ctrl-C handler, also in a suite started with SIGINT ignored (nohup, some CI runners)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        before = {s: signal.getsignal(s) for s in fileio.STOP_SIGNALS}
        with pytest.raises(KeyboardInterrupt), fileio.signals_held():
            signal.raise_signal(signal.SIGINT)
            reached = True  # the signal did not cut the block
        assert reached
        assert {s: signal.getsignal(s) for s in fileio.STOP_SIGNALS} == before
    finally:
        signal.signal(signal.SIGINT, previous)


def test_signals_held_in_another_thread_does_not_fail():
    errors = []

    def run():
        try:
            with fileio.signals_held():
                pass
        except Exception as exc:  # signal.signal() is refused outside the main thread
            errors.append(exc)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert errors == []


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="POSIX signals")
def test_a_run_waiting_for_the_folder_lock_can_still_be_stopped(tmp_path):
    """Was: the stop signals were held before the lock was taken, so a run queued behind another writer of the
    same folder ignored Ctrl-C/SIGTERM until that one finished, and then wrote its outputs anyway."""
    fcntl = pytest.importorskip("fcntl")
    script = f"""
import sys
from pathlib import Path
from edgekit.cli import _stop_like_ctrl_c
from edgekit import fileio
_stop_like_ctrl_c()
print("writing", flush=True)
try:
    fileio.write_all_atomic({{Path({str(tmp_path)!r}) / "m.tflite": b"model"}})
except KeyboardInterrupt as exc:
    sys.exit(128 + exc.signum)
"""
    fd = os.open(tmp_path, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another writer holds the folder
    try:
        p = subprocess.Popen(
            [sys.executable, "-c", script],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            preexec_fn=default_stop_signals,
        )
        assert p.stdout.readline().strip() == "writing"
        time.sleep(0.5)  # now waiting for the lock
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=10)  # stopped while the lock is still held
    finally:
        os.close(fd)
    assert p.returncode == 128 + signal.SIGTERM
    assert list(tmp_path.iterdir()) == []  # nothing written, no temporary file left


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="POSIX signals")
def test_the_signal_tests_hold_in_a_suite_started_with_sigint_and_sighup_ignored(tmp_path):
    """Issue 31: ``nohup make test &`` (and some CI runners) start the suite with SIGHUP (and SIGINT) ignored, and
    children inherit ignored signals: the tests that stop a child by a signal set its dispositions themselves."""

    def as_nohup() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    here = Path(__file__).resolve()
    tests = [
        f"{here}::test_sigterm_and_sighup_while_writing_leave_no_temporary_file",
        f"{here}::test_signals_held_gives_back_the_previous_handlers_and_raises_what_arrived",
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=as_nohup,
        check=False,
        env={**os.environ, "PYTHONPATH": str(REPO), "EDGEKIT_TESTDATA": str(tmp_path / "none")},
    )
    assert proc.returncode == 0 and "3 passed" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-2000:]
