"""``compile --via`` / ``build --via``: run edgetpu_compiler elsewhere, behind compile's runner seam.

Two kinds of elsewhere:

* ``ssh://USER@HOST[:PORT]``: an x86-64 Linux machine with the compiler, reached through deploy's SSH layer
  (:class:`edgekit.devices.remote.SshTarget`: the system's OpenSSH, key or agent login only, host keys
  checked as strictly as ``deploy`` checks them). One connection copies the model into a private folder there
  (``mktemp -d``), compiles, sends back what the compiler wrote and said, and removes the folder, whether the
  compile succeeded, failed or timed out; if this end goes away (Ctrl-C, a stop signal, a lost link), the
  remote side sees its input close, stops the compiler and removes the folder too.
* ``docker`` / ``podman``: Coral's compiler 16.0 in a linux/amd64 image built from the recipe shipped with
  edgekit (``compiler_image/Dockerfile``: its base image pinned by digest, the compiler by version), run with
  ``--network none``, the model mounted read-only and the private output folder writable, as this user.

Either is a :data:`~edgekit.edgetpu.compiler.Runner`: ``compile_model`` builds the compiler's
argument list as for a local compiler, the runner carries the model there and the files the compiler wrote
back into the local private folder, and everything after it (the checks of the exit code and the output, the
log parsing, the move into place, the exit codes) is the local compile's, unchanged.

It drives ``devices/`` (SSH) for ``converters/`` (the compile), so it sits above both, beside ``build``.
"""

from __future__ import annotations

import hashlib
import io
import math
import os
import re
import shlex
import shutil
import tarfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TypedDict

from edgekit.edgetpu.compiler import TIMEOUT_HINT, CompilerTimeout, Runner, RunResult, run_subprocess
from edgekit.edgetpu.compiler_locator import parse_version
from edgekit.errors import DeviceError, EdgekitError, MissingDependencyError, UsageError
from edgekit.report import SILENT, Reporter
from edgekit.ssh import RemoteTimeout, SshTarget


class _TimeoutOption(TypedDict, total=False):
    """SshTarget's connect_timeout when one was given (else SshTarget's own default)."""

    connect_timeout: float


COMPILER = "edgetpu_compiler"  # its name on the host or in the image (on PATH there)
VIA_HINT = "use --via ssh://USER@HOST[:PORT] (an x86-64 Linux machine with edgetpu_compiler), docker or podman"
_SSH_URL = re.compile(r"^ssh://(?P<destination>[^/:?#\s]+)(?::(?P<port>[0-9]{1,5}))?/?$")
REMOTE_INSTALL_HINT = (
    "install it there (Debian/Ubuntu x86-64: Coral's apt repository, `sudo apt-get install "
    "edgetpu-compiler`; see docs/commands/compile.md) and make sure `edgetpu_compiler` is on the "
    "PATH of a non-interactive login (`ssh USER@HOST edgetpu_compiler --version`)"
)


@dataclass(frozen=True)
class Elsewhere:
    """A compiler elsewhere: ``where`` it is (as the user wrote it), the compiler's name there and the runner."""

    where: str
    compiler: str
    runner: Runner


SSH_OPTIONS = "--identity, --known-hosts, --accept-new-host-key and --connect-timeout"


def _timeout_given(connect_timeout: float | None) -> bool:
    """A --connect-timeout other than the command line's default (which every call passes)."""
    from edgekit.flags import default

    return connect_timeout is not None and connect_timeout != default("compile", "connect_timeout")


def parse_via(
    via: str,
    *,
    identity: str | None = None,
    known_hosts: str | None = None,
    accept_new_host_key: bool = False,
    connect_timeout: float | None = None,
    report: Reporter = SILENT,
) -> Elsewhere:
    """``--via`` (and the SSH options that go with ``ssh://``) as the compiler elsewhere; UsageError for anything
    else. Nothing is contacted yet."""
    ssh_options = (
        identity is not None or known_hosts is not None or accept_new_host_key or _timeout_given(connect_timeout)
    )
    m = _SSH_URL.match(via)
    if m:
        port = int(m.group("port")) if m.group("port") else None
        if port is not None and not 1 <= port <= 65535:
            raise UsageError(f"--via {via}: port {port} is not a TCP port", "use a port from 1 to 65535")
        extra: _TimeoutOption = {} if connect_timeout is None else {"connect_timeout": connect_timeout}
        target = SshTarget(
            m.group("destination"),
            port=port,
            identity=identity,
            known_hosts=known_hosts,
            accept_new_host_key=accept_new_host_key,
            noun="compile host",
            **extra,
        )
        return Elsewhere(via, COMPILER, SshCompiler(target, report))
    if ssh_options:
        raise UsageError(f"{SSH_OPTIONS} need --via ssh://USER@HOST", "leave them out, or compile through an SSH host")
    if via in ("docker", "podman"):
        return Elsewhere(via, COMPILER, ContainerCompiler(via, report))
    raise UsageError(f"--via {via!r}: not a place edgekit can compile", VIA_HINT)


def elsewhere(
    via: str | None,
    identity: str | os.PathLike | None = None,
    known_hosts: str | os.PathLike | None = None,
    accept_new_host_key: bool = False,
    connect_timeout: float | None = None,
    report: Reporter = SILENT,
) -> Elsewhere | None:
    """The compiler elsewhere ``via`` names (None: compile here).

    The SSH options without ``--via ssh://`` are a usage error (a local compile would ignore them)."""
    identity = None if identity is None else os.fspath(identity)
    known_hosts = None if known_hosts is None else os.fspath(known_hosts)
    if via is None:
        if identity is not None or known_hosts is not None or accept_new_host_key or _timeout_given(connect_timeout):
            raise UsageError(
                f"{SSH_OPTIONS} need --via ssh://USER@HOST",
                "add --via ssh://USER@HOST, or leave them out for a local compile",
            )
        return None
    return parse_via(
        via,
        identity=identity,
        known_hosts=known_hosts,
        accept_new_host_key=accept_new_host_key,
        connect_timeout=connect_timeout,
        report=report,
    )


def _split(argv: list[str]) -> tuple[Path, Path, list[str]]:
    """compile_model's argument list: (the local output folder after --out_dir, the model (last), the options)."""
    i = argv.index("--out_dir")
    return Path(argv[i + 1]), Path(argv[-1]), argv[1:i] + argv[i + 2 : -1]


# ------------------------------------------------------------------------------------------ ssh
# Exit codes of the remote script for what is not the compiler's own answer.
_NO_COMPILER, _NO_TOOL, _SHORT_COPY = 96, 97, 98
_TIMED_OUT = 124  # GNU timeout's code for a command it stopped
_REMOTE_SCRIPT = """\
for t in mktemp timeout tar head wc; do command -v "$t" >/dev/null 2>&1 || {{ echo "no $t" >&2; exit 97; }}; done
command -v {compiler} >/dev/null 2>&1 || exit 96
umask 077
d=$(mktemp -d "${{TMPDIR:-/tmp}}/edgekit-compile.XXXXXXXXXX") || exit 97
c= w=
trap 'kill $c $w 2>/dev/null; [ -n "$c" ] && wait $c 2>/dev/null; rm -rf "$d"' EXIT
trap 'exit 130' HUP INT TERM PIPE
exec 3<&0
mkdir "$d/out" && head -c {size} > "$d/"{name} && [ "$(wc -c < "$d/"{name})" -eq {size} ] || exit 98
cat <&3 >/dev/null 2>&1 &
w=$!
timeout -k 5 {seconds} {compiler} --out_dir "$d/out" {options} "$d/"{name} </dev/null >"$d/stdout" 2>"$d/stderr" &
c=$!
while kill -0 $c 2>/dev/null; do
  kill -0 $w 2>/dev/null || exit 130
  sleep 1
done
wait $c
echo $? > "$d/rc"
c=
printf '%s\\n' "$d" > "$d/where"
tar -C "$d" -cf - rc where stdout stderr out
"""


def _sh(script: str) -> str:
    """``script`` run by ``sh`` whatever the login shell is (fish, zsh, csh read it otherwise)."""
    return f"sh -c {shlex.quote(script)}"


class SshCompiler:
    """edgetpu_compiler on another machine, over SSH: a runner for compile_model.

    ``[name, "--version"]`` asks the host for its compiler's version; any other argument list is a compile
    (see the module's docstring). ``run`` is the seam to SSH (:meth:`SshTarget.run`)."""

    def __init__(self, target: SshTarget, report: Reporter = SILENT):
        self.target, self.report = target, report

    @property
    def where(self) -> str:
        return f"ssh://{self.target.destination}" + (f":{self.target.port}" if self.target.port else "")

    def __call__(self, argv: list[str], timeout: float) -> RunResult:
        if argv[1:] == ["--version"]:
            return self._version(timeout)
        return self._compile(argv, timeout)

    def _version(self, timeout: float) -> RunResult:
        script = _sh(f"command -v {COMPILER} >/dev/null 2>&1 || exit {_NO_COMPILER}; exec {COMPILER} --version")
        try:
            proc = self.target.run(
                script, timeout=timeout + self.target.connect_timeout, what=f"`{COMPILER} --version`"
            )
        except RemoteTimeout:
            raise CompilerTimeout(f"{COMPILER} --version on {self.target.destination} did not answer", "") from None
        said = (proc.stdout + proc.stderr).decode(errors="replace")
        if proc.returncode == _NO_COMPILER:
            raise MissingDependencyError(
                f"no {COMPILER} on {self.target.host} (not on the PATH of a "
                f"non-interactive login as {self.target.destination})",
                REMOTE_INSTALL_HINT,
            )
        if parse_version(said) is None:
            last = said.strip().splitlines()[-1:] or ["nothing"]
            raise MissingDependencyError(
                f"{COMPILER} on {self.target.host} is not a working compiler: "
                f"`--version` exited {proc.returncode} and printed {last[0][:80]!r}",
                REMOTE_INSTALL_HINT,
            )
        return RunResult(proc.returncode, proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace"))

    def _compile(self, argv: list[str], timeout: float) -> RunResult:
        out_dir, model, options = _split(argv)
        data = model.read_bytes()
        seconds = max(1, math.ceil(timeout))
        script = _sh(
            _REMOTE_SCRIPT.format(
                compiler=COMPILER,
                size=len(data),
                name=shlex.quote(model.name),
                seconds=seconds,
                options=" ".join(map(shlex.quote, options)),
            )
        )
        self.report.status(f"copying {model.name} to {self.target.destination} to compile it there...")
        # The whole connection: the remote timeout, the login, and the model both ways at 0.5 MB/s at worst.
        allowed = seconds + 10 + self.target.connect_timeout + 60 + 4 * len(data) / 1e6
        read_fd, write_fd = os.pipe()
        feeder = _feed_and_hold(write_fd, data)
        try:
            proc = self.target.run(
                script, read_fd, timeout=allowed, what="compiling", max_stdout=3 * len(data) + (64 << 20)
            )
        except RemoteTimeout:
            raise CompilerTimeout(
                f"compiling on {self.target.destination} did not finish within {allowed:g} s and was stopped",
                TIMEOUT_HINT,
            ) from None
        finally:
            os.close(read_fd)
            feeder.release()
        self._refuse_failure(proc.returncode, proc.stderr.decode(errors="replace"))
        files = _read_tar(proc.stdout, self.target.destination)
        return self._result(files, out_dir, model, options, timeout)

    def _refuse_failure(self, code: int, stderr: str) -> None:
        """The remote script's own failures (not the compiler's): one line each."""
        if code == 0:
            return
        last = stderr.strip().splitlines()[-1:] or [f"exit {code}"]
        if code == _NO_COMPILER:
            raise MissingDependencyError(f"no {COMPILER} on {self.target.host}", REMOTE_INSTALL_HINT)
        if code == _NO_TOOL:
            raise MissingDependencyError(
                f"{self.target.host} cannot hold a private folder to compile in ({last[0]})",
                "edgekit needs mktemp, timeout, tar, head and wc there (coreutils and tar, on any Debian/Ubuntu)",
            )
        if code == _SHORT_COPY:
            raise DeviceError(
                f"copying the model to {self.target.destination} failed ({last[0]})",
                "check the free space in /tmp (or $TMPDIR) there",
            )
        raise DeviceError(
            f"compiling on {self.target.destination} failed: {last[0]} (exit {code})",
            "run `edgekit compile` again with --debug; check that the host is a Linux machine",
        )

    def _result(
        self, files: dict[str, bytes], out_dir: Path, model: Path, options: list[str], timeout: float
    ) -> RunResult:
        """What the compiler said, with the files it wrote put into ``out_dir``."""
        for name, content in files.items():
            if name.startswith("out/"):
                (out_dir / name[len("out/") :]).write_bytes(content)
        try:
            returncode = int(files["rc"].decode(errors="replace").strip())
        except ValueError:
            raise DeviceError(
                f"{self.target.destination} sent back no exit code of the compiler ({files['rc'][:40]!r})", _RERUN_HINT
            ) from None
        if returncode == _TIMED_OUT:
            raise CompilerTimeout(
                f"{COMPILER} did not finish within {timeout:g} s on {self.target.destination} and was stopped",
                TIMEOUT_HINT,
            )
        where = PurePosixPath(files["where"].decode(errors="replace").strip())
        command = [self.where, COMPILER, "--out_dir", str(where / "out"), *options, str(where / model.name)]
        return RunResult(
            returncode, files["stdout"].decode(errors="replace"), files["stderr"].decode(errors="replace"), command
        )


class _Held:
    """The write end of ssh's input: the model, then held open until the compile is over (the remote side
    takes its closing as this end going away)."""

    def __init__(self, fd: int, thread: object):
        self.fd, self.thread = fd, thread

    def release(self) -> None:
        try:
            os.close(self.fd)
        except OSError:
            pass


def _feed_and_hold(fd: int, data: bytes) -> _Held:
    import threading

    def write() -> None:
        view = memoryview(data)
        try:
            while view:
                n = os.write(fd, view[: 1 << 16])
                view = view[n:]
        except OSError:  # the other end went away: what ssh says tells why
            pass

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return _Held(fd, thread)


_TAR_NAMES = ("rc", "where", "stdout", "stderr")


def _read_tar(data: bytes, destination: str) -> dict[str, bytes]:
    """The remote folder's files as sent back: rc, where, stdout, stderr and out/<file> (regular files only,
    no paths below out/); anything else is a malformed answer (DeviceError)."""
    malformed = f"{destination} sent back a malformed archive of the compile"
    files: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            for member in tar:
                name = member.name.rstrip("/")
                if name == "out" and member.isdir():
                    continue
                inside = name[len("out/") :] if name.startswith("out/") else None
                if not member.isfile() or (
                    name not in _TAR_NAMES and (not inside or "/" in inside or inside in (".", ".."))
                ):
                    raise DeviceError(f"{malformed} ({name!r} is not a file it writes)", _RERUN_HINT)
                content = tar.extractfile(member)
                if content is None:  # a regular file member always has its content
                    raise DeviceError(f"{malformed} ({name!r} cannot be read)", _RERUN_HINT)
                files[name] = content.read()
    except (tarfile.TarError, EOFError) as exc:
        raise DeviceError(f"{malformed} ({exc})", _RERUN_HINT) from None
    missing = [n for n in _TAR_NAMES if n not in files]
    if missing:
        raise DeviceError(f"{malformed} (no {', '.join(missing)})", _RERUN_HINT)
    return files


_RERUN_HINT = (
    "make the host's login scripts quiet for non-interactive shells, and run the compile again (with --debug for more)"
)


# ------------------------------------------------------------------------------------ containers
IMAGE_RECIPE = Path(__file__).resolve().parent / "compiler_image" / "Dockerfile"
PLATFORM = "linux/amd64"
BUILD_TIMEOUT_S = 3600.0
_ENGINE_HINT = {
    "docker": "install Docker (Docker Desktop on macOS and Windows; docker.io or Docker's packages on Linux) and "
    "start it",
    "podman": "install Podman (brew install podman && podman machine init && podman machine start on macOS; "
    "apt-get install podman on Debian/Ubuntu)",
}
EMULATION_HINT = (
    "this host cannot run linux/amd64 containers yet: on Linux ARM register QEMU's x86-64 emulator "
    "(sudo apt-get install qemu-user-static binfmt-support, or docker run --privileged --rm "
    "tonistiigi/binfmt --install amd64); on macOS Docker Desktop and Podman emulate it out of the box"
)


# How docker ("No such image") and podman ("image not known") say that an image is not there.
_NO_IMAGE = re.compile(r"no such image|image not known|not found", re.I)


def image_tag() -> str:
    """The image's name: the compiler's version and the recipe's sha256, so a changed recipe builds anew."""
    digest = hashlib.sha256(IMAGE_RECIPE.read_bytes()).hexdigest()[:12]
    return f"edgekit-edgetpu-compiler:16.0-{digest}"


class ContainerCompiler:
    """edgetpu_compiler in edgekit's linux/amd64 image, run by ``docker`` or ``podman``: a runner for
    compile_model. ``run`` is the seam that starts the engine (:func:`run_subprocess`)."""

    #: seconds allowed on top of the compile's for the container to start (emulated: a few seconds, slower at first)
    START_S = 60.0

    def __init__(
        self, engine: str, report: Reporter = SILENT, run: Callable[[list[str], float], RunResult] = run_subprocess
    ):
        self.engine, self.report, self.run = engine, report, run
        self._ready = False
        self._rootless: bool | None = None  # podman's own answer, asked once

    def exe(self) -> str:
        found = shutil.which(self.engine)
        if found is None:
            raise MissingDependencyError(f"--via {self.engine}: no {self.engine} on PATH", _ENGINE_HINT[self.engine])
        return found

    def __call__(self, argv: list[str], timeout: float) -> RunResult:
        exe = self.exe()
        self._ensure_image(exe)
        if argv[1:] == ["--version"]:
            return self._version(exe, timeout)
        out_dir, model, options = _split(argv)
        for path in (out_dir.resolve(), model.resolve()):
            if "," in str(path) or "\n" in str(path):
                raise UsageError(
                    f"--via {self.engine} cannot mount {path}: a ',' or a line break in a path "
                    "splits the engine's --mount option",
                    "move or link the model (and -o) to a plainer path",
                )
        name = f"edgekit-compile-{uuid.uuid4().hex[:12]}"
        command = self.run_argv(exe, name, out_dir.resolve(), model.resolve(), options)
        self.report.status(
            f"starting the {PLATFORM} compiler container with {self.engine} "
            "(emulated on ARM and macOS: slower than on x86-64)..."
        )
        try:
            res = self.run(command, timeout + self.START_S)
        except BaseException:  # a timeout, Ctrl-C: the engine's client is stopped, the container is not
            self._kill(exe, name)
            raise
        return RunResult(res.returncode, res.stdout, res.stderr, command)

    def run_argv(self, exe: str, name: str, out_dir: Path, model: Path, options: list[str]) -> list[str]:
        """The engine's command line: no network, this user, the model read-only, the output folder writable.

        Rootless Podman maps the container's users into the host's subordinate ids: ``--userns=keep-id`` keeps
        this user's id, so that the files it writes are this user's. Rootful Podman (run as root, or a rootful
        ``podman machine`` on macOS) refuses keep-id: it gets ``--user`` alone."""
        user = ["--user", f"{os.getuid()}:{os.getgid()}"] if hasattr(os, "getuid") else []
        if user and self.engine == "podman" and self.podman_rootless(exe):
            user = ["--userns=keep-id", *user]
        return [
            exe,
            "run",
            "--rm",
            "--name",
            name,
            "--platform",
            PLATFORM,
            "--network",
            "none",
            *user,
            "--mount",
            f"type=bind,source={model},target=/in/{model.name},readonly",
            "--mount",
            f"type=bind,source={out_dir},target=/out",
            "--workdir",
            "/out",
            image_tag(),
            COMPILER,
            "--out_dir",
            "/out",
            *options,
            f"/in/{model.name}",
        ]

    def podman_rootless(self, exe: str) -> bool:
        """Whether Podman runs rootless, as it says itself (``podman info``); its uid says so where it cannot
        answer (a non-root user of a rootful ``podman machine`` is not root here)."""
        if self._rootless is None:
            said = self._engine([exe, "info", "--format", "{{.Host.Security.Rootless}}"], 60)
            answer = said.stdout.strip().lower() if said.returncode == 0 else ""
            self._rootless = answer == "true" if answer in ("true", "false") else os.getuid() != 0
        return self._rootless

    def _version(self, exe: str, timeout: float) -> RunResult:
        command = [exe, "run", "--rm", "--platform", PLATFORM, "--network", "none", image_tag(), COMPILER, "--version"]
        res = self.run(command, timeout + self.START_S)
        said = res.stdout + res.stderr
        if parse_version(said) is None:
            last = said.strip().splitlines()[-1:] or ["nothing"]
            hint = EMULATION_HINT if "exec format error" in said.lower() else _ENGINE_HINT[self.engine]
            raise MissingDependencyError(
                f"--via {self.engine}: the compiler image did not run (exit {res.returncode}: {last[0][:200]})", hint
            )
        return res

    def _ensure_image(self, exe: str) -> None:
        """Build the image from edgekit's recipe when the engine does not have it (once)."""
        if self._ready:
            return
        tag = image_tag()
        inspected = self._engine([exe, "image", "inspect", tag], 60)
        # Both engines print "[]" on stdout when they find no image (or cannot ask): the reason is on stderr.
        said = inspected.stderr.strip().splitlines()[-1:] or [f"exit {inspected.returncode}"]
        if inspected.returncode != 0 and not _NO_IMAGE.search(inspected.stderr):  # the engine itself failed
            raise MissingDependencyError(
                f"--via {self.engine}: {self.engine} does not work here ({said[0][:200]})", _ENGINE_HINT[self.engine]
            )
        if inspected.returncode != 0:
            self.report.status(
                f"building the compiler image {tag} with {self.engine} from "
                f"{IMAGE_RECIPE} (once; it downloads Debian and Coral's compiler)..."
            )
            built = self._engine(
                [
                    exe,
                    "build",
                    "--platform",
                    PLATFORM,
                    "--tag",
                    tag,
                    "--file",
                    str(IMAGE_RECIPE),
                    str(IMAGE_RECIPE.parent),
                ],
                BUILD_TIMEOUT_S,
            )
            if built.returncode != 0:
                said = (built.stdout + built.stderr).strip().splitlines()[-1:] or [f"exit {built.returncode}"]
                raise MissingDependencyError(
                    f"--via {self.engine}: building the compiler image failed ({said[0][:200]})",
                    _ENGINE_HINT[self.engine] + "; it needs the "
                    "network once, to fetch Debian and Coral's apt repository",
                )
        self._ready = True

    def _engine(self, argv: list[str], timeout: float) -> RunResult:
        """One engine command that is not the compiler; its hang is a missing dependency (exit 4), not a compile
        timeout."""
        try:
            return self.run(argv, timeout)
        except CompilerTimeout:
            raise MissingDependencyError(
                f"`{self.engine} {argv[1]}` did not answer within {timeout:g} s", _ENGINE_HINT[self.engine]
            ) from None

    def _kill(self, exe: str, name: str) -> None:
        try:
            self.run([exe, "kill", name], 30)
        except (EdgekitError, OSError):  # best effort: the first error is the one to report
            pass
