"""How fast does `edgekit --help` answer? Prints times and a ratio measured in this run; writes
benchmarks/out/help_speed.json.

Baseline: a bare `python -c pass` (interpreter start alone), measured in the same run. Goal: --help
costs at most 0.3 s more than the interpreter start (it imports click and edgekit's CLI only, never
TensorFlow). Was a timed test (tests/test_cli.py), which a shared 2-core machine can fail at random.
Exit code 1 when the goal is not met.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.timing import best_of

GOAL_EXTRA_S = 0.3


def main() -> int:
    def run(*args: str) -> None:
        subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, check=True)

    bare = best_of(lambda: run("-c", "pass"), repeat=5)
    help_ = best_of(lambda: run("-m", "edgekit", "--help"), repeat=5)
    extra = help_ - bare
    doc = {
        "python_start_s": bare,
        "help_s": help_,
        "extra_s": extra,
        "ratio": help_ / bare,
        "goal_extra_s": GOAL_EXTRA_S,
        "met": extra <= GOAL_EXTRA_S,
    }
    print(
        f"python start {bare:.3f} s; edgekit --help {help_:.3f} s ({help_ / bare:.1f}x); "
        f"extra {extra:.3f} s (goal <= {GOAL_EXTRA_S} s): {'met' if doc['met'] else 'NOT met'}"
    )
    out = REPO / "benchmarks" / "out"
    out.mkdir(exist_ok=True)
    (out / "help_speed.json").write_text(json.dumps(doc, indent=2))
    return 0 if doc["met"] else 1


if __name__ == "__main__":
    sys.exit(main())
