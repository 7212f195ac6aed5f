"""mypy over edgekit/ (the config is pyproject's [tool.mypy]), held to a per-module baseline of known errors.

A module with more errors than tests/fixtures/mypy_baseline.json allows fails the run, printing its errors; a module
with fewer prints a note to lower the baseline. Regenerate the file (after fixing errors, or after moving modules)
with ``python tests/test_types.py --update``. The goal is an empty baseline: the TypedDicts then mean something.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import warnings
from collections import Counter
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BASELINE = REPO / "tests" / "fixtures" / "mypy_baseline.json"
_ERROR = re.compile(r"^(?P<path>[^:\s]+\.py):\d+: error: ")


def _mypy() -> str | None:
    """The mypy beside this Python (the test extra installs it), or on PATH; None where there is none."""
    exe = Path(sys.executable).with_name("mypy")
    return str(exe) if exe.is_file() else shutil.which("mypy")


def run_mypy(exe: str) -> tuple[Counter[str], list[str]]:
    """mypy's error lines over the configured files, and their count per module path."""
    proc = subprocess.run(
        [exe, "--no-incremental", "--cache-dir", "/dev/null", "--no-pretty"], cwd=REPO, capture_output=True, text=True
    )
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"mypy could not run (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}")
    lines = [line for line in proc.stdout.splitlines() if _ERROR.match(line)]
    return Counter(_ERROR.match(line)["path"] for line in lines), lines


def compare(counts: Counter[str], baseline: dict[str, int]) -> tuple[list[str], list[str]]:
    """The modules over their baseline (failures) and under it (notes), as readable lines."""
    worse = [
        f"{path}: {n} mypy errors, baseline {baseline.get(path, 0)}"
        for path, n in sorted(counts.items())
        if n > baseline.get(path, 0)
    ]
    better = [
        f"{path}: {counts.get(path, 0)} mypy errors, baseline {n}"
        for path, n in sorted(baseline.items())
        if counts.get(path, 0) < n
    ]
    return worse, better


def test_compare_fails_a_new_error_and_notes_a_fixed_one():
    worse, better = compare(Counter({"a.py": 2, "b.py": 1}), {"a.py": 2, "c.py": 3})
    assert worse == ["b.py: 1 mypy errors, baseline 0"]
    assert better == ["c.py: 0 mypy errors, baseline 3"]


def test_mypy_finds_no_error_beyond_the_baseline():
    exe = _mypy()
    if exe is None:
        pytest.skip("mypy is not installed (pip install '.[test]')")
    counts, lines = run_mypy(exe)
    worse, better = compare(counts, json.loads(BASELINE.read_text()))
    if better:
        warnings.warn(
            "fewer mypy errors than the baseline; lower it (python tests/test_types.py --update):\n"
            + "\n".join(better),
            stacklevel=1,
        )
    shown = [line for line in lines if any(line.startswith(w.split(":")[0] + ":") for w in worse)]
    assert not worse, "new mypy errors (fix them; see tests/test_types.py):\n" + "\n".join(worse + [""] + shown)


if __name__ == "__main__" and sys.argv[1:] == ["--update"]:
    found, _ = run_mypy(_mypy() or "mypy")
    BASELINE.write_text(json.dumps(dict(sorted(found.items())), indent=1) + "\n")
    print(f"{BASELINE.relative_to(REPO)}: {sum(found.values())} errors in {len(found)} modules")
