"""The child process of :mod:`edgekit.devices.delegate_probe`: open a model on the Edge TPU exactly as edgekit
does, and invoke it once; its exit status (or the signal that killed it) is the verdict.

A module of its own so that the probe, which the runtime core (:mod:`edgekit.devices.backends`) calls,
never imports the core back. Stdlib only besides the core; Python 3.7 compatible (shipped to boards).
"""

import sys
from typing import List


def _child(argv: List[str]) -> int:
    """Open the model with the delegate exactly as edgekit does, and invoke it once."""
    backend_name, library, model_path, option = argv
    from edgekit.devices import backends

    backend = backends.select_backend(backend_name)
    spec = backends.parse_device(option or "auto")
    if spec.kind == "auto":
        spec = backends.DeviceSpec("any")
    interpreter = backends.edgetpu_interpreter(backend, model_path, spec, 1, library=library)
    interpreter.invoke()
    return 0


if __name__ == "__main__":  # pragma: no cover - runs in the child; its exit status is the verdict
    try:
        sys.exit(_child(sys.argv[1:]))
    except Exception as exc:  # an ordinary failure: one line, a non-zero exit
        sys.stderr.write("{}: {}\n".format(type(exc).__name__, str(exc).splitlines()[0] if str(exc) else ""))
        sys.exit(1)
