"""SSH to another machine: the one transport of deploy, of running on a board, and of ``compile --via ssh://``.

SSH is the system OpenSSH client (``ssh`` in a subprocess: no new dependency, and the user's ``~/.ssh/config``,
agent and keys work as they do in a shell). Every connection is made with ``BatchMode=yes`` (no password or
passphrase prompt: key or agent authentication only), host keys checked against known_hosts
(``StrictHostKeyChecking=yes``; ``accept-new`` only with ``--accept-new-host-key``, which still refuses a changed
key), and a connect timeout; each remote command has its own timeout. ssh's failures become one DeviceError line
(exit 9) that says which: unreachable host, unknown or changed host key, refused login.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgekit.errors import DeviceError, InputError, MissingDependencyError, UsageError
from edgekit.flags import default as _cli

# Runs the runner's source sent on stdin (first line: its length in bytes), leaving the rest of stdin to it.
_BOOTSTRAP = "import sys;b=sys.stdin.buffer;n=int(b.readline());exec(compile(b.read(n),'edgekit-board-runner','exec'))"
# user@host, both parts from a safe set and neither starting with '-' (ssh would take it as an option).
_DESTINATION = re.compile(r"^(?:[A-Za-z0-9_][A-Za-z0-9_.\-]*@)?[A-Za-z0-9_][A-Za-z0-9_.\-]*$")
# What ssh cannot be given inside a file option's value: its config parser's quote and escape characters
# and line breaks (ssh_config(5) splits values at whitespace, honouring "..." quotes).
_UNQUOTABLE = re.compile(r'["\\\x00-\x1f\x7f]')


def ssh_path(path: str, flag: str) -> str:
    """A file path as ssh's options take it whole: absolute (no ``~`` expansion), ``%`` doubled (ssh expands
    ``%h``-style tokens in file options), double-quoted (a space would split UserKnownHostsFile into two
    files). A path with a double quote, a backslash or a control character is refused (UsageError):
    no quoting carries those through every OpenSSH version, and ``${...}`` (ssh expands environment
    variables there) likewise."""
    if _UNQUOTABLE.search(path) or "${" in path:
        raise UsageError(
            f"{flag} {path!r}: ssh cannot be given a path holding a double quote, a backslash, a "
            "control character or ${",
            f"move or link the file to a plainer path and pass that to {flag}",
        )
    return os.path.abspath(path).replace("%", "%%")


# How much of a board's answer is read (OpenSSH's sftp likewise refuses a message over its 256 KiB bound rather
# than allocating what the server announces). stdout holds one JSON document: MAX_STDOUT for a listing, more for
# classify and benchmark by what was asked (see classify_stdout_bound, benchmark_stdout_bound); stderr holds
# the runner's notes and at most one error line.
MAX_STDOUT = 16 << 20
MAX_STDERR = 1 << 20
ANSWER_TOO_LONG_HINT = (
    "the runner answers with one JSON document; something on the board prints without end: "
    "make its login scripts quiet for non-interactive shells, and deploy the bundle again so "
    "the board runs this edgekit's runner"
)
HOST_TOO_LONG_HINT = (
    "make the host's login scripts quiet for non-interactive shells (nothing may print on their "
    "stdout), and run the compile again"
)


def _size(n: int) -> str:
    return f"{n / 2**20:g} MiB" if n >= 2**20 else f"{n:,} bytes"


class _Capture:
    """Reads one of ssh's output pipes in a thread, up to ``limit`` bytes; past it, stops ssh."""

    def __init__(self, proc: subprocess.Popen, pipe: Any, limit: int):
        import threading

        self.proc, self.pipe, self.limit = proc, pipe, limit
        self.data = bytearray()
        self.overflow = False
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            while True:
                chunk = self.pipe.read1(1 << 16) if hasattr(self.pipe, "read1") else self.pipe.read(1 << 16)
                if not chunk:
                    return
                if len(self.data) + len(chunk) > self.limit:
                    self.overflow = True
                    self.proc.kill()
                    return
                self.data += chunk
        except (OSError, ValueError):
            return
        finally:
            self.pipe.close()


def _feed(pipe: Any, data: bytes) -> Any:
    """Writes ``data`` to ssh's stdin in a thread, then closes it (a board that stops reading is not an error here:
    what it answers says)."""
    import threading

    def write() -> None:
        try:
            pipe.write(data)
        except (OSError, ValueError):
            pass
        finally:
            try:
                pipe.close()
            except (OSError, ValueError):
                pass

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


class RemoteTimeout(DeviceError):
    """A remote command ran past its timeout, and ssh was stopped."""


@dataclass(frozen=True)
class SshTarget:
    """Where and how to connect: ``user@host`` and the options of ``deploy --to`` / ``classify --on``."""

    destination: str
    port: int | None = None
    identity: str | None = None
    known_hosts: str | None = None
    accept_new_host_key: bool = False
    connect_timeout: float = _cli("deploy", "connect_timeout")  # the command line's SSH defaults
    timeout: float = _cli("deploy", "timeout")
    python: str = _cli("deploy", "python")
    #: what the machine is, in messages and hints: "board" (deploy, --on) or "compile host" (compile --via ssh://)
    noun: str = "board"

    def __post_init__(self) -> None:
        if not _DESTINATION.match(self.destination):
            raise UsageError(
                f"not an SSH destination: {self.destination!r}",
                "use user@host (letters, digits, '.', '_', '-'; neither part starting with '-'), "
                "e.g. mendel@192.168.100.2",
            )
        for flag, path in (("--identity", self.identity), ("--known-hosts", self.known_hosts)):
            if path is not None:
                ssh_path(path, flag)
        if self.identity is not None and not Path(self.identity).is_file():
            raise InputError(f"--identity {self.identity}: no such key file", "check the path to the private key")
        if self.known_hosts is not None and not Path(self.known_hosts).parent.is_dir():
            raise InputError(
                f"--known-hosts {self.known_hosts}: its folder does not exist",
                "create the folder, or point --known-hosts at a file in an existing one",
            )

    @property
    def host(self) -> str:
        return self.destination.split("@")[-1]

    def ssh_argv(self, remote_command: str) -> list[str]:
        ssh = shutil.which("ssh")
        if ssh is None:
            raise MissingDependencyError(
                "no ssh client on PATH", "install OpenSSH's client: apt-get install openssh-client"
            )
        argv = [
            ssh,
            "-T",
            "-o",
            "BatchMode=yes",
            "-o",
            f"StrictHostKeyChecking={'accept-new' if self.accept_new_host_key else 'yes'}",
            "-o",
            f"ConnectTimeout={max(1, round(self.connect_timeout))}",
            "-o",
            "ServerAliveInterval=15",
            "-o",
            "ServerAliveCountMax=3",
            "-o",
            "PasswordAuthentication=no",
            "-o",
            "KbdInteractiveAuthentication=no",
            "-o",
            "LogLevel=ERROR",
        ]
        if self.port is not None:
            argv += ["-p", str(self.port)]
        if self.identity is not None:
            # -o IdentityFile, not -i: ssh checks an -i path before expanding its % tokens, so no spelling of a
            # path holding % passes both; the config option is only expanded
            argv += ["-o", f'IdentityFile="{ssh_path(self.identity, "--identity")}"', "-o", "IdentitiesOnly=yes"]
        if self.known_hosts is not None:
            argv += ["-o", f'UserKnownHostsFile="{ssh_path(self.known_hosts, "--known-hosts")}"']
        return argv + ["--", self.destination, remote_command]

    def run(
        self,
        remote_command: str,
        stdin: bytes | Any = b"",
        timeout: float | None = None,
        what: str = "the command",
        max_stdout: int = MAX_STDOUT,
    ) -> subprocess.CompletedProcess:
        """Run a shell command on the target; ssh's own failures (exit 255) raise a one-line DeviceError.

        What the board sends back is bounded: past ``max_stdout`` bytes on stdout or MAX_STDERR on stderr,
        ssh is stopped and a one-line DeviceError says so (a board printing without end would otherwise
        take all the memory here)."""
        timeout = self.timeout if timeout is None else timeout
        argv = self.ssh_argv(remote_command)
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE if isinstance(stdin, bytes) else stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        out, err = _Capture(proc, proc.stdout, max_stdout), _Capture(proc, proc.stderr, MAX_STDERR)
        workers = [out.thread, err.thread]
        if isinstance(stdin, bytes):
            workers.append(_feed(proc.stdin, stdin))
        try:
            returncode = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise RemoteTimeout(
                f"{self.destination}: {what} did not finish within {timeout:g} s",
                f"check that the {self.noun} is up and not overloaded; raise --timeout for large jobs",
            ) from None
        except BaseException:  # Ctrl-C (or SIGTERM, raised like it): ssh goes too, so the remote side sees it
            proc.kill()
            proc.wait()
            raise
        finally:
            for worker in workers:
                worker.join(timeout=5)
        for capture, stream in ((out, "stdout"), (err, "stderr")):
            if capture.overflow:
                raise DeviceError(
                    f"{self.destination}: the {self.noun}'s answer to {what} went past "
                    f"{_size(capture.limit)} on {stream}, so it was stopped",
                    ANSWER_TOO_LONG_HINT if self.noun == "board" else HOST_TOO_LONG_HINT,
                )
        completed = subprocess.CompletedProcess(argv, returncode, bytes(out.data), bytes(err.data))
        if returncode == 255:
            raise explain_ssh_failure(completed.stderr.decode(errors="replace"), self)
        return completed

    def python_command(self, *args: str) -> str:
        """The shell command running the runner's source (sent on stdin) with ``args`` on the target's Python."""
        return " ".join([shlex.quote(self.python), "-c", shlex.quote(_BOOTSTRAP), *map(shlex.quote, args)])


def forget_host_key_command(target: SshTarget) -> str:
    """The ssh-keygen command removing the target's recorded host key (a shell command line).

    known_hosts records a host on port 22 as ``host`` and on any other port as ``[host]:port``, and
    ``ssh-keygen -R`` removes only the entry named exactly so (hashed entries included).
    """
    port = target.port or 22
    name = target.host if port == 22 else f"[{target.host}]:{port}"
    argv = ["ssh-keygen", "-R", name] + (["-f", target.known_hosts] if target.known_hosts else [])
    return " ".join(shlex.quote(a) for a in argv)


def explain_ssh_failure(stderr: str, target: SshTarget) -> DeviceError:
    """What ssh's exit 255 means, as one line with the fix (its stderr, as OpenSSH words it)."""
    text = stderr.strip()
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("@@@")]
    last = lines[-1].strip() if lines else "ssh exited with 255 and said nothing"
    where = f"{target.host} port {target.port or 22}"
    known = target.known_hosts or "~/.ssh/known_hosts"
    if "REMOTE HOST IDENTIFICATION HAS CHANGED" in text or "Host key for" in text and "has changed" in text:
        return DeviceError(
            f"the host key of {where} has CHANGED since it was recorded in {known}: the {target.noun} may "
            "have been reinstalled, or someone may be intercepting the connection",
            f"if you know why it changed, remove the old key with {forget_host_key_command(target)} "
            "and connect again with --accept-new-host-key",
        )
    if "Host key verification failed" in text or "host key is known" in text:
        return DeviceError(
            f"{where} is not in {known}, so its identity cannot be verified",
            "check its host key fingerprint, then rerun with --accept-new-host-key to record it "
            "(or ssh to it once yourself)",
        )
    if "Permission denied" in text or "Too many authentication failures" in text:
        return DeviceError(
            f"{target.destination} refused the login ({last})",
            "pass the right key with --identity KEY or load it into ssh-agent; edgekit never asks "
            "for passwords. "
            + (
                "On a Dev Board, install your key with `mdt pushkey`"
                if target.noun == "board"
                else f"Install your key there with `ssh-copy-id {target.destination}`"
            ),
        )
    unreachable = (
        "Connection refused",
        "timed out",
        "No route to host",
        "Could not resolve hostname",
        "Network is unreachable",
        "Connection closed",
        "Connection reset",
        "kex_exchange_identification",
        "Name or service not known",
        "Temporary failure in name resolution",
    )
    if any(s in text for s in unreachable):
        return DeviceError(
            f"cannot reach {where}: {last}",
            f"check the address, that the {target.noun} is powered and on the network, and that sshd "
            "runs on it (" + ("--port" if target.noun == "board" else "ssh://USER@HOST:PORT") + " for another port)",
        )
    if "Identity file" in text or "Load key" in text:
        return DeviceError(f"ssh could not use the key: {last}", "pass a readable private key with --identity")
    return DeviceError(f"ssh to {where} failed: {last}", "run ssh to it yourself to see more")
