"""The board runner and what it ships need no more than Python 3.7, numpy, Pillow and an interpreter package."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from edgekit.board import backends
from edgekit.board import runner as board_runner
from edgekit.board.classifier import load_bundle
from edgekit.devices import remote
from tests.conftest import REPO
from tests.helpers import default_stop_signals

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
    """``from edgekit.board.classes import top_k`` names a function of a shipped module, not a module."""
    module = name.rsplit(".", 1)[0].replace(".", "/") + ".py"
    return module in SHIPPED


def test_the_allowlist_check_catches_a_forbidden_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    import click\n    from edgekit.board import backends\n")
    assert {"click", "edgekit.board.backends"} <= _imports(bad)


def test_vermin_says_python_37_is_enough():
    """vermin (PyPI) finds the minimum Python version of each shipped file from its syntax and stdlib use."""
    proc = vermin("--violations", "--target=3.7-", *map(str, SHIPPED.values()))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = vermin(*map(str, SHIPPED.values()))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    minimum = re.search(r"Minimum required versions:.*?3\.(\d+)", proc.stdout)
    assert minimum and int(minimum.group(1)) <= 7, proc.stdout


_SHIPPED_RECORDS = """
import dataclasses, importlib, sys
sys.path.insert(0, sys.argv[1])
from edgekit.records import Record, _fields
for module in sys.argv[2:]:
    for value in vars(importlib.import_module(module)).values():
        if isinstance(value, type) and issubclass(value, Record) and dataclasses.is_dataclass(value):
            hints, fields = _fields(value)  # typing.get_type_hints on this Python: `X | None` fails on 3.7
            print(value.__name__, sorted(hints) == sorted(set(fields) | {"document_omits"}))
from edgekit.results.classify import ClassifyResult
doc = {"model": "m", "device": "cpu", "backend": "litert", "first_inference_ms": None, "errors": [{"image": "b",
       "error": "b: no such file"}], "results": [{"image": "a", "ms": 1.5, "top": [{"id": 3, "label": None, "score": 1}]}]}
print("round-trip", ClassifyResult.from_dict(doc).to_dict() == doc)
from edgekit.results.detect import DetectResult
layout = {"kind": "yolo", "roles": {"output": 0}, "num_classes": 2, "input_hw": [32, 32], "boxes_normalized": True,
          "scores_are_logits": None, "transposed": True, "reg_max": 16, "strides": [8, 16, 32], "letterbox": False,
          "labels": None, "source": [], "options": {"b": 1, "a": 0.5}, "pixel_scaling": None,
          "description": "yolo, 2 classes, normalized boxes, resized input"}
box = {"xmin": 1.0, "ymin": 2.0, "xmax": 3.0, "ymax": 4.0}
doc = {"model": "m", "device": "cpu", "backend": "litert", "layout": layout, "conf": 0.25, "iou": 0.45, "max_det": 9,
       "first_inference_ms": 1.5, "errors": [], "notes": [], "results": [{"image": "a", "width": 10, "height": 20,
       "invoke_ms": 1.0, "postprocess_ms": 0.5, "objects": [{"id": 1, "label": "dog", "score": 0.5, "bbox": box}]}]}
again = DetectResult.from_dict(doc).to_dict()
print("detect-round-trip", again["layout"]["options"] == {"a": 0.5, "b": 1} and again["results"][0]["objects"][0]
      ["bbox_normalized"] == {"xmin": 0.1, "ymin": 0.1, "xmax": 0.3, "ymax": 0.2} and DetectResult.from_dict(again)
      .to_dict() == again)
"""


def test_the_shipped_records_resolve_their_fields_on_the_boards_python():
    """vermin reads syntax, not annotations: the records the board's runtime returns have their field types
    evaluated there (from_dict, to_dict), so each must resolve under the board's Python (3.7 where .venv-py37 is)."""
    from tests.test_remote import TARGET_PYTHON

    modules = [
        rel[:-3].replace("/", ".")
        for rel in SHIPPED
        if rel.startswith("edgekit/results/") and not rel.endswith("__init__.py")
    ]
    assert modules, "no result module ships: the board's runtime returns records (results/classify.py)"
    proc = subprocess.run(
        [str(TARGET_PYTHON), "-c", _SHIPPED_RECORDS, str(REPO), *modules], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    said = dict(line.split() for line in proc.stdout.splitlines())
    expected = {
        "ClassifyResult",
        "BenchmarkResult",
        "DetectResult",
        "DetectionLayout",
        "round-trip",
        "detect-round-trip",
    }
    assert expected <= set(said) and set(said.values()) == {"True"}, proc.stdout


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
    proc = subprocess.run(
        [
            str(TARGET_PYTHON),
            "-m",
            "edgekit.board.runner",
            "classify",
            "--bundle",
            "../bundles/m",
            "--top-k",
            "1",
            image,
        ],
        cwd=runtime,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["results"][0]["image"] == image and doc["results"][0]["top"][0]["label"] == "tiger cat"
    assert doc["device"] == "cpu" and doc["model"] == "../bundles/m/mobilenet_v1_0.25_128_quant.tflite"
    lines = proc.stderr.splitlines()  # the one note, no "Exception ignored in Delegate.__del__" traceback after it
    assert len(lines) == 1 and lines[0].startswith("note: running the CPU model"), proc.stderr
    missing = subprocess.run(
        [str(TARGET_PYTHON), "-m", "edgekit.board.runner", "classify", "--bundle", "../bundles/none", image],
        cwd=runtime,
        capture_output=True,
        text=True,
    )
    assert missing.returncode == 3 and missing.stderr.startswith("error: ../bundles/none: no such bundle folder")
    (tmp_path / "bundles" / "m" / "labels.txt").write_text("changed\n")
    changed = subprocess.run(
        [str(TARGET_PYTHON), "-m", "edgekit.board.runner", "classify", "--bundle", "../bundles/m", image],
        cwd=runtime,
        capture_output=True,
        text=True,
    )
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
    proc = subprocess.run(
        [
            str(TARGET_PYTHON),
            "-m",
            "edgekit.board.runner",
            "classify",
            "--bundle",
            "../bundles/m",
            "--device",
            device,
            str(shared_file("cat.bmp")),
        ],
        cwd=runtime,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 9
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: the Edge TPU runtime libedgetpu.so.1 is not installed"), (
        lines
    )
    said = json.loads(proc.stdout)["error"]  # the same error, for the host: its one document on stdout
    assert said["exit_code"] == 9 and lines[0] == f"error: {said['message']} ({said['hint']})"
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
    monkeypatch.setattr("edgekit.board.delegate_probe.resolve_library", lambda *args, **kwargs: None)
    with pytest.raises(DeviceError) as caught:
        load_bundle(str(make_bundle(tmp_path / "m")), device)
    error = caught.value
    assert error.message == (
        f"the Edge TPU runtime libedgetpu.so.1 is installed but found no usable Edge TPU "
        f"({device}) (Failed to load delegate from libedgetpu.so.1)"
    )
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
        data = data[:700]  # the second file's bytes never arrive
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
    with (
        tarfile.open(fileobj=io.BytesIO(stream.getvalue()), mode="r") as src,
        tarfile.open(fileobj=out, mode="w") as dst,
    ):
        for member in src.getmembers():
            if member.isfile():
                dst.addfile(member, src.extractfile(member))
    return out.getvalue()


_FIRST_FRAME = """
import json, sys
sys.path.insert(0, sys.argv[1])
from edgekit.board import preprocess
out = {}
for path in sys.argv[2:]:
    width, height = preprocess.image_size(path)
    spec = preprocess.spec_from_input_quantization(width, height, 3, "uint8", 1 / 128, 128)
    out[path] = preprocess.prepare_file(path, spec, "uint8", 1 / 128, 128).tolist()
print(json.dumps(out))
"""


def test_a_multi_frame_image_is_its_first_frame_on_old_and_new_pillow(tmp_path):
    """A multi-page TIFF failed on the board (Pillow < 10: "'NoneType' object has no attribute 'seek'"): the first
    frame is read, the same under the board's Python (Pillow 9 where .venv-py37 exists) as under this one."""
    import numpy as np
    from PIL import Image

    from tests.test_remote import TARGET_PYTHON

    rng = np.random.default_rng(0)
    first = Image.fromarray(rng.integers(0, 256, (30, 40, 3), dtype=np.uint8))
    others = [Image.fromarray(rng.integers(0, 256, (60, 20, 3), dtype=np.uint8)), Image.new("L", (50, 50), 77)]
    first.save(tmp_path / "pages.tif", save_all=True, append_images=others)
    first.save(tmp_path / "pages_deflate.tif", save_all=True, append_images=others, compression="tiff_adobe_deflate")
    first.save(tmp_path / "first.png")
    palette = first.quantize(16)
    palette.save(
        tmp_path / "anim.gif",
        save_all=True,
        append_images=[palette.rotate(90), palette.rotate(180)],
        duration=50,
        loop=0,
    )
    palette.save(tmp_path / "first.gif")
    names = ["pages.tif", "pages_deflate.tif", "first.png", "anim.gif", "first.gif"]
    paths = [str(tmp_path / n) for n in names]
    docs = []
    for python in dict.fromkeys([str(TARGET_PYTHON), sys.executable]):
        proc = subprocess.run(
            [python, "-c", _FIRST_FRAME, str(REPO), *paths], capture_output=True, text=True, check=False
        )
        assert proc.returncode == 0, proc.stderr
        docs.append({Path(k).name: np.asarray(v) for k, v in json.loads(proc.stdout).items()})
    for doc in docs:
        assert doc["pages.tif"].shape == (1, 30, 40, 3)
        assert np.array_equal(doc["pages.tif"], doc["first.png"]) and np.array_equal(
            doc["pages_deflate.tif"], doc["first.png"]
        )
        assert np.array_equal(doc["anim.gif"], doc["first.gif"])
    for name in names:  # old and new Pillow alike
        assert np.array_equal(docs[0][name], docs[-1][name]), name


_SWEEP = """
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
from edgekit.board import runner as r
print(json.dumps(sorted(r.remove_stale(sys.argv[2], r.STAGING_PREFIX, legacy=True))))
"""


def test_only_stale_work_folders_of_this_user_are_removed(tmp_path):
    """remove_stale (under the board's Python): a folder whose runner is gone, or old and held by no one, goes; one
    held by a live runner, a young one, a link (and what it points to), a file and any name the runner does not
    make stay."""
    import os
    import time

    from tests.test_remote import TARGET_PYTHON

    root = tmp_path / "edgekit"
    root.mkdir()
    prefix = board_runner.STAGING_PREFIX
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    ).stdout.strip()
    gone, legacy_old, legacy_young = f"{prefix}{dead}-gone_123", f"{prefix}oldform1", f"{prefix}youngfo1"
    alive, other = f"{prefix}{os.getpid()}-alive_12", f"{prefix}my-holiday-photos"
    for name in (gone, legacy_old, legacy_young, alive, other, "bundles", ".edgekit-tmp-other"):
        (root / name).mkdir()
        (root / name / "part").write_bytes(b"x")
    old = time.time() - board_runner.STALE_AFTER_S - 60
    for name in (legacy_old, other):
        os.utime(root / name, (old, old))
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "keep").write_bytes(b"x")
    (root / f"{prefix}{dead}-link_123").symlink_to(outside)
    (root / f"{prefix}{dead}-file_123").write_bytes(b"x")
    hold = (
        "import sys; sys.path.insert(0, sys.argv[1]); from edgekit.board import runner as r; "
        "f, l = r.make_work_folder(sys.argv[3], sys.argv[2]); print(f, flush=True); sys.stdin.read()"
    )
    held = subprocess.Popen(
        [str(TARGET_PYTHON), "-c", hold, str(REPO), str(root), prefix],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        in_use = Path(held.stdout.readline().strip())
        os.utime(in_use, (old, old))  # old, but held: a copy still under way
        proc = subprocess.run(
            [str(TARGET_PYTHON), "-c", _SWEEP, str(REPO), str(root)], capture_output=True, text=True, check=False
        )
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout) == sorted([gone, legacy_old])
        assert sorted(p.name for p in root.iterdir()) == sorted(
            [
                legacy_young,
                alive,
                other,
                "bundles",
                ".edgekit-tmp-other",
                f"{prefix}{dead}-link_123",
                f"{prefix}{dead}-file_123",
                in_use.name,
            ]
        )
        assert (outside / "keep").is_file()
    finally:
        held.stdin.close()
        held.wait(timeout=30)
    assert held.returncode == 0


def test_a_stop_while_a_copy_is_renamed_into_place_waits_for_the_renames():
    """SIGTERM (or SIGHUP) during unpack's renames is held back until the last one is done, then stops the runner
    with 143 through its clean-up: a stop never leaves half of a copy renamed in (under the board's Python)."""
    from tests.test_remote import TARGET_PYTHON

    script = (
        "import os, signal, sys\nsys.path.insert(0, sys.argv[1])\nfrom edgekit.board import runner as r\n"
        "r._stop_on_signals()\nheld = r._defer_stops()\nos.kill(os.getpid(), signal.SIGTERM)\n"
        "print('renamed', flush=True)\ntry:\n    r._allow_stops(held)\n    print('not stopped', flush=True)\n"
        "finally:\n    print('cleaned up', flush=True)\n"
    )
    proc = subprocess.run(
        [str(TARGET_PYTHON), "-c", script, str(REPO)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        preexec_fn=default_stop_signals,
    )
    assert proc.returncode == 143 and proc.stdout.split() == ["renamed", "cleaned", "up"], (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr


def test_a_killed_runner_its_parent_has_not_reaped_counts_as_gone():
    """A runner killed outright while its parent (sshd's session) has not reaped it yet is a zombie: os.kill(pid, 0)
    still succeeds, yet it holds nothing. The next deploy's clean-up took it for alive and left its staging folder
    (seen once under load in CI's run of test_remote's killed-copy test)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from edgekit.board.runner import _process_gone

    if not sys.platform.startswith("linux"):
        pytest.skip("/proc is Linux's")
    child = subprocess.Popen(["sleep", "30"])
    try:
        assert not _process_gone(child.pid)
        os.kill(child.pid, signal.SIGKILL)
        deadline = time.time() + 10
        while not _process_gone(child.pid) and time.time() < deadline:  # a zombie until waited for
            time.sleep(0.05)
        assert _process_gone(child.pid)
    finally:
        child.kill()
        child.wait()
