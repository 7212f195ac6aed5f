"""Bundles (edgekit/board/manifest.py) on the runtime side: written all at once, classified from, refused when unsafe.

The bundle here is made from Coral's real MobileNet pair (CPU model + compiled model) and its labels,
with the preprocessing derived from the input quantization, so these tests need no TensorFlow and
also run in the tflite-runtime leg.
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
from click.testing import CliRunner

from edgekit.board import backends, manifest
from edgekit.cli.app import cli
from edgekit.devices import classify as C
from edgekit.errors import InputError, UsageError
from edgekit.pipeline import build
from edgekit.report import Collector
from tests.conftest import REPO, shared_file
from tests.devices.test_classify import IMAGES
from tests.helpers import COMPILED, MODEL, SPEC, default_stop_signals, make_bundle


@pytest.fixture()
def bundle(tmp_path) -> Path:
    return make_bundle(tmp_path / "bundle")


def test_written_bundle_lists_every_file_with_its_sha256(bundle):
    doc = json.loads((bundle / "manifest.json").read_text())
    assert doc["format"] == "edgekit-bundle" and doc["format_version"] == 1 and doc["created"].endswith("Z")
    listed = {e["path"]: e for e in doc["files"]}
    on_disk = {p.name for p in bundle.iterdir() if p.name != "manifest.json"}
    assert set(listed) == on_disk == {MODEL, COMPILED, "labels.txt"}
    for name, e in listed.items():
        assert e["sha256"] == manifest.sha256_file(
            shared_file(MODEL if name == MODEL else COMPILED if name == COMPILED else "imagenet_labels.txt")
        )
        assert e["size_bytes"] == (bundle / name).stat().st_size
    assert not [p for p in bundle.parent.iterdir() if p.name.startswith(".")], "temporary folders left behind"
    manifest.load(bundle).verify_all()


def test_classify_from_bundle_equals_classify_from_its_files(bundle, no_edgetpu):
    images = [str(shared_file(i)) for i in IMAGES]
    told = Collector()
    from_bundle = C.classify(images, bundle, k=3, report=told).to_dict()
    from_files = C.classify(images, shared_file(COMPILED), k=3, labels=shared_file("imagenet_labels.txt")).to_dict()
    assert [r["top"] for r in from_bundle["results"]] == [r["top"] for r in from_files["results"]]
    assert from_bundle["results"][0]["top"][0]["label"]  # labels came from the bundle
    assert from_bundle["model"] == str(bundle / MODEL)  # no Edge TPU here: its CPU model ran
    assert any(MODEL in n for n in told.notes)
    cpu = C.classify(images, bundle, device="cpu", k=3).to_dict()
    assert [r["top"] for r in cpu["results"]] == [r["top"] for r in from_files["results"]]


def test_bundle_from_the_cli_json(bundle, no_edgetpu):
    out = CliRunner().invoke(cli, ["classify", str(shared_file("cat.bmp")), "-m", str(bundle), "--json", "-q"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert doc["device"] == "cpu" and doc["model"].endswith(MODEL) and doc["results"][0]["top"][0]["label"]


@pytest.fixture()
def no_open(monkeypatch):
    """Fail the test if anything is opened: a refused bundle must load nothing."""
    opened: list = []
    monkeypatch.setattr(backends, "open_model", lambda *a, **k: opened.append(a) or pytest.fail("model opened"))
    return opened


@pytest.mark.parametrize("victim", [MODEL, COMPILED, "labels.txt"])
def test_a_changed_file_is_refused_with_exit_3_and_nothing_is_loaded(bundle, victim, no_open):
    path = bundle / victim
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(manifest.BundleError, match=f"{victim} has changed since the bundle was built"):
        C.HostClassifier(bundle)
    out = CliRunner().invoke(cli, ["classify", str(shared_file("cat.bmp")), "-m", str(bundle)])
    assert out.exit_code == 3 and "has changed since the bundle was built" in out.stderr
    assert out.stderr.count("\n") == 1 and no_open == []


def _rewrite(bundle: Path, change) -> None:
    doc = json.loads((bundle / "manifest.json").read_text())
    change(doc)
    (bundle / "manifest.json").write_text(json.dumps(doc))


@pytest.mark.parametrize("outside", ["../elsewhere.tflite", "/etc/passwd", "sub/../../x.tflite", "C:/x.tflite"])
@pytest.mark.parametrize("field", ["models.cpu", "labels", "files"])
def test_a_manifest_pointing_outside_is_refused_with_exit_3(bundle, outside, field, no_open):
    def change(doc):
        if field == "models.cpu":
            doc["models"] = {"cpu": outside, "edgetpu": None}
        elif field == "labels":
            doc["labels"] = outside
        else:
            doc["files"].append({"path": outside, "sha256": "0" * 64, "size_bytes": 1})

    _rewrite(bundle, change)
    out = CliRunner().invoke(cli, ["classify", str(shared_file("cat.bmp")), "-m", str(bundle)])
    assert out.exit_code == 3, out.output
    assert "outside the bundle" in out.stderr or "not a relative POSIX path" in out.stderr
    assert no_open == []


def test_a_symlink_leading_out_of_the_bundle_is_refused(bundle, tmp_path, no_open):
    if os.name != "posix":
        pytest.skip("symbolic links need POSIX")
    outside = tmp_path / "outside.tflite"
    shutil.copy(bundle / MODEL, outside)
    (bundle / MODEL).unlink()
    (bundle / MODEL).symlink_to(outside)  # same bytes, so only the path check can refuse it
    with pytest.raises(manifest.BundleError, match="through a symbolic link"):
        manifest.load(bundle)
    assert CliRunner().invoke(cli, ["classify", str(shared_file("cat.bmp")), "-m", str(bundle)]).exit_code == 3


@pytest.mark.parametrize("link", ["labels.txt", MODEL, "manifest.json"])
def test_a_symlink_inside_the_bundle_is_refused_everywhere(bundle, tmp_path, no_open, link):
    """One rule for links: a bundle holds its files themselves. A linked file classified locally but broke
    deploy with a misleading hint and left a half-copied bundle on the board."""
    if os.name != "posix":
        pytest.skip("symbolic links need POSIX")
    real = bundle / f"real_{link}"
    (bundle / link).rename(real)  # the same bytes, inside the bundle: only the link rule can refuse it
    (bundle / link).symlink_to(real.name)
    out = CliRunner().invoke(cli, ["classify", str(shared_file("cat.bmp")), "-m", str(bundle)])
    assert out.exit_code == 3 and "is a symbolic link" in out.stderr and out.stderr.count("\n") == 1, out.output
    out = CliRunner().invoke(cli, ["deploy", str(bundle), "--to", "nobody@127.0.0.1", "--port", "9"])
    assert out.exit_code == 3 and "is a symbolic link" in out.stderr, out.output  # before connecting
    assert no_open == []


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda d: d.update(format="other"), "'format' is not"),
        (lambda d: d.update(format_version=99), "newer than this edgekit reads"),
        (lambda d: d["models"].update(edgetpu="other_edgetpu.tflite"), "named after the CPU model"),
        (lambda d: d.update(files=[e for e in d["files"] if e["path"] != "labels.txt"]), "not listed in 'files'"),
    ],
)
def test_a_malformed_manifest_is_refused(bundle, change, message):
    _rewrite(bundle, change)
    with pytest.raises(InputError, match=message):
        manifest.load(bundle)


def _entry(path: str) -> dict:
    return {"path": path, "sha256": "0" * 64, "size_bytes": 1}


# Each was read as a valid manifest before (issue 23): a boolean version, a NaN, and entries naming the bundle
# folder itself, the manifest under a second spelling, a file under a second spelling, or a folder.
STRICT_CASES = {
    "format_version true": (lambda b, d: d.update(format_version=True), "'format_version' is not a positive integer"),
    "NaN": (lambda b, d: d["preprocess"].update(mean=[float("nan")] * 3), "NaN is not a JSON number"),
    "Infinity": (lambda b, d: d.update(created=float("inf")), "Infinity is not a JSON number"),
    "entry .": (lambda b, d: d["files"].append(_entry(".")), "not a plain relative path"),
    "entry ./manifest.json": (lambda b, d: d["files"].append(_entry("./manifest.json")), "not a plain relative path"),
    "entry labels.txt/": (lambda b, d: d["files"].append(_entry("labels.txt/")), "not a plain relative path"),
    "entry a//b": (lambda b, d: d["files"].append(_entry("sub//x")), "not a plain relative path"),
    "labels ./labels.txt": (lambda b, d: d.update(labels="./labels.txt"), "not a plain relative path"),
    "entry a folder": (lambda b, d: ((b / "sub").mkdir(), d["files"].append(_entry("sub"))), "'sub' is a folder"),
    "sha256 not hex": (lambda b, d: d["files"][0].update(sha256="../" * 21 + "x"), "not 64 hex digits"),
    "size_bytes negative": (lambda b, d: d["files"][0].update(size_bytes=-1), "needs path, sha256 and size_bytes"),
}


@pytest.mark.parametrize("case", sorted(STRICT_CASES))
def test_a_manifest_with_a_loose_value_or_a_second_spelling_is_refused(bundle, case, no_open):
    change, message = STRICT_CASES[case]
    doc = json.loads((bundle / "manifest.json").read_text())
    change(bundle, doc)
    (bundle / "manifest.json").write_text(json.dumps(doc))  # json.dumps writes NaN/Infinity as Python reads them
    with pytest.raises(InputError, match=message):
        manifest.load(bundle)
    out = CliRunner().invoke(cli, ["classify", str(shared_file("cat.bmp")), "-m", str(bundle)])
    assert out.exit_code == 3 and message in out.stderr, out.output
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("error: ") and no_open == []


def test_the_board_refuses_the_same_manifests_under_python37(bundle, tmp_path):
    """manifest.py is shipped: the board's Python (3.7, when .venv-py37 exists) refuses them alike, exit 3."""
    from tests.test_remote import TARGET_PYTHON

    runtime = tmp_path / "runtime"
    for rel in ("edgekit/__init__.py", "edgekit/errors.py", "edgekit/board/manifest.py"):
        (runtime / rel).parent.mkdir(parents=True, exist_ok=True)
        (runtime / rel).write_bytes((REPO / rel).read_bytes())
    good = (bundle / "manifest.json").read_text()
    script = (
        "import sys\nfrom edgekit.board import manifest\ntry:\n    manifest.load(sys.argv[1])\n"
        "except manifest.BundleError as e:\n    print(e.exit_code, e.message)\nelse:\n    print(0)\n"
    )
    for case in sorted(STRICT_CASES):
        change, message = STRICT_CASES[case]
        doc = json.loads(good)
        change(bundle, doc)
        (bundle / "manifest.json").write_text(json.dumps(doc))
        proc = subprocess.run(
            [str(TARGET_PYTHON), "-c", script, str(bundle)], cwd=runtime, capture_output=True, text=True, check=False
        )
        assert proc.returncode == 0 and proc.stdout.startswith("3 ") and message in proc.stdout, (case, proc)
        shutil.rmtree(bundle / "sub", ignore_errors=True)
    (bundle / "manifest.json").write_text(good)
    assert (
        subprocess.run(
            [str(TARGET_PYTHON), "-c", script, str(bundle)], cwd=runtime, capture_output=True, text=True, check=True
        ).stdout
        == "0\n"
    )


def test_a_folder_without_manifest_is_not_a_bundle(tmp_path):
    out = CliRunner().invoke(cli, ["classify", str(shared_file("cat.bmp")), "-m", str(tmp_path)])
    assert out.exit_code == 3 and "not a bundle (no manifest.json)" in out.stderr


def test_write_bundle_replaces_a_bundle_but_never_another_folder(bundle, tmp_path):
    before = json.loads((bundle / "manifest.json").read_text())
    make_bundle(bundle)  # an existing bundle is replaced whole
    assert manifest.load(bundle).entries.keys() == {e["path"] for e in before["files"]}
    precious = tmp_path / "photos"
    precious.mkdir()
    (precious / "a.jpg").write_bytes(b"x")
    with pytest.raises(UsageError, match="exists and is not an edgekit bundle"):
        make_bundle(precious)
    assert [p.name for p in precious.iterdir()] == ["a.jpg"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def one_model_manifest(spec):
    """The manifest of a bundle of one CPU model ``m.tflite``, nothing else recorded."""
    from edgekit.results.build import BundleInput, BundleManifest, BundleModels, BundleReports, BundleVersions

    return BundleManifest.new(
        models=BundleModels("m.tflite", None),
        labels=None,
        preprocess=spec,
        input=BundleInput((1, spec.height, spec.width, 3), "uint8", None, None),
        versions=BundleVersions("test", None, None),
        reports=BundleReports(None, None),
    )


def test_a_failed_write_leaves_no_bundle(tmp_path):
    doc = one_model_manifest(SPEC)
    with pytest.raises(manifest.BundleError, match="cannot write bundle"):
        build.write_bundle(tmp_path / "b", {"m.tflite": tmp_path / "missing.tflite"}, doc)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(InputError, match="points outside the bundle"):
        build.write_bundle(tmp_path / "b", {"../m.tflite": b"x"}, doc)
    assert list(tmp_path.iterdir()) == []


def test_evaluate_and_benchmark_take_a_bundle(bundle, no_edgetpu):
    out = CliRunner().invoke(cli, ["benchmark", "-m", str(bundle), "-n", "3", "--warmup", "1", "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["model"].endswith(MODEL)
    data = bundle.parent / "data"
    (data / "tiger cat").mkdir(parents=True)
    shutil.copy(shared_file("cat.bmp"), data / "tiger cat" / "cat.bmp")
    out = CliRunner().invoke(cli, ["evaluate", "-m", str(bundle), "--data", str(data), "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["samples"] == 1
    data_bytes = bytearray((bundle / MODEL).read_bytes())
    data_bytes[-1] ^= 1
    (bundle / MODEL).write_bytes(bytes(data_bytes))  # changed: refused by both
    for args in (["benchmark", "-m", str(bundle)], ["evaluate", "-m", str(bundle), "--data", str(data)]):
        out = CliRunner().invoke(cli, args)
        assert out.exit_code == 3 and "has changed since the bundle was built" in out.stderr


def small_bundle(target: Path, content: bytes) -> Path:
    """A bundle of one made-up file: the writing is under test, not the model."""
    doc = one_model_manifest(SPEC)
    return build.write_bundle(target, {"m.tflite": content}, doc)


def test_a_failure_while_swapping_puts_the_previous_bundle_back(tmp_path, monkeypatch):
    """Was: only an OSError put it back; anything else (an interrupt) let the cleanup delete it: no bundle at all."""
    target = small_bundle(tmp_path / "bundle", b"old")
    real = os.replace

    def new_one_fails(src, dst):
        if Path(dst) == target and str(src).endswith(".tmp"):  # the new bundle's move into place
            raise KeyboardInterrupt
        return real(src, dst)

    monkeypatch.setattr(os, "replace", new_one_fails)
    with pytest.raises(KeyboardInterrupt):
        small_bundle(target, b"new")
    monkeypatch.undo()
    assert manifest.load(target).verified("m.tflite").read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["bundle"]  # no temporary or moved-aside folder left


SWAP_WITH_THREADS = r"""
import os, sys, threading, time
from pathlib import Path
from edgekit.pipeline import build
from edgekit.board import manifest
from edgekit.board.preprocess import spec_from_input_quantization
from edgekit.cli import _stop_like_ctrl_c
_stop_like_ctrl_c()
idle = threading.Event()
for _ in range(4):  # as TensorFlow's threads: the kernel may hand a process-directed signal to any of them
    threading.Thread(target=idle.wait, daemon=True).start()
spec = spec_from_input_quantization(8, 8, 3, "uint8", 1 / 128, 128)
from edgekit.results.build import BundleInput, BundleManifest, BundleModels, BundleReports, BundleVersions
doc = BundleManifest.new(models=BundleModels("m.tflite", None), labels=None, preprocess=spec,
                         input=BundleInput((1, 8, 8, 3), "uint8", None, None),
                         versions=BundleVersions("test", None, None), reports=BundleReports(None, None))
target = Path(sys.argv[1])
real = os.replace

def slow_replace(src, dst):
    real(src, dst)
    if str(dst).endswith(".old/bundle"):
        print("aside", flush=True)
        time.sleep(1.0)  # the old bundle is aside, the new one not yet in: the signal arrives here

os.replace = slow_replace
try:
    build.write_bundle(target, {"m.tflite": b"new"}, doc)
except KeyboardInterrupt as exc:
    sys.exit(128 + getattr(exc, "signum", 2))
print("not stopped", flush=True)
"""


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="POSIX signals")
@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
def test_a_stop_signal_while_a_bundle_is_replaced_never_leaves_no_bundle(tmp_path, signame):
    """Was (audit item 3c): SIGINT right after the old bundle was moved aside deleted it: nothing left at -o."""
    target = small_bundle(tmp_path / "bundle", b"old")
    p = subprocess.Popen(
        [sys.executable, "-c", SWAP_WITH_THREADS, str(target)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        preexec_fn=default_stop_signals,
    )
    assert p.stdout.readline().strip() == "aside"
    os.kill(p.pid, getattr(signal, signame))  # process-directed, as kill or a terminal's Ctrl-C
    out, err = p.communicate(timeout=30)
    assert p.returncode == 128 + getattr(signal, signame), (out, err)
    assert manifest.load(target).verified("m.tflite").read_bytes() == b"new"  # the swap was held to its end
    assert [p.name for p in tmp_path.iterdir()] == ["bundle"]


@pytest.mark.skipif(os.name != "posix", reason="umask is POSIX")
@pytest.mark.parametrize("umask, folder, file", [(0o077, 0o700, 0o600), (0o022, 0o755, 0o644)])
def test_a_bundle_follows_the_umask(tmp_path, umask, folder, file):
    """Was: the folder chmod 0755 and its models and labels 0644 whatever the umask (manifest.json followed it)."""
    old = os.umask(umask)
    try:
        target = small_bundle(tmp_path / "bundle", b"x")
    finally:
        os.umask(old)
    assert target.stat().st_mode & 0o777 == folder
    assert {p.name: p.stat().st_mode & 0o777 for p in target.iterdir()} == {"m.tflite": file, "manifest.json": file}
