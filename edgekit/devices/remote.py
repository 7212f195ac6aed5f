"""A Coral Dev Board over SSH: deploy a bundle and the board runner, classify there, map the results back.

SSH is the system OpenSSH client (``ssh`` in a subprocess: no new dependency, and the user's
``~/.ssh/config``, agent and keys work as they do in a shell). Every connection is made with
``BatchMode=yes`` (no password or passphrase prompt: key or agent authentication only), host keys
checked against known_hosts (``StrictHostKeyChecking=yes``; ``accept-new`` only with
``--accept-new-host-key``, which still refuses a changed key), and a connect timeout; each remote
command has its own timeout. ssh's failures become one DeviceError line (exit 9) that says which:
unreachable host, unknown or changed host key, refused login.

Nothing but the board's ``python3`` is needed to start: ``probe`` and ``unpack`` are sent to it on
stdin (the runner's own source, then the data), so one connection lists what is there and one
copies what differs (by sha256); the third runs the deployed runner with the images as a tar on
stdin. See :mod:`edgekit.board.runner` for the layout on the board.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from edgekit.board import runner as board_runner
from edgekit.devices import board_protocol
from edgekit.devices.board_protocol import ProbeDocument
from edgekit.errors import Caution, DeviceError, EdgekitError, UsageError
from edgekit.flags import default as _cli
from edgekit.report import SILENT, Reporter
from edgekit.results.benchmark import BenchmarkResult
from edgekit.results.classify import ClassifyResult
from edgekit.results.deploy import DeployResult
from edgekit.results.detect import DetectResult
from edgekit.ssh import (  # noqa: F401 (and
    ANSWER_TOO_LONG_HINT,
    HOST_TOO_LONG_HINT,
    MAX_STDERR,
    MAX_STDOUT,
    RemoteTimeout,  # callers import
    SshTarget,
    explain_ssh_failure,
    forget_host_key_command,
    ssh_path,  # them from here)
)

DEFAULT_PATH = _cli("deploy", "remote_path")  # on the board, relative to the login user's home (--path)
RUNNER_MODULE = "edgekit.board.runner"


def classify_stdout_bound(images: int, k: int | None) -> int:
    """The most a classify document of ``images`` images with ``k`` classes each (None: all) may take: far over
    what the runner writes (about 100 bytes an image and 60 a class), far under what fills a memory."""
    return MAX_STDOUT + images * (4096 + 256 * min(100_000 if k is None else k, 100_000))


def benchmark_stdout_bound(n: int) -> int:
    return MAX_STDOUT + 64 * n


# ------------------------------------------------------------------------------------ bundle
@dataclass
class LocalBundle:
    """A verified bundle folder on this machine: its name and every file (manifest.json included) with its sha256."""

    path: Path
    files: dict[str, str]  # relative posix path -> sha256

    @property
    def name(self) -> str:
        return self.path.resolve().name


def read_bundle(path: str | os.PathLike) -> LocalBundle:
    """Read a bundle and verify every file it lists against its sha256 (InputError, exit 3, when one differs)."""
    from edgekit.board import manifest

    bundle = manifest.load(path)
    bundle.verify_all()
    files = {manifest.MANIFEST_NAME: manifest.sha256_file(bundle.root / manifest.MANIFEST_NAME)}
    files.update({rel: entry.sha256 for rel, entry in bundle.entries.items()})
    return LocalBundle(bundle.root, files)


def runtime_files() -> dict[str, Path]:
    """The runner's files: remote path under the target folder -> local file."""
    root = Path(__file__).resolve().parents[2]
    return {f"runtime/{rel}": root / rel for rel in board_runner.SHIPPED_MODULES}


# ------------------------------------------------------------------------------------ deploy
def _runner_source() -> bytes:
    source = Path(board_runner.__file__).read_bytes()
    return str(len(source)).encode() + b"\n" + source


def _check_python(target: SshTarget, proc: subprocess.CompletedProcess) -> ProbeDocument:
    """The probe's JSON, or the DeviceError for a target whose Python cannot run the runner."""
    err = proc.stderr.decode(errors="replace").strip()
    last = board_protocol.shown(err.splitlines()[-1])[:300] if err else f"exit {proc.returncode}"
    if proc.returncode in (126, 127):
        raise DeviceError(
            f"{target.destination} has no {target.python} ({last})",
            "install Python 3.7 or newer there (Mendel has python3), or name it with --python",
        )
    if proc.returncode != 0 or not proc.stdout.strip():
        old = "SyntaxError" in err or "invalid syntax" in err
        raise DeviceError(
            f"{target.python} on {target.destination} cannot run edgekit's runner ({last})",
            f"it needs Python {'.'.join(map(str, board_runner.MIN_PYTHON))} or newer; name another one with --python"
            if old
            else "rerun with --debug, or run it there by hand",
        )
    return board_protocol.read_probe(proc.stdout, target.destination, PROBE_MALFORMED_HINT)


def _check_packages(target: SshTarget, facts: ProbeDocument) -> str:
    """The interpreter package the runner will use there, or the DeviceError naming what is missing."""
    py = facts["python"]
    if tuple(int(x) for x in py.split(".")[:2]) < board_runner.MIN_PYTHON:
        raise DeviceError(
            f"{target.python} on {target.destination} is Python {py}; the runner needs 3.7 or newer",
            "name a newer one with --python",
        )
    pk = facts["packages"]
    missing = [name for name, ok in (("numpy", pk["numpy"]), ("Pillow", pk["pillow"])) if not ok]
    interpreter = next((n for n in ("pycoral", "tflite_runtime", "ai_edge_litert") if pk.get(n)), None)
    if interpreter is None:
        missing.append("an interpreter package (pycoral or tflite_runtime)")
    if missing:
        raise DeviceError(
            f"Python {py} on {target.destination} ({facts['executable']}) lacks {', '.join(missing)}",
            "on a Coral Dev Board: sudo apt-get install python3-pycoral, and Pillow with pip; "
            f"elsewhere: {target.python} -m pip install numpy Pillow tflite-runtime",
        )
    version = tuple(int(x) for x in re.findall(r"\d{1,6}", str(pk["pillow"]))[:2])
    if version < board_runner.MIN_PILLOW:
        raise DeviceError(
            f"Pillow {pk['pillow']} on {target.destination} is too old for the runner "
            f"(needs {'.'.join(map(str, board_runner.MIN_PILLOW))} or newer)",
            f"{target.python} -m pip install --user --upgrade pip, then "
            f"{target.python} -m pip install --user 'Pillow>=7,<10'",
        )
    assert interpreter is not None  # else missing named it and the DeviceError above was raised
    return interpreter


def deploy(
    bundle: str | os.PathLike, target: SshTarget, path: str = DEFAULT_PATH, bundle_files: LocalBundle | None = None
) -> DeployResult:
    """Copy the bundle and the runner to ``target:path``, skipping files whose sha256 already matches there.

    Returns the document ``edgekit deploy --json`` prints.
    """
    from edgekit.board import manifest

    local = bundle_files or read_bundle(bundle)
    if not path or path.startswith("-"):
        raise UsageError(f"--path {path!r} is not a folder name", "e.g. --path edgekit (in the login user's home)")
    wanted: dict[str, tuple[Path, str]] = {
        f"bundles/{local.name}/{rel}": (local.path / rel, sha) for rel, sha in local.files.items()
    }
    wanted.update({rel: (file, manifest.sha256_file(file)) for rel, file in runtime_files().items()})
    subdirs = [f"bundles/{local.name}", "runtime"]
    facts = _check_python(
        target,
        target.run(target.python_command("probe", path, *subdirs), _runner_source(), what="listing the target folder"),
    )
    interpreter = _check_packages(target, facts)
    there: dict[str, str] = facts["files"]
    upload = sorted(rel for rel, (_, sha) in wanted.items() if there.get(rel) != sha)
    delete = sorted(
        rel for rel in there if rel not in wanted and rel.startswith(("runtime/edgekit/", f"bundles/{local.name}/"))
    )
    sent = 0
    if upload or delete:
        with tempfile.TemporaryFile() as stdin:
            stdin.write(_runner_source())
            start = stdin.tell()
            with tarfile.open(fileobj=stdin, mode="w") as tar:
                for rel in upload:
                    tar.add(str(wanted[rel][0]), arcname=rel, recursive=False)
            sent = stdin.tell() - start
            stdin.seek(0)
            args = ["unpack", path] + [f"--delete={rel}" for rel in delete]
            proc = target.run(target.python_command(*args), stdin, what="copying the bundle")
        if proc.returncode != 0:
            said = board_protocol.read_error(proc.stdout)
            err = proc.stderr.decode(errors="replace").strip().splitlines()
            why = said.message if said else board_protocol.shown(err[-1])[:300] if err else proc.returncode
            raise DeviceError(
                f"copying to {target.destination}:{path} failed ({why})",
                "check the free space and permissions of --path there",
            )
    return DeployResult(
        target.destination,
        path,
        f"{path}/bundles/{local.name}",
        facts["python"],
        interpreter,
        tuple(upload),
        tuple(delete),
        len(wanted) - len(upload),
        sent,
    )


# ------------------------------------------------------------------------------------ classify
#: What to do about a malformed answer to the listing (probe), whose runner source this edgekit sends itself.
PROBE_MALFORMED_HINT = (
    "edgekit sends the runner itself for this step, so something else answered: check that "
    "--python names a Python on the board, and make its login scripts quiet for non-interactive "
    "shells"
)
#: ... and to classify or benchmark, which run the runner deployed there.
RUNNER_MALFORMED_HINT = (
    "deploy the bundle again (edgekit deploy BUNDLE --to USER@HOST) so the board runs this "
    "edgekit's runner, and check which edgekit version deployed it; make the board's login "
    "scripts quiet for non-interactive shells"
)
# The runner's errors by exit code: the class here, and what to do when the runner gave no hint of its own.
_BOARD_HINTS = {
    2: "the board's runner refused its arguments: it may be from another edgekit version; deploy the bundle again",
    3: "a file on the board is not what the runner can read: deploy the bundle again (edgekit deploy), and check "
    "the images",
    4: "install what is missing on the board: on a Coral Dev Board sudo apt-get install python3-pycoral, and "
    "Pillow with pip",
    9: "check the Edge TPU and its runtime on the board (lsusb, ls /dev/apex_*), or run there with -d cpu",
}


def _clip(text: str, limit: int = 2000) -> str:
    """A board's message cut to a length one line of a terminal can carry (the runner's are far shorter)."""
    return text if len(text) <= limit else text[:limit] + "..."


def _runner_failure(target: SshTarget, proc: subprocess.CompletedProcess) -> EdgekitError:
    """The runner's own error (its error document, else its ``error: ...`` line) with its exit code and a hint
    (its own, else one for its exit code), or a DeviceError with the last line it wrote."""
    said = board_protocol.read_error(proc.stdout)
    if said is not None:
        return type(said)(
            f"on {target.destination}: {_clip(said.message)}",
            _clip(said.hint) if said.hint else _BOARD_HINTS[said.exit_code],
        )
    lines = [board_protocol.shown(line) for line in proc.stderr.decode(errors="replace").strip().splitlines()]
    line = next((line[len("error: ") :] for line in reversed(lines) if line.startswith("error: ")), None)
    if line is None:
        last = _clip(lines[-1]) if lines else f"exit {proc.returncode}"
        return DeviceError(
            f"the runner failed on {target.destination}: {last}",
            "deploy the bundle again (edgekit deploy); rerun with --debug",
        )
    kind = board_protocol.RUNNER_ERRORS.get(proc.returncode, DeviceError)
    return kind(f"on {target.destination}: {_clip(line)}", _BOARD_HINTS[kind.exit_code])


def _notes_from(stderr: bytes) -> list[str]:
    """The runner's ``note: `` and ``warning: `` lines (its stderr protocol) as kept messages: notes, and
    :class:`~edgekit.errors.Caution` for warnings (control characters escaped: the board's text)."""
    lines = [board_protocol.shown(line) for line in stderr.decode(errors="replace").splitlines()]
    return [
        line[len("note: ") :] if line.startswith("note: ") else Caution(line[len("warning: ") :])
        for line in lines
        if line.startswith(("note: ", "warning: "))
    ]


def _shell_path(path: str) -> str:
    """``path`` quoted for the target's shell, a leading ``~/`` left for it to expand (as the runner's own commands do)."""
    return "~/" + shlex.quote(path[2:]) if path.startswith("~/") else shlex.quote(path)


def _device_arg(device: str) -> str:
    """``--device`` in pycoral's grammar (parsed here, once) → the runner's: auto, cpu or the delegate's option."""
    from edgekit.board.backends import parse_device

    spec = parse_device(device)
    return spec.kind if spec.kind in ("auto", "cpu") else str(spec.delegate_option)


def _run_runner(
    target: SshTarget,
    path: str,
    bundle_name: str,
    command: str,
    args: list[str],
    stdin: Any,
    what: str,
    report: Reporter,
    read: Callable[[bytes, str, str], board_protocol.Answer],
    max_stdout: int,
) -> board_protocol.Answer:
    """Run the deployed runner's ``command`` on the bundle; its JSON document (checked by ``read(stdout, destination,
    hint)``), named as seen from here."""
    remote = (
        f"cd {_shell_path(path + '/runtime')} && {shlex.quote(target.python)} -m {RUNNER_MODULE} {command} "
        f"--bundle {shlex.quote('../bundles/' + bundle_name)} " + " ".join(map(shlex.quote, args))
    )
    proc = target.run(remote, stdin, what=what, max_stdout=max_stdout)
    for note in _notes_from(proc.stderr):
        report.tell(note)
    if proc.returncode != 0:
        raise _runner_failure(target, proc)
    doc = read(proc.stdout, target.destination, RUNNER_MALFORMED_HINT)
    doc["model"] = f"{target.destination}:{path}/bundles/{bundle_name}/{PurePosixPath(doc['model']).name}"
    doc["device"] = f"{doc['device']} on {target.destination}"
    return doc


def classify(
    images: list[str],
    bundle: str | os.PathLike,
    target: SshTarget,
    *,
    path: str = DEFAULT_PATH,
    device: str = _cli("classify", "device"),
    k: int | None = _cli("classify", "top_k"),
    threshold: float = _cli("classify", "threshold"),
    mean: tuple[float, ...] | None = None,
    std: tuple[float, ...] | None = None,
    report: Reporter = SILENT,
) -> ClassifyResult:
    """Deploy when needed, send the images, classify them on the target: what ``edgekit classify --json`` prints
    (the board's document, checked by :func:`board_protocol.read_classify`, read back into the one record).

    ``report`` is told what was deployed and what the runner said (where the model runs and why).

    ``images`` are expanded here as ``edgekit classify`` does (files, folders, globs); results name
    them as given; ``model`` and ``device`` name the target (``user@host:...``, ``... on user@host``).
    """
    args = ["--device", _device_arg(device), "--top-k", "all" if k is None else str(k), f"--threshold={threshold}"]
    return ClassifyResult.from_dict(
        _send_images(
            images,
            bundle,
            target,
            path,
            "classify",
            args,
            mean,
            std,
            "classifying",
            report,
            lambda data, dest, hint, sent: board_protocol.read_classify(data, dest, hint, sent, k),
            lambda n: classify_stdout_bound(n, k),
        )
    )


def _send_images(
    images: list[str],
    bundle: str | os.PathLike,
    target: SshTarget,
    path: str,
    command: str,
    args: list[str],
    mean: tuple[float, ...] | None,
    std: tuple[float, ...] | None,
    label: str,
    report: Reporter,
    read: Callable[[bytes, str, str, set], board_protocol.Answer],
    stdout_bound: Callable[[int], int],
) -> board_protocol.Answer:
    """classify's and detect's shared protocol: expand, deploy, send the images as a tar, rename the results.

    ``read(stdout, destination, hint, sent)`` checks the runner's document; ``stdout_bound(images)`` bounds it."""
    from edgekit.data.images import expand_images

    args = args + ["--images-tar", "-"]
    if mean is not None:
        args += ["--mean", ",".join(map(repr, mean))]
    if std is not None:
        args += ["--std", ",".join(map(repr, std))]
    paths, errors = expand_images(images)
    local = read_bundle(bundle)
    report.note(deploy(bundle, target, path, local).render_text())
    names = [f"{i:06d}{Path(p).suffix.lower()}" for i, p in enumerate(paths)]
    with tempfile.TemporaryFile() as tar_file:
        with tarfile.open(fileobj=tar_file, mode="w") as tar:
            for name, p in zip(names, paths):
                try:
                    tar.add(p, arcname=name, recursive=False)
                except OSError as exc:  # unreadable here: reported like classify reports it
                    errors.append({"image": p, "error": f"{p}: cannot read ({exc.strerror or exc})"})
        tar_file.seek(0)
        sent = set(names)
        doc = _run_runner(
            target,
            path,
            local.name,
            command,
            args,
            tar_file,
            label,
            report,
            lambda data, dest, hint: read(data, dest, hint, sent),
            stdout_bound(len(names)),
        )
    local_name = dict(zip(names, paths))
    for entry in doc["results"] + doc["errors"]:
        sent_name = entry["image"]
        entry["image"] = local_name.get(sent_name, sent_name)
        if "error" in entry:
            entry["error"] = entry["error"].replace(sent_name, entry["image"])
    doc["errors"] = errors + doc["errors"]
    return doc


def detect(
    images: list[str],
    bundle: str | os.PathLike,
    target: SshTarget,
    *,
    path: str = DEFAULT_PATH,
    device: str = _cli("detect", "device"),
    conf: float = _cli("detect", "conf"),
    iou: float = _cli("detect", "iou"),
    max_det: int = _cli("detect", "max_det"),
    layout: str | None = None,
    mean: tuple[float, ...] | None = None,
    std: tuple[float, ...] | None = None,
    report: Reporter = SILENT,
) -> DetectResult:
    """Deploy when needed, send the images, detect on the target: what ``edgekit detect --json`` prints.

    The layout is read here, from the bundle's own model file (``layout``: the ``--layout`` name), and sent
    to the runner, which has no model reader; the rest is :func:`classify`'s protocol.
    """
    import json

    from edgekit.board import manifest
    from edgekit.detection.layout import find_layout

    local_bundle = manifest.load(bundle)
    found = find_layout(
        local_bundle.verified(local_bundle.cpu_model), layout, record_labels=_bundle_labels(local_bundle)
    )
    report.note(f"layout {found.describe()}: " + "; ".join(found.source))
    sent_layout = json.dumps(found.to_dict())
    args = [
        "--device",
        _device_arg(device),
        f"--conf={conf!r}",
        f"--iou={iou!r}",
        f"--max-det={max_det}",
        "--layout-json",
        sent_layout,
    ]
    asked = board_protocol.DetectAsked(conf, iou, max_det, json.loads(sent_layout))
    return DetectResult.from_dict(
        _send_images(
            images,
            bundle,
            target,
            path,
            "detect",
            args,
            mean,
            std,
            "detecting",
            report,
            lambda data, dest, hint, sent: board_protocol.read_detect(data, dest, hint, sent, asked),
            lambda n: classify_stdout_bound(n, max_det),
        )
    )


def _bundle_labels(bundle: Any) -> list[str] | None:
    if not bundle.labels:
        return None
    from edgekit.board.classes import read_labels

    labels = read_labels(bundle.verified(bundle.labels))
    return [labels[k] for k in sorted(labels)]


def benchmark(
    bundle: str | os.PathLike,
    target: SshTarget,
    *,
    path: str = DEFAULT_PATH,
    device: str = _cli("benchmark", "device"),
    n: int = _cli("benchmark", "n"),
    warmup: int = _cli("benchmark", "warmup"),
    threads: int | None = None,
    report: Reporter = SILENT,
) -> BenchmarkResult:
    """Deploy when needed and time the bundle's model on the target: ``edgekit benchmark``'s record, read from the
    board's document (``report`` is told what was deployed)."""
    args = ["--device", _device_arg(device), "-n", str(n), "--warmup", str(warmup)]
    if threads is not None:
        args += ["--threads", str(threads)]
    local = read_bundle(bundle)
    report.note(deploy(bundle, target, path, local).render_text())
    return BenchmarkResult.from_dict(
        _run_runner(
            target,
            path,
            local.name,
            "benchmark",
            args,
            b"",
            "benchmarking",
            SILENT,
            lambda data, dest, hint: board_protocol.read_benchmark(data, dest, hint, n, warmup),
            benchmark_stdout_bound(n),
        )
    )
