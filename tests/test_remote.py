"""deploy, classify --on through a real OpenSSH server on 127.0.0.1, with a Python 3.7 venv as the board's python3.

One sshd per session (its own host key, authorized key and config in a temporary folder, on a free
port, stopped after) and one deployed bundle of Coral's real MobileNet, reused by every test.
The board's ``python3`` is .venv-py37 (Python 3.7, numpy<1.22, Pillow, tflite-runtime 2.7.0, as on
a Coral Dev Board; ``make venv-py37``) when it exists, else this test run's own Python.
"""

from __future__ import annotations

import json
import os
import pwd
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from edgekit.board import runner as board_runner
from edgekit.board.preprocess import spec_from_input_quantization
from edgekit.cli.app import cli
from tests.conftest import REPO, SSHD, shared_file
from tests.helpers import default_stop_signals, make_bundle

pytestmark = pytest.mark.remote

PY37 = Path(os.environ.get("EDGEKIT_TARGET_PYTHON", REPO / ".venv-py37" / "bin" / "python"))
TARGET_PYTHON = PY37 if PY37.is_file() else Path(sys.executable)
MODEL = "mobilenet_v1_0.25_128_quant"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _keygen(path: Path) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f", str(path)], check=True)
    return path


@pytest.fixture(scope="session")
def sshd(tmp_path_factory):
    """A real OpenSSH server on 127.0.0.1 letting this user in with ``key`` only."""
    d = tmp_path_factory.mktemp("sshd")
    host_key, key, wrong_key = _keygen(d / "host_key"), _keygen(d / "client_key"), _keygen(d / "wrong_key")
    (d / "authorized_keys").write_text(Path(f"{key}.pub").read_text())
    port = _free_port()
    python3_port = next(p for p in iter(_free_port, None) if p != port)
    user = pwd.getpwuid(os.getuid()).pw_name
    # On python3_port the login's `python3` is the board's Python (a wrapper first on PATH, set after the
    # login shell's rc files, which may put another python3 first), so --python can be left at its default.
    wrappers = d / "bin"
    wrappers.mkdir()
    (wrappers / "python3").write_text(f'#!/bin/sh\nexec {TARGET_PYTHON} "$@"\n')
    (wrappers / "python3").chmod(0o755)
    (d / "sshd_config").write_text(f"""\
Port {port}
Port {python3_port}
ListenAddress 127.0.0.1
HostKey {host_key}
PidFile none
AuthorizedKeysFile {d / "authorized_keys"}
AllowUsers {user}
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
StrictModes no
UsePAM no
Match LocalPort {python3_port}
    ForceCommand PATH={wrappers}:$PATH; export PATH; exec /bin/sh -c "$SSH_ORIGINAL_COMMAND"
""")
    if os.getuid() == 0:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege separation folder
    log = open(d / "sshd.log", "wb")
    proc = subprocess.Popen(
        [SSHD, "-D", "-e", "-f", str(d / "sshd_config")], stdout=log, stderr=log, preexec_fn=default_stop_signals
    )  # its sessions' runners are stopped by signals
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"sshd did not start: {(d / 'sshd.log').read_text()}")
            time.sleep(0.05)
    known_hosts = d / "known_hosts"
    known_hosts.write_text(
        f"[127.0.0.1]:{port} {Path(f'{host_key}.pub').read_text()}"
        f"[127.0.0.1]:{python3_port} {Path(f'{host_key}.pub').read_text()}"
    )
    yield SimpleNamespace(
        port=port,
        python3_port=python3_port,
        user=user,
        key=key,
        wrong_key=wrong_key,
        known_hosts=known_hosts,
        dir=d,
        destination=f"{user}@127.0.0.1",
    )
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


@pytest.fixture(autouse=True)
def _no_agent(monkeypatch):
    """Only the keys a test names: no ssh-agent of whoever runs the tests."""
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)


def ssh_args(sshd, remote_path: Path, *extra: str, identity: bool = True, python: bool = True) -> list[str]:
    # --python: the login shell's own rc files may put another python3 first on PATH
    # (test_default_python3_is_the_logins tests the default on sshd.python3_port)
    return [
        "--port",
        str(sshd.port),
        *(["--identity", str(sshd.key)] if identity else []),
        "--known-hosts",
        str(sshd.known_hosts),
        "--path",
        str(remote_path),
        *(["--python", str(TARGET_PYTHON)] if python else []),
        *extra,
    ]


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


@pytest.fixture(scope="session")
def deployed(sshd, tmp_path_factory):
    """The MobileNet bundle deployed once: SimpleNamespace(bundle, remote_path, first (deploy's JSON))."""
    bundle = make_bundle(tmp_path_factory.mktemp("bundle") / "mobilenet")
    remote_path = tmp_path_factory.mktemp("board") / "edgekit"
    result = invoke("deploy", str(bundle), "--to", sshd.destination, *ssh_args(sshd, remote_path), "--json")
    assert result.exit_code == 0, result.output
    return SimpleNamespace(bundle=bundle, remote_path=remote_path, first=json.loads(result.stdout))


# ------------------------------------------------------------------------------------ deploy
def test_deploy_copies_the_bundle_and_runner_then_only_what_changed(sshd, deployed):
    first = deployed.first
    shipped = {f"runtime/{m}" for m in board_runner.SHIPPED_MODULES}
    bundle_files = {
        f"bundles/mobilenet/{n}" for n in ("manifest.json", f"{MODEL}.tflite", f"{MODEL}_edgetpu.tflite", "labels.txt")
    }
    assert set(first["uploaded"]) == shipped | bundle_files and first["unchanged"] == 0
    assert first["python"].startswith("3.7.") or TARGET_PYTHON != PY37
    assert first["interpreter"] in ("tflite_runtime", "ai_edge_litert")
    for rel in bundle_files:  # byte-identical on the "board"
        local = deployed.bundle / rel.split("/", 2)[2]
        assert (deployed.remote_path / rel).read_bytes() == local.read_bytes()

    again = invoke(
        "deploy", str(deployed.bundle), "--to", sshd.destination, *ssh_args(sshd, deployed.remote_path), "--json"
    )
    assert again.exit_code == 0, again.output
    doc = json.loads(again.stdout)
    assert doc["uploaded"] == [] and doc["deleted"] == [] and doc["bytes_sent"] == 0
    assert doc["unchanged"] == len(shipped | bundle_files)


def test_deploy_replaces_a_changed_file_and_removes_a_stray_one(sshd, tmp_path):
    bundle = make_bundle(tmp_path / "b")
    remote_path = tmp_path / "board"
    args = ["deploy", str(bundle), "--to", sshd.destination, *ssh_args(sshd, remote_path), "--json"]
    assert invoke(*args).exit_code == 0
    there = remote_path / "bundles" / "b"
    (there / "labels.txt").write_text("tampered\n")
    (there / "stray.bin").write_bytes(b"x")
    doc = json.loads(invoke(*args).stdout)
    assert doc["uploaded"] == ["bundles/b/labels.txt"] and doc["deleted"] == ["bundles/b/stray.bin"]
    assert (there / "labels.txt").read_bytes() == (bundle / "labels.txt").read_bytes()
    assert not (there / "stray.bin").exists()


# ------------------------------------------------------------------------------------ classify --on
def _classify_both(sshd, deployed, images, python, *args):
    local = invoke("classify", *images, "-m", str(deployed.bundle), "--json", *args)
    assert local.exit_code == 0, local.output
    remote = invoke(
        "classify",
        *images,
        "--on",
        sshd.destination,
        "-m",
        str(deployed.bundle),
        *ssh_args(sshd, deployed.remote_path),
        "--python",
        str(python),
        "--json",
        *args,
    )
    assert remote.exit_code == 0, remote.output
    return json.loads(local.stdout), json.loads(remote.stdout), remote


def test_classify_on_the_board_equals_the_local_run(sshd, deployed):
    """With the same interpreter package at both ends (this Python as the board's), the very same results."""
    images = [str(shared_file("cat.bmp")), str(shared_file("grace_hopper.bmp"))]
    ours, theirs, remote = _classify_both(sshd, deployed, images, sys.executable, "-k", "3")
    assert set(theirs) == set(ours)
    assert [r["image"] for r in theirs["results"]] == images
    assert [r["top"] for r in theirs["results"]] == [r["top"] for r in ours["results"]]
    assert theirs["results"][0]["top"][0]["label"] == "tiger cat"
    assert theirs["backend"] == ours["backend"]
    assert theirs["device"] == f"cpu on {sshd.destination}"  # no Edge TPU here: the CPU model, said so
    assert theirs["model"] == f"{sshd.destination}:{deployed.remote_path}/bundles/mobilenet/{MODEL}.tflite"
    notes = [line for line in remote.stderr.splitlines() if "note:" in line]
    assert all(line.startswith("note: ") and line.count("note:") == 1 for line in notes), notes  # not "note: note: "
    assert any(line.startswith("note: running the CPU model") for line in notes), notes


def test_every_class_is_the_same_answer_here_and_on_the_board(sshd, deployed):
    """top_k=None keeps every class on the host, and on the board alike (the host sends the runner --top-k all)."""
    import edgekit
    from edgekit.devices.remote import SshTarget

    images = [str(shared_file("cat.bmp"))]
    on = SshTarget(
        sshd.destination,
        port=sshd.port,
        identity=str(sshd.key),
        known_hosts=str(sshd.known_hosts),
        python=sys.executable,
    )
    here = edgekit.classify(images, model=deployed.bundle, top_k=None)
    there = edgekit.classify(images, model=deployed.bundle, top_k=None, on=on, remote_path=str(deployed.remote_path))
    assert len(here.results[0].top) == 1001  # every class of the MobileNet
    assert [r.top for r in there.results] == [r.top for r in here.results]


def test_classify_on_prints_each_note_once_as_a_local_run_does(sshd, deployed):
    """The runner's `note: ...` lines reach the terminal with one `note: `, as the same local run's notes do."""
    image = str(shared_file("cat.bmp"))
    local = invoke("classify", image, "-m", str(deployed.bundle))
    remote = invoke(
        "classify", image, "--on", sshd.destination, "-m", str(deployed.bundle), *ssh_args(sshd, deployed.remote_path)
    )
    assert local.exit_code == 0 and remote.exit_code == 0, remote.output
    fallback = [line for line in remote.stderr.splitlines() if "running the CPU model" in line]
    assert len(fallback) == 1 and fallback[0].startswith("note: running the CPU model "), remote.stderr
    assert "note: note:" not in remote.stderr
    ours = [line for line in local.stderr.splitlines() if "running the CPU model" in line]
    assert len(ours) == 1 and ours[0].startswith("note: running the CPU model ")  # the same form


def test_classify_on_python37_feeds_the_same_tensor(sshd, deployed, tmp_path):
    """On the Python 3.7 board: the runner's scores are exactly tflite-runtime 2.7's on edgekit's local input tensor.

    (Different TFLite versions round int8 kernels differently: 2.7 and LiteRT's scores may differ by a few
    quanta, so the equality is checked against the board's own interpreter, on the locally made tensor.)
    """
    if TARGET_PYTHON != PY37:
        pytest.skip(f"no Python 3.7 board venv ({PY37}): make venv-py37 (needs a python3.7, e.g. pyenv install 3.7.16)")
    import numpy as np

    from edgekit.board import preprocess

    images = [str(shared_file("cat.bmp")), str(shared_file("grace_hopper.bmp"))]
    ours, theirs, remote = _classify_both(sshd, deployed, images, PY37, "-k", "5")
    assert [r["top"][0]["id"] for r in theirs["results"]] == [r["top"][0]["id"] for r in ours["results"]]
    assert theirs["backend"] == "tflite_runtime" and "is up to date (Python 3.7.16" in remote.stderr
    spec = spec_from_input_quantization(128, 128, 3, "uint8", 0.0078125, 128)
    for i, image in enumerate(images):
        np.save(tmp_path / f"{i}.npy", preprocess.prepare(preprocess.open_image(image), spec, "uint8", 0.0078125, 128))
    code = (
        "import sys, json, numpy as np\nfrom tflite_runtime.interpreter import Interpreter\n"
        "it = Interpreter(sys.argv[1]); it.allocate_tensors(); out = []\n"
        "for p in sys.argv[2:]:\n"
        "    it.set_tensor(it.get_input_details()[0]['index'], np.load(p)); it.invoke()\n"
        "    out.append(it.get_tensor(it.get_output_details()[0]['index']).ravel().tolist())\n"
        "print(json.dumps(out))"
    )
    proc = subprocess.run(
        [
            str(PY37),
            "-c",
            code,
            str(deployed.bundle / f"{MODEL}.tflite"),
            *[str(tmp_path / f"{i}.npy") for i in range(len(images))],
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    for raw, result in zip(json.loads(proc.stdout), theirs["results"]):
        scores = 0.00390625 * np.asarray(raw, np.float64)  # the output's scale, zero point 0
        best = np.argsort(-scores, kind="stable")[:5]
        assert [(t["id"], t["score"]) for t in result["top"]] == [(int(i), float(scores[i])) for i in best]


# Different TFLite builds (tflite-runtime 2.7 on the 3.7 board, LiteRT here) round the uint8 kernels of
# Coral's MobileNet differently: at most 5 output quanta apart on the three test images (cat: 0.265625
# here, 0.28125 there). The bound asserted, in quanta of the model's output scale:
CROSS_VERSION_QUANTA = 8


def test_classify_on_python37_scores_within_a_few_quanta_of_the_local_run(sshd, deployed):
    """Python 3.7 board (tflite-runtime 2.7.0) vs this machine's interpreter, every one of the 1001 scores.

    What holds: the same top-1 class, the same classes, and each class's score within CROSS_VERSION_QUANTA
    output quanta; ranks whose scores are that close may swap (mnist_nine's 4th and 5th do).
    """
    if TARGET_PYTHON != PY37:
        pytest.skip(f"no Python 3.7 board venv ({PY37}): make venv-py37 (needs a python3.7, e.g. pyenv install 3.7.16)")
    from edgekit.tflite import model as tflite_model

    output = tflite_model.load(deployed.bundle / f"{MODEL}.tflite").outputs[0].quantization
    assert output.zero_point == 0 and output.scale == 1 / 256
    images = [str(shared_file(n)) for n in ("cat.bmp", "grace_hopper.bmp", "mnist_nine.bmp")]
    ours, theirs, remote = _classify_both(sshd, deployed, images, PY37, "-k", "1001")
    assert theirs["backend"] == "tflite_runtime"
    worst = 0.0
    for here, there in zip(ours["results"], theirs["results"]):
        assert here["image"] == there["image"] and here["top"][0]["id"] == there["top"][0]["id"]
        ours_by_id = {t["id"]: t["score"] for t in here["top"]}
        theirs_by_id = {t["id"]: t["score"] for t in there["top"]}
        assert len(ours_by_id) == 1001 and set(theirs_by_id) == set(ours_by_id)
        quanta = [abs(theirs_by_id[i] - s) / output.scale for i, s in ours_by_id.items()]
        assert all(q == round(q) for q in quanta)  # both are whole quanta of the same scale
        worst = max(worst, max(quanta))
    assert worst <= CROSS_VERSION_QUANTA, f"{worst:g} quanta apart"


def test_classify_on_applies_the_recorded_preprocessing(sshd, tmp_path):
    """A bundle recording mean/std 127.5 (the float path of the one preprocessing), run here and there."""
    bundle = make_bundle(tmp_path / "scaled", mean=(127.5,), std=(127.5,))
    image = str(shared_file("grace_hopper.bmp"))
    local = invoke("classify", image, "-m", str(bundle), "--json")
    remote = invoke(
        "classify",
        image,
        "--on",
        sshd.destination,
        "-m",
        str(bundle),
        *ssh_args(sshd, tmp_path / "board"),
        "--python",
        sys.executable,
        "--json",
        "--device",
        "cpu",
    )
    assert local.exit_code == 0 and remote.exit_code == 0, remote.output
    ours, theirs = json.loads(local.stdout)["results"], json.loads(remote.stdout)["results"]
    assert theirs[0]["top"] == ours[0]["top"]
    default = invoke("classify", image, "-m", str(bundle / f"{MODEL}.tflite"), "--json")
    assert json.loads(default.stdout)["results"][0]["top"] != theirs[0]["top"]  # the spec made a difference


def test_classify_on_reports_a_bad_image_and_goes_on(sshd, deployed, tmp_path):
    bad = tmp_path / "broken.jpg"
    bad.write_bytes(b"not an image")
    good = str(shared_file("cat.bmp"))
    result = invoke(
        "classify",
        str(bad),
        good,
        str(tmp_path / "missing.png"),
        "--on",
        sshd.destination,
        "-m",
        str(deployed.bundle),
        *ssh_args(sshd, deployed.remote_path),
        "--json",
    )
    assert result.exit_code == 3
    doc = json.loads(result.stdout)
    assert [r["image"] for r in doc["results"]] == [good]
    assert [e["image"] for e in doc["errors"]] == [str(tmp_path / "missing.png"), str(bad)]
    assert doc["errors"][1]["error"].startswith(f"{bad}: ")
    assert [line for line in result.stderr.splitlines() if line.startswith("error: ")] == [  # one line per image
        f"error: {e['error']}" for e in doc["errors"]
    ]


# ------------------------------------------------------------------------------------ benchmark --on
def test_benchmark_on_the_board_has_the_local_schema(sshd, deployed, tmp_path):
    local = invoke("benchmark", "-m", str(deployed.bundle), "-n", "20", "--warmup", "2", "--json")
    assert local.exit_code == 0, local.output
    saved = tmp_path / "board.json"
    remote = invoke(
        "benchmark",
        "--on",
        sshd.destination,
        "-m",
        str(deployed.bundle),
        *ssh_args(sshd, deployed.remote_path),
        "-n",
        "20",
        "--warmup",
        "2",
        "--threads",
        "1",
        "--json",
        "--save",
        str(saved),
    )
    assert remote.exit_code == 0, remote.output
    ours, theirs = json.loads(local.stdout), json.loads(remote.stdout)
    assert set(theirs) == set(ours) and set(theirs["machine"]) == set(ours["machine"])
    assert theirs["device"] == f"cpu on {sshd.destination}" and theirs["threads"] == 1
    assert theirs["model"] == f"{sshd.destination}:{deployed.remote_path}/bundles/mobilenet/{MODEL}.tflite"
    assert theirs["backend"] == ("tflite_runtime" if TARGET_PYTHON == PY37 else ours["backend"])
    assert len(theirs["latencies_ms"]) == theirs["count"] == theirs["iterations"] == 20 and theirs["warmup"] == 2
    assert theirs["min_ms"] <= theirs["p50_ms"] <= theirs["p90_ms"] <= theirs["p99_ms"] <= theirs["max_ms"]
    assert theirs["min_ms"] == min(theirs["latencies_ms"]) > 0 and theirs["load_ms"] > 0
    assert any("running the CPU model" in n for n in theirs["notes"])
    assert json.loads(saved.read_text())["p50_ms"] == theirs["p50_ms"]  # --save works as locally


# ------------------------------------------------------------------------------------ errors
def _one_error_line(result, code: int) -> str:
    assert result.exit_code == code, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def test_unknown_host_key_is_refused_unless_accepted(sshd, deployed, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    args = [
        "deploy",
        str(deployed.bundle),
        "--to",
        sshd.destination,
        *ssh_args(sshd, deployed.remote_path),
        "--known-hosts",
        str(empty),
    ]
    line = _one_error_line(invoke(*args), 9)
    assert "is not in" in line and "--accept-new-host-key" in line
    assert invoke(*args, "--accept-new-host-key").exit_code == 0
    host_key = Path(f"{sshd.dir / 'host_key'}.pub").read_text().split()[1]
    assert host_key in empty.read_text()  # recorded (Debian's ssh hashes the host name): the next run needs no flag
    assert invoke(*args).exit_code == 0


def _forget_command(line: str) -> list[str]:
    """The ssh-keygen command the changed-host-key hint gives, as argv."""
    import re
    import shlex

    found = re.search(r"remove the old key with (ssh-keygen .*?) and connect again", line)
    assert found, line
    return shlex.split(found.group(1))


def test_changed_host_key_is_refused_even_with_accept_new(sshd, deployed, tmp_path):
    """Refused, and the ssh-keygen command the hint gives, run as given, removes the old key ([host]:port)."""
    other = _keygen(tmp_path / "other_host_key")
    changed = tmp_path / "known_hosts"
    changed.write_text(f"[127.0.0.1]:{sshd.port} {Path(f'{other}.pub').read_text()}")
    args = [
        "deploy",
        str(deployed.bundle),
        "--to",
        sshd.destination,
        *ssh_args(sshd, deployed.remote_path),
        "--known-hosts",
        str(changed),
        "--accept-new-host-key",
    ]
    line = _one_error_line(invoke(*args), 9)
    assert "CHANGED" in line
    command = _forget_command(line)
    assert command == ["ssh-keygen", "-R", f"[127.0.0.1]:{sshd.port}", "-f", str(changed)]
    subprocess.run(command, check=True, capture_output=True)
    assert Path(f"{other}.pub").read_text().split()[1] not in changed.read_text()  # the old key is gone
    assert invoke(*args).exit_code == 0  # so the board's key can be recorded again


@pytest.mark.parametrize("port", [None, 22, 2222])
@pytest.mark.parametrize("hashed", [False, True])
def test_changed_host_key_hint_removes_the_entry_on_any_port(tmp_path, port, hashed):
    """known_hosts names port 22 as `host`, any other port as `[host]:port`: the hint's command removes either."""
    from edgekit.devices.remote import SshTarget, explain_ssh_failure

    key = Path(f"{_keygen(tmp_path / 'host_key')}.pub").read_text().split()
    known = tmp_path / "known_hosts"
    name = "192.168.100.2" if port in (None, 22) else f"[192.168.100.2]:{port}"
    known.write_text(f"{name} {key[0]} {key[1]}\n[192.168.100.2]:2200 {key[0]} {key[1]}\n")
    if hashed:  # as Debian's ssh writes them (HashKnownHosts yes)
        subprocess.run(["ssh-keygen", "-H", "-f", str(known)], check=True, capture_output=True)
    target = SshTarget("mendel@192.168.100.2", port=port, known_hosts=str(known))
    stderr = (
        "@@@@@@@@@@@\n@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\n@@@@@@@@@@@\n"
        "Host key for 192.168.100.2 has changed and you have requested strict checking.\n"
        "Host key verification failed.\n"
    )
    error = explain_ssh_failure(stderr, target)
    assert f"192.168.100.2 port {port or 22} has CHANGED" in str(error)
    command = _forget_command(str(error))
    assert command[:3] == ["ssh-keygen", "-R", name]
    subprocess.run(command, check=True, capture_output=True)
    lookup = ["ssh-keygen", "-F", name, "-f", str(known)]
    assert subprocess.run(lookup, capture_output=True).returncode == 1  # gone
    other = ["ssh-keygen", "-F", "[192.168.100.2]:2200", "-f", str(known)]
    assert subprocess.run(other, capture_output=True).returncode == 0  # another port's entry stays
    default = explain_ssh_failure(stderr, SshTarget("mendel@192.168.100.2", port=port))
    assert _forget_command(str(default)) == ["ssh-keygen", "-R", name]  # ~/.ssh/known_hosts: ssh-keygen's default


def test_wrong_key_is_a_refused_login(sshd, deployed):
    line = _one_error_line(
        invoke(
            "classify",
            str(shared_file("cat.bmp")),
            "--on",
            sshd.destination,
            "-m",
            str(deployed.bundle),
            *ssh_args(sshd, deployed.remote_path),
            "--identity",
            str(sshd.wrong_key),
        ),
        9,
    )
    assert "refused the login" in line and "--identity" in line


def test_unreachable_host(sshd, deployed):
    closed = str(_free_port())
    line = _one_error_line(
        invoke(
            "deploy",
            str(deployed.bundle),
            "--to",
            sshd.destination,
            *ssh_args(sshd, deployed.remote_path),
            "--port",
            closed,
        ),
        9,
    )
    assert f"cannot reach 127.0.0.1 port {closed}" in line and "Connection refused" in line


def test_no_edge_tpu_on_the_board_is_one_line_with_a_hint_for_the_board(sshd, deployed):
    """`-d usb` (never falls back) on a board without the Edge TPU runtime: exit 9, checks to make there."""
    line = _one_error_line(
        invoke(
            "classify",
            str(shared_file("cat.bmp")),
            "--on",
            sshd.destination,
            "-m",
            str(deployed.bundle),
            *ssh_args(sshd, deployed.remote_path),
            "-d",
            "usb",
            "--quiet",
        ),
        9,
    )
    assert line.startswith(f"error: on {sshd.destination}: the Edge TPU runtime libedgetpu.so.1 ")
    assert "lsusb lists the USB Accelerator (1a6e:089a" in line and "libedgetpu1-std" in line
    assert "edgekit doctor" not in line  # edgekit does not run on the board


def test_connect_timeout_stops_a_board_that_never_answers(sshd, deployed):
    """A port that accepts the connection but never sends SSH's banner (as a hung board would): --connect-timeout
    ends it (not --timeout), exit 9, one line."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        port = silent.getsockname()[1]
        started = time.monotonic()
        result = invoke(
            "deploy",
            str(deployed.bundle),
            "--to",
            sshd.destination,
            *ssh_args(sshd, deployed.remote_path),
            "--port",
            str(port),
            "--connect-timeout",
            "2",
            "--timeout",
            "60",
        )
        elapsed = time.monotonic() - started
    line = _one_error_line(result, 9)
    assert line.startswith(f"error: cannot reach 127.0.0.1 port {port}: ") and "timed out" in line, line
    assert 1.5 <= elapsed < 2 + 5, elapsed  # waited for the banner for the connect timeout, then gave up


def test_connect_timeout_to_a_non_routable_address(deployed):
    """10.255.255.1 is never answered: within --connect-timeout plus a little, exit 9, one line (offline, the
    route's absence may be reported at once instead)."""
    started = time.monotonic()
    line = _one_error_line(
        invoke(
            "deploy", str(deployed.bundle), "--to", "mendel@10.255.255.1", "--connect-timeout", "2", "--timeout", "60"
        ),
        9,
    )
    assert time.monotonic() - started < 2 + 5
    assert line.startswith("error: cannot reach 10.255.255.1 port 22: "), line


def test_agent_authentication(sshd, deployed, tmp_path, monkeypatch):
    """No --identity: the key comes from a running ssh-agent (SSH_AUTH_SOCK), refused while the agent lacks it."""
    sock = tmp_path / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not sock.exists():
            assert agent.poll() is None and time.monotonic() < deadline, "ssh-agent did not start"
            time.sleep(0.05)
        monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))
        args = [
            "deploy",
            str(deployed.bundle),
            "--to",
            sshd.destination,
            *ssh_args(sshd, deployed.remote_path, identity=False),
            "--json",
        ]
        line = _one_error_line(invoke(*args), 9)
        assert "refused the login" in line  # the agent is empty: nothing else could log in
        subprocess.run(
            ["ssh-add", "-q", str(sshd.key)],
            check=True,
            capture_output=True,
            env={**os.environ, "SSH_AUTH_SOCK": str(sock)},
        )
        result = invoke(*args)
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["target"] == sshd.destination
    finally:
        agent.terminate()
        agent.wait(timeout=10)


def test_default_python3_is_the_logins(sshd, tmp_path):
    """Without --python, `python3` as the board's login finds it (here the board venv, first on its PATH)."""
    bundle = make_bundle(tmp_path / "m")
    args = [
        "--port",
        str(sshd.python3_port),
        "--identity",
        str(sshd.key),
        "--known-hosts",
        str(sshd.known_hosts),
        "--path",
        str(tmp_path / "board"),
    ]
    deployed = invoke("deploy", str(bundle), "--to", sshd.destination, *args, "--json")
    assert deployed.exit_code == 0, deployed.output
    doc = json.loads(deployed.stdout)
    assert doc["python"] == "%d.%d.%d" % board_python_version() and len(doc["uploaded"]) > 4
    image = str(shared_file("cat.bmp"))
    result = invoke("classify", image, "--on", sshd.destination, "-m", str(bundle), *args, "--json", "-k", "1")
    assert result.exit_code == 0, result.output
    assert f"is up to date (Python {doc['python']}" in result.stderr
    top = json.loads(result.stdout)["results"][0]["top"][0]
    assert top["label"] == "tiger cat"


def board_python_version() -> tuple[int, int, int]:
    code = "import sys; print('%d %d %d' % sys.version_info[:3])"
    out = subprocess.run([str(TARGET_PYTHON), "-c", code], capture_output=True, text=True, check=True).stdout
    return tuple(int(x) for x in out.split())


def test_target_without_python3(sshd, deployed):
    line = _one_error_line(
        invoke(
            "deploy",
            str(deployed.bundle),
            "--to",
            sshd.destination,
            *ssh_args(sshd, deployed.remote_path),
            "--python",
            "python3.99",
        ),
        9,
    )
    assert "has no python3.99" in line and "--python" in line


def test_target_without_an_interpreter_package(sshd, deployed, tmp_path):
    bare = tmp_path / "bare"  # a Python with nothing installed: no numpy, Pillow or interpreter package
    subprocess.run([str(TARGET_PYTHON), "-m", "venv", "--without-pip", str(bare)], check=True)
    line = _one_error_line(
        invoke(
            "deploy",
            str(deployed.bundle),
            "--to",
            sshd.destination,
            *ssh_args(sshd, tmp_path / "board"),
            "--python",
            str(bare / "bin" / "python"),
        ),
        9,
    )
    assert "lacks numpy, Pillow, an interpreter package (pycoral or tflite_runtime)" in line
    assert "apt-get install python3-pycoral" in line and "pip install numpy Pillow tflite-runtime" in line
    assert not (tmp_path / "board").exists()  # nothing copied to a board that cannot run it


def test_a_remote_step_that_hangs_is_stopped_by_timeout(sshd, deployed, tmp_path):
    slow = tmp_path / "slow-python"  # a "python" on the board that never answers
    slow.write_text("#!/bin/sh\nsleep 8\n")
    slow.chmod(0o755)
    started = time.monotonic()
    line = _one_error_line(
        invoke(
            "deploy",
            str(deployed.bundle),
            "--to",
            sshd.destination,
            *ssh_args(sshd, tmp_path / "board"),
            "--python",
            str(slow),
            "--timeout",
            "2",
        ),
        9,
    )
    assert "listing the target folder did not finish within 2 s" in line and "--timeout" in line
    assert time.monotonic() - started < 20


def test_tilde_path_is_the_login_home():
    from edgekit.devices.remote import _shell_path

    assert _shell_path("~/edge kit/runtime") == "~/'edge kit/runtime'" and _shell_path("a b") == "'a b'"


def test_ssh_options_need_on(deployed):
    result = invoke("classify", str(shared_file("cat.bmp")), "-m", str(deployed.bundle), "--port", "2222")
    assert result.exit_code == 2 and "need --on" in result.stderr


def test_deploy_refuses_a_changed_bundle_before_connecting(tmp_path):
    bundle = make_bundle(tmp_path / "b")
    (bundle / "labels.txt").write_text("edited\n")
    line = _one_error_line(invoke("deploy", str(bundle), "--to", "nobody@127.0.0.1", "--port", str(_free_port())), 3)
    assert "labels.txt has changed since the bundle was built" in line  # exit 3, not "cannot reach" (9)


# ------------------------------------------------------------------------------------ hostile paths and targets
@pytest.mark.parametrize("folder", ["with space", "it's %h 100%", "two  spaces %d"])
def test_known_hosts_path_is_taken_whole_by_ssh(sshd, deployed, tmp_path, folder):
    """A path with spaces or % reached ssh split at the space: a file planted at its first word authenticated a
    board whose real entry is a CHANGED key (rc 0), and --accept-new-host-key wrote to that other file."""
    other = _keygen(tmp_path / "other_host_key")
    real_key = Path(f"{sshd.dir / 'host_key'}.pub").read_text()
    (tmp_path / folder).mkdir()
    changed = tmp_path / folder / "known_hosts"
    changed.write_text(f"[127.0.0.1]:{sshd.port} {Path(f'{other}.pub').read_text()}")  # the board's key changed
    decoy = tmp_path / folder.split(" ")[0]  # what ssh used to read: the path up to its first space
    if decoy != tmp_path / folder:
        decoy.write_text(f"[127.0.0.1]:{sshd.port} {real_key}")
    args = [
        "deploy",
        str(deployed.bundle),
        "--to",
        sshd.destination,
        *ssh_args(sshd, deployed.remote_path),
        "--known-hosts",
        str(changed),
    ]
    assert "CHANGED" in _one_error_line(invoke(*args), 9)
    # a new board's key is recorded in the file named, not elsewhere
    empty = tmp_path / folder / "new_known_hosts"
    empty.write_text("")
    args[-1] = str(empty)
    assert invoke(*args, "--accept-new-host-key").exit_code == 0
    assert real_key.split()[1] in empty.read_text()
    assert not decoy.exists() or decoy.read_text() == f"[127.0.0.1]:{sshd.port} {real_key}"


def test_identity_path_with_spaces_and_percent_is_taken_whole(sshd, deployed, tmp_path):
    folder = tmp_path / "my keys 100%"
    folder.mkdir()
    key = folder / "id %h key"
    key.write_bytes(sshd.key.read_bytes())
    key.chmod(0o600)
    args = [
        "deploy",
        str(deployed.bundle),
        "--to",
        sshd.destination,
        "--port",
        str(sshd.port),
        "--identity",
        str(key),
        "--known-hosts",
        str(sshd.known_hosts),
        "--path",
        str(deployed.remote_path),
        "--python",
        str(TARGET_PYTHON),
    ]
    result = invoke(*args)
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("path", ['/tmp/a"b', "/tmp/back\\slash", "/tmp/new\nline", "/tmp/${HOME}/kh"])
def test_paths_ssh_cannot_take_whole_are_refused(deployed, path):
    line = _one_error_line(invoke("deploy", str(deployed.bundle), "--to", "u@h", "--known-hosts", path), 2)
    assert "ssh cannot be given a path" in line


@pytest.mark.parametrize(
    "destination",
    [
        "-oProxyCommand=touch MARKER@host",
        "-oProxyCommand=touch MARKER",
        "user@-oProxyCommand=x",
        "us er@host",
        "user@ho st",
        "@host",
        "user@",
        "user@host;touch MARKER",
        "-v@host",
    ],
)
def test_a_destination_that_could_be_an_ssh_option_is_refused(deployed, tmp_path, monkeypatch, destination):
    monkeypatch.chdir(tmp_path)
    result = invoke("deploy", str(deployed.bundle), "--to", destination.replace("MARKER", str(tmp_path / "marker")))
    assert "not an SSH destination" in _one_error_line(result, 2)
    assert not (tmp_path / "marker").exists()


def test_the_destination_reaches_ssh_after_its_options_end():
    from edgekit.devices.remote import SshTarget

    argv = SshTarget("mendel@192.168.100.2").ssh_argv("true")
    assert argv[-3:] == ["--", "mendel@192.168.100.2", "true"]


# ------------------------------------------------------------------------------------ a hostile board
def board_python(tmp_path: Path, step: str, action: str) -> Path:
    """A board's python3 that answers ``step`` (probe, unpack, classify or benchmark) with the shell ``action``
    (its stdin read first), and runs the real one for every other step: a board whose runner was replaced, or
    whose answers a broken or hostile machine writes."""
    script = tmp_path / f"python-{step}"
    script.write_text(f"""#!/bin/sh
step=
for a in "$@"; do case "$a" in probe|unpack|classify|benchmark) step=$a; break;; esac; done
if [ "$step" = "{step}" ]; then
  cat > /dev/null
  {action}
fi
exec {TARGET_PYTHON} "$@"
""")
    script.chmod(0o755)
    return script


def answering(tmp_path: Path, step: str, answer: bytes, code: int = 0) -> Path:
    (tmp_path / "answer").write_bytes(answer)
    return board_python(tmp_path, step, f"cat {tmp_path / 'answer'}; exit {code}")


def _on_the_board(sshd, deployed, step: str, python: Path, *extra: str):
    """Run ``step``'s command (deploy for probe and unpack) on the deployed board with ``python`` as its Python."""
    args = ssh_args(sshd, deployed.remote_path, python=False) + ["--python", str(python), "--quiet", *extra]
    if step == "classify":
        return invoke(
            "classify",
            str(shared_file("cat.bmp")),
            "--on",
            sshd.destination,
            "-m",
            str(deployed.bundle),
            "-k",
            "3",
            *args,
        )
    if step == "benchmark":
        return invoke(
            "benchmark", "--on", sshd.destination, "-m", str(deployed.bundle), "-n", "3", "--warmup", "1", *args
        )
    return invoke("deploy", str(deployed.bundle), "--to", sshd.destination, *args)


def _probe_doc() -> dict:
    return {
        "python": "3.7.3",
        "executable": "/usr/bin/python3",
        "packages": {
            "numpy": True,
            "pillow": "9.5.0",
            "pycoral": False,
            "tflite_runtime": True,
            "ai_edge_litert": False,
        },
        "files": {},
    }


def _classify_doc() -> dict:
    return {
        "model": "m.tflite",
        "device": "cpu",
        "backend": "tflite_runtime",
        "first_inference_ms": 1.5,
        "results": [{"image": "000000.bmp", "ms": 1.0, "top": [{"id": 282, "label": "tiger cat", "score": 0.5}]}],
        "errors": [],
    }


def _benchmark_doc() -> dict:
    return {
        "model": "m.tflite",
        "device": "cpu",
        "backend": "tflite_runtime",
        "threads": 2,
        "load_ms": 3.0,
        "first_inference_ms": 2.0,
        "iterations": 3,
        "warmup": 1,
        "latencies_ms": [1.0, 2.0, 3.0],
        "count": 3,
        "min_ms": 1.0,
        "max_ms": 3.0,
        "mean_ms": 2.0,
        "p50_ms": 2.0,
        "p90_ms": 2.8,
        "p99_ms": 2.98,
        "throughput_per_s": 500.0,
        "machine": {"platform": "Linux", "processor": "aarch64", "cpus": 4, "governors": None},
        "notes": [],
        "warnings": [],
        "postprocess": None,
        "comparison": None,
    }


def _changed(doc: dict, path: str, value) -> bytes:
    """``doc`` as JSON with the field at ``path`` (dotted; list items by index) set to ``value`` (or removed)."""
    *parents, last = path.split(".")
    node = doc
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    if value is _REMOVE:
        del node[last]
    else:
        node[int(last) if isinstance(node, list) else last] = value
    return json.dumps(doc).encode()


_REMOVE = object()
_DEEP = b"[" * 100_000 + b"]" * 100_000
MALFORMED = {  # step -> case -> the board's answer (exit 0). Before the fix, 13 of these were exit 70.
    "probe": {
        "{}": b"{}",
        "a list": b"[1, 2]",
        "python a number": _changed(_probe_doc(), "python", 3),
        "packages a list": _changed(_probe_doc(), "packages", []),
        "files a list": _changed(_probe_doc(), "files", ["runtime/x"]),
        "a sha256 a number": _changed(_probe_doc(), "files", {"runtime/x": 1}),
        "numpy missing": _changed(_probe_doc(), "packages.numpy", _REMOVE),
        "pillow a huge number": _changed(_probe_doc(), "packages.pillow", "9" * 5000),
        "NaN": json.dumps(_probe_doc()).replace('"9.5.0"', "NaN").encode(),
        "deep": _DEEP,
        "truncated": json.dumps(_probe_doc()).encode()[:40],
        "not UTF-8": json.dumps(_probe_doc()).replace("python3", "pyth\xffn3").encode("latin-1"),
        "two documents": json.dumps(_probe_doc()).encode() * 2,
    },
    "classify": {
        "{}": b"{}",
        "null": b"null",
        "results an object": _changed(_classify_doc(), "results", {}),
        "model a number": _changed(_classify_doc(), "model", 7),
        "score a string": _changed(_classify_doc(), "results.0.top.0.score", "0.5"),
        "score NaN": json.dumps(_classify_doc()).replace("0.5", "NaN").encode(),
        "ms Infinity": json.dumps(_classify_doc()).replace('"ms": 1.0', '"ms": Infinity').encode(),
        "ms negative": _changed(_classify_doc(), "results.0.ms", -1),
        "id true": _changed(_classify_doc(), "results.0.top.0.id", True),
        "an entry a string": _changed(_classify_doc(), "results.0", "000000.bmp"),
        "an image not sent": _changed(_classify_doc(), "results.0.image", "/etc/passwd"),
        "errors without error": _changed(_classify_doc(), "errors", [{"image": "000000.bmp"}]),
        "deep": _DEEP,
        "deep within limits of json": _changed(_classify_doc(), "errors", json.loads("[" * 30 + "]" * 30)),
        "truncated": json.dumps(_classify_doc()).encode()[:-3],
        "not UTF-8": json.dumps(_classify_doc()).replace("tiger", "tig\xe9r").encode("latin-1"),
        "an unknown field": _changed(_classify_doc(), "extra", 1),
    },
    "benchmark": {
        "{}": b"{}",
        "p50 NaN": json.dumps(_benchmark_doc()).replace('"p50_ms": 2.0', '"p50_ms": NaN').encode(),
        "latency negative": _changed(_benchmark_doc(), "latencies_ms.0", -1.0),
        "latencies a string": _changed(_benchmark_doc(), "latencies_ms", "1,2,3"),
        "count not the latencies": _changed(_benchmark_doc(), "count", 2),
        "summary not the latencies": _changed(_benchmark_doc(), "p99_ms", 30.0),
        "machine a string": _changed(_benchmark_doc(), "machine", "Linux"),
        "notes a string": _changed(_benchmark_doc(), "notes", "note"),
        "comparison an object": _changed(_benchmark_doc(), "comparison", {"regression": False}),
        "deep": _DEEP,
        "truncated": json.dumps(_benchmark_doc()).encode()[:-1],
    },
}
VALID = {"probe": None, "classify": _classify_doc, "benchmark": _benchmark_doc}


# Through the real sshd, a few of the cases below (each step, each kind of fault); the rest through the stand-in.
REAL_SSH_CASES = [
    ("probe", "{}"),
    ("probe", "not UTF-8"),
    ("classify", "score NaN"),
    ("classify", "deep"),
    ("benchmark", "{}"),
]
_WHAT = {"probe": "listing the target folder", "classify": "classifying", "benchmark": "benchmarking"}


def _assert_malformed(line: str, destination: str, step: str) -> None:
    assert line.startswith(f"error: the answer of {destination} to {_WHAT[step]} is malformed: "), line
    assert (
        ("--python" in line and "login scripts quiet" in line)
        if step == "probe"
        else ("deploy the bundle again" in line and "edgekit version" in line)
    ), line


@pytest.mark.parametrize("step, case", REAL_SSH_CASES)
def test_a_malformed_board_answer_is_one_line_exit_9_with_what_to_do(sshd, deployed, tmp_path, step, case):
    python = answering(tmp_path, step, MALFORMED[step][case])
    _assert_malformed(_one_error_line(_on_the_board(sshd, deployed, step, python), 9), sshd.destination, step)


@pytest.mark.parametrize("step", ["classify", "benchmark"])
def test_a_well_formed_answer_from_the_same_board_passes(sshd, deployed, tmp_path, step):
    """The control for the cases above: the same board answering a well-formed document is believed."""
    python = answering(tmp_path, step, json.dumps(VALID[step]()).encode())
    result = _on_the_board(sshd, deployed, step, python, "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["device"] == f"cpu on {sshd.destination}"
    if step == "classify":
        assert doc["results"][0]["image"] == str(shared_file("cat.bmp"))


@pytest.mark.parametrize(
    "step, stream", [("probe", "stdout"), ("probe", "stderr"), ("classify", "stdout"), ("benchmark", "stderr")]
)
def test_a_board_answering_without_end_is_stopped_at_a_bound(sshd, deployed, tmp_path, step, stream):
    """`yes` as the board's answer: read up to a bound, then ssh is stopped: one line, exit 9, long before
    --timeout (the whole answer was kept in memory until the timeout before)."""
    python = board_python(
        tmp_path, step, "exec yes 'the board says this again and again'" + (" >&2" if stream == "stderr" else "")
    )
    started = time.monotonic()
    line = _one_error_line(_on_the_board(sshd, deployed, step, python, "--timeout", "30"), 9)
    assert time.monotonic() - started < 25
    assert "went past" in line and f"MiB on {stream}, so it was stopped" in line and "quiet" in line


def test_a_board_error_without_a_hint_gets_one(sshd, deployed, tmp_path):
    """An error line alone (a runner of an older edgekit), exit 3: the hint for its exit code."""
    python = board_python(tmp_path, "classify", "echo 'error: the board says no' >&2; exit 3")
    line = _one_error_line(_on_the_board(sshd, deployed, "classify", python), 3)
    assert line == (
        f"error: on {sshd.destination}: the board says no (a file on the board is not what the runner "
        "can read: deploy the bundle again (edgekit deploy), and check the images)"
    )


def test_a_board_error_that_is_not_the_runners_has_a_hint_and_reaches_the_terminal_escaped(sshd, deployed, tmp_path):
    python = board_python(tmp_path, "classify", r"printf 'Segmentation fault \033[2J\033]0;owned\007\n' >&2; exit 139")
    line = _one_error_line(_on_the_board(sshd, deployed, "classify", python), 9)
    assert "\x1b" not in line and "\x07" not in line
    assert line == (
        f"error: the runner failed on {sshd.destination}: Segmentation fault \\x1b[2J\\x1b]0;owned\\x07 "
        "(deploy the bundle again (edgekit deploy); rerun with --debug)"
    )


def test_a_real_runner_error_keeps_its_own_hint(sshd, deployed, tmp_path):
    """The runner's own error (here: a bundle changed on the board after deploy) arrives with its own hint, once."""
    remote_path = tmp_path / "board"
    bundle = make_bundle(tmp_path / "b")
    assert invoke("deploy", str(bundle), "--to", sshd.destination, *ssh_args(sshd, remote_path)).exit_code == 0
    board_labels = remote_path / "bundles" / "b" / "labels.txt"
    python = board_python(tmp_path, "classify", f"echo changed > {board_labels}")  # then the real runner runs
    line = _one_error_line(
        invoke(
            "classify",
            str(shared_file("cat.bmp")),
            "--on",
            sshd.destination,
            "-m",
            str(bundle),
            *ssh_args(sshd, remote_path, python=False),
            "--python",
            str(python),
            "--quiet",
        ),
        3,
    )
    assert f"error: on {sshd.destination}: ../bundles/b: labels.txt has changed since the bundle was built" in line
    assert line.endswith("(copy the bundle again or rebuild it with edgekit build; edited bundles are refused)")


# ------------------------------------------------------------------------------------ a stand-in board
@pytest.fixture()
def stand_in(monkeypatch, tmp_path):
    """A STAND-IN for ssh and the board (SshTarget.run replaced, no connection): its listing says the bundle is
    there, each later step answers what ``stand_in.answers[step]`` holds (stdout, stderr, exit code). It tests
    only how edgekit reads answers, every case of it quickly; the real ssh path is tested above."""
    import shlex

    from edgekit.board import manifest
    from edgekit.devices import remote

    bundle = make_bundle(tmp_path / "b")
    files = {f"bundles/b/{rel}": sha for rel, sha in remote.read_bundle(bundle).files.items()}
    files.update({rel: manifest.sha256_file(path) for rel, path in remote.runtime_files().items()})
    answers = {"probe": (json.dumps({**_probe_doc(), "files": files}).encode(), b"", 0)}
    seen = []

    def run(self, command, stdin=b"", timeout=None, what="the command", max_stdout=remote.MAX_STDOUT):
        step = next(word for word in shlex.split(command) if word in ("probe", "unpack", "classify", "benchmark"))
        seen.append((step, max_stdout))
        out, err, code = answers[step]
        return subprocess.CompletedProcess([], code, out, err)

    monkeypatch.setattr(remote.SshTarget, "run", run)
    return SimpleNamespace(bundle=bundle, answers=answers, seen=seen)


def _stand_in_run(stand_in, step: str, *extra: str):
    image = str(shared_file("cat.bmp"))
    if step == "classify":
        return invoke("classify", image, "--on", "u@board", "-m", str(stand_in.bundle), "-k", "3", "--quiet", *extra)
    if step == "benchmark":
        return invoke(
            "benchmark", "--on", "u@board", "-m", str(stand_in.bundle), "-n", "3", "--warmup", "1", "--quiet", *extra
        )
    return invoke("deploy", str(stand_in.bundle), "--to", "u@board", *extra)


@pytest.mark.parametrize("step, case", [(step, case) for step in MALFORMED for case in MALFORMED[step]])
def test_every_malformed_answer_is_one_line_exit_9_stand_in(stand_in, step, case):
    stand_in.answers[step] = (MALFORMED[step][case], b"", 0)
    _assert_malformed(_one_error_line(_stand_in_run(stand_in, step), 9), "u@board", step)


@pytest.mark.parametrize("step", ["probe", "classify", "benchmark"])
def test_the_stand_ins_well_formed_answers_pass(stand_in, step):
    if step != "probe":
        stand_in.answers[step] = (json.dumps(VALID[step]()).encode(), b"", 0)
    result = _stand_in_run(stand_in, step, "--json")
    assert result.exit_code == 0, result.output
    assert [s for s, _ in stand_in.seen] == ["probe"] + ([step] if step != "probe" else [])


@pytest.mark.parametrize(
    "stdout, stderr, code, expected_code, expected",
    [
        (
            b"",
            b"error: the board says no\n",
            3,
            3,
            (
                "the board says no (a file on the board is not what the runner can "
                "read: deploy the bundle again (edgekit deploy), and check the images)"
            ),
        ),
        (
            b"",
            b"error: the board says no\n",
            9,
            9,
            "the board says no (check the Edge TPU and its runtime on the board",
        ),
        (b"", b"error: the board says no\n", 4, 4, "the board says no (install what is missing on the board"),
        (b"", b"error: the board says no\n", 2, 2, "the board says no (the board's runner refused its arguments"),
        (b"", b"error: the board says no\n", 42, 9, "the board says no (check the Edge TPU"),
        (
            b'{"error": {"message": "no", "hint": null, "exit_code": 3}}',
            b"",
            3,
            3,
            "no (a file on the board is not what the runner",
        ),
        (
            b'{"error": {"message": "no", "hint": "do this", "exit_code": 9}}',
            b"error: no (do this)\n",
            9,
            9,
            "no (do this)",
        ),
        (
            b'{"error": {"message": "no\\u001b[31m", "hint": "do\\nthis", "exit_code": 3}}',
            b"",
            3,
            3,
            "no\\x1b[31m (do\\x0athis)",
        ),
    ],
)
def test_each_board_error_has_a_hint_stand_in(stand_in, stdout, stderr, code, expected_code, expected):
    stand_in.answers["classify"] = (stdout, stderr, code)
    line = _one_error_line(_stand_in_run(stand_in, "classify"), expected_code)
    assert line.startswith(f"error: on u@board: {expected}") and line.endswith(")"), line


def test_stdout_is_bounded_by_what_was_asked(stand_in):
    """classify's bound grows with the images and classes asked for, benchmark's with the runs; both are finite."""
    from edgekit.devices import remote

    stand_in.answers["classify"] = (json.dumps(VALID["classify"]()).encode(), b"", 0)
    assert _stand_in_run(stand_in, "classify").exit_code == 0
    stand_in.answers["benchmark"] = (json.dumps(VALID["benchmark"]()).encode(), b"", 0)
    assert _stand_in_run(stand_in, "benchmark").exit_code == 0
    bounds = dict(stand_in.seen)
    assert bounds["probe"] == remote.MAX_STDOUT
    assert bounds["classify"] == remote.classify_stdout_bound(1, 3) < 2 * remote.MAX_STDOUT
    assert bounds["benchmark"] == remote.benchmark_stdout_bound(3) < 2 * remote.MAX_STDOUT
    assert remote.classify_stdout_bound(10_000, 5) < 200 << 20 and remote.classify_stdout_bound(1, 10**9) < 64 << 20


# ------------------------------------------------------------------------------------ an interrupted deploy
def _board_runner_pids(remote_path: Path, step: str) -> list[int]:
    """The board runner processes running ``step`` on ``remote_path`` (the test's "board" is this machine)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if step.encode() in argv and str(remote_path).encode() in argv:  # not ssh: its command is one argument
                pids.append(int(entry.name))
    return pids


def _wait_for(condition, seconds: float = 15) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _staging(remote_path: Path) -> list[str]:
    return sorted(p.name for p in remote_path.glob(f"{board_runner.STAGING_PREFIX}*")) if remote_path.is_dir() else []


def _start_unpack(sshd, remote_path: Path) -> tuple[subprocess.Popen, int]:
    """A copy under way through the real sshd: the runner has made its staging folder and waits for the rest of
    a file whose first 100 kB arrived. Returns the local ssh process and the runner's pid on the "board"."""
    import tarfile

    from edgekit.devices import remote

    target = remote.SshTarget(
        sshd.destination,
        port=sshd.port,
        identity=str(sshd.key),
        known_hosts=str(sshd.known_hosts),
        python=str(TARGET_PYTHON),
    )
    before = set(_staging(remote_path))
    proc = subprocess.Popen(
        target.ssh_argv(target.python_command("unpack", str(remote_path))),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=default_stop_signals,
    )
    member = tarfile.TarInfo("bundles/b/model.tflite")
    member.size = 1 << 20
    proc.stdin.write(remote._runner_source() + member.tobuf() + b"x" * 100_000)
    proc.stdin.flush()
    assert _wait_for(lambda: set(_staging(remote_path)) - before and _board_runner_pids(remote_path, "unpack")), (
        proc.poll()
    )
    return proc, _board_runner_pids(remote_path, "unpack")[0]


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="finds the board's runner in /proc (Linux)")
@pytest.mark.parametrize("how", ["SIGTERM", "SIGHUP", "connection dropped"])
def test_an_interrupted_copy_removes_its_staging_folder_on_the_board(sshd, tmp_path, how):
    """The runner stopped by SIGTERM or SIGHUP (a session torn down, a board shutting down), or its connection
    dropped: it removes its staging folder as it ends (Python died on the two signals without its clean-up)."""
    import signal

    remote_path = tmp_path / "board" / "edgekit"
    proc, pid = _start_unpack(sshd, remote_path)
    try:
        if how == "connection dropped":
            proc.kill()  # the host's ssh gone (Ctrl-C, a cable pulled): the runner reads the end of its input
        else:
            os.kill(pid, getattr(signal, how))
        assert _wait_for(lambda: not _board_runner_pids(remote_path, "unpack")), "the runner did not end"
        assert _staging(remote_path) == []
        assert not (remote_path / "bundles").exists()  # and nothing half-copied arrived
    finally:
        proc.kill()
        proc.communicate()


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="finds the board's runner in /proc (Linux)")
def test_the_next_deploy_removes_a_staging_folder_left_by_a_killed_copy_but_not_one_in_use(sshd, deployed, tmp_path):
    """A runner killed outright (SIGKILL, a power cut) cannot clean up: the next deploy there removes what it left,
    and leaves alone the staging folder of a copy still under way."""
    import signal

    remote_path = tmp_path / "board" / "edgekit"
    proc, pid = _start_unpack(sshd, remote_path)
    os.kill(pid, signal.SIGKILL)
    assert _wait_for(lambda: not _board_runner_pids(remote_path, "unpack"))
    proc.kill()
    proc.communicate()
    left = _staging(remote_path)
    assert len(left) == 1  # what the kill left
    busy, _ = _start_unpack(sshd, remote_path)  # another copy, under way during the next deploy
    try:
        in_use = [name for name in _staging(remote_path) if name not in left]
        result = invoke("deploy", str(deployed.bundle), "--to", sshd.destination, *ssh_args(sshd, remote_path))
        assert result.exit_code == 0, result.output
        assert _staging(remote_path) == in_use  # the killed one's gone, the live one's kept
        assert (remote_path / "bundles" / "mobilenet" / "manifest.json").is_file()
    finally:
        busy.kill()
        busy.communicate()
    assert _wait_for(lambda: _staging(remote_path) == [])  # the live copy, its connection dropped, cleaned up itself


def test_a_board_error_of_any_length_is_one_line_of_a_bounded_length_stand_in(stand_in):
    stand_in.answers["classify"] = (
        json.dumps({"error": {"message": "x" * 500_000, "hint": None, "exit_code": 3}}).encode(),
        b"error: " + b"y" * 500_000 + b"\n",
        3,
    )
    line = _one_error_line(_stand_in_run(stand_in, "classify"), 3)
    assert len(line) < 2500 and line.startswith("error: on u@board: xxx") and "... (a file on the board" in line


# ------------------------------------------------------------------------------------ detect --on
def make_detector_bundle(target: Path) -> Path:
    """A bundle of the real Ultralytics YOLOv8n export and its compiled twin, English labels, pixels / 255."""
    from edgekit.board import manifest
    from edgekit.board.preprocess import PreprocessSpec
    from edgekit.pipeline import build
    from edgekit.results.build import BundleInput, BundleManifest, BundleModels, BundleReports, BundleVersions

    cpu, tpu = "ppe_yolov8n_full_integer_quant.tflite", "ppe_yolov8n_full_integer_quant_edgetpu.tflite"
    labels = target.parent / "ppe_labels.txt"
    target.parent.mkdir(parents=True, exist_ok=True)
    labels.write_text("boots\nhelmet\ngoggles\nperson\n")
    spec = PreprocessSpec.with_scaling(640, 640, "0..1", resize="bilinear")
    doc = BundleManifest.new(
        models=BundleModels(cpu, tpu),
        labels=manifest.LABELS_NAME,
        preprocess=spec,
        input=BundleInput((1, 640, 640, 3), "int8", 0.01865844801068306, -14),
        versions=BundleVersions("test", None, None),
        reports=BundleReports(None, None),
    )
    return build.write_bundle(
        target,
        {cpu: shared_file("detection/" + cpu), tpu: shared_file("detection/" + tpu), manifest.LABELS_NAME: labels},
        doc,
    )


def test_detect_on_python37_board_finds_what_the_local_run_finds(sshd, tmp_path):
    """The board's runner (Python 3.7, tflite-runtime, no model reader) gets the layout the host read from the
    bundle, and finds the same objects in grace_hopper.bmp as the local run, at IoU >= 0.9 (tflite-runtime 2.7
    and LiteRT round int8 kernels a little differently)."""
    bundle = make_detector_bundle(tmp_path / "b" / "ppe")
    image = str(shared_file("grace_hopper.bmp"))
    local = invoke("detect", image, "-m", str(bundle), "--json")
    assert local.exit_code == 0, local.output
    remote = invoke(
        "detect",
        image,
        "--on",
        sshd.destination,
        "-m",
        str(bundle),
        *ssh_args(sshd, tmp_path / "board" / "edgekit"),
        "--json",
    )
    assert remote.exit_code == 0, remote.output
    ours, theirs = json.loads(local.stdout), json.loads(remote.stdout)
    assert theirs["results"][0]["image"] == image and theirs["device"] == f"cpu on {sshd.destination}"
    assert theirs["layout"] == ours["layout"] and ours["layout"]["letterbox"]
    a, b = ours["results"][0]["objects"], theirs["results"][0]["objects"]
    assert [o["label"] for o in a] == [o["label"] for o in b] and "person" in [o["label"] for o in a]
    from edgekit.board.decode import box_iou

    for x, y in zip(a, b):  # on this 255-op model the two builds differ by up to ~5 px and 0.04 in score
        assert abs(x["score"] - y["score"]) < 0.08, (a, b)
        assert box_iou([list(x["bbox"].values())], [list(y["bbox"].values())])[0, 0] >= 0.9, (a, b)
    if TARGET_PYTHON == PY37:
        assert theirs["backend"] == "tflite_runtime"
    res = invoke(
        "detect",
        image,
        "--on",
        sshd.destination,
        "-m",
        str(bundle),
        "--save",
        str(tmp_path / "s"),
        *ssh_args(sshd, tmp_path / "board" / "edgekit"),
    )
    assert res.exit_code == 2 and "--save cannot be combined with --on" in res.stderr


def _board_detect_answer(**change) -> bytes:
    """A detect document as a board's runner prints it for one image 000000.png (64x48), ``change`` applied."""
    from edgekit.board.decode import DetectionLayout, Layout

    layout = DetectionLayout(Layout.YOLO, {"output": 0}, 2, (32, 32), boxes_normalized=True).to_dict()
    obj = {"id": 1, "label": None, "score": 0.9, "bbox": {"xmin": 1.0, "ymin": 2.0, "xmax": 64.0, "ymax": 48.0}}
    obj.update(change.pop("object", {}))
    doc = {
        "model": "m.tflite",
        "device": "cpu",
        "backend": "tflite_runtime",
        "layout": layout,
        "conf": 0.25,
        "iou": 0.45,
        "max_det": 100,
        "first_inference_ms": 1.0,
        "results": [
            {
                "image": "000000.png",
                "width": 64,
                "height": 48,
                "invoke_ms": 1.0,
                "postprocess_ms": 0.1,
                "objects": [obj],
            }
        ],
        "errors": [],
        "notes": [],
    }
    doc.update(change)
    return json.dumps(doc).encode()


@pytest.mark.parametrize(
    "change, says",
    [
        ({"conf": 0.05}, "it ran with conf 0.05, not the 0.25 sent"),
        ({"iou": 0.9}, "it ran with iou 0.9, not the 0.45 sent"),
        ({"max_det": 300}, "it ran with max_det 300, not the 100 sent"),
        (
            {"layout": {"kind": "end2end", "roles": {"output": 0}, "num_classes": 0, "input_hw": [32, 32]}},
            "it decoded another layout (end2end) than the one sent",
        ),
        (
            {"object": {"bbox": {"xmin": 1.0, "ymin": 2.0, "xmax": 6400.0, "ymax": 48.0}}},
            "a box [1.0, 2.0, 6400.0, 48.0] outside its 64x48 image",
        ),
        (
            {"object": {"bbox": {"xmin": 30.0, "ymin": 2.0, "xmax": 10.0, "ymax": 48.0}}},
            "a box [30.0, 2.0, 10.0, 48.0] outside its 64x48 image",
        ),
        ({"object": {"score": 0.1}}, "a score 0.1 below the --conf 0.25 sent"),
        ({"object": {"id": 7}}, "class id 7 is not one of the model's 2 classes"),
        ({"object": {"id": -1}}, "results[0].objects[0].id is not an integer >= 0"),
    ],
)
def test_a_board_detect_answer_is_checked_against_what_was_sent(change, says):
    """Issue 31: a board's detect answer was taken whatever it said. Now what it echoes must be what was sent, and
    its boxes must lie in their images: anything else is a malformed answer (exit 9)."""
    from edgekit.board.decode import DetectionLayout, Layout
    from edgekit.devices import board_protocol

    asked = board_protocol.DetectAsked(
        0.25,
        0.45,
        100,
        json.loads(
            json.dumps(DetectionLayout(Layout.YOLO, {"output": 0}, 2, (32, 32), boxes_normalized=True).to_dict())
        ),
    )
    sound = board_protocol.read_detect(_board_detect_answer(), "u@board", "hint", {"000000.png"}, asked)
    assert sound["results"][0]["objects"][0]["id"] == 1
    with pytest.raises(board_protocol.MalformedAnswer) as caught:
        board_protocol.read_detect(_board_detect_answer(**change), "u@board", "hint", {"000000.png"}, asked)
    assert caught.value.exit_code == 9
    assert caught.value.message == f"the answer of u@board to detecting is malformed: {says}"
