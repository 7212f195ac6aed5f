"""edgekit doctor on fake machines: sysfs, /dev, udev and library trees as stand-ins for real setups.

The compiler in these tests is a stand-in script that prints the real compiler's version line
(../shared/reference/edgetpu.md §2.1); it tests how we run and read it, not the compiler.
"""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from edgekit.cli.app import cli
from edgekit.doctor import diagnose as Doc
from tests.devices.test_discovery import fake_apex, fake_usb

VERSIONS = {"numpy": "1.26.4", "ai-edge-litert": "2.3.0", "pillow": "11.0.0", "click": "8.1.7"}


def stand_in_compiler(folder: Path, body: str) -> Path:
    exe = folder / "edgetpu_compiler"
    exe.write_text(f"#!{sys.executable}\nimport sys, time\n{body}\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe


def probe(tmp_path: Path, versions: dict | None = None, **kw) -> Doc.Probe:
    defaults = {
        "sys_root": str(tmp_path / "sys"),
        "dev_root": str(tmp_path / "dev"),
        "udev_dirs": (str(tmp_path / "udev"),),
        "lib_dirs": [str(tmp_path / "lib")],
        "find_library": False,
        "read_runtime_version": False,
        "groups": ["users"],
        "is_root": False,
        "env": {"PATH": str(tmp_path / "bin")},
        "system": "Linux",
        "use_pycoral": False,
        "root": str(tmp_path),
        "arch": "x86_64",
        "python": (3, 11, 9),
        "dist_version": lambda name, v=versions or VERSIONS: v.get(name),
    }
    defaults.update(kw)
    return Doc.Probe(**defaults)


def by_name(checks: list[Doc.Check]) -> dict[str, Doc.Check]:
    return {c.name: c for c in checks}


def test_a_working_usb_setup_passes_every_check(tmp_path):
    fake_usb(tmp_path / "sys", "2-1", "18d1", "9302")
    (tmp_path / "udev").mkdir()
    (tmp_path / "udev" / "99-edgetpu-accelerator.rules").write_text(Doc.UDEV_RULES)
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "libedgetpu.so.1").write_bytes(b"\x7fELF stand-in")
    (tmp_path / "bin").mkdir()
    stand_in_compiler(tmp_path / "bin", "print('Edge TPU Compiler version 16.0.384591198')")
    checks = by_name(Doc.run_checks(probe(tmp_path, groups=["users", "plugdev", "apex"])))
    for name in ("libedgetpu", "devices", "udev rule", "groups", "edgetpu_compiler", "numpy"):
        assert checks[name].status == Doc.OK, checks[name]
    assert "usb:0" in checks["devices"].detail
    assert "16.0.384591198" in checks["edgetpu_compiler"].detail and "runtime 14" in checks["edgetpu_compiler"].detail
    assert Doc.report(list(checks.values())).ok is True


def test_a_plugged_in_device_without_runtime_udev_or_group_fails_with_fixes(tmp_path):
    fake_usb(tmp_path / "sys", "1-1", "1a6e", "089a")
    result = Doc.report(Doc.run_checks(probe(tmp_path)))
    doc = result.to_dict()
    checks = {c["name"]: c for c in doc["checks"]}
    assert doc["ok"] is False
    assert checks["libedgetpu"]["status"] == Doc.FAIL and "libedgetpu1-std" in checks["libedgetpu"]["fix"]
    assert checks["udev rule"]["status"] == Doc.FAIL and 'ATTRS{idVendor}=="18d1"' in checks["udev rule"]["fix"]
    assert checks["groups"]["status"] == Doc.FAIL and "usermod -aG plugdev" in checks["groups"]["fix"]
    assert "firmware not loaded" in checks["devices"]["detail"]
    text = result.render_text()
    assert text.splitlines()[0].startswith("edgekit ") and "sudo apt-get install libedgetpu1-std" in text
    assert all(c["fix"] for c in doc["checks"] if c["status"] in (Doc.WARN, Doc.FAIL))


def test_nothing_attached_is_only_warnings(tmp_path):
    doc = Doc.report(Doc.run_checks(probe(tmp_path))).to_dict()
    statuses = {c["name"]: c["status"] for c in doc["checks"]}
    assert doc["ok"] is True
    assert statuses["libedgetpu"] == statuses["devices"] == statuses["edgetpu_compiler"] == Doc.WARN


def test_pcie_device_needs_the_apex_group_and_reports_temperature(tmp_path):
    fake_apex(tmp_path / "sys", tmp_path / "dev", 0, temp="52000")
    checks = by_name(Doc.run_checks(probe(tmp_path, groups=["plugdev"])))
    assert checks["groups"].status == Doc.FAIL and "usermod -aG apex" in checks["groups"].fix
    assert "pci:0" in checks["devices"].detail and "52.0 C" in checks["devices"].detail


def test_root_needs_no_group(tmp_path):
    fake_usb(tmp_path / "sys", "2-1", "18d1", "9302")
    assert by_name(Doc.run_checks(probe(tmp_path, is_root=True)))["groups"].status == Doc.OK


def test_tflite_runtime_with_numpy_2_fails_with_the_fix(tmp_path):
    versions = {**VERSIONS, "numpy": "2.4.6", "tflite-runtime": "2.14.0"}
    check = Doc.check_numpy(probe(tmp_path, versions))
    assert check.status == Doc.FAIL and "numpy<2" in check.fix and "2.14.0" in check.detail
    assert Doc.check_numpy(probe(tmp_path, {**versions, "numpy": "1.26.4"})).status == Doc.OK


def test_the_interpreter_and_libedgetpu_pair_is_reported_from_the_probe_or_the_known_segfaults(tmp_path, monkeypatch):
    from edgekit.board import delegate_probe

    monkeypatch.setenv(delegate_probe.CACHE_ENV, str(tmp_path / "cache"))
    lib = tmp_path / "lib" / "libedgetpu.so.1"
    lib.parent.mkdir()
    lib.write_bytes(b"stand-in")
    env = {"PATH": str(tmp_path / "bin"), "EDGEKIT_BACKEND": "tflite_runtime"}
    new = probe(tmp_path, {**VERSIONS, "tflite-runtime": "2.14.0"}, env=env)
    check = Doc.check_runtime_pairing(new, str(lib))
    assert check.status == Doc.WARN and "libedgetpu#53" in check.detail and "feranick/libedgetpu" in check.fix
    assert Doc.check_runtime_pairing(new, None) is None
    old = probe(tmp_path, {**VERSIONS, "tflite-runtime": "2.5.0.post1"}, env=env)
    assert Doc.check_runtime_pairing(old, str(lib)).status == Doc.INFO
    # what the probe found, for this very pair, overrides what is reported elsewhere
    delegate_probe._write_cache(
        delegate_probe.pair_key("tflite_runtime", "2.14.0", str(lib)),
        delegate_probe.PairVerdict("crashed", "SIGSEGV", False),
    )
    check = Doc.check_runtime_pairing(new, str(lib))
    assert check.status == Doc.FAIL and "SIGSEGV" in check.detail and "TFlite-builds" in check.fix
    delegate_probe._write_cache(
        delegate_probe.pair_key("tflite_runtime", "2.5.0.post1", str(lib)), delegate_probe.PairVerdict("ok", "", False)
    )
    assert Doc.check_runtime_pairing(old, str(lib)).status == Doc.OK


@pytest.mark.parametrize("version, says", [("2.21.0", "refuses"), ("2.5.3", "match")])
def test_tensorflow_version_and_what_it_means(tmp_path, version, says):
    check = Doc.check_tensorflow(probe(tmp_path, {**VERSIONS, "tensorflow-cpu": version}))
    assert version in check.detail and says in check.detail


def test_compiler_from_the_environment_variable_and_its_failures(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    hung = stand_in_compiler(tmp_path / "elsewhere", "time.sleep(30)")
    check = Doc.check_compiler(probe(tmp_path, env={"EDGETPU_COMPILER": str(hung), "PATH": ""}), timeout=0.5)
    assert check.status == Doc.FAIL and "did not answer" in check.detail
    old = stand_in_compiler(tmp_path / "elsewhere", "print('Edge TPU Compiler version 15.0.340273435')")
    check = Doc.check_compiler(probe(tmp_path, env={"EDGETPU_COMPILER": str(old), "PATH": ""}))
    assert check.status == Doc.OK and "15.0.340273435" in check.detail and "runtime 13" in check.detail
    check = Doc.check_compiler(probe(tmp_path, env={"EDGETPU_COMPILER": str(tmp_path / "nope"), "PATH": ""}))
    assert check.status == Doc.FAIL and "is not an executable file" in check.detail and "unset it" in check.fix


@pytest.mark.parametrize("forced", ["tensorflow", "tflite_runtime", "ai_edge_litert"])
def test_a_forced_backend_that_is_not_installed_fails(tmp_path, monkeypatch, forced):
    from edgekit.board import backends

    installed = backends.module_available
    monkeypatch.setattr(backends, "module_available", lambda name: name != forced and installed(name))
    check = Doc.check_interpreter(probe(tmp_path, env={"EDGEKIT_BACKEND": forced}))
    assert check.status == Doc.FAIL and f"EDGEKIT_BACKEND={forced}, but it is not installed" in check.detail


def test_doctor_command_json_and_exit_code():
    result = CliRunner().invoke(cli, ["doctor", "--json"])
    doc = json.loads(result.stdout)
    assert list(doc) == ["edgekit", "ok", "checks"]
    assert result.exit_code == (0 if doc["ok"] else 1)
    names = [c["name"] for c in doc["checks"]]
    assert names[:3] == ["python", "platform", "packages"] and "libedgetpu" in names and "tensorflow" in names
    for c in doc["checks"]:
        assert set(c) == {"name", "status", "detail", "fix"} and c["status"] in ("ok", "info", "warn", "fail")


def test_a_hung_pair_and_a_cache_that_cannot_be_used_are_reported(tmp_path, monkeypatch):
    from edgekit.board import delegate_probe

    cache = tmp_path / "cache"
    monkeypatch.setenv(delegate_probe.CACHE_ENV, str(cache))
    lib = tmp_path / "lib" / "libedgetpu.so.1"
    lib.parent.mkdir()
    lib.write_bytes(b"stand-in")
    env = {"PATH": str(tmp_path / "bin"), "EDGEKIT_BACKEND": "tflite_runtime"}
    new = probe(tmp_path, {**VERSIONS, "tflite-runtime": "2.14.0"}, env=env)
    delegate_probe._write_cache(
        delegate_probe.pair_key("tflite_runtime", "2.14.0", str(lib)),
        delegate_probe.PairVerdict("hung", "no answer within 60 s", False),
    )
    check = Doc.check_runtime_pairing(new, str(lib))
    assert check.status == Doc.FAIL and "hung a test process (no answer within 60 s)" in check.detail
    assert Doc.check_verdict_cache(new) is None  # the user's own cache: nothing to say
    cache.chmod(0o777)  # writable by anyone: not used, and doctor says so
    check = Doc.check_verdict_cache(new)
    assert check.status == Doc.WARN and str(cache) in check.detail and "chmod 700" in check.fix
    assert delegate_probe.read_cache() == {}
