"""Where ``edgetpu_compiler`` is and which version it is, for ``compile`` and ``doctor`` alike.

Light on purpose (no TensorFlow, nothing from ``edgekit.converters``), so that ``doctor`` can use it
on a Coral board. Running the compiler and reading its output live in
``edgekit.edgetpu.compiler``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from edgekit.errors import MissingDependencyError

ENV_VAR = "EDGETPU_COMPILER"
# Coral's apt source in the signed-by form (apt-key is gone from Debian 13): one keyring path and one list file
# for compile's install hint, doctor's apt-source fix and the --via docker image's recipe (compiler_image/
# Dockerfile; tests/test_compile_via.py checks that it uses these).
CORAL_KEYRING = "/etc/apt/keyrings/coral-edgetpu.gpg"
CORAL_LIST = "/etc/apt/sources.list.d/coral-edgetpu.list"
CORAL_APT_SETUP = (
    "sudo install -d -m 0755 /etc/apt/keyrings && "
    "curl -fsSL https://packages.cloud.google.com/apt/doc/apt-key.gpg "
    f"| sudo gpg --dearmor --yes -o {CORAL_KEYRING} && "
    f"echo 'deb [signed-by={CORAL_KEYRING}] https://packages.cloud.google.com/apt coral-edgetpu-stable main' "
    f"| sudo tee {CORAL_LIST} && sudo apt-get update"
)
INSTALL_HINT = (
    f"on Debian/Ubuntu x86-64: {CORAL_APT_SETUP} && sudo apt-get install edgetpu-compiler; "
    "or set EDGETPU_COMPILER=/path/to/edgetpu_compiler"
)
OTHER_PLATFORM_HINT = (
    "edgetpu_compiler is built only for x86-64 Linux: compile through one with `edgekit compile MODEL --via "
    "ssh://USER@HOST` (an x86-64 Linux machine with the compiler) or `--via docker` (an emulated x86-64 "
    "container), or run `edgekit compile` in an x86-64 Debian/Ubuntu machine, container or VM, or in Coral's "
    "Colab notebook "
    "(https://colab.research.google.com/github/google-coral/tutorials/blob/master/compile_for_edgetpu.ipynb)"
)
# Compiler major version → the Edge TPU runtime its models need by default (coral.ai
# "compiler-and-runtime-versions"; ../shared/reference/edgetpu.md §2.3).
COMPILER_MIN_RUNTIME = {16: 14, 15: 13, 14: 13, 2: 13, 1: 10}
# Its evidence (references as in edgekit.edgetpu.compatibility): Coral's table, and a compiler 15
# log refusing TRANSPOSE, a runtime-14 op, as "Operation not supported".
COMPILER_MIN_RUNTIME_EVIDENCE = ("report:coral-compiler-runtime-versions", "log:v15_partial_yolov5s_stdout.txt")

_VERSION = re.compile(r"Edge TPU Compiler version (\S+)")


def platform_supported() -> bool:
    """edgetpu_compiler is built for x86-64 Linux only."""
    import platform

    return platform.system() == "Linux" and platform.machine().lower() in ("x86_64", "amd64")


def find_compiler(env: Mapping[str, str] | None = None) -> str | None:
    """Path of the compiler: ``$EDGETPU_COMPILER`` (a path or a command name), else ``edgetpu_compiler`` on PATH.

    Raises MissingDependencyError when ``EDGETPU_COMPILER`` is set but names no executable.
    """
    import shutil

    env = os.environ if env is None else env
    named = env.get(ENV_VAR)
    if named:
        found = shutil.which(named, path=env.get("PATH"))
        if not found:
            raise MissingDependencyError(
                f"{ENV_VAR}={named} is not an executable file",
                f"point {ENV_VAR} at edgetpu_compiler, or unset it to search PATH",
            )
        return found
    return shutil.which("edgetpu_compiler", path=env.get("PATH"))


def parse_version(text: str) -> str | None:
    """``"16.0.384591198"`` from ``edgetpu_compiler --version`` (or any of its outputs)."""
    m = _VERSION.search(text)
    return m.group(1) if m else None


VERSION_TIMEOUT_S = 10.0  # `edgetpu_compiler --version` answers at once; a hang is a broken install
NOT_COMPILER_HINT = f"point {ENV_VAR} (or PATH) at Coral's edgetpu_compiler, and check that it runs here (x86-64 Linux)"


def version_from_output(exe: str, returncode: int, text: str) -> str:
    """The version ``exe --version`` printed, or MissingDependencyError, one line, saying what it printed."""
    version = parse_version(text)
    if version:
        return version
    lines = text.strip().splitlines()
    said = repr(lines[0].strip()[:80]) if lines else "nothing"
    raise MissingDependencyError(
        f"{exe} is not a working edgetpu_compiler: `--version` exited {returncode} and printed {said}, not a version",
        NOT_COMPILER_HINT,
    )


def probe_version(exe: str, timeout: float = VERSION_TIMEOUT_S) -> str:
    """Run ``exe --version`` (with a timeout) and return the version; MissingDependencyError when it cannot.

    It runs in a process group of its own, killed whole on timeout: a hung program's children would
    otherwise live on (and hold its output pipes open, so the wait would never end either).
    """
    import os
    import signal
    import subprocess

    try:
        proc = subprocess.Popen(
            [exe, "--version"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as exc:
        raise MissingDependencyError(f"{exe} cannot run: {exc.strerror or exc}", NOT_COMPILER_HINT) from None
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            proc.kill()
        proc.communicate()
        raise MissingDependencyError(
            f"{exe} --version did not answer within {timeout:g} s", NOT_COMPILER_HINT
        ) from None
    return version_from_output(exe, proc.returncode, out + err)


def version_major(version: str | None) -> int | None:
    try:
        return int(version.split(".")[0]) if version else None
    except ValueError:
        return None


def default_min_runtime(version: str | None) -> int | None:
    """The Edge TPU runtime a compiler of this version targets unless told ``-m``."""
    return COMPILER_MIN_RUNTIME.get(version_major(version) or -1)
