"""``edgekit doctor``'s rules for the 2026 machine matrix: the OS and Python, the interpreter's wheels, the
libedgetpu build, the kernel and the gasket/apex driver, the Pi 5's PCIe setup, the USB link and the
Accelerator's bootloader mode, containers and VMs, and Coral's apt source.

Every rule reads the machine through one root folder (``Probe.root``, "/" on a real machine; tests
point it at a recorded machine state), and every rule rests on public reports: ``RULES`` names them
by key, each key a row of ``tests/fixtures/evidence/DOCTOR.tsv`` (its URL and what it shows).
"""

from __future__ import annotations

import os
import platform
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from edgekit.edgetpu.compiler_locator import CORAL_APT_SETUP, CORAL_KEYRING, CORAL_LIST

if TYPE_CHECKING:  # pragma: no cover
    from edgekit.results.devices import Device

OK, INFO, WARN, FAIL = "ok", "info", "warn", "fail"

KNOWN_LIBEDGETPU_DIRS = {
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
UDEV_DIRS = ("/etc/udev/rules.d", "/lib/udev/rules.d", "/usr/lib/udev/rules.d")


def _dist_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def _module_available(name: str) -> bool:
    from edgekit.board.backends import module_available

    return module_available(name)


def _google_pycoral() -> bool:
    from edgekit.board.backends import google_pycoral_available

    return google_pycoral_available()


@dataclass
class Probe:
    """Where the checks look. The defaults describe this machine; tests replace them with fake trees."""

    sys_root: str = "/sys"
    dev_root: str = "/dev"
    udev_dirs: tuple[str, ...] = UDEV_DIRS
    lib_dirs: list[str] | None = None  # None: the known folders for this OS
    find_library: bool = True  # also ask ctypes.util.find_library
    read_runtime_version: bool = True
    groups: list[str] | None = None  # None: this process's groups
    is_root: bool | None = None
    env: Mapping[str, str] = field(default_factory=lambda: os.environ)
    system: str = field(default_factory=platform.system)
    dist_version: Callable[[str], str | None] = _dist_version
    use_pycoral: bool = True
    root: str = "/"  # where /etc, /proc, /var, /boot are read (doctor_rules)
    python: tuple[int, ...] = tuple(sys.version_info[:3])
    arch: str = field(default_factory=platform.machine)
    executable: str = sys.executable
    module_available: Callable[[str], bool] = _module_available
    google_pycoral: Callable[[], bool] = _google_pycoral

    @classmethod
    def for_root(cls, root: str, **kw) -> Probe:
        """A probe that reads every file under ``root`` (a recorded machine state), nothing of this machine."""
        base = Path(root)
        system = kw.get("system", "Linux")
        recorded = cls(
            root=str(base),
            executable="",
            sys_root=str(base / "sys"),
            dev_root=str(base / "dev"),
            udev_dirs=tuple(str(base / d.lstrip("/")) for d in UDEV_DIRS),
            lib_dirs=[str(base / d.lstrip("/")) for d in KNOWN_LIBEDGETPU_DIRS.get(system, [])],
            find_library=False,
            read_runtime_version=False,
            use_pycoral=False,
            google_pycoral=lambda: False,
        )
        return replace(recorded, **kw)


@dataclass
class Check:
    name: str
    status: str
    detail: str
    fix: str | None = None


#: Each rule (a check's name) and the reports it rests on (keys of tests/fixtures/evidence/DOCTOR.tsv).
RULES: dict[str, tuple[str, ...]] = {
    "interpreter wheel": (
        "pycoral#85",
        "pycoral#58",
        "coral-tflite#58",
        "openWakeWord#270",
        "pypi-tflite-runtime",
        "nixpkgs-ai-edge-litert-linux",
        "nixpkgs-ai-edge-litert-darwin",
    ),
    "libedgetpu build": ("feranick-libedgetpu-releases", "feranick-libedgetpu-changelog", "edgetpu#812"),
    "runtime pairing": (
        "edgetpu#812",
        "feranick-libedgetpu-releases",
        "feranick-pycoral-release",
        "ultralytics-coral-guide",
    ),
    "kernel driver": (
        "gasket-driver#12",
        "edgetpu#808",
        "gasket-driver#52",
        "gasket-driver#50",
        "gasket-driver#47",
        "gasket-driver#55",
        "traffic-monitor#171",
        "gasket-dkms#25",
        "gasket-dkms#9",
        "edgetpu#865",
        "linux#6799",
    ),
    "pi5 pcie": ("rpi-docs#3340", "rpi-docs#3873", "waveshare-pciex1", "geerlingguy-pcie#44", "linux#6126"),
    "usb link": ("frigate#7034", "edgetpu#782"),
    "usb firmware": ("edgetpu#536", "frigate#9349", "frigate#2609", "usbipd-win#1252"),
    "passthrough": (
        "frigate#5276",
        "edgetpu#762",
        "geerlingguy-pcie#44",
        "frigate-addons#23",
        "frigate#2613",
        "frigate#9349",
        "frigate#1807",
        "gist-lxc-apex",
        "gist-lxc-usb",
        "pve-pct-conf",
        "WSL-docs#1878",
        "usbipd-win#1252",
    ),
    "apt source": (
        "edgetpu#777",
        "edgetpu#801",
        "edgetpu#915",
        "gasket-driver#44",
        "frigate#4649",
        "edgetpu#893",
        "edgetpu#887",
    ),
}

CORAL_APT = "packages.cloud.google.com/apt"
KEYRING = CORAL_KEYRING  # the keyring compile's install hint and the compiler image's recipe write
APT_FIX = CORAL_APT_SETUP
FERANICK_GASKET = "https://github.com/feranick/gasket-driver/releases/tag/1.0-18.4"
# Coral's apt package gasket-dkms 1.0-18 (February 2022) predates every later kernel fix: class_create() changed
# in 6.4 (google/gasket-driver#12; Coral's package failing on 6.5, google-coral/edgetpu#808), eventfd_signal()
# in 6.8, no_llseek went in 6.12 (google/gasket-driver#52).
GASKET_BREAKS_AT = (6, 4)
GASKET_FAILS_REPORTED_AT = (6, 18)  # traffic-monitor#171 (6.18), KyleGospo/gasket-dkms#25 (6.19)
PCI_EDGETPU = ("0x1ac1", "0x089a")
#: libedgetpu package versions whose TensorFlow is not in the version string (feranick/libedgetpu's
#: debian/changelog): Coral's own 16.0 is TF 2.5; feranick's first builds; later ones are 16.0tfX.Y.Z-N.
LIBEDGETPU_VERSIONS = {
    "16.0": (2, 5),
    "16.0-0ppa1": (2, 8, 4),
    "16.0pp2": (2, 9, 3),
    "16.0pp3": (2, 10, 1),
}  # lspci: Global Unichip Corp. Coral Edge TPU [1ac1:089a]


# ------------------------------------------------------------------------------------- reading the machine
def at(p: Probe, path: str) -> Path:
    """``path`` (absolute on the machine) under the probe's root."""
    return Path(p.root) / path.lstrip("/")


def read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return None


def os_release(p: Probe) -> dict[str, str]:
    text = read(at(p, "/etc/os-release")) or read(at(p, "/usr/lib/os-release")) or ""
    return {k: v.strip().strip('"') for k, _, v in (line.partition("=") for line in text.splitlines()) if v}


def macos_version(p: Probe) -> str | None:
    text = read(at(p, "/System/Library/CoreServices/SystemVersion.plist")) or ""
    m = re.search(r"<key>ProductVersion</key>\s*<string>([^<]+)</string>", text)
    return m.group(1) if m else None


def board_model(p: Probe) -> str | None:
    text = read(at(p, "/proc/device-tree/model")) or read(Path(p.sys_root) / "firmware/devicetree/base/model")
    return text.strip("\x00\n ") if text else None


def kernel_release(p: Probe) -> str | None:
    text = read(at(p, "/proc/sys/kernel/osrelease"))
    return text.strip() if text else None


def kernel_tuple(release: str | None) -> tuple[int, int]:
    m = re.match(r"(\d+)\.(\d+)", release or "")
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def is_raspberry_pi_os(p: Probe) -> bool:
    return at(p, "/etc/rpi-issue").is_file()


def pci_edgetpus(p: Probe) -> list[str]:
    """PCI addresses of Edge TPUs (vendor 0x1ac1, device 0x089a), driver or not."""
    base = Path(p.sys_root) / "bus" / "pci" / "devices"
    try:
        entries = sorted(base.iterdir())
    except OSError:
        return []
    return [
        e.name
        for e in entries
        if ((read(e / "vendor") or "").strip(), (read(e / "device") or "").strip()) == PCI_EDGETPU
    ]


def module_loaded(p: Probe, name: str) -> bool:
    return (Path(p.sys_root) / "module" / name).is_dir()


def dpkg_packages(p: Probe) -> dict[str, str]:
    """Installed Debian packages and their versions, from dpkg's status file."""
    text = read(at(p, "/var/lib/dpkg/status")) or ""
    found = {}
    for stanza in text.split("\n\n"):
        fields = dict(re.findall(r"^([A-Za-z-]+): *(.*)$", stanza, re.MULTILINE))
        if fields.get("Package") and "installed" in fields.get("Status", "").split()[-1:]:
            found[fields["Package"]] = fields.get("Version", "")
    return found


def dpkg_owner(p: Probe, path: str) -> str | None:
    """The Debian package whose file list holds ``path`` (a path on the machine, not under the root)."""
    try:
        lists = sorted(at(p, "/var/lib/dpkg/info").glob("*.list"))
    except OSError:
        return None
    for f in lists:
        if path in (read(f) or "").splitlines():
            return f.name[: -len(".list")].split(":")[0]
    return None


def on_machine(p: Probe, path: str) -> str:
    """A path found under the probe's root, as the machine itself names it."""
    if p.root in ("", "/"):
        return path
    try:
        return "/" + str(Path(path).relative_to(p.root))
    except ValueError:
        return path


def container_kind(p: Probe) -> str | None:
    """ "docker", "podman", "lxc", "kubernetes", "Home Assistant add-on" or None (not in a container)."""
    if p.env.get("SUPERVISOR_TOKEN"):  # set in every Home Assistant add-on
        return "Home Assistant add-on"
    if at(p, "/.dockerenv").exists():
        return "docker"
    if at(p, "/run/.containerenv").exists():
        return "podman"
    cgroup = read(at(p, "/proc/1/cgroup")) or ""
    for word, kind in (("kubepods", "kubernetes"), ("docker", "docker"), ("libpod", "podman"), ("lxc", "lxc")):
        if word in cgroup:
            return kind
    environ = read(at(p, "/proc/1/environ")) or ""
    return "lxc" if "container=lxc" in environ else None


VM_VENDORS = (
    ("QEMU", "QEMU/KVM (Proxmox and others)"),
    ("VMware", "VMware"),
    ("innotek", "VirtualBox"),
    ("Virtual Machine", "Hyper-V"),
    ("Xen", "Xen"),
    ("Parallels", "Parallels"),
)  # not "Microsoft": Surface


WSL = "WSL 2"


def vm_kind(p: Probe) -> str | None:
    """The hypervisor this Linux runs under (from DMI and /proc/cpuinfo), or None on bare metal; ``WSL`` for
    Windows' WSL (its kernel release says "microsoft": 5.15.167.4-microsoft-standard-WSL2), where a USB device
    comes in through usbipd-win, not a VM's passthrough."""
    if "microsoft" in (kernel_release(p) or "").lower() or p.env.get("WSL_DISTRO_NAME"):
        return WSL
    dmi = Path(p.sys_root) / "class" / "dmi" / "id"
    vendor = " ".join(filter(None, (read(dmi / n) for n in ("sys_vendor", "product_name", "bios_vendor"))))
    for word, name in VM_VENDORS:
        if word in vendor:
            return name
    flags = re.search(r"^flags\s*:(.*)$", read(at(p, "/proc/cpuinfo")) or "", re.MULTILINE)
    return "a hypervisor" if flags and "hypervisor" in flags.group(1).split() else None


def usb_speed(entry: str) -> int | None:
    """The link speed of a USB device in Mbit/s (sysfs ``speed``: 480 is USB 2, 5000 and up USB 3)."""
    raw = (read(Path(entry) / "speed") or "").strip()
    try:
        return int(float(raw))
    except ValueError:
        return None


def usb_node(p: Probe, entry: str) -> Path | None:
    """``/dev/bus/usb/BBB/DDD`` of a USB device (under the probe's /dev), from sysfs busnum and devnum."""
    bus, dev = (read(Path(entry) / n) for n in ("busnum", "devnum"))
    if not (bus and dev and bus.strip().isdigit() and dev.strip().isdigit()):
        return None
    return Path(p.dev_root) / "bus" / "usb" / f"{int(bus):03d}" / f"{int(dev):03d}"


def dkms_gasket(p: Probe, kernel: str) -> tuple[str, str]:
    """("built", version), ("failed", the first error of make.log), ("added", version) or ("absent", "")."""
    base = at(p, "/var/lib/dkms/gasket")
    try:
        versions = sorted(d for d in base.iterdir() if d.is_dir() and not d.is_symlink())
    except OSError:
        return "absent", ""
    for v in versions:
        if any((v / kernel).glob("*/module/apex.ko*")):
            return "built", v.name
    for v in versions:
        log = read(v / "build" / "make.log") or ""
        errors = [line.strip() for line in log.splitlines() if re.search(r"error:|\bError \d", line, re.IGNORECASE)]
        if errors:  # a make.log without errors is what a finished build leaves behind
            first = errors[0]
            built_for = re.search(r"for kernel (\S+)", log)
            if built_for and built_for.group(1) != kernel:
                first += f" (that build was for kernel {built_for.group(1)})"
            return "failed", first
    return ("added", versions[0].name) if versions else ("absent", "")


def coral_apt_sources(p: Probe) -> list[tuple[str, str, str | None]]:
    """(file on the machine, suite, signed-by keyring or None) for each of Coral's apt sources (suites coral-*;
    the same host serves Google's other repositories). apt reads only *.list and *.sources files."""
    folder = at(p, "/etc/apt/sources.list.d")
    files = [at(p, "/etc/apt/sources.list")] + (
        sorted(f for f in folder.iterdir() if f.suffix in (".list", ".sources")) if folder.is_dir() else []
    )
    found = []
    for f in files:
        text = read(f) or ""
        if f.suffix == ".sources":
            for stanza in text.split("\n\n"):
                suite = re.search(r"^Suites:\s*(coral\S*)", stanza, re.MULTILINE | re.IGNORECASE)
                if CORAL_APT in stanza and suite:
                    key = re.search(r"^Signed-By:\s*(\S+)", stanza, re.MULTILINE | re.IGNORECASE)
                    found.append((on_machine(p, str(f)), suite.group(1), key and key.group(1)))
            continue
        for line in text.splitlines():
            m = re.match(r"\s*deb\s+(\[[^]]*\]\s+)?\S*" + re.escape(CORAL_APT) + r"\S*\s+(coral\S*)", line)
            if m:
                key = re.search(r"signed-by=(\S+?)[\s\]]", m.group(1) or "")
                found.append((on_machine(p, str(f)), m.group(2), key and key.group(1)))
    return found


# ------------------------------------------------------------------------------------- the interpreter's wheels
#: Where each interpreter package publishes wheels: (OS, CPU) -> (oldest, newest CPython) in the sources.
WHEELS: dict[str, dict[tuple[str, str], tuple[tuple[int, int], tuple[int, int]]]] = {
    # nixpkgs' ai-edge-litert release.json lists the PyPI wheels: cp310-cp313, manylinux x86_64/aarch64, macOS arm64
    "ai-edge-litert": {
        ("Linux", "x86_64"): ((3, 10), (3, 13)),
        ("Linux", "aarch64"): ((3, 10), (3, 13)),
        ("Darwin", "arm64"): ((3, 10), (3, 13)),
    },
    # PyPI's last tflite-runtime (2.14.0) stops at cp311 (openWakeWord#270), for x86_64, aarch64 and armv7l
    "tflite-runtime": {
        ("Linux", "x86_64"): ((3, 7), (3, 11)),
        ("Linux", "aarch64"): ((3, 7), (3, 11)),
        ("Linux", "armv7l"): ((3, 7), (3, 11)),
    },
    # Google's pycoral (Coral's own package index, not PyPI's unrelated 'pycoral'): up to 3.9 (pycoral#85),
    # 3.10 on Apple Silicon only (pycoral#58)
    "Google's pycoral": {
        ("Linux", "x86_64"): ((3, 6), (3, 9)),
        ("Linux", "aarch64"): ((3, 6), (3, 9)),
        ("Linux", "armv7l"): ((3, 6), (3, 9)),
        ("Darwin", "arm64"): ((3, 6), (3, 10)),
    },
}


def cpu(p: Probe) -> str:
    arch = (p.arch or "").lower()
    if arch in ("amd64", "x64"):
        return "x86_64"
    if arch == "arm64" and p.system == "Linux":
        return "aarch64"
    return "arm64" if arch == "aarch64" and p.system == "Darwin" else arch


def wheels_for(p: Probe) -> list[str]:
    """The interpreter packages that publish a wheel for this Python, OS and CPU."""
    py = tuple(p.python[:2])
    return [
        name for name, table in WHEELS.items() if (span := table.get((p.system, cpu(p)))) and span[0] <= py <= span[1]
    ]


def check_wheels(p: Probe) -> Check:
    py = ".".join(map(str, p.python[:2]))
    where = f"CPython {py} on {p.system} {cpu(p)}"
    has = wheels_for(p)
    if has:
        missing = [n for n in WHEELS if n not in has]
        return Check(
            "interpreter wheel",
            OK,
            f"wheels for {where}: {', '.join(has)}" + (f" (none from {', '.join(missing)})" if missing else ""),
        )
    litert = WHEELS["ai-edge-litert"].get((p.system, cpu(p)))
    newest = litert[1] if litert else None
    if newest and tuple(p.python[:2]) > newest:  # a newer Python on a platform ai-edge-litert publishes for
        return Check(
            "interpreter wheel",
            INFO,
            f"{where} is newer than the wheels these sources list (up to "
            f"{newest[0]}.{newest[1]}); ai-edge-litert is the one to try: pip install ai-edge-litert",
        )
    if cpu(p) == "armv7l":
        fix = (
            "install the 64-bit Raspberry Pi OS (aarch64), where ai-edge-litert has wheels for Python 3.10-3.13; "
            "on 32-bit ARM only tflite-runtime 2.14 has wheels, for Python 3.11 and older"
        )
    elif p.system == "Darwin":
        fix = "ai-edge-litert has macOS wheels for Apple Silicon (arm64) only, for Python 3.10-3.13"
    else:
        fix = "use CPython 3.10-3.13 on Linux x86_64/aarch64 (ai-edge-litert's wheels), e.g. in a venv"
    return Check(
        "interpreter wheel",
        WARN,
        f"no interpreter package publishes a wheel for {where} (ai-edge-litert, tflite-runtime, Google's pycoral)",
        fix,
    )


# ------------------------------------------------------------------------------------- libedgetpu's build
def libedgetpu_build(p: Probe, path: str) -> tuple[str | None, str | None, tuple[int, ...] | None]:
    """(package, version, TensorFlow version it was built against) of the libedgetpu file at ``path``:
    Google's 16.0 is TensorFlow 2.5; feranick's builds say theirs in the version (16.0tf2.17.0-1...)."""
    packages = dpkg_packages(p)
    owner = dpkg_owner(p, on_machine(p, path))
    if owner is None:
        owner = next((n for n in ("libedgetpu1-std", "libedgetpu1-max") if n in packages), None)
    version = packages.get(owner) if owner else None
    if version is None:
        return owner, None, None
    m = re.search(r"tf(\d+)\.(\d+)(?:\.(\d+))?", version, re.IGNORECASE)
    if m:
        return owner, version, tuple(int(x) for x in m.groups() if x is not None)
    return owner, version, LIBEDGETPU_VERSIONS.get(version.split("+")[0])


def check_libedgetpu_build(p: Probe, path: str) -> Check:
    owner, version, tf = libedgetpu_build(p, path)
    if version is None:
        return Check(
            "libedgetpu build",
            INFO,
            f"{on_machine(p, path)} is not from a Debian package: its build "
            "(Google's 16.0 for TFLite 2.5, or a community build for newer TFLite) is not known",
        )
    if tf and tf[:2] != (2, 5):
        what = f"a community build against TensorFlow {'.'.join(map(str, tf))} (feranick/libedgetpu)"
    elif tf:
        what = "Google's build of 16.0, for TFLite 2.5 (runs with tflite-runtime up to 2.11)"
    else:
        what = "a build whose TensorFlow version is not in its version string"
    return Check("libedgetpu build", INFO, f"{owner} {version}: {what}")


# ------------------------------------------------------------------------------------- kernel, gasket and apex
def gasket_route(kernel: str | None) -> str:
    """How to get the gasket/apex driver onto this kernel."""
    k = kernel_tuple(kernel)
    if k < GASKET_BREAKS_AT:
        return "sudo apt-get install gasket-dkms (Coral's apt repository), then reboot"
    route = (
        "Coral's gasket-dkms 1.0-18 (2022) does not build on kernel 6.4 and newer (class_create changed in "
        "6.4, eventfd_signal in 6.8, no_llseek was removed in 6.12): "
        "sudo apt-get remove gasket-dkms ; sudo apt-get install dkms linux-headers-$(uname -r) ; then "
        f"install feranick's patched gasket-dkms_1.0-18.4_all.deb from {FERANICK_GASKET} "
        "(sudo dpkg -i gasket-dkms_1.0-18.4_all.deb) and reboot"
    )
    if k >= GASKET_FAILS_REPORTED_AT:
        route += (
            "; builds are reported failing on 6.18 and 6.19 (glossyio/traffic-monitor#171, "
            "KyleGospo/gasket-dkms#25): if it fails, boot a 6.12-6.17 kernel, where it is reported to build"
        )
    return route


def check_kernel_driver(p: Probe, devices: list[Device]) -> Check | None:
    """The gasket/apex driver of a PCIe or M.2 Edge TPU: loaded, its /dev/apex_N, its dkms build."""
    nodes = [d for d in devices if d.type == "pci" and d.state == "ready"]
    cards = pci_edgetpus(p)
    if p.system != "Linux" or not (cards or any(d.type == "pci" for d in devices)) or container_kind(p):
        return None
    kernel = kernel_release(p) or "?"
    where = f"{len(cards) or len(nodes)} PCIe Edge TPU(s) ({', '.join(cards) or 'apex'}) on kernel {kernel}"
    if nodes:
        return Check("kernel driver", OK, f"{where}: apex driver loaded, {', '.join(d.path for d in nodes)}")
    if module_loaded(p, "apex"):
        return Check(
            "kernel driver",
            FAIL,
            f"{where}: the apex driver is loaded but made no /dev/apex_N",
            "read why in the kernel log: sudo dmesg | grep -i -e apex -e gasket (on a Raspberry Pi 5, "
            "'Couldn't initialize interrupts' needs the 4K-page kernel and the PCIe overlay, see pi5 pcie)",
        )
    state, what = dkms_gasket(p, kernel)
    if state == "built":
        return Check(
            "kernel driver",
            FAIL,
            f"{where}: gasket {what} is built by dkms for this kernel but the apex module is not loaded",
            "sudo modprobe apex ; if that fails: sudo dmesg | grep -i -e apex -e gasket",
        )
    if state == "failed":
        return Check(
            "kernel driver",
            FAIL,
            f"{where}: the apex driver is not loaded; its dkms build failed, make.log says: {what[:200]}",
            gasket_route(kernel),
        )
    missing = "gasket is in dkms but not built for this kernel" if state == "added" else "no gasket/apex driver"
    return Check("kernel driver", FAIL, f"{where}: {missing}, so no /dev/apex_N", gasket_route(kernel))


def check_pi5_pcie(p: Probe, devices: list[Device]) -> Check | None:
    """A Raspberry Pi 5's PCIe connector (off until config.txt enables it) and its page size (gasket needs 4K)."""
    model = board_model(p) or ""
    if "Raspberry Pi 5" not in model and "Compute Module 5" not in model:
        return None
    path = "/boot/firmware/config.txt" if at(p, "/boot/firmware/config.txt").is_file() else "/boot/config.txt"
    config = read(at(p, path)) or ""
    enabled = re.search(r"^\s*dtparam=(pciex1|nvme)\b", config, re.MULTILINE)
    if not pci_edgetpus(p):
        if enabled:
            return None
        status = INFO if devices else WARN
        return Check(
            "pi5 pcie",
            status,
            f"{model}: the PCIe connector is not enabled in {path} (no dtparam=pciex1): "
            "an M.2 Coral on a PCIe HAT stays invisible (HAT+ boards enable it themselves)",
            f"for an M.2 Coral: add dtparam=pciex1 to {path} and reboot",
        )
    kernel = kernel_release(p) or ""
    if "2712" in kernel and re.search(r"^\s*kernel=kernel8\.img", config, re.MULTILINE):
        return Check(
            "pi5 pcie",
            WARN,
            f"{path} selects kernel8.img (4K pages) but the running kernel is still the 16K-page {kernel}",
            "reboot, then build the driver for that kernel (sudo dkms autoinstall)",
        )
    if "2712" in kernel:
        return Check(
            "pi5 pcie",
            FAIL,
            f"{model} runs the 16K-page kernel ({kernel}); the gasket/apex driver needs the 4K-page kernel",
            f"add kernel=kernel8.img to {path}, reboot, then build the driver for "
            "that kernel (sudo dkms autoinstall); if dmesg still says 'Couldn't initialize interrupts', "
            f"add dtoverlay=pineboards-hat-ai to {path} (the MSI change the Coral needs on a Pi 5)",
        )
    return Check("pi5 pcie", OK, f"{model}: PCIe enabled, 4K-page kernel ({kernel})")


# ------------------------------------------------------------------------------------- USB
def check_usb_link(p: Probe, devices: list[Device]) -> Check | None:
    """The link speed of a ready USB Accelerator (before its firmware loads, the speed says nothing)."""
    speeds = [(d, usb_speed(d.path)) for d in devices if d.type == "usb" and d.usb_id == "18d1:9302"]
    ready = [(d, s) for d, s in speeds if s]
    if not ready:
        return None
    slow = [d for d, s in ready if s <= 480]
    links = ", ".join(f"{d.device} {s} Mbit/s" for d, s in ready)
    if not slow:
        return Check("usb link", OK, f"USB 3 link ({links})")
    if "Raspberry Pi 3" in (board_model(p) or "") or "Raspberry Pi Zero" in (board_model(p) or ""):
        return Check(
            "usb link",
            INFO,
            f"USB 2 link ({links}): this board has USB 2 ports only, so inference "
            "runs several times slower than on USB 3",
        )
    vm = vm_kind(p) if p.system == "Linux" and not container_kind(p) else None
    in_vm = (
        (f"; in this VM ({vm}) the passthrough must be USB 3 too (Proxmox: the USB device's 'Use USB3', usb3=1)")
        if vm and vm != WSL
        else ""
    )
    return Check(
        "usb link",
        WARN,
        f"{', '.join(d.device for d in slow)} on a USB 2 link ({links}): inference "
        "runs several times slower than on USB 3",
        "plug it into a USB 3 port (blue on a Raspberry Pi 4) with a USB 3 cable; if it then drops out, "
        "the port lacks power: use a powered USB 3 hub" + in_vm,
    )


def check_usb_firmware(p: Probe, devices: list[Device]) -> Check | None:
    """An Accelerator in its bootloader mode inside a VM: passthrough by id loses it when the firmware loads."""
    boot = [d for d in devices if d.type == "usb" and d.usb_id == "1a6e:089a"]
    vm = vm_kind(p) if p.system == "Linux" else None
    if not boot or not vm or container_kind(p):
        return None
    return Check(
        "usb firmware",
        WARN,
        f"{', '.join(d.device for d in boot)} is in its bootloader mode (1a6e:089a) "
        f"inside a VM ({vm}): when the Edge TPU runtime loads its firmware the Accelerator reconnects as "
        "18d1:9302, which a passthrough by device id does not follow",
        WSL_USB_FIX
        if vm == WSL
        else "pass the USB port through, not the device id (Proxmox: Hardware > Add > USB Device > Use USB "
        "Port), or the whole USB controller (PCI passthrough)",
    )


# ------------------------------------------------------------------------------------- containers and VMs
def hidden_usb(p: Probe, devices: list[Device]) -> list[Device]:
    """USB Edge TPUs that sysfs shows but whose /dev/bus/usb node is not here (a container not given it)."""
    if not container_kind(p):
        return []
    return [d for d in devices if d.type == "usb" and (node := usb_node(p, d.path)) and not node.exists()]


CONTAINER_FIX = (
    "pass the Edge TPU into the container: USB: docker run --device /dev/bus/usb (compose: devices: "
    "[/dev/bus/usb:/dev/bus/usb]); PCIe/M.2: --device /dev/apex_0 with the gasket driver installed on "
    "the host, not in the container"
)
# The container's device cgroup must allow a node's major as well as see it mounted: USB's is 189 (gist-lxc-usb);
# apex's is given out by the kernel when gasket loads, so the user reads it on the host (ls -l). Proxmox's own
# devN entries (pve-pct-conf) do both.
LXC_FIX = (
    "in the LXC's config on the host (Proxmox: /etc/pve/lxc/<id>.conf): USB: lxc.cgroup2.devices.allow: "
    "c 189:* rwm and lxc.mount.entry: /dev/bus/usb dev/bus/usb none bind,optional,create=dir; PCIe/M.2: "
    "lxc.cgroup2.devices.allow: c MAJOR:* rwm (MAJOR: the number before the comma in `ls -l /dev/apex_0` on "
    "the host) and lxc.mount.entry: /dev/apex_0 dev/apex_0 none bind,optional,create=file, or on Proxmox "
    "dev0: /dev/apex_0 instead of both; the gasket driver on the host"
)
HA_FIX = (
    "Home Assistant OS ships the apex driver and passes /dev/apex_0 and USB devices to the add-on; in "
    "protection mode only /dev/apex_0: turn protection mode off for a second PCIe Edge TPU; plug the USB "
    "Accelerator into the Home Assistant host itself"
)
VM_FIX = (
    "pass it through to the VM: USB: the USB port (Proxmox: Hardware > Add > USB Device > Use USB Port), not the "
    "device id, which changes from 1a6e:089a to 18d1:9302 when the firmware loads; PCIe/M.2: PCI passthrough "
    "of the 1ac1:089a device (IOMMU on)"
)


# usbipd-win's commands since its version 4 (MicrosoftDocs/WSL#1878); -a (--auto-attach) attaches the bus id again
# whenever the device comes back (dorssel/usbipd-win#1252), as the Accelerator does when its firmware loads.
WSL_USB_FIX = (
    "attach the USB Accelerator to WSL with usbipd-win, in an administrator PowerShell on Windows: "
    "winget install usbipd ; usbipd list ; usbipd bind --busid BUSID ; then usbipd attach --wsl --busid "
    "BUSID --auto-attach (it re-enumerates from 1a6e:089a to 18d1:9302 when the runtime loads its "
    "firmware, and only --auto-attach follows it)"
)


def check_passthrough(p: Probe, devices: list[Device]) -> Check | None:
    """Inside a container, a VM or Home Assistant: is the Edge TPU passed through?"""
    if p.system != "Linux":
        return None
    kind, vm = container_kind(p), vm_kind(p)
    if not kind and not vm:
        return None
    where = f"inside a {kind} container" if kind else "in WSL 2 (Windows)" if vm == WSL else f"in a VM ({vm})"
    fix = {"Home Assistant add-on": HA_FIX, "lxc": LXC_FIX, None: WSL_USB_FIX if vm == WSL else VM_FIX}.get(
        kind, CONTAINER_FIX
    )
    hidden = hidden_usb(p, devices)
    if hidden:
        names = ", ".join(f"{d.device} ({d.usb_id})" for d in hidden)
        return Check(
            "passthrough",
            FAIL,
            f"{where}: sysfs shows {names} but its /dev/bus/usb node is not in the "
            "container, so nothing here can open it",
            fix,
        )
    if kind and pci_edgetpus(p) and not any(d.type == "pci" for d in devices):
        return Check("passthrough", FAIL, f"{where}: the host has a PCIe Edge TPU but no /dev/apex_N is passed in", fix)
    if not devices:
        return Check("passthrough", WARN, f"{where} and no Edge TPU is visible here", fix)
    return Check(
        "passthrough", OK, f"{where}, with the Edge TPU passed through ({', '.join(d.device for d in devices)})"
    )


# ------------------------------------------------------------------------------------- Coral's apt source
DEAD_SUITES = ("coral-cloud-stable", "coral-stable")  # 404 since 2025 (google-coral/edgetpu#893, #887)


def apt_fix(sources: list[tuple[str, str, str | None]]) -> str:
    """APT_FIX, after removing Coral's sources from other files than the one it writes: apt refuses two entries of
    one source whose Signed-By differ ("Conflicting values set for option Signed-By")."""
    others = sorted({f for f, _, _ in sources if f != CORAL_LIST})
    steps = [f"delete Coral's line from {f}" if f == "/etc/apt/sources.list" else f"sudo rm {f}" for f in others]
    return " ; ".join([*steps, APT_FIX])


def check_apt_source(p: Probe) -> Check | None:
    """Coral's apt source in the keyring form (apt-key is gone from Debian 13 and Raspberry Pi OS Trixie)."""
    sources = coral_apt_sources(p)
    if not sources or p.system != "Linux":
        return None
    dead = [(f, s) for f, s, _ in sources if s in DEAD_SUITES]
    if dead:
        return Check(
            "apt source",
            WARN,
            "; ".join(f"{f} lists {s}, which no longer exists (apt update fails with 404)" for f, s in dead),
            f"remove {', '.join(sorted({f for f, _ in dead}))}: Coral's packages are in coral-edgetpu-stable",
        )
    legacy = sorted({f for f, _, key in sources if not key})
    if legacy:
        return Check(
            "apt source",
            WARN,
            f"{', '.join(legacy)}: Coral's source has no signed-by keyring, so it relies "
            "on apt-key, which is deprecated and gone from Debian 13 (trixie)",
            apt_fix(sources),
        )
    lost = sorted({key for _, _, key in sources if key and not at(p, key).is_file()})
    if lost:
        return Check(
            "apt source", WARN, f"Coral's source is signed by {', '.join(lost)}, which does not exist", apt_fix(sources)
        )
    return Check("apt source", OK, f"Coral's source is signed by {sources[0][2]} ({sources[0][0]})")
