"""compile --via and build --via: through a real OpenSSH server on 127.0.0.1, and through a stand-in container engine.

The compiler is tests/fixtures/compiler/standin_edgetpu_compiler.py, a STAND-IN that replays real compiler
output (it compiles nothing, and proves nothing about the real compiler): the same stand-in runs here and
"there", so a remote compile must give byte-identical files, the same JSON and the same exit codes as a local
one. The container engine is tests/fixtures/compiler/standin_docker.py, a STAND-IN too: no docker or podman
runs in these tests; it records each command line and runs the stand-in compiler with the container paths
mapped back, to check the exact command line and the files going in and out.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from edgekit.cli.app import cli
from edgekit.edgetpu import compile_via
from tests.conftest import REPO, SSHD, shared_file
from tests.test_light_install import light  # noqa: F401  (a fixture)
from tests.test_remote import _free_port, _keygen

FIXTURES = REPO / "tests" / "fixtures" / "compiler"
STANDIN = FIXTURES / "standin_edgetpu_compiler.py"
STANDIN_ENGINE = FIXTURES / "standin_docker.py"
MODEL = "split_concat"


def _script(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o755)
    return path


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


@pytest.fixture(autouse=True)
def _no_agent(monkeypatch):
    """Only the keys a test names: no ssh-agent of whoever runs the tests."""
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)


@pytest.fixture(scope="module")
def compiler_env(tmp_path_factory):
    """The stand-in compiler as `edgetpu_compiler`, reading its behaviour from an env file the tests write
    (so that the same behaviour holds here and through sshd, which passes no environment)."""
    d = tmp_path_factory.mktemp("standin")
    env_file = d / "standin.env"
    env_file.write_text("")
    bin_dir = d / "bin"
    bin_dir.mkdir()
    exe = _script(
        bin_dir / "edgetpu_compiler",
        f"#!/bin/sh\n. {shlex.quote(str(env_file))}\nexec {shlex.quote(sys.executable)} "
        f'{shlex.quote(str(STANDIN))} "$@"\n',
    )
    return SimpleNamespace(dir=d, env_file=env_file, bin=bin_dir, exe=exe)


@pytest.fixture
def standin(compiler_env, monkeypatch):
    """configure(**STANDIN_*): the stand-in's behaviour for this test, here and on the SSH host alike."""
    monkeypatch.setenv("EDGETPU_COMPILER", str(compiler_env.exe))

    def configure(**env: object) -> None:
        compiler_env.env_file.write_text("".join(f"export STANDIN_{k}={shlex.quote(str(v))}\n" for k, v in env.items()))

    configure()
    yield configure
    configure()


@pytest.fixture(scope="module")
def sshd(compiler_env, tmp_path_factory):
    """A real OpenSSH server on 127.0.0.1: on ``port`` the login has the stand-in compiler on its PATH and its
    TMPDIR in ``remote_tmp``; on ``bare_port`` no compiler at all."""
    if not os.access(SSHD, os.X_OK):
        pytest.skip(f"no OpenSSH server ({SSHD}) to test SSH against: apt-get install openssh-server")
    import pwd

    d = tmp_path_factory.mktemp("sshd")
    host_key, key = _keygen(d / "host_key"), _keygen(d / "client_key")
    (d / "authorized_keys").write_text(Path(f"{key}.pub").read_text())
    port = _free_port()
    bare_port = next(p for p in iter(_free_port, None) if p != port)
    remote_tmp = d / "remote_tmp"
    remote_tmp.mkdir()
    user = pwd.getpwuid(os.getuid()).pw_name
    run = 'export PATH TMPDIR; exec /bin/sh -c "$SSH_ORIGINAL_COMMAND"'
    (d / "sshd_config").write_text(f"""\
Port {port}
Port {bare_port}
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
Match LocalPort {port}
    ForceCommand PATH={compiler_env.bin}:/usr/bin:/bin TMPDIR={remote_tmp}; {run}
Match LocalPort {bare_port}
    ForceCommand PATH=/usr/bin:/bin TMPDIR={remote_tmp}; {run}
""")
    if os.getuid() == 0:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    log = open(d / "sshd.log", "wb")
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(d / "sshd_config")], stdout=log, stderr=log)
    import socket

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
    pub = Path(f"{host_key}.pub").read_text()
    known_hosts.write_text(f"[127.0.0.1]:{port} {pub}[127.0.0.1]:{bare_port} {pub}")
    yield SimpleNamespace(
        port=port,
        bare_port=bare_port,
        key=key,
        known_hosts=known_hosts,
        remote_tmp=remote_tmp,
        via=f"ssh://{user}@127.0.0.1:{port}",
        bare_via=f"ssh://{user}@127.0.0.1:{bare_port}",
        dir=d,
    )
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


def ssh_options(sshd) -> list[str]:
    return ["--identity", str(sshd.key), "--known-hosts", str(sshd.known_hosts)]


@pytest.fixture
def model(tmp_path):
    src = shared_file(f"{MODEL}.tflite")
    dst = tmp_path / "in" / f"{MODEL}.tflite"
    dst.parent.mkdir()
    dst.write_bytes(src.read_bytes())
    return dst


def _outputs(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())} if folder.is_dir() else {}


def _same_document(local: dict, there: dict, local_dir: Path, there_dir: Path) -> None:
    """The two JSON documents are equal but for the command line (the private folder differs) and the output
    folders."""

    def normal(doc: dict, folder: Path) -> dict:
        doc = {k: v for k, v in doc.items() if k != "command"}
        doc["outputs"] = [str(Path(p).relative_to(folder)) for p in doc.get("outputs", [])]
        return doc

    assert normal(there, there_dir) == normal(local, local_dir)


def _remote_leftovers(sshd) -> list[str]:
    return sorted(p.name for p in sshd.remote_tmp.iterdir())


# --------------------------------------------------------------------------------------------- ssh
@pytest.mark.remote
@pytest.mark.parametrize(
    "options, passed",
    [
        ([], []),
        (["--segments", "2"], ["--num_segments", "2"]),
        (
            ["-a", "--min-runtime", "13", "--search-delegate"],
            ["--min_runtime_version", "13", "--search_delegate", "--enable_multiple_subgraphs"],
        ),
    ],
    ids=["plain", "segments-2", "a-m13-d"],
)
def test_remote_and_local_compiles_give_byte_identical_files_and_the_same_json(
    sshd, standin, model, tmp_path, options, passed
):
    standin(OUTPUT_MODEL=shared_file(f"{MODEL}_edgetpu.tflite"))
    local = invoke("compile", str(model), "-o", str(tmp_path / "here"), "--json", *options)
    there = invoke(
        "compile", str(model), "-o", str(tmp_path / "there"), "--via", sshd.via, *ssh_options(sshd), "--json", *options
    )
    assert local.exit_code == 0, local.output
    assert there.exit_code == 0, there.output
    files = _outputs(tmp_path / "there")
    assert len(files) == (4 if "--segments" in options else 2) and files == _outputs(tmp_path / "here")
    doc = json.loads(there.stdout)
    _same_document(json.loads(local.stdout), doc, tmp_path / "here", tmp_path / "there")
    # what ran there, named as it ran: the host, then the compiler's own argument list in the private folder
    cmd = doc["command"]
    folder = cmd[3]
    assert cmd[:4] == [sshd.via, "edgetpu_compiler", "--out_dir", folder] and folder.endswith("/out")
    assert folder.startswith(f"{sshd.remote_tmp}/edgekit-compile.")
    assert cmd[-1] == str(Path(folder).parent / f"{MODEL}.tflite")
    assert cmd[4:-1] == json.loads(local.stdout)["command"][3:-1]  # every option passed through as given here
    rest = iter(cmd)
    assert all(a in rest for a in passed), cmd  # the compiler's flags for the options asked for, in order
    assert _remote_leftovers(sshd) == []  # the private folder is gone after a success
    assert sorted(p.name for p in tmp_path.joinpath("there").iterdir() if p.name.startswith(".")) == []


@pytest.mark.remote
@pytest.mark.parametrize(
    "behaviour",
    [
        {"STDOUT": "v16_large_activations.txt", "EXIT": 1, "WRITE": 0},  # a known failure, exit 1
        {"STDOUT": "v16_dynamic_tensors.txt", "EXIT": 0},  # failure text after exit 0, outputs written
        {"EXIT": 3},  # success text, failing exit code
    ],
    ids=["known-failure", "failure-text-exit-0", "nonzero-exit"],
)
def test_a_remote_failure_fails_as_the_same_local_one(sshd, standin, model, tmp_path, behaviour):
    standin(**behaviour)
    local = invoke("compile", str(model), "-o", str(tmp_path / "here"), "--json")
    there = invoke(
        "compile", str(model), "-o", str(tmp_path / "there"), "--via", sshd.via, *ssh_options(sshd), "--json"
    )
    assert local.exit_code == there.exit_code == 8, (local.output, there.output)
    assert there.stderr.splitlines()[-1] == local.stderr.splitlines()[-1]  # the same error line and fix
    _same_document(json.loads(local.stdout), json.loads(there.stdout), tmp_path / "here", tmp_path / "there")
    assert _outputs(tmp_path / "there") == _outputs(tmp_path / "here") == {}  # nothing put in place
    assert _remote_leftovers(sshd) == []  # the private folder is gone after a failure


@pytest.mark.remote
def test_a_remote_timeout_stops_the_compiler_there_and_removes_its_folder(sshd, standin, model, tmp_path):
    pid_file = tmp_path / "child.pid"
    standin(SLEEP=60, CHILD_PID_FILE=pid_file)
    started = time.monotonic()
    there = invoke(
        "compile",
        str(model),
        "-o",
        str(tmp_path / "there"),
        "--via",
        sshd.via,
        *ssh_options(sshd),
        "--timeout",
        "1",
        "--json",
    )
    assert time.monotonic() - started < 30
    local = invoke("compile", str(model), "-o", str(tmp_path / "here"), "--json", "--timeout", "1")
    assert local.exit_code == there.exit_code == 8, there.output
    assert (
        json.loads(there.stdout)
        == json.loads(local.stdout)
        == {"succeeded": False, "error": there.stderr.splitlines()[-1][len("error: ") :]}
    )
    assert there.stderr.splitlines()[-1] == local.stderr.splitlines()[-1]
    assert "did not finish within --timeout 1 s and was stopped" in there.stderr
    _wait_until(lambda: not _alive(int(pid_file.read_text())), "the compiler's child process was stopped")
    _wait_until(lambda: _remote_leftovers(sshd) == [], "the remote folder was removed")


@pytest.mark.remote
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_remote_compile_stops_there_and_leaves_nothing(sshd, standin, model, tmp_path, stop):
    pid_file = tmp_path / "child.pid"
    standin(SLEEP=60, CHILD_PID_FILE=pid_file)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "edgekit",
            "compile",
            str(model),
            "-o",
            str(tmp_path / "there"),
            "--via",
            sshd.via,
            *ssh_options(sshd),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_until(lambda: pid_file.exists() and pid_file.read_text().strip(), "the compile started there")
        assert len(_remote_leftovers(sshd)) == 1
        proc.send_signal(stop)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + stop, err
    _wait_until(lambda: not _alive(int(pid_file.read_text())), "the compiler's child process was stopped")
    _wait_until(lambda: _remote_leftovers(sshd) == [], "the remote folder was removed")
    assert _outputs(tmp_path / "there") == {}


@pytest.mark.remote
def test_no_compiler_on_the_host_is_exit_4_naming_it_with_checks_prediction(sshd, standin, model, tmp_path):
    r = invoke("compile", str(model), "--via", sshd.bare_via, *ssh_options(sshd), "--json")
    assert r.exit_code == 4, r.output
    assert "no edgetpu_compiler on 127.0.0.1" in r.stderr and r.stderr.count("\n") == 1
    doc = json.loads(r.stdout)
    assert doc["compiled"] is False and doc["reason"].startswith("no edgetpu_compiler on 127.0.0.1")
    assert doc["check"]["ops"]  # check's offline prediction, as without a local compiler
    assert _remote_leftovers(sshd) == []


@pytest.mark.remote
def test_an_unknown_host_key_is_refused_as_deploy_refuses_it(sshd, standin, model, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    r = invoke("compile", str(model), "--via", sshd.via, "--identity", str(sshd.key), "--known-hosts", str(empty))
    assert r.exit_code == 9, r.output
    assert "is not in" in r.stderr and "--accept-new-host-key" in r.stderr
    assert empty.read_text() == ""  # nothing recorded without --accept-new-host-key


@pytest.mark.remote
def test_build_via_ssh_bundles_the_same_compiled_model_as_a_local_build(sshd, standin, tmp_path):
    classifier = "mobilenet_v1_0.25_128_quant"
    model = tmp_path / f"{classifier}.tflite"
    model.write_bytes(shared_file(f"{classifier}.tflite").read_bytes())
    standin(OUTPUT_MODEL=shared_file(f"{classifier}_edgetpu.tflite"))
    local = invoke("build", str(model), "-o", str(tmp_path / "here"), "--json")
    there = invoke("build", str(model), "-o", str(tmp_path / "there"), "--via", sshd.via, *ssh_options(sshd), "--json")
    assert local.exit_code == 0, local.output
    assert there.exit_code == 0, there.output
    name = f"{classifier}_edgetpu.tflite"
    assert (tmp_path / "there" / name).read_bytes() == (tmp_path / "here" / name).read_bytes()
    a, b = json.loads(local.stdout)["manifest"], json.loads(there.stdout)["manifest"]
    assert a["files"] == b["files"] and a["versions"] == b["versions"]
    assert _remote_leftovers(sshd) == []


@pytest.mark.remote
def test_ctrl_c_during_any_ssh_command_stops_ssh(sshd):
    """SshTarget.run (deploy's SSH layer, which --via uses) stops its ssh when interrupted: a Ctrl-C, or a
    stop signal edgekit raises like it, leaves no ssh of ours running on."""
    from edgekit.devices.remote import SshTarget

    target = SshTarget(
        sshd.via[len("ssh://") :].rsplit(":", 1)[0],
        port=sshd.port,
        identity=str(sshd.key),
        known_hosts=str(sshd.known_hosts),
    )

    def interrupt(*_):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 2.0)
    try:
        with pytest.raises(KeyboardInterrupt):
            target.run("sleep 30", timeout=60)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert _our_ssh_processes() == []


def _our_ssh_processes() -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)
            name, rest = fields[0].split("(", 1)[1], fields[1].split()
        except (OSError, IndexError):
            continue
        if name == "ssh" and int(rest[1]) == os.getpid() and rest[0] != "Z":
            found.append(int(stat.parent.name))
    return found


@pytest.mark.remote
def test_build_via_a_host_without_the_compiler_fails_and_writes_no_bundle(sshd, standin, tmp_path):
    """A compiler asked for by name is not silently replaced by a CPU-only bundle (as a missing local one is)."""
    classifier = "mobilenet_v1_0.25_128_quant"
    model = tmp_path / f"{classifier}.tflite"
    model.write_bytes(shared_file(f"{classifier}.tflite").read_bytes())
    r = invoke("build", str(model), "-o", str(tmp_path / "bundle"), "--via", sshd.bare_via, *ssh_options(sshd))
    assert r.exit_code == 4 and "no edgetpu_compiler on 127.0.0.1" in r.stderr, r.output
    assert not (tmp_path / "bundle").exists() and sorted(p.name for p in tmp_path.iterdir()) == [model.name]
    r = invoke("build", str(model), "-o", str(tmp_path / "bundle"), "--via", "docker", "--no-compile")
    assert r.exit_code == 2 and "--via with --no-compile" in r.stderr, r.output


def _tar(*members: tuple[str, bytes | None, str]) -> bytes:
    """A tar of (name, content, kind): kind "file", "dir" or "symlink" (content: the link's target)."""
    import io
    import tarfile

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, content, kind in members:
            info = tarfile.TarInfo(name)
            if kind == "dir":
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif kind == "symlink":
                info.type, info.linkname = tarfile.SYMTYPE, content.decode()
                tar.addfile(info)
            else:
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


@pytest.mark.parametrize(
    "data, words",
    [
        (b"Welcome to build-box!\n", "malformed archive"),  # a login script printing on stdout
        (_tar(("rc", b"0", "file"), ("stdout", b"", "file"), ("stderr", b"", "file")), "no where"),
        (
            _tar(*[(n, b"0", "file") for n in ("rc", "where", "stdout", "stderr")], ("out/../../x", b"", "file")),
            "'out/../../x' is not a file it writes",
        ),
        (
            _tar(
                *[(n, b"0", "file") for n in ("rc", "where", "stdout", "stderr")],
                ("out/m_edgetpu.tflite", b"/etc", "symlink"),
            ),
            "is not a file it writes",
        ),
        (
            _tar(*[(n, b"0", "file") for n in ("rc", "where", "stdout", "stderr")], ("out/sub/x", b"", "file")),
            "is not a file it writes",
        ),
    ],
)
def test_what_the_host_sends_back_is_read_strictly(data, words):
    from edgekit.errors import DeviceError

    with pytest.raises(DeviceError) as caught:
        compile_via._read_tar(data, "me@host")
    assert words in caught.value.message and caught.value.exit_code == 9


def test_what_the_host_sends_back_when_all_is_well():
    files = compile_via._read_tar(
        _tar(
            *[(n, n.encode(), "file") for n in ("rc", "where", "stdout", "stderr")],
            ("out", None, "dir"),
            ("out/m_edgetpu.tflite", b"model", "file"),
        ),
        "me@host",
    )
    assert files == {
        "rc": b"rc",
        "where": b"where",
        "stdout": b"stdout",
        "stderr": b"stderr",
        "out/m_edgetpu.tflite": b"model",
    }


# --------------------------------------------------------------------------------------- usage
@pytest.mark.parametrize(
    "args, words",
    [
        (["--via", "ftp://host"], "not a place edgekit can compile"),
        (["--via", "ssh://user@host:99999"], "not a TCP port"),
        (["--via", "ssh://-oProxyCommand=x"], "not an SSH destination"),
        (["--identity", "key"], "need --via ssh://USER@HOST"),
        (["--via", "docker", "--accept-new-host-key"], "need --via ssh://USER@HOST"),
        (["--connect-timeout", "5"], "--connect-timeout need --via ssh://USER@HOST"),  # was silently accepted
        (["--via", "podman", "--connect-timeout", "5"], "--connect-timeout need --via ssh://USER@HOST"),
    ],
)
def test_bad_via_options_are_usage_errors(model, tmp_path, args, words):
    (tmp_path / "key").write_text("")
    os.chdir(tmp_path)
    r = invoke("compile", str(model), *args)
    assert r.exit_code == 2 and words in r.stderr, r.output


# --------------------------------------------------------------------------------------- containers
@pytest.fixture
def engine(compiler_env, standin, tmp_path, monkeypatch):
    """A stand-in `docker` and `podman` first on PATH (recording their command lines), the stand-in compiler
    behind them; returns SimpleNamespace(log (the command lines so far), images)."""
    bin_dir = tmp_path / "engine-bin"
    bin_dir.mkdir()
    for name in ("docker", "podman"):
        _script(
            bin_dir / name, f'#!/bin/sh\nexec {shlex.quote(sys.executable)} {shlex.quote(str(STANDIN_ENGINE))} "$@"\n'
        )
    log, images = tmp_path / "engine.log", tmp_path / "images"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("STANDIN_ENGINE_LOG", str(log))
    monkeypatch.setenv("STANDIN_ENGINE_IMAGES", str(images))
    monkeypatch.setenv("STANDIN_COMPILER", str(compiler_env.exe))
    return SimpleNamespace(
        log=lambda: [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else [],
        images=images,
        standin=standin,
    )


@pytest.mark.parametrize("name", ["docker", "podman"])
def test_via_a_container_the_exact_command_lines_and_the_same_files(engine, model, tmp_path, name):
    engine.standin(OUTPUT_MODEL=shared_file(f"{MODEL}_edgetpu.tflite"))
    local = invoke("compile", str(model), "-o", str(tmp_path / "here"), "--json")
    there = invoke("compile", str(model), "-o", str(tmp_path / "there"), "--via", name, "--json")
    assert local.exit_code == 0 and there.exit_code == 0, there.output
    assert _outputs(tmp_path / "there") == _outputs(tmp_path / "here") and len(_outputs(tmp_path / "here")) == 2
    _same_document(json.loads(local.stdout), json.loads(there.stdout), tmp_path / "here", tmp_path / "there")
    tag = compile_via.image_tag()
    recipe = Path(compile_via.__file__).parent / "compiler_image" / "Dockerfile"
    log = engine.log()
    asked = [c for c in log if c[0] == "info"]  # podman says whether it is rootless, once
    assert asked == ([["info", "--format", "{{.Host.Security.Rootless}}"]] if name == "podman" else [])
    inspect, build, version, run = [c for c in log if c[0] != "info"]
    assert inspect == ["image", "inspect", tag]
    assert build == ["build", "--platform", "linux/amd64", "--tag", tag, "--file", str(recipe), str(recipe.parent)]
    assert version == [
        "run",
        "--rm",
        "--platform",
        "linux/amd64",
        "--network",
        "none",
        tag,
        "edgetpu_compiler",
        "--version",
    ]
    name_arg = run[run.index("--name") + 1]
    mounts = [run[i + 1] for i, a in enumerate(run) if a == "--mount"]
    private = Path(mounts[1].split(",")[1][len("source=") :])
    assert private.parent == (tmp_path / "there").resolve() and private.name.startswith(".edgekit-compile-")
    keep_id = ["--userns=keep-id"] if name == "podman" else []  # the stand-in podman says it is rootless
    assert run == [
        "run",
        "--rm",
        "--name",
        name_arg,
        "--platform",
        "linux/amd64",
        "--network",
        "none",
        *keep_id,
        "--user",
        f"{os.getuid()}:{os.getgid()}",
        "--mount",
        f"type=bind,source={model.resolve()},target=/in/{MODEL}.tflite,readonly",
        "--mount",
        f"type=bind,source={private},target=/out",
        "--workdir",
        "/out",
        tag,
        "edgetpu_compiler",
        "--out_dir",
        "/out",
        "--show_operations",
        "--timeout_sec",
        "180",
        f"/in/{MODEL}.tflite",
    ]
    assert name_arg.startswith("edgekit-compile-")
    assert json.loads(there.stdout)["command"][1:] == run
    assert not private.exists()  # the private folder, mounted writable, is gone
    again = invoke("compile", str(model), "-o", str(tmp_path / "again"), "--via", name, "--segments", "2")
    assert again.exit_code == 0, again.output
    later = [c for c in engine.log()[len(log) :] if c[0] != "info"]
    assert [c[0] for c in later] == ["image", "run", "run"]  # the image is there now: not built again
    assert later[2][later[2].index("--num_segments") :][:2] == ["--num_segments", "2"]


def test_a_missing_image_is_built_once_with_one_status_line(engine, model, tmp_path):
    import edgekit
    from edgekit.report import Collector

    told = Collector()
    edgekit.compile(model, output_dir=tmp_path / "a", via="docker", report=told)
    building = [line for line in told.statuses if line.startswith("building the compiler image")]
    assert len(building) == 1 and compile_via.image_tag() in building[0]
    told = Collector()
    edgekit.compile(model, output_dir=tmp_path / "b", via="docker", report=told)
    assert not any(line.startswith("building") for line in told.statuses)  # there now: not built again
    assert [c[0] for c in engine.log()].count("build") == 1


def test_via_a_container_a_failure_fails_as_the_same_local_one(engine, model, tmp_path):
    engine.standin(STDOUT="v16_large_activations.txt", EXIT=1, WRITE=0)
    local = invoke("compile", str(model), "-o", str(tmp_path / "here"), "--json")
    there = invoke("compile", str(model), "-o", str(tmp_path / "there"), "--via", "docker", "--json")
    assert local.exit_code == there.exit_code == 8
    assert there.stderr.splitlines()[-1] == local.stderr.splitlines()[-1]
    _same_document(json.loads(local.stdout), json.loads(there.stdout), tmp_path / "here", tmp_path / "there")


def test_via_a_container_a_timeout_kills_the_container(engine, model, tmp_path, monkeypatch):
    engine.standin(SLEEP=60)
    monkeypatch.setattr(compile_via.ContainerCompiler, "START_S", 0.0)  # (a minute for the container to start)
    r = invoke("compile", str(model), "-o", str(tmp_path / "there"), "--via", "docker", "--timeout", "1")
    assert r.exit_code == 8 and "did not finish within --timeout 1 s and was stopped" in r.stderr, r.output
    run = engine.log()[3]
    assert engine.log()[-1] == ["kill", run[run.index("--name") + 1]]


def test_via_a_container_without_the_engine_or_its_image_is_exit_4(engine, model, tmp_path, monkeypatch):
    stopped = tmp_path / "stopped-bin"  # a docker CLI whose daemon is not running (as on this test machine)
    stopped.mkdir()
    _script(
        stopped / "docker",
        "#!/bin/sh\necho '[]'\necho 'Cannot connect to the Docker daemon at "
        "unix:///var/run/docker.sock. Is the docker daemon running?' >&2\nexit 1\n",
    )
    with monkeypatch.context() as m:
        m.setenv("PATH", f"{stopped}{os.pathsep}{os.environ['PATH']}")
        r = invoke("compile", str(model), "--via", "docker")
    assert r.exit_code == 4 and "--via docker: docker does not work here (Cannot connect" in r.stderr, r.output
    assert "start it" in r.stderr
    monkeypatch.setenv("STANDIN_ENGINE_BUILD_EXIT", "100")
    r = invoke("compile", str(model), "--via", "docker")
    assert r.exit_code == 4 and "building the compiler image failed" in r.stderr, r.output
    assert "Unable to locate package edgetpu-compiler" in r.stderr
    monkeypatch.setenv("PATH", "/nonexistent")
    r = invoke("compile", str(model), "--via", "podman")
    assert r.exit_code == 4 and "no podman on PATH" in r.stderr, r.output


@pytest.mark.parametrize(
    "engine_name, uid, says, extra",
    [
        ("docker", 1000, None, []),
        ("podman", 1000, "true", ["--userns=keep-id"]),
        ("podman", 0, "false", []),
        ("podman", 501, "false", []),  # a rootful `podman machine` on macOS: keep-id is refused there
        ("podman", 1000, None, ["--userns=keep-id"]),
        ("podman", 0, None, []),
    ],
)  # no answer: the uid decides
def test_rootless_podman_keeps_the_users_id_and_rootful_podman_does_not(monkeypatch, engine_name, uid, says, extra):
    """(Fails on the old code for the rootful podman machine: it decided by the uid alone.)"""
    from edgekit.edgetpu.compiler import RunResult

    monkeypatch.setattr(os, "getuid", lambda: uid)
    monkeypatch.setattr(os, "getgid", lambda: uid)
    asked = []

    def run(argv, timeout):
        asked.append(argv[1:])
        return RunResult(0, f"{says}\n", "") if says else RunResult(125, "", "Error: unknown flag: --format")

    container = compile_via.ContainerCompiler(engine_name, run=run)
    for _ in range(2):
        argv = container.run_argv("/usr/bin/x", "n", Path("/o"), Path("/m/a.tflite"), [])
        assert argv[argv.index("none") + 1 : argv.index("--mount")] == [*extra, "--user", f"{uid}:{uid}"]
    assert asked == ([["info", "--format", "{{.Host.Security.Rootless}}"]] if engine_name == "podman" else [])


def test_compile_via_needs_no_tensorflow(engine, model, light):
    """From a Mac or a Pi with the light install: --via loads neither TensorFlow nor Keras."""
    r = light("compile", str(model), "-o", str(model.parent / "out"), "--via", "docker")
    assert r.returncode == 0, r.stderr
    assert (model.parent / "out" / f"{MODEL}_edgetpu.tflite").is_file()


def test_the_image_recipe_pins_what_it_pulls():
    recipe = (Path(compile_via.__file__).parent / "compiler_image" / "Dockerfile").read_text()
    froms = [line for line in recipe.splitlines() if line.startswith("FROM ")]
    assert len(froms) == 1 and "--platform=linux/amd64" in froms[0]
    assert re.search(r"@sha256:[0-9a-f]{64}$", froms[0])  # the base image by digest
    assert "ARG EDGETPU_COMPILER_VERSION=16.0\n" in recipe
    assert '"edgetpu-compiler=${EDGETPU_COMPILER_VERSION}"' in recipe  # the compiler by version
    assert "[signed-by=/etc/apt/keyrings/coral-edgetpu.gpg]" in recipe and "apt-key add" not in recipe
    assert compile_via.image_tag().startswith("edgekit-edgetpu-compiler:16.0-")


def test_one_keyring_for_the_image_doctors_fix_compiles_hint_and_the_docs():
    """Coral's key in one place: the image's recipe, doctor's apt-source fix, compile's install hint and
    docs/commands/compile.md. (Fails on the old code: the hint, doctor and the docs wrote coral.gpg, the
    recipe coral-edgetpu.gpg.)"""
    from edgekit.doctor import rules as doctor_rules
    from edgekit.edgetpu import compiler_locator as L

    recipe = (Path(compile_via.__file__).parent / "compiler_image" / "Dockerfile").read_text()
    docs = (REPO / "docs" / "commands" / "compile.md").read_text()
    written = f"[signed-by={L.CORAL_KEYRING}]"
    for text in (recipe, doctor_rules.APT_FIX, L.INSTALL_HINT, docs):
        assert written in text and f"-o {L.CORAL_KEYRING}" in text and L.CORAL_LIST in text
        assert set(re.findall(r"/etc/apt/keyrings/[\w.-]+", text)) == {L.CORAL_KEYRING}


# --------------------------------------------------------------------------------------- helpers
def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for this purpose
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def _wait_until(condition, what: str, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {seconds:g} s: {what}")
        time.sleep(0.1)


@pytest.mark.parametrize(
    "said, words",
    [
        ("ssh: connect to host h port 22: Connection refused", "that the compile host is powered"),
        ("Permission denied (publickey).", "ssh-copy-id u@h"),
        ("@@@ REMOTE HOST IDENTIFICATION HAS CHANGED! @@@", "the compile host may have been reinstalled"),
    ],
)
def test_ssh_failures_of_compile_via_name_the_compile_host_not_a_board(said, words):
    """(Fails on the old code: its hints said "board" and `mdt pushkey`, a Dev Board's tool, and --port,
    which compile does not take.)"""
    from edgekit.devices.remote import explain_ssh_failure

    target = compile_via.parse_via("ssh://u@h").runner.target
    err = explain_ssh_failure(said, target)
    text = f"{err.message} {err.hint}"
    assert words in text and "board" not in text and "--port" not in text and "mdt" not in text, text


def test_the_ssh_options_of_compile_say_host_where_they_mean_the_compile_host():
    """(Fails on the old code: --known-hosts and --accept-new-host-key reused deploy's help, about a board.)"""
    from edgekit import flags

    for command in ("compile", "build"):
        helps = {
            o.name: o.help
            for o in flags.COMMANDS[command]
            if o.name in ("identity", "known_hosts", "accept_new_host_key", "connect_timeout")
        }
        assert len(helps) == 4 and not any("board" in h for h in helps.values()), helps
        assert all("compile host" in helps[n] for n in ("known_hosts", "accept_new_host_key", "connect_timeout"))


def test_build_refuses_a_connect_timeout_without_via_ssh_and_writes_nothing(model, tmp_path):
    """(Fails on the old code: build took --connect-timeout without --via and ignored it.)"""
    r = invoke("build", str(model), "-o", str(tmp_path / "bundle"), "--connect-timeout", "5")
    assert r.exit_code == 2 and "--connect-timeout need --via ssh://USER@HOST" in r.stderr, r.output
    assert not (tmp_path / "bundle").exists()
