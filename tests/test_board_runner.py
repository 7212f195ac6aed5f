"""The board runner and what it ships need no more than Python 3.7, numpy, Pillow and an interpreter package."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from edgekit.devices import backends, board_runner, remote
from edgekit.devices.classifier import load_bundle
from tests.conftest import REPO

SHIPPED = {rel: REPO / rel for rel in board_runner.SHIPPED_MODULES}
THIRD_PARTY = {"numpy", "PIL", "tflite_runtime", "pycoral", "ai_edge_litert"}


def vermin(*args: str) -> subprocess.CompletedProcess:
    """Run vermin (the test extra installs it beside this Python)."""
    exe = Path(sys.executable).with_name("vermin")
    return subprocess.run([str(exe) if exe.is_file() else "vermin", "--no-tips", *args], capture_output=True, text=True)


def _imports(path: Path) -> set[str]:
    """Every module a file imports anywhere (also inside functions), as dotted names."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module != "__future__":
            names.add(node.module)
            if node.module == "edgekit" or node.module.startswith("edgekit."):  # from edgekit import preprocess
                names |= {f"{node.module}.{a.name}" for a in node.names}
    return names


def test_shipped_files_are_the_ones_deploy_copies():
    assert set(remote.runtime_files()) == {f"runtime/{rel}" for rel in SHIPPED}
    assert all(p.is_file() for p in SHIPPED.values())


@pytest.mark.parametrize("rel", sorted(SHIPPED))
def test_shipped_file_imports_only_the_allowlist(rel):
    """Standard library, numpy, Pillow, an interpreter package, and edgekit modules that are shipped too."""
    bad = []
    for name in _imports(SHIPPED[rel]):
        top = name.split(".")[0]
        if top == "edgekit":
            as_module, as_package = name.replace(".", "/") + ".py", name.replace(".", "/") + "/__init__.py"
            if as_module not in SHIPPED and as_package not in SHIPPED and not _is_name_in_shipped(name):
                bad.append(name)
        elif top not in sys.stdlib_module_names and top not in THIRD_PARTY:
            bad.append(name)
    assert not bad, f"{rel} imports {bad}: not available on a Coral board (ship it, or do without)"


def _is_name_in_shipped(name: str) -> bool:
    """``from edgekit.classes import top_k`` names a function of a shipped module, not a module."""
    module = name.rsplit(".", 1)[0].replace(".", "/") + ".py"
    return module in SHIPPED


def test_the_allowlist_check_catches_a_forbidden_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    import click\n    from edgekit.devices import backends\n")
    assert {"click", "edgekit.devices.backends"} <= _imports(bad)


def test_vermin_says_python_37_is_enough():
    """vermin (PyPI) finds the minimum Python version of each shipped file from its syntax and stdlib use."""
    proc = vermin("--violations", "--target=3.7-", *map(str, SHIPPED.values()))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = vermin(*map(str, SHIPPED.values()))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    minimum = re.search(r"Minimum required versions:.*?3\.(\d+)", proc.stdout)
    assert minimum and int(minimum.group(1)) <= 7, proc.stdout


def test_vermin_would_catch_newer_syntax(tmp_path):
    newer = tmp_path / "newer.py"
    newer.write_text("if (n := 3):\n    print(f'{n=}')\n")
    proc = vermin("--violations", "--target=3.7-", str(newer))
    assert proc.returncode != 0 and "3.8" in proc.stdout


def test_runner_standalone_on_the_board(tmp_path):
    """What the README shows for use on the board itself, under the board's Python (3.7 when there is one)."""
    from tests.conftest import shared_file
    from tests.helpers import make_bundle
    from tests.test_remote import TARGET_PYTHON

    (tmp_path / "bundles").mkdir()
    make_bundle(tmp_path / "bundles" / "m")
    runtime = tmp_path / "runtime"
    for rel, path in SHIPPED.items():
        (runtime / rel).parent.mkdir(parents=True, exist_ok=True)
        (runtime / rel).write_bytes(path.read_bytes())
    image = str(shared_file("cat.bmp"))
    proc = subprocess.run([str(TARGET_PYTHON), "-m", "edgekit.devices.board_runner", "classify", "--bundle",
                           "../bundles/m", "--top-k", "1", image], cwd=runtime, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["results"][0]["image"] == image and doc["results"][0]["top"][0]["label"] == "tiger cat"
    assert doc["device"] == "cpu" and doc["model"] == "../bundles/m/mobilenet_v1_0.25_128_quant.tflite"
    lines = proc.stderr.splitlines()  # the one note, no "Exception ignored in Delegate.__del__" traceback after it
    assert len(lines) == 1 and lines[0].startswith("note: running the CPU model"), proc.stderr
    missing = subprocess.run([str(TARGET_PYTHON), "-m", "edgekit.devices.board_runner", "classify", "--bundle",
                              "../bundles/none", image], cwd=runtime, capture_output=True, text=True)
    assert missing.returncode == 3 and missing.stderr.startswith("error: ../bundles/none: no such bundle folder")
    (tmp_path / "bundles" / "m" / "labels.txt").write_text("changed\n")
    changed = subprocess.run([str(TARGET_PYTHON), "-m", "edgekit.devices.board_runner", "classify", "--bundle",
                              "../bundles/m", image], cwd=runtime, capture_output=True, text=True)
    assert changed.returncode == 3 and "labels.txt has changed since the bundle was built" in changed.stderr


def _edgetpu_runtime_here() -> bool:
    import ctypes

    try:
        ctypes.CDLL(backends.EDGETPU_LIBRARIES["Linux"])
    except OSError:
        return False
    return True


USB_CHECK = "lsusb lists the USB Accelerator (1a6e:089a, or 18d1:9302"
PCI_CHECK = "/dev/apex_0 exists"


@pytest.mark.parametrize("device, checks", [("usb", [USB_CHECK]), ("pci", [PCI_CHECK]), (":0", [PCI_CHECK, USB_CHECK])])
def test_no_edge_tpu_on_the_board_says_what_to_check_there(tmp_path, device, checks):
    """`--device usb` where libedgetpu.so.1 is missing: exit 9, one line, a hint that works on the board itself
    (edgekit does not run there, so not `edgekit doctor`)."""
    from tests.conftest import shared_file
    from tests.helpers import make_bundle
    from tests.test_remote import TARGET_PYTHON

    if _edgetpu_runtime_here():
        pytest.skip("libedgetpu.so.1 is installed here: this checks the board without an Edge TPU runtime")
    (tmp_path / "bundles").mkdir()
    make_bundle(tmp_path / "bundles" / "m")
    runtime = tmp_path / "runtime"
    for rel, path in SHIPPED.items():
        (runtime / rel).parent.mkdir(parents=True, exist_ok=True)
        (runtime / rel).write_bytes(path.read_bytes())
    proc = subprocess.run([str(TARGET_PYTHON), "-m", "edgekit.devices.board_runner", "classify", "--bundle",
                           "../bundles/m", "--device", device, str(shared_file("cat.bmp"))],
                          cwd=runtime, capture_output=True, text=True)
    assert proc.returncode == 9 and proc.stdout == ""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: the Edge TPU runtime libedgetpu.so.1 is not installed"), lines
    assert "sudo apt-get install libedgetpu1-std" in lines[0] and all(check in lines[0] for check in checks)
    assert (USB_CHECK in lines[0]) == (USB_CHECK in checks) and (PCI_CHECK in lines[0]) == (PCI_CHECK in checks)
    assert "--device auto" in lines[0] and "edgekit doctor" not in lines[0]


@pytest.mark.parametrize("device, check, other", [("usb", "lsusb", "/dev/apex_0"), ("pci:0", "/dev/apex_0", "lsusb")])
def test_runtime_there_but_no_edge_tpu(tmp_path, monkeypatch, device, check, other):
    """libedgetpu.so.1 loads but finds no Edge TPU (its ValueError): check the device, then the runtime."""
    from edgekit.errors import DeviceError
    from tests.helpers import make_bundle

    def load_delegate(library, options=None):
        raise ValueError("Failed to load delegate from %s\n" % library)

    def interpreter(**kwargs):
        raise AssertionError("no interpreter may be made without the delegate")

    backend = backends.Backend("tflite_runtime", "2.5.0", interpreter, load_delegate)
    monkeypatch.setattr(backends, "select_backend", lambda name=None: backend)
    monkeypatch.setattr(backends, "edgetpu_library", lambda system=None: "libedgetpu.so.1")
    monkeypatch.setattr(backends, "ON_BOARD", True)
    monkeypatch.setattr("ctypes.CDLL", lambda name: object())  # the library is there
    # by its bare name, untested: a stand-in backend cannot be proven in a child process (test_delegate_probe.py)
    monkeypatch.setenv("EDGEKIT_DELEGATE_PROBE", "0")
    monkeypatch.setattr("edgekit.devices.delegate_probe.resolve_library", lambda *args, **kwargs: None)
    with pytest.raises(DeviceError) as caught:
        load_bundle(str(make_bundle(tmp_path / "m")), device)
    error = caught.value
    assert error.message == (f"the Edge TPU runtime libedgetpu.so.1 is installed but found no usable Edge TPU "
                             f"({device}) (Failed to load delegate from libedgetpu.so.1)")
    assert error.hint.startswith("on the board, check that " + ("lsusb" if check == "lsusb" else "/dev/apex_0"))
    assert "dpkg -s libedgetpu1-std" in error.hint and other not in error.hint and "doctor" not in error.hint


@pytest.mark.parametrize("bad", ["a link", "cut short"])
def test_unpack_on_the_board_is_all_or_nothing(tmp_path, bad):
    """A deploy that fails part-way (a link among the files, a connection cut) leaves the board's folder as it was."""
    import io
    import tarfile

    root = tmp_path / "edgekit"
    (root / "bundles" / "b").mkdir(parents=True)
    (root / "bundles" / "b" / "model.tflite").write_bytes(b"old model")
    stream = io.BytesIO()
    with tarfile.open(fileobj=stream, mode="w") as tar:
        for name, data in (("bundles/b/model.tflite", b"new model"), ("bundles/b/labels.txt", b"cat\n")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        if bad == "a link":
            link = tarfile.TarInfo("bundles/b/manifest.json")
            link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
            tar.addfile(link)
    data = stream.getvalue()
    if bad == "cut short":
        data = data[:700]   # the second file's bytes never arrive
    with pytest.raises((ValueError, tarfile.TarError)):
        board_runner.unpack(str(root), io.BytesIO(data), [])
    assert sorted(p.name for p in (root / "bundles" / "b").iterdir()) == ["model.tflite"]
    assert (root / "bundles" / "b" / "model.tflite").read_bytes() == b"old model"
    assert not [p for p in root.iterdir() if p.name.startswith(".edgekit-tmp-")]
    # and a whole stream lands whole
    board_runner.unpack(str(root), io.BytesIO(stream.getvalue() if bad == "cut short" else _good(stream)), [])
    assert (root / "bundles" / "b" / "model.tflite").read_bytes() == b"new model"


def _good(stream):
    import io
    import tarfile

    out = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(stream.getvalue()), mode="r") as src, tarfile.open(fileobj=out, mode="w") as dst:
        for member in src.getmembers():
            if member.isfile():
                dst.addfile(member, src.extractfile(member))
    return out.getvalue()
