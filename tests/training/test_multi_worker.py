"""edgekit train across several workers (TF_CONFIG): real processes on loopback ports, as on real machines.

Two workers train one model; only the chief writes it, and the model quantizes and classifies.
A cluster whose other worker never starts ends in bounded time with one line (exit 9), and a
TF_CONFIG that cannot be right is exit 2 before anything starts.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO

pytestmark = [pytest.mark.tf, pytest.mark.slow]


def _free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def _tf_config(ports: list[int], index: int) -> str:
    return json.dumps(
        {"cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]}, "task": {"type": "worker", "index": index}}
    )


def _train(data, output, tf_config: str, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO), "TF_CONFIG": tf_config}
    return subprocess.Popen(
        [sys.executable, "-m", "edgekit", "train", str(data), "-o", str(output), *extra],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_two_workers_train_one_model_that_the_chief_writes(digits_folders, tmp_path):
    ports = _free_ports(2)
    chief_out, worker_out = tmp_path / "chief", tmp_path / "worker"
    runs = [
        _train(digits_folders.train, folder / "m.keras", _tf_config(ports, i), "--epochs", "3", "--json", "-q")
        for i, folder in enumerate((chief_out, worker_out))
    ]
    results = [p.communicate(timeout=600) for p in runs]
    for p, (_, err) in zip(runs, results):
        assert p.returncode == 0, err
    chief, worker = (json.loads(out) for out, _ in results)
    assert chief["strategy"]["kind"] == worker["strategy"]["kind"] == "multi_worker"
    assert chief["strategy"]["replicas"] == 2 and chief["global_batch"] == 64
    assert chief["strategy"]["chief"] and not worker["strategy"]["chief"]
    # one model: both workers saw the same synchronized training
    assert [e["accuracy"] for e in chief["epochs"]] == [e["accuracy"] for e in worker["epochs"]]
    assert chief["validation_accuracy"] > 0.8
    assert sorted(p.name for p in chief_out.iterdir()) == ["m.edgekit.json", "m.keras"]
    assert worker["output"] is None and not worker_out.exists()  # nothing the user sees, not even the folder
    # the chief's model goes on as any trained model: quantize with no flags, then classify
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("TF_CONFIG", None)
    q = subprocess.run(
        [sys.executable, "-m", "edgekit", "quantize", str(chief_out / "m.keras"), "--json", "-q"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert q.returncode == 0, q.stderr
    assert json.loads(q.stdout)["verification"]["passed"]
    image = sorted((digits_folders.test / "4").glob("*.png"))[0]
    c = subprocess.run(
        [
            sys.executable,
            "-m",
            "edgekit",
            "classify",
            str(image),
            "-m",
            str(chief_out / "m_int8.tflite"),
            "-k",
            "1",
            "--json",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert c.returncode == 0, c.stderr
    assert json.loads(c.stdout)["results"][0]["top"][0]["label"] == "4"


def test_a_worker_that_never_comes_up_ends_the_run_in_bounded_time(digits_folders, tmp_path):
    ports = _free_ports(2)
    start = time.monotonic()
    run = _train(
        digits_folders.train, tmp_path / "m.keras", _tf_config(ports, 0), "--epochs", "1", "--worker-timeout", "5"
    )
    _, err = run.communicate(timeout=120)
    assert run.returncode == 9, err
    assert time.monotonic() - start < 60
    lines = [ln for ln in err.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1 and f"heard nothing from 127.0.0.1:{ports[1]}" in lines[0] and "--worker-timeout" in lines[0]
    assert "Traceback" not in err and not (tmp_path / "m.keras").exists()


@pytest.mark.parametrize(
    "tf_config, says",
    [
        (
            '{"cluster": {"worker": ["127.0.0.1:1"]}, "task": {"type": "worker", "index": 3}}',
            "task index 3 is out of range",
        ),
        ("{not json", "is not JSON"),
        ('{"task": {"type": "worker", "index": 0}}', "has no 'cluster' object"),
        ('{"cluster": {"worker": ["nohostport"]}, "task": {"type": "worker", "index": 0}}', "not a list of host:port"),
    ],
)
def test_a_tf_config_that_cannot_be_right_is_a_usage_error(digits_folders, tmp_path, tf_config, says):
    _, err = (run := _train(digits_folders.train, tmp_path / "m.keras", tf_config)).communicate(timeout=120)
    assert run.returncode == 2 and says in err and err.count("\n") == 1, err
