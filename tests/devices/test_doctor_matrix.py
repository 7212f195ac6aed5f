"""``edgekit doctor`` on recorded machine states of the 2026 matrix: each a fake root folder (sysfs, /proc, /dev,
/etc, /var/lib/dpkg, /var/lib/dkms, /boot) written here, the way each machine lays those files out. Nothing
of this machine is read. For each state the test asserts the whole set of findings (check, status), so a
false finding fails as surely as a missing one, and the words of the fixes that matter.

Every rule of :mod:`edgekit.doctor.rules` cites its public reports (``RULES``), and each report is a row of
tests/fixtures/evidence/DOCTOR.tsv: the last tests check that ledger.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from edgekit.board import delegate_probe
from edgekit.doctor import diagnose as Doc
from edgekit.doctor import rules as R

LEDGER = Path(__file__).resolve().parents[1] / "fixtures" / "evidence" / "DOCTOR.tsv"
MODULES = {"ai_edge_litert": "ai-edge-litert", "tflite_runtime": "tflite-runtime", "tensorflow": "tensorflow"}

NO_LLSEEK = (
    "/var/lib/dkms/gasket/1.0/build/gasket_core.c:1376:19: error: 'no_llseek' undeclared here "
    "(not in a function); did you mean 'noop_llseek'?"
)
UDEV_RULE = (
    'SUBSYSTEM=="usb",ATTRS{idVendor}=="1a6e",GROUP="plugdev"\n'
    'SUBSYSTEM=="usb",ATTRS{idVendor}=="18d1",GROUP="plugdev"\n'
)


def put(root: Path, path: str, text: str = "") -> None:
    f = root / path.lstrip("/")
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(text)


def os_release(root: Path, pretty: str, codename: str, version: str, distro: str = "debian") -> None:
    put(
        root,
        "/etc/os-release",
        f'PRETTY_NAME="{pretty}"\nNAME="{pretty}"\nVERSION_ID="{version}"\nVERSION_CODENAME={codename}\nID={distro}\n',
    )


def dpkg(root: Path, packages: dict[str, str], files: dict[str, list[str]] | None = None) -> None:
    put(
        root,
        "/var/lib/dpkg/status",
        "\n\n".join(
            f"Package: {n}\nStatus: install ok installed\nVersion: {v}\nArchitecture: all" for n, v in packages.items()
        ),
    )
    for name, paths in (files or {}).items():
        put(root, f"/var/lib/dpkg/info/{name}.list", "\n".join(paths) + "\n")


def libedgetpu(root: Path, folder: str, version: str = "16.0", package: str = "libedgetpu1-std") -> dict:
    put(root, f"{folder}/libedgetpu.so.1", "\x7fELF stand-in")
    put(root, "/lib/udev/rules.d/60-libedgetpu1-std.rules", UDEV_RULE)
    return {package: version}, {f"{package}:arm64": [f"{folder}/libedgetpu.so.1.0", f"{folder}/libedgetpu.so.1"]}


def usb(root: Path, name: str, vid: str, pid: str, bus: int, dev: int, speed: str, node: bool = True) -> None:
    base = f"/sys/bus/usb/devices/{name}"
    for key, value in (
        ("idVendor", vid),
        ("idProduct", pid),
        ("busnum", str(bus)),
        ("devnum", str(dev)),
        ("speed", speed),
    ):
        put(root, f"{base}/{key}", value + "\n")
    if node:
        put(root, f"/dev/bus/usb/{bus:03d}/{dev:03d}")


def pcie_card(root: Path, address: str) -> None:
    put(root, f"/sys/bus/pci/devices/{address}/vendor", "0x1ac1\n")
    put(root, f"/sys/bus/pci/devices/{address}/device", "0x089a\n")


def failed_dkms(root: Path, kernel: str) -> None:
    put(root, "/var/lib/dkms/gasket/1.0/source/dkms.conf", 'PACKAGE_NAME="gasket"\n')
    put(
        root,
        "/var/lib/dkms/gasket/1.0/build/make.log",
        f"DKMS make.log for gasket-1.0 for kernel {kernel}\n  CC [M]  /var/lib/dkms/gasket/1.0/build/gasket_core.o\n"
        f"{NO_LLSEEK}\n make[2]: *** Error 1\n",
    )


def probe(
    root: Path, versions: dict, *, python: tuple, arch: str, system: str = "Linux", groups=None, is_root: bool = False
) -> Doc.Probe:
    return Doc.Probe.for_root(
        str(root),
        system=system,
        arch=arch,
        python=python,
        dist_version=versions.get,
        module_available=lambda m: MODULES.get(m) in versions,
        groups=groups or ["users"],
        is_root=is_root,
        env={"PATH": str(root / "bin")},
    )


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(delegate_probe.CACHE_ENV, str(tmp_path / "verdicts"))


def findings(p: Doc.Probe) -> dict[str, Doc.Check]:
    checks = Doc.run_checks(p)
    assert all(c.fix for c in checks if c.status in (Doc.WARN, Doc.FAIL)), checks
    return {c.name: c for c in checks}


def statuses(checks: dict[str, Doc.Check]) -> dict[str, str]:
    return {n: c.status for n, c in checks.items()}


BASE = {"python": "info", "platform": "info", "packages": "info", "tensorflow": "info", "onnx": "info"}


# ------------------------------------------------------------------------------------- the machines
def pi5_trixie(root: Path) -> Doc.Probe:
    """Raspberry Pi 5, Raspberry Pi OS Trixie (Debian 13), Python 3.13, an M.2 Coral on a PCIe HAT: Coral's
    gasket-dkms 1.0-18 failed to build on 6.12 and the kernel is the default 16K-page one."""
    os_release(root, "Debian GNU/Linux 13 (trixie)", "trixie", "13")
    put(root, "/etc/rpi-issue", "Raspberry Pi reference 2025-10-01\n")
    put(root, "/proc/device-tree/model", "Raspberry Pi 5 Model B Rev 1.0\x00")
    put(root, "/proc/sys/kernel/osrelease", "6.12.47+rpt-rpi-2712\n")
    put(root, "/boot/firmware/config.txt", "dtparam=audio=on\n[all]\ndtparam=pciex1\n")
    pcie_card(root, "0001:01:00.0")
    failed_dkms(root, "6.12.47+rpt-rpi-2712")
    packages, files = libedgetpu(root, "/usr/lib/aarch64-linux-gnu")
    dpkg(root, {**packages, "gasket-dkms": "1.0-18"}, files)
    put(
        root,
        "/etc/apt/sources.list.d/coral-edgetpu.list",
        "deb https://packages.cloud.google.com/apt coral-edgetpu-stable main\n",
    )
    return probe(
        root, {"ai-edge-litert": "2.1.4", "numpy": "2.3.4"}, python=(3, 13, 5), arch="aarch64", groups=["pi", "plugdev"]
    )


def test_pi5_trixie_python313_m2(tmp_path):
    checks = findings(pi5_trixie(tmp_path))
    assert statuses(checks) == {
        **BASE,
        "interpreter": "ok",
        "interpreter wheel": "ok",
        "numpy": "ok",
        "libedgetpu": "ok",
        "libedgetpu build": "info",
        "runtime pairing": "warn",
        "devices": "warn",
        "kernel driver": "fail",
        "pi5 pcie": "fail",
        "udev rule": "ok",
        "groups": "warn",
        "apt source": "warn",
        "edgetpu_compiler": "warn",
    }
    assert "Raspberry Pi OS, Debian GNU/Linux 13 (trixie)" in checks["platform"].detail
    assert "Raspberry Pi 5 Model B" in checks["platform"].detail and "6.12.47+rpt-rpi-2712" in checks["platform"].detail
    assert checks["interpreter wheel"].detail == (
        "wheels for CPython 3.13 on Linux aarch64: ai-edge-litert (none from tflite-runtime, Google's pycoral)"
    )
    assert "Google's build of 16.0" in checks["libedgetpu build"].detail
    assert "feranick/libedgetpu" in checks["runtime pairing"].fix
    driver = checks["kernel driver"]
    assert "0001:01:00.0" in driver.detail and "'no_llseek' undeclared" in driver.detail
    assert "gasket-dkms_1.0-18.4_all.deb" in driver.fix and R.FERANICK_GASKET in driver.fix
    assert "6.18" not in driver.fix  # 6.12: no failure of the patched package reported
    assert "kernel=kernel8.img" in checks["pi5 pcie"].fix and "16K-page" in checks["pi5 pcie"].detail
    assert "usermod -aG apex" in checks["groups"].fix
    assert "signed-by=/etc/apt/keyrings/coral-edgetpu.gpg" in checks["apt source"].fix
    assert "x86-64" in checks["edgetpu_compiler"].fix  # the compiler does not run on ARM


def pi4_usb2(root: Path) -> Doc.Probe:
    """Raspberry Pi 4, Raspberry Pi OS Bookworm, Python 3.11, the USB Accelerator (firmware loaded) in a USB 2
    port, with feranick's libedgetpu 16.0TF2.17.0 and his tflite_runtime 2.17.0."""
    os_release(root, "Debian GNU/Linux 12 (bookworm)", "bookworm", "12")
    put(root, "/etc/rpi-issue", "Raspberry Pi reference 2024-11-19\n")
    put(root, "/proc/device-tree/model", "Raspberry Pi 4 Model B Rev 1.5\x00")
    put(root, "/proc/sys/kernel/osrelease", "6.6.51+rpt-rpi-v8\n")
    put(root, "/boot/firmware/config.txt", "arm_64bit=1\n")
    usb(root, "1-1.3", "18d1", "9302", 1, 4, "480")
    packages, files = libedgetpu(root, "/usr/lib/aarch64-linux-gnu", "16.0tf2.17.0-1")
    dpkg(root, packages, files)
    return probe(
        root,
        {"tflite-runtime": "2.17.0", "numpy": "1.26.4"},
        python=(3, 11, 2),
        arch="aarch64",
        groups=["pi", "plugdev"],
    )


def test_pi4_usb_accelerator_on_usb2(tmp_path):
    checks = findings(pi4_usb2(tmp_path))
    assert statuses(checks) == {
        **BASE,
        "interpreter": "ok",
        "interpreter wheel": "ok",
        "numpy": "ok",
        "libedgetpu": "ok",
        "libedgetpu build": "info",
        "runtime pairing": "info",
        "devices": "ok",
        "usb link": "warn",
        "udev rule": "ok",
        "groups": "ok",
        "edgetpu_compiler": "warn",
    }
    assert "community build against TensorFlow 2.17.0" in checks["libedgetpu build"].detail
    assert "tflite_runtime 2.11.1 to 2.17.0" in checks["runtime pairing"].detail
    assert "480 Mbit/s" in checks["usb link"].detail and "USB 3 port" in checks["usb link"].fix
    assert "powered USB 3 hub" in checks["usb link"].fix


def ubuntu_614_pcie(root: Path) -> Doc.Probe:
    """x86-64 Ubuntu 24.04 on the 6.14 HWE kernel with a PCIe Coral: Coral's gasket-dkms failed to build."""
    os_release(root, "Ubuntu 24.04.2 LTS", "noble", "24.04", "ubuntu")
    put(root, "/proc/sys/kernel/osrelease", "6.14.0-24-generic\n")
    put(root, "/sys/class/dmi/id/sys_vendor", "Dell Inc.\n")
    put(root, "/proc/cpuinfo", "processor\t: 0\nflags\t\t: fpu vme de pse tsc msr pae sse sse2\n")
    pcie_card(root, "0000:03:00.0")
    failed_dkms(root, "6.14.0-24-generic")
    packages, files = libedgetpu(root, "/usr/lib/x86_64-linux-gnu")
    dpkg(root, {**packages, "gasket-dkms": "1.0-18"}, files)
    put(root, "/etc/apt/keyrings/coral.gpg", "key")
    put(
        root,
        "/etc/apt/sources.list.d/coral-edgetpu.list",
        "deb [signed-by=/etc/apt/keyrings/coral.gpg] https://packages.cloud.google.com/apt coral-edgetpu-stable main\n",
    )
    put(
        root,
        "/etc/apt/sources.list.d/google-cloud-sdk.list",
        "deb https://packages.cloud.google.com/apt cloud-sdk main\n",
    )  # Google's, not Coral's: not judged
    return probe(
        root,
        {"ai-edge-litert": "2.1.4", "numpy": "2.2.1"},
        python=(3, 12, 3),
        arch="x86_64",
        groups=["me", "plugdev", "apex"],
    )


def test_ubuntu_2404_kernel_614_pcie(tmp_path):
    checks = findings(ubuntu_614_pcie(tmp_path))
    assert statuses(checks) == {
        **BASE,
        "interpreter": "ok",
        "interpreter wheel": "ok",
        "numpy": "ok",
        "libedgetpu": "ok",
        "libedgetpu build": "info",
        "runtime pairing": "warn",
        "devices": "warn",
        "kernel driver": "fail",
        "udev rule": "ok",
        "groups": "ok",
        "apt source": "ok",
        "edgetpu_compiler": "warn",
    }
    driver = checks["kernel driver"]
    assert "kernel 6.14.0-24-generic" in driver.detail and NO_LLSEEK in driver.detail
    assert "6.4 and newer" in driver.fix and "gasket-dkms_1.0-18.4_all.deb" in driver.fix
    assert "linux-headers-$(uname -r)" in driver.fix
    assert checks["devices"].fix == "see kernel driver"
    assert "apt-get install edgetpu-compiler" in checks["edgetpu_compiler"].fix
    assert "Ubuntu 24.04.2 LTS" in checks["platform"].detail


def docker_without_usb(root: Path) -> Doc.Probe:
    """A Docker container (python:3.11 on Debian 12) started without --device: the host's sysfs shows its USB
    Accelerator, but /dev/bus/usb is not in the container."""
    put(root, "/.dockerenv")
    os_release(root, "Debian GNU/Linux 12 (bookworm)", "bookworm", "12")
    put(root, "/proc/sys/kernel/osrelease", "6.8.0-45-generic\n")
    usb(root, "2-1", "18d1", "9302", 2, 3, "5000", node=False)
    packages, files = libedgetpu(root, "/usr/lib/x86_64-linux-gnu")
    dpkg(root, packages, files)
    return probe(root, {"ai-edge-litert": "2.1.4", "numpy": "2.2.1"}, python=(3, 11, 9), arch="x86_64", is_root=True)


def test_docker_container_without_the_usb_device(tmp_path):
    checks = findings(docker_without_usb(tmp_path))
    assert statuses(checks) == {
        **BASE,
        "interpreter": "ok",
        "interpreter wheel": "ok",
        "numpy": "ok",
        "libedgetpu": "ok",
        "libedgetpu build": "info",
        "runtime pairing": "warn",
        "devices": "warn",
        "passthrough": "fail",
        "usb link": "ok",
        "groups": "ok",
        "edgetpu_compiler": "warn",
    }
    assert "docker container" in checks["passthrough"].detail and "/dev/bus/usb" in checks["passthrough"].detail
    assert "--device /dev/bus/usb" in checks["passthrough"].fix
    assert "udev rule" not in checks  # the host's udev, not the container's


def proxmox_vm_bootloader(root: Path) -> Doc.Probe:
    """A Debian 12 VM on Proxmox (QEMU) with the USB Accelerator passed through by id, still in its
    bootloader mode (1a6e:089a): the runtime has not loaded its firmware yet."""
    os_release(root, "Debian GNU/Linux 12 (bookworm)", "bookworm", "12")
    put(root, "/proc/sys/kernel/osrelease", "6.1.0-25-amd64\n")
    put(root, "/sys/class/dmi/id/sys_vendor", "QEMU\n")
    put(root, "/sys/class/dmi/id/product_name", "Standard PC (i440FX + PIIX, 1996)\n")
    put(root, "/proc/cpuinfo", "processor\t: 0\nflags\t\t: fpu vme de pse tsc hypervisor lahf_lm\n")
    usb(root, "2-1", "1a6e", "089a", 2, 2, "480")
    packages, files = libedgetpu(root, "/usr/lib/x86_64-linux-gnu")
    dpkg(root, packages, files)
    put(root, "/etc/apt/keyrings/coral.gpg", "key")
    put(
        root,
        "/etc/apt/sources.list.d/coral-edgetpu.sources",
        "Types: deb\nURIs: https://packages.cloud.google.com/apt\nSuites: coral-edgetpu-stable\nComponents: main\n"
        "Signed-By: /etc/apt/keyrings/coral.gpg\n",
    )
    return probe(
        root,
        {"tflite-runtime": "2.14.0", "numpy": "1.26.4"},
        python=(3, 11, 2),
        arch="x86_64",
        groups=["me", "plugdev"],
    )


def test_proxmox_vm_with_the_accelerator_in_bootloader_mode(tmp_path):
    checks = findings(proxmox_vm_bootloader(tmp_path))
    assert statuses(checks) == {
        **BASE,
        "interpreter": "ok",
        "interpreter wheel": "ok",
        "numpy": "ok",
        "libedgetpu": "ok",
        "libedgetpu build": "info",
        "runtime pairing": "warn",
        "devices": "ok",
        "passthrough": "ok",
        "usb firmware": "warn",
        "udev rule": "ok",
        "groups": "ok",
        "apt source": "ok",
        "edgetpu_compiler": "warn",
    }
    assert "QEMU" in checks["usb firmware"].detail and "18d1:9302" in checks["usb firmware"].detail
    assert "Use USB Port" in checks["usb firmware"].fix
    assert "firmware not loaded" in checks["devices"].detail
    assert "libedgetpu#53" in checks["runtime pairing"].detail  # tflite-runtime 2.14 with Google's 16.0


def mac(root: Path) -> Doc.Probe:
    """An Apple Silicon Mac, macOS 15, Python 3.13, Coral's libedgetpu.1.dylib: no sysfs, no kernel driver."""
    put(
        root,
        "/System/Library/CoreServices/SystemVersion.plist",
        "<plist><dict><key>ProductName</key><string>macOS</string>"
        "<key>ProductVersion</key><string>15.1</string></dict></plist>",
    )
    put(root, "/usr/local/lib/libedgetpu.1.dylib", "stand-in")
    return probe(root, {"ai-edge-litert": "2.1.6", "numpy": "2.2.1"}, python=(3, 13, 1), arch="arm64", system="Darwin")


def test_mac(tmp_path):
    checks = findings(mac(tmp_path))
    assert statuses(checks) == {
        **BASE,
        "interpreter": "ok",
        "interpreter wheel": "ok",
        "numpy": "ok",
        "libedgetpu": "ok",
        "libedgetpu build": "info",
        "runtime pairing": "warn",
        "devices": "info",
        "edgetpu_compiler": "warn",
    }
    assert checks["platform"].detail == "macOS 15.1 arm64"
    assert checks["interpreter wheel"].detail.startswith("wheels for CPython 3.13 on Darwin arm64: ai-edge-litert")
    assert "system_profiler SPUSBDataType" in checks["devices"].detail
    assert "not from a Debian package" in checks["libedgetpu build"].detail
    assert "x86-64 Linux" in checks["edgetpu_compiler"].fix


# ------------------------------------------------------------------------------------- single rules
def test_a_32bit_pi_os_with_python_313_has_no_wheel_and_is_told_to_go_64bit(tmp_path):
    p = probe(tmp_path, {}, python=(3, 13, 5), arch="armv7l")
    check = R.check_wheels(p)
    assert check.status == Doc.WARN and "64-bit Raspberry Pi OS" in check.fix
    assert "64-bit Raspberry Pi OS" in Doc.check_interpreter(p).fix
    old = probe(tmp_path, {}, python=(3, 11, 2), arch="armv7l")
    assert Doc.check_interpreter(old).fix == "pip install tflite-runtime 'numpy<2'"


def test_no_line_tells_to_pip_install_pypi_pycoral_or_edgekit(tmp_path):
    """PyPI's 'pycoral' (a GIS tool) and 'edgekit' are unrelated projects: never an install line for them."""
    unrelated = re.compile(r"pip3? install (?:-\S+ )*['\"]?(pycoral|edgekit)(?:\[[^]]*\])?['\"]?(?=[\s,;)]|$)")
    for build in (pi5_trixie, pi4_usb2, ubuntu_614_pcie, docker_without_usb, proxmox_vm_bootloader, mac):
        root = tmp_path / build.__name__
        for c in Doc.run_checks(build(root)):
            assert not unrelated.search(f"{c.detail} {c.fix or ''}"), (build.__name__, c)
    assert unrelated.search("pip install 'edgekit[convert]'") and unrelated.search("pip install pycoral")
    assert not unrelated.search("pip install '.[convert]'") and not unrelated.search("pip uninstall pycoral")


def test_a_loaded_apex_without_a_node_points_to_dmesg(tmp_path):
    pcie_card(tmp_path, "0000:03:00.0")
    put(tmp_path, "/proc/sys/kernel/osrelease", "6.8.0-45-generic\n")
    (tmp_path / "sys" / "module" / "apex").mkdir(parents=True)
    check = R.check_kernel_driver(probe(tmp_path, {}, python=(3, 12, 3), arch="x86_64"), [])
    assert check.status == Doc.FAIL and "sudo dmesg | grep -i -e apex -e gasket" in check.fix


def test_a_built_module_is_loaded_and_old_kernels_use_corals_package(tmp_path):
    pcie_card(tmp_path, "0000:03:00.0")
    put(tmp_path, "/proc/sys/kernel/osrelease", "6.8.0-45-generic\n")
    p = probe(tmp_path, {}, python=(3, 12, 3), arch="x86_64")
    assert R.check_kernel_driver(p, []).fix == R.gasket_route("6.8.0-45-generic")
    put(tmp_path, "/var/lib/dkms/gasket/1.0/6.8.0-45-generic/x86_64/module/apex.ko.xz")
    assert "sudo modprobe apex" in R.check_kernel_driver(p, []).fix
    assert "6.18 and 6.19" in R.gasket_route("6.18.2-1-pve")


@pytest.mark.parametrize(
    "kernel, corals",
    [
        ("5.15.0-119-generic", True),
        ("6.1.0-25-amd64", True),
        ("6.3.4-060304-generic", True),
        ("6.4.1-060401-generic", False),
        ("6.5.0-10-generic", False),
        ("6.8.0-45-generic", False),
        ("6.6.51+rpt-rpi-v8", False),
        ("6.12.41+deb13-amd64", False),
    ],
)
def test_corals_gasket_package_only_below_kernel_6_4(kernel, corals):
    """Coral's apt gasket-dkms 1.0-18 (2022) fails from 6.4 on (class_create: google/gasket-driver#12, Coral's
    package on 6.5: google-coral/edgetpu#808). (Fails on the old code: it sent Ubuntu 24.04's 6.8 and
    Raspberry Pi OS's 6.6 to Coral's package.)"""
    route = R.gasket_route(kernel)
    assert ("sudo apt-get install gasket-dkms (Coral's apt repository)" in route) == corals, route
    assert ("gasket-dkms_1.0-18.4_all.deb" in route) == (not corals), route


def test_a_pi5_without_the_pcie_overlay_and_no_edge_tpu(tmp_path):
    put(tmp_path, "/proc/device-tree/model", "Raspberry Pi 5 Model B Rev 1.0\x00")
    put(tmp_path, "/boot/firmware/config.txt", "dtparam=audio=on\n")
    p = probe(tmp_path, {}, python=(3, 13, 5), arch="aarch64")
    check = R.check_pi5_pcie(p, [])
    assert check.status == Doc.WARN and "dtparam=pciex1" in check.fix
    put(tmp_path, "/boot/firmware/config.txt", "dtparam=pciex1\n")
    assert R.check_pi5_pcie(p, []) is None


def test_dead_coral_suites_and_home_assistant(tmp_path):
    put(
        tmp_path,
        "/etc/apt/sources.list.d/coral-cloud.list",
        "deb https://packages.cloud.google.com/apt coral-cloud-stable main\n",
    )
    p = probe(tmp_path, {}, python=(3, 12, 3), arch="x86_64")
    check = R.check_apt_source(p)
    assert check.status == Doc.WARN and "remove /etc/apt/sources.list.d/coral-cloud.list" in check.fix
    p.env = {"SUPERVISOR_TOKEN": "x"}
    check = R.check_passthrough(p, [])
    assert check.status == Doc.WARN and "protection mode" in check.fix


# ------------------------------------------------------------------------------------- the ledger
def ledger() -> dict[str, dict[str, str]]:
    with open(LEDGER, newline="", encoding="utf-8") as f:
        return {row["key"]: row for row in csv.DictReader(f, delimiter="\t")}


def test_every_rule_cites_sources_in_the_ledger_and_the_ledger_holds_nothing_uncited():
    rows = ledger()
    cited = {key for keys in R.RULES.values() for key in keys}
    for rule, keys in R.RULES.items():
        assert keys, f"{rule} cites no source"
        assert all(k in rows for k in keys), (rule, [k for k in keys if k not in rows])
    assert set(rows) == cited, set(rows) ^ cited
    for row in rows.values():  # a page, or a file of a public repository at a commit
        assert re.fullmatch(r"https://\S+|[\w.-]+/[\w.-]+ \S+ @[0-9a-f]{40}", row["url"]), row
        assert row["shows"].strip(), row


def test_every_check_a_recorded_machine_shows_is_a_rule_or_one_of_the_old_checks(tmp_path):
    old = {
        "python",
        "platform",
        "packages",
        "pycoral",
        "interpreter",
        "numpy",
        "libedgetpu",
        "pair cache",
        "devices",
        "udev rule",
        "groups",
        "edgetpu_compiler",
        "tensorflow",
        "onnx",
    }
    for build in (pi5_trixie, pi4_usb2, ubuntu_614_pcie, docker_without_usb, proxmox_vm_bootloader, mac):
        names = {c.name for c in Doc.run_checks(build(tmp_path / build.__name__))}
        assert names <= old | set(R.RULES), names - old - set(R.RULES)


def test_a_make_log_of_another_kernel_says_so_and_a_surface_laptop_is_no_vm(tmp_path):
    failed_dkms(tmp_path, "6.8.0-45-generic")
    p = probe(tmp_path, {}, python=(3, 12, 3), arch="x86_64")
    state, first = R.dkms_gasket(p, "6.14.0-24-generic")
    assert state == "failed" and first == NO_LLSEEK + " (that build was for kernel 6.8.0-45-generic)"
    put(tmp_path, "/sys/class/dmi/id/sys_vendor", "Microsoft Corporation\n")
    put(tmp_path, "/sys/class/dmi/id/product_name", "Surface Laptop 5\n")
    assert R.vm_kind(p) is None
    put(tmp_path, "/sys/class/dmi/id/product_name", "Virtual Machine\n")
    assert R.vm_kind(p) == "Hyper-V"


@pytest.mark.parametrize(
    "version, tf",
    [
        ("16.0", (2, 5)),
        ("16.0tf2.18.1-1", (2, 18, 1)),
        ("16.0pp3", (2, 10, 1)),
        ("16.0-0ppa1", (2, 8, 4)),
        ("16.0tf2.13.1", (2, 13, 1)),
        ("15.0", None),
    ],
)
def test_the_tensorflow_of_each_libedgetpu_package_version(tmp_path, version, tf):
    packages, files = libedgetpu(tmp_path, "/usr/lib/x86_64-linux-gnu", version)
    dpkg(tmp_path, packages, files)
    p = probe(tmp_path, {}, python=(3, 12, 3), arch="x86_64")
    lib = str(tmp_path / "usr/lib/x86_64-linux-gnu/libedgetpu.so.1")
    assert R.libedgetpu_build(p, lib) == ("libedgetpu1-std", version, tf)


@pytest.mark.parametrize(
    "version, tflite, status, words",
    [
        ("16.0tf2.17.0-1", "2.17.0", Doc.INFO, "tflite_runtime 2.11.1 to 2.17.0"),
        ("16.0tf2.16.1-1", "2.17.0", Doc.WARN, "2.17.0 is outside that"),
        ("16.0pp3", "2.10.1", Doc.INFO, "no range for this interpreter"),
        ("16.0", "2.14.0", Doc.WARN, "libedgetpu#53"),
    ],
)
def test_the_pairing_of_a_build_and_tflite_runtime(tmp_path, version, tflite, status, words):
    packages, files = libedgetpu(tmp_path, "/usr/lib/x86_64-linux-gnu", version)
    dpkg(tmp_path, packages, files)
    p = probe(tmp_path, {"tflite-runtime": tflite}, python=(3, 11, 2), arch="x86_64")
    check = Doc.check_runtime_pairing(p, str(tmp_path / "usr/lib/x86_64-linux-gnu/libedgetpu.so.1"))
    assert check.status == status and words in check.detail, check


def test_a_pi5_rebooting_into_kernel8_and_a_proxmox_lxc(tmp_path):
    put(tmp_path, "/proc/device-tree/model", "Raspberry Pi 5 Model B Rev 1.0\x00")
    put(tmp_path, "/proc/sys/kernel/osrelease", "6.12.47+rpt-rpi-2712\n")
    put(tmp_path, "/boot/firmware/config.txt", "dtparam=pciex1\nkernel=kernel8.img\n")
    pcie_card(tmp_path, "0001:01:00.0")
    p = probe(tmp_path, {}, python=(3, 13, 5), arch="aarch64")
    check = R.check_pi5_pcie(p, [])
    assert check.status == Doc.WARN and check.fix.startswith("reboot")
    put(tmp_path, "/proc/sys/kernel/osrelease", "6.12.47+rpt-rpi-v8\n")
    assert R.check_pi5_pcie(p, []).status == Doc.OK
    put(tmp_path, "/proc/1/environ", "container=lxc\x00PATH=/usr/bin\x00")
    check = R.check_passthrough(p, [])
    assert check.status == Doc.FAIL and "lxc.mount.entry: /dev/apex_0" in check.fix
    # the mount alone gives "Operation not permitted": the device cgroup must allow apex's major too (fails on
    # the old code, which named only the mount for PCIe)
    assert "lxc.cgroup2.devices.allow: c MAJOR:* rwm" in check.fix and "ls -l /dev/apex_0" in check.fix


def test_a_python_newer_than_the_known_wheels_is_not_called_wheel_less(tmp_path):
    check = R.check_wheels(probe(tmp_path, {}, python=(3, 14, 0), arch="x86_64"))
    assert check.status == Doc.INFO and "newer than the wheels these sources list (up to 3.13)" in check.detail
    assert R.check_wheels(probe(tmp_path, {}, python=(3, 13, 0), arch="x86_64", system="Darwin")).status == Doc.WARN


def test_make_logs_a_finished_build_leaves_and_modpost_errors(tmp_path):
    put(
        tmp_path,
        "/var/lib/dkms/gasket/1.0/build/make.log",
        "DKMS make.log for gasket-1.0 for kernel 6.8.0-45-generic\n  LD [M]  /var/lib/dkms/gasket/1.0/build/apex.ko\n",
    )
    p = probe(tmp_path, {}, python=(3, 12, 3), arch="x86_64")
    assert R.dkms_gasket(p, "6.8.0-45-generic") == ("added", "1.0")
    modpost = "ERROR: modpost: module gasket uses symbol dma_buf_put from namespace DMA_BUF, but does not import it."
    put(tmp_path, "/var/lib/dkms/gasket/1.0/build/make.log", f"for kernel 6.8.0-45-generic\n{modpost}\n")
    assert R.dkms_gasket(p, "6.8.0-45-generic") == ("failed", modpost)


def test_a_ready_accelerator_on_usb2_inside_a_proxmox_vm(tmp_path):
    proxmox_vm_bootloader(tmp_path)
    for key, value in (("idVendor", "18d1"), ("idProduct", "9302")):
        put(tmp_path, f"/sys/bus/usb/devices/2-1/{key}", value + "\n")
    checks = findings(
        probe(
            tmp_path,
            {"tflite-runtime": "2.14.0", "numpy": "1.26.4"},
            python=(3, 11, 2),
            arch="x86_64",
            groups=["me", "plugdev"],
        )
    )
    assert "usb firmware" not in checks and checks["usb link"].status == Doc.WARN
    assert "usb3=1" in checks["usb link"].fix


def test_a_missing_keyring_in_another_file_is_removed_before_corals_list_is_written(tmp_path):
    """apt refuses one source listed twice with different Signed-By: the fix removes the other file first.
    (Fails on the old code: its fix wrote coral-edgetpu.list beside the .sources file still naming the lost key.)"""
    put(
        tmp_path,
        "/etc/apt/sources.list.d/coral.sources",
        "Types: deb\nURIs: https://packages.cloud.google.com/apt\nSuites: coral-edgetpu-stable\nComponents: main\n"
        "Signed-By: /usr/share/keyrings/coral.gpg\n",
    )
    p = probe(tmp_path, {}, python=(3, 12, 3), arch="x86_64")
    check = R.check_apt_source(p)
    assert check.status == Doc.WARN and "/usr/share/keyrings/coral.gpg, which does not exist" in check.detail
    assert check.fix.startswith("sudo rm /etc/apt/sources.list.d/coral.sources ; sudo install -d")
    put(tmp_path, "/etc/apt/sources.list.d/coral.sources", "")
    put(
        tmp_path,
        "/etc/apt/sources.list.d/coral-edgetpu.list",
        "deb https://packages.cloud.google.com/apt coral-edgetpu-stable main\n",
    )
    assert R.check_apt_source(p).fix == R.APT_FIX  # the file the fix rewrites: nothing to remove first


def wsl2(root: Path, usb_id: tuple[str, str] | None) -> Doc.Probe:
    """Ubuntu 24.04 in WSL 2 on Windows: its kernel says "microsoft", its CPU flags "hypervisor", no DMI; the
    USB Accelerator attached through usbipd-win (or not)."""
    os_release(root, "Ubuntu 24.04.2 LTS", "noble", "24.04")
    put(root, "/proc/sys/kernel/osrelease", "5.15.167.4-microsoft-standard-WSL2\n")
    put(root, "/proc/cpuinfo", "processor\t: 0\nflags\t\t: fpu vme de pse tsc hypervisor lahf_lm\n")
    if usb_id:
        usb(root, "1-1", *usb_id, 1, 2, "480")
    return probe(
        root, {"ai-edge-litert": "2.1.4", "numpy": "2.2.6"}, python=(3, 12, 3), arch="x86_64", groups=["me", "plugdev"]
    )


@pytest.mark.parametrize("usb_id", [None, ("1a6e", "089a")], ids=["nothing-attached", "bootloader"])
def test_wsl2_gets_usbipd_not_vm_advice(tmp_path, usb_id):
    """(Fails on the old code: WSL 2 was "a VM (a hypervisor)" told to use Proxmox's USB port passthrough.)"""
    checks = findings(wsl2(tmp_path, usb_id))
    said = " ".join(f"{c.detail} {c.fix or ''}" for c in checks.values())
    assert "Proxmox" not in said and "a hypervisor" not in said and "PCI passthrough" not in said, said
    advice = checks["usb firmware"] if usb_id else checks["passthrough"]
    assert advice.status == Doc.WARN and advice.fix == R.WSL_USB_FIX
    assert "usbipd attach --wsl --busid BUSID --auto-attach" in advice.fix
    if not usb_id:
        assert checks["passthrough"].detail.startswith("in WSL 2 (Windows)")
