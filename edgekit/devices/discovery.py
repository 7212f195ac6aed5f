"""The device enumerator: which Edge TPUs this machine has, read from sysfs and /dev.

- USB Accelerator: ``/sys/bus/usb/devices/*/idVendor,idProduct`` = ``1a6e:089a`` before the runtime
  has loaded its firmware, ``18d1:9302`` after (Coral's udev rules list both).
- PCIe / M.2 / Dev Board: ``/dev/apex_N`` (gasket + apex driver), temperature in millidegrees C
  from ``/sys/class/apex/apex_N/temp``.
- Google's pycoral ``list_edge_tpus()`` when installed (it asks libedgetpu itself).

The sysfs and /dev roots are parameters so that tests can point them at fake trees.
"""

from __future__ import annotations

import re
from pathlib import Path

from edgekit.results.devices import Device

USB_IDS = {
    ("1a6e", "089a"): "firmware not loaded yet (the Edge TPU runtime loads it on first use)",
    ("18d1", "9302"): "ready",
}
_APEX_RE = re.compile(r"^apex_(\d+)$")


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _usb_sort_key(name: str) -> tuple:
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"[-.:]", name))


def usb_devices(sys_root: str | Path = "/sys") -> list[Device]:
    """USB Edge TPUs from ``<sys_root>/bus/usb/devices``, ordered by bus path."""
    base = Path(sys_root) / "bus" / "usb" / "devices"
    found: list[Device] = []
    try:
        entries = sorted((p for p in base.iterdir() if (p / "idVendor").exists()), key=lambda p: _usb_sort_key(p.name))
    except OSError:
        return []
    for entry in entries:
        vendor, product = (_read(entry / "idVendor") or "").lower(), (_read(entry / "idProduct") or "").lower()
        if (vendor, product) in USB_IDS:
            found.append(
                Device("usb", str(entry), f"usb:{len(found)}", USB_IDS[vendor, product], usb_id=f"{vendor}:{product}")
            )
    return found


def pci_devices(sys_root: str | Path = "/sys", dev_root: str | Path = "/dev") -> list[Device]:
    """PCIe Edge TPUs: ``/dev/apex_N`` nodes, plus sysfs entries whose node is missing."""
    indices: dict[int, bool] = {}
    for folder, is_node in ((Path(dev_root), True), (Path(sys_root) / "class" / "apex", False)):
        try:
            for p in folder.iterdir():
                m = _APEX_RE.match(p.name)
                if m:
                    indices[int(m.group(1))] = indices.get(int(m.group(1)), False) or is_node
        except OSError:
            continue
    found: list[Device] = []
    for n in sorted(indices):
        raw = _read(Path(sys_root) / "class" / "apex" / f"apex_{n}" / "temp")
        temp = int(raw) / 1000.0 if raw and raw.lstrip("-").isdigit() else None
        node = Path(dev_root) / f"apex_{n}"
        state = "ready" if indices[n] else f"driver sees it but {node} is missing (check udev / the apex group)"
        found.append(Device("pci", str(Path(dev_root) / f"apex_{n}"), f"pci:{len(found)}", state, temperature_c=temp))
    return found


def pycoral_devices() -> list[Device]:
    """Edge TPUs as Google's pycoral sees them (empty when it is not installed or fails)."""
    from edgekit.board.backends import google_pycoral_available

    if not google_pycoral_available():
        return []
    try:
        from pycoral.utils.edgetpu import list_edge_tpus

        listed = list_edge_tpus()
    except Exception:  # an old or broken runtime must not break discovery
        return []
    counts: dict[str, int] = {}
    found: list[Device] = []
    for d in listed:
        kind = str(d.get("type", "usb"))
        found.append(Device(kind, str(d.get("path", "")), f"{kind}:{counts.get(kind, 0)}", "ready", source="pycoral"))
        counts[kind] = counts.get(kind, 0) + 1
    return found


def list_devices(
    sys_root: str | Path = "/sys", dev_root: str | Path = "/dev", use_pycoral: bool = True
) -> list[Device]:
    """All Edge TPUs: sysfs first, then any that only pycoral reports (matched by path)."""
    found = usb_devices(sys_root) + pci_devices(sys_root, dev_root)
    if use_pycoral:
        known = {d.path for d in found}
        found += [d for d in pycoral_devices() if d.path not in known]
    return found
