"""Strategy resolution: a TPU address where no TPU answers falls through to the next strategy, with its reason.

No network is used: the "TPU" is a closed port on 127.0.0.1, or a local socket that accepts the connection
while TensorFlow's connect call is made to fail the way it was seen failing (UnimplementedError "Received
http2 header with status: 404" from an address where something other than a TPU answers).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from PIL import Image

from edgekit.training.strategy import probe_address, split_host_port

REPO = Path(__file__).resolve().parents[2]


def _closed_port() -> int:
    """A port on 127.0.0.1 where nothing listens (bound, then closed; nothing else takes it that fast)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tiny_classes(root: Path) -> Path:
    """Two class folders of eight 8x8 images each: enough for one quick epoch."""
    for k in range(2):
        (root / f"c{k}").mkdir(parents=True)
        for i in range(8):
            Image.new("RGB", (8, 8), (200 * k, 20 * i, 0)).save(root / f"c{k}" / f"{i}.png")
    return root


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLAB_TPU_ADDR", "TPU_NAME", "TF_CONFIG")}
    env.update(PYTHONPATH=str(REPO), **extra)
    return env


def test_split_host_port():
    assert split_host_port("grpc://10.0.0.2:8470") == ("10.0.0.2", 8470)
    assert split_host_port("10.0.0.2:8470") == ("10.0.0.2", 8470)
    assert split_host_port("grpc://[fe80::1]:8470") == ("fe80::1", 8470)
    assert split_host_port("local") is None and split_host_port("my-tpu") is None


def test_probe_says_nothing_answers_at_a_closed_port_and_passes_a_listening_one():
    port = _closed_port()
    start = time.monotonic()
    why = probe_address(f"127.0.0.1:{port}")
    assert why == f"nothing answers at 127.0.0.1:{port} (Connection refused)"
    assert time.monotonic() - start < 2
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        assert probe_address(f"127.0.0.1:{server.getsockname()[1]}") is None
    assert probe_address("my-tpu") is None  # a TPU name: left to the resolver


# The child process: a local socket accepts TCP (so the address looks alive), and the C call TensorFlow's
# eager context makes to connect to the cluster raises what it raised for COLAB_TPU_ADDR=10.255.255.1:8470
# in the audit (context.py ensure_initialized -> TFE_ContextSetServerDefWithTimeoutAndRetries). Before the
# fix, the context stayed pointed at the "TPU" and `edgekit train` died with exit 70 on listing the devices.
REPOINTED = r"""
import os, socket, sys
from tensorflow.python import pywrap_tfe
from tensorflow.python.framework import errors

server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen()
os.environ["COLAB_TPU_ADDR"] = "127.0.0.1:%d" % server.getsockname()[1]
calls = []

def refuse(*args, **kwargs):
    calls.append(1)
    raise errors.UnimplementedError(None, None, "Received http2 header with status: 404\nAdditional GRPC error "
                                    "information from remote target /job:worker/replica:0/task:0")

pywrap_tfe.TFE_ContextSetServerDefWithTimeoutAndRetries = refuse
from edgekit.cli import main
try:
    main(sys.argv[1:])
finally:
    print("CONNECT CALLS %d" % len(calls), file=sys.stderr)
"""


@pytest.mark.tf
def test_train_falls_through_when_the_tpu_connect_fails_after_repointing_tensorflow(tmp_path):
    data = _tiny_classes(tmp_path / "data")
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            REPOINTED,
            "train",
            str(data),
            "-o",
            str(tmp_path / "m.keras"),
            "--epochs",
            "1",
            "--batch-size",
            "4",
            "--json",
            "-q",
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
        env=_env(),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "CONNECT CALLS 1" in proc.stderr  # the failing connect was really attempted, once
    doc = json.loads(proc.stdout)
    assert doc["strategy"]["kind"] == "default" and doc["strategy"]["replicas"] == 1
    first = doc["strategy"]["tried"][0]
    assert first.startswith("no TPU at grpc://127.0.0.1:") and "(from COLAB_TPU_ADDR)" in first, first
    assert first.endswith(": Received http2 header with status: 404"), first
    assert doc["strategy"]["tried"][1] == "no multi-worker cluster: TF_CONFIG is not set"
    assert (tmp_path / "m.keras").is_file()


@pytest.mark.tf
def test_train_with_colab_tpu_addr_at_a_closed_port_trains_on_the_default_strategy(tmp_path):
    """Real TensorFlow, no stand-in: before the fix it retried the closed port without end (a hang)."""
    data = _tiny_classes(tmp_path / "data")
    port = _closed_port()
    try:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "edgekit",
                "train",
                str(data),
                "-o",
                str(tmp_path / "m.keras"),
                "--epochs",
                "1",
                "--batch-size",
                "4",
                "--json",
                "-q",
            ],
            check=False,
            capture_output=True,
            text=True,
            timeout=240,
            env=_env(COLAB_TPU_ADDR=f"127.0.0.1:{port}"),
        )
    except subprocess.TimeoutExpired:
        pytest.fail("edgekit train hung on a TPU address where nothing listens")
    assert proc.returncode == 0, proc.stderr[-3000:]
    strategy = json.loads(proc.stdout)["strategy"]
    assert strategy["kind"] == "default"
    assert strategy["tried"][0] == (
        f"no TPU at grpc://127.0.0.1:{port} (from COLAB_TPU_ADDR): "
        f"nothing answers at 127.0.0.1:{port} (Connection refused)"
    )
