"""``edgekit devices``: the Edge TPUs found."""

from __future__ import annotations

from dataclasses import dataclass

from edgekit.records import Record


@dataclass(frozen=True)
class Device(Record):
    """One Edge TPU: ``device`` is what to pass as ``device=`` / ``--device`` (``usb:0``, ``pci:1``). The one
    type of a device: what :mod:`edgekit.devices.discovery` finds and what :class:`DevicesResult` lists."""

    type: str  # "usb" or "pci"
    path: str  # sysfs USB path or /dev/apex_N
    device: str
    state: str
    usb_id: str | None = None  # "vendor:product" for USB
    temperature_c: float | None = None
    source: str = "sysfs"  # "sysfs" or "pycoral"


@dataclass(frozen=True)
class DevicesResult(Record):
    """``edgekit devices --json``: the Edge TPUs on this machine (each a :class:`Device`, also ``edgekit.results.Device``)."""

    devices: tuple[Device, ...]

    def render_text(self) -> str:
        if not self.devices:
            return "no Edge TPU found (USB 1a6e:089a / 18d1:9302, PCIe /dev/apex_N); `edgekit doctor` says why"
        lines = []
        for x in self.devices:
            extra = [f"id {x.usb_id}"] if x.usb_id else []
            if x.temperature_c is not None:
                extra.append(f"{x.temperature_c:.1f} C")
            lines.append(f"{x.device:<7} {x.path}  {x.state}" + (f" ({', '.join(extra)})" if extra else ""))
        return "\n".join(lines)
