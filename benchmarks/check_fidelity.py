"""How often does `edgekit check` agree with the real edgetpu_compiler? Prints agreement on compiled pairs.

The scoring (op placement per op type, verdicts, the -a and -m each pair was compiled with) is
:mod:`edgekit.edgetpu.fidelity`, which the regression table in the tests uses too.

    python benchmarks/check_fidelity.py [FOLDER ...] [--json] [--default-flags]
    python benchmarks/check_fidelity.py --ledger [--json] [--default-flags]

Default folders: ../shared/testdata and ../shared/testdata/pairs. ``--ledger`` scores the evidence ledger
(tests/fixtures/evidence) instead, and reports agreement and verdicts on each of its parts: the fitting
pairs rules may cite, and the validation pairs no rule cites (split by a seeded hash of the repository
name, :func:`edgekit.edgetpu.fidelity.ledger_part`). Exit code 1 when no pair is found.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from edgekit.edgetpu.fidelity import (
    find_pairs,
    format_parts,
    format_rows,
    score_ledger,
    score_pair,
    summarize,
    summarize_parts,
)

LEDGER = REPO / "tests" / "fixtures" / "evidence"

DEFAULT_FOLDERS = [REPO.parent / "shared" / "testdata", REPO.parent / "shared" / "testdata" / "pairs"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="*", type=Path, help="folders holding X.tflite + X_edgetpu.tflite pairs")
    ap.add_argument("--json", action="store_true", help="print JSON instead of the table")
    ap.add_argument(
        "--default-flags",
        action="store_true",
        help="check every pair as a default compile (do not infer -a from the compiled file)",
    )
    ap.add_argument("--ledger", action="store_true", help="score the evidence ledger, part by part")
    args = ap.parse_args(argv)
    if args.ledger:
        rows = score_ledger(LEDGER, not args.default_flags)
        if args.json:
            print(json.dumps({"parts": summarize_parts(rows), "summary": summarize(rows), "pairs": rows}, indent=1))
        else:
            print(format_rows(rows) + "\n" + format_parts(rows))
        return 0 if rows else 1
    pairs = find_pairs(args.folders or DEFAULT_FOLDERS)
    if not pairs:
        print(
            "error: no compiled pairs (X.tflite beside X_edgetpu.tflite) found (give folders holding them)",
            file=sys.stderr,
        )
        return 1
    rows = [score_pair(c, e, not args.default_flags) for c, e in pairs]
    print(json.dumps({"summary": summarize(rows), "pairs": rows}, indent=1) if args.json else format_rows(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
