"""The child process of :mod:`edgekit.board.delegate_probe`: open a model on the Edge TPU exactly as edgekit
does, and invoke it once; its exit status (or the signal that killed it) is the verdict.

A module of its own so that the probe, which the runtime core (:mod:`edgekit.board.backends`) calls,
never imports the core back. Stdlib only besides the core; Python 3.7 compatible (shipped to boards).
"""

import sys
from typing import List

from edgekit.board.delegate_probe import CHILD_ORDINARY_FAILURE, CHILD_SETUP_FAILURE


def main(argv: List[str]) -> None:  # pragma: no cover - runs in the child; its exit status is the verdict
    """In the test process: open the model with the delegate exactly as edgekit does, and invoke it once."""
    try:
        backend_name, library, model_path, option = argv
        from edgekit.board import backends

        backend = backends.select_backend(backend_name)
        spec = backends.parse_device(option or "auto")
        if spec.kind == "auto":
            spec = backends.DeviceSpec("any")
    except Exception as exc:
        sys.stderr.write(f"cannot set up the test: {type(exc).__name__}: {_first(exc)}\n")
        sys.exit(CHILD_SETUP_FAILURE)
    try:
        interpreter = backends.edgetpu_interpreter(backend, model_path, spec, 1, library=library)
        interpreter.invoke()
    except Exception as exc:  # an ordinary failure: one line, its own exit code
        sys.stderr.write(f"{type(exc).__name__}: {_first(exc)}\n")
        sys.exit(CHILD_ORDINARY_FAILURE)
    sys.exit(0)


def _first(exc: BaseException) -> str:
    text = str(exc)
    return text.splitlines()[0] if text else ""
