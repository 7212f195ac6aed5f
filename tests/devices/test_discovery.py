"""Device discovery on fake sysfs and /dev trees: stand-ins for hardware this machine does not have.

The trees copy the layout of real ones (../shared/reference/edgetpu.md §4.4): USB devices as
``/sys/bus/usb/devices/<bus-port>/idVendor,idProduct``, PCIe Edge TPUs as ``/dev/apex_N`` with
``/sys/class/apex/apex_N/temp`` in millidegrees C. They only test our reading of those files.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from edgekit.cli.app import cli
from edgekit.devices import discovery as D


def fake_usb(sys_root: Path, name: str, vendor: str, product: str) -> None:
    d = sys_root / "bus" / "usb" / "devices" / name
    d.mkdir(parents=True)
    (d / "idVendor").write_text(vendor + "\n")
    (d / "idProduct").write_text(product + "\n")


def fake_apex(sys_root: Path, dev_root: Path, n: int, temp: str | None = None, node: bool = True) -> None:
    cls = sys_root / "class" / "apex" / f"apex_{n}"
    cls.mkdir(parents=True)
    if temp is not None:
        (cls / "temp").write_text(temp + "\n")
    if node:
        dev_root.mkdir(exist_ok=True)
        (dev_root / f"apex_{n}").write_text("")


def test_usb_accelerators_before_and_after_firmware(tmp_path):
    sys_root = tmp_path / "sys"
    fake_usb(sys_root, "usb1", "1d6b", "0002")  # root hub
    fake_usb(sys_root, "2-1", "18d1", "9302")  # Edge TPU, firmware loaded
    fake_usb(sys_root, "1-1.2", "046d", "c52b")  # a mouse
    fake_usb(sys_root, "1-1", "1a6e", "089a")  # Edge TPU, fresh from the box
    (sys_root / "bus" / "usb" / "devices" / "1-1:1.0").mkdir()  # an interface: no idVendor
    found = D.usb_devices(sys_root)
    assert [(d.device, Path(d.path).name, d.usb_id) for d in found] == [
        ("usb:0", "1-1", "1a6e:089a"),
        ("usb:1", "2-1", "18d1:9302"),
    ]
    assert "firmware not loaded" in found[0].state and found[1].state == "ready"


def test_pcie_edge_tpus_with_temperature(tmp_path):
    sys_root, dev_root = tmp_path / "sys", tmp_path / "dev"
    fake_apex(sys_root, dev_root, 0, temp="41250")
    fake_apex(sys_root, dev_root, 1, temp="garbage")
    fake_apex(sys_root, dev_root, 2, node=False)  # the driver sees it, udev made no node
    found = D.pci_devices(sys_root, dev_root)
    assert [(d.device, d.path, d.temperature_c) for d in found] == [
        ("pci:0", str(dev_root / "apex_0"), 41.25),
        ("pci:1", str(dev_root / "apex_1"), None),
        ("pci:2", str(dev_root / "apex_2"), None),
    ]
    assert found[0].state == "ready" and "missing" in found[2].state


def test_no_trees_no_devices(tmp_path):
    assert D.list_devices(tmp_path / "nothing", tmp_path / "nodev", use_pycoral=False) == []


def test_list_devices_puts_usb_before_pcie(tmp_path):
    sys_root, dev_root = tmp_path / "sys", tmp_path / "dev"
    fake_apex(sys_root, dev_root, 0, temp="38000")
    fake_usb(sys_root, "3-2", "18d1", "9302")
    found = D.list_devices(sys_root, dev_root, use_pycoral=False)
    assert [d.device for d in found] == ["usb:0", "pci:0"]
    assert set(found[1].to_dict()) == {"type", "path", "device", "state", "usb_id", "temperature_c", "source"}


def test_devices_command_json_schema():
    result = CliRunner().invoke(cli, ["devices", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert list(doc) == ["devices"]
    for d in doc["devices"]:
        assert set(d) == {"type", "path", "device", "state", "usb_id", "temperature_c", "source"}


def test_devices_command_on_a_fake_machine_with_two_edge_tpus(tmp_path, monkeypatch):
    """The command as a user reads it, with discovery pointed at a stand-in tree (USB + PCIe)."""
    sys_root, dev_root = tmp_path / "sys", tmp_path / "dev"
    fake_usb(sys_root, "2-1", "1a6e", "089a")
    fake_apex(sys_root, dev_root, 0, temp="47500")
    real = D.list_devices
    monkeypatch.setattr(D, "list_devices", lambda: real(sys_root, dev_root, use_pycoral=False))
    text = CliRunner().invoke(cli, ["devices"])
    assert text.exit_code == 0, text.output
    usb, pci = text.stdout.splitlines()
    assert usb.split()[:2] == ["usb:0", str(sys_root / "bus/usb/devices/2-1")] and "id 1a6e:089a" in usb
    assert "firmware not loaded" in usb
    assert pci.split()[:3] == ["pci:0", str(dev_root / "apex_0"), "ready"] and "47.5 C" in pci
    doc = json.loads(CliRunner().invoke(cli, ["devices", "--json"]).stdout)
    assert [(d["device"], d["usb_id"], d["temperature_c"]) for d in doc["devices"]] == [
        ("usb:0", "1a6e:089a", None),
        ("pci:0", None, 47.5),
    ]
